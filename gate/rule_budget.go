package gate

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// The disruption budget (issue 12 item 4): how many GPU nodes may be out
// for an upgrade at once, across every rollout path (SUC Plans, the GPU
// Operator's driver reloads) and whatever else already took nodes out.

// BudgetConfig is the `budget` section of the config. Every limit that
// applies to a node holds at once: the cluster-wide one always, a
// hardware's and a zone's when configured (they can only be tighter).
type BudgetConfig struct {
	// MaxUnavailable bounds the GPU nodes out at once, cluster-wide.
	MaxUnavailable int              `json:"maxUnavailable"`
	Hardware       []HardwareBudget `json:"hardware,omitempty"`
	Zones          []ZoneBudget     `json:"zones,omitempty"`
}

// HardwareBudget bounds the nodes of one GPU identity set out at once.
type HardwareBudget struct {
	// Hardware is the identity set as records name it (vendor:device/subvendor:subdevice).
	Hardware       []string `json:"hardware"`
	MaxUnavailable int      `json:"maxUnavailable"`
}

// ZoneBudget bounds the GPU nodes of one topology.kubernetes.io/zone out at once.
type ZoneBudget struct {
	Zone           string `json:"zone"`
	MaxUnavailable int    `json:"maxUnavailable"`
}

// DefaultBudgetConfig: one GPU node out at a time.
func DefaultBudgetConfig() BudgetConfig { return BudgetConfig{MaxUnavailable: 1} }

func (b *BudgetConfig) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if b.MaxUnavailable < 1 {
		errs = append(errs, field.Invalid(path.Child("maxUnavailable"), b.MaxUnavailable, "expected a count of 1 or more (1: one GPU node out for an upgrade at a time)"))
	}
	limit := func(p *field.Path, v int) {
		if v < 1 || v > b.MaxUnavailable {
			errs = append(errs, field.Invalid(p, v, fmt.Sprintf("expected a count from 1 to budget.maxUnavailable (%d): the cluster-wide limit holds too, so a larger one would have no effect", b.MaxUnavailable)))
		}
	}
	seen := map[string]bool{}
	for i, h := range b.Hardware {
		p := path.Child("hardware").Index(i)
		if len(h.Hardware) == 0 {
			errs = append(errs, field.Required(p.Child("hardware"), "the GPU identity set, e.g. [10de:1db6/10de:124a]"))
		}
		for j, id := range h.Hardware {
			if !qualification.IsHardwareID(id) {
				errs = append(errs, field.Invalid(p.Child("hardware").Index(j), id, qualification.HardwareExpected))
			}
		}
		if k := hardwareSetKey(h.Hardware); seen[k] {
			errs = append(errs, field.Duplicate(p.Child("hardware"), strings.Join(h.Hardware, ",")))
		} else {
			seen[k] = true
		}
		limit(p.Child("maxUnavailable"), h.MaxUnavailable)
	}
	zones := map[string]bool{}
	for i, z := range b.Zones {
		p := path.Child("zones").Index(i)
		if msgs := validation.IsValidLabelValue(z.Zone); z.Zone == "" || len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("zone"), z.Zone, "expected a "+LabelZone+" label value, e.g. eu-west-1a"))
		} else if zones[z.Zone] {
			errs = append(errs, field.Duplicate(p.Child("zone"), z.Zone))
		}
		zones[z.Zone] = true
		limit(p.Child("maxUnavailable"), z.MaxUnavailable)
	}
	return errs
}

// hardwareSetKey spells an identity set in one order.
func hardwareSetKey(ids []string) string {
	s := slices.Clone(ids)
	slices.Sort(s)
	return strings.Join(slices.Compact(s), ",")
}

// driverUpgradeRequired: queued by the operator, still serving
// (fleet.DriverUpgradeRequired).
const driverUpgradeRequired = fleet.DriverUpgradeRequired

// outNode is a GPU node out for an upgrade, and why it counts.
type outNode struct {
	name, host, zone, hardware string
	why                        []string
	// later names why the node object says it is out (Config.downReasons),
	// worked out only when a message shows the node.
	later func() []string
}

func (o *outNode) String() string {
	why := o.why
	if o.later != nil {
		why = append(slices.Clone(why), o.later()...)
	}
	return o.name + " (" + strings.Join(why, "; ") + ")"
}

// outView says which review counts: per-node steps do not count the nodes
// that wait at the same kind of step, or two waiting nodes would hold each
// other forever.
type outView struct {
	// driverStep: the GPU Operator's reload step. A node in a driver state
	// before the reload (cordon-required .. drain-required,
	// node-maintenance-required) waits at this very step and does not
	// count; one reloading or after (DriverReloadingStates) does.
	driverStep bool
	// sucStep is the Plan of SUC's Job start. A node in another Plan's
	// status.applying whose Job has not started and that is not cordoned
	// waits at this very step: it counts only when its Plan is older (the
	// creation time, then the name, breaks the tie), so of two Plans
	// admitted in the same instant the older one starts first.
	sucStep *upgradev1.Plan
}

// DriverReloadingStates are the driver upgrade states of a node whose
// driver reload has started and not finished (upgrade-failed included: its
// reload did not complete, and the operator moves it on once the driver
// Pod is Ready).
var DriverReloadingStates = []string{"pod-restart-required", "post-maintenance-required", "validation-required", "uncordon-required", "upgrade-failed"}

// unavailableIn are the GPU nodes out now (issue 22: for an upgrade or
// any other reason, addOutFacts): in a Plan's
// status.applying (SUC cordons, drains and upgrades it); in a driver
// upgrade state past the queue (anything but absent, upgrade-required and
// upgrade-done); cordoned and NotReady; cordoned at the destination tuple
// of a stored Plan's record and not proven (the node waits for its proof).
// A node at a destination that is schedulable again serves its tenants:
// only a proven node is uncordoned (UncordonBeforeProof), and its proof
// may lapse later (the allocation Pod is deleted) without taking it out.
func (c *Config) unavailableIn(cl *Cluster, fs *fleetScan, now time.Time, d *Decision, v outView) map[string]*outNode {
	out := map[string]*outNode{}
	idx := cl.nodeIndex(c)
	node := func(n *corev1.Node) *outNode {
		o := out[n.Name]
		if o == nil {
			f, ok := idx.FactsByName(c, n)
			if !ok {
				f = c.FactsOf(n)
			}
			o = &outNode{name: n.Name, host: hostname(n), zone: f.Zone, hardware: hardwareSetKey(f.Identities)}
			out[n.Name] = o
		}
		return o
	}
	add := func(n *corev1.Node, why string) { o := node(n); o.why = append(o.why, why) }
	for _, n := range fs.stated {
		state := n.Labels[LabelDriverUpgradeState]
		if !slices.Contains(DriverStatesNotOut, state) && (!v.driverStep || slices.Contains(DriverReloadingStates, state)) {
			add(n, "driver upgrade state "+state)
		}
	}
	for _, n := range fs.cordoned {
		if !isReady(n) {
			add(n, "cordoned and NotReady")
		}
	}
	dests := map[*qualification.Tuple]bool{}
	for _, p := range cl.Plans {
		for _, h := range p.Status.Applying {
			if n := fs.byHost(h); n != nil && (v.sucStep == nil || n.Spec.Unschedulable || jobStarted(cl, p, n.Name) || older(p, v.sucStep)) {
				add(n, "in status.applying of Plan "+p.Namespace+"/"+p.Name)
			}
		}
		dest, id := planDestination(cl, p)
		if dest == nil || dests[dest] || len(fs.cordoned) == 0 {
			continue
		}
		dests[dest] = true
		for _, n := range nodesAt(c, cl, cl.Records[p.Annotations[AnnotationQualification]].Record, dest) {
			if !n.Spec.Unschedulable {
				continue
			}
			if pr := c.Prove(cl, n, now); !pr.Proven() {
				d.noteProof(c, pr)
				add(n, fmt.Sprintf("cordoned at the destination tuple of record %s, not proven: %s", id, strings.Join(pr.Missing, ", ")))
			}
		}
	}
	c.addOutFacts(cl, fs, v, add, func(n *corev1.Node) {
		node(n).later = func() []string { return c.downReasons(cl, n) }
	}, func(name string) bool { return out[name] != nil })
	return out
}

// fleetScan is what the rollout rules read about the fleet, from the node
// index's fleet facts (gate/fleet) instead of a pass over every node.
type fleetScan struct {
	// stated are the GPU nodes with a driver upgrade state other than
	// upgrade-done, cordoned the cordoned GPU nodes.
	stated, cordoned []*corev1.Node
	// down are the GPU nodes out by their own object (Config.nodeDown).
	down []*corev1.Node
	// byHost is the GPU node of a hostname some Plan's status.applying
	// names (by its hostname label, else by its name: a rewritten label
	// does not hide it), nil for none.
	byHost func(host string) *corev1.Node
}

func (c *Config) scanFleet(cl *Cluster) *fleetScan {
	idx := cl.nodeIndex(c)
	return &fleetScan{stated: idx.StatedGPU(c), cordoned: idx.CordonedGPU(c), down: idx.DownGPU(c),
		byHost: func(h string) *corev1.Node {
			if n := idx.GPUByHost(c, h); n != nil {
				return n
			}
			return idx.GPUByName(c, h)
		}}
}

// jobStarted: SUC's Job of Plan p for node runs or ran (the view's Jobs
// for the node, not a scan of every Job).
func jobStarted(cl *Cluster, p *upgradev1.Plan, node string) bool {
	for _, j := range sucJobsFor(cl, node) {
		if j.Namespace == p.Namespace && j.Labels[upgradev1.LabelPlan] == p.Name && fleet.JobRan(j) {
			return true
		}
	}
	return false
}

// older orders Plans by creation, then namespace/name.
func older(a, b *upgradev1.Plan) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}

// hostname is what SUC writes in status.applying for a node.
func hostname(n *corev1.Node) string { return fleet.Hostname(n) }

// budgetScope is one limit and the nodes it counts.
type budgetScope struct {
	what, key string
	limit     int
	member    func(*outNode) bool
}

// scopes are the limits that apply to a node.
func (b *BudgetConfig) scopes(f NodeFacts) []budgetScope {
	out := []budgetScope{{what: "across all GPU nodes", key: "budget.maxUnavailable", limit: b.MaxUnavailable, member: func(*outNode) bool { return true }}}
	hw := hardwareSetKey(f.Identities)
	for i, h := range b.Hardware {
		if k := hardwareSetKey(h.Hardware); k == hw {
			out = append(out, budgetScope{what: "of hardware " + k, key: fmt.Sprintf("budget.hardware[%d].maxUnavailable", i), limit: h.MaxUnavailable,
				member: func(o *outNode) bool { return o.hardware == k }})
		}
	}
	for i, z := range b.Zones {
		if z.Zone == f.Zone {
			zone := z.Zone
			out = append(out, budgetScope{what: "in zone " + zone, key: fmt.Sprintf("budget.zones[%d].maxUnavailable", i), limit: z.MaxUnavailable,
				member: func(o *outNode) bool { return o.zone == zone }})
		}
	}
	return out
}

// budgetCheck is one review's use of the budget.
type budgetCheck struct {
	// candidates are the nodes the review would take out next; one already
	// out adds nothing.
	candidates []NodeFacts
	// own are nodes (by name or hostname) the review itself holds, so they
	// do not count against it: the node of a per-node step, a Plan's own
	// status.applying (SUC starts its next node only once those are done).
	own  []string
	node string
	path *field.Path
	view outView
}

// budgetRule (review-level, Plans, per-node steps and the driver path):
// taking any one candidate out must keep every limit that applies to it.
func (c *Config) budgetRule(f *findings, cl *Cluster, fs *fleetScan, now time.Time, d *Decision, bc budgetCheck) {
	out := c.unavailableIn(cl, fs, now, d, bc.view)
	isOwn := func(o *outNode) bool { return slices.Contains(bc.own, o.name) || slices.Contains(bc.own, o.host) }
	type hit struct {
		scope      budgetScope
		candidates []string
		counted    []*outNode
	}
	var hits []*hit
	byKey := map[string]*hit{}
	var uncounted []string
	for _, cand := range bc.candidates {
		if o := out[cand.Name]; o != nil && !isOwn(o) {
			continue // already out: taking it adds nothing
		}
		uncounted = append(uncounted, cand.Name)
		for _, s := range c.Budget.scopes(cand) {
			var counted []*outNode
			for _, o := range out {
				if o.name != cand.Name && !isOwn(o) && s.member(o) {
					counted = append(counted, o)
				}
			}
			if len(counted)+1 <= s.limit {
				continue
			}
			h := byKey[s.key]
			if h == nil {
				slices.SortFunc(counted, func(a, b *outNode) int { return strings.Compare(a.name, b.name) })
				h = &hit{scope: s, counted: counted}
				byKey[s.key] = h
				hits = append(hits, h)
			}
			h.candidates = append(h.candidates, cand.Name)
		}
	}
	for _, h := range hits {
		f.add(disruptionBudgetExceeded(bc.node, bc.path, h.candidates, h.scope.what, h.scope.key, h.scope.limit, h.counted))
	}
	// Another requestor's maintenance may have nodes out the count above
	// could not see: a node taken out now fails closed; a node already out
	// consumes nothing, and reviews that take none out never get here.
	if cl.NodeMaintenancesErr != nil && len(uncounted) > 0 {
		f.add(factsMissing(bc.node, bc.path, nodeList(uncounted), fromMaintenance, cl.NodeMaintenancesErr))
	}
}

// disruptionBudgetExceeded builds every DisruptionBudgetExceeded blocker.
func disruptionBudgetExceeded(node string, path *field.Path, candidates []string, scope, key string, limit int, counted []*outNode) Blocker {
	shown := make([]string, len(counted))
	for i, o := range counted {
		shown[i] = o.String()
	}
	return forbidden(CodeDisruptionBudgetExceeded, node, path, "taking GPU node %s out now would make %d GPU nodes unavailable at once %s, above the budget of %d (%s); already out: %s; wait until they are back (Ready, uncordoned, proven, driver upgrade-done) and retry",
		nodeList(candidates), len(counted)+1, scope, limit, key, nodeList(shown))
}
