package testenv

import (
	"context"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// WaitBound waits, for every RoleBinding and ClusterRoleBinding among objs,
// until each of its subjects is allowed its role's first rule: the grants a
// test just created, seen by the authorizer before the test acts on them.
func (e *Env) WaitBound(ctx context.Context, objs ...client.Object) error {
	for _, o := range objs {
		var ref rbacv1.RoleRef
		var subjects []rbacv1.Subject
		switch b := o.(type) {
		case *rbacv1.RoleBinding:
			ref, subjects = b.RoleRef, b.Subjects
		case *rbacv1.ClusterRoleBinding:
			ref, subjects = b.RoleRef, b.Subjects
		default:
			continue
		}
		var rules []rbacv1.PolicyRule
		if ref.Kind == "Role" {
			var r rbacv1.Role
			if err := e.Admin.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}, &r); err != nil {
				return err
			}
			rules = r.Rules
		} else {
			var r rbacv1.ClusterRole
			if err := e.Admin.Get(ctx, client.ObjectKey{Name: ref.Name}, &r); err != nil {
				return err
			}
			rules = r.Rules
		}
		if len(rules) == 0 || len(rules[0].Resources) == 0 || len(rules[0].Verbs) == 0 || len(rules[0].APIGroups) == 0 {
			continue
		}
		attrs := authorizationv1.ResourceAttributes{Namespace: o.GetNamespace(), Group: rules[0].APIGroups[0], Resource: rules[0].Resources[0], Verb: rules[0].Verbs[0]}
		if attrs.Verb == "*" {
			attrs.Verb = "get"
		}
		for _, s := range subjects {
			user, groups := "e2e-group-member", []string{s.Name}
			switch s.Kind {
			case rbacv1.UserKind:
				user, groups = s.Name, nil
			case rbacv1.ServiceAccountKind:
				user, groups = serviceaccount.MakeUsername(s.Namespace, s.Name), serviceaccount.MakeGroupNames(s.Namespace)
			}
			if err := e.WaitGranted(ctx, user, append(groups, "system:authenticated"), attrs); err != nil {
				return err
			}
		}
	}
	return nil
}
