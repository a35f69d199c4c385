package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// TestPlanStatusReview: the handler denies a change of status.applying by
// anyone but SUC, allows SUC's and every write that leaves it alone, and
// refuses a review it cannot read.
func TestPlanStatusReview(t *testing.T) {
	s := &Server{Config: gate.DefaultConfig(), Log: logr.Discard()}
	h := s.handlerAt(PathPlanStatus)
	plan := func(applying ...string) *upgradev1.Plan {
		p := &upgradev1.Plan{TypeMeta: metav1.TypeMeta{APIVersion: "upgrade.cattle.io/v1", Kind: "Plan"},
			ObjectMeta: metav1.ObjectMeta{Name: "gpu-canary", Namespace: "system-upgrade"},
			Spec:       upgradev1.PlanSpec{Concurrency: 1, Version: "v1.36.1+rke2r1"}}
		p.Status.Applying = applying
		return p
	}
	alice := authenticationv1.UserInfo{Username: "alice", Groups: []string{"platform-admins"}}
	suc := authenticationv1.UserInfo{Username: "system:serviceaccount:system-upgrade:system-upgrade", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:system-upgrade"}}
	raw := func(o runtime.Object) runtime.RawExtension {
		b, err := json.Marshal(o)
		require.NoError(t, err)
		return runtime.RawExtension{Raw: b}
	}
	cases := []struct {
		name        string
		user        authenticationv1.UserInfo
		subresource string
		old, obj    runtime.Object
		allowed     bool
		code        int32
		inMessage   string
	}{
		{name: "a person clears applying", user: alice, subresource: "status", old: plan("gpu-v100-01"), obj: plan(), code: http.StatusForbidden,
			inMessage: `[PlanStatusForged] user "alice" changes status.applying from [gpu-v100-01] to []`},
		{name: "SUC clears applying", user: suc, subresource: "status", old: plan("gpu-v100-01"), obj: plan(), allowed: true},
		{name: "a person's write that leaves applying alone", user: alice, subresource: "status", old: plan("gpu-v100-01"), obj: plan("gpu-v100-01"), allowed: true},
		{name: "another subresource", user: alice, subresource: "scale", old: plan("gpu-v100-01"), obj: plan(), code: http.StatusBadRequest, inMessage: `subresource "scale"`},
		{name: "a body that is not a Plan", user: alice, subresource: "status", old: plan("gpu-v100-01"), obj: &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}},
			code: http.StatusBadRequest, inMessage: "object:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Update, UserInfo: tc.user,
				Kind:     metav1.GroupVersionKind{Group: "upgrade.cattle.io", Version: "v1", Kind: "Plan"},
				Resource: metav1.GroupVersionResource{Group: "upgrade.cattle.io", Version: "v1", Resource: "plans"}, SubResource: tc.subresource,
				Namespace: "system-upgrade", Name: "gpu-canary", Object: raw(tc.obj), OldObject: raw(tc.old)}}
			resp := h.Handle(context.Background(), req)
			assert.Equal(t, tc.allowed, resp.Allowed, resp.Result)
			if tc.allowed {
				return
			}
			require.NotNil(t, resp.Result)
			assert.Equal(t, tc.code, resp.Result.Code)
			assert.Contains(t, resp.Result.Message, tc.inMessage)
		})
	}
}
