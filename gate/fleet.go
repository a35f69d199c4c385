package gate

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
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
	// (Config.nodeDown).
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

// hasDriverState: a driver upgrade state other than upgrade-done.
func hasDriverState(n *corev1.Node) bool {
	s := n.Labels[LabelDriverUpgradeState]
	return s != "" && s != driverUpgradeDone
}

// fleet is the base index's fleet facts.
func (x *NodeIndex) fleet(cfg *Config) *fleetFacts {
	x.fleetOnce.Do(func() {
		f := &fleetFacts{byHost: map[string][]int32{}, byHardware: map[string][]tupleNodes{}}
		for i, n := range x.nodes {
			p := int32(i)
			if !x.isGPU(cfg, p) {
				continue
			}
			f.gpu = append(f.gpu, p)
			if isCordoned(n) {
				f.cordoned = append(f.cordoned, p)
			}
			if hasDriverState(n) {
				f.stated = append(f.stated, p)
			}
			if cfg.nodeDown(n) {
				f.down = append(f.down, p)
			}
			h := hostname(n)
			f.byHost[h] = append(f.byHost[h], p)
			nf := x.factsOf(cfg, p)
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
func (x *NodeIndex) viewed(cfg *Config, base []int32, keep func(i int32, n *corev1.Node) bool) []int32 {
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
		if x.isGPU(cfg, p) && keep(p, x.nodes[p]) {
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

// gpuNodes are the GPU nodes' positions.
func (x *NodeIndex) gpuNodes(cfg *Config) []int32 {
	return x.viewed(cfg, x.root().fleet(cfg).gpu, func(int32, *corev1.Node) bool { return true })
}

// cordonedGPU are the cordoned GPU nodes.
func (x *NodeIndex) cordonedGPU(cfg *Config) []*corev1.Node {
	return x.at(x.viewed(cfg, x.root().fleet(cfg).cordoned, func(_ int32, n *corev1.Node) bool { return isCordoned(n) }))
}

// downGPU are the GPU nodes out by their own object (Config.nodeDown).
func (x *NodeIndex) downGPU(cfg *Config) []*corev1.Node {
	return x.at(x.viewed(cfg, x.root().fleet(cfg).down, func(_ int32, n *corev1.Node) bool { return cfg.nodeDown(n) }))
}

// statedGPU are the GPU nodes with a driver upgrade state other than
// upgrade-done.
func (x *NodeIndex) statedGPU(cfg *Config) []*corev1.Node {
	return x.at(x.viewed(cfg, x.root().fleet(cfg).stated, func(_ int32, n *corev1.Node) bool { return hasDriverState(n) }))
}

// gpuByHost is the GPU node of hostname h (the last one, of several), nil
// when there is none.
func (x *NodeIndex) gpuByHost(cfg *Config, h string) *corev1.Node {
	pos := x.viewed(cfg, x.root().fleet(cfg).byHost[h], func(_ int32, n *corev1.Node) bool { return hostname(n) == h })
	if len(pos) == 0 {
		return nil
	}
	return x.nodes[pos[len(pos)-1]]
}

// gpuByName is the GPU node of that name, nil when there is none.
func (x *NodeIndex) gpuByName(cfg *Config, name string) *corev1.Node {
	if i, ok := x.root().position(name); ok {
		if _, own := x.swapped(i); !own && x.isGPU(cfg, i) {
			return x.nodes[i]
		}
	}
	for _, i := range x.swaps {
		if x.nodes[i].Name == name && x.isGPU(cfg, i) {
			return x.nodes[i]
		}
	}
	return nil
}

// factsByName are the facts the index keeps for n (the node of its name,
// this very object), false when it holds another.
func (x *NodeIndex) factsByName(cfg *Config, n *corev1.Node) (NodeFacts, bool) {
	i, ok := x.root().position(n.Name)
	if _, own := x.swapped(i); !ok || own || x.nodes[i] != n {
		for _, j := range x.swaps {
			if x.nodes[j] == n {
				return x.factsOf(cfg, j), true
			}
		}
		return NodeFacts{}, false
	}
	return x.factsOf(cfg, i), true
}

// gpuAt are the GPU nodes of identity set want that run dest, where op and
// dcgm are the cluster's versions.
func (x *NodeIndex) gpuAt(cfg *Config, want []string, dest *qualification.Tuple, op, dcgm string) []*corev1.Node {
	runs := func(nf NodeFacts) bool {
		return slices.Equal(nf.Identities, want) && SameTuple(nf.current(op, dcgm), *dest)
	}
	var base []int32
	// No identity holds a comma, so the joined key is the set, unless want
	// holds one: then no node has it.
	if !slices.ContainsFunc(want, func(id string) bool { return strings.Contains(id, ",") }) {
		for _, g := range x.root().fleet(cfg).byHardware[strings.Join(want, ",")] {
			if runs(NodeFacts{Kernel: g.kernel, RKE2: g.rke2, Driver: g.driver, Identities: want}) {
				base = append(base, g.pos...)
			}
		}
		slices.Sort(base)
	}
	return x.at(x.viewed(cfg, base, func(i int32, _ *corev1.Node) bool { return runs(x.factsOf(cfg, i)) }))
}

func (x *NodeIndex) at(pos []int32) []*corev1.Node {
	out := make([]*corev1.Node, len(pos))
	for i, p := range pos {
		out[i] = x.nodes[p]
	}
	return out
}

// selectingGPU calls fn with the position of every GPU node s selects
// (nodeSelector, hostname, not opted out), ascending: from the fewer of
// the selector's candidates and the GPU nodes.
func (x *NodeIndex) selectingGPU(cfg *Config, s *PlanSelector, fn func(i int32)) {
	pos, all := x.candidates(s.selector, hostnameExists)
	if gpu := x.gpuNodes(cfg); all || len(gpu) < len(pos) {
		pos = gpu
	}
	for _, i := range pos {
		if x.isGPU(cfg, i) && s.selects(x.nodes[i]) {
			fn(i)
		}
	}
}
