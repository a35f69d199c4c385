package fleet

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// The fleet facts the rollout rules read (issue 12: budget, rollouts in
// flight, proof of the nodes at a destination), kept in the node index: a
// snapshot's are worked out once, on first use, and shared by every review
// of that snapshot; a review's view (WithNodes) answers from its base's and
// judges only its own nodes again. Each answer equals a pass over every node
// (TestFleetFactsAsScan).

// fleetFacts are positions, ascending, of GPU nodes.
type fleetFacts struct {
	gpu []int32
	// cordoned: spec.unschedulable; stated: a driver upgrade state other
	// than upgrade-done.
	cordoned, stated []int32
	// down: cordoned, NotReady or with a configured out-of-service taint
	// (Classifier.NodeDown).
	down []int32
	// byHost: by hostname (what SUC writes in status.applying).
	byHost map[string][]int32
	// byHardware: by identity set (NodeFacts.Identities joined by ","), then
	// by the node's part of the tuple.
	byHardware map[string][]tupleNodes
}

// tupleNodes are the nodes of one hardware that run one kernel, RKE2 and
// driver (the cluster-wide versions are the same for all).
type tupleNodes struct {
	kernel, rke2, driver string
	pos                  []int32
}

func isCordoned(n *corev1.Node) bool { return n.Spec.Unschedulable }

// HasDriverState: a driver upgrade state other than upgrade-done.
func HasDriverState(n *corev1.Node) bool {
	s := n.Labels[LabelDriverUpgradeState]
	return s != "" && s != DriverUpgradeDone
}

// Hostname is the node's kubernetes.io/hostname label, else its name.
func Hostname(n *corev1.Node) string {
	if h := n.Labels[upgradev1.LabelHostname]; h != "" {
		return h
	}
	return n.Name
}

// fleet is the base index's fleet facts.
func (x *NodeIndex) fleet(c Classifier) *fleetFacts {
	x.fleetOnce.Do(func() {
		f := &fleetFacts{byHost: map[string][]int32{}, byHardware: map[string][]tupleNodes{}}
		for i, n := range x.nodes {
			p := int32(i)
			if !x.IsGPU(c, p) {
				continue
			}
			f.gpu = append(f.gpu, p)
			if isCordoned(n) {
				f.cordoned = append(f.cordoned, p)
			}
			if HasDriverState(n) {
				f.stated = append(f.stated, p)
			}
			if c.NodeDown(n) {
				f.down = append(f.down, p)
			}
			h := Hostname(n)
			f.byHost[h] = append(f.byHost[h], p)
			nf := x.FactsOf(c, p)
			hw := strings.Join(nf.Identities, ",")
			groups := f.byHardware[hw]
			k := slices.IndexFunc(groups, func(g tupleNodes) bool {
				return g.kernel == nf.Kernel && g.rke2 == nf.RKE2 && g.driver == nf.Driver
			})
			if k < 0 {
				k, groups = len(groups), append(groups, tupleNodes{kernel: nf.Kernel, rke2: nf.RKE2, driver: nf.Driver})
			}
			groups[k].pos = append(groups[k].pos, p)
			f.byHardware[hw] = groups
		}
		x.fleetF = f
	})
	return x.fleetF
}

// viewed is a base answer (ascending positions) on a view: without the
// view's own nodes, then with those of them keep accepts (GPU nodes only).
func (x *NodeIndex) viewed(c Classifier, base []int32, keep func(i int32, n *corev1.Node) bool) []int32 {
	if x.over == nil {
		return base
	}
	out := make([]int32, 0, len(base)+len(x.swaps))
	for _, p := range base {
		if _, own := x.swapped(p); !own {
			out = append(out, p)
		}
	}
	for _, p := range x.swaps {
		if x.IsGPU(c, p) && keep(p, x.nodes[p]) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func (x *NodeIndex) root() *NodeIndex {
	if x.over != nil {
		return x.over
	}
	return x
}

// GPUNodes are the GPU nodes' positions.
func (x *NodeIndex) GPUNodes(c Classifier) []int32 {
	return x.viewed(c, x.root().fleet(c).gpu, func(int32, *corev1.Node) bool { return true })
}

// CordonedGPU are the cordoned GPU nodes.
func (x *NodeIndex) CordonedGPU(c Classifier) []*corev1.Node {
	return x.at(x.viewed(c, x.root().fleet(c).cordoned, func(_ int32, n *corev1.Node) bool { return isCordoned(n) }))
}

// DownGPU are the GPU nodes out by their own object (Classifier.NodeDown).
func (x *NodeIndex) DownGPU(c Classifier) []*corev1.Node {
	return x.at(x.viewed(c, x.root().fleet(c).down, func(_ int32, n *corev1.Node) bool { return c.NodeDown(n) }))
}

// StatedGPU are the GPU nodes with a driver upgrade state other than
// upgrade-done.
func (x *NodeIndex) StatedGPU(c Classifier) []*corev1.Node {
	return x.at(x.viewed(c, x.root().fleet(c).stated, func(_ int32, n *corev1.Node) bool { return HasDriverState(n) }))
}

// GPUByHost is the GPU node of hostname h (the last one, of several), nil
// when there is none.
func (x *NodeIndex) GPUByHost(c Classifier, h string) *corev1.Node {
	pos := x.viewed(c, x.root().fleet(c).byHost[h], func(_ int32, n *corev1.Node) bool { return Hostname(n) == h })
	if len(pos) == 0 {
		return nil
	}
	return x.nodes[pos[len(pos)-1]]
}

// GPUByName is the GPU node of that name, nil when there is none.
func (x *NodeIndex) GPUByName(c Classifier, name string) *corev1.Node {
	if i, ok := x.root().position(name); ok {
		if _, own := x.swapped(i); !own && x.IsGPU(c, i) {
			return x.nodes[i]
		}
	}
	for _, i := range x.swaps {
		if x.nodes[i].Name == name && x.IsGPU(c, i) {
			return x.nodes[i]
		}
	}
	return nil
}

// FactsByName are the facts the index keeps for n (the node of its name,
// this very object), false when it holds another.
func (x *NodeIndex) FactsByName(c Classifier, n *corev1.Node) (NodeFacts, bool) {
	i, ok := x.root().position(n.Name)
	if _, own := x.swapped(i); !ok || own || x.nodes[i] != n {
		for _, j := range x.swaps {
			if x.nodes[j] == n {
				return x.FactsOf(c, j), true
			}
		}
		return NodeFacts{}, false
	}
	return x.FactsOf(c, i), true
}

// GPUOfHardware are the GPU nodes of identity set want whose facts keep
// accepts: keep is asked once per group of nodes of one kernel, RKE2 and
// driver, then for each of a view's own nodes.
func (x *NodeIndex) GPUOfHardware(c Classifier, want []string, keep func(NodeFacts) bool) []*corev1.Node {
	runs := func(nf NodeFacts) bool {
		return slices.Equal(nf.Identities, want) && keep(nf)
	}
	var base []int32
	// No identity holds a comma, so the joined key is the set, unless want
	// holds one: then no node has it.
	if !slices.ContainsFunc(want, func(id string) bool { return strings.Contains(id, ",") }) {
		for _, g := range x.root().fleet(c).byHardware[strings.Join(want, ",")] {
			if runs(NodeFacts{Kernel: g.kernel, RKE2: g.rke2, Driver: g.driver, Identities: want}) {
				base = append(base, g.pos...)
			}
		}
		slices.Sort(base)
	}
	return x.at(x.viewed(c, base, func(i int32, _ *corev1.Node) bool { return runs(x.FactsOf(c, i)) }))
}

func (x *NodeIndex) at(pos []int32) []*corev1.Node {
	out := make([]*corev1.Node, len(pos))
	for i, p := range pos {
		out[i] = x.nodes[p]
	}
	return out
}

// SelectingGPU calls fn with the position of every GPU node s selects
// (nodeSelector, hostname, not opted out), ascending: from the fewer of
// the selector's candidates and the GPU nodes.
func (x *NodeIndex) SelectingGPU(c Classifier, s *PlanSelector, fn func(i int32)) {
	pos, all := x.candidates(s.selector, hostnameExists)
	if gpu := x.GPUNodes(c); all || len(gpu) < len(pos) {
		pos = gpu
	}
	for _, i := range pos {
		if x.IsGPU(c, i) && s.Selects(x.nodes[i]) {
			fn(i)
		}
	}
}
