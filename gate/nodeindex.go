package gate

import (
	"slices"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// NodeIndex finds the nodes a selector can match without matching every
// node (issue 14 item 5): per label key a selector uses, the nodes that
// carry the key and, per value, the nodes with that value. A selection
// starts from the narrowest requirement's nodes and matches only those with
// the selector itself, so it is exactly labels.Selector's (and SUC's)
// selection; the index only skips nodes that cannot match.
//
// It also remembers, per node, whether it is a GPU node, its facts and its
// own halt signals: they depend only on the node object and the configured
// GPU vendors and health conditions (builtFor), and an
// informer replaces a node's object on every change, so they carry over
// from the previous index for every node whose object is the same.
//
// Build one per node list (NewNodeIndex) and share it: it is safe for
// concurrent use. Keys are indexed on first use.
type NodeIndex struct {
	nodes   []*corev1.Node
	vendors []string
	health  []HealthCondition
	taints  []string
	// gpu is 0 while unknown, then knownNo or knownYes.
	gpu   []atomic.Int32
	facts []atomic.Pointer[NodeFacts]
	// signals is 0 while unknown, then knownNo or knownYes: whether the node
	// shows a halt signal of its own (nodeMayHalt), looked at by every
	// review's halt detection.
	signals []atomic.Int32

	mu   sync.Mutex
	keys map[string]*keyPostings

	// fleet are the facts the rollout rules read about the whole fleet,
	// built on first use and never changed after (fleet.go); byName the
	// position of each node name, likewise.
	fleetOnce sync.Once
	fleetF    *fleetFacts
	nameOnce  sync.Once
	byName    map[string]int32

	// over, when set, is the index this one equals but for the nodes at
	// positions swaps (ascending; appended when past over's nodes): a
	// review's view of the fleet with some nodes as written or as read live
	// (WithNodes). gpu and facts then hold one slot per swap.
	over  *NodeIndex
	swaps []int32
}

const (
	knownNo  = 1
	knownYes = 2
)

// keyPostings are the positions, ascending, of the nodes that carry a key,
// and of those per value.
type keyPostings struct {
	has     []int32
	byValue map[string][]int32
}

// NewNodeIndex indexes nodes for cfg. prev, when given, is the index of an
// earlier list: what it knew about a node object still in nodes is kept.
func NewNodeIndex(cfg *Config, nodes []*corev1.Node, prev *NodeIndex) *NodeIndex {
	x := &NodeIndex{
		nodes:   slices.Clone(nodes),
		vendors: slices.Clone(cfg.GPUVendors),
		health:  slices.Clone(cfg.Proof.HealthConditions),
		taints:  slices.Clone(cfg.OutOfService.Taints),
		gpu:     make([]atomic.Int32, len(nodes)),
		facts:   make([]atomic.Pointer[NodeFacts], len(nodes)),
		signals: make([]atomic.Int32, len(nodes)),
		keys:    map[string]*keyPostings{},
	}
	if prev == nil || !prev.builtFor(cfg) {
		return x
	}
	at := make(map[*corev1.Node]int, len(prev.nodes))
	for i, n := range prev.nodes {
		at[n] = i
	}
	for i, n := range x.nodes {
		if j, ok := at[n]; ok {
			x.gpu[i].Store(prev.gpu[j].Load())
			x.facts[i].Store(prev.facts[j].Load())
			x.signals[i].Store(prev.signals[j].Load())
		}
	}
	return x
}

// WithNode is WithNodes of one node.
func (x *NodeIndex) WithNode(n *corev1.Node) *NodeIndex { return x.WithNodes(n) }

// WithNodes is the index of the same nodes with each of ns in place of the
// node of its name (added, in order, when there is none; of two with one
// name the later wins), sharing everything known about the others.
func (x *NodeIndex) WithNodes(ns ...*corev1.Node) *NodeIndex {
	base, swaps := x, []int32(nil)
	if x.over != nil { // a view of a view: one view of the base
		base, swaps = x.over, slices.Clone(x.swaps)
	}
	nodes := slices.Clone(x.nodes)
	for _, n := range ns {
		i, ok := base.position(n.Name)
		if !ok {
			i, ok = int32(slices.IndexFunc(nodes[len(base.nodes):], func(m *corev1.Node) bool { return m.Name == n.Name })), true
			if i < 0 {
				i, ok = int32(len(nodes)), false
			} else {
				i += int32(len(base.nodes))
			}
		}
		if ok {
			nodes[i] = n
		} else {
			nodes = append(nodes, n)
		}
		if k, found := slices.BinarySearch(swaps, i); !found {
			swaps = slices.Insert(swaps, k, i)
		}
	}
	return &NodeIndex{nodes: nodes, vendors: x.vendors, health: x.health, taints: x.taints, gpu: make([]atomic.Int32, len(swaps)), facts: make([]atomic.Pointer[NodeFacts], len(swaps)),
		signals: make([]atomic.Int32, len(swaps)), over: base, swaps: swaps}
}

// position is the position of the node of that name in a base index.
func (x *NodeIndex) position(name string) (int32, bool) {
	x.nameOnce.Do(func() {
		x.byName = make(map[string]int32, len(x.nodes))
		for i, n := range x.nodes {
			if _, dup := x.byName[n.Name]; !dup {
				x.byName[n.Name] = int32(i)
			}
		}
	})
	i, ok := x.byName[name]
	return i, ok
}

// swapped says whether the i-th node of a view is one of its own.
func (x *NodeIndex) swapped(i int32) (int, bool) {
	if x.over == nil {
		return 0, false
	}
	return slices.BinarySearch(x.swaps, i)
}

// slot is the index and position that remember the i-th node's GPU class
// and facts.
func (x *NodeIndex) slot(i int32) (*NodeIndex, int32) {
	if x.over == nil {
		return x, i
	}
	if j, ok := x.swapped(i); ok {
		return x, int32(j)
	}
	return x.over, i
}

// nodeIndex is the adapter's index when it was built over exactly these
// nodes (pointer for pointer) and configuration, else a new one for this
// call.
func (cl *Cluster) nodeIndex(cfg *Config) *NodeIndex {
	if x := cl.Index; x != nil && sameNodes(x.nodes, cl.Nodes) && x.builtFor(cfg) {
		return x
	}
	return NewNodeIndex(cfg, cl.Nodes, nil)
}

// builtFor: what the index remembers per node was worked out under cfg's
// GPU vendors, health conditions and out-of-service taints.
func (x *NodeIndex) builtFor(cfg *Config) bool {
	return slices.Equal(x.vendors, cfg.GPUVendors) && slices.Equal(x.health, cfg.Proof.HealthConditions) && slices.Equal(x.taints, cfg.OutOfService.Taints)
}

// sameNodes: the index's own list (a review's cluster holds it once checked,
// indexedCluster; the index never changes it), else equal pointer for pointer.
func sameNodes(indexed, nodes []*corev1.Node) bool {
	if len(indexed) == len(nodes) && (len(nodes) == 0 || &indexed[0] == &nodes[0]) {
		return true
	}
	return slices.Equal(indexed, nodes)
}

// indexedCluster is cl with its node index checked once for the review: its
// Nodes are the index's own list, so later lookups compare no nodes.
func (cl *Cluster) indexedCluster(cfg *Config) *Cluster {
	view := *cl
	view.Index = cl.nodeIndex(cfg)
	view.Nodes = view.Index.nodes
	return &view
}

// withNodes is cl with ns written over its nodes (added where new), for a
// review that judges the fleet as those writes leave it.
func (cl *Cluster) withNodes(cfg *Config, ns ...*corev1.Node) *Cluster {
	view := *cl
	view.Index = cl.nodeIndex(cfg).WithNodes(ns...)
	view.Nodes = view.Index.nodes
	return &view
}

// holdsVersion says whether the index holds n's own object version: the
// node of its name with n's UID and resourceVersion (the API server's same
// write, so the same labels, cordon, conditions, GPU resources and
// nodeInfo: what the rules read, and what the webhook's cache keeps). A
// review that judges n as read live can then judge the index's copy and
// skip a view of 5,000 nodes with n swapped in (WithNodes).
func (cl *Cluster) holdsVersion(cfg *Config, n *corev1.Node) bool {
	x := cl.nodeIndex(cfg)
	if n.ResourceVersion == "" || x.over != nil {
		return false
	}
	i, ok := x.position(n.Name)
	return ok && x.nodes[i].UID == n.UID && x.nodes[i].ResourceVersion == n.ResourceVersion
}

// isGPU is cfg.IsGPUNode of the i-th node, worked out once.
func (x *NodeIndex) isGPU(cfg *Config, i int32) bool {
	m, j := x.slot(i)
	return knownOnce(&m.gpu[j], func() bool { return cfg.IsGPUNode(x.nodes[i]) })
}

// mayHalt is cfg.nodeMayHalt of the i-th node, worked out once.
func (x *NodeIndex) mayHalt(cfg *Config, i int32) bool {
	m, j := x.slot(i)
	return knownOnce(&m.signals[j], func() bool { return cfg.nodeMayHalt(x.nodes[i]) })
}

// knownOnce is f's answer, kept in v (0 while unknown, then knownNo or
// knownYes): worked out once per node object.
func knownOnce(v *atomic.Int32, f func() bool) bool {
	switch v.Load() {
	case knownYes:
		return true
	case knownNo:
		return false
	}
	if f() {
		v.Store(knownYes)
		return true
	}
	v.Store(knownNo)
	return false
}

// factsOf is cfg.FactsOf of the i-th node, worked out once. The facts are
// shared: callers only read them (Identities included).
func (x *NodeIndex) factsOf(cfg *Config, i int32) NodeFacts {
	m, j := x.slot(i)
	if f := m.facts[j].Load(); f != nil {
		return *f
	}
	f := cfg.FactsOf(x.nodes[i])
	m.facts[j].Store(&f)
	return f
}

// postings indexes key on first use: one map lookup per node.
func (x *NodeIndex) postings(key string) *keyPostings {
	x.mu.Lock()
	defer x.mu.Unlock()
	if p, ok := x.keys[key]; ok {
		return p
	}
	p := &keyPostings{byValue: map[string][]int32{}}
	for i, n := range x.nodes {
		if v, ok := n.Labels[key]; ok {
			p.has = append(p.has, int32(i))
			p.byValue[v] = append(p.byValue[v], int32(i))
		}
	}
	x.keys[key] = p
	return p
}

// candidates are the positions, ascending, of the nodes that can match sel:
// every node that matches is among them. all is true when no requirement
// narrows the selection (every node is a candidate).
func (x *NodeIndex) candidates(sel labels.Selector, extra ...labels.Requirement) (pos []int32, all bool) {
	if x.over != nil {
		pos, all = x.over.candidates(sel, extra...)
		return x.withSwaps(pos), all
	}
	reqs, selectable := sel.Requirements()
	if !selectable {
		return nil, false // labels.Nothing()
	}
	best, found := []int32(nil), false
	for _, r := range append(reqs, extra...) {
		var got []int32
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			p := x.postings(r.Key())
			for _, v := range r.ValuesUnsorted() {
				got = append(got, p.byValue[v]...)
			}
			// A node has one value per key, so only a value listed twice
			// (in (x, x)) repeats a node.
			slices.Sort(got)
			got = slices.Compact(got)
		case selection.Exists, selection.GreaterThan, selection.LessThan:
			got = x.postings(r.Key()).has
		default: // NotIn, !=, DoesNotExist: also match nodes without the key
			continue
		}
		if !found || len(got) < len(best) {
			best, found = got, true
		}
	}
	return best, !found
}

// withSwaps adds the swapped nodes' positions to base positions (a superset
// stays a superset: each candidate is matched on the node as written).
func (x *NodeIndex) withSwaps(pos []int32) []int32 {
	out := make([]int32, 0, len(pos)+len(x.swaps))
	j := 0
	for _, p := range pos {
		for j < len(x.swaps) && x.swaps[j] < p {
			out = append(out, x.swaps[j])
			j++
		}
		if j < len(x.swaps) && x.swaps[j] == p {
			j++
		}
		out = append(out, p)
	}
	return append(out, x.swaps[j:]...)
}

// each calls fn with the position of every candidate of sel, ascending.
func (x *NodeIndex) each(sel labels.Selector, fn func(i int32), extra ...labels.Requirement) {
	pos, all := x.candidates(sel, extra...)
	if all {
		for i := range x.nodes {
			fn(int32(i))
		}
		return
	}
	for _, i := range pos {
		fn(i)
	}
}

// hostnameExists is SUC's kubernetes.io/hostname requirement, which every
// Plan selection adds to its nodeSelector.
var hostnameExists = func() labels.Requirement {
	r, err := labels.NewRequirement(upgradev1.LabelHostname, selection.Exists, nil)
	if err != nil {
		panic(err)
	}
	return *r
}()

// selecting calls fn with the position of every node s selects (nodeSelector,
// hostname, not opted out), ascending.
func (x *NodeIndex) selecting(s *PlanSelector, fn func(i int32)) {
	if x.over != nil { // a view: the base's lists do not hold the changed node
		x.each(s.selector, func(i int32) {
			if s.selects(x.nodes[i]) {
				fn(i)
			}
		}, hostnameExists)
		return
	}
	// s.selects, with the hostname and opt-out labels read from their lists
	// (both ascending, walked along the candidates) instead of each node's
	// labels: selecting every node then reads no node's labels.
	reqs, _ := s.selector.Requirements()
	host := x.postings(upgradev1.LabelHostname).has
	optedOut := x.postings(s.label).byValue[upgradev1.LabelPlanValueDisabled]
	h, o := 0, 0
	x.each(s.selector, func(i int32) {
		for h < len(host) && host[h] < i {
			h++
		}
		for o < len(optedOut) && optedOut[o] < i {
			o++
		}
		switch {
		case h == len(host) || host[h] != i, o < len(optedOut) && optedOut[o] == i:
			return
		case len(reqs) > 0 && !s.selector.Matches(labels.Set(x.nodes[i].Labels)):
			return
		}
		fn(i)
	}, hostnameExists)
}

// withTrue calls fn with the position of every node on which one of keys is
// "true" (anyTrue), ascending; every node when keys is nil.
func (x *NodeIndex) withTrue(keys []string, fn func(i int32)) {
	if keys == nil {
		for i := range x.nodes {
			fn(int32(i))
		}
		return
	}
	for _, i := range x.trueOn(keys) {
		fn(i)
	}
}

// trueOn are the positions, ascending, of the nodes on which one of keys is
// "true" (with the swapped node, for an overlay).
func (x *NodeIndex) trueOn(keys []string) []int32 {
	if x.over != nil {
		return x.withSwaps(x.over.trueOn(keys))
	}
	var pos []int32
	for _, k := range keys {
		pos = append(pos, x.postings(k).byValue["true"]...)
	}
	slices.Sort(pos)
	return slices.Compact(pos)
}
