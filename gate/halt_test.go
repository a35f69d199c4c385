package gate

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// TestHaltsReadOwnValidators: halts read only the validator Pods the
// validator DaemonSet controls by UID (issue 25): a Pod that merely names
// it halts nothing, and with the DaemonSet unreadable (or gone) neither a
// validator nor its absence halts a rollout; the proof says why instead.
func TestHaltsReadOwnValidators(t *testing.T) {
	own := func(ready corev1.ConditionStatus) *corev1.Pod {
		return validatorPod("gpu-v100-01", ready, testNow.Add(-3*time.Hour))
	}
	forged := func() *corev1.Pod {
		p := own(corev1.ConditionFalse)
		p.Name, p.OwnerReferences = "nvidia-operator-validator-forged", []metav1.OwnerReference{validatorDaemonSet}
		p.OwnerReferences[0].UID = "00000000-0000-4000-8000-000000000bad"
		return p
	}
	ds := validatorDaemonSetRead()
	denied := errors.New("daemonsets.apps is forbidden")
	cases := []struct {
		name string
		pods []*corev1.Pod
		ds   *appsv1.DaemonSet
		err  error
		want string // "" = no halt
	}{
		{"the DaemonSet's own Pod not back halts", []*corev1.Pod{own(corev1.ConditionFalse)}, ds, nil,
			"validator Pod gpu-operator/nvidia-operator-validator-gpu-v100-01 not Ready since 2026-11-21T10:00:00Z, not back within 1h0m0s"},
		{"no validator Pod halts", nil, ds, nil, "no validator Pod (app=nvidia-operator-validator) on the node since"},
		{"a Pod naming the DaemonSet with another UID halts nothing", []*corev1.Pod{forged(), own(corev1.ConditionTrue)}, ds, nil, ""},
		{"its own Pod with its image changed in place does not hold off the halt", []*corev1.Pod{withImages(own(corev1.ConditionTrue), "nvidia-operator-validator", "busybox")}, ds, nil,
			"no validator Pod (app=nvidia-operator-validator) on the node since"},
		{"unreadable: a Pod naming the DaemonSet halts nothing", []*corev1.Pod{forged()}, nil, denied, ""},
		{"unreadable: its own Pod not back halts nothing either (whose it is cannot be told)", []*corev1.Pod{own(corev1.ConditionFalse)}, nil, denied, ""},
		{"unreadable: no validator Pod halts nothing", nil, nil, denied, ""},
		{"gone: no validator Pod halts nothing", nil, nil, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			s.cluster.Plans = []*upgradev1.Plan{s.req.Plan}
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{upgradeJob("gpu-v100-01", batchv1.JobComplete, testNow.Add(-2*time.Hour))}
			facts := s.cfg.ProofFactsOf(tc.pods, nil)
			s.cfg.OwnValidators(&facts, tc.ds, tc.err)
			facts.UpgradeJobs = s.cluster.Proof.UpgradeJobs
			s.cluster.Proof = facts
			halts := DetectHalts(s.cfg, s.cluster, testNow)
			if tc.want == "" {
				assert.Empty(t, halts)
				return
			}
			require.Len(t, halts, 1)
			assert.Contains(t, halts[0].Signal, tc.want)
		})
	}
}

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
		{name: "at the target without a Job, cordoned 2h ago, no validator Pod", mutate: func(_ *scenario, n *corev1.Node) {
			setTuple(n, tupleTarget)
			n.Spec.Unschedulable = true
			added := metav1.NewTime(testNow.Add(-2 * time.Hour))
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintUnschedulable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &added})
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
		{name: "half applied just after its Job completed: no halt yet (the facts may lag)", mutate: func(s *scenario, n *corev1.Node) {
			half := tupleSource
			half.Kernel = tupleTarget.Kernel
			setTuple(n, half)
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{upgradeJob("gpu-v100-01", batchv1.JobComplete, testNow.Add(-time.Minute))}
			s.cluster.Proof.Validators = []*corev1.Pod{validatorPod("gpu-v100-01", corev1.ConditionTrue, testNow.Add(-time.Minute))}
		}},
		{name: "half applied a recovery timeout after its Job completed", mutate: func(s *scenario, n *corev1.Node) {
			half := tupleSource
			half.Kernel = tupleTarget.Kernel
			setTuple(n, half)
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{upgradeJob("gpu-v100-01", batchv1.JobComplete, testNow.Add(-2*time.Hour))}
		}, want: "tuple half applied: neither the record's source nor its target (rke2 v1.35.3+rke2r3 (want v1.36.1+rke2r1), driver 580.126.20 (want 580.130.00))", at: testNow},
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

// TestHaltSeenNow (issue 12 item 3, latency): a decision counts a failure
// signal its own facts show before the halt loop has recorded it (the
// record is empty), as a halt "seen now, being recorded"; the signal of a
// halt a person cleared does not hold again, a kept halt is named as kept,
// and without a signal nothing holds.
func TestHaltSeenNow(t *testing.T) {
	failedAt := testNow.Add(-time.Minute)
	failedJob := func() *batchv1.Job {
		j := upgradeJob("gpu-v100-01", batchv1.JobFailed, failedAt)
		j.Status.Conditions[0].Reason = "BackoffLimitExceeded"
		return j
	}
	seen := Halt{Hardware: []string{hwV100}, Node: "gpu-v100-01", Signal: "SUC Job system-upgrade/apply-gpu-v100-canary-on-gpu-v100-01 failed (BackoffLimitExceeded)",
		SeenAt: failedAt, Plan: "system-upgrade/gpu-v100-canary", Record: "v100-r580-canary-1", RequestedBy: "alice"}
	cases := []struct {
		name   string
		mutate func(s *scenario)
		want   string // "" = not RolloutHalted
		not    string // must not be in the denial
	}{
		{name: "the Job is running: no signal, nothing holds", mutate: func(s *scenario) {
			j := failedJob()
			j.Status.Conditions = nil
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{j}
		}},
		{name: "the Job failed, not yet recorded: held at once", mutate: func(s *scenario) {
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{failedJob()}
		}, want: "[RolloutHalted] the rollout of hardware 10de:1db6/10de:124a is halted: node gpu-v100-01: SUC Job system-upgrade/apply-gpu-v100-canary-on-gpu-v100-01 failed (BackoffLimitExceeded) (seen 2026-11-21T11:59:00Z, Plan system-upgrade/gpu-v100-canary, record v100-r580-canary-1; seen now, being recorded); no node of this hardware moves forward until the halt is cleared (break glass does not override a halt): roll node gpu-v100-01 back (the record's rollback Plan stays allowed) and prove it; then once the gate has recorded the halt (within its --halt-interval), someone other than alice clears the halt"},
		{name: "the Job failed and the halt is kept: named as kept", mutate: func(s *scenario) {
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{failedJob()}
			s.cluster.Halts = HaltRecord{Halts: map[string]Halt{keyV100: seen}}
		}, want: "record v100-r580-canary-1); no node of this hardware moves forward", not: "being recorded"},
		{name: "the same signal, its halt cleared: not held again", mutate: func(s *scenario) {
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{failedJob()}
			s.cluster.Halts = HaltRecord{Halts: map[string]Halt{}, Cleared: map[string]ClearedHalt{keyV100: {Halt: seen, Reason: "INC-7 fixed", ClearedAt: testNow}}}
		}},
		{name: "another hardware's failure does not hold V100", mutate: func(s *scenario) {
			h200Plan := canaryPlan("gpu-h200-01")
			h200Plan.Annotations[AnnotationQualification] = "h200-r580"
			s.cluster.Plans = []*upgradev1.Plan{h200Plan}
			s.cluster.Records["h200-r580"] = RecordEntry{Record: record(func(r *qualification.Record) { r.ID = "h200-r580-canary-1"; r.Hardware = []string{hwH200} })}
			j := failedJob()
			j.Labels[upgradev1.LabelNode] = "gpu-h200-01"
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{j}
			require.Len(t, DetectHalts(s.cfg, s.cluster, testNow), 1, "the H200 rollout halts")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			stored := s.req.Plan.DeepCopy()
			stored.Annotations[AnnotationRequestedBy] = "alice"
			s.cluster.Plans = []*upgradev1.Plan{stored}
			s.req.Plan = canaryPlan("gpu-v100-02")
			s.req.Plan.Name = "gpu-v100-next"
			tc.mutate(s)
			d := s.decide()
			if tc.want == "" {
				assert.NotContains(t, codesOf(d), CodeRolloutHalted, d.Message())
				return
			}
			require.Contains(t, codesOf(d), CodeRolloutHalted, d.Message())
			assert.Contains(t, d.Message(), tc.want)
			if tc.not != "" {
				assert.NotContains(t, d.Message(), tc.not)
			}
			assert.Equal(t, keyV100+"@gpu-v100-01", d.AuditAnnotations()[AuditHalts])
		})
	}

	// The other paths that read halts count the signal too.
	live := func(t *testing.T) *scenario {
		s := safeScenario(t)
		stored := canaryPlan("gpu-v100-01", "gpu-v100-02")
		stored.Annotations[AnnotationRequestedBy] = "alice"
		s.cluster.Plans = []*upgradev1.Plan{stored}
		s.cluster.Proof.UpgradeJobs = []*batchv1.Job{failedJob()}
		return s
	}
	t.Run("the failed node's uncordon", func(t *testing.T) {
		s := live(t)
		n := s.node("gpu-v100-01")
		old := n.DeepCopy()
		old.Spec.Unschedulable = true
		d := DecideCompletion(s.cfg, s.cluster, NodeRequest{Node: n, OldNode: old, User: UserInfo{Name: "carol"}, Now: testNow})
		require.Contains(t, codesOf(d), CodeRolloutHalted, d.Message())
		assert.Contains(t, d.Message(), "node gpu-v100-01 failed its upgrade (SUC Job system-upgrade/apply-gpu-v100-canary-on-gpu-v100-01 failed (BackoffLimitExceeded)); it is back on the source tuple but not proven")
	})
	t.Run("a driver change of the hardware", func(t *testing.T) {
		ds := safeDriverScenario(t)
		s := live(t)
		ds.cluster.Plans, ds.cluster.Proof.UpgradeJobs, ds.cluster.Records["v100-r580"] = s.cluster.Plans, s.cluster.Proof.UpgradeJobs, s.cluster.Records["v100-r580"]
		d := ds.decide()
		require.Contains(t, codesOf(d), CodeRolloutHalted, d.Message())
		assert.Contains(t, d.Message(), "seen now, being recorded")
	})
	t.Run("SUC's start of the next node", func(t *testing.T) {
		s := live(t)
		step := PrepareSUCStep(s.cfg, s.cluster, SUCStepRequest{Object: "Job system-upgrade/apply-gpu-v100-canary-on-gpu-v100-02", Plan: s.cluster.Plans[0], Node: s.node("gpu-v100-02"), User: UserInfo{Name: sucUserName}, Now: testNow})
		d := step.Decide(nil, nil)
		require.Contains(t, codesOf(d), CodeRolloutHalted, d.Message())
		assert.Contains(t, d.Message(), "seen now, being recorded")
	})
}

// TestHaltSignalsFollowTheConfig: the node index remembers each node's own
// halt signals, worked out under the configured health conditions; an
// index built under other conditions is not reused, so a condition added
// to the config halts at once and one removed no longer does.
func TestHaltSignalsFollowTheConfig(t *testing.T) {
	s := safeScenario(t)
	s.cluster.Plans = []*upgradev1.Plan{s.req.Plan}
	n := s.node("gpu-v100-01")
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: "RackPowerFault", Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(testNow.Add(-time.Hour))})
	s.cluster.Index = NewNodeIndex(s.cfg, s.cluster.Nodes, nil)
	require.Empty(t, DetectHalts(s.cfg, s.cluster, testNow), "not a configured health condition")

	withRack := *s.cfg
	withRack.Proof.HealthConditions = append(slices.Clone(s.cfg.Proof.HealthConditions), HealthCondition{Type: "RackPowerFault", UnhealthyStatus: corev1.ConditionTrue})
	halts := DetectHalts(&withRack, s.cluster, testNow)
	require.Len(t, halts, 1, "the index's remembered answer under the old conditions must not be reused")
	assert.Equal(t, "condition RackPowerFault True", halts[0].Signal)

	s.cluster.Index = NewNodeIndex(&withRack, s.cluster.Nodes, s.cluster.Index)
	require.Len(t, DetectHalts(&withRack, s.cluster, testNow), 1)
	assert.Empty(t, DetectHalts(s.cfg, s.cluster, testNow), "the condition is no longer configured")
	assert.Empty(t, DetectHalts(s.cfg, &Cluster{Nodes: s.cluster.Nodes, Plans: s.cluster.Plans, Records: s.cluster.Records, Proof: s.cluster.Proof,
		Index: NewNodeIndex(s.cfg, s.cluster.Nodes, s.cluster.Index)}, testNow), "an index carried over from other conditions starts afresh")
}

// TestHaltScopeOncePerView: where halts can show is worked out once per
// fleet view and shared by the reviews of it; a Cluster whose Plans,
// records or nodes differ from the view's (an adapter's next event, a
// review's own Plan) reads a scope of its own, never the view's stale one.
func TestHaltScopeOncePerView(t *testing.T) {
	s := safeScenario(t)
	cl := s.cluster
	cl.Plans = []*upgradev1.Plan{s.req.Plan}
	cl.Proof.UpgradeJobs = []*batchv1.Job{upgradeJob("gpu-v100-01", batchv1.JobFailed, testNow.Add(-time.Hour))}
	cl.Index = NewNodeIndex(s.cfg, cl.Nodes, nil)
	cl.View = NewFleetView(cl)
	// Concurrent reviews of one view work it out once (go test -race).
	var wg sync.WaitGroup
	counts := make([]int, 8)
	for i := range counts {
		wg.Go(func() { counts[i] = len(DetectHalts(s.cfg, cl, testNow)) })
	}
	wg.Wait()
	assert.Equal(t, []int{1, 1, 1, 1, 1, 1, 1, 1}, counts)
	scope := haltScope(s.cfg, cl)
	assert.Same(t, scope, haltScope(s.cfg, cl), "once per view")
	require.Len(t, DetectHalts(s.cfg, cl, testNow), 1, "the failed Job halts")
	assert.Same(t, scope, haltScope(s.cfg, cl))
	without := func(nodes []*corev1.Node, name string) []*corev1.Node {
		return slices.DeleteFunc(slices.Clone(nodes), func(n *corev1.Node) bool { return n.Name == name })
	}
	cases := []struct {
		name   string
		change func(cl *Cluster)
		halts  int
		same   bool // the very same objects: the view's scope
	}{
		{"the Plan deleted", func(cl *Cluster) { cl.Plans = nil }, 0, false},
		{"the Plan is a rollback now", func(cl *Cluster) {
			p := s.req.Plan.DeepCopy()
			p.Annotations[AnnotationRollback] = "true"
			cl.Plans = []*upgradev1.Plan{p}
		}, 0, false},
		{"the record gone", func(cl *Cluster) { cl.Records = map[string]RecordEntry{} }, 0, false},
		{"the node gone (a node event's index)", func(cl *Cluster) {
			cl.Nodes = without(cl.Nodes, "gpu-v100-01")
			cl.Index = NewNodeIndex(s.cfg, cl.Nodes, nil)
		}, 0, false},
		{"the same Plans in another list", func(cl *Cluster) { cl.Plans = slices.Clone(cl.Plans) }, 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			next := *cl // the adapter's view stays the previous one
			tc.change(&next)
			assert.Equal(t, tc.same, scope == haltScope(s.cfg, &next))
			assert.Len(t, DetectHalts(s.cfg, &next, testNow), tc.halts)
		})
	}
}
