package fleet

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Classifier answers what the index remembers per node object: gate's
// Config, whose GPU definition, facts, halt signals and out-of-service
// rules these are.
type Classifier interface {
	IsGPUNode(n *corev1.Node) bool
	FactsOf(n *corev1.Node) NodeFacts
	// NodeMayHalt: the node shows a halt signal of its own.
	NodeMayHalt(n *corev1.Node) bool
	// NodeDown: cordoned, NotReady or with an out-of-service taint.
	NodeDown(n *corev1.Node) bool
	// IndexBasis is what the answers above depend on besides the node: an
	// index built under another basis is not reused.
	IndexBasis() Basis
}

// Basis is what a Classifier's per-node answers depend on besides the node.
type Basis struct {
	Vendors []string
	Health  []HealthCondition
	Taints  []string
}

func (b Basis) clone() Basis {
	return Basis{Vendors: slices.Clone(b.Vendors), Health: slices.Clone(b.Health), Taints: slices.Clone(b.Taints)}
}

func (b Basis) equal(o Basis) bool {
	return slices.Equal(b.Vendors, o.Vendors) && slices.Equal(b.Health, o.Health) && slices.Equal(b.Taints, o.Taints)
}

// HealthCondition is a node condition a GPU health tool writes, and the
// status that means unhealthy.
type HealthCondition struct {
	Type string `json:"type"`
	// UnhealthyStatus is "True" (a problem condition) or "False" (a
	// readiness condition such as EKS's AcceleratedHardwareReady).
	UnhealthyStatus corev1.ConditionStatus `json:"unhealthyStatus"`
}

// NodeFacts is what the rules know about one node.
type NodeFacts struct {
	Name string
	GPU  bool
	// Identities are the subsystem-qualified GPU identities, sorted:
	// vendor:device/subvendor:subdevice.
	Identities    []string
	Kernel        string
	RKE2          string
	Driver        string
	Zone          string
	Ready         bool
	Unschedulable bool
	ControlPlane  bool
}

// Tuple is the node's tuple, where op and dcgm are the cluster's GPU
// Operator and DCGM exporter versions.
func (f NodeFacts) Tuple(op, dcgm string) qualification.Tuple {
	return qualification.Tuple{Kernel: f.Kernel, RKE2: f.RKE2, Driver: f.Driver, GPUOperator: op, DCGMExporter: dcgm}
}

// The GPU Operator's driver upgrade state label, and its state of a node
// whose upgrade is done.
const (
	LabelDriverUpgradeState = "nvidia.com/gpu-driver-upgrade-state"
	DriverUpgradeDone       = "upgrade-done"
)
