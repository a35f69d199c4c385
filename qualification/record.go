// Package qualification holds GPUUpgradeQualification records: the reviewed
// statement that one exact upgrade tuple was proven on a canary node of the same
// hardware. It defines the record types, a strict loader that refuses anything a
// reviewer could misread, and checks that report every problem at once with field
// paths, so the gate can give each problem its own reason code.
//
// The package reads no cluster and no clock: callers pass bytes (or a ConfigMap)
// and the current time.
package qualification

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

const (
	// APIVersionKubeDC is the anchor CLI's record version; such records are
	// accepted as they are so that existing records keep working.
	APIVersionKubeDC = "kube-dc.io/v1alpha1"
	// APIVersionGate is this product's record version; it adds the optional
	// `source` tuple that proves which tuple the canary started from.
	APIVersionGate = "gpu-upgrade-gate.io/v1alpha1"
	// Kind is the only record kind.
	Kind = "GPUUpgradeQualification"
	// MaxRecordBytes bounds a record, as the anchor CLI does, so a record cannot
	// be used to exhaust the webhook's memory.
	MaxRecordBytes = 65536
	// ConfigMapKey is the data key that holds the record in a record ConfigMap.
	ConfigMapKey = "qualification.yaml"
	// ConfigMapLabel marks record ConfigMaps (value "true"); unlabelled
	// ConfigMaps are never read as records.
	ConfigMapLabel = "gpu-upgrade-gate.io/qualification"
	// StateQualified is the only state that lets a record gate an upgrade.
	StateQualified = "qualified"
	// DefaultMaxAge is how old canary evidence may be unless configured otherwise.
	DefaultMaxAge = 720 * time.Hour
	// MaxAgeCeiling is the hard limit on the configured maximum age, so old
	// evidence cannot be revived by configuration.
	MaxAgeCeiling = 2160 * time.Hour
	// DefaultClockSkew is how far in the future completedAt may lie, to absorb
	// clock differences between the canary host and the gate.
	DefaultClockSkew = 5 * time.Minute
	// MaxClockSkew bounds the configured clock skew; a larger skew would let
	// a record dated in the future stay valid for longer than intended.
	MaxClockSkew = time.Hour
	// MaxIDLength bounds the record id (a DNS label's length), which the anchor
	// CLI left unbounded.
	MaxIDLength = 63
)

// Tuple is the full set of coupled versions of a GPU node. A record qualifies
// one tuple as a whole, never a single component.
type Tuple struct {
	Kernel       string `json:"kernel"`
	RKE2         string `json:"rke2"`
	Driver       string `json:"driver"`
	GPUOperator  string `json:"gpuOperator"`
	DCGMExporter string `json:"dcgmExporter"`
	// DRADriver is the DRA driver's version (its kubelet plugin's image),
	// optional: a node that offers no GPUs through DRA, and a record that
	// does not name it, leave it empty (OptionalTupleKeys).
	DRADriver string `json:"draDriver,omitempty"`
}

// String renders the tuple on one line for messages.
func (t Tuple) String() string {
	var sb strings.Builder
	for _, m := range t.Members() {
		if *m.Value == "" && IsOptionalTupleKey(m.Key) {
			continue // not named: the tuple reads as it did without it
		}
		if sb.Len() > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(m.Key + "=" + *m.Value)
	}
	return sb.String()
}

// Canary is the evidence of the canary run: when it ended and which of the
// three required proofs passed.
type Canary struct {
	CompletedAt      string `json:"completedAt"`
	AllocationPassed bool   `json:"allocationPassed"`
	MonitoringPassed bool   `json:"monitoringPassed"`
	RollbackPassed   bool   `json:"rollbackPassed"`
	Evidence         string `json:"evidence"`
	// Checks are the canary's typed results against the source tuple's
	// baseline (gpu-upgrade-gate.io/v1alpha1 records only; checks.go).
	Checks []CanaryCheck `json:"checks,omitempty"`
}

// Record is one qualification record. It is a flat document (no metadata or
// spec), exactly as the anchor CLI defines it, plus `source` for
// gpu-upgrade-gate.io/v1alpha1 records. String fields keep the text the
// reviewer wrote; Check validates them.
type Record struct {
	APIVersion     string   `json:"apiVersion"`
	Kind           string   `json:"kind"`
	ID             string   `json:"id"`
	State          string   `json:"state"`
	ApprovedBy     string   `json:"approvedBy"`
	SourceRevision string   `json:"sourceRevision"`
	Hardware       []string `json:"hardware"`
	Target         Tuple    `json:"target"`
	Source         *Tuple   `json:"source,omitempty"`
	Canary         Canary   `json:"canary"`
}

// CompletedAt parses canary.completedAt as RFC 3339, the only accepted form, so
// callers never guess a time zone.
func (r *Record) CompletedAt() (time.Time, error) {
	return parseCompletedAt(r.Canary.CompletedAt)
}

func parseCompletedAt(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("canary.completedAt %q is not an RFC 3339 time; expected e.g. 2026-07-14T12:00:00Z", s)
	}
	return t, nil
}

// NormalizedHardware returns the record's GPU identities trimmed, lower-cased,
// sorted and deduplicated (blank entries dropped), the form the gate compares
// with a node's identity set.
func (r *Record) NormalizedHardware() []string {
	seen := make(map[string]struct{}, len(r.Hardware))
	out := make([]string, 0, len(r.Hardware))
	for _, h := range r.Hardware {
		n := normalizeHardware(h)
		if n == "" {
			continue
		}
		if _, dup := seen[n]; dup {
			continue
		}
		seen[n] = struct{}{}
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func normalizeHardware(h string) string {
	return strings.ToLower(strings.TrimSpace(h))
}

// Ref names the record and the reviewed evidence commit ("id@sourceRevision",
// revision lower-cased) for audit annotations, so an audit entry points at the
// exact reviewed record.
func (r *Record) Ref() string {
	return r.ID + "@" + strings.ToLower(strings.TrimSpace(r.SourceRevision))
}

// Expiry is the moment the record becomes stale under maxAge, so the gate can
// warn before a record expires.
func (r *Record) Expiry(maxAge time.Duration) (time.Time, error) {
	t, err := r.CompletedAt()
	if err != nil {
		return time.Time{}, err
	}
	return t.Add(maxAge), nil
}
