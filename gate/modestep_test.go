package gate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// nfdMaster is nfd-master as NFD's chart runs it: a ServiceAccount of NFD's
// namespace, which the default nfd exemption names by group.
var nfdMaster = UserInfo{Name: "system:serviceaccount:node-feature-discovery:nfd-node-feature-discovery",
	Groups: []string{"system:serviceaccounts", "system:serviceaccounts:node-feature-discovery", "system:authenticated"}}

// modeTriple sets kube-dc's mode triple (active, expected, workload.config).
func modeTriple(n *corev1.Node, mode, config string) {
	n.Labels[LabelWorkloadMode], n.Labels[LabelExpectedWorkloadMode], n.Labels[LabelWorkloadConfig] = mode, mode, config
}

// TestNFDModeStep (issue 24 item 3): nfd-master's write of a GPU mode label
// (kube-dc's NodeFeatureRule changed) is a per-node mode step, judged by the
// mode rules a person's write meets; its other writes stay exempt.
func TestNFDModeStep(t *testing.T) {
	holder := []Holder{{Namespace: "tenant-a", Pod: "virt-launcher-vm-1", Owner: "VirtualMachineInstance/vm-1", Resources: []string{"nvidia.com/GV100GL"}}}
	cases := []struct {
		name      string
		mutate    func(s *scenario, old, n *corev1.Node)
		want      []Code
		exemption string // the decision's exemption: only a write that is no step
	}{
		{name: "the rule flips a cordoned node without holders: the label lands", mutate: func(_ *scenario, _, n *corev1.Node) {
			modeTriple(n, "vm-passthrough", "vm-passthrough")
		}},
		{name: "ModeChangeNotCordoned: the rule flips a schedulable node", mutate: func(_ *scenario, old, n *corev1.Node) {
			old.Spec.Unschedulable, n.Spec.Unschedulable = false, false
			modeTriple(n, "vm-passthrough", "vm-passthrough")
		}, want: []Code{CodeModeChangeNotCordoned}},
		{name: "GPUHolders: the rule flips a cordoned node that still runs a VM", mutate: func(s *scenario, _, n *corev1.Node) {
			s.holders["gpu-v100-01"] = holder
			modeTriple(n, "vm-passthrough", "vm-passthrough")
		}, want: []Code{CodeGPUHolders}},
		{name: "ModeUnsupported: the rule writes vm-vgpu", mutate: func(_ *scenario, _, n *corev1.Node) {
			modeTriple(n, "vm-vgpu", "vm-vgpu")
		}, want: []Code{CodeModeUnsupported}},
		{name: "ModeLabelsInconsistent: the rule leaves workload.config behind", mutate: func(_ *scenario, _, n *corev1.Node) {
			n.Labels[LabelWorkloadMode], n.Labels[LabelExpectedWorkloadMode] = "vm-passthrough", "vm-passthrough"
		}, want: []Code{CodeModeLabelsInconsistent}},
		{name: "a mode step with feature labels in the same patch: no OwnedFactWritten", mutate: func(_ *scenario, _, n *corev1.Node) {
			modeTriple(n, "vm-passthrough", "vm-passthrough")
			n.Labels["feature.node.kubernetes.io/kernel-version.full"] = "6.8.0-60-generic"
		}},
		{name: "feature labels alone stay exempt, on a busy schedulable node", mutate: func(s *scenario, old, n *corev1.Node) {
			old.Spec.Unschedulable, n.Spec.Unschedulable = false, false
			s.holders["gpu-v100-01"] = holder
			n.Labels["feature.node.kubernetes.io/kernel-version.full"] = "6.8.0-60-generic"
		}, exemption: "nfd"},
		{name: "a mode step that pulls the node into a GPU Plan is judged as anyone's: MovedByMissing", mutate: func(s *scenario, _, n *corev1.Node) {
			s.cluster.Plans[0].Spec.NodeSelector.MatchLabels = map[string]string{LabelWorkloadMode: "vm-passthrough"}
			modeTriple(n, "vm-passthrough", "vm-passthrough")
		}, want: []Code{CodeMovedByMissing}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, old, n := nodeScenario(t)
			tc.mutate(s, old, n)
			r := PrepareNode(s.cfg, s.cluster, NodeRequest{Node: n, OldNode: old, User: nfdMaster, Now: s.req.Now})
			d := r.Decide(s.holders, nil)
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			assert.Equal(t, len(tc.want) == 0, d.Allowed)
			assert.Equal(t, tc.exemption, d.Exemption, "only a write that changes no mode label is exempt")
		})
	}
	t.Run("the same flip by a person meets the same mode rules", func(t *testing.T) {
		s, old, n := nodeScenario(t)
		old.Spec.Unschedulable, n.Spec.Unschedulable = false, false
		s.holders["gpu-v100-01"] = holder
		modeTriple(n, "vm-passthrough", "vm-passthrough")
		person := decideNode(s, old, n)
		s, old, n = nodeScenario(t)
		old.Spec.Unschedulable, n.Spec.Unschedulable = false, false
		s.holders["gpu-v100-01"] = holder
		modeTriple(n, "vm-passthrough", "vm-passthrough")
		step := PrepareNode(s.cfg, s.cluster, NodeRequest{Node: n, OldNode: old, User: nfdMaster, Now: s.req.Now})
		require.Equal(t, kindsModeStep, step.kinds)
		sd := step.Decide(s.holders, nil)
		assert.Equal(t, []Code{CodeModeChangeNotCordoned, CodeGPUHolders}, person.Codes(), person.Message())
		assert.Equal(t, person.Codes(), sd.Codes())
	})
}
