package fleet

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/Masterminds/semver/v3"
)

// Component names one member of the GPU node tuple, so that messages, records
// and comparisons all use the same spelling as the qualification record.
type Component string

// The members of the GPU node tuple, spelled as the record's keys.
const (
	ComponentKernel       Component = "kernel"
	ComponentRKE2         Component = "rke2"
	ComponentDriver       Component = "driver"
	ComponentGPUOperator  Component = "gpuOperator"
	ComponentDCGMExporter Component = "dcgmExporter"
	// ComponentDRADriver is optional: only DRA GPU nodes run it.
	ComponentDRADriver Component = "draDriver"
)

// componentKube names the Kubernetes version of a kubelet or API server in
// messages; it is not a member of the tuple.
const componentKube Component = "kubernetes"

// maxVersionLen bounds every version value: real values are far shorter, and a
// bound keeps parsing cheap on hostile input.
const maxVersionLen = 128

// maxDigits bounds every decimal number so that it always fits an int without
// overflow, on every platform.
const maxDigits = 9

const (
	expectedKernel       = "MAJOR.MINOR[.PATCH[.N]], optionally -ABI (dot-separated numbers) and a flavour after -, . or +, e.g. 6.8.0-135-generic"
	expectedRKE2         = "v1.MINOR.PATCH+rke2rN, e.g. v1.36.1+rke2r1 (SUC also reads -rke2rN; a release candidate puts -rcN before it, e.g. v1.37.0-rc1+rke2r1)"
	expectedDriver       = "2 to 4 dot-separated numbers, e.g. 580.126.20"
	expectedGPUOperator  = "a semantic version vMAJOR.MINOR.PATCH[-PRERELEASE] (leading v optional), e.g. v26.3.4"
	expectedDCGMExporter = "DCGM-EXPORTER[-FLAVOUR] with 2 to 4 dot-separated numbers each, e.g. 4.5.3-4.8.2-distroless, or an image digest sha256:<64 lower-case hex>"
	expectedDRADriver    = "the kubelet plugin image's tag vMAJOR.MINOR.PATCH[-PRERELEASE], e.g. v25.8.1; an image pinned by digest alone needs the DaemonSet label app.kubernetes.io/version"
	expectedKube         = "vMAJOR.MINOR.PATCH, optionally followed by -SUFFIX or +SUFFIX, e.g. v1.36.1+rke2r1"
)

// VersionError reports a value that does not parse, naming the component, the
// value and the accepted form so that a denial message tells the operator what
// to fix.
type VersionError struct {
	Component Component
	Value     string
	Expected  string
}

// Error quotes at most a bounded prefix of the value so that hostile input
// cannot inflate an admission message.
func (e *VersionError) Error() string {
	v := strconv.Quote(e.Value)
	if len(e.Value) > maxVersionLen {
		v = fmt.Sprintf("%q... (%d bytes)", e.Value[:maxVersionLen], len(e.Value))
	}
	return fmt.Sprintf("%s version %s is not valid: expected %s", e.Component, v, e.Expected)
}

// ErrIncomparable marks two valid values that cannot be ordered, so callers
// can fail closed instead of guessing a direction (errors.Is works on every
// IncomparableError).
var ErrIncomparable = errors.New("versions cannot be ordered")

// IncomparableError carries the two values and why they cannot be ordered, so
// a denial can explain itself; it wraps ErrIncomparable.
type IncomparableError struct {
	Component Component
	A, B      string
	Reason    string
}

// Error names both values and the reason.
func (e *IncomparableError) Error() string {
	return fmt.Sprintf("%s versions %q and %q cannot be ordered: %s", e.Component, e.A, e.B, e.Reason)
}

// Unwrap lets errors.Is(err, ErrIncomparable) match.
func (e *IncomparableError) Unwrap() error { return ErrIncomparable }

// errUnknownComponent is returned for a Component outside Components.
var errUnknownComponent = errors.New("unknown component")

// cmpInt orders two ints as -1, 0, +1.
func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cmpParts orders two numeric sequences, a missing part counting as 0.
func cmpParts(a, b []int) int {
	n := max(len(a), len(b))
	for i := range n {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if c := cmpInt(x, y); c != 0 {
			return c
		}
	}
	return 0
}

// isDigit is ASCII-only on purpose: unicode digits never occur in versions.
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// takeNum reads a leading run of 1 to maxDigits ASCII digits. A longer run is
// refused rather than truncated, so no value can overflow or be misread.
func takeNum(s string) (n int, rest string, ok bool) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	if i == 0 || i > maxDigits {
		return 0, s, false
	}
	for _, c := range []byte(s[:i]) {
		n = n*10 + int(c-'0')
	}
	return n, s[i:], true
}

// parseDotted parses exactly a dot-separated list of minParts..maxParts numbers.
func parseDotted(s string, minParts, maxParts int) ([]int, bool) {
	fields := strings.Split(s, ".")
	if len(fields) < minParts || len(fields) > maxParts {
		return nil, false
	}
	parts := make([]int, 0, len(fields))
	for _, f := range fields {
		n, rest, ok := takeNum(f)
		if !ok || rest != "" {
			return nil, false
		}
		parts = append(parts, n)
	}
	return parts, true
}

// badLength is the shared guard every parser applies first.
func badLength(s string) bool { return s == "" || len(s) > maxVersionLen }

// ---------------------------------------------------------------- RKE2

// RKE2Version is a parsed RKE2 release. RKE2's rke2rN suffix is semver build
// metadata that generic parsers ignore, so it needs its own ordering. RC 0
// means a release, not a release candidate.
type RKE2Version struct {
	Major, Minor, Patch, RC, Rev int
}

// rke2Parse returns the version and the index of the separator before
// "rke2r", which NormalizeRKE2 rewrites.
func rke2Parse(s string) (RKE2Version, int, bool) {
	if badLength(s) {
		return RKE2Version{}, 0, false
	}
	p := strings.TrimPrefix(s, "v")
	// The major must be literally 1, as in the anchor CLI (which refuses
	// v2.0.0+rke2r1 and, by its regex, 01.x).
	if !strings.HasPrefix(p, "1.") {
		return RKE2Version{}, 0, false
	}
	v := RKE2Version{Major: 1}
	var ok bool
	if v.Minor, p, ok = takeNum(p[2:]); !ok || !strings.HasPrefix(p, ".") {
		return RKE2Version{}, 0, false
	}
	if v.Patch, p, ok = takeNum(p[1:]); !ok {
		return RKE2Version{}, 0, false
	}
	if strings.HasPrefix(p, "-rc") {
		if v.RC, p, ok = takeNum(p[3:]); !ok || v.RC == 0 {
			return RKE2Version{}, 0, false
		}
	}
	if len(p) < 1 || (p[0] != '+' && p[0] != '-') || !strings.HasPrefix(p[1:], "rke2r") {
		return RKE2Version{}, 0, false
	}
	sep := len(s) - len(p)
	if v.Rev, p, ok = takeNum(p[len("+rke2r"):]); !ok || p != "" {
		return RKE2Version{}, 0, false
	}
	return v, sep, true
}

// ParseRKE2 parses an RKE2 version as written by people, Rancher (+rke2rN) and
// SUC (-rke2rN). Values with surrounding whitespace are refused: a cluster
// never produces them, so one is a typing mistake.
func ParseRKE2(s string) (RKE2Version, error) { return parseRKE2(s) }

// ParseRKE2 is ParseRKE2 through the memo.
func (vs *Versions) ParseRKE2(s string) (RKE2Version, error) {
	return remember(vs, memoRKE2, s, parseRKE2)
}

func parseRKE2(s string) (RKE2Version, error) {
	v, _, ok := rke2Parse(s)
	if !ok {
		return RKE2Version{}, &VersionError{Component: ComponentRKE2, Value: s, Expected: expectedRKE2}
	}
	return v, nil
}

// Compare orders by major, minor, patch, then release candidate (a release
// sorts above every rcN of the same patch), then rke2rN, because generic
// semver ignores the rke2rN build metadata that distinguishes RKE2 rebuilds.
func (v RKE2Version) Compare(o RKE2Version) int {
	for _, c := range [...]int{
		cmpInt(v.Major, o.Major),
		cmpInt(v.Minor, o.Minor),
		cmpInt(v.Patch, o.Patch),
		cmpInt(rcRank(v.RC), rcRank(o.RC)),
		cmpInt(v.Rev, o.Rev),
	} {
		if c != 0 {
			return c
		}
	}
	return 0
}

// rcRank puts a release (RC 0) above every release candidate.
func rcRank(rc int) int {
	if rc == 0 {
		return int(^uint(0) >> 1)
	}
	return rc
}

// String gives the canonical Rancher form (v, +rke2rN, no leading zeros) so
// messages show one spelling whatever the input used.
func (v RKE2Version) String() string {
	if v.RC != 0 {
		return fmt.Sprintf("v%d.%d.%d-rc%d+rke2r%d", v.Major, v.Minor, v.Patch, v.RC, v.Rev)
	}
	return fmt.Sprintf("v%d.%d.%d+rke2r%d", v.Major, v.Minor, v.Patch, v.Rev)
}

// NormalizeRKE2 makes SUC's "-rke2rN" and Rancher's "+rke2rN" spellings equal
// for equality checks. Only that separator changes: a missing leading v and
// leading zeros are kept, so "1.36.1+rke2r1" still differs from
// "v1.36.1+rke2r1" (the anchor CLI's exact-match rule). Unparsable input is
// returned trimmed but otherwise unchanged.
func NormalizeRKE2(s string) string {
	t := strings.TrimSpace(s)
	_, sep, ok := rke2Parse(t)
	if !ok {
		return t
	}
	return t[:sep] + "+" + t[sep+1:]
}

// ---------------------------------------------------------------- Kubernetes

// KubeVersion is the Kubernetes version of a kubelet or API server; only
// major.minor.patch matter for version-skew rules, so any suffix is dropped.
type KubeVersion struct {
	Major, Minor, Patch int
}

// ParseKube reads an API server gitVersion or a kubelet version (v1.37.2,
// v1.37.2+rke2r1, v1.36.1-rc1+rke2r1, v1.38.0-beta.0, v1.30.4+k3s1). The v is
// optional; any non-empty suffix of visible ASCII after - or + is accepted
// because distributions append their own.
func ParseKube(s string) (KubeVersion, error) {
	fail := func() (KubeVersion, error) {
		return KubeVersion{}, &VersionError{Component: componentKube, Value: s, Expected: expectedKube}
	}
	if badLength(s) {
		return fail()
	}
	p := strings.TrimPrefix(s, "v")
	var v KubeVersion
	var ok bool
	if v.Major, p, ok = takeNum(p); !ok || !strings.HasPrefix(p, ".") {
		return fail()
	}
	if v.Minor, p, ok = takeNum(p[1:]); !ok || !strings.HasPrefix(p, ".") {
		return fail()
	}
	if v.Patch, p, ok = takeNum(p[1:]); !ok {
		return fail()
	}
	if p == "" {
		return v, nil
	}
	if (p[0] != '-' && p[0] != '+') || len(p) == 1 {
		return fail()
	}
	for _, c := range []byte(p[1:]) {
		if c <= ' ' || c > '~' {
			return fail()
		}
	}
	return v, nil
}

// ---------------------------------------------------------------- kernel

// KernelVersion is a host kernel release (uname -r). Kernels are not semver:
// "6.8.0-99-generic" must sort below "6.8.0-135-generic", so the ABI is kept
// as numbers. Parts holds the release parts followed by the ABI parts.
type KernelVersion struct {
	Parts   []int
	Flavour string
	raw     string
	// release is how many of Parts belong to the release (2 to 4); the rest
	// are the ABI.
	release int
}

// takeDotted reads numbers separated by '.', possessively: a '.' followed by a
// digit always continues the list (up to maxParts), so a failing input is never
// re-read with part of its number moved into the flavour.
func takeDotted(s string, maxParts int) (parts []int, rest string, ok bool) {
	n, rest, ok := takeNum(s)
	if !ok {
		return nil, s, false
	}
	parts = append(parts, n)
	for len(parts) < maxParts && len(rest) > 1 && rest[0] == '.' && isDigit(rest[1]) {
		if n, rest, ok = takeNum(rest[1:]); !ok {
			return nil, s, false
		}
		parts = append(parts, n)
	}
	return parts, rest, true
}

// isKernelFlavour accepts [A-Za-z0-9_.+~-]+.
func isKernelFlavour(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		alnum := isDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !alnum && c != '_' && c != '.' && c != '+' && c != '~' && c != '-' {
			return false
		}
	}
	return true
}

// ParseKernel splits a kernel release into numbers and a flavour itself,
// because semver compares "135-generic" as a string. The form is a release
// MAJOR.MINOR[.PATCH[.N]], then optionally '-' and an ABI of dot-separated
// numbers, then optionally '-', '.' or '+' and a flavour of [A-Za-z0-9_.+~-]+.
// Numbers are read greedily and never given back, so "6.8.0-" is refused
// rather than read as 6.8 with flavour "0-".
func ParseKernel(s string) (KernelVersion, error) { return parseKernel(s) }

// ParseKernel is ParseKernel through the memo.
func (vs *Versions) ParseKernel(s string) (KernelVersion, error) {
	return remember(vs, memoKernel, s, parseKernel)
}

func parseKernel(s string) (KernelVersion, error) {
	fail := func() (KernelVersion, error) {
		return KernelVersion{}, &VersionError{Component: ComponentKernel, Value: s, Expected: expectedKernel}
	}
	if badLength(s) {
		return fail()
	}
	parts, p, ok := takeDotted(s, 4)
	if !ok || len(parts) < 2 {
		return fail()
	}
	release := len(parts)
	if len(p) > 1 && p[0] == '-' && isDigit(p[1]) {
		var abi []int
		if abi, p, ok = takeDotted(p[1:], maxVersionLen); !ok {
			return fail()
		}
		parts = append(parts, abi...)
	}
	var flavour string
	if p != "" {
		if p[0] != '-' && p[0] != '.' && p[0] != '+' {
			return fail()
		}
		if flavour = p[1:]; !isKernelFlavour(flavour) {
			return fail()
		}
	}
	return KernelVersion{Parts: parts, Flavour: flavour, raw: s, release: release}, nil
}

// Compare orders the release (missing parts count as 0) and then the ABI
// numerically. Kernels of different flavours are different build lines with no
// order between them, so that case is an IncomparableError.
func (v KernelVersion) Compare(o KernelVersion) (int, error) {
	if v.Flavour != o.Flavour {
		return 0, &IncomparableError{
			Component: ComponentKernel, A: v.raw, B: o.raw,
			Reason: fmt.Sprintf("kernel flavours differ (%q, %q)", v.Flavour, o.Flavour),
		}
	}
	vr, va := v.split()
	or, oa := o.split()
	if c := cmpParts(vr, or); c != 0 {
		return c, nil
	}
	return cmpParts(va, oa), nil
}

// split returns the release and ABI parts; a value built by hand without the
// release count is treated as all release.
func (v KernelVersion) split() (rel, abi []int) {
	n := v.release
	if n <= 0 || n > len(v.Parts) {
		n = len(v.Parts)
	}
	return v.Parts[:n], v.Parts[n:]
}

// ---------------------------------------------------------------- driver

// DriverVersion is an NVIDIA driver version such as 580.126.20. Its parts are
// compared as numbers so 580.65 sorts below 580.126.20.
type DriverVersion struct {
	Parts []int
	raw   string
}

// ParseDriver accepts 2 to 4 dot-separated decimal parts, the forms NVML and
// GFD report (two-part versions such as 580.65 exist).
func ParseDriver(s string) (DriverVersion, error) { return parseDriver(s) }

// ParseDriver is ParseDriver through the memo.
func (vs *Versions) ParseDriver(s string) (DriverVersion, error) {
	return remember(vs, memoDriver, s, parseDriver)
}

func parseDriver(s string) (DriverVersion, error) {
	if badLength(s) {
		return DriverVersion{}, &VersionError{Component: ComponentDriver, Value: s, Expected: expectedDriver}
	}
	parts, ok := parseDotted(s, 2, 4)
	if !ok {
		return DriverVersion{}, &VersionError{Component: ComponentDriver, Value: s, Expected: expectedDriver}
	}
	return DriverVersion{Parts: parts, raw: s}, nil
}

// Compare orders the parts numerically, a missing part counting as 0, so
// leading zeros ("07") do not matter.
func (v DriverVersion) Compare(o DriverVersion) int { return cmpParts(v.Parts, o.Parts) }

// ---------------------------------------------------------------- GPU Operator

// ParseGPUOperator parses a GPU Operator release with strict semver (after
// one optional leading v), because the operator's tags are semver and a short
// "v26.3" is a mistake, not a version.
func ParseGPUOperator(s string) (*semver.Version, error) { return parseGPUOperator(s) }

// ParseGPUOperator is ParseGPUOperator through the memo; the version is
// shared: read only.
func (vs *Versions) ParseGPUOperator(s string) (*semver.Version, error) {
	return remember(vs, memoGPUOperator, s, parseGPUOperator)
}

func parseGPUOperator(s string) (*semver.Version, error) {
	fail := func() (*semver.Version, error) {
		return nil, &VersionError{Component: ComponentGPUOperator, Value: s, Expected: expectedGPUOperator}
	}
	if badLength(s) {
		return fail()
	}
	v, err := semver.StrictNewVersion(strings.TrimPrefix(s, "v"))
	if err != nil {
		return fail()
	}
	return v, nil
}

// ParseDRADriver parses a DRA driver version: its release, as the kubelet
// plugin's image tag names it (v25.8.1), the leading v optional.
func ParseDRADriver(s string) (*semver.Version, error) { return parseDRADriver(s) }

// ParseDRADriver is ParseDRADriver through the memo; the version is
// shared: read only.
func (vs *Versions) ParseDRADriver(s string) (*semver.Version, error) {
	return remember(vs, memoDRADriver, s, parseDRADriver)
}

func parseDRADriver(s string) (*semver.Version, error) {
	if !badLength(s) {
		if v, err := semver.StrictNewVersion(strings.TrimPrefix(s, "v")); err == nil {
			return v, nil
		}
	}
	return nil, &VersionError{Component: ComponentDRADriver, Value: s, Expected: expectedDRADriver}
}

// sameDRADriver: the same release, with or without the leading v.
func sameDRADriver(vs *Versions, a, b string) bool {
	x, errX := vs.ParseDRADriver(strings.TrimSpace(a))
	y, errY := vs.ParseDRADriver(strings.TrimSpace(b))
	if errX != nil || errY != nil {
		return sameTrimmed(a, b)
	}
	return x.Equal(y)
}

// ---------------------------------------------------------------- DCGM exporter

// DCGMExporterVersion is a DCGM exporter image tag "<dcgm>-<exporter>[-<flavour>]"
// or, when the image is pinned by digest, only that digest (which has no order).
type DCGMExporterVersion struct {
	DCGM, Exporter []int
	Flavour        string
	Digest         string
	raw            string
}

const digestPrefix = "sha256:"

// isDigest reports whether s is exactly sha256:<64 lower-case hex>, the only
// canonical encoding (OCI image spec).
func isDigest(s string) bool {
	if len(s) != len(digestPrefix)+64 || !strings.HasPrefix(s, digestPrefix) {
		return false
	}
	for _, c := range []byte(s[len(digestPrefix):]) {
		if !isDigit(c) && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// isTagFlavour accepts the image-tag characters, starting alphanumeric.
func isTagFlavour(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range []byte(s) {
		alnum := isDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !alnum && (i == 0 || (c != '_' && c != '.' && c != '-')) {
			return false
		}
	}
	return true
}

// ParseDCGMExporter parses a DCGM exporter tag (4.5.3-4.8.2-distroless,
// 3.3.5-3.4.1-ubuntu22.04, 4.5.3-4.8.2) or a digest "sha256:<64 hex>"; for
// "<anything>@sha256:<64 hex>" only the digest is kept, since the digest alone
// names the image.
func ParseDCGMExporter(s string) (DCGMExporterVersion, error) { return parseDCGMExporter(s) }

// ParseDCGMExporter is ParseDCGMExporter through the memo.
func (vs *Versions) ParseDCGMExporter(s string) (DCGMExporterVersion, error) {
	return remember(vs, memoDCGMExporter, s, parseDCGMExporter)
}

func parseDCGMExporter(s string) (DCGMExporterVersion, error) {
	fail := func() (DCGMExporterVersion, error) {
		return DCGMExporterVersion{}, &VersionError{Component: ComponentDCGMExporter, Value: s, Expected: expectedDCGMExporter}
	}
	if badLength(s) {
		return fail()
	}
	if i := strings.IndexByte(s, '@'); i >= 0 {
		for _, c := range []byte(s[:i]) {
			if c <= ' ' || c > '~' {
				return fail()
			}
		}
		if i == 0 || !isDigest(s[i+1:]) {
			return fail()
		}
		return DCGMExporterVersion{Digest: s[i+1:], raw: s}, nil
	}
	if strings.HasPrefix(s, digestPrefix) {
		if !isDigest(s) {
			return fail()
		}
		return DCGMExporterVersion{Digest: s, raw: s}, nil
	}
	fields := strings.SplitN(s, "-", 3)
	if len(fields) < 2 {
		return fail()
	}
	dcgm, ok1 := parseDotted(fields[0], 2, 4)
	exp, ok2 := parseDotted(fields[1], 2, 4)
	if !ok1 || !ok2 {
		return fail()
	}
	v := DCGMExporterVersion{DCGM: dcgm, Exporter: exp, raw: s}
	if len(fields) == 3 {
		if !isTagFlavour(fields[2]) {
			return fail()
		}
		v.Flavour = fields[2]
	}
	return v, nil
}

// Compare orders DCGM parts, then exporter parts. The flavour is ignored
// because the operator moved from ubuntu22.04 to distroless between releases
// without changing what runs. A digest has no order: two equal digests are 0,
// anything else is an IncomparableError.
func (v DCGMExporterVersion) Compare(o DCGMExporterVersion) (int, error) {
	if v.Digest != "" || o.Digest != "" {
		if v.Digest == o.Digest {
			return 0, nil
		}
		return 0, &IncomparableError{
			Component: ComponentDCGMExporter, A: v.raw, B: o.raw,
			Reason: "an image digest can only be compared for equality",
		}
	}
	if c := cmpParts(v.DCGM, o.DCGM); c != 0 {
		return c, nil
	}
	return cmpParts(v.Exporter, o.Exporter), nil
}

// Typed parsers and comparisons for the component table (tuple.go).

// validates turns a typed parser into a check that the value parses.
func validates[V any](parse func(*Versions, string) (V, error)) func(*Versions, string) error {
	return func(vs *Versions, s string) error { _, err := parse(vs, s); return err }
}

// ordered turns a typed parser and comparison into a comparison of two
// strings; the first value that does not parse is the error.
func ordered[V any](parse func(*Versions, string) (V, error), cmp func(x, y V) (int, error)) func(vs *Versions, a, b string) (int, error) {
	return func(vs *Versions, a, b string) (int, error) {
		x, err := parse(vs, a)
		if err != nil {
			return 0, err
		}
		y, err := parse(vs, b)
		if err != nil {
			return 0, err
		}
		return cmp(x, y)
	}
}

// total adapts a comparison that cannot fail.
func total[V any](cmp func(x, y V) int) func(x, y V) (int, error) {
	return func(x, y V) (int, error) { return cmp(x, y), nil }
}

// sameDCGMExporter: two values that both carry a valid digest compare by
// digest alone.
func sameDCGMExporter(vs *Versions, a, b string) bool {
	x, errX := vs.ParseDCGMExporter(strings.TrimSpace(a))
	y, errY := vs.ParseDCGMExporter(strings.TrimSpace(b))
	if errX == nil && errY == nil && x.Digest != "" && y.Digest != "" {
		return x.Digest == y.Digest
	}
	return sameTrimmed(a, b)
}

// Versions remembers the versions its owner parsed: a Plan review compares
// the same few versions (the record's, the cluster's, the few its nodes
// run) once per node, and parsing them was most of a large selection's
// decision (issue 14 item 5). Its owner is the fleet view (View.Versions),
// so every review of one set of objects shares it and it goes with them;
// gate keeps no memo of its own. A nil *Versions parses every time. Safe
// for concurrent use; the results are values the callers only read.
type Versions struct {
	mu   sync.Mutex
	seen [memoKinds]map[string]parsedVersion
}

// NewVersions is an empty memo.
func NewVersions() *Versions { return &Versions{} }

// memoKind says which parser a remembered result is of.
type memoKind uint8

const (
	memoRKE2 memoKind = iota
	memoKernel
	memoDriver
	memoGPUOperator
	memoDRADriver
	memoDCGMExporter
	memoKinds
)

type parsedVersion struct {
	v   any
	err error
}

// remember parses s with parse once per vs (every time for a nil vs).
func remember[V any](vs *Versions, kind memoKind, s string, parse func(string) (V, error)) (V, error) {
	if vs == nil || len(s) > maxVersionLen {
		return parse(s) // an overlong value is refused at once; never kept
	}
	vs.mu.Lock()
	r, ok := vs.seen[kind][s]
	vs.mu.Unlock()
	if ok {
		v, _ := r.v.(V) // nil for a nil *semver.Version
		return v, r.err
	}
	v, err := parse(s)
	vs.mu.Lock()
	m := vs.seen[kind]
	if m == nil {
		m = map[string]parsedVersion{}
		vs.seen[kind] = m
	}
	if len(m) >= rememberedVersions {
		clear(m) // whatever values requests bring, memory stays bounded
	}
	m[s] = parsedVersion{v, err}
	vs.mu.Unlock()
	return v, err
}

// rememberedVersions bounds each parser's memory (a few hundred KiB at most).
const rememberedVersions = 1024
