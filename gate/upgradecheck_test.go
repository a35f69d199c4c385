package gate

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// ucRecord is a valid anchor-format record for the V100 source -> target
// move of fixture_test.go, completed 2026-11-20T12:00:00Z.
const ucRecord = `apiVersion: kube-dc.io/v1alpha1
kind: GPUUpgradeQualification
id: v100-kernel-rke2-1
state: qualified
approvedBy: platform-review
sourceRevision: 3F1C9A7E5B2D4086A1E7C3B9D5F2A8E6C4B0D9F1
hardware:
  - 10de:1db6/10de:124a
target:
  kernel: 6.8.0-135-generic
  rke2: v1.36.1+rke2r1
  driver: 580.130.00
  gpuOperator: v26.3.3
  dcgmExporter: 4.5.3-4.8.2-distroless
canary:
  completedAt: "2026-11-20T12:00:00Z"
  allocationPassed: true
  monitoringPassed: true
  rollbackPassed: true
  evidence: change-record-42
`

// ucRecordJSON is ucRecord as JSON, which the anchor's yaml.v3 also reads.
const ucRecordJSON = `{"apiVersion":"kube-dc.io/v1alpha1","kind":"GPUUpgradeQualification","id":"v100-kernel-rke2-1",
"state":"qualified","approvedBy":"platform-review","sourceRevision":"3f1c9a7e5b2d4086a1e7c3b9d5f2a8e6c4b0d9f1",
"hardware":["10de:1db6/10de:124a"],
"target":{"kernel":"6.8.0-135-generic","rke2":"v1.36.1+rke2r1","driver":"580.130.00","gpuOperator":"v26.3.3","dcgmExporter":"4.5.3-4.8.2-distroless"},
"canary":{"completedAt":"2026-11-20T12:00:00Z","allocationPassed":true,"monitoringPassed":true,"rollbackPassed":true,"evidence":"change-record-42"}}
`

var (
	ucNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
)

// Why our verdict differs from the anchor's. Every case whose verdict
// differs names one; docs/cli.md lists each under "Differences from the
// kube-dc upgrade-check".
const (
	diffBooleans     = "stricter: only real YAML booleans (yes/on/y are refused)"
	diffRollback     = "stricter: a kernel, driver, GPU Operator or DCGM downgrade is an unproven rollback"
	diffIDLength     = "stricter: record id is at most 63 characters"
	diffMaxAge       = "stricter: --max-canary-age must be above 0 and at most 2160h, never silently 720h"
	diffVersionForm  = "stricter: current and target values must parse as versions of their component"
	diffSHA256       = "design: sourceRevision may be a SHA-256 (64 hex) Git revision"
	diffGateVersion  = "design: gpu-upgrade-gate.io/v1alpha1 records (with source) are accepted"
	verdictPass      = "pass"
	verdictBlock     = "block"
	maxAgeDefault    = qualification.DefaultMaxAge
	clockSkewDefault = qualification.DefaultClockSkew
)

// sub edits exactly one occurrence, so a case cannot silently test the
// unedited record.
func sub(old, new string) func(*testing.T, string) string {
	return func(t *testing.T, s string) string {
		t.Helper()
		require.Equal(t, 1, strings.Count(s, old), "record must contain %q exactly once", old)
		return strings.Replace(s, old, new, 1)
	}
}

func subs(edits ...func(*testing.T, string) string) func(*testing.T, string) string {
	return func(t *testing.T, s string) string {
		for _, e := range edits {
			s = e(t, s)
		}
		return s
	}
}

func whole(text string) func(*testing.T, string) string {
	return func(*testing.T, string) string { return text }
}

// padRecord pads the record with a trailing comment to exactly n bytes.
func padRecord(n int) func(*testing.T, string) string {
	return func(t *testing.T, s string) string {
		pad := n - len(s) - len("#\n")
		require.GreaterOrEqual(t, pad, 0)
		out := s + "#" + strings.Repeat("x", pad) + "\n"
		require.Len(t, out, n)
		return out
	}
}

func completed(d time.Duration) func(*testing.T, string) string {
	return sub(`completedAt: "2026-11-20T12:00:00Z"`, `completedAt: "`+ucNow.Add(d).Format(time.RFC3339)+`"`)
}

func ucRequest() UpgradeCheckRequest {
	return UpgradeCheckRequest{
		PCIIDs:    []string{hwV100},
		Current:   tupleSource,
		Target:    tupleTarget,
		Freshness: qualification.Freshness{Now: ucNow, MaxAge: maxAgeDefault, ClockSkew: clockSkewDefault},
	}
}

// TestUpgradeCheckAnchorCases walks every behaviour anchor-cli-gate.md
// sections 1 and 2 describe (probed ones included), with the anchor's
// verdict and ours. Where they differ the case names why.
func TestUpgradeCheckAnchorCases(t *testing.T) {
	cases := []struct {
		name   string
		record func(*testing.T, string) string // edits ucRecord; nil keeps it
		req    func(*UpgradeCheckRequest)      // edits ucRequest(); nil keeps it
		anchor string                          // the anchor's verdict
		want   []Code                          // our blocker codes; nil = allowed
		diff   string                          // why the verdicts differ; "" when they agree
	}{
		// ---- section 1: loading
		{name: "valid record passes", anchor: verdictPass},
		{name: "record of exactly 65536 bytes loads", record: padRecord(qualification.MaxRecordBytes), anchor: verdictPass},
		{name: "record of 65537 bytes is refused", record: padRecord(qualification.MaxRecordBytes + 1), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "unknown top-level field metadata", record: sub("kind: GPUUpgradeQualification\n", "kind: GPUUpgradeQualification\nmetadata:\n  name: x\n"), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "unknown field target.cuda", record: sub("  driver: 580.130.00\n", "  driver: 580.130.00\n  cuda: \"13.0\"\n"), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "unknown field canary.xid", record: sub("  evidence: change-record-42\n", "  evidence: change-record-42\n  xid: none\n"), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "trailing bare --- is a second document", record: func(_ *testing.T, s string) string { return s + "---\n" }, anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "trailing --- with a comment is a second document", record: func(_ *testing.T, s string) string { return s + "--- # end\n" }, anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "leading --- and trailing ... are accepted", record: func(_ *testing.T, s string) string { return "---\n" + s + "...\n" }, anchor: verdictPass},
		{name: "empty file", record: whole(""), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "comment-only file", record: whole("# nothing here\n"), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		// The anchor loads ~ as the zero record and Check then blocks every
		// field; we refuse it at load. Same verdict.
		{name: "null document", record: whole("~\n"), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "duplicate key", record: sub("state: qualified\n", "state: qualified\nid: v100-kernel-rke2-2\n"), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "JSON body is accepted", record: whole(ucRecordJSON), anchor: verdictPass},
		{name: "allocationPassed: yes", record: sub("allocationPassed: true", "allocationPassed: yes"), anchor: verdictPass, want: []Code{CodeRecordInvalid}, diff: diffBooleans},
		{name: "monitoringPassed: on", record: sub("monitoringPassed: true", "monitoringPassed: on"), anchor: verdictPass, want: []Code{CodeRecordInvalid}, diff: diffBooleans},
		{name: "rollbackPassed: y", record: sub("rollbackPassed: true", "rollbackPassed: y"), anchor: verdictPass, want: []Code{CodeRecordInvalid}, diff: diffBooleans},
		{name: `quoted "true" is not a boolean`, record: sub("allocationPassed: true", `allocationPassed: "true"`), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "integer 1 is not a boolean", record: sub("allocationPassed: true", "allocationPassed: 1"), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "hardware as a bare scalar", record: sub("hardware:\n  - 10de:1db6/10de:124a\n", "hardware: 10de:1db6/10de:124a\n"), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "unquoted number keeps its text (driver: 580.130)", record: sub("driver: 580.130.00", "driver: 580.130"),
			req: func(r *UpgradeCheckRequest) { r.Target.Driver = "580.130" }, anchor: verdictPass},
		{name: "unquoted completedAt", record: sub(`completedAt: "2026-11-20T12:00:00Z"`, "completedAt: 2026-11-20T12:00:00Z"), anchor: verdictPass},

		// ---- section 1: fields
		{name: "wrong apiVersion", record: sub("kube-dc.io/v1alpha1", "kube-dc.io/v1beta1"), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "wrong kind", record: sub("kind: GPUUpgradeQualification", "kind: GPUQualification"), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "gpu-upgrade-gate.io/v1alpha1 record without source", record: sub("kube-dc.io/v1alpha1", qualification.APIVersionGate), anchor: verdictBlock, diff: diffGateVersion},
		{name: "gpu-upgrade-gate.io/v1alpha1 record whose source the current tuple runs", record: subs(sub("kube-dc.io/v1alpha1", qualification.APIVersionGate), sub("canary:\n", sourceBlock+"canary:\n")), anchor: verdictBlock, diff: diffGateVersion},
		{name: "gpu-upgrade-gate.io/v1alpha1 record whose source the current tuple does not run", record: subs(sub("kube-dc.io/v1alpha1", qualification.APIVersionGate), sub("canary:\n", sourceBlock+"canary:\n")),
			req: func(r *UpgradeCheckRequest) { r.Current.Kernel = "6.8.0-120-generic" }, anchor: verdictBlock, want: []Code{CodeSourceMismatch}},
		{name: "upper-case id", record: sub("id: v100-kernel-rke2-1", "id: V100-kernel-rke2-1"), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "id a..b matches the pattern", record: sub("id: v100-kernel-rke2-1", "id: a..b"), anchor: verdictPass},
		{name: "id of 63 characters", record: sub("id: v100-kernel-rke2-1", "id: "+strings.Repeat("a", 63)), anchor: verdictPass},
		{name: "id of 500 characters", record: sub("id: v100-kernel-rke2-1", "id: "+strings.Repeat("a", 500)), anchor: verdictPass, want: []Code{CodeRecordInvalid}, diff: diffIDLength},
		{name: "state Qualified (case-sensitive)", record: sub("state: qualified", "state: Qualified"), anchor: verdictBlock, want: []Code{CodeRecordNotQualified}},
		{name: "state draft", record: sub("state: qualified", "state: draft"), anchor: verdictBlock, want: []Code{CodeRecordNotQualified}},
		{name: "blank approvedBy", record: sub("approvedBy: platform-review", `approvedBy: "  "`), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "upper-case 40-hex sourceRevision", anchor: verdictPass},
		{name: "SHA-256 sourceRevision", record: sub("3F1C9A7E5B2D4086A1E7C3B9D5F2A8E6C4B0D9F1", strings.Repeat("ab", 32)), anchor: verdictBlock, diff: diffSHA256},
		{name: "39-hex sourceRevision", record: sub("3F1C9A7E5B2D4086A1E7C3B9D5F2A8E6C4B0D9F1", "3F1C9A7E5B2D4086A1E7C3B9D5F2A8E6C4B0D9F"), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "non-hex sourceRevision", record: sub("3F1C9A7E5B2D4086A1E7C3B9D5F2A8E6C4B0D9F1", "3G1C9A7E5B2D4086A1E7C3B9D5F2A8E6C4B0D9F1"), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "record hardware empty", record: sub("hardware:\n  - 10de:1db6/10de:124a\n", "hardware: []\n"), anchor: verdictBlock, want: []Code{CodeRecordInvalid, CodeHardwareNotQualified}},
		{name: "record hardware without subsystem pair", record: sub("  - 10de:1db6/10de:124a\n", "  - 10de:1db6\n"), anchor: verdictBlock, want: []Code{CodeRecordInvalid, CodeHardwareNotQualified}},
		{name: "record hardware duplicated case-only", record: sub("  - 10de:1db6/10de:124a\n", "  - 10de:1db6/10de:124a\n  - 10DE:1DB6/10DE:124A\n"), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "completedAt with fractional seconds", record: sub(`"2026-11-20T12:00:00Z"`, `"2026-11-20T12:00:00.123Z"`), anchor: verdictPass},
		{name: "completedAt with a numeric offset", record: sub(`"2026-11-20T12:00:00Z"`, `"2026-11-20T14:00:00+02:00"`), anchor: verdictPass},
		{name: "completedAt with lower-case t", record: sub(`"2026-11-20T12:00:00Z"`, `"2026-11-20t12:00:00Z"`), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "completedAt with lower-case z", record: sub(`"2026-11-20T12:00:00Z"`, `"2026-11-20T12:00:00z"`), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "completedAt with a space for T", record: sub(`"2026-11-20T12:00:00Z"`, `"2026-11-20 12:00:00Z"`), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "completedAt as a bare date", record: sub(`"2026-11-20T12:00:00Z"`, `"2026-11-20"`), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},
		{name: "allocation check failed", record: sub("allocationPassed: true", "allocationPassed: false"), anchor: verdictBlock, want: []Code{CodeCanaryIncomplete}},
		{name: "rollback check failed", record: sub("rollbackPassed: true", "rollbackPassed: false"), anchor: verdictBlock, want: []Code{CodeCanaryIncomplete}},
		{name: "blank evidence", record: sub("evidence: change-record-42", `evidence: ""`), anchor: verdictBlock, want: []Code{CodeRecordInvalid}},

		// ---- section 1: time rules
		{name: "completedAt 5m in the future (clock skew)", record: completed(5 * time.Minute), anchor: verdictPass},
		{name: "completedAt 5m1s in the future", record: completed(5*time.Minute + time.Second), anchor: verdictBlock, want: []Code{CodeEvidenceFromFuture}},
		{name: "evidence exactly 720h old", record: completed(-720 * time.Hour), anchor: verdictPass},
		{name: "evidence 720h and 1s old", record: completed(-720*time.Hour - time.Second), anchor: verdictBlock, want: []Code{CodeEvidenceStale}},
		{name: "--max-canary-age 0 (anchor: silently 720h)", req: func(r *UpgradeCheckRequest) { r.Freshness.MaxAge = 0 }, anchor: verdictPass, want: []Code{CodeEvidenceStale}, diff: diffMaxAge},
		{name: "--max-canary-age -1h (anchor: silently 720h)", req: func(r *UpgradeCheckRequest) { r.Freshness.MaxAge = -time.Hour }, anchor: verdictPass, want: []Code{CodeEvidenceStale}, diff: diffMaxAge},
		{name: "--max-canary-age 2161h", req: func(r *UpgradeCheckRequest) { r.Freshness.MaxAge = 2161 * time.Hour }, anchor: verdictPass, want: []Code{CodeEvidenceStale}, diff: diffMaxAge},
		{name: "--max-canary-age 100000h revives 2020 evidence in the anchor", record: sub(`"2026-11-20T12:00:00Z"`, `"2020-01-01T00:00:00Z"`),
			req: func(r *UpgradeCheckRequest) { r.Freshness.MaxAge = 100000 * time.Hour }, anchor: verdictPass, want: []Code{CodeEvidenceStale}, diff: diffMaxAge},
		{name: "--max-canary-age 2160h (the ceiling) with 80-day-old evidence", record: completed(-80 * 24 * time.Hour),
			req: func(r *UpgradeCheckRequest) { r.Freshness.MaxAge = qualification.MaxAgeCeiling }, anchor: verdictPass},

		// ---- section 2: component rules
		{name: `explicit empty --current-kernel ""`, req: func(r *UpgradeCheckRequest) { r.Current.Kernel = "" }, anchor: verdictBlock, want: []Code{CodeFactsMissing}},
		{name: "target with a trailing space", req: func(r *UpgradeCheckRequest) { r.Target.Kernel += " " }, anchor: verdictBlock, want: []Code{CodeTargetNotQualified, CodeVersionInvalid}},
		{name: "target with a leading space", req: func(r *UpgradeCheckRequest) { r.Target.Driver = " " + r.Target.Driver }, anchor: verdictBlock, want: []Code{CodeTargetNotQualified, CodeVersionInvalid}},
		{name: "--target-rke2 1.36.1+rke2r1 against v1.36.1+rke2r1", req: func(r *UpgradeCheckRequest) { r.Target.RKE2 = "1.36.1+rke2r1" }, anchor: verdictBlock, want: []Code{CodeTargetNotQualified}},
		{name: "1.36.1+rke2r1 in both the record and the flag", record: sub("rke2: v1.36.1+rke2r1", "rke2: 1.36.1+rke2r1"), req: func(r *UpgradeCheckRequest) { r.Target.RKE2 = "1.36.1+rke2r1" }, anchor: verdictPass},
		{name: "current values are not compared with a kube-dc record", req: func(r *UpgradeCheckRequest) { r.Current.Kernel = "6.8.0-120-generic" }, anchor: verdictPass},
		{name: "kernel 6.8.0-200 to 6.8.0-135", req: func(r *UpgradeCheckRequest) { r.Current.Kernel = "6.8.0-200-generic" }, anchor: verdictPass, want: []Code{CodeComponentDowngrade}, diff: diffRollback},
		{name: "driver 999.99 to 580.130.00", req: func(r *UpgradeCheckRequest) { r.Current.Driver = "999.99" }, anchor: verdictPass, want: []Code{CodeComponentDowngrade}, diff: diffRollback},
		{name: "GPU Operator v26.7.0 to v26.3.3", req: func(r *UpgradeCheckRequest) { r.Current.GPUOperator = "v26.7.0" }, anchor: verdictPass, want: []Code{CodeComponentDowngrade}, diff: diffRollback},
		{name: "kernel flavour change cannot be ordered and passes", record: sub("kernel: 6.8.0-135-generic", "kernel: 6.8.0-135-lowlatency"), req: func(r *UpgradeCheckRequest) { r.Target.Kernel = "6.8.0-135-lowlatency" }, anchor: verdictPass},
		{name: "DCGM exporter free text (no format check in the anchor)", record: sub("dcgmExporter: 4.5.3-4.8.2-distroless", "dcgmExporter: latest"), req: func(r *UpgradeCheckRequest) { r.Target.DCGMExporter = "latest" }, anchor: verdictPass, want: []Code{CodeRecordInvalid, CodeVersionInvalid}, diff: diffVersionForm},
		{name: "unparsable current driver (the anchor never reads it)", req: func(r *UpgradeCheckRequest) { r.Current.Driver = "580.126.20-beta" }, anchor: verdictPass, want: []Code{CodeVersionInvalid}, diff: diffVersionForm},
		{name: "DCGM exporter pinned by digest", record: sub("dcgmExporter: 4.5.3-4.8.2-distroless", "dcgmExporter: sha256:"+strings.Repeat("0a", 32)), req: func(r *UpgradeCheckRequest) { r.Target.DCGMExporter = "sha256:" + strings.Repeat("0a", 32) }, anchor: verdictPass},
		{name: "no change: current equals target", record: subs(sub("kernel: 6.8.0-135-generic", "kernel: 6.8.0-134-generic"), sub("rke2: v1.36.1+rke2r1", "rke2: v1.35.3+rke2r3"), sub("driver: 580.130.00", "driver: 580.126.20")),
			req: func(r *UpgradeCheckRequest) { r.Target = r.Current }, anchor: verdictBlock, want: []Code{CodeNoChange}},
		{name: "single component change (kernel only, same RKE2)", record: subs(sub("rke2: v1.36.1+rke2r1", "rke2: v1.35.3+rke2r3"), sub("driver: 580.130.00", "driver: 580.126.20")),
			req: func(r *UpgradeCheckRequest) { r.Target = r.Current; r.Target.Kernel = "6.8.0-135-generic" }, anchor: verdictPass},

		// ---- section 2: RKE2
		{name: "current RKE2 without v", req: func(r *UpgradeCheckRequest) { r.Current.RKE2 = "1.35.3+rke2r3" }, anchor: verdictPass},
		{name: "RKE2 v2.0.0+rke2r1", record: sub("rke2: v1.36.1+rke2r1", "rke2: v2.0.0+rke2r1"), req: func(r *UpgradeCheckRequest) { r.Target.RKE2 = "v2.0.0+rke2r1" }, anchor: verdictBlock, want: []Code{CodeRecordInvalid, CodeVersionInvalid}},
		{name: "k3s version string", req: func(r *UpgradeCheckRequest) { r.Current.RKE2 = "v1.35.3+k3s1" }, anchor: verdictBlock, want: []Code{CodeVersionInvalid}},
		{name: "SUC's -rke2rN spelling is not the anchor's form", req: func(r *UpgradeCheckRequest) { r.Current.RKE2 = "v1.35.3-rke2r3" }, anchor: verdictBlock, want: []Code{CodeVersionInvalid}},
		{name: "release candidate is not the anchor's form", req: func(r *UpgradeCheckRequest) { r.Current.RKE2 = "v1.36.1-rc1+rke2r1" }, anchor: verdictBlock, want: []Code{CodeVersionInvalid}},
		{name: "leading zeros (v1.035.3+rke2r3)", req: func(r *UpgradeCheckRequest) { r.Current.RKE2 = "v1.035.3+rke2r3" }, anchor: verdictPass},
		{name: "minor that overflows fails closed", req: func(r *UpgradeCheckRequest) { r.Current.RKE2 = "v1.99999999999999999999.3+rke2r3" }, anchor: verdictBlock, want: []Code{CodeVersionInvalid}},
		{name: "empty --current-rke2", req: func(r *UpgradeCheckRequest) { r.Current.RKE2 = "" }, anchor: verdictBlock, want: []Code{CodeFactsMissing}},
		{name: "revision-only drop r2 to r1", req: func(r *UpgradeCheckRequest) { r.Current.RKE2 = "v1.36.1+rke2r2" }, anchor: verdictBlock, want: []Code{CodeRKE2Downgrade}},
		{name: "patch drop within a minor", req: func(r *UpgradeCheckRequest) { r.Current.RKE2 = "v1.36.2+rke2r1" }, anchor: verdictBlock, want: []Code{CodeRKE2Downgrade}},
		{name: "equal RKE2 version is allowed", req: func(r *UpgradeCheckRequest) { r.Current.RKE2 = "v1.36.1+rke2r1" }, anchor: verdictPass},
		{name: "minor skip 1.34 to 1.36", req: func(r *UpgradeCheckRequest) { r.Current.RKE2 = "v1.34.9+rke2r1" }, anchor: verdictBlock, want: []Code{CodeMinorSkip}},
		{name: "patch jump within one minor hop (1.35.0 to 1.36.1)", req: func(r *UpgradeCheckRequest) { r.Current.RKE2 = "v1.35.0+rke2r1" }, anchor: verdictPass},
		{name: "patch and revision jump within a minor (1.36.0+rke2r9 to 1.36.1+rke2r1)", req: func(r *UpgradeCheckRequest) { r.Current.RKE2 = "v1.36.0+rke2r9" }, anchor: verdictPass},

		// ---- section 2: hardware
		{name: "upper-case PCI IDs match", req: func(r *UpgradeCheckRequest) { r.PCIIDs = []string{"10DE:1DB6/10DE:124A"} }, anchor: verdictPass},
		{name: "PCI ID with surrounding whitespace", req: func(r *UpgradeCheckRequest) { r.PCIIDs = []string{" 10de:1db6/10de:124a "} }, anchor: verdictPass},
		{name: "order does not matter", record: sub("  - 10de:1db6/10de:124a\n", "  - 10de:1db6/10de:124a\n  - 10de:2335/10de:18bf\n"),
			req: func(r *UpgradeCheckRequest) { r.PCIIDs = []string{hwH200, hwV100} }, anchor: verdictPass},
		{name: "subset does not match", record: sub("  - 10de:1db6/10de:124a\n", "  - 10de:1db6/10de:124a\n  - 10de:2335/10de:18bf\n"), anchor: verdictBlock, want: []Code{CodeHardwareNotQualified}},
		{name: "other hardware", req: func(r *UpgradeCheckRequest) { r.PCIIDs = []string{hwH200} }, anchor: verdictBlock, want: []Code{CodeHardwareNotQualified}},
		{name: "duplicate PCI ID", req: func(r *UpgradeCheckRequest) { r.PCIIDs = []string{hwV100, hwV100} }, anchor: verdictBlock, want: []Code{CodeHardwareUnknown}},
		{name: "case-only duplicate PCI ID", req: func(r *UpgradeCheckRequest) { r.PCIIDs = []string{hwV100, strings.ToUpper(hwV100)} }, anchor: verdictBlock, want: []Code{CodeHardwareUnknown}},
		{name: "0x prefix", req: func(r *UpgradeCheckRequest) { r.PCIIDs = []string{"0x10de:0x1db6/0x10de:0x124a"} }, anchor: verdictBlock, want: []Code{CodeHardwareUnknown}},
		{name: "missing subsystem pair", req: func(r *UpgradeCheckRequest) { r.PCIIDs = []string{"10de:1db6"} }, anchor: verdictBlock, want: []Code{CodeHardwareUnknown}},
		{name: "malformed entry beside a valid one still blocks", req: func(r *UpgradeCheckRequest) { r.PCIIDs = []string{hwV100, "10de:1db6"} }, anchor: verdictBlock, want: []Code{CodeHardwareUnknown}},
		{name: "empty request list", req: func(r *UpgradeCheckRequest) { r.PCIIDs = nil }, anchor: verdictBlock, want: []Code{CodeHardwareUnknown}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text := ucRecord
			if tc.record != nil {
				text = tc.record(t, text)
			}
			rec, err := qualification.Load(bytes.NewReader([]byte(text)))
			req := ucRequest()
			req.Record = RecordEntry{Record: rec, Err: err}
			if tc.req != nil {
				tc.req(&req)
			}
			d := UpgradeCheck(req)
			t.Log(d.Message())

			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			ours := verdictPass
			if len(tc.want) > 0 {
				ours = verdictBlock
			}
			assert.Equal(t, ours == verdictPass, d.Allowed, "Allowed must follow the blockers")
			require.Contains(t, []string{verdictPass, verdictBlock}, tc.anchor)
			if ours == tc.anchor {
				assert.Empty(t, tc.diff, "the verdicts agree, so the case names no difference")
			} else {
				assert.NotEmpty(t, tc.diff, "the anchor says %s and we say %s: name the reason", tc.anchor, ours)
			}
			for _, b := range d.Blockers {
				assert.NotEmpty(t, b.Err.Field, "blocker %s has no flag", b.Code)
				assert.NotEmpty(t, strings.TrimSpace(b.Err.Detail), "blocker %s has no message", b.Code)
			}
		})
	}
}

// sourceBlock is the V100 source tuple as a record's source.
const sourceBlock = `source:
  kernel: 6.8.0-134-generic
  rke2: v1.35.3+rke2r3
  driver: 580.126.20
  gpuOperator: v26.3.3
  dcgmExporter: 4.5.3-4.8.2-distroless
`

func TestUpgradeCheckPassRecordInfo(t *testing.T) {
	rec, err := qualification.Parse([]byte(strings.Replace(ucRecord, `"2026-11-20T12:00:00Z"`, `"2026-11-20T14:00:00+02:00"`, 1)))
	require.NoError(t, err)
	req := ucRequest()
	req.Record = RecordEntry{Record: rec}
	d := UpgradeCheck(req)
	require.True(t, d.Allowed, d.Message())
	require.NotNil(t, d.Record)
	assert.Equal(t, "v100-kernel-rke2-1", d.Record.ID)
	assert.Equal(t, "3f1c9a7e5b2d4086a1e7c3b9d5f2a8e6c4b0d9f1", d.Record.SourceRevision, "the revision is shown lower-cased")
	assert.Equal(t, "2026-11-20T14:00:00+02:00", d.Record.CompletedAt, "completedAt keeps the record's own offset")
	assert.Equal(t, "2026-12-20T12:00:00Z", d.Record.Expires)
	assert.Equal(t, "platform-review", d.Record.ApprovedBy)
}

func TestUpgradeCheckMessages(t *testing.T) {
	rec, err := qualification.Parse([]byte(ucRecord))
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		req   func(*UpgradeCheckRequest)
		field string
		text  string
	}{
		{"required names the blank flag", func(r *UpgradeCheckRequest) { r.Target.Driver = "" }, "--target-driver", "no value for --target-driver; type every current and target version"},
		{"duplicate says so", func(r *UpgradeCheckRequest) { r.PCIIDs = []string{hwV100, hwV100} }, "--pci-id[1]", `hardware "10de:1db6/10de:124a" is duplicated`},
		{"mismatch lists both sets", func(r *UpgradeCheckRequest) { r.PCIIDs = []string{hwH200} }, "--pci-id", "hardware tuple mismatch: requested 10de:2335/10de:18bf, qualified 10de:1db6/10de:124a"},
		{"not qualified quotes both values", func(r *UpgradeCheckRequest) { r.Target.Kernel = "6.8.0-136-generic" }, "--target-kernel", `kernel target "6.8.0-136-generic" is not the qualified value "6.8.0-135-generic"`},
		{"RKE2 form", func(r *UpgradeCheckRequest) { r.Current.RKE2 = "v1.35.3+k3s1" }, "--current-rke2", "upgrade-check takes a release, v1.MINOR.PATCH+rke2rN"},
		{"RKE2 release candidate", func(r *UpgradeCheckRequest) { r.Target.RKE2 = "v1.36.1-rc1+rke2r1" }, "--target-rke2", "not a -rcN release candidate, which Plans may name"},
		{"downgrade names both values", func(r *UpgradeCheckRequest) { r.Current.Driver = "999.99" }, "--target-driver", "driver 999.99 to 580.130.00 is a downgrade"},
		{"max age bound", func(r *UpgradeCheckRequest) { r.Freshness.MaxAge = 0 }, "--max-canary-age", "the maximum canary age must be greater than 0 and at most 2160h0m0s"},
		{"load error", func(r *UpgradeCheckRequest) { r.Record = RecordEntry{Err: assert.AnError} }, "--qualification", assert.AnError.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := ucRequest()
			req.Record = RecordEntry{Record: rec}
			tc.req(&req)
			d := UpgradeCheck(req)
			require.False(t, d.Allowed)
			var found bool
			for _, b := range d.Blockers {
				if b.Err.Field == tc.field && strings.Contains(b.Err.Detail, tc.text) {
					found = true
				}
			}
			assert.True(t, found, "no blocker at %s containing %q in:\n%s", tc.field, tc.text, d.Message())
		})
	}
}

func TestValidateRecord(t *testing.T) {
	fresh := qualification.Freshness{Now: ucNow, MaxAge: maxAgeDefault, ClockSkew: clockSkewDefault}
	load := func(text string) RecordEntry {
		rec, err := qualification.Parse([]byte(text))
		return RecordEntry{Record: rec, Err: err}
	}
	for _, tc := range []struct {
		name   string
		entry  RecordEntry
		f      qualification.Freshness
		want   []Code
		fields []string
	}{
		{name: "valid", entry: load(ucRecord), f: fresh},
		{name: "stale is a problem here", entry: load(ucRecord), f: qualification.Freshness{Now: ucNow.Add(60 * 24 * time.Hour), MaxAge: maxAgeDefault, ClockSkew: clockSkewDefault},
			want: []Code{CodeEvidenceStale}, fields: []string{"canary.completedAt"}},
		{name: "every load problem is its own blocker", entry: load(strings.Replace(strings.Replace(ucRecord, "allocationPassed: true", "allocationPassed: yes", 1), "monitoringPassed: true", "monitoringPassed: on", 1)), f: fresh,
			want: []Code{CodeRecordInvalid}, fields: []string{"", ""}},
		{name: "missing target component and unparsable driver", entry: load(strings.Replace(strings.Replace(ucRecord, "  rke2: v1.36.1+rke2r1\n", "", 1), "driver: 580.130.00", "driver: 580-beta", 1)), f: fresh,
			want: []Code{CodeRecordInvalid}, fields: []string{"target.rke2", "target.driver"}},
		{name: "bad limit", entry: load(ucRecord), f: qualification.Freshness{Now: ucNow, MaxAge: 3000 * time.Hour, ClockSkew: 2 * time.Hour},
			want: []Code{CodeEvidenceStale, CodeEvidenceFromFuture}, fields: []string{"--max-canary-age", "--clock-skew"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := ValidateRecord(tc.entry, tc.f)
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			assert.Equal(t, len(tc.want) == 0, d.Allowed)
			var fields []string
			for _, b := range d.Blockers {
				fields = append(fields, b.Err.Field)
				assert.NotEmpty(t, b.Err.Detail)
			}
			if tc.fields != nil {
				assert.Equal(t, tc.fields, fields)
			}
		})
	}
}
