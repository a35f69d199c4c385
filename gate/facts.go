package gate

import (
	corev1 "k8s.io/api/core/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/precondition"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Label keys the facts come from (reference/labels.md): package fleet's.
const (
	nfdPrefix          = fleet.NFDPrefix
	labelPCIPrefix     = fleet.LabelPCIPrefix
	labelKernelFull    = fleet.LabelKernelFull
	labelGPUPresent    = fleet.LabelGPUPresent
	labelDriverFull    = fleet.LabelDriverFull
	labelDriverMajor   = fleet.LabelDriverMajor
	labelDriverMinor   = fleet.LabelDriverMinor
	labelDriverRev     = fleet.LabelDriverRev
	labelOldDriverMaj  = fleet.LabelOldDriverMaj
	labelOldDriverMin  = fleet.LabelOldDriverMin
	labelOldDriverRev  = fleet.LabelOldDriverRev
	labelControlPlane  = fleet.LabelControlPlane
	nodeFeatureRuleDoc = "install the chart's NodeFeatureRule (nodeFeatureRule.enabled=true), which publishes feature.node.kubernetes.io/pci-<vendor>_<device>_<subvendor>_<subdevice>.present labels without changing NFD's deviceLabelFields"
)

// Cluster is the state the rules read. Adapters fill it from informer caches
// (webhook) or from a snapshot file (CLI); the engine never fetches.
type Cluster struct {
	Nodes []*corev1.Node
	// Plans in the SUC namespaces, for Node reviews.
	Plans []*upgradev1.Plan
	// PlanSelectors, when set, holds NewPlanSelector(Plans[i]) at index i
	// (nil entries are converted on use): the webhook keeps them per
	// resourceVersion so a Node review does not convert 50 selectors.
	PlanSelectors []*PlanSelector
	// Records by ConfigMap name, from labelled ConfigMaps of the gate's
	// namespace only.
	Records map[string]RecordEntry
	// ServerVersion is the API server's gitVersion.
	ServerVersion string
	// GPUOperatorImage and DCGMExporterImage are the images of the configured
	// workloads; empty when the workload was not found.
	GPUOperatorImage  string
	DCGMExporterImage string
	// Versions, when set, are VersionsOf those two images: the adapter's,
	// read once per change of the images (used only while they match).
	Versions *WorkloadVersions
	// Proof holds the objects proofs of upgraded nodes read (fleet/nodeproof.go).
	Proof ProofFacts
	// Index, when set, is NewNodeIndex over Nodes: the webhook keeps one per
	// node list. The engine uses it only when it holds exactly Nodes, and
	// otherwise indexes Nodes for the one review.
	Index *NodeIndex
	// View, when set, is NewFleetView of this Cluster: the adapters build
	// one per change of what it is built from (the webhook per informer
	// event, the CLI per snapshot). The engine uses it only when it was
	// built from exactly these objects, and otherwise builds one for the
	// review.
	View *FleetView
	// Halts is the halt record (haltrecord.go).
	Halts HaltRecord
	// CreationGates are the configured creation gates as read
	// (fleet/creationgate.go).
	CreationGates []GateReading
	// EtcdSnapshots are RKE2's ETCDSnapshotFiles (rule_etcdsnapshot.go);
	// the webhook reads them live for the one review that needs them.
	EtcdSnapshots EtcdSnapshots
	// NodeMaintenances are the maintenance operator's requests, where the
	// cluster serves them (nodemaintenance.go).
	NodeMaintenances []NodeMaintenance
	// NodeMaintenancesErr says why they cannot be read (their watch failed,
	// their cache has not synced, one is malformed); nil when they were.
	// Only a move that consumes the budget fails closed on it (budgetRule):
	// every other review reads no maintenance.
	NodeMaintenancesErr error
	// Preconditions are the declared preconditions as read
	// (rule_precondition.go): a CEL one evaluated over its watched objects,
	// an alerts one as its poller last read it.
	Preconditions []precondition.Reading
}

// FactsOf reads a node's facts from its labels and status (fleet.FactsOf).
func (c *Config) FactsOf(n *corev1.Node) NodeFacts { return fleet.FactsOf(c.GPUVendors, n) }

// The node readers the rules share, package fleet's.
func isReady(n *corev1.Node) bool                         { return fleet.IsReady(n) }
func identityLabels(identities []string) []string         { return fleet.IdentityLabels(identities) }
func anyTrue(l map[string]string, keys []string) bool     { return fleet.AnyTrue(l, keys) }
func parsePCILabel(s string) (id, vendor string, ok bool) { return fleet.ParsePCILabel(s) }
func isClass(s string) bool                               { return fleet.IsClass(s) }
func isHex(s string) bool                                 { return fleet.IsHex(s) }
func hasKey(m map[string]string, k string) bool           { return fleet.HasKey(m, k) }

// keyChanged: key k of a (after) and b (before) differs in value or in
// presence (set to "" is not absent).
func keyChanged(a, b map[string]string, k string) bool {
	return a[k] != b[k] || hasKey(a, k) != hasKey(b, k)
}
func driverOf(l map[string]string) string { return fleet.DriverOf(l) }

// Current is the node's tuple as the cluster reports it (was
// NodeFacts.Current: the facts live in package fleet now).
func (cl *Cluster) Current(f NodeFacts) qualification.Tuple {
	return f.Tuple(clusterVersions(cl))
}

// clusterVersions are the cluster-wide GPU Operator and DCGM exporter
// versions, from their workloads' images: the adapter's (Cluster.Versions)
// when it read them from these images, else read now.
func clusterVersions(cl *Cluster) (op, dcgm string) {
	if v := cl.Versions; v != nil && v.ReadFrom(cl.GPUOperatorImage, cl.DCGMExporterImage) {
		return v.GPUOperator, v.DCGMExporter
	}
	v := fleet.VersionsOf(cl.GPUOperatorImage, cl.DCGMExporterImage)
	return v.GPUOperator, v.DCGMExporter
}
