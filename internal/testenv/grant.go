package testenv

import (
	"context"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// WaitGranted waits until the API server's authorizer lets user (in groups)
// do what attrs names. The RBAC authorizer reads Roles and bindings from its
// own informers, so a request made right after the grant was created can
// still be forbidden ("role ... not found"): on a fresh, busy machine that
// lag was seconds. A SubjectAccessReview goes through the same authorizer,
// so once it allows, the request will too.
func (e *Env) WaitGranted(ctx context.Context, user string, groups []string, attrs authorizationv1.ResourceAttributes) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: &attrs}}
		if err := e.Admin.Create(ctx, sar); err != nil {
			return false, err
		}
		last = sar.Status.Reason
		return sar.Status.Allowed, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s to be allowed %s %s/%s in %q: %w (last: %q)", user, attrs.Verb, attrs.Group, attrs.Resource, attrs.Namespace, err, last)
	}
	return nil
}
