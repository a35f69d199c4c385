package gate

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// sucUser is SUC's ServiceAccount as the API server authenticates it.
var sucUser = UserInfo{Name: "system:serviceaccount:system-upgrade:system-upgrade", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:system-upgrade"}}

// runningJob is SUC's started Job of Plan plan for node, not finished.
func runningJob(plan, node string, created time.Time) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "system-upgrade", Name: "apply-" + plan + "-on-" + node, CreationTimestamp: metav1.NewTime(created),
		Labels: map[string]string{upgradev1.LabelNode: node, upgradev1.LabelPlan: plan}},
		Status: batchv1.JobStatus{Active: 1}}
}

// midUpgrade: gpu-v100-02 is half way through Plan gpu-v100-first's
// upgrade: cordoned by its running Job, kernel moved, RKE2 not.
func midUpgrade(s *scenario) *corev1.Node {
	first := storedPlan("gpu-v100-first", "gpu-v100-02")
	first.Status.Applying = []string{"gpu-v100-02"}
	s.cluster.Plans = []*upgradev1.Plan{first}
	n := s.node("gpu-v100-02")
	n.Spec.Unschedulable = true
	half := tupleSource
	half.Kernel = tupleTarget.Kernel
	setTuple(n, half)
	s.cluster.Proof.UpgradeJobs = []*batchv1.Job{runningJob("gpu-v100-first", "gpu-v100-02", testNow.Add(-10*time.Minute))}
	return n
}

// TestNodeStateHoldsTheLine: issue 22 attack 1. A node mid-upgrade stays
// out (budget), its Plan in flight (RolloutInFlight), whether its Plan still
// selects it, its hostname label is rewritten, or its Plan is deleted: the
// next GPU node's Plan and SUC's Job start for it are refused.
func TestNodeStateHoldsTheLine(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(s *scenario, n *corev1.Node)
		want   []Code
	}{
		{name: "mid-upgrade, selected: the line holds", mutate: func(*scenario, *corev1.Node) {},
			want: []Code{CodeRolloutInFlight, CodeDisruptionBudgetExceeded}},
		{name: "opted out of its Plan", mutate: func(_ *scenario, n *corev1.Node) {
			n.Labels[upgradev1.LabelPlanName("gpu-v100-first")] = upgradev1.LabelPlanValueDisabled
		}, want: []Code{CodeRolloutInFlight, CodeDisruptionBudgetExceeded}},
		{name: "hostname label rewritten", mutate: func(_ *scenario, n *corev1.Node) { n.Labels[upgradev1.LabelHostname] = "elsewhere" },
			want: []Code{CodeRolloutInFlight, CodeDisruptionBudgetExceeded}},
		{name: "its Plan deleted, its Job still running", mutate: func(s *scenario, _ *corev1.Node) { s.cluster.Plans = nil },
			want: []Code{CodeRolloutInFlight, CodeDisruptionBudgetExceeded}},
		// Its cordon undated, the recovery timeout counts as passed: a halt
		// (TestStrandedNodeHalts).
		{name: "its Plan and Job deleted: still cordoned, still out, stranded half way", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Plans, s.cluster.Proof.UpgradeJobs = nil, nil
		}, want: []Code{CodeDisruptionBudgetExceeded, CodeRolloutHalted}},
		{name: "safe: the node back, uncordoned on the source, its Job done", mutate: func(s *scenario, n *corev1.Node) {
			n.Spec.Unschedulable = false
			setTuple(n, tupleSource)
			s.cluster.Plans, s.cluster.Proof.UpgradeJobs = nil, nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			tc.mutate(s, midUpgrade(s))
			d := s.decide()
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
		})
	}
	t.Run("SUC's Job start of the next node, the first opted out", func(t *testing.T) {
		s := safeScenario(t)
		n := midUpgrade(s)
		n.Labels[upgradev1.LabelPlanName("gpu-v100-first")] = upgradev1.LabelPlanValueDisabled
		next := storedPlan("gpu-v100-next", "gpu-v100-01")
		next.Status.Applying = []string{"gpu-v100-01"}
		s.cluster.Plans = append(s.cluster.Plans, next)
		d := PrepareSUCStep(s.cfg, s.cluster, SUCStepRequest{Object: "Job system-upgrade/apply-next", Plan: next, Node: s.node("gpu-v100-01"), User: sucUser, Now: testNow}).Decide(nil, nil)
		assert.Contains(t, d.Codes(), CodeDisruptionBudgetExceeded, d.Message())
		assert.Contains(t, d.Message(), "already out: gpu-v100-02 (")
	})
}

// TestNodeStates: each derived state, from facts only.
func TestNodeStates(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(s *scenario, n *corev1.Node)
		want   NodeState
	}{
		{name: "serving", mutate: func(*scenario, *corev1.Node) {}, want: StateServing},
		{name: "out: cordoned by a person", mutate: func(_ *scenario, n *corev1.Node) { n.Spec.Unschedulable = true }, want: StateOut},
		{name: "out: NotReady", mutate: func(_ *scenario, n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }, want: StateOut},
		{name: "out: an out-of-service taint", mutate: func(_ *scenario, n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "node.kubernetes.io/out-of-service", Effect: corev1.TaintEffectNoExecute})
		}, want: StateOut},
		{name: "out: a driver upgrade in progress", mutate: func(_ *scenario, n *corev1.Node) { n.Labels[LabelDriverUpgradeState] = "drain-required" }, want: StateOut},
		{name: "upgrading: SUC's Job runs for it", mutate: func(s *scenario, n *corev1.Node) {
			n.Spec.Unschedulable = true
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{runningJob("gpu-v100-canary", n.Name, testNow.Add(-time.Minute))}
		}, want: StateUpgrading},
		{name: "at a destination, unproven", mutate: func(s *scenario, n *corev1.Node) {
			setTuple(n, tupleTarget)
			n.Spec.Unschedulable = true
			s.cluster.Plans = []*upgradev1.Plan{storedPlan("gpu-v100-canary", n.Name)}
		}, want: StateUnproven},
		{name: "proven", mutate: func(s *scenario, n *corev1.Node) {
			setTuple(n, tupleTarget)
			prove(s, n.Name)
			s.cluster.Plans = []*upgradev1.Plan{storedPlan("gpu-v100-canary", n.Name)}
		}, want: StateProven},
		{name: "failed: its Job failed, opted out of its Plan", mutate: func(s *scenario, n *corev1.Node) {
			n.Spec.Unschedulable = true
			n.Labels[upgradev1.LabelPlanName("gpu-v100-canary")] = upgradev1.LabelPlanValueDisabled
			s.cluster.Plans = []*upgradev1.Plan{storedPlan("gpu-v100-canary", n.Name)}
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{upgradeJob(n.Name, batchv1.JobFailed, testNow.Add(-time.Hour))}
		}, want: StateFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			tc.mutate(s, s.node("gpu-v100-01"))
			var got NodeStatus
			for _, st := range NodeStates(s.cfg, s.cluster, testNow) {
				if st.Node == "gpu-v100-01" {
					got = st
				}
			}
			assert.Equal(t, tc.want, got.State, "%v", got.Why)
		})
	}
}

// TestCordonedByOther: issue 22 attack 8. A Ready GPU node cordoned for an
// incident counts against the budget and refuses a canary; a hand-over by
// someone other than the requester lets it proceed; SUC's own cordon does
// not hold its upgrade; SUC does not uncordon a node someone else cordoned.
func TestCordonedByOther(t *testing.T) {
	incident := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	cases := []struct {
		name   string
		mutate func(s *scenario)
		want   []Code
	}{
		{name: "another GPU node cordoned for an incident counts against the budget", mutate: func(s *scenario) { incident(s.node("gpu-h200-01")) },
			want: []Code{CodeDisruptionBudgetExceeded}},
		{name: "another GPU node tainted by a health agent counts", mutate: func(s *scenario) {
			s.node("gpu-h200-01").Spec.Taints = []corev1.Taint{{Key: "node.kubernetes.io/out-of-service", Effect: corev1.TaintEffectNoExecute}}
		}, want: []Code{CodeDisruptionBudgetExceeded}},
		{name: "a canary on a node cordoned for an incident", mutate: func(s *scenario) { incident(s.node("gpu-v100-01")) },
			want: []Code{CodeCordonedByOther}},
		{name: "a canary on a node NVSentinel quarantined", mutate: func(s *scenario) {
			incident(s.node("gpu-v100-01"))
			s.node("gpu-v100-01").Annotations = map[string]string{"quarantineHealthEventIsCordoned": "True"}
		}, want: []Code{CodeCordonedByOther}},
		{name: "the requester's own hand-over does not count", mutate: func(s *scenario) {
			incident(s.node("gpu-v100-01"))
			s.node("gpu-v100-01").Annotations = map[string]string{AnnotationCordonHandover: "alice"}
		}, want: []Code{CodeCordonedByOther}},
		{name: "safe: handed over by a second person", mutate: func(s *scenario) {
			incident(s.node("gpu-v100-01"))
			s.node("gpu-v100-01").Annotations = map[string]string{AnnotationCordonHandover: "dave"}
		}},
		{name: "safe: cordoned by SUC's own Job for the node", mutate: func(s *scenario) {
			incident(s.node("gpu-v100-01"))
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{runningJob("gpu-v100-canary", "gpu-v100-01", testNow.Add(-time.Minute))}
		}},
		{name: "safe: the failed node of a halt, its Job gone: the rollback Plan", mutate: func(s *scenario) {
			incident(s.node("gpu-v100-01"))
			halted(s)
			s.req.Plan.Annotations[AnnotationRollback] = "true"
			s.req.Plan.Spec.Version = tupleSource.RKE2
		}},
		{name: "the failed node of a halt: a forward Plan is still refused, by the halt", mutate: func(s *scenario) {
			incident(s.node("gpu-v100-01"))
			halted(s)
		}, want: []Code{CodeRolloutHalted}},
		{name: "cordoned before SUC's Job was created: not SUC's cordon", mutate: func(s *scenario) {
			n := s.node("gpu-v100-01")
			incident(n)
			at := metav1.NewTime(testNow.Add(-time.Hour))
			n.Spec.Taints = []corev1.Taint{{Key: TaintUnschedulable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &at}}
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{runningJob("gpu-v100-canary", "gpu-v100-01", testNow.Add(-time.Minute))}
		}, want: []Code{CodeCordonedByOther}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			tc.mutate(s)
			d := s.decide()
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
		})
	}
	t.Run("the message names the actor and the hand-over", func(t *testing.T) {
		s := safeScenario(t)
		n := s.node("gpu-v100-01")
		incident(n)
		n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl-cordon", Operation: metav1.ManagedFieldsOperationUpdate}}
		d := s.decide()
		assert.Contains(t, d.Message(), "GPU node gpu-v100-01 was cordoned by field manager kubectl-cordon")
		assert.Contains(t, d.Message(), "have someone other than the rollout's requester alice hand it over: kubectl annotate node gpu-v100-01 gpu-upgrade-gate.io/cordon-handover=<your username>")
	})
}

// TestCordonUncordon: SUC's uncordon of a node someone else cordoned, a
// person's uncordon of a node SUC's Job is upgrading.
func TestCordonUncordon(t *testing.T) {
	cases := []struct {
		name   string
		suc    bool
		mutate func(s *scenario, n *corev1.Node)
		want   []Code
	}{
		{name: "SUC uncordons a node cordoned for an incident", suc: true, mutate: func(*scenario, *corev1.Node) {}, want: []Code{CodeCordonedByOther}},
		{name: "safe: SUC uncordons the node its own Job cordoned, proven", suc: true, mutate: func(s *scenario, n *corev1.Node) {
			prove(s, n.Name)
		}},
		{name: "safe: SUC uncordons a handed-over node", suc: true, mutate: func(_ *scenario, n *corev1.Node) {
			n.Annotations = map[string]string{AnnotationCordonHandover: "dave"}
		}},
		{name: "a person uncordons a node SUC's Job is upgrading", mutate: func(s *scenario, n *corev1.Node) {
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{runningJob("gpu-v100-canary", n.Name, testNow.Add(-time.Minute))}
		}, want: []Code{CodeCordonedByOther}},
		{name: "safe: a person uncordons a node they cordoned", mutate: func(*scenario, *corev1.Node) {}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			n := s.node("gpu-v100-01")
			tc.mutate(s, n)
			old := n.DeepCopy()
			old.Spec.Unschedulable = true
			req := NodeRequest{Node: n, OldNode: old, User: UserInfo{Name: "carol"}, Now: testNow}
			var d Decision
			if tc.suc {
				req.User = sucUser
				d = DecideCompletion(s.cfg, s.cluster, req)
			} else {
				d = PrepareNode(s.cfg, s.cluster, req).Decide(nil, nil)
			}
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
		})
	}
}

// TestUncordonByState: issue 22 attacks 3 and 4. An unproven node at its
// target stays cordoned after it is opted out; a halted node stays cordoned
// when the same write adds a made-up GPU identity label.
func TestUncordonByState(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(s *scenario, old, n *corev1.Node)
		want   []Code
	}{
		{name: "opted out earlier, then uncordoned at its target unproven", mutate: func(s *scenario, old, n *corev1.Node) {
			s.cluster.Plans = []*upgradev1.Plan{storedPlan("gpu-v100-canary", "gpu-v100-01")}
			for _, m := range []*corev1.Node{old, n} {
				setTuple(m, tupleTarget)
				m.Labels[upgradev1.LabelPlanName("gpu-v100-canary")] = upgradev1.LabelPlanValueDisabled
			}
		}, want: []Code{CodeUncordonBeforeProof}},
		{name: "safe: opted out, at its target and proven", mutate: func(s *scenario, old, n *corev1.Node) {
			s.cluster.Plans = []*upgradev1.Plan{storedPlan("gpu-v100-canary", "gpu-v100-01")}
			prove(s, "gpu-v100-01")
			for _, m := range []*corev1.Node{old, n} {
				setTuple(m, tupleTarget)
				m.Labels[upgradev1.LabelPlanName("gpu-v100-canary")] = upgradev1.LabelPlanValueDisabled
			}
		}},
		{name: "halted, uncordoned with a made-up identity label in the same write", mutate: func(s *scenario, _, n *corev1.Node) {
			halted(s)
			setTuple(n, tupleTarget)
			n.Labels["feature.node.kubernetes.io/pci-10de_0000_10de_0000.present"] = "true"
		}, want: []Code{CodeRolloutHalted}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			n := s.node("gpu-v100-01")
			old := n.DeepCopy()
			tc.mutate(s, old, n)
			old.Spec.Unschedulable = true
			d := PrepareNode(s.cfg, s.cluster, NodeRequest{Node: n, OldNode: old, User: UserInfo{Name: "carol"}, Now: testNow}).Decide(nil, nil)
			for _, c := range tc.want {
				assert.Contains(t, d.Codes(), c, d.Message())
			}
			if len(tc.want) == 0 {
				assert.True(t, d.Allowed, d.Message())
			}
		})
	}
}

// TestMovedBy: issue 22 attack 6. Who pulls a node into a Plan names
// themselves; the halt names them; they may not clear it.
func TestMovedBy(t *testing.T) {
	pull := func(s *scenario, old, n *corev1.Node) {
		p := canaryPlan()
		p.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"gpu-wave": "next"}}
		s.cluster.Plans = []*upgradev1.Plan{p}
		n.Labels["gpu-wave"] = "next"
	}
	cases := []struct {
		name   string
		mutate func(s *scenario, old, n *corev1.Node)
		want   []Code
	}{
		{name: "pulled into bob's Plan without moved-by", mutate: pull, want: []Code{CodeMovedByMissing}},
		{name: "safe: pulled in with moved-by naming the writer", mutate: func(s *scenario, old, n *corev1.Node) {
			pull(s, old, n)
			n.Annotations = map[string]string{AnnotationMovedBy: "carol"}
		}},
		{name: "moved-by naming someone else", mutate: func(s *scenario, old, n *corev1.Node) {
			pull(s, old, n)
			n.Annotations = map[string]string{AnnotationMovedBy: "dave"}
		}, want: []Code{CodeNodeAttestationForged}},
		{name: "a moved-by left from an earlier move", mutate: func(s *scenario, old, n *corev1.Node) {
			pull(s, old, n)
			old.Annotations = map[string]string{AnnotationMovedBy: "dave"}
			n.Annotations = map[string]string{AnnotationMovedBy: "dave"}
		}, want: []Code{CodeNodeAttestationForged}},
		{name: "a hand-over naming someone else", mutate: func(_ *scenario, _, n *corev1.Node) {
			n.Annotations = map[string]string{AnnotationCordonHandover: "dave"}
		}, want: []Code{CodeNodeAttestationForged}},
		{name: "safe: a hand-over naming its writer", mutate: func(_ *scenario, _, n *corev1.Node) {
			n.Annotations = map[string]string{AnnotationCordonHandover: "carol"}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			n := s.node("gpu-v100-02")
			old := n.DeepCopy()
			tc.mutate(s, old, n)
			d := PrepareNode(s.cfg, s.cluster, NodeRequest{Node: n, OldNode: old, User: UserInfo{Name: "carol"}, Now: testNow}).Decide(nil, nil)
			for _, c := range tc.want {
				assert.Contains(t, d.Codes(), c, d.Message())
			}
			for _, c := range []Code{CodeMovedByMissing, CodeNodeAttestationForged} {
				if !slices.Contains(tc.want, c) {
					assert.NotContains(t, d.Codes(), c, d.Message())
				}
			}
		})
	}
	t.Run("the halt names who moved the node, who may not clear it", func(t *testing.T) {
		s := safeScenario(t)
		n := s.node("gpu-v100-01")
		n.Annotations = map[string]string{AnnotationMovedBy: "carol"}
		s.cluster.Plans = []*upgradev1.Plan{storedPlan("gpu-v100-canary", "gpu-v100-01")}
		s.cluster.Proof.UpgradeJobs = []*batchv1.Job{upgradeJob("gpu-v100-01", batchv1.JobFailed, testNow.Add(-time.Hour))}
		hs := DetectHalts(s.cfg, s.cluster, testNow)
		require.Len(t, hs, 1)
		assert.Equal(t, "carol", hs[0].MovedBy)
		assert.Equal(t, "alice", hs[0].RequestedBy)
		assert.Contains(t, hs[0].String(), "moved into the Plan by carol")
		assert.Contains(t, s.cfg.clearHint(hs[0]), "someone other than alice and carol")
	})
}

// TestStrandedNodeHalts: issue 22 item 2. A node stopped half way (kernel
// moved, RKE2 not, cordoned by its Job) whose Plan is deleted, and its Job
// with it, is a failure once the recovery timeout has passed since its
// cordon: halt detection finds it with no Plan stored, and a person's
// uncordon is refused while it is half applied. The neighbouring safe cases:
// within the timeout, its Job still running, or back on its source.
func TestStrandedNodeHalts(t *testing.T) {
	cordonedAt := func(n *corev1.Node, at time.Time) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintUnschedulable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &metav1.Time{Time: at}})
	}
	cases := []struct {
		name   string
		mutate func(s *scenario, n *corev1.Node)
		halt   bool
	}{
		{name: "Plan and Job deleted, cordoned past the recovery timeout", mutate: func(s *scenario, n *corev1.Node) {
			s.cluster.Plans, s.cluster.Proof.UpgradeJobs = nil, nil
			cordonedAt(n, testNow.Add(-2*time.Hour))
		}, halt: true},
		{name: "Plan deleted, its Job failed and kept", mutate: func(s *scenario, n *corev1.Node) {
			s.cluster.Plans = nil
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{upgradeJob("gpu-v100-02", batchv1.JobFailed, testNow.Add(-2*time.Hour))}
			s.cluster.Proof.UpgradeJobs[0].Labels[upgradev1.LabelPlan] = "gpu-v100-first"
		}, halt: true},
		{name: "opted out, its Job gone, its Plan stored", mutate: func(s *scenario, n *corev1.Node) {
			n.Labels[upgradev1.LabelPlanName("gpu-v100-first")] = upgradev1.LabelPlanValueDisabled
			s.cluster.Proof.UpgradeJobs = nil
		}, halt: true},
		{name: "safe: within the recovery timeout of its cordon", mutate: func(s *scenario, n *corev1.Node) {
			s.cluster.Plans, s.cluster.Proof.UpgradeJobs = nil, nil
			cordonedAt(n, testNow.Add(-10*time.Minute))
		}},
		{name: "safe: Plan deleted, its Job still running", mutate: func(s *scenario, _ *corev1.Node) { s.cluster.Plans = nil }},
		{name: "safe: Plan and Job deleted, back on the source", mutate: func(s *scenario, n *corev1.Node) {
			s.cluster.Plans, s.cluster.Proof.UpgradeJobs = nil, nil
			setTuple(n, tupleSource)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			n := midUpgrade(s)
			tc.mutate(s, n)
			hs := DetectHalts(s.cfg, s.cluster, testNow)
			if !tc.halt {
				assert.Empty(t, hs)
				return
			}
			require.Len(t, hs, 1)
			assert.Equal(t, "gpu-v100-02", hs[0].Node)
			assert.Contains(t, hs[0].Signal, "half applied")
			up := n.DeepCopy()
			up.Spec.Unschedulable = false
			d := PrepareNode(s.cfg, s.cluster, NodeRequest{Node: up, OldNode: n, User: UserInfo{Name: "carol"}, Now: testNow}).Decide(nil, nil)
			assert.Contains(t, d.Codes(), CodeRolloutHalted, d.Message())
			assert.Contains(t, d.Message(), "node gpu-v100-02 failed its upgrade")
		})
	}
}

// TestFleetViewOnlyWhenBuiltFromTheseJobs: a Cluster's view built from other
// Jobs is not read (the review builds its own), one built from its Jobs is.
func TestFleetViewOnlyWhenBuiltFromTheseJobs(t *testing.T) {
	running := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "apply-drivers", Namespace: "cattle-system",
		Labels: map[string]string{upgradev1.LabelNode: "gpu-1", upgradev1.LabelPlan: "drivers"}}}
	stale := &Cluster{View: NewFleetView(&Cluster{})}
	stale.Proof.UpgradeJobs = []*batchv1.Job{running}
	assert.Equal(t, []*batchv1.Job{running}, sucJobsFor(stale, "gpu-1"), "a view of other Jobs is not used")
	own := &Cluster{}
	own.Proof.UpgradeJobs = []*batchv1.Job{running}
	own.View = NewFleetView(own)
	assert.Same(t, own.View, own.fleetView())
	assert.NotSame(t, stale.View, stale.fleetView())

	// Nor one of another halt record: who cordoned a node comes from the
	// review's halts.
	cordoned := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-2"}, Spec: corev1.NodeSpec{Unschedulable: true}}
	halted := &Cluster{View: NewFleetView(&Cluster{})}
	halted.Halts.Halts = map[string]Halt{"10de:1db5": {Node: "gpu-2", Signal: "SUC Job failed"}}
	assert.True(t, (&Config{}).cordonHolderOf(halted, cordoned).SUC, "the halt names the node: its failed upgrade's cordon")
	assert.False(t, (&Config{}).cordonHolderOf(&Cluster{View: halted.fleetView()}, cordoned).SUC, "a view of that halt record is not read for a Cluster without it")
}
