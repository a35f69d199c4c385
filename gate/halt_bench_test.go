package gate_test

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/benchcpu"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
)

// BenchmarkDetectHalts is the halt loop's detection over the fleet
// (5,000 nodes, 40 forward GPU Plans of 4 hardware identities): the quiet
// fleet, where every Plan's nodes are looked at and none halts, and one
// where a V100 wave node's SUC Job failed. Decisions run the same detection
// for their own hardware only (BenchmarkPlanDecision includes it).
func BenchmarkDetectHalts(b *testing.B) {
	f := benchFleet()
	now := benchDay.Add(time.Hour)
	quiet := f.Cluster(nil)
	failed := f.Cluster(nil)
	n := f.ByRole("v100", "zone-a", fleetgen.RoleWave1)[0]
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "system-upgrade", Name: "apply-gpu-v100-zone-a-wave-1-on-" + n.Name,
		Labels: map[string]string{upgradev1.LabelNode: n.Name, upgradev1.LabelPlan: "gpu-v100-zone-a-wave-1"}},
		Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}}}
	failed.Proof.UpgradeJobs = append(failed.Proof.UpgradeJobs, job)
	cases := []struct {
		name  string
		cl    *gate.Cluster
		halts int
	}{
		{"quiet", quiet, 0},
		{"failed-job", failed, 1},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			if got := gate.DetectHalts(f.Config, tc.cl, now); len(got) != tc.halts {
				b.Fatalf("%d halts, want %d: %v", len(got), tc.halts, got)
			}
			b.ReportAllocs()
			cpu := benchcpu.Start(b)
			for b.Loop() {
				_ = gate.DetectHalts(f.Config, tc.cl, now)
			}
			cpu.Stop()
		})
	}
}
