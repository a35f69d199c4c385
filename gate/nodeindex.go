package gate

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
)

// NodeIndex is the fleet's node index (fleet.NodeIndex): the adapter builds
// one per node list and shares it (Cluster.Index).
type NodeIndex = fleet.NodeIndex

// NodeFacts is what the rules know about one node (fleet.NodeFacts).
type NodeFacts = fleet.NodeFacts

// NewNodeIndex indexes nodes for cfg. prev, when given, is the index of an
// earlier list: what it knew about a node object still in nodes is kept.
func NewNodeIndex(cfg *Config, nodes []*corev1.Node, prev *NodeIndex) *NodeIndex {
	return fleet.NewNodeIndex(cfg, nodes, prev)
}

// The Config is the index's fleet.Classifier.
var _ fleet.Classifier = (*Config)(nil)

// NodeMayHalt: the node shows a halt signal of its own (nodeMayHalt).
func (c *Config) NodeMayHalt(n *corev1.Node) bool { return c.nodeMayHalt(n) }

// nodeMayHalt: the node's own signals, whatever the record: its driver
// upgrade failed, or a GPU-health condition is unhealthy. A node is a
// suspect of halt detection unless haltSignal surely finds nothing on it:
// no SUC Job, not nodeMayHalt, and on the record's source tuple (neither
// half applied nor at the target, where Ready and the validator are
// awaited).
func (c *Config) nodeMayHalt(n *corev1.Node) bool {
	if n.Labels[LabelDriverUpgradeState] == "upgrade-failed" {
		return true
	}
	for _, h := range c.Proof.HealthConditions {
		if fleet.NodeCondition(n, corev1.NodeConditionType(h.Type)).Status == h.UnhealthyStatus {
			return true
		}
	}
	return false
}

// NodeDown: cordoned, NotReady or with an out-of-service taint (nodeDown).
func (c *Config) NodeDown(n *corev1.Node) bool { return c.nodeDown(n) }

// IndexBasis is what the index's per-node answers depend on: the GPU
// vendors, health conditions and out-of-service taints.
func (c *Config) IndexBasis() fleet.Basis {
	return fleet.Basis{Vendors: c.GPUVendors, Health: c.Proof.HealthConditions, Taints: c.OutOfService.Taints}
}

// nodeIndex is the adapter's index when it was built over exactly these
// nodes (pointer for pointer) and configuration, else a new one for this
// call.
func (cl *Cluster) nodeIndex(cfg *Config) *NodeIndex {
	if x := cl.Index; x != nil && sameNodes(x.Nodes(), cl.Nodes) && x.BuiltFor(cfg) {
		return x
	}
	return NewNodeIndex(cfg, cl.Nodes, nil)
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
	view.Nodes = view.Index.Nodes()
	view.View = view.fleetView() // of its own index (and Plans: withPlan)
	return &view
}

// FleetView is what the loaded objects alone say about the fleet
// (fleet.View).
type FleetView = fleet.View

// NewFleetView works the fleet view out from the Cluster's objects: the
// adapters' once per set of objects (Cluster.View).
func NewFleetView(cl *Cluster) *FleetView { return fleet.NewView(viewInputs(cl), jobLive) }

// FleetViewFor is prev when it was built from cl's objects, else a new
// view of them: an adapter that keeps its last view (the webhook, whose
// parts are snapshots per informer event) builds one per event.
func FleetViewFor(cl *Cluster, prev *FleetView) *FleetView {
	return fleet.NextView(prev, viewInputs(cl), jobLive)
}

// viewInputs are the parts of cl a fleet view is built from.
func viewInputs(cl *Cluster) fleet.ViewInputs {
	return fleet.ViewInputs{UpgradeJobs: cl.Proof.UpgradeJobs, Halts: cl.Halts.Halts, Index: cl.Index, Plans: cl.Plans, PlanSelectors: cl.PlanSelectors,
		Records: cl.Records, GPUOperatorImage: cl.GPUOperatorImage, DCGMExporterImage: cl.DCGMExporterImage,
		Validators: cl.Proof.Validators, Unowned: cl.Proof.Unowned, AllocationChecks: cl.Proof.AllocationChecks}
}

// fleetView is the adapter's view when it was built from these objects,
// else one for this call.
func (cl *Cluster) fleetView() *FleetView { return FleetViewFor(cl, cl.View) }

// withNodes is cl with ns written over its nodes (added where new), for a
// review that judges the fleet as those writes leave it.
func (cl *Cluster) withNodes(cfg *Config, ns ...*corev1.Node) *Cluster {
	view := *cl
	view.Index = cl.nodeIndex(cfg).WithNodes(ns...)
	view.Nodes = view.Index.Nodes()
	view.View = view.fleetView()
	return &view
}

// holdsVersion says whether the index holds n's own object version (the
// webhook's cache keeps what the rules read): a review that judges n as
// read live can then judge the index's copy and skip a view of 5,000 nodes
// with n swapped in (WithNodes).
func (cl *Cluster) holdsVersion(cfg *Config, n *corev1.Node) bool {
	return cl.nodeIndex(cfg).Holds(n)
}
