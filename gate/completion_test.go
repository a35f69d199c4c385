package gate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// shortScenario: SUC's Job of the canary Plan on gpu-v100-01 completed a
// minute ago, but the node still reports the source tuple (the kubelet,
// NFD and GFD have not moved its facts yet); SUC's completion write
// uncordons it and marks it done.
func shortScenario(t *testing.T) (*scenario, *corev1.Node, *corev1.Node) {
	s, old, n := completionScenario(t)
	setTuple(old, tupleSource)
	setTuple(n, tupleSource)
	s.cluster.Proof.UpgradeJobs = []*batchv1.Job{upgradeJob("gpu-v100-01", batchv1.JobComplete, testNow.Add(-time.Minute))}
	return s, old, n
}

// TestCompletionShortOfDestination: SUC's completion of a GPU Plan on a
// node that does not run the Plan's destination yet is refused, naming each
// component not there with the value seen and the value expected; once the
// facts move, the proof decides.
func TestCompletionShortOfDestination(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(s *scenario, old, n *corev1.Node)
		want   []Code
		msg    []string
		not    string
	}{
		{name: "facts lag: the Job completed, the node still reports the source", want: []Code{CodeUncordonBeforeProof}, msg: []string{
			"[UncordonBeforeProof] SUC completes Plan system-upgrade/gpu-v100-canary on node gpu-v100-01, but the node does not run the destination tuple of record v100-r580-canary-1, so it may not uncordon yet: ",
			"driver 580.126.20 (label nvidia.com/cuda.driver-version.full from GPU Feature Discovery), the record's target is 580.130.00: the node has not reached the target (facts from the kubelet, NFD or GFD may lag; SUC retries on its own)",
			"kernel 6.8.0-134-generic (status.nodeInfo.kernelVersion), the record's target is 6.8.0-135-generic",
		}},
		{name: "a Plan that moved RKE2 only: the kernel and the driver are named, RKE2 is not", mutate: func(_ *scenario, old, n *corev1.Node) {
			for _, x := range []*corev1.Node{old, n} {
				x.Status.NodeInfo.KubeletVersion = tupleTarget.RKE2
			}
		}, want: []Code{CodeUncordonBeforeProof}, msg: []string{"kernel 6.8.0-134-generic", "driver 580.126.20"}, not: "rke2 v1"},
		{name: "the facts moved, not proven yet: the proof decides", mutate: func(_ *scenario, old, n *corev1.Node) {
			setTuple(old, tupleTarget)
			setTuple(n, tupleTarget)
		}, want: []Code{CodeUncordonBeforeProof}, msg: []string{"node gpu-v100-01 runs the destination tuple of Plan system-upgrade/gpu-v100-canary (record v100-r580-canary-1) but is not proven"}},
		{name: "the facts moved and the node is proven: allowed", mutate: func(s *scenario, old, n *corev1.Node) {
			setTuple(old, tupleTarget)
			setTuple(n, tupleTarget)
			s.cluster.Proof.UpgradeJobs = nil // prove's Job completed two hours ago
			prove(s, "gpu-v100-01")
		}},
		{name: "never cordoned: marking done short of the target", mutate: func(_ *scenario, old, n *corev1.Node) {
			old.Spec.Unschedulable, n.Spec.Unschedulable = false, false
		}, want: []Code{CodeUncordonBeforeProof}, msg: []string{"so it may not mark done (plan.upgrade.cattle.io/gpu-v100-canary) yet: kernel"}},
		{name: "uncordon alone (postCompleteDelay) while the gate's cache still sees the Job running", mutate: func(s *scenario, old, n *corev1.Node) {
			n.Labels = old.Labels
			s.cluster.Proof.UpgradeJobs[0].Status.Conditions = nil
		}, want: []Code{CodeUncordonBeforeProof}, msg: []string{"so it may not uncordon yet"}},
		{name: "an uncordon of SUC's with no Job of any Plan for the node completes nothing, but the cordon is not SUC's (issue 22)", mutate: func(s *scenario, old, n *corev1.Node) {
			n.Labels = old.Labels
			s.cluster.Proof.UpgradeJobs = nil
			delete(old.Annotations, AnnotationCordonHandover)
		}, want: []Code{CodeCordonedByOther}, msg: []string{"was cordoned by someone other than SUC"}},
		{name: "the same, handed over: allowed", mutate: func(s *scenario, old, n *corev1.Node) {
			n.Labels = old.Labels
			s.cluster.Proof.UpgradeJobs = nil
			old.Annotations = map[string]string{AnnotationCordonHandover: "dave"}
		}},
		{name: "the Job failed: the halt path holds the node, not this rule", mutate: func(s *scenario, old, n *corev1.Node) {
			n.Labels = old.Labels
			s.cluster.Proof.UpgradeJobs[0] = upgradeJob("gpu-v100-01", batchv1.JobFailed, testNow.Add(-time.Minute))
			halted(s)
		}, want: []Code{CodeRolloutHalted}, not: "SUC completes"},
		{name: "the plan label set to disabled is no completion", mutate: func(_ *scenario, old, n *corev1.Node) {
			n.Spec.Unschedulable = true
			n.Labels[upgradev1.LabelPlanName("gpu-v100-canary")] = upgradev1.LabelPlanValueDisabled
		}},
		{name: "a rollback Plan: its destination is the record's source, the node still runs the target", mutate: func(s *scenario, old, n *corev1.Node) {
			s.req.Plan.Annotations[AnnotationRollback] = "true"
			setTuple(old, tupleTarget)
			setTuple(n, tupleTarget)
		}, want: []Code{CodeUncordonBeforeProof}, msg: []string{"driver 580.130.00 (label nvidia.com/cuda.driver-version.full from GPU Feature Discovery), the record's source is 580.126.20: the node has not reached the source"}},
		{name: "a rollback Plan, the node back on the source and proven: allowed", mutate: func(s *scenario, _, _ *corev1.Node) {
			s.req.Plan.Annotations[AnnotationRollback] = "true"
			s.cluster.Proof.UpgradeJobs = nil
			prove(s, "gpu-v100-01")
		}},
		{name: "another Plan that selects the node is not the one completed", mutate: func(s *scenario, old, n *corev1.Node) {
			setTuple(old, tupleTarget)
			setTuple(n, tupleTarget)
			s.cluster.Proof.UpgradeJobs = nil
			prove(s, "gpu-v100-01")
			s.cluster.Records["v100-next"] = approved(record(func(r *qualification.Record) { r.ID, r.Target.Driver = "v100-next", "580.140.02" }))
			next := canaryPlan("gpu-v100-01")
			next.Name, next.Annotations[AnnotationQualification] = "gpu-v100-next", "v100-next"
			s.cluster.Plans = append(s.cluster.Plans, next)
		}},
		{name: "a Plan without a record the gate can load: the destination is unknown", mutate: func(s *scenario, _, _ *corev1.Node) {
			delete(s.cluster.Records, "v100-r580")
		}, want: []Code{CodeUncordonBeforeProof}, msg: []string{`but the Plan names no record the gate can load (annotation gpu-upgrade-gate.io/qualification="v100-r580"), so the destination of its upgrade is unknown, so it may not uncordon`}},
		{name: "a CPU node completing a CPU Plan: allowed", mutate: func(s *scenario, old, n *corev1.Node) {
			c := cpuNode("gpu-v100-01")
			*old, *n = *c.DeepCopy(), *c.DeepCopy()
			old.Spec.Unschedulable = true
			delete(s.req.Plan.Annotations, AnnotationQualification)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, old, n := shortScenario(t)
			if tc.mutate != nil {
				tc.mutate(s, old, n)
			}
			req := NodeRequest{Node: n, OldNode: old, User: UserInfo{Name: sucUserName}, Now: testNow}
			d := DecideCompletion(s.cfg, s.cluster, req)
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			for _, m := range tc.msg {
				assert.Contains(t, d.Message(), m)
			}
			if tc.not != "" {
				assert.NotContains(t, d.Message(), tc.not)
			}
		})
	}
}

// TestPreviousNodeShortOfDestination: SUC believes a node done once it
// wrote its completion (it edits its cached Node first), so after a refused
// completion it starts the next node's Job. That start waits while a node
// whose Job of the same record completed does not run the destination yet.
func TestPreviousNodeShortOfDestination(t *testing.T) {
	const hash = "0123abcd"
	cases := []struct {
		name   string
		mutate func(s *scenario, job *batchv1.Job)
		want   []Code
		msg    string
	}{
		{name: "gpu-v100-02's Job completed, its facts still say the source", want: []Code{CodePreviousNodeUnproven},
			msg: "[PreviousNodeUnproven] node gpu-v100-02 finished its upgrade Job of Plan system-upgrade/gpu-v100-canary but does not run the destination tuple of record v100-r580-canary-1 yet, so it is not proven: kernel 6.8.0-134-generic (status.nodeInfo.kernelVersion), the record's target is 6.8.0-135-generic"},
		{name: "its facts moved: the proof decides", mutate: func(s *scenario, _ *batchv1.Job) { upgraded(s) }, want: []Code{CodePreviousNodeUnproven},
			msg: "node gpu-v100-02 already runs the destination tuple of record v100-r580-canary-1 but is not proven"},
		{name: "marked done with its Job's hash (SUC's completion passed): allowed", mutate: func(s *scenario, _ *batchv1.Job) {
			s.node("gpu-v100-02").Labels[upgradev1.LabelPlanName("gpu-v100-canary")] = hash
		}},
		{name: "its Job failed: the halt path, not this rule", mutate: func(_ *scenario, j *batchv1.Job) {
			j.Status.Conditions[0].Type = batchv1.JobFailed
		}, want: []Code{CodeRolloutHalted}, msg: "node gpu-v100-02: SUC Job system-upgrade/apply-gpu-v100-canary-on-gpu-v100-02 failed (<none>) (seen 2026-11-21T11:59:00Z, Plan system-upgrade/gpu-v100-canary, record v100-r580-canary-1; seen now, being recorded)"},
		{name: "its Job still runs: the budget's business, not this rule", mutate: func(_ *scenario, j *batchv1.Job) {
			j.Status.Conditions = nil
		}, want: []Code{CodeDisruptionBudgetExceeded}, msg: "gpu-v100-02 (SUC Job system-upgrade/apply-gpu-v100-canary-on-gpu-v100-02 runs for it)"},
		{name: "the Job's Plan was deleted", mutate: func(s *scenario, _ *batchv1.Job) { s.cluster.Plans = nil }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			s.cluster.Plans = []*upgradev1.Plan{canaryPlan("gpu-v100-01", "gpu-v100-02")}
			job := upgradeJob("gpu-v100-02", batchv1.JobComplete, testNow.Add(-time.Minute))
			job.Labels[upgradev1.LabelPlanName("gpu-v100-canary")] = hash
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{job}
			if tc.mutate != nil {
				tc.mutate(s, job)
			}
			d := PrepareNodeStep(s.cfg, s.cluster, s.req, "gpu-v100-01").Decide(nil, nil)
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			assert.Contains(t, d.Message(), tc.msg)
		})
	}
}
