package fleet

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// What one node's labels and status say: whether it is a GPU node (the one
// definition; package gate's gpunode.go documents it and builds the Node
// webhook's match condition from the same parts) and its facts.

// Label keys the facts come from (reference/labels.md).
const (
	NFDPrefix         = "feature.node.kubernetes.io/"
	LabelPCIPrefix    = NFDPrefix + "pci-"
	LabelKernelFull   = NFDPrefix + "kernel-version.full"
	LabelGPUPresent   = "nvidia.com/gpu.present"
	LabelDriverFull   = "nvidia.com/cuda.driver-version.full"
	LabelDriverMajor  = "nvidia.com/cuda.driver-version.major"
	LabelDriverMinor  = "nvidia.com/cuda.driver-version.minor"
	LabelDriverRev    = "nvidia.com/cuda.driver-version.revision"
	LabelOldDriverMaj = "nvidia.com/cuda.driver.major"
	LabelOldDriverMin = "nvidia.com/cuda.driver.minor"
	LabelOldDriverRev = "nvidia.com/cuda.driver.rev"
	LabelControlPlane = "node-role.kubernetes.io/control-plane"
	// LabelZone is the node's topology zone.
	LabelZone = "topology.kubernetes.io/zone"
)

// GFDLabels are labels GPU Feature Discovery publishes only on nodes where it
// found a GPU (reference/labels.md section 3.1).
var GFDLabels = []string{
	"nvidia.com/gpu.count",
	"nvidia.com/gpu.product",
	"nvidia.com/gpu.memory",
	"nvidia.com/gpu.family",
	"nvidia.com/gpu.compute.major",
	"nvidia.com/cuda.driver-version.full",
	"nvidia.com/cuda.driver.major",
	"nvidia.com/mig.capable",
}

// IsGPUNode says whether n is a GPU node (package gate's gpunode.go: the
// definition), where vendors are the configured GPU vendors.
func IsGPUNode(vendors []string, n *corev1.Node) bool {
	if n == nil {
		return false
	}
	// The fixed keys by lookup, then only the "true" labels are parsed: a
	// CPU node's ~60 labels are all read here whenever a Plan selects it.
	if n.Labels[LabelGPUPresent] == "true" {
		return true
	}
	for _, g := range GFDLabels {
		if _, ok := n.Labels[g]; ok {
			return true
		}
	}
	for k, v := range n.Labels {
		if v == "true" && IsGPULabel(vendors, k, v) {
			return true
		}
	}
	for name := range n.Status.Capacity {
		if IsGPUResource(string(name)) {
			return true
		}
	}
	return false
}

// IsGPULabel says whether one label marks a GPU node.
func IsGPULabel(vendors []string, k, v string) bool {
	switch {
	case k == LabelGPUPresent:
		return v == "true"
	case strings.HasPrefix(k, LabelPCIPrefix) && strings.HasSuffix(k, ".present"):
		if v != "true" {
			return false
		}
		_, vendor, ok := ParsePCILabel(k[len(LabelPCIPrefix) : len(k)-len(".present")])
		return ok && slices.Contains(vendors, vendor)
	}
	for _, g := range GFDLabels {
		if k == g {
			return true
		}
	}
	return false
}

// GPUResourcePrefixes are the extended resources that mean "this Pod holds
// a GPU" (the anchor CLI's list).
var GPUResourcePrefixes = []string{"nvidia.com/", "requests.nvidia.com/", "amd.com/gpu", "gpu.intel.com/"}

// IsGPUResource: the resource is one of GPUResourcePrefixes'.
func IsGPUResource(name string) bool {
	for _, p := range GPUResourcePrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// FactsOf reads a node's facts from its labels and status, where vendors
// are the configured GPU vendors.
func FactsOf(vendors []string, n *corev1.Node) NodeFacts {
	f := NodeFacts{
		Name:          n.Name,
		Kernel:        n.Status.NodeInfo.KernelVersion,
		RKE2:          n.Status.NodeInfo.KubeletVersion,
		Zone:          n.Labels[LabelZone],
		Unschedulable: n.Spec.Unschedulable,
		ControlPlane:  HasKey(n.Labels, LabelControlPlane),
	}
	f.Kernel = KernelOf(n)
	f.Driver = DriverOf(n.Labels)
	f.Ready = IsReady(n)
	f.GPU = IsGPUNode(vendors, n) // the one definition
	for k, v := range n.Labels {
		if v != "true" || !strings.HasPrefix(k, LabelPCIPrefix) || !strings.HasSuffix(k, ".present") {
			continue
		}
		id, vendor, ok := ParsePCILabel(k[len(LabelPCIPrefix) : len(k)-len(".present")])
		if !ok || !slices.Contains(vendors, vendor) {
			continue
		}
		if id != "" && !slices.Contains(f.Identities, id) {
			f.Identities = append(f.Identities, id)
		}
	}
	slices.Sort(f.Identities)
	return f
}

// KernelOf is the node's kernel: nodeInfo, else NFD's label.
func KernelOf(n *corev1.Node) string {
	if k := n.Status.NodeInfo.KernelVersion; k != "" {
		return k
	}
	return n.Labels[LabelKernelFull]
}

// IsReady reads the (last) Ready condition.
func IsReady(n *corev1.Node) bool {
	ready := false
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			ready = cond.Status == corev1.ConditionTrue
		}
	}
	return ready
}

// IdentityLabels are the NFD label keys that can carry identities[0]
// (vendor:device/subvendor:subdevice), with or without a display class: a
// node has one of them set to "true" if FactsOf lists that identity. Nil for
// no identity.
func IdentityLabels(identities []string) []string {
	if len(identities) == 0 {
		return nil
	}
	parts := identityKeys.Replace(identities[0]) + ".present"
	return []string{LabelPCIPrefix + parts, LabelPCIPrefix + "0302_" + parts, LabelPCIPrefix + "0300_" + parts}
}

// identityKeys spells a GPU identity as label and ConfigMap keys do; built
// once (a Replacer builds its tables on first use).
var identityKeys = strings.NewReplacer(":", "_", "/", "_")

// IdentityKey spells s (GPU identities) as label and ConfigMap keys do.
func IdentityKey(s string) string { return identityKeys.Replace(s) }

// AnyTrue says whether one of keys is "true" in l; true when keys is nil.
func AnyTrue(l map[string]string, keys []string) bool {
	for _, k := range keys {
		if l[k] == "true" {
			return true
		}
	}
	return keys == nil
}

// ParsePCILabel reads the device part of an NFD pci label. NFD always orders
// the parts class, vendor, device, subsystem_vendor, subsystem_device, for
// whichever fields it is configured with, so after an optional display class
// the vendor comes first. id is set only when all four IDs are there: the
// shorter forms mark a GPU node but not its hardware.
func ParsePCILabel(s string) (id, vendor string, ok bool) {
	// Split by hand: every node's PCI labels pass through here on every
	// scan, and strings.Split would allocate for each.
	var buf [5]string
	n := 0
	for rest, more := s, true; more; {
		var p string
		p, rest, more = strings.Cut(rest, "_")
		if len(p) != 4 || !IsHex(p) || n == len(buf) {
			return "", "", false // more than five parts never parse
		}
		buf[n] = p
		n++
	}
	parts := buf[:n]
	if len(parts) > 1 && IsClass(parts[0]) {
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

// IsClass accepts the display controller classes: 0300 (VGA) and 0302 (3D).
func IsClass(s string) bool { return s == "0300" || s == "0302" }

// IsHex: lower-case hex digits only, as NFD writes them.
func IsHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func HasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// DriverOf prefers the full version label, then its parts, then the
// deprecated GFD labels.
func DriverOf(l map[string]string) string {
	if v := l[LabelDriverFull]; v != "" {
		return v
	}
	for _, keys := range [][3]string{{LabelDriverMajor, LabelDriverMinor, LabelDriverRev}, {LabelOldDriverMaj, LabelOldDriverMin, LabelOldDriverRev}} {
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
