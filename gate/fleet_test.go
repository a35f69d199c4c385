package gate

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// rolloutFleet is indexFleet with the facts the rollout rules read drawn
// from small pools: hostnames (some shared, some missing), cordons, driver
// upgrade states, GPU identities (with and without a display class, one
// node with two), kernels, kubelets and drivers.
func rolloutFleet(rng *rand.Rand, n int) []*corev1.Node {
	pick := func(from []string) string { return from[rng.IntN(len(from))] }
	nodes := indexFleet(rng, n, []string{"a", "b"}, []string{"x", "y"})
	ids := []string{"0302_10de_20b5_10de_1533", "10de_1db6_10de_124a", "0300_10de_1db6_10de_124a", "10de_2330_10de_16c1"}
	for i, node := range nodes {
		if rng.IntN(5) > 0 {
			node.Labels[upgradev1.LabelHostname] = pick([]string{node.Name, node.Name, fmt.Sprintf("h%d", i%7), ""})
		}
		node.Spec.Unschedulable = rng.IntN(4) == 0
		if rng.IntN(3) == 0 {
			node.Labels[LabelDriverUpgradeState] = pick([]string{"", fleet.DriverUpgradeDone, driverUpgradeRequired, "pod-restart-required", "upgrade-failed"})
		}
		for range rng.IntN(3) {
			node.Labels[labelPCIPrefix+pick(ids)+".present"] = pick([]string{"true", "true", "false"})
		}
		node.Status.NodeInfo.KernelVersion = pick([]string{"", "6.8.0-133-generic", "6.8.0-134-generic"})
		node.Status.NodeInfo.KubeletVersion = pick([]string{"v1.31.4+rke2r1", "v1.32.1+rke2r1"})
		if rng.IntN(5) > 0 {
			node.Labels[labelDriverFull] = pick([]string{"570.124.06", "580.65.06"})
		}
	}
	return nodes
}

// TestFleetFactsAsScan (issue 12, issue 14 item 5): on random fleets, and on
// review views with some nodes changed or added, the fleet facts the index
// keeps answer exactly what a pass over every node finds: the GPU nodes,
// the cordoned ones, those with a driver upgrade state, the GPU node of a
// hostname (the last, of several), the GPU nodes of an identity set at a
// tuple, and SUC's selection among GPU nodes.
func TestFleetFactsAsScan(t *testing.T) {
	cfg := DefaultConfig()
	rng := rand.New(rand.NewPCG(12, 14))
	hosts := []string{"", "h0", "h3", "n001", "n005", "n017", "nope"}
	sets := [][]string{nil, {"10de:20b5/10de:1533"}, {"10de:1db6/10de:124a"}, {"10de:1db6/10de:124a", "10de:20b5/10de:1533"}, {"10de:1db6/10de:124a,10de:20b5/10de:1533"}}
	tuples := []qualification.Tuple{
		{Kernel: "6.8.0-134-generic", RKE2: "v1.32.1+rke2r1", Driver: "580.65.06", GPUOperator: "v25.3.0", DCGMExporter: "4.2.3"},
		{Kernel: "6.8.0-133-generic", RKE2: "v1.31.4+rke2r1", Driver: "570.124.06", GPUOperator: "v25.3.0", DCGMExporter: "4.2.3"},
		{Kernel: "6.8.0-133-generic", RKE2: "v1.31.4+rke2r1", Driver: "", GPUOperator: "v25.3.0", DCGMExporter: "4.2.3"},
	}
	op, dcgm := "v25.3.0", "4.2.3"
	plan := &upgradev1.Plan{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: upgradev1.PlanSpec{NodeSelector: &metav1.LabelSelector{}}, Status: upgradev1.PlanStatus{LatestHash: "x"}}
	selectors := []*metav1.LabelSelector{{}, {MatchLabels: map[string]string{"a": "x"}}, {MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "b", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"y"}}}}}

	scan := func(nodes []*corev1.Node, keep func(*corev1.Node) bool) []*corev1.Node {
		var out []*corev1.Node
		for _, n := range nodes {
			if cfg.IsGPUNode(n) && keep(n) {
				out = append(out, n)
			}
		}
		return out
	}
	check := func(t *testing.T, x *NodeIndex) {
		nodes := x.Nodes()
		require.Equal(t, positions(nodes, cfg.IsGPUNode), x.GPUNodes(cfg))
		require.Equal(t, scan(nodes, func(n *corev1.Node) bool { return n.Spec.Unschedulable }), orNil(x.CordonedGPU(cfg)))
		require.Equal(t, scan(nodes, func(n *corev1.Node) bool {
			s, ok := n.Labels[LabelDriverUpgradeState]
			return ok && s != "" && s != fleet.DriverUpgradeDone
		}), orNil(x.StatedGPU(cfg)))
		for _, h := range hosts {
			var want *corev1.Node
			for _, n := range scan(nodes, func(n *corev1.Node) bool { return hostname(n) == h }) {
				want = n // last wins, as the pass did
			}
			require.Same(t, want, x.GPUByHost(cfg, h), "host %q", h)
		}
		for _, ids := range sets {
			for _, dest := range tuples {
				want := scan(nodes, func(n *corev1.Node) bool {
					f := cfg.FactsOf(n)
					return slices.Equal(f.Identities, ids) && SameTuple(f.Tuple(op, dcgm), dest)
				})
				require.Equal(t, want, orNil(x.GPUOfHardware(cfg, ids, func(nf NodeFacts) bool { return SameTuple(nf.Tuple(op, dcgm), dest) })), "%v at %v", ids, dest)
			}
		}
		for _, ls := range selectors {
			plan.Spec.NodeSelector = ls
			s, err := NewPlanSelector(plan)
			require.NoError(t, err)
			var got []int32
			x.SelectingGPU(cfg, s, func(i int32) { got = append(got, i) })
			require.Equal(t, positions(nodes, func(n *corev1.Node) bool { return cfg.IsGPUNode(n) && s.Selects(n) }), got, "%v", ls)
		}
	}
	for round := range 40 {
		nodes := rolloutFleet(rng, 1+rng.IntN(80))
		x := NewNodeIndex(cfg, nodes, nil)
		t.Run(fmt.Sprintf("fleet-%d", round), func(t *testing.T) {
			check(t, x)
			// A later snapshot carries the nodes' facts over.
			check(t, NewNodeIndex(cfg, slices.Concat(nodes[1:], rolloutFleet(rng, 2)), x))
			for range 10 {
				var changed []*corev1.Node
				for range 1 + rng.IntN(3) {
					c := rolloutFleet(rng, 1)[0]
					if rng.IntN(4) > 0 {
						c.Name = nodes[rng.IntN(len(nodes))].Name // in place of a stored node
					}
					changed = append(changed, c)
				}
				v := x.WithNodes(changed...)
				check(t, v)
				check(t, v.WithNodes(rolloutFleet(rng, 1)[0])) // a view of a view
			}
		})
	}
}

func orNil(ns []*corev1.Node) []*corev1.Node {
	if len(ns) == 0 {
		return nil
	}
	return ns
}
