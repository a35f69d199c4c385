package qualification

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ProblemKind sorts problems so the gate can give each its reason code.
type ProblemKind string

const (
	// ProblemInvalid is a structural problem: apiVersion/kind, id, approvedBy,
	// sourceRevision, hardware, target, source, completedAt format, evidence.
	ProblemInvalid ProblemKind = "Invalid"
	// ProblemNotQualified is a state other than StateQualified.
	ProblemNotQualified ProblemKind = "NotQualified"
	// ProblemCanaryIncomplete is one canary proof (allocation, monitoring,
	// rollback) that did not pass; one problem per false boolean.
	ProblemCanaryIncomplete ProblemKind = "CanaryIncomplete"
	// ProblemStale is canary evidence older than the maximum age.
	ProblemStale ProblemKind = "Stale"
	// ProblemFuture is canary evidence dated further in the future than the
	// allowed clock skew.
	ProblemFuture ProblemKind = "Future"
)

// Problem is one reason a record cannot gate an upgrade, with its field path.
type Problem struct {
	Kind ProblemKind
	Err  *field.Error
}

// Problems is every problem of one record, in field order.
type Problems []Problem

// ErrorList returns all problems as a field.ErrorList, for messages that list
// every problem.
func (p Problems) ErrorList() field.ErrorList {
	if len(p) == 0 {
		return nil
	}
	out := make(field.ErrorList, 0, len(p))
	for _, pr := range p {
		out = append(out, pr.Err)
	}
	return out
}

// Of returns the problems of one kind, so the gate can emit one reason code
// per kind.
func (p Problems) Of(kind ProblemKind) field.ErrorList {
	var out field.ErrorList
	for _, pr := range p {
		if pr.Kind == kind {
			out = append(out, pr.Err)
		}
	}
	return out
}

// Freshness carries the clock and the limits for the age checks. Now is
// injected (the package never reads the clock) so decisions are reproducible.
// Validate MaxAge and ClockSkew with ValidateFreshness first: Check applies
// them as given and never substitutes a default.
type Freshness struct {
	Now       time.Time
	MaxAge    time.Duration
	ClockSkew time.Duration
}

// ValidateFreshness refuses a maximum age <= 0 or above MaxAgeCeiling and a
// clock skew < 0 or above MaxClockSkew, as configuration errors that show the
// value seen; a bad value is never silently replaced by the default (the
// anchor CLI turned <= 0 into 30 days). Errors are reported at
// path.maxAge and path.clockSkew (just maxAge and clockSkew when path is nil).
func ValidateFreshness(maxAge, skew time.Duration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if maxAge <= 0 || maxAge > MaxAgeCeiling {
		errs = append(errs, field.Invalid(child(path, "maxAge"), maxAge.String(),
			fmt.Sprintf("the maximum canary age must be greater than 0 and at most %s (default %s)", MaxAgeCeiling, DefaultMaxAge)))
	}
	if skew < 0 || skew > MaxClockSkew {
		errs = append(errs, field.Invalid(child(path, "clockSkew"), skew.String(),
			fmt.Sprintf("the clock skew must be between 0s and %s (default %s)", MaxClockSkew, DefaultClockSkew)))
	}
	return errs
}

var (
	idPattern           = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$`)
	revisionPattern     = regexp.MustCompile(`^(?:[0-9a-fA-F]{40}|[0-9a-fA-F]{64})$`)
	hardwarePattern     = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{4}/[0-9a-f]{4}:[0-9a-f]{4}$`)
	vendorDevicePattern = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{4}$`)
)

const hardwareExpected = "expected vendor:device/subvendor:subdevice, e.g. 10de:1db6/10de:124a; a vendor:device without subsystem IDs is not enough, because one device ID covers boards the canary did not prove"

// Check returns every problem of the record at once: structure, state, canary
// proofs and freshness. Freshness is skipped when completedAt does not parse
// (that is already an Invalid problem). An empty result means the record may
// gate an upgrade; the gate still compares it with the Plan and the nodes.
func Check(r *Record, f Freshness) Problems {
	var p Problems
	add := func(kind ProblemKind, err *field.Error) { p = append(p, Problem{Kind: kind, Err: err}) }
	invalid := func(err *field.Error) { add(ProblemInvalid, err) }
	if r == nil {
		invalid(field.Required(field.NewPath("record"), "no record was given"))
		return p
	}

	// apiVersion and kind.
	apiPath, kindPath := field.NewPath("apiVersion"), field.NewPath("kind")
	switch r.APIVersion {
	case APIVersionKubeDC, APIVersionGate:
	case "":
		invalid(field.Required(apiPath, fmt.Sprintf("expected %s or %s", APIVersionKubeDC, APIVersionGate)))
	default:
		invalid(field.NotSupported(apiPath, Clip(r.APIVersion), []string{APIVersionKubeDC, APIVersionGate}))
	}
	switch r.Kind {
	case Kind:
	case "":
		invalid(field.Required(kindPath, "expected "+Kind))
	default:
		invalid(field.NotSupported(kindPath, Clip(r.Kind), []string{Kind}))
	}

	// id.
	idPath := field.NewPath("id")
	switch {
	case strings.TrimSpace(r.ID) == "":
		invalid(field.Required(idPath, "a stable lowercase identifier, e.g. v100-kernel-canary-1"))
	default:
		if len(r.ID) > MaxIDLength {
			e := field.TooLong(idPath, r.ID, MaxIDLength)
			e.Detail += fmt.Sprintf(" (it is %d)", len(r.ID))
			invalid(e)
		}
		if !idPattern.MatchString(r.ID) {
			invalid(field.Invalid(idPath, Clip(r.ID), "expected lowercase letters, digits, '.' and '-', starting and ending with a letter or digit, e.g. v100-kernel-canary-1"))
		}
	}

	// state.
	statePath := field.NewPath("state")
	switch r.State {
	case StateQualified:
	case "":
		add(ProblemNotQualified, field.Required(statePath, "only a record in state "+StateQualified+" may gate an upgrade"))
	default:
		add(ProblemNotQualified, field.NotSupported(statePath, Clip(r.State), []string{StateQualified}))
	}

	// approvedBy.
	if strings.TrimSpace(r.ApprovedBy) == "" {
		invalid(field.Required(field.NewPath("approvedBy"), "the second operator who reviewed and approved the record"))
	}

	// sourceRevision.
	revPath := field.NewPath("sourceRevision")
	switch {
	case strings.TrimSpace(r.SourceRevision) == "":
		invalid(field.Required(revPath, "the full Git commit of the reviewed evidence: 40 (SHA-1) or 64 (SHA-256) hex digits"))
	case !revisionPattern.MatchString(r.SourceRevision):
		invalid(field.Invalid(revPath, Clip(r.SourceRevision),
			fmt.Sprintf("expected the full Git commit of the reviewed evidence: 40 (SHA-1) or 64 (SHA-256) hex digits, got %d characters", len(r.SourceRevision))))
	}

	// hardware.
	hwPath := field.NewPath("hardware")
	if len(r.Hardware) == 0 {
		invalid(field.Required(hwPath, "at least one GPU identity the canary proved; "+hardwareExpected))
	}
	firstSeen := map[string]int{}
	for i, h := range r.Hardware {
		ip := hwPath.Index(i)
		n := normalizeHardware(h)
		if n == "" {
			invalid(field.Required(ip, hardwareExpected))
			continue
		}
		if !hardwarePattern.MatchString(n) {
			detail := hardwareExpected
			if vendorDevicePattern.MatchString(n) {
				detail = "this is only vendor:device; add the subsystem IDs: " + hardwareExpected
			}
			invalid(field.Invalid(ip, Clip(h), detail))
		}
		if j, dup := firstSeen[n]; dup {
			e := field.Duplicate(ip, Clip(h))
			e.Detail = fmt.Sprintf("same GPU identity as hardware[%d] after trimming and lower-casing", j)
			invalid(e)
			continue
		}
		firstSeen[n] = i
	}

	// target and source.
	targetPath := field.NewPath("target")
	checkTuple(targetPath, r.Target, "the tuple after the upgrade", invalid)
	if r.Source != nil {
		srcPath := field.NewPath("source")
		if r.APIVersion == APIVersionKubeDC {
			invalid(field.Forbidden(srcPath, fmt.Sprintf("only %s records have a source tuple; use that apiVersion to record it", APIVersionGate)))
		} else if checkTuple(srcPath, *r.Source, "the tuple the canary started from", invalid) && trimmed(*r.Source) == trimmed(r.Target) {
			invalid(field.Invalid(srcPath, Clip(r.Source.String()), "source equals target; a record must change at least one of kernel, rke2, driver, gpuOperator, dcgmExporter or draDriver"))
		}
	}

	// canary.
	canaryPath := field.NewPath("canary")
	atPath := canaryPath.Child("completedAt")
	if strings.TrimSpace(r.Canary.CompletedAt) == "" {
		invalid(field.Required(atPath, "when the canary finished, as RFC 3339, e.g. 2026-07-14T12:00:00Z"))
	} else if at, err := parseCompletedAt(r.Canary.CompletedAt); err != nil {
		invalid(field.Invalid(atPath, Clip(r.Canary.CompletedAt), "expected an RFC 3339 time such as 2026-07-14T12:00:00Z or 2026-07-14T14:00:00+02:00 (upper-case T and Z, no bare date)"))
	} else {
		if ahead := at.Sub(f.Now); ahead > f.ClockSkew {
			add(ProblemFuture, field.Invalid(atPath, r.Canary.CompletedAt,
				fmt.Sprintf("canary completed %s, %s after now (%s); at most %s of clock skew is allowed: fix the clock or the record",
					r.Canary.CompletedAt, ahead.Round(time.Second), f.Now.UTC().Format(time.RFC3339), f.ClockSkew)))
		}
		if age := f.Now.Sub(at); age > f.MaxAge {
			add(ProblemStale, field.Invalid(atPath, r.Canary.CompletedAt,
				fmt.Sprintf("canary completed %s, %s before now; at most %s is allowed: run the canary again and renew the record",
					r.Canary.CompletedAt, age.Round(time.Second), f.MaxAge)))
		}
	}
	proofs := []struct {
		name   string
		passed bool
		what   string
	}{
		{"allocationPassed", r.Canary.AllocationPassed, "a real GPU allocation on the canary"},
		{"monitoringPassed", r.Canary.MonitoringPassed, "GPU monitoring (DCGM metrics and alerts) on the canary"},
		{"rollbackPassed", r.Canary.RollbackPassed, "a rollback of the canary"},
	}
	for _, pr := range proofs {
		if !pr.passed {
			add(ProblemCanaryIncomplete, field.Invalid(canaryPath.Child(pr.name), false,
				fmt.Sprintf("expected true: the record does not prove %s; run the canary until it passes", pr.what)))
		}
	}
	if strings.TrimSpace(r.Canary.Evidence) == "" {
		invalid(field.Required(canaryPath.Child("evidence"), "where the canary evidence is kept, e.g. change-record-42"))
	}
	checkCanaryChecks(r, add)
	return p
}

// checkTuple reports blank components and tells whether all required ones
// are set (an optional one, the DRA driver, may be left out).
func checkTuple(path *field.Path, t Tuple, what string, invalid func(*field.Error)) bool {
	ok := true
	for _, m := range t.Members() {
		if strings.TrimSpace(*m.Value) == "" && !IsOptionalTupleKey(m.Key) {
			invalid(field.Required(path.Child(m.Key), "every component of "+what+" is required"))
			ok = false
		}
	}
	return ok
}

func trimmed(t Tuple) Tuple {
	for _, m := range t.Members() {
		*m.Value = strings.TrimSpace(*m.Value)
	}
	return t
}

// IsHardwareID says whether s is a subsystem-qualified GPU identity,
// vendor:device/subvendor:subdevice in lower-case hex (what configs name
// hardware by, as records do).
func IsHardwareID(s string) bool { return hardwarePattern.MatchString(s) }

// HardwareExpected is the form IsHardwareID accepts, for error messages.
const HardwareExpected = hardwareExpected
