package gate

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// nodeScenario: alice edits gpu-v100-01, which is cordoned, runs pod-hami
// and has no holders. A wave Plan selects nodes labelled gpu-wave=next.
func nodeScenario(t *testing.T) (*scenario, *corev1.Node, *corev1.Node) {
	s := safeScenario(t)
	old := s.node("gpu-v100-01")
	old.Spec.Unschedulable = true
	// alice's cordon, handed over to a rollout by dave (CordonedByOther:
	// TestCordonedByOther).
	old.Annotations = map[string]string{AnnotationCordonHandover: "dave"}
	old.Labels[LabelWorkloadMode] = "pod-hami"
	old.Labels[LabelExpectedWorkloadMode] = "pod-hami"
	old.Labels[LabelWorkloadConfig] = "container"
	wave := canaryPlan()
	wave.Name = "gpu-v100-wave"
	wave.Spec.NodeSelector.MatchExpressions = nil
	wave.Spec.NodeSelector.MatchLabels = map[string]string{"gpu-wave": "next"}
	s.cluster.Plans = []*upgradev1.Plan{wave}
	return s, old, old.DeepCopy()
}

func decideNode(s *scenario, old, n *corev1.Node) Decision {
	// A person who pulls a node into a Plan names themselves (MovedByMissing:
	// TestMovedBy).
	if _, set := n.Annotations[AnnotationMovedBy]; !set {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[AnnotationMovedBy] = s.req.User.Name
	}
	r := PrepareNode(s.cfg, s.cluster, NodeRequest{Node: n, OldNode: old, User: s.req.User, Now: s.req.Now})
	return r.Decide(s.holders, nil)
}

func TestNodeRules(t *testing.T) {
	holder := []Holder{{Namespace: "tenant-a", Pod: "virt-launcher-vm-1", Owner: "VirtualMachineInstance/vm-1", Resources: []string{"nvidia.com/GV100GL"}}}
	cases := []struct {
		name   string
		mutate func(s *scenario, old, n *corev1.Node)
		want   []Code
	}{
		{name: "unrelated label change is allowed", mutate: func(_ *scenario, _, n *corev1.Node) { n.Labels["team"] = "ml" }},
		{name: "mode change on a cordoned node without holders is allowed", mutate: func(_ *scenario, _, n *corev1.Node) {
			n.Labels[LabelExpectedWorkloadMode] = "vm-passthrough"
		}},
		{name: "ModeChangeNotCordoned", mutate: func(_ *scenario, old, n *corev1.Node) {
			old.Spec.Unschedulable, n.Spec.Unschedulable = false, false
			n.Labels[LabelExpectedWorkloadMode] = "vm-passthrough"
		}, want: []Code{CodeModeChangeNotCordoned}},
		{name: "ModeChangeNotCordoned: cordon in the same update is not enough", mutate: func(_ *scenario, old, n *corev1.Node) {
			old.Spec.Unschedulable = false
			n.Labels[LabelExpectedWorkloadMode] = "vm-passthrough"
		}, want: []Code{CodeModeChangeNotCordoned}},
		{name: "GPUHolders: mode change with a VM on the node", mutate: func(s *scenario, _, n *corev1.Node) {
			s.holders["gpu-v100-01"] = holder
			n.Labels[LabelExpectedWorkloadMode] = "vm-passthrough"
		}, want: []Code{CodeGPUHolders}},
		{name: "holders do not block a change that is not a mode change", mutate: func(s *scenario, _, n *corev1.Node) {
			s.holders["gpu-v100-01"] = holder
			n.Labels["team"] = "ml"
		}},
		{name: "ModeUnsupported: vm-vgpu", mutate: func(_ *scenario, _, n *corev1.Node) {
			n.Labels[LabelExpectedWorkloadMode] = "vm-vgpu"
		}, want: []Code{CodeModeUnsupported}},
		{name: "ModeUnsupported: unknown workload.config", mutate: func(_ *scenario, _, n *corev1.Node) {
			n.Labels[LabelWorkloadConfig] = "vm-vgpu"
		}, want: []Code{CodeModeUnsupported, CodeModeLabelsInconsistent}},
		{name: "ModeLabelsInconsistent: vm-passthrough with container", mutate: func(_ *scenario, _, n *corev1.Node) {
			n.Labels[LabelWorkloadMode] = "vm-passthrough"
			n.Labels[LabelExpectedWorkloadMode] = "vm-passthrough"
		}, want: []Code{CodeModeLabelsInconsistent}},
		{name: "pod-hami-dra with container is consistent", mutate: func(_ *scenario, _, n *corev1.Node) {
			n.Labels[LabelWorkloadMode] = "pod-hami-dra"
			n.Labels[LabelExpectedWorkloadMode] = "pod-hami-dra"
		}},
		{name: "full triple to vm-passthrough is consistent", mutate: func(_ *scenario, _, n *corev1.Node) {
			n.Labels[LabelWorkloadMode] = "vm-passthrough"
			n.Labels[LabelExpectedWorkloadMode] = "vm-passthrough"
			n.Labels[LabelWorkloadConfig] = "vm-passthrough"
		}},
		{name: "UncordonDuringTransition", mutate: func(_ *scenario, old, n *corev1.Node) {
			old.Labels[LabelExpectedWorkloadMode] = "vm-passthrough"
			n.Labels[LabelExpectedWorkloadMode] = "vm-passthrough"
			n.Spec.Unschedulable = false
		}, want: []Code{CodeUncordonDuringTransition}},
		{name: "uncordon after the transition is allowed", mutate: func(_ *scenario, _, n *corev1.Node) { n.Spec.Unschedulable = false }},
		{name: "label pulls the node into a safe Plan", mutate: func(_ *scenario, _, n *corev1.Node) { n.Labels["gpu-wave"] = "next" }},
		{name: "label pulls a second node into the wave: MultipleCanaries", mutate: func(s *scenario, _, n *corev1.Node) {
			s.node("gpu-v100-02").Labels["gpu-wave"] = "next"
			n.Labels["gpu-wave"] = "next"
		}, want: []Code{CodeMultipleCanaries, CodeDisruptionBudgetExceeded}},
		{name: "label pulls a node with holders into a Plan: GPUHolders", mutate: func(s *scenario, _, n *corev1.Node) {
			s.holders["gpu-v100-01"] = holder
			n.Labels["gpu-wave"] = "next"
		}, want: []Code{CodeGPUHolders}},
		{name: "opting out of a Plan is always allowed", mutate: func(s *scenario, old, n *corev1.Node) {
			old.Labels["gpu-wave"] = "next"
			s.node("gpu-v100-02").Labels["gpu-wave"] = "next"
			n.Labels["gpu-wave"] = "next"
			n.Labels["plan.upgrade.cattle.io/gpu-v100-wave"] = "disabled"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, old, n := nodeScenario(t)
			tc.mutate(s, old, n)
			d := decideNode(s, old, n)
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			assert.Equal(t, len(tc.want) == 0, d.Allowed)
		})
	}
}

func TestNodePlanBlockersNameThePlan(t *testing.T) {
	s, _, _ := nodeScenario(t)
	s.node("gpu-v100-01").Spec.Unschedulable = false // else out: the budget's business
	h := s.node("gpu-h200-01")
	old, n := h, h.DeepCopy()
	n.Labels["gpu-wave"] = "next"
	d := decideNode(s, old, n)
	assert.False(t, d.Allowed)
	assert.Equal(t, []Code{CodeHardwareNotQualified}, d.Codes())
	assert.Equal(t, "system-upgrade/gpu-v100-wave", d.Blockers[0].Plan)
	assert.Contains(t, d.Message(), "Plan system-upgrade/gpu-v100-wave: [HardwareNotQualified]")
	assert.Equal(t, "metadata.labels", d.Blockers[0].Err.Field)
}

func TestNodeExemptAndNonGPU(t *testing.T) {
	t.Run("SUC's service account is exempt by default for its plan labels", func(t *testing.T) {
		s, old, n := nodeScenario(t)
		old.Spec.Unschedulable, n.Spec.Unschedulable = false, false
		n.Labels[upgradev1.LabelPlanName("rke2")] = "0123abcd"
		s.req.User = UserInfo{Name: "system:serviceaccount:system-upgrade:system-upgrade"}
		d := decideNode(s, old, n)
		assert.True(t, d.Allowed)
		assert.Equal(t, "suc", d.AuditAnnotations()[AuditExemption])
	})
	t.Run("SUC's service account is judged for a mode label (issue 22 attack 7)", func(t *testing.T) {
		s, old, n := nodeScenario(t)
		old.Spec.Unschedulable, n.Spec.Unschedulable = false, false
		n.Labels[LabelExpectedWorkloadMode] = "vm-passthrough"
		s.req.User = UserInfo{Name: "system:serviceaccount:system-upgrade:system-upgrade"}
		d := decideNode(s, old, n)
		assert.Equal(t, []Code{CodeModeChangeNotCordoned}, d.Codes())
		assert.Empty(t, d.AuditAnnotations()[AuditExemption])
	})
	t.Run("CPU node changes are not guarded", func(t *testing.T) {
		s, _, _ := nodeScenario(t)
		old := s.node("cpu-01")
		n := old.DeepCopy()
		n.Labels[LabelWorkloadMode] = "vm-vgpu"
		assert.True(t, decideNode(s, old, n).Allowed)
	})
	t.Run("break-glass on the node", func(t *testing.T) {
		s, old, n := nodeScenario(t)
		old.Spec.Unschedulable, n.Spec.Unschedulable = false, false
		n.Labels[LabelExpectedWorkloadMode] = "vm-passthrough"
		n.Annotations[AnnotationBreakGlass] = "INC-9"
		s.req.User.Groups = []string{s.cfg.BreakGlassGroup}
		d := decideNode(s, old, n)
		assert.True(t, d.Allowed)
		assert.Equal(t, "INC-9", d.BreakGlass)
	})
}

// TestNodeRemovingTheHashLabel: removing plan.upgrade.cattle.io/<plan>=<hash>
// makes SUC select the node again, so it pulls the node into that Plan.
func TestNodeRemovingTheHashLabel(t *testing.T) {
	s, _, _ := nodeScenario(t)
	s.node("gpu-v100-01").Spec.Unschedulable = false // else out: the budget's business
	wave := s.cluster.Plans[0]
	hash, ok := PredictHash(wave)
	require.True(t, ok)
	wave.Status.LatestHash = hash
	h := s.node("gpu-h200-01")
	h.Labels["gpu-wave"] = "next"
	h.Labels[upgradev1.LabelPlanName(wave.Name)] = hash
	old, n := h, h.DeepCopy()
	n.Labels["team"] = "ml"
	d := decideNode(s, old, n)
	assert.True(t, d.Allowed, "the node stays done for the Plan: %s", d.Message())

	n = h.DeepCopy()
	delete(n.Labels, upgradev1.LabelPlanName(wave.Name))
	d = decideNode(s, old, n)
	assert.Equal(t, []Code{CodeHardwareNotQualified}, d.Codes(), d.Message())
	assert.Equal(t, "gpu-v100-wave", strings.TrimPrefix(d.Blockers[0].Plan, "system-upgrade/"))
}
