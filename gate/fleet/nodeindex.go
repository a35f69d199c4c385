package fleet

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
	nodes []*corev1.Node
	basis Basis
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

// NewNodeIndex indexes nodes for c. prev, when given, is the index of an
// earlier list: what it knew about a node object still in nodes is kept.
func NewNodeIndex(c Classifier, nodes []*corev1.Node, prev *NodeIndex) *NodeIndex {
	x := &NodeIndex{
		nodes:   slices.Clone(nodes),
		basis:   c.IndexBasis().clone(),
		gpu:     make([]atomic.Int32, len(nodes)),
		facts:   make([]atomic.Pointer[NodeFacts], len(nodes)),
		signals: make([]atomic.Int32, len(nodes)),
		keys:    map[string]*keyPostings{},
	}
	if prev == nil || !prev.BuiltFor(c) {
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
	return &NodeIndex{nodes: nodes, basis: x.basis, gpu: make([]atomic.Int32, len(swaps)), facts: make([]atomic.Pointer[NodeFacts], len(swaps)),
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

// BuiltFor: what the index remembers per node was worked out under c's
// basis (GPU vendors, health conditions, out-of-service taints).
func (x *NodeIndex) BuiltFor(c Classifier) bool { return x.basis.equal(c.IndexBasis()) }

// Nodes is the indexed list, the index's own: callers only read it.
func (x *NodeIndex) Nodes() []*corev1.Node { return x.nodes }

// Node is the i-th node.
func (x *NodeIndex) Node(i int32) *corev1.Node { return x.nodes[i] }

// IsView: the index is a review's view of another (WithNodes).
func (x *NodeIndex) IsView() bool { return x.over != nil }

// Holds says whether the index holds n's own object version: the node of
// its name with n's UID and resourceVersion (the API server's same write, so
// the same labels, cordon, conditions, GPU resources and nodeInfo). Never
// for a view.
func (x *NodeIndex) Holds(n *corev1.Node) bool {
	if n.ResourceVersion == "" || x.over != nil {
		return false
	}
	i, ok := x.position(n.Name)
	return ok && x.nodes[i].UID == n.UID && x.nodes[i].ResourceVersion == n.ResourceVersion
}

// IsGPU is c.IsGPUNode of the i-th node, worked out once.
func (x *NodeIndex) IsGPU(c Classifier, i int32) bool {
	m, j := x.slot(i)
	return knownOnce(&m.gpu[j], func() bool { return c.IsGPUNode(x.nodes[i]) })
}

// MayHalt is c.NodeMayHalt of the i-th node, worked out once.
func (x *NodeIndex) MayHalt(c Classifier, i int32) bool {
	m, j := x.slot(i)
	return knownOnce(&m.signals[j], func() bool { return c.NodeMayHalt(x.nodes[i]) })
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

// FactsOf is c.FactsOf of the i-th node, worked out once. The facts are
// shared: callers only read them (Identities included).
func (x *NodeIndex) FactsOf(c Classifier, i int32) NodeFacts {
	m, j := x.slot(i)
	if f := m.facts[j].Load(); f != nil {
		return *f
	}
	f := c.FactsOf(x.nodes[i])
	m.facts[j].Store(&f)
	return f
}

// WithValue are the positions, ascending, of the base index's nodes whose
// label key has value v (none for a view: ask its base).
func (x *NodeIndex) WithValue(key, v string) []int32 {
	if x.over != nil {
		return nil
	}
	return x.postings(key).byValue[v]
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

// Each calls fn with the position of every candidate of sel, ascending.
func (x *NodeIndex) Each(sel labels.Selector, fn func(i int32), extra ...labels.Requirement) {
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

// Selecting calls fn with the position of every node s selects (nodeSelector,
// hostname, not opted out), ascending.
func (x *NodeIndex) Selecting(s *PlanSelector, fn func(i int32)) {
	if x.over != nil { // a view: the base's lists do not hold the changed node
		x.Each(s.selector, func(i int32) {
			if s.Selects(x.nodes[i]) {
				fn(i)
			}
		}, hostnameExists)
		return
	}
	reqs, selectable := s.selector.Requirements()
	if !selectable {
		return // labels.Nothing()
	}
	// s.Selects from the postings alone: each requirement is membership (or
	// not) in an ascending list, walked along the shortest list a node must
	// be in, so no node's labels are read (matching each candidate's labels
	// with the selector was a third of a Plan create's CPU). A requirement
	// no list answers (Gt, Lt: not in a LabelSelector) is matched per node.
	walks := make([]postingWalk, 0, len(reqs)+2)
	walks = append(walks, postingWalk{list: x.postings(upgradev1.LabelHostname).has, in: true},
		postingWalk{list: x.postings(s.label).byValue[upgradev1.LabelPlanValueDisabled]})
	matchEach := false
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			walks = append(walks, postingWalk{list: x.withValues(r), in: true})
		case selection.NotEquals, selection.NotIn: // also nodes without the key
			walks = append(walks, postingWalk{list: x.withValues(r)})
		case selection.Exists:
			walks = append(walks, postingWalk{list: x.postings(r.Key()).has, in: true})
		case selection.DoesNotExist:
			walks = append(walks, postingWalk{list: x.postings(r.Key()).has})
		default:
			matchEach = true
		}
	}
	lead := 0 // the hostname's, unless a shorter list must hold the node
	for k, w := range walks {
		if w.in && len(w.list) < len(walks[lead].list) {
			lead = k
		}
	}
nodes:
	for _, i := range walks[lead].list {
		for k := range walks {
			if k != lead && walks[k].holds(i) != walks[k].in {
				continue nodes
			}
		}
		if matchEach && !s.selector.Matches(labels.Set(x.nodes[i].Labels)) {
			continue
		}
		fn(i)
	}
}

// postingWalk asks whether ascending positions are in list (in: a selected
// node must be; else it must not be), moving along list as the positions
// grow.
type postingWalk struct {
	list []int32
	at   int
	in   bool
}

// holds says whether i is in the list; i must not be below the last asked.
func (w *postingWalk) holds(i int32) bool {
	for w.at < len(w.list) && w.list[w.at] < i {
		w.at++
	}
	return w.at < len(w.list) && w.list[w.at] == i
}

// withValues are the positions, ascending, of the nodes whose label r.Key()
// has one of r's values (the index's own list for one value: read only).
func (x *NodeIndex) withValues(r labels.Requirement) []int32 {
	p := x.postings(r.Key())
	vals := r.ValuesUnsorted()
	if len(vals) == 1 {
		return p.byValue[vals[0]]
	}
	var out []int32
	for _, v := range vals {
		out = append(out, p.byValue[v]...)
	}
	// A node has one value per key, so only a value listed twice repeats it.
	slices.Sort(out)
	return slices.Compact(out)
}

// WithTrue calls fn with the position of every node on which one of keys is
// "true" , ascending; every node when keys is nil.
func (x *NodeIndex) WithTrue(keys []string, fn func(i int32)) {
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
