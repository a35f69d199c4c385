package gate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// TestSUCJobForged: a Job the gate would read as SUC's upgrade of a node
// (SUC's labels, a SUC namespace) is created, relabelled or started by SUC
// only; the neighbouring safe cases (SUC's own writes, a person's Job
// without SUC's labels or outside SUC's namespaces, a write that changes
// neither labels nor start) are allowed.
func TestSUCJobForged(t *testing.T) {
	one, zero := int32(1), int32(0)
	job := func(ns string, parallelism *int32, labels map[string]string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "apply-gpu-canary-on-gpu-v100-01-with-9e1b", Labels: labels},
			Spec: batchv1.JobSpec{Parallelism: parallelism}}
	}
	sucLabels := map[string]string{upgradev1.LabelPlan: "gpu-canary", upgradev1.LabelNode: "gpu-v100-01"}
	alice := UserInfo{Name: "alice", Groups: []string{"platform-admins", "system:authenticated"}}
	relabelled := job("system-upgrade", &zero, map[string]string{"team": "ml"})
	cases := []struct {
		name string
		req  SUCJobWriteRequest
		want bool // refused
	}{
		{name: "a person creates a running Job with SUC's labels", req: SUCJobWriteRequest{Operation: OpCreate, Job: job("system-upgrade", &one, sucLabels), User: alice}, want: true},
		{name: "a person creates a paused one", req: SUCJobWriteRequest{Operation: OpCreate, Job: job("system-upgrade", &zero, sucLabels), User: alice}, want: true},
		{name: "only the node label", req: SUCJobWriteRequest{Operation: OpCreate, Job: job("system-upgrade", &zero, map[string]string{upgradev1.LabelNode: "gpu-v100-01"}), User: alice}, want: true},
		{name: "a person labels their Job as SUC's", req: SUCJobWriteRequest{Operation: OpUpdate, Old: relabelled, Job: job("system-upgrade", &zero, sucLabels), User: alice}, want: true},
		{name: "a person strips SUC's labels from its Job", req: SUCJobWriteRequest{Operation: OpUpdate, Old: job("system-upgrade", &one, sucLabels), Job: relabelled, User: alice}, want: true},
		{name: "a person starts SUC's paused Job", req: SUCJobWriteRequest{Operation: OpUpdate, Old: job("system-upgrade", &zero, sucLabels), Job: job("system-upgrade", &one, sucLabels), User: alice}, want: true},
		{name: "safe: SUC creates its Job", req: SUCJobWriteRequest{Operation: OpCreate, Job: job("system-upgrade", &zero, sucLabels), User: sucUser}},
		{name: "safe: SUC starts its Job", req: SUCJobWriteRequest{Operation: OpUpdate, Old: job("system-upgrade", &zero, sucLabels), Job: job("system-upgrade", &one, sucLabels), User: sucUser}},
		{name: "safe: a person's Job without SUC's labels", req: SUCJobWriteRequest{Operation: OpCreate, Job: job("system-upgrade", &one, map[string]string{"team": "ml"}), User: alice}},
		{name: "safe: a person's Job with SUC's labels outside SUC's namespaces", req: SUCJobWriteRequest{Operation: OpCreate, Job: job("ml", &one, sucLabels), User: alice}},
		{name: "safe: the garbage collector's write, labels and start unchanged", req: SUCJobWriteRequest{Operation: OpUpdate, Old: job("system-upgrade", &one, sucLabels), Job: job("system-upgrade", &one, sucLabels),
			User: UserInfo{Name: "system:serviceaccount:kube-system:generic-garbage-collector", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideSUCJobWrite(DefaultConfig(), tc.req)
			if !tc.want {
				assert.True(t, d.Allowed, d.Message())
				return
			}
			assert.Equal(t, []Code{CodeSUCJobForged}, d.Codes(), d.Message())
			assert.Contains(t, d.Message(), `is written by "alice", not by SUC`)
			assert.Contains(t, d.Message(), "write a Plan and let SUC create its Job")
		})
	}
}
