package gate

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// storedPlan is a stored V100 Plan called name selecting nodes.
func storedPlan(name string, nodes ...string) *upgradev1.Plan {
	p := canaryPlan(nodes...)
	p.Name = name
	return p
}

// down cordons a node and makes it NotReady, as a node that failed its
// upgrade is.
func down(n *corev1.Node) {
	n.Spec.Unschedulable = true
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
}

// doneFor labels a node as SUC does once the Plan's Job completed.
func doneFor(s *scenario, p *upgradev1.Plan, node string) {
	p.Status.LatestHash = "h1"
	s.node(node).Labels[upgradev1.LabelPlanName(p.Name)] = "h1"
}

// TestRolloutInFlight: one GPU rollout at a time, and what is not held by it.
func TestRolloutInFlight(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*scenario)
		want   []Code
	}{
		{name: "no other rollout", mutate: func(*scenario) {}},
		{name: "RolloutInFlight: a second single-node Plan while the first has a pending node", mutate: func(s *scenario) {
			s.cluster.Plans = []*upgradev1.Plan{storedPlan("gpu-v100-other", "gpu-v100-02")}
		}, want: []Code{CodeRolloutInFlight}},
		{name: "RolloutInFlight: the other Plan's node is in status.applying (SUC labels it only when done)", mutate: func(s *scenario) {
			p := storedPlan("gpu-v100-other", "gpu-v100-02")
			p.Status.Applying = []string{"gpu-v100-02"}
			s.cluster.Plans = []*upgradev1.Plan{p}
		}, want: []Code{CodeRolloutInFlight, CodeDisruptionBudgetExceeded}},
		{name: "RolloutInFlight: a Plan per zone is still a second rollout", mutate: func(s *scenario) {
			s.node("gpu-v100-02").Labels[LabelZone] = "zone-b"
			s.node("gpu-v100-01").Labels[LabelZone] = "zone-a"
			s.cluster.Plans = []*upgradev1.Plan{storedPlan("gpu-v100-zone-b", "gpu-v100-02")}
		}, want: []Code{CodeRolloutInFlight}},
		{name: "RolloutInFlight: another hardware's Plan is in flight", mutate: func(s *scenario) {
			s.cluster.Plans = []*upgradev1.Plan{storedPlan("gpu-h200", "gpu-h200-01")}
		}, want: []Code{CodeRolloutInFlight}},
		{name: "RolloutInFlight: a GPU Operator driver rollout has queued a node", mutate: func(s *scenario) {
			s.node("gpu-h200-01").Labels[LabelDriverUpgradeState] = "upgrade-required"
		}, want: []Code{CodeRolloutInFlight}},
		{name: "a finished driver rollout (upgrade-done) is not in flight", mutate: func(s *scenario) {
			s.node("gpu-h200-01").Labels[LabelDriverUpgradeState] = "upgrade-done"
		}},
		{name: "a finished Plan (every node labelled with its hash) is not in flight", mutate: func(s *scenario) {
			p := storedPlan("gpu-v100-done", "gpu-v100-02")
			doneFor(s, p, "gpu-v100-02")
			s.cluster.Plans = []*upgradev1.Plan{p}
		}},
		{name: "a Plan SUC reports Complete for its hash is not in flight (SUC selects no node then)", mutate: func(s *scenario) {
			p := storedPlan("gpu-v100-complete", "gpu-v100-02")
			p.Status.LatestHash = "h1"
			p.Status.Conditions = []upgradev1.GenericCondition{{Type: upgradev1.PlanComplete, Status: corev1.ConditionTrue}}
			s.cluster.Plans = []*upgradev1.Plan{p}
		}},
		{name: "RolloutInFlight: Complete but still applying", mutate: func(s *scenario) {
			p := storedPlan("gpu-v100-complete", "gpu-v100-02")
			p.Status.LatestHash = "h1"
			p.Status.Applying = []string{"gpu-v100-02"}
			p.Status.Conditions = []upgradev1.GenericCondition{{Type: upgradev1.PlanComplete, Status: corev1.ConditionTrue}}
			s.cluster.Plans = []*upgradev1.Plan{p}
		}, want: []Code{CodeRolloutInFlight, CodeDisruptionBudgetExceeded}},
		{name: "a CPU Plan is not a GPU rollout", mutate: func(s *scenario) {
			p := storedPlan("cpu", "cpu-01")
			p.Status.Applying = []string{"cpu-01"}
			s.cluster.Plans = []*upgradev1.Plan{p}
		}},
		{name: "a node opted out of the other Plan is not in flight", mutate: func(s *scenario) {
			p := storedPlan("gpu-v100-other", "gpu-v100-02")
			s.node("gpu-v100-02").Labels[upgradev1.LabelPlanName(p.Name)] = upgradev1.LabelPlanValueDisabled
			s.cluster.Plans = []*upgradev1.Plan{p}
		}},
		{name: "the Plan's own re-apply while SUC applies it", mutate: func(s *scenario) {
			stored := canaryPlan("gpu-v100-01")
			stored.Status.Applying = []string{"gpu-v100-01"}
			s.cluster.Plans = []*upgradev1.Plan{stored}
			s.req.Operation, s.req.OldPlan = "UPDATE", stored
			s.req.Plan = stored.DeepCopy()
			s.req.Plan.Labels = map[string]string{"note": "edited"}
		}},
		{name: "a rollback Plan is not held by the failed rollout", mutate: func(s *scenario) {
			rollbackScenario(s)
			s.cluster.Plans = []*upgradev1.Plan{storedPlan("gpu-v100-failed", "gpu-v100-02")}
		}},
		{name: "a rollback Plan is not held by the budget the failed node spends", mutate: func(s *scenario) {
			rollbackScenario(s)
			down(s.node("gpu-h200-01"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			tc.mutate(s)
			d := s.decide()
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
		})
	}
}

func TestRolloutInFlightMessage(t *testing.T) {
	s := safeScenario(t)
	p := storedPlan("gpu-v100-other", "gpu-v100-02", "gpu-h200-01")
	p.Status.Applying = []string{"gpu-h200-01"}
	s.cluster.Plans = []*upgradev1.Plan{p}
	s.node("gpu-v100-02").Labels[LabelDriverUpgradeState] = "upgrade-required"
	d := s.decide()
	msg := d.Message()
	assert.Contains(t, msg, "[RolloutInFlight] Plan system-upgrade/gpu-v100-other is in flight on GPU node(s) gpu-h200-01 (applying),gpu-v100-02 (pending)")
	assert.Contains(t, msg, "[RolloutInFlight] the GPU Operator's driver rollout is in flight on GPU node(s) gpu-v100-02 (upgrade-required)")
	for _, b := range d.Blockers {
		if b.Code == CodeRolloutInFlight {
			assert.Equal(t, "metadata.name", b.Err.Field)
		}
	}
}

// TestRolloutInFlightOtherPaths: a label change that pulls a node into a
// second Plan, a ClusterPolicy change beside a Plan, and SUC's steps.
func TestRolloutInFlightOtherPaths(t *testing.T) {
	t.Run("RolloutInFlight: a label change pulls a GPU node into a second Plan", func(t *testing.T) {
		s, old, n := nodeScenario(t)
		s.cluster.Plans = append(s.cluster.Plans, storedPlan("gpu-v100-first", "gpu-v100-02"))
		n.Labels["gpu-wave"] = "next"
		d := decideNode(s, old, n)
		assert.Equal(t, []Code{CodeRolloutInFlight}, d.Codes(), d.Message())
		assert.Contains(t, d.Message(), "Plan system-upgrade/gpu-v100-wave: [RolloutInFlight] Plan system-upgrade/gpu-v100-first is in flight")
	})
	t.Run("a label change that pulls a node into the one rollout in flight", func(t *testing.T) {
		s, old, n := nodeScenario(t)
		n.Labels["gpu-wave"] = "next"
		d := decideNode(s, old, n)
		assert.True(t, d.Allowed, d.Message())
	})
	t.Run("RolloutInFlight: a ClusterPolicy driver change while a Plan is in flight", func(t *testing.T) {
		s := safeDriverScenario(t)
		s.cluster.Plans = []*upgradev1.Plan{storedPlan("gpu-v100-canary", "gpu-v100-01")}
		d := s.decide()
		assert.Equal(t, []Code{CodeRolloutInFlight}, d.Codes(), d.Message())
	})
	t.Run("RolloutInFlight: a second driver change while the first still has nodes to reload", func(t *testing.T) {
		s := safeDriverScenario(t)
		s.node("gpu-v100-02").Labels[LabelDriverUpgradeState] = "upgrade-required"
		d := s.decide()
		assert.Equal(t, []Code{CodeRolloutInFlight}, d.Codes(), d.Message())
	})
	t.Run("a driver rollback is not held", func(t *testing.T) {
		s := safeDriverScenario(t)
		s.cluster.Plans = []*upgradev1.Plan{storedPlan("gpu-v100-canary", "gpu-v100-01")}
		s.change.Annotations[AnnotationRollback] = "true"
		d := s.decide()
		assert.NotContains(t, d.Codes(), CodeRolloutInFlight, d.Message())
	})
	t.Run("a driver rollback while a node failed its upgrade: the request passes, each step holds the budget", func(t *testing.T) {
		s := safeDriverScenario(t)
		s.node("gpu-h200-01").Labels[LabelDriverUpgradeState] = "upgrade-failed"
		d := s.decide()
		assert.ElementsMatch(t, []Code{CodeRolloutInFlight, CodeDisruptionBudgetExceeded}, d.Codes(), d.Message())
		s.change.Annotations[AnnotationRollback] = "true"
		d = s.decide()
		assert.NotContains(t, d.Codes(), CodeRolloutInFlight, d.Message())
		assert.NotContains(t, d.Codes(), CodeDisruptionBudgetExceeded, d.Message())
	})
	t.Run("RolloutInFlight: a GPU Operator upgrade while a Plan is in flight", func(t *testing.T) {
		s := safeDriverScenario(t)
		s.cluster.Plans = []*upgradev1.Plan{storedPlan("gpu-v100-canary", "gpu-v100-01")}
		s.change = DriverChange{Object: "Deployment gpu-operator/gpu-operator", Annotations: map[string]string{AnnotationQualification: "v100-op, h200-op"},
			OldOperator: "v26.3.3", NewOperator: "v26.3.4", Policy: s.change.Policy, PolicyPath: s.change.PolicyPath}
		s.cluster.Records = map[string]RecordEntry{
			"v100-op": driverRecord("v100-op", hwV100, func(r *qualification.Record) { r.Target = tupleSource; r.Target.GPUOperator = "v26.3.4" }),
			"h200-op": driverRecord("h200-op", hwH200, func(r *qualification.Record) { r.Target = tupleSource; r.Target.GPUOperator = "v26.3.4" }),
		}
		d := s.decide()
		assert.Equal(t, []Code{CodeRolloutInFlight}, d.Codes(), d.Message())
		s.cluster.Plans = nil
		d = s.decide()
		assert.True(t, d.Allowed, d.Message())
	})
	t.Run("SUC's steps of two Plans admitted in the same instant: the budget holds, the older Plan starts first", func(t *testing.T) {
		st := safeStep(t)
		other := storedPlan("gpu-v100-other", "gpu-v100-02")
		st.cluster.Plans = []*upgradev1.Plan{other}
		st.req.Plan.CreationTimestamp = metav1.NewTime(testNow)
		d := st.decide(nil)
		assert.True(t, d.Allowed, "the other Plan has not started a node: %s", d.Message())

		other.Status.Applying = []string{"gpu-v100-02"}
		other.CreationTimestamp = metav1.NewTime(testNow.Add(-time.Minute))
		d = st.decide(nil)
		assert.Equal(t, []Code{CodeDisruptionBudgetExceeded}, d.Codes(), d.Message())
		assert.Contains(t, d.Message(), "Plan system-upgrade/gpu-v100-canary: [DisruptionBudgetExceeded] taking GPU node gpu-v100-01 out now would make 2 GPU nodes unavailable at once across all GPU nodes, above the budget of 1 (budget.maxUnavailable); already out: gpu-v100-02 (in status.applying of Plan system-upgrade/gpu-v100-other)")
		assert.Equal(t, "gpu-v100-01", d.Blockers[0].Node)

		// The newer Plan's node waits at its own step: it does not hold the older one.
		other.CreationTimestamp = metav1.NewTime(testNow.Add(time.Minute))
		d = st.decide(nil)
		assert.True(t, d.Allowed, "the newer Plan's paused node: %s", d.Message())
		// Once its Job runs, it is out.
		st.cluster.Proof.UpgradeJobs = []*batchv1.Job{{ObjectMeta: metav1.ObjectMeta{Namespace: "system-upgrade", Name: "apply-other",
			Labels: map[string]string{upgradev1.LabelPlan: "gpu-v100-other", upgradev1.LabelNode: "gpu-v100-02"}}}}
		d = st.decide(nil)
		assert.Equal(t, []Code{CodeDisruptionBudgetExceeded}, d.Codes(), d.Message())
		// And once that Job has run to completion, the node still in
		// status.applying and not cordoned: its upgrade started.
		done := metav1.NewTime(testNow.Add(-time.Second))
		st.cluster.Proof.UpgradeJobs = []*batchv1.Job{{ObjectMeta: metav1.ObjectMeta{Namespace: "system-upgrade", Name: "apply-other",
			Labels: map[string]string{upgradev1.LabelPlan: "gpu-v100-other", upgradev1.LabelNode: "gpu-v100-02"}},
			Status: batchv1.JobStatus{Succeeded: 1, CompletionTime: &done}}}
		d = st.decide(nil)
		assert.Contains(t, d.Codes(), CodeDisruptionBudgetExceeded, d.Message()) // and PreviousNodeUnproven: it ran
		assert.Contains(t, d.Message(), "already out: gpu-v100-02 (in status.applying of Plan system-upgrade/gpu-v100-other)")
		// Another Plan's Job for the node says nothing of this one's.
		st.cluster.Proof.UpgradeJobs[0].Labels[upgradev1.LabelPlan] = "gpu-v100-third"
		st.cluster.Proof.UpgradeJobs = slices.Clone(st.cluster.Proof.UpgradeJobs)
		d = st.decide(nil)
		assert.True(t, d.Allowed, "a Job of another Plan: %s", d.Message())
		// And so is it once SUC cordoned it.
		st.cluster.Proof.UpgradeJobs = nil
		st.scenario.node("gpu-v100-02").Spec.Unschedulable = true
		d = st.decide(nil)
		assert.Equal(t, []Code{CodeDisruptionBudgetExceeded}, d.Codes(), d.Message())
	})
}

// TestDisruptionBudget: what counts as out, and every limit.
func TestDisruptionBudget(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*scenario)
		want   []Code
	}{
		{name: "DisruptionBudgetExceeded: another GPU node is cordoned and NotReady", mutate: func(s *scenario) { down(s.node("gpu-h200-01")) },
			want: []Code{CodeDisruptionBudgetExceeded}},
		{name: "DisruptionBudgetExceeded: a cordoned node that is Ready is out (issue 22)", mutate: func(s *scenario) { s.node("gpu-h200-01").Spec.Unschedulable = true },
			want: []Code{CodeDisruptionBudgetExceeded}},
		{name: "DisruptionBudgetExceeded: a NotReady node that is schedulable is out", mutate: func(s *scenario) {
			down(s.node("gpu-h200-01"))
			s.node("gpu-h200-01").Spec.Unschedulable = false
		}, want: []Code{CodeDisruptionBudgetExceeded}},
		{name: "a Ready, schedulable GPU node with a finished driver upgrade is serving", mutate: func(s *scenario) {
			s.node("gpu-h200-01").Labels[LabelDriverUpgradeState] = "upgrade-done"
		}},
		{name: "a CPU node down does not count", mutate: func(s *scenario) { down(s.node("cpu-01")) }},
		{name: "DisruptionBudgetExceeded: another GPU node is mid driver reload", mutate: func(s *scenario) {
			s.node("gpu-h200-01").Labels[LabelDriverUpgradeState] = "validation-required"
		}, want: []Code{CodeDisruptionBudgetExceeded, CodeRolloutInFlight}},
		{name: "DisruptionBudgetExceeded: a node cordoned at a stored Plan's destination, not proven", mutate: func(s *scenario) {
			h := s.node("gpu-h200-01")
			setTuple(h, tupleTarget)
			h.Spec.Unschedulable = true
			s.cluster.Records["h200-r580"] = RecordEntry{Record: record(func(r *qualification.Record) { r.ID = "h200-r580-canary-1"; r.Hardware = []string{hwH200} })}
			p := storedPlan("gpu-h200", "gpu-h200-01")
			p.Annotations[AnnotationQualification] = "h200-r580"
			doneFor(s, p, "gpu-h200-01")
			s.cluster.Plans = []*upgradev1.Plan{p}
		}, want: []Code{CodeDisruptionBudgetExceeded}},
		{name: "the same node uncordoned serves its tenants: not counted", mutate: func(s *scenario) {
			h := s.node("gpu-h200-01")
			setTuple(h, tupleTarget)
			s.cluster.Records["h200-r580"] = RecordEntry{Record: record(func(r *qualification.Record) { r.ID = "h200-r580-canary-1"; r.Hardware = []string{hwH200} })}
			p := storedPlan("gpu-h200", "gpu-h200-01")
			p.Annotations[AnnotationQualification] = "h200-r580"
			doneFor(s, p, "gpu-h200-01")
			s.cluster.Plans = []*upgradev1.Plan{p}
		}},
		{name: "a pending node already out adds nothing (the Plan upgrades the node that is down, handed over)", mutate: func(s *scenario) {
			down(s.node("gpu-v100-01"))
			s.node("gpu-v100-01").Annotations = map[string]string{AnnotationCordonHandover: "dave"}
		}},
		{name: "a cluster budget of 2 allows a second node out", mutate: func(s *scenario) {
			s.cfg.Budget.MaxUnavailable = 2
			down(s.node("gpu-h200-01"))
		}},
		{name: "DisruptionBudgetExceeded: the zone's budget of 1 under a cluster budget of 2", mutate: func(s *scenario) {
			s.cfg.Budget = BudgetConfig{MaxUnavailable: 2, Zones: []ZoneBudget{{Zone: "zone-a", MaxUnavailable: 1}}}
			for _, n := range []string{"gpu-v100-01", "gpu-h200-01"} {
				s.node(n).Labels[LabelZone] = "zone-a"
			}
			down(s.node("gpu-h200-01"))
		}, want: []Code{CodeDisruptionBudgetExceeded}},
		{name: "the zone's budget does not count another zone", mutate: func(s *scenario) {
			s.cfg.Budget = BudgetConfig{MaxUnavailable: 2, Zones: []ZoneBudget{{Zone: "zone-a", MaxUnavailable: 1}}}
			s.node("gpu-v100-01").Labels[LabelZone] = "zone-a"
			s.node("gpu-h200-01").Labels[LabelZone] = "zone-b"
			down(s.node("gpu-h200-01"))
		}},
		{name: "DisruptionBudgetExceeded: the hardware's budget of 1 under a cluster budget of 2", mutate: func(s *scenario) {
			s.cfg.Budget = BudgetConfig{MaxUnavailable: 2, Hardware: []HardwareBudget{{Hardware: []string{hwV100}, MaxUnavailable: 1}}}
			down(s.node("gpu-v100-02"))
		}, want: []Code{CodeDisruptionBudgetExceeded}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			tc.mutate(s)
			d := s.decide()
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
		})
	}
}

func TestDisruptionBudgetMessage(t *testing.T) {
	s := safeScenario(t)
	s.cfg.Budget = BudgetConfig{MaxUnavailable: 3, Zones: []ZoneBudget{{Zone: "zone-a", MaxUnavailable: 2}}}
	for _, n := range s.cluster.Nodes {
		n.Labels[LabelZone] = "zone-a"
	}
	down(s.node("gpu-v100-02"))
	p := storedPlan("gpu-h200", "gpu-h200-01")
	p.Status.Applying = []string{"gpu-h200-01"}
	s.cluster.Plans = []*upgradev1.Plan{p}
	d := s.decide()
	require.Contains(t, d.Codes(), CodeDisruptionBudgetExceeded, d.Message())
	msg := d.Message()
	assert.Contains(t, msg, "[DisruptionBudgetExceeded] taking GPU node gpu-v100-01 out now would make 3 GPU nodes unavailable at once in zone zone-a, above the budget of 2 (budget.zones[0].maxUnavailable); already out: gpu-h200-01 (in status.applying of Plan system-upgrade/gpu-h200),gpu-v100-02 (cordoned and NotReady)")
	assert.Equal(t, 1, strings.Count(msg, "[DisruptionBudgetExceeded]"), "the cluster-wide budget of 3 holds: %s", msg)
}

// TestDisruptionBudgetDriverPath: the driver path counts the same nodes.
func TestDisruptionBudgetDriverPath(t *testing.T) {
	t.Run("DisruptionBudgetExceeded: a driver change while a GPU node is down", func(t *testing.T) {
		s := safeDriverScenario(t)
		s.change.Annotations[AnnotationQualification] = "v100-driver"
		s.change.NodeSelector = map[string]string{"nvidia.com/gpu.product": v100Product}
		down(s.node("gpu-h200-01"))
		d := s.decide()
		assert.Equal(t, []Code{CodeDisruptionBudgetExceeded}, d.Codes(), d.Message())
		assert.Equal(t, "spec.driver.version", d.Blockers[0].Err.Field)
	})
	t.Run("with no node down the change is allowed", func(t *testing.T) {
		s := safeDriverScenario(t)
		d := s.decide()
		assert.True(t, d.Allowed, d.Message())
	})
}

// TestPlanWindow: a GPU Plan carries a window SUC accepts.
func TestPlanWindow(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(*scenario)
		want    []Code
		message string
	}{
		{name: "a weekend-night window in Berlin", mutate: func(s *scenario) {
			s.req.Plan.Spec.Window = &upgradev1.TimeWindowSpec{Days: []upgradev1.Day{"sa", "sunday"}, StartTime: "02:00", EndTime: "6am", TimeZone: "Europe/Berlin"}
		}},
		{name: "WindowInvalid: no window", mutate: func(s *scenario) { s.req.Plan.Spec.Window = nil }, want: []Code{CodeWindowInvalid},
			message: "[WindowInvalid] a GPU Plan needs spec.window"},
		{name: "no window when the config does not require one", mutate: func(s *scenario) {
			s.req.Plan.Spec.Window = nil
			s.cfg.Windows.RequirePlanWindow = false
		}},
		{name: "WindowInvalid: a start time SUC does not parse", mutate: func(s *scenario) { s.req.Plan.Spec.Window.StartTime = "25:00" }, want: []Code{CodeWindowInvalid},
			message: `[WindowInvalid] spec.window.startTime "25:00" does not parse as SUC reads it: expected a time of day as 15:04`},
		{name: "WindowInvalid: a day SUC's CRD refuses", mutate: func(s *scenario) { s.req.Plan.Spec.Window.Days = []upgradev1.Day{"Saturday"} }, want: []Code{CodeWindowInvalid},
			message: `spec.window.days[0] "Saturday" does not parse`},
		{name: "WindowInvalid: no days", mutate: func(s *scenario) { s.req.Plan.Spec.Window.Days = nil }, want: []Code{CodeWindowInvalid},
			message: "spec.window.days is required"},
		{name: "WindowInvalid: an unknown time zone", mutate: func(s *scenario) { s.req.Plan.Spec.Window.TimeZone = "Mars/Olympus" }, want: []Code{CodeWindowInvalid},
			message: `spec.window.timeZone "Mars/Olympus"`},
		{name: "WindowInvalid: Local means two zones", mutate: func(s *scenario) { s.req.Plan.Spec.Window.TimeZone = "Local" }, want: []Code{CodeWindowInvalid}},
		{name: "a window even when the config does not require one is still checked", mutate: func(s *scenario) {
			s.cfg.Windows.RequirePlanWindow = false
			s.req.Plan.Spec.Window.EndTime = "noon"
		}, want: []Code{CodeWindowInvalid}},
		{name: "a CPU Plan needs no window", mutate: func(s *scenario) {
			s.req.Plan = canaryPlan("cpu-01")
			s.req.Plan.Spec.Window = nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			tc.mutate(s)
			d := s.decide()
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			if tc.message != "" {
				assert.Contains(t, d.Message(), tc.message)
			}
		})
	}
}

// TestOutsideWindow: the driver path starts reloads only inside a
// configured maintenance window; testNow is Saturday 12:00 UTC.
func TestOutsideWindow(t *testing.T) {
	berlin := func(days []upgradev1.Day, start, end string) upgradev1.TimeWindowSpec {
		return upgradev1.TimeWindowSpec{Days: days, StartTime: start, EndTime: end, TimeZone: "Europe/Berlin"}
	}
	cases := []struct {
		name    string
		windows []upgradev1.TimeWindowSpec
		want    []Code
		message string
	}{
		{name: "no window configured: not held to a time"},
		{name: "inside a window (13:00 in Berlin)", windows: []upgradev1.TimeWindowSpec{berlin([]upgradev1.Day{"sa"}, "12:00", "14:00")}},
		{name: "OutsideWindow: the next window is Sunday night", windows: []upgradev1.TimeWindowSpec{berlin([]upgradev1.Day{"su"}, "02:00", "06:00"), berlin([]upgradev1.Day{"we"}, "22:00", "23:00")},
			want:    []Code{CodeOutsideWindow},
			message: "[OutsideWindow] the change would start driver reloads at 2026-11-21T12:00:00Z, outside every maintenance window in the gate's config (windows.maintenance); the next opens at Sun 2026-11-22 02:00 CET, time zone Europe/Berlin (windows.maintenance[0]: su 02:00-06:00 Europe/Berlin)"},
		{name: "OutsideWindow: a window that closed an hour ago", windows: []upgradev1.TimeWindowSpec{berlin([]upgradev1.Day{"sa"}, "09:00", "12:00")},
			want: []Code{CodeOutsideWindow}, message: "the next opens at Sat 2026-11-28 09:00 CET"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeDriverScenario(t)
			s.cfg.Windows.Maintenance = tc.windows
			d := s.decide()
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			if tc.message != "" {
				assert.Contains(t, d.Message(), tc.message)
			}
		})
	}
}

func TestBudgetAndWindowsConfig(t *testing.T) {
	cases := []struct {
		name, yaml, err string
	}{
		{name: "defaults", yaml: ""},
		{name: "a budget with per-hardware and per-zone limits", yaml: "budget:\n  maxUnavailable: 3\n  hardware: [{hardware: [10de:1db6/10de:124a], maxUnavailable: 1}]\n  zones: [{zone: eu-west-1a, maxUnavailable: 2}]\n"},
		{name: "windows that set one key keep the other", yaml: "windows:\n  maintenance: [{days: [sa, su], startTime: \"02:00\", endTime: \"06:00\", timeZone: Europe/Berlin}]\n"},
		{name: "unknown budget key", yaml: "budget:\n  maxUnavailble: 2\n", err: `unknown field "budget.maxUnavailble"`},
		{name: "unknown window key", yaml: "windows:\n  maintenance: [{days: [sa], start: \"02:00\"}]\n", err: `unknown field "windows.maintenance[0].start"`},
		{name: "zero budget", yaml: "budget:\n  maxUnavailable: 0\n", err: "budget.maxUnavailable: Invalid value: 0: expected a count of 1 or more"},
		{name: "a hardware limit above the cluster one", yaml: "budget:\n  hardware: [{hardware: [10de:1db6/10de:124a], maxUnavailable: 2}]\n", err: "budget.hardware[0].maxUnavailable: Invalid value: 2: expected a count from 1 to budget.maxUnavailable (1)"},
		{name: "a hardware id without subsystem", yaml: "budget:\n  hardware: [{hardware: [10de:1db6], maxUnavailable: 1}]\n", err: `budget.hardware[0].hardware[0]: Invalid value: "10de:1db6": expected vendor:device/subvendor:subdevice`},
		{name: "a zone twice", yaml: "budget:\n  zones: [{zone: a, maxUnavailable: 1}, {zone: a, maxUnavailable: 1}]\n", err: `budget.zones[1].zone: Duplicate value: "a"`},
		{name: "a bad zone", yaml: "budget:\n  zones: [{zone: \"not a zone\", maxUnavailable: 1}]\n", err: `budget.zones[0].zone: Invalid value: "not a zone"`},
		{name: "a window's bad time zone", yaml: "windows:\n  maintenance: [{days: [sa], startTime: \"02:00\", endTime: \"06:00\", timeZone: Europe/Nowhere}]\n", err: `windows.maintenance[0].timeZone: Invalid value: "Europe/Nowhere": expected an IANA time zone name`},
		{name: "a window's bad end", yaml: "windows:\n  maintenance: [{days: [sa], startTime: \"02:00\", endTime: \"6 o'clock\"}]\n", err: `windows.maintenance[0].endTime: Invalid value: "6 o'clock": expected a time of day`},
		{name: "requirePlanWindow not a bool", yaml: "windows:\n  requirePlanWindow: maybe\n", err: "windows"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := LoadConfig([]byte(tc.yaml))
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.True(t, cfg.Windows.RequirePlanWindow, "a file that sets windows keys keeps requirePlanWindow's default")
			assert.GreaterOrEqual(t, cfg.Budget.MaxUnavailable, 1)
		})
	}
}
