package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// liveObjects answers Gets from a map keyed "kind/namespace/name"; anything
// else is NotFound, and "fail" keys fail as an unreachable API server would.
type liveObjects struct {
	client.Reader
	objs map[string]client.Object
	fail map[string]bool
}

func (l liveObjects) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	k := fmt.Sprintf("%T/%s/%s", obj, key.Namespace, key.Name)
	if l.fail[k] {
		return fmt.Errorf("connection refused")
	}
	src, ok := l.objs[k]
	if !ok {
		return apierrors.NewNotFound(upgradev1.SchemeGroupVersion.WithResource("thing").GroupResource(), key.Name)
	}
	data, _ := json.Marshal(src)
	return json.Unmarshal(data, obj)
}

// List finds nothing (no GPU holders), or fails for a "list/<kind>" key.
func (l liveObjects) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	if l.fail[fmt.Sprintf("list/%T", list)] {
		return fmt.Errorf("connection refused")
	}
	return nil
}

func sucJob(parallelism int32, labels map[string]string) *batchv1.Job {
	return &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: "apply-gpu-canary-on-gpu-v100-01-with-abc", Namespace: "system-upgrade", Labels: labels},
		Spec:       batchv1.JobSpec{Parallelism: &parallelism}}
}

// The Job webhook never allows a start it could not judge: every fact it
// cannot read is named in a FactsMissing denial; a write that starts nothing
// is allowed without reading anything.
func TestJobReviewFailsClosed(t *testing.T) {
	labels := map[string]string{upgradev1.LabelPlan: "gpu-canary", upgradev1.LabelNode: "gpu-v100-01"}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-v100-01", Labels: map[string]string{"nvidia.com/gpu.present": "true"}}}
	plan := &upgradev1.Plan{ObjectMeta: metav1.ObjectMeta{Name: "gpu-canary", Namespace: "system-upgrade"}}
	both := map[string]client.Object{"*v1.Node//gpu-v100-01": node, "*v1.Plan/system-upgrade/gpu-canary": plan}
	without := func(key string) map[string]client.Object {
		m := map[string]client.Object{}
		for k, v := range both {
			if k != key {
				m[k] = v
			}
		}
		return m
	}
	cases := []struct {
		name      string
		op        admissionv1.Operation
		old, job  runtime.Object
		objs      map[string]client.Object
		fail      map[string]bool
		allowed   bool
		code      int32
		reason    gate.Code
		inMessage string
	}{
		{name: "SUC's paused create starts nothing", op: admissionv1.Create, job: sucJob(0, labels), allowed: true},
		{name: "a running Job's update starts nothing", op: admissionv1.Update, old: sucJob(1, labels), job: sucJob(1, labels), allowed: true},
		{name: "no node label", op: admissionv1.Update, old: sucJob(0, labels), job: sucJob(1, map[string]string{upgradev1.LabelPlan: "gpu-canary"}), objs: both,
			reason: gate.CodeFactsMissing, inMessage: "[FactsMissing] the Job's node (label upgrade.cattle.io/node) cannot be read (the label is absent or empty)"},
		{name: "the node does not exist", op: admissionv1.Update, old: sucJob(0, labels), job: sucJob(1, labels), objs: without("*v1.Node//gpu-v100-01"),
			reason: gate.CodeFactsMissing, inMessage: `[FactsMissing] the Job's node gpu-v100-01 cannot be read (thing.upgrade.cattle.io "gpu-v100-01" not found)`},
		{name: "the node cannot be read", op: admissionv1.Create, job: sucJob(1, labels), objs: both, fail: map[string]bool{"*v1.Node//gpu-v100-01": true},
			reason: gate.CodeFactsMissing, inMessage: "[FactsMissing] the Job's node gpu-v100-01 cannot be read (connection refused)"},
		{name: "the Plan does not exist", op: admissionv1.Update, old: sucJob(0, labels), job: sucJob(1, labels), objs: without("*v1.Plan/system-upgrade/gpu-canary"),
			reason: gate.CodeFactsMissing, inMessage: "[FactsMissing] the Job's Plan system-upgrade/gpu-canary (for node gpu-v100-01) cannot be read"},
		{name: "no plan label", op: admissionv1.Update, old: sucJob(0, labels), job: sucJob(1, map[string]string{upgradev1.LabelNode: "gpu-v100-01"}), objs: both,
			reason: gate.CodeFactsMissing, inMessage: "the label upgrade.cattle.io/plan is absent or empty"},
		{name: "caches not synced", op: admissionv1.Update, old: sucJob(0, labels), job: sucJob(1, labels), objs: both,
			reason: gate.CodeFactsMissing, inMessage: "informer caches have not synced"},
		{name: "a Pod sent to the Job endpoint", op: admissionv1.Create, job: &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}},
			code: http.StatusBadRequest, reason: gate.CodeReviewInvalid, inMessage: `body is apiVersion "v1" kind "Pod", expected batch/v1 Job`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := gate.DefaultConfig()
			s := &Server{Config: cfg, Facts: &Facts{Config: cfg, Live: liveObjects{objs: tc.objs, fail: tc.fail}}, Log: logr.Discard(),
				Now: func() time.Time { return time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC) }}
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "1", Operation: tc.op, Namespace: "system-upgrade", Name: "apply-x",
				Kind: metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, Resource: metav1.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}}}
			req.Object.Raw, _ = json.Marshal(tc.job)
			if tc.old != nil {
				req.OldObject.Raw, _ = json.Marshal(tc.old)
			}
			resp := s.JobHandler().Handle(context.Background(), req)
			assert.Equal(t, tc.allowed, resp.Allowed, "%+v", resp.Result)
			if tc.allowed {
				return
			}
			require.NotNil(t, resp.Result)
			if tc.code != 0 {
				assert.Equal(t, tc.code, resp.Result.Code)
			}
			assert.Contains(t, resp.Result.Message, tc.inMessage)
			assert.Equal(t, "deny", resp.AuditAnnotations[gate.AuditDecision])
			assert.Equal(t, string(tc.reason), resp.AuditAnnotations[gate.AuditReasons])
		})
	}
}

// TestJobPlanFromEtcd: the Job guard judges the budget on the cache's
// Plans with the Job's own Plan as read from etcd a moment ago in place of
// the cache's older copy (its stored selector dropped, so the engine
// converts this version's), added when the cache did not have it yet, and
// never a Plan outside the SUC namespaces.
func TestJobPlanFromEtcd(t *testing.T) {
	cached := &upgradev1.Plan{ObjectMeta: metav1.ObjectMeta{Namespace: "system-upgrade", Name: "gpu-canary", ResourceVersion: "5"}}
	other := &upgradev1.Plan{ObjectMeta: metav1.ObjectMeta{Namespace: "system-upgrade", Name: "gpu-wave", ResourceVersion: "6"},
		Status: upgradev1.PlanStatus{Applying: []string{"gpu-a100-01"}}}
	sel := &gate.PlanSelector{}
	s := &Server{Config: gate.DefaultConfig()}
	for _, tc := range []struct {
		name      string
		plan      *upgradev1.Plan
		wantPlans int
		wantAt    int
	}{
		{"the cache's copy is replaced", &upgradev1.Plan{ObjectMeta: metav1.ObjectMeta{Namespace: "system-upgrade", Name: "gpu-canary", ResourceVersion: "9"},
			Status: upgradev1.PlanStatus{Applying: []string{"gpu-v100-01"}}}, 2, 0},
		{"a Plan the cache does not have yet is added", &upgradev1.Plan{ObjectMeta: metav1.ObjectMeta{Namespace: "system-upgrade", Name: "gpu-new"}}, 3, 2},
		{"a Plan outside the SUC namespaces is not SUC's", &upgradev1.Plan{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gpu-new"}}, 2, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := &gate.Cluster{Plans: []*upgradev1.Plan{cached, other}, PlanSelectors: []*gate.PlanSelector{sel, sel}}
			s.withPlan(cl, tc.plan)
			require.Len(t, cl.Plans, tc.wantPlans)
			if tc.wantAt >= 0 {
				assert.Same(t, tc.plan, cl.Plans[tc.wantAt])
			}
			if tc.wantAt == 0 {
				assert.Nil(t, cl.PlanSelectors[0], "the cache's selector is of the older version")
			}
			assert.Same(t, other, cl.Plans[1])
			assert.Same(t, sel, cl.PlanSelectors[1])
		})
	}
}
