package fleet

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// ComponentSpec is one row of the tuple's component table. Everything that
// walks the tuple (the rules, the record checks, inventory, upgrade-check's
// flags) reads this table, so a sixth component is one row here and one
// field in qualification.Tuple (TestComponentTableMatchesTuple holds them
// together).
type ComponentSpec struct {
	// Name is the record key and the spelling in messages about records.
	Name Component
	// Label names the component in sentences ("GPU Operator").
	Label string
	// Flag is upgrade-check's flag stem: --current-<Flag>, --target-<Flag>.
	Flag string
	// Fact says where the gate reads a node's current value. For a
	// cluster-wide component read from a configured workload's image,
	// Workload is that workload's kind and the config names it.
	Fact     string
	Workload string
	// Optional: a tuple may leave it out (the DRA driver, which only DRA
	// GPU nodes run). It is compared only where both tuples name it; a
	// change that moves it needs a destination that names it (targetRule).
	Optional bool
	// Ordered says whether a move to a lower value is a downgrade the
	// rollback rules govern; RKE2 has its own rules (RKE2Downgrade).
	Ordered bool
	// Expected is the accepted form in words, for messages.
	Expected string

	get func(qualification.Tuple) string
	set func(*qualification.Tuple, string)
	// The parsers and comparisons take the caller's memo (nil: none).
	parse   func(vs *Versions, s string) error
	compare func(vs *Versions, a, b string) (int, error)
	same    func(vs *Versions, a, b string) bool
}

// componentTable lists the tuple members in the record's order.
var componentTable = []ComponentSpec{
	{Name: ComponentKernel, Label: "kernel", Flag: "kernel", Fact: "status.nodeInfo.kernelVersion", Ordered: true, Expected: expectedKernel,
		get: func(t qualification.Tuple) string { return t.Kernel }, set: func(t *qualification.Tuple, v string) { t.Kernel = v },
		parse: validates((*Versions).ParseKernel), compare: ordered((*Versions).ParseKernel, KernelVersion.Compare), same: trimmed},
	{Name: ComponentRKE2, Label: "RKE2", Flag: "rke2", Fact: "status.nodeInfo.kubeletVersion", Expected: expectedRKE2,
		get: func(t qualification.Tuple) string { return t.RKE2 }, set: func(t *qualification.Tuple, v string) { t.RKE2 = v },
		parse: validates((*Versions).ParseRKE2), compare: ordered((*Versions).ParseRKE2, total(RKE2Version.Compare)),
		same: func(_ *Versions, a, b string) bool { return NormalizeRKE2(a) == NormalizeRKE2(b) }},
	{Name: ComponentDriver, Label: "driver", Flag: "driver", Fact: "label nvidia.com/cuda.driver-version.full from GPU Feature Discovery", Ordered: true, Expected: expectedDriver,
		get: func(t qualification.Tuple) string { return t.Driver }, set: func(t *qualification.Tuple, v string) { t.Driver = v },
		parse: validates((*Versions).ParseDriver), compare: ordered((*Versions).ParseDriver, total(DriverVersion.Compare)), same: trimmed},
	{Name: ComponentGPUOperator, Label: "GPU Operator version", Flag: "gpu-operator", Fact: "image tag of", Workload: "Deployment", Ordered: true, Expected: expectedGPUOperator,
		get: func(t qualification.Tuple) string { return t.GPUOperator }, set: func(t *qualification.Tuple, v string) { t.GPUOperator = v },
		parse: validates((*Versions).ParseGPUOperator), compare: ordered((*Versions).ParseGPUOperator, total((*semver.Version).Compare)), same: trimmed},
	{Name: ComponentDCGMExporter, Label: "DCGM exporter version", Flag: "dcgm-exporter", Fact: "image of", Workload: "DaemonSet", Ordered: true, Expected: expectedDCGMExporter,
		get: func(t qualification.Tuple) string { return t.DCGMExporter }, set: func(t *qualification.Tuple, v string) { t.DCGMExporter = v },
		parse: validates((*Versions).ParseDCGMExporter), compare: ordered((*Versions).ParseDCGMExporter, DCGMExporterVersion.Compare), same: sameDCGMExporter},
	{Name: ComponentDRADriver, Label: "DRA driver version", Flag: "dra-driver", Fact: "kubelet-plugin image of", Workload: "DaemonSet", Optional: true, Ordered: true, Expected: expectedDRADriver,
		get: func(t qualification.Tuple) string { return t.DRADriver }, set: func(t *qualification.Tuple, v string) { t.DRADriver = v },
		parse: validates((*Versions).ParseDRADriver), compare: ordered((*Versions).ParseDRADriver, total((*semver.Version).Compare)), same: optional(sameDRADriver)},
}

// optional wraps an optional component's same: a tuple that does not name
// it (a node without DRA, a record that leaves it out) matches any value.
func optional(same func(vs *Versions, a, b string) bool) func(vs *Versions, a, b string) bool {
	return func(vs *Versions, a, b string) bool {
		return strings.TrimSpace(a) == "" || strings.TrimSpace(b) == "" || same(vs, a, b)
	}
}

// trimmed is sameTrimmed as a table row's same (it parses nothing).
func trimmed(_ *Versions, a, b string) bool { return sameTrimmed(a, b) }

// required: the component must be known for a transition to be judged.
func (s *ComponentSpec) required() bool { return !s.Optional }

// ComponentTable returns the component table (a copy), in record order.
func ComponentTable() []ComponentSpec { return append([]ComponentSpec(nil), componentTable...) }

// Components lists the tuple members in the record's order, so reports that
// walk the tuple are stable.
var Components = func() []Component {
	cs := make([]Component, len(componentTable))
	for i, s := range componentTable {
		cs[i] = s.Name
	}
	return cs
}()

func specOf(c Component) *ComponentSpec {
	for i := range componentTable {
		if componentTable[i].Name == c {
			return &componentTable[i]
		}
	}
	return nil
}

// Value is the tuple's member for this component.
func (s *ComponentSpec) Value(t qualification.Tuple) string { return s.get(t) }

// Set sets the tuple's member for this component.
func (s *ComponentSpec) Set(t *qualification.Tuple, v string) { s.set(t, v) }

// TupleValue returns the tuple member of component c.
func TupleValue(t qualification.Tuple, c Component) string {
	if s := specOf(c); s != nil {
		return s.get(t)
	}
	return ""
}

// SameTuple says whether two tuples name the same versions, component by
// component (SameComponent).
func SameTuple(a, b qualification.Tuple) bool { return SameTupleIn(nil, a, b) }

// SameTupleIn is SameTuple parsing through the caller's memo.
func SameTupleIn(vs *Versions, a, b qualification.Tuple) bool {
	for i := range componentTable {
		s := &componentTable[i]
		// Every component's same holds for equal strings: the common case
		// needs no parse.
		if x, y := s.get(a), s.get(b); x != y && !s.same(vs, x, y) {
			return false
		}
	}
	return true
}

// tupleDiff lists "component current (want wanted)" for the members that
// differ; exact compares the strings byte for byte (typed values).
func tupleDiff(vs *Versions, have, want qualification.Tuple, exact bool) []string {
	var d []string
	for i := range componentTable {
		s := &componentTable[i]
		h, w := s.get(have), s.get(want)
		if (exact && h != w) || (!exact && !s.same(vs, h, w)) {
			d = append(d, string(s.Name)+" "+quoteOrNone(h)+" (want "+quoteOrNone(w)+")")
		}
	}
	return d
}

func quoteOrNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func sameTrimmed(a, b string) bool { return strings.TrimSpace(a) == strings.TrimSpace(b) }

// ParseComponent validates a value of component c, so a record or request can
// be checked without knowing each component's type (nil error = parses).
func ParseComponent(c Component, s string) error {
	if sp := specOf(c); sp != nil {
		return sp.parse(nil, s)
	}
	return fmt.Errorf("%w %q", errUnknownComponent, string(c))
}

// CompareComponent orders a against b for component c (-1, 0, +1) so that
// downgrade rules can be written once for the whole tuple. An unparsable value
// gives a *VersionError naming it (a is checked before b); a valid pair with
// no order gives an IncomparableError.
func CompareComponent(c Component, a, b string) (int, error) {
	if sp := specOf(c); sp != nil {
		return sp.compare(nil, a, b)
	}
	return 0, fmt.Errorf("%w %q", errUnknownComponent, string(c))
}

// SameComponent says whether two values name the same version, for exact-match
// rules such as "target must be the qualified value". RKE2 compares
// NormalizeRKE2 forms (only the +/- before rke2rN is normalised, so a missing
// v still differs). Two DCGM values that both carry a valid digest compare by
// digest alone. Everything else compares the trimmed strings exactly.
func SameComponent(c Component, a, b string) bool {
	if sp := specOf(c); sp != nil {
		return a == b || sp.same(nil, a, b)
	}
	return sameTrimmed(a, b)
}

// ExpectedForm returns the accepted form of c in words, for messages that must
// tell the operator what to write; "" for an unknown component.
func ExpectedForm(c Component) string {
	if sp := specOf(c); sp != nil {
		return sp.Expected
	}
	return ""
}
