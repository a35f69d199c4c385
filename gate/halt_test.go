package gate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// TestDetectHalts: each failure signal of a node that a stored GPU Plan
// moves is found with its value and time; a healthy node, a rollback Plan
// and a node on the source or the target are not halts.
func TestDetectHalts(t *testing.T) {
	failedAt := testNow.Add(-time.Hour)
	cases := []struct {
		name   string
		mutate func(s *scenario, n *corev1.Node)
		want   string // "" = no halt
		at     time.Time
	}{
		{name: "on the source: no halt", mutate: func(*scenario, *corev1.Node) {}},
		{name: "at the target: no halt", mutate: func(_ *scenario, n *corev1.Node) { setTuple(n, tupleTarget) }},
		{name: "SUC Job failed", mutate: func(s *scenario, _ *corev1.Node) {
			j := upgradeJob("gpu-v100-01", batchv1.JobFailed, failedAt)
			j.Status.Conditions[0].Reason = "BackoffLimitExceeded"
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{j}
		}, want: "SUC Job system-upgrade/apply-gpu-v100-canary-on-gpu-v100-01 failed (BackoffLimitExceeded)", at: failedAt},
		{name: "a completed Job is no halt", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{upgradeJob("gpu-v100-01", batchv1.JobComplete, testNow.Add(-10*time.Minute))}
		}},
		{name: "Ready not back within the recovery timeout", mutate: func(s *scenario, n *corev1.Node) {
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{upgradeJob("gpu-v100-01", batchv1.JobComplete, testNow.Add(-2*time.Hour))}
			s.cluster.Proof.Validators = []*corev1.Pod{validatorPod("gpu-v100-01", corev1.ConditionTrue, testNow.Add(-2*time.Hour))}
			n.Status.Conditions[0] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(testNow.Add(-90 * time.Minute))}
		}, want: "node Ready is False since 2026-11-21T10:30:00Z, not back within 1h0m0s", at: testNow.Add(-30 * time.Minute)},
		{name: "Ready down but within the timeout: no halt yet", mutate: func(s *scenario, n *corev1.Node) {
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{upgradeJob("gpu-v100-01", batchv1.JobComplete, testNow.Add(-2*time.Hour))}
			s.cluster.Proof.Validators = []*corev1.Pod{validatorPod("gpu-v100-01", corev1.ConditionTrue, testNow.Add(-2*time.Hour))}
			n.Status.Conditions[0] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(testNow.Add(-59 * time.Minute))}
		}},
		{name: "validator not back within the recovery timeout", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{upgradeJob("gpu-v100-01", batchv1.JobComplete, testNow.Add(-2*time.Hour))}
			s.cluster.Proof.Validators = []*corev1.Pod{validatorPod("gpu-v100-01", corev1.ConditionFalse, testNow.Add(-3*time.Hour))}
		}, want: "validator Pod gpu-operator/nvidia-operator-validator-gpu-v100-01 not Ready since 2026-11-21T10:00:00Z, not back within 1h0m0s", at: testNow.Add(-time.Hour)},
		{name: "no validator Pod within the recovery timeout", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{upgradeJob("gpu-v100-01", batchv1.JobComplete, testNow.Add(-2*time.Hour))}
		}, want: "no validator Pod (app=nvidia-operator-validator) on the node since 2026-11-21T10:00:00Z, not back within 1h0m0s", at: testNow.Add(-time.Hour)},
		{name: "validator switched off: its absence halts nothing", mutate: func(s *scenario, _ *corev1.Node) {
			s.cfg.Proof.Off = []ProofRequirement{ProofValidator}
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{upgradeJob("gpu-v100-01", batchv1.JobComplete, testNow.Add(-2*time.Hour))}
		}},
		{name: "driver upgrade failed", mutate: func(_ *scenario, n *corev1.Node) { n.Labels[LabelDriverUpgradeState] = "upgrade-failed" },
			want: "label nvidia.com/gpu-driver-upgrade-state=upgrade-failed", at: testNow},
		{name: "GPU-health condition", mutate: func(_ *scenario, n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: "GPUXIDErrors", Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(failedAt)})
		}, want: "condition GPUXIDErrors True", at: failedAt},
		{name: "half applied", mutate: func(_ *scenario, n *corev1.Node) {
			half := tupleSource
			half.Kernel = tupleTarget.Kernel
			setTuple(n, half)
		}, want: "tuple half applied: neither the record's source nor its target (rke2 v1.35.3+rke2r3 (want v1.36.1+rke2r1), driver 580.126.20 (want 580.130.00))", at: testNow},
		{name: "half applied while its Job runs: no halt (the upgrade is under way)", mutate: func(s *scenario, n *corev1.Node) {
			half := tupleSource
			half.Kernel = tupleTarget.Kernel
			setTuple(n, half)
			j := upgradeJob("gpu-v100-01", batchv1.JobComplete, failedAt)
			j.Status.Conditions = nil
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{j}
		}},
		{name: "a rollback Plan never halts", mutate: func(s *scenario, n *corev1.Node) {
			n.Labels[LabelDriverUpgradeState] = "upgrade-failed"
			s.req.Plan.Annotations[AnnotationRollback] = "true"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			s.cluster.Plans = []*upgradev1.Plan{s.req.Plan}
			s.req.Plan.Annotations[AnnotationRequestedBy] = "alice"
			tc.mutate(s, s.node("gpu-v100-01"))
			halts := DetectHalts(s.cfg, s.cluster, testNow)
			if tc.want == "" {
				assert.Empty(t, halts)
				return
			}
			require.Len(t, halts, 1)
			h := halts[0]
			assert.Equal(t, tc.want, h.Signal)
			assert.Equal(t, "gpu-v100-01", h.Node)
			assert.Equal(t, tc.at, h.SeenAt)
			assert.Equal(t, "system-upgrade/gpu-v100-canary", h.Plan)
			assert.Equal(t, "v100-r580-canary-1", h.Record)
			assert.Equal(t, "10de_1db6_10de_124a", h.HardwareKey())
			assert.Equal(t, "alice", h.RequestedBy)
		})
	}
}
