package gate

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// The version parsers are package fleet's (fleet/version.go): the names the
// rules, the adapters and the CLI know them by, until they read fleet's.

// Component names one member of the GPU node tuple (fleet.Component).
type Component = fleet.Component

// The members of the GPU node tuple, spelled as the record's keys.
const (
	ComponentKernel       = fleet.ComponentKernel
	ComponentRKE2         = fleet.ComponentRKE2
	ComponentDriver       = fleet.ComponentDriver
	ComponentGPUOperator  = fleet.ComponentGPUOperator
	ComponentDCGMExporter = fleet.ComponentDCGMExporter
	ComponentDRADriver    = fleet.ComponentDRADriver
)

// The parsed versions.
type (
	RKE2Version   = fleet.RKE2Version
	KubeVersion   = fleet.KubeVersion
	KernelVersion = fleet.KernelVersion
)

// The parsers (fleet's).
func ParseRKE2(s string) (RKE2Version, error) { return fleet.ParseRKE2(s) }
func ParseKube(s string) (KubeVersion, error) { return fleet.ParseKube(s) }

// The tuple's component table and image references are package fleet's
// (fleet/tuple.go, fleet/image.go). ComponentSpec wraps fleet's row with
// the names gate's rules call it by, and where its fact is read under the
// Config.

// ComponentSpec is one row of the tuple's component table.
type ComponentSpec struct{ fleet.ComponentSpec }

// componentTable lists the tuple members in the record's order (fleet's,
// wrapped once).
var componentTable = func() []ComponentSpec {
	var out []ComponentSpec
	for _, s := range fleet.ComponentTable() {
		out = append(out, ComponentSpec{s})
	}
	return out
}()

// ComponentTable returns the component table (a copy), in record order.
func ComponentTable() []ComponentSpec { return append([]ComponentSpec(nil), componentTable...) }

// Components are the tuple members' names in record order.
var Components = fleet.Components

// fact names where the gate reads the component, with the configured
// workload for cluster-wide components.
func (s *ComponentSpec) fact(cfg *Config) string {
	if s.Workload == "" || cfg == nil {
		return s.Fact
	}
	ref := cfg.GPUOperator
	switch s.Name {
	case ComponentDCGMExporter:
		ref = cfg.DCGMExporter
	case ComponentDRADriver:
		var ds []string
		for _, d := range cfg.DRADrivers {
			ds = append(ds, d.Namespace+"/"+d.DaemonSet)
		}
		if len(ds) == 0 {
			return s.Fact + " the configured DRA driver's DaemonSet (draDrivers: none configured)"
		}
		return fmt.Sprintf("%s %s %s", s.Fact, s.Workload, strings.Join(ds, ", "))
	}
	return fmt.Sprintf("%s %s %s/%s", s.Fact, s.Workload, ref.Namespace, ref.Name)
}

// The tuple's readers (fleet's).
func TupleValue(t qualification.Tuple, c Component) string { return fleet.TupleValue(t, c) }
func SameTuple(a, b qualification.Tuple) bool              { return fleet.SameTuple(a, b) }
func ParseComponent(c Component, s string) error           { return fleet.ParseComponent(c, s) }
func SameComponent(c Component, a, b string) bool          { return fleet.SameComponent(c, a, b) }

// Image references (fleet's).
type (
	Image = fleet.Image
)

// LabelVersion: the label a DRA driver's DaemonSet carries its release in.
const LabelVersion = fleet.LabelVersion

func ParseImage(s string) (Image, error)       { return fleet.ParseImage(s) }
func ImageVersion(image string) (string, bool) { return fleet.ImageVersion(image) }
func DRADriverVersion(images []string, labelVersion string) (string, bool) {
	return fleet.DRADriverVersion(images, labelVersion)
}

// isRKE2Image says whether the image is one of the configured RKE2 upgrade
// repositories.
func (c *Config) isRKE2Image(img Image) bool {
	for _, e := range c.RKE2Images {
		if fleet.MatchesRepository(img, e) {
			return true
		}
	}
	return false
}

// The parts of the Cluster that are fleet's (the engine's input moves down:
// fleet/doc.go step 2).
type (
	RecordEntry      = fleet.RecordEntry
	WorkloadVersions = fleet.WorkloadVersions
	NodeMaintenance  = fleet.NodeMaintenance
	EtcdSnapshot     = fleet.EtcdSnapshot
	EtcdSnapshots    = fleet.EtcdSnapshots
	ProofFacts       = fleet.ProofFacts
	DRAProofFacts    = fleet.DRAProofFacts
	Halt             = fleet.Halt
	ClearedHalt      = fleet.ClearedHalt
	HaltRecord       = fleet.HaltRecord
	CreationGate     = fleet.CreationGate
	GateReading      = fleet.GateReading
)

// Creation gate kinds (fleet's).
const (
	GateDeploymentEnv = fleet.GateDeploymentEnv
	GateConfigMapKey  = fleet.GateConfigMapKey
)

// The creation gates' readers (fleet's).
func ReadDeploymentGate(g CreationGate, spec *corev1.PodSpec) GateReading {
	return fleet.ReadDeploymentGate(g, spec)
}
func ReadConfigMapGate(g CreationGate, cm *corev1.ConfigMap) GateReading {
	return fleet.ReadConfigMapGate(g, cm)
}

// HardwareKey spells an identity set as a ConfigMap key (fleet.HardwareKey).
func HardwareKey(hw []string) string { return fleet.HardwareKey(hw) }

// VersionsOf reads the versions from the GPU Operator's and the DCGM
// exporter's images (fleet.VersionsOf), for Cluster.Versions.
func VersionsOf(gpuOperatorImage, dcgmExporterImage string) *WorkloadVersions {
	v := fleet.VersionsOf(gpuOperatorImage, dcgmExporterImage)
	return &v
}
