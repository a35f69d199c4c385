package qualification

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CheckResult is what a check Pod on an upgraded node reports in its
// container's termination message (docs/proof.md "Checks per node"): the
// same kind vocabulary as the record's canary.checks, with the node's own
// figure and no baseline (the gate takes that from the record).
type CheckResult struct {
	Kind   string   `json:"kind"`
	Level  int      `json:"level,omitempty"`
	Passed *bool    `json:"passed,omitempty"`
	Value  *float64 `json:"value,omitempty"`
	Unit   string   `json:"unit,omitempty"`
}

// CheckName names the result as CanaryCheck.CheckName does.
func (r CheckResult) CheckName() string {
	return CanaryCheck{Kind: r.Kind, Level: r.Level}.CheckName()
}

// ValidCheckKind says why kind is not a check kind ("" when it is): the
// pattern of canary.checks[].kind, for the config and the check Pods' label.
func ValidCheckKind(kind string) string {
	if !checkKindPattern.MatchString(kind) {
		return "expected lowercase letters, digits and '-' (at most 63), e.g. " + strings.Join(KnownCheckKinds(), ", ")
	}
	return ""
}

// PassFailKind says whether a known kind is pass/fail (dcgm-diag,
// cuda-basic); other kinds are measured, or the team's own.
func PassFailKind(kind string) bool { return knownCheckKinds[kind].passFail }

// ParseCheckResult reads a check Pod's termination message strictly: one
// JSON object with exactly the fields of CheckResult, a kind the pattern
// accepts, either passed or value and a known unit (those of the kind when
// it is known), a level for dcgm-diag (1-4) and only for it. Errors name
// the field (under path), the value seen, clipped, and what is expected.
func ParseCheckResult(path *field.Path, msg string) (CheckResult, *field.Error) {
	var r CheckResult
	dec := json.NewDecoder(strings.NewReader(msg))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, field.Invalid(path, Clip(msg), `expected one JSON object, e.g. {"kind":"nccl-allreduce","value":182.4,"unit":"GB/s"} or {"kind":"dcgm-diag","level":2,"passed":true}: `+Clip(err.Error()))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return r, field.Invalid(path, Clip(msg), "expected one JSON object and nothing after it")
	}
	if dup := duplicateKey(msg); dup != "" {
		return r, field.Duplicate(path.Child(dup), Clip(msg))
	}
	if why := ValidCheckKind(r.Kind); why != "" {
		return r, field.Invalid(path.Child("kind"), Clip(r.Kind), why)
	}
	switch {
	case r.Kind == "dcgm-diag" && (r.Level < 1 || r.Level > 4):
		return r, field.Invalid(path.Child("level"), r.Level, "a dcgm-diag result names the DCGM diagnostic level it ran, 1 to 4 (dcgmi diag -r <level>)")
	case r.Kind != "dcgm-diag" && r.Level != 0:
		return r, field.Forbidden(path.Child("level"), "only a dcgm-diag result has a level")
	}
	measured := r.Value != nil || r.Unit != ""
	known, isKnown := knownCheckKinds[r.Kind]
	switch {
	case r.Passed != nil && measured:
		return r, field.Forbidden(path.Child("passed"), "a result is either pass/fail (passed) or measured (value and unit), not both")
	case r.Passed == nil && !measured:
		return r, field.Required(path, "a result reports passed: true|false, or value and unit")
	case isKnown && known.passFail && measured:
		return r, field.Forbidden(path.Child("value"), fmt.Sprintf("%s (%s) is pass/fail: report passed: true|false", r.Kind, known.what))
	case isKnown && !known.passFail && r.Passed != nil:
		return r, field.Forbidden(path.Child("passed"), fmt.Sprintf("%s (%s) is measured: report value and unit (%s)", r.Kind, known.what, strings.Join(known.units, " or ")))
	case r.Passed != nil:
		return r, nil
	}
	units := knownUnits
	if isKnown {
		units = known.units
	}
	switch {
	case r.Unit == "":
		return r, field.Required(path.Child("unit"), "one of "+strings.Join(units, ", "))
	case !slices.Contains(units, r.Unit):
		return r, field.NotSupported(path.Child("unit"), Clip(r.Unit), units)
	case r.Value == nil:
		return r, field.Required(path.Child("value"), "the figure measured on the node, a number")
	case *r.Value < 0 || math.IsNaN(*r.Value) || math.IsInf(*r.Value, 0):
		return r, field.Invalid(path.Child("value"), formatFigure(*r.Value), "expected a number of 0 or more")
	}
	return r, nil
}

// duplicateKey names a top-level key the object repeats (encoding/json
// keeps the last silently, so {"value":1,"value":900} would read as 900
// where a reader of the message sees 1 first). Keys are compared as
// encoding/json matches them to fields, case-folded: "passed" and
// "Passed" are one field.
func duplicateKey(msg string) string {
	dec := json.NewDecoder(bytes.NewReader([]byte(msg)))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	var seen []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return ""
		}
		key, _ := t.(string)
		if slices.ContainsFunc(seen, func(s string) bool { return strings.EqualFold(s, key) }) {
			return key
		}
		seen = append(seen, key)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return ""
		}
	}
	return ""
}
