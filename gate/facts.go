package gate

import (
	"slices"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Label keys the facts come from (reference/labels.md).
const (
	nfdPrefix          = "feature.node.kubernetes.io/"
	labelPCIPrefix     = nfdPrefix + "pci-"
	labelKernelFull    = nfdPrefix + "kernel-version.full"
	labelGPUPresent    = "nvidia.com/gpu.present"
	labelDriverFull    = "nvidia.com/cuda.driver-version.full"
	labelDriverMajor   = "nvidia.com/cuda.driver-version.major"
	labelDriverMinor   = "nvidia.com/cuda.driver-version.minor"
	labelDriverRev     = "nvidia.com/cuda.driver-version.revision"
	labelOldDriverMaj  = "nvidia.com/cuda.driver.major"
	labelOldDriverMin  = "nvidia.com/cuda.driver.minor"
	labelOldDriverRev  = "nvidia.com/cuda.driver.rev"
	labelControlPlane  = "node-role.kubernetes.io/control-plane"
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
	// Proof holds the objects proofs of upgraded nodes read (proof.go).
	Proof ProofFacts
	// Index, when set, is NewNodeIndex over Nodes: the webhook keeps one per
	// node list. The engine uses it only when it holds exactly Nodes, and
	// otherwise indexes Nodes for the one review.
	Index *NodeIndex
	// Halts is the halt record (haltrecord.go).
	Halts HaltRecord
	// CreationGates are the configured creation gates as read
	// (creationgate.go).
	CreationGates []GateReading
}

// RecordEntry is a record ConfigMap as loaded: the record, or why it failed.
type RecordEntry struct {
	Record *qualification.Record
	Err    error
	// Attestation is who wrote and who approved the ConfigMap's data, as the
	// record webhook attested it (empty for a record file).
	Attestation qualification.Attestation
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

// FactsOf reads a node's facts from its labels and status.
func (c *Config) FactsOf(n *corev1.Node) NodeFacts {
	f := NodeFacts{
		Name:          n.Name,
		Kernel:        n.Status.NodeInfo.KernelVersion,
		RKE2:          n.Status.NodeInfo.KubeletVersion,
		Zone:          n.Labels[LabelZone],
		Unschedulable: n.Spec.Unschedulable,
		ControlPlane:  hasKey(n.Labels, labelControlPlane),
	}
	f.Kernel = kernelOf(n)
	f.Driver = driverOf(n.Labels)
	f.Ready = isReady(n)
	f.GPU = c.IsGPUNode(n) // gpunode.go: the one definition
	for k, v := range n.Labels {
		if v != "true" || !strings.HasPrefix(k, labelPCIPrefix) || !strings.HasSuffix(k, ".present") {
			continue
		}
		id, vendor, ok := parsePCILabel(k[len(labelPCIPrefix) : len(k)-len(".present")])
		if !ok || !slices.Contains(c.GPUVendors, vendor) {
			continue
		}
		if id != "" && !slices.Contains(f.Identities, id) {
			f.Identities = append(f.Identities, id)
		}
	}
	slices.Sort(f.Identities)
	return f
}

// kernelOf is the node's kernel: nodeInfo, else NFD's label.
func kernelOf(n *corev1.Node) string {
	if k := n.Status.NodeInfo.KernelVersion; k != "" {
		return k
	}
	return n.Labels[labelKernelFull]
}

// isReady reads the (last) Ready condition.
func isReady(n *corev1.Node) bool {
	ready := false
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			ready = cond.Status == corev1.ConditionTrue
		}
	}
	return ready
}

// identityLabels are the NFD label keys that can carry identities[0]
// (vendor:device/subvendor:subdevice), with or without a display class: a
// node has one of them set to "true" if FactsOf lists that identity. Nil for
// no identity.
func identityLabels(identities []string) []string {
	if len(identities) == 0 {
		return nil
	}
	parts := identityKeys.Replace(identities[0]) + ".present"
	return []string{labelPCIPrefix + parts, labelPCIPrefix + "0302_" + parts, labelPCIPrefix + "0300_" + parts}
}

// identityKeys spells a GPU identity as label and ConfigMap keys do; built
// once (a Replacer builds its tables on first use).
var identityKeys = strings.NewReplacer(":", "_", "/", "_")

// anyTrue says whether one of keys is "true" in l; true when keys is nil.
func anyTrue(l map[string]string, keys []string) bool {
	for _, k := range keys {
		if l[k] == "true" {
			return true
		}
	}
	return keys == nil
}

// parsePCILabel reads the device part of an NFD pci label. NFD always orders
// the parts class, vendor, device, subsystem_vendor, subsystem_device, for
// whichever fields it is configured with, so after an optional display class
// the vendor comes first. id is set only when all four IDs are there: the
// shorter forms mark a GPU node but not its hardware.
func parsePCILabel(s string) (id, vendor string, ok bool) {
	// Split by hand: every node's PCI labels pass through here on every
	// scan, and strings.Split would allocate for each.
	var buf [5]string
	n := 0
	for rest, more := s, true; more; {
		var p string
		p, rest, more = strings.Cut(rest, "_")
		if len(p) != 4 || !isHex(p) || n == len(buf) {
			return "", "", false // more than five parts never parse
		}
		buf[n] = p
		n++
	}
	parts := buf[:n]
	if len(parts) > 1 && isClass(parts[0]) {
		parts = parts[1:]
	}
	switch len(parts) {
	case 1, 2, 3:
		return "", parts[0], true
	case 4:
		return parts[0] + ":" + parts[1] + "/" + parts[2] + ":" + parts[3], parts[0], true
	}
	return "", "", false
}

// isClass accepts the display controller classes: 0300 (VGA) and 0302 (3D).
func isClass(s string) bool { return s == "0300" || s == "0302" }

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// driverOf prefers the full version label, then its parts, then the
// deprecated GFD labels.
func driverOf(l map[string]string) string {
	if v := l[labelDriverFull]; v != "" {
		return v
	}
	for _, keys := range [][3]string{{labelDriverMajor, labelDriverMinor, labelDriverRev}, {labelOldDriverMaj, labelOldDriverMin, labelOldDriverRev}} {
		if l[keys[0]] == "" || l[keys[1]] == "" {
			continue
		}
		v := l[keys[0]] + "." + l[keys[1]]
		if r := l[keys[2]]; r != "" {
			v += "." + r
		}
		return v
	}
	return ""
}

// Current is the node's tuple as the cluster reports it.
func (f NodeFacts) Current(cl *Cluster) qualification.Tuple {
	return f.current(clusterVersions(cl))
}

func (f NodeFacts) current(op, dcgm string) qualification.Tuple {
	return qualification.Tuple{Kernel: f.Kernel, RKE2: f.RKE2, Driver: f.Driver, GPUOperator: op, DCGMExporter: dcgm}
}

// clusterVersions are the cluster-wide GPU Operator and DCGM exporter
// versions, from their workloads' images.
func clusterVersions(cl *Cluster) (op, dcgm string) {
	if v := lastVersions.Load(); v != nil && v.op == cl.GPUOperatorImage && v.dcgm == cl.DCGMExporterImage {
		return v.opVersion, v.dcgmVersion
	}
	// The operator's version is its tag: a digest pinned beside the tag
	// says which build, not which release.
	op = imageTag(cl.GPUOperatorImage)
	dcgm, _ = ImageVersion(cl.DCGMExporterImage)
	lastVersions.Store(&workloadVersions{op: cl.GPUOperatorImage, dcgm: cl.DCGMExporterImage, opVersion: op, dcgmVersion: dcgm})
	return op, dcgm
}

// workloadVersions remembers the versions of the last images parsed: a
// review asks several times, every review of a cluster the same, and the
// image reference parser is a regular expression.
type workloadVersions struct{ op, dcgm, opVersion, dcgmVersion string }

var lastVersions atomic.Pointer[workloadVersions]
