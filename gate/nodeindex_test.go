package gate

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// indexFleet draws nodes from small pools of keys and values, so selectors
// hit, miss and overlap; some are GPU nodes by each of the definition's
// routes (PCI label, gpu.present, a GFD label, capacity).
func indexFleet(rng *rand.Rand, n int, keys, vals []string) []*corev1.Node {
	gpuLabels := []string{labelPCIPrefix + "0302_10de_20b5_10de_1533.present", labelPCIPrefix + "10de.present", labelPCIPrefix + "8086.present", labelGPUPresent, "nvidia.com/gpu.count"}
	var out []*corev1.Node
	for i := range n {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%03d", i), Labels: map[string]string{}}}
		for range rng.IntN(len(keys) + 1) {
			node.Labels[keys[rng.IntN(len(keys))]] = vals[rng.IntN(len(vals))]
		}
		switch rng.IntN(6) {
		case 0:
			node.Labels[gpuLabels[rng.IntN(len(gpuLabels))]] = []string{"true", "false", "4"}[rng.IntN(3)]
		case 1:
			node.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
		}
		out = append(out, node)
	}
	return out
}

// positions are the positions, ascending, of the nodes keep accepts.
func positions(nodes []*corev1.Node, keep func(*corev1.Node) bool) []int32 {
	var out []int32
	for i, n := range nodes {
		if keep(n) {
			out = append(out, int32(i))
		}
	}
	return out
}

// TestNodeIndexSelectsAsLabelsSelector (issue 14 item 5): on random fleets
// and selectors, the index finds exactly the nodes that matching every node
// with labels.Selector finds: SUC's selection for Plans (the PlanSelector
// with its hostname and opt-out rules, also on a Node review's changed view),
// every selector operator, the identity-label scan, and the GPU class and
// facts it remembers, carried over from an earlier index.
func TestNodeIndexSelectsAsLabelsSelector(t *testing.T) {
	cfg := DefaultConfig()
	rng := rand.New(rand.NewPCG(14, 5))
	keys := []string{"a", "b", "c", upgradev1.LabelHostname, "plan.upgrade.cattle.io/p"}
	vals := []string{"x", "y", "z", "disabled", "", "1", "7", "true"}
	ops := []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist}
	pick := func(from []string) string { return from[rng.IntN(len(from))] }
	parsed := []string{"", "a", "!a", "a=x", "a==y", "a!=x", "a in (x,y)", "a notin (x)", "a>3", "b<5", "a,b=x", "a=x,b in (y,z),!c", "a=nothing", "c>0,c<9"}

	for round := range 60 {
		nodes := indexFleet(rng, 1+rng.IntN(120), keys, vals)
		x := NewNodeIndex(cfg, nodes, nil)

		t.Run(fmt.Sprintf("fleet-%d", round), func(t *testing.T) {
			for range 40 {
				ls := &metav1.LabelSelector{}
				if rng.IntN(3) == 0 {
					ls.MatchLabels = map[string]string{pick(keys[:3]): pick(vals)}
				}
				for range rng.IntN(4) {
					e := metav1.LabelSelectorRequirement{Key: pick(keys), Operator: ops[rng.IntN(len(ops))]}
					if e.Operator == metav1.LabelSelectorOpIn || e.Operator == metav1.LabelSelectorOpNotIn {
						for range 1 + rng.IntN(3) {
							e.Values = append(e.Values, pick(vals))
						}
					}
					ls.MatchExpressions = append(ls.MatchExpressions, e)
				}
				p := &upgradev1.Plan{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: upgradev1.PlanSpec{NodeSelector: ls}}
				if rng.IntN(10) == 0 {
					p.Spec.NodeSelector = nil
				}
				p.Status.LatestHash = pick(vals)
				s, err := NewPlanSelector(p)
				if err != nil {
					continue // an invalid selector selects nothing either way
				}
				var got []int32
				x.Selecting(s, func(i int32) { got = append(got, i) })
				require.Equal(t, positions(nodes, s.Selects), got, "selector %v", ls)

				// A Node review's view: one node changed (or new).
				changed := nodes[rng.IntN(len(nodes))].DeepCopy()
				if rng.IntN(4) == 0 {
					changed.Name = "new"
				}
				changed.Labels[pick(keys)] = pick(vals)
				v := x.WithNode(changed)
				got = nil
				v.Selecting(s, func(i int32) { got = append(got, i) })
				require.Equal(t, positions(v.Nodes(), s.Selects), got, "selector %v on the view with %s", ls, changed.Name)
				for i, n := range v.Nodes() {
					require.Equal(t, cfg.IsGPUNode(n), v.IsGPU(cfg, int32(i)), n.Name)
				}
			}
			for _, expr := range parsed {
				sel, err := labels.Parse(expr)
				require.NoError(t, err)
				var got []int32
				x.Each(sel, func(i int32) {
					if sel.Matches(labels.Set(nodes[i].Labels)) {
						got = append(got, i)
					}
				})
				require.Equal(t, positions(nodes, func(n *corev1.Node) bool { return sel.Matches(labels.Set(n.Labels)) }), got, expr)
			}
			for _, ids := range [][]string{nil, {"10de:20b5/10de:1533"}} {
				keys := identityLabels(ids)
				var got []int32
				x.WithTrue(keys, func(i int32) { got = append(got, i) })
				require.Equal(t, positions(nodes, func(n *corev1.Node) bool { return anyTrue(n.Labels, keys) }), got, "%v", ids)
			}

			// A later list: some nodes replaced, one gone, one new.
			later := slices.Clone(nodes)
			for range 1 + len(later)/4 {
				i := rng.IntN(len(later))
				c := later[i].DeepCopy()
				c.Labels[labelGPUPresent] = pick([]string{"true", "false"})
				later[i] = c
			}
			later = append(later[1:], indexFleet(rng, 1, keys, vals)[0])
			for _, idx := range []*NodeIndex{x, NewNodeIndex(cfg, later, x)} {
				for i, n := range idx.Nodes() {
					require.Equal(t, cfg.IsGPUNode(n), idx.IsGPU(cfg, int32(i)), n.Name)
					require.Equal(t, cfg.FactsOf(n), idx.FactsOf(cfg, int32(i)), n.Name)
				}
			}
		})
	}
}

// TestClusterIndexUsedOnlyForItsNodes: an index built over other nodes (a
// stale one, or one over a list changed in place) is never used.
func TestClusterIndexUsedOnlyForItsNodes(t *testing.T) {
	cfg := DefaultConfig()
	a := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{upgradev1.LabelHostname: "a", "pool": "x"}}}
	b := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{upgradev1.LabelHostname: "b", "pool": "x"}}}
	cl := &Cluster{Nodes: []*corev1.Node{a}}
	cl.Index = NewNodeIndex(cfg, cl.Nodes, nil)
	require.Same(t, cl.Index, cl.nodeIndex(cfg))
	cl.Nodes[0] = b // in place: same backing array, other node
	require.NotSame(t, cl.Index, cl.nodeIndex(cfg))
	p := &upgradev1.Plan{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: upgradev1.PlanSpec{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "x"}}}}
	s, err := NewPlanSelector(p)
	require.NoError(t, err)
	var got []string
	x := cl.nodeIndex(cfg)
	x.Selecting(s, func(i int32) { got = append(got, x.Node(i).Name) })
	require.Equal(t, []string{"b"}, got)
}

// TestNodeIndexShared: reviews share one index; run with -race, concurrent
// selections, GPU classes and facts agree with a single reader's.
func TestNodeIndexShared(t *testing.T) {
	cfg := DefaultConfig()
	rng := rand.New(rand.NewPCG(3, 4))
	nodes := indexFleet(rng, 300, []string{"a", "b", upgradev1.LabelHostname}, []string{"x", "y", "true"})
	x := NewNodeIndex(cfg, nodes, nil)
	p := &upgradev1.Plan{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: upgradev1.PlanSpec{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "x"}}}}
	s, err := NewPlanSelector(p)
	require.NoError(t, err)
	want := positions(nodes, s.Selects)
	errs := make(chan error, 8*(len(nodes)+1)) // never blocks a reader
	for range 8 {
		go func() {
			var got []int32
			x.Selecting(s, func(i int32) {
				if x.IsGPU(cfg, i) != cfg.IsGPUNode(nodes[i]) || x.FactsOf(cfg, i).Name != nodes[i].Name {
					errs <- fmt.Errorf("node %d remembered wrong", i)
				}
				got = append(got, i)
			})
			if !slices.Equal(want, got) {
				errs <- fmt.Errorf("selected %v, want %v", got, want)
			}
			errs <- nil
		}()
	}
	for range 8 {
		require.NoError(t, <-errs)
	}
}
