package gate

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// TestPlanSelectorMatchesApimachinery checks the compiled selector against
// labels.Selector, the reference, on random selectors and label sets.
func TestPlanSelectorMatchesApimachinery(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"a", "b", "c", "kubernetes.io/hostname", "plan.upgrade.cattle.io/p"}
	vals := []string{"x", "y", "z", "disabled", ""}
	ops := []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist}
	pick := func(from []string, n int) []string {
		var out []string
		for range n {
			out = append(out, from[rng.IntN(len(from))])
		}
		return out
	}
	for i := range 3000 {
		ls := &metav1.LabelSelector{}
		if rng.IntN(3) == 0 {
			ls.MatchLabels = map[string]string{}
			for _, k := range pick(keys[:3], 1+rng.IntN(2)) {
				ls.MatchLabels[k] = pick(vals, 1)[0]
			}
		}
		for range rng.IntN(4) {
			op := ops[rng.IntN(len(ops))]
			e := metav1.LabelSelectorRequirement{Key: pick(keys, 1)[0], Operator: op}
			if op == metav1.LabelSelectorOpIn || op == metav1.LabelSelectorOpNotIn {
				e.Values = pick(vals, 1+rng.IntN(3))
				if rng.IntN(10) == 0 { // a long list: looked up in a set
					for j := range 20 {
						e.Values = append(e.Values, fmt.Sprintf("v%d", j))
					}
				}
			}
			ls.MatchExpressions = append(ls.MatchExpressions, e)
		}
		p := &upgradev1.Plan{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: upgradev1.PlanSpec{NodeSelector: ls}}
		p.Status.LatestHash = pick(append(vals, "v3"), 1)[0]
		// SUC's own requirement (pkg/upgrade/plan SelectConcurrentNodes).
		notLatest, err := labels.NewRequirement("plan.upgrade.cattle.io/p", selection.NotIn, []string{"disabled", p.Status.LatestHash})
		require.NoError(t, err)
		if i%50 == 0 {
			p.Spec.NodeSelector = nil
		}
		got, err := NewPlanSelector(p)
		var ref labels.Selector = labels.Nothing()
		if p.Spec.NodeSelector != nil {
			var refErr error
			ref, refErr = metav1.LabelSelectorAsSelector(ls)
			require.Equal(t, refErr != nil, err != nil, "%+v", ls)
			if refErr != nil {
				continue
			}
		}
		require.NoError(t, err)
		for range 20 {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}}}
			for _, k := range pick(keys, rng.IntN(5)) {
				n.Labels[k] = pick(append(vals, "v3"), 1)[0]
			}
			_, host := n.Labels[upgradev1.LabelHostname]
			want := ref.Matches(labels.Set(n.Labels)) && host && notLatest.Matches(labels.Set(n.Labels))
			require.Equal(t, want, got.Matches(n), "selector %+v labels %v", ls, n.Labels)
		}
	}
}

// parsePCILabelSplit is parsePCILabel as it was written first, the reference.
func parsePCILabelSplit(s string) (id, vendor string, ok bool) {
	parts := strings.Split(s, "_")
	for _, p := range parts {
		if len(p) != 4 || !isHex(p) {
			return "", "", false
		}
	}
	if len(parts) > 1 && isClass(parts[0]) {
		parts = parts[1:]
	}
	switch len(parts) {
	case 1, 2, 3:
		return "", parts[0], true
	case 4:
		return parts[0] + ":" + parts[1] + "/" + parts[2] + ":" + parts[3], parts[0], true
	}
	return "", "", false
}

func TestParsePCILabelMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	parts := []string{"10de", "0300", "0302", "1db6", "124a", "1a03", "10DE", "abc", "12345", ""}
	inputs := []string{"", "_", "__", "10de_", "_10de"}
	for range 20000 {
		var s []string
		for range 1 + rng.IntN(7) {
			s = append(s, parts[rng.IntN(len(parts))])
		}
		inputs = append(inputs, strings.Join(s, "_"))
	}
	for _, in := range inputs {
		id, vendor, ok := parsePCILabel(in)
		rid, rvendor, rok := parsePCILabelSplit(in)
		require.Equal(t, [3]any{rid, rvendor, rok}, [3]any{id, vendor, ok}, "%q", in)
	}
}

// canaryProvenReference is the rule as first written: every node's facts.
func canaryProvenReference(r *PlanReview) bool {
	want := r.record.NormalizedHardware()
	for _, n := range r.cl.Nodes {
		if !r.cfg.IsGPUNode(n) {
			continue
		}
		f := r.cfg.FactsOf(n)
		if f.Ready && !f.Unschedulable && slices.Equal(f.Identities, want) && SameTuple(r.cl.Current(f), *r.dest) {
			return true
		}
	}
	return false
}

// TestCanaryProvenMatchesReference: the cheap pre-checks never change the
// answer, for each way a would-be canary can fall short.
func TestCanaryProvenMatchesReference(t *testing.T) {
	variants := map[string]func(*corev1.Node){
		"proven":    func(*corev1.Node) {},
		"cordoned":  func(n *corev1.Node) { n.Spec.Unschedulable = true },
		"not ready": func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse },
		"ready twice, last false": func(n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse})
		},
		"no conditions":     func(n *corev1.Node) { n.Status.Conditions = nil },
		"source kernel":     func(n *corev1.Node) { setTuple(n, tupleSource) },
		"kernel spaces":     func(n *corev1.Node) { n.Status.NodeInfo.KernelVersion = " " + tupleTarget.Kernel + " " },
		"kernel label only": func(n *corev1.Node) { n.Status.NodeInfo.KernelVersion = "" },
		"class-qualified identity": func(n *corev1.Node) {
			delete(n.Labels, "feature.node.kubernetes.io/pci-10de_1db6_10de_124a.present")
			n.Labels["feature.node.kubernetes.io/pci-0302_10de_1db6_10de_124a.present"] = "true"
		},
		"identity false": func(n *corev1.Node) { n.Labels["feature.node.kubernetes.io/pci-10de_1db6_10de_124a.present"] = "false" },
		"second GPU identity": func(n *corev1.Node) {
			n.Labels["feature.node.kubernetes.io/pci-10de_2335_10de_18bf.present"] = "true"
		},
		"other driver": func(n *corev1.Node) { n.Labels["nvidia.com/cuda.driver-version.full"] = "580.126.20" },
		"not a GPU node": func(n *corev1.Node) {
			for k := range n.Labels {
				if strings.Contains(k, "10de") || strings.HasPrefix(k, "nvidia.com/gpu.present") {
					delete(n.Labels, k)
				}
			}
		},
	}
	for name, mod := range variants {
		t.Run(name, func(t *testing.T) {
			for _, hw := range [][]string{{hwV100}, {hwH200}, {hwV100, hwH200}, nil} {
				s := safeScenario(t)
				s.cfg.Proof.Off = ProofRequirements // the node selection alone (TestProof covers the proof)
				canary := v100(t, "gpu-v100-03", tupleTarget)
				mod(canary)
				s.cluster.Nodes = append(s.cluster.Nodes, canary)
				rec := record(func(r *qualification.Record) { r.Hardware = hw })
				s.cluster.Records["v100-r580"] = approved(rec)
				r := PreparePlan(s.cfg, s.cluster, s.req)
				require.NotNil(t, r.dest)
				want := canaryProvenReference(r)
				assert.Equal(t, want, r.canaryProven(&Decision{}), "hardware %v", hw)
				if name == "proven" && len(hw) == 1 && hw[0] == hwV100 {
					assert.True(t, want, "the unmodified canary proves the V100 record")
				}
			}
		})
	}
}

// TestPendingNodes: SUC's selection for a stored Plan, node by node,
// whatever tuple a node runs (issue 11).
func TestPendingNodes(t *testing.T) {
	s := safeScenario(t)
	p := canaryPlan("gpu-v100-01", "gpu-v100-02", "gpu-h200-01", "cpu-01")
	p.Status.LatestHash = "abc123"
	label := upgradev1.LabelPlanName(p.Name)
	setTuple(s.node("gpu-v100-01"), tupleTarget) // at target, not labelled: still pending
	s.node("gpu-v100-02").Labels[label] = "abc123"
	s.node("gpu-h200-01").Labels[label] = "disabled"
	delete(s.node("cpu-01").Labels, upgradev1.LabelHostname)
	got, err := PendingNodes(p, s.cluster.Nodes)
	require.NoError(t, err)
	assert.Equal(t, []string{"gpu-v100-01"}, got)

	s.node("gpu-v100-02").Labels[label] = "older-hash"
	got, _ = PendingNodes(p, s.cluster.Nodes)
	assert.Equal(t, []string{"gpu-v100-01", "gpu-v100-02"}, got)

	p.Spec.NodeSelector = nil
	got, _ = PendingNodes(p, s.cluster.Nodes)
	assert.Empty(t, got, "an absent nodeSelector selects nothing")
	p.Spec.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: "Near"}}}
	_, err = PendingNodes(p, s.cluster.Nodes)
	assert.ErrorContains(t, err, "spec.nodeSelector is not a valid label selector")
}
