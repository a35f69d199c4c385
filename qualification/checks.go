package qualification

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CanaryCheck is one measured (or pass/fail) result of the canary run, in
// a gpu-upgrade-gate.io/v1alpha1 record's canary.checks: what the seed's
// canary list asks for (DCGM diagnostics, NCCL, P2P bandwidth, GEMM, a
// training and an inference workload, RDMA, ...), each compared with the
// baseline the same hardware measured on the source tuple. A check is
// either pass/fail (Passed) or measured (Value, Unit, Baseline,
// MaxDeviationPercent), never both.
type CanaryCheck struct {
	// Kind names what was run: a known kind (KnownCheckKinds) or another
	// lowercase name of the team's own (an open vocabulary).
	Kind string `json:"kind"`
	// Level is the DCGM diagnostic level (1-4) of a dcgm-diag check, and
	// only of that kind: the levels prove different things.
	Level int `json:"level,omitempty"`
	// Passed is a pass/fail check's result.
	Passed *bool `json:"passed,omitempty"`
	// Value is the figure measured on the target tuple, in Unit; Baseline
	// the figure the same hardware measured on the source tuple.
	Value    *float64 `json:"value,omitempty"`
	Unit     string   `json:"unit,omitempty"`
	Baseline *float64 `json:"baseline,omitempty"`
	// MaxDeviationPercent is how far, in percent of the baseline, the
	// figure may fall on the worse side (lower for a throughput, higher for
	// a time) before the check fails.
	MaxDeviationPercent *float64 `json:"maxDeviationPercent,omitempty"`
	// Explanation, when set, accepts a figure outside the threshold: the
	// seed's "any performance deviation beyond the threshold must be
	// explained". Decisions and inventory show it.
	Explanation string `json:"explanation,omitempty"`
}

// checkKind is what the record knows about a kind: whether it is pass/fail
// or measured, and the units a measured one is given in.
type checkKind struct {
	passFail bool
	units    []string
	what     string
}

// knownCheckKinds is the small vocabulary the docs describe; other kinds
// are the team's own and take any known unit, or pass/fail.
var knownCheckKinds = map[string]checkKind{
	"dcgm-diag":      {passFail: true, what: "DCGM diagnostics (dcgmi diag -r <level>)"},
	"cuda-basic":     {passFail: true, what: "CUDA basic tests (deviceQuery, vectorAdd)"},
	"nccl-allreduce": {units: []string{"GB/s"}, what: "NCCL all-reduce bus bandwidth"},
	"p2p-bandwidth":  {units: []string{"GB/s"}, what: "GPU-to-GPU P2P/NVLink bandwidth"},
	"gemm":           {units: []string{"TFLOPS"}, what: "dense GEMM throughput"},
	"rdma":           {units: []string{"Gb/s", "GB/s"}, what: "RDMA bandwidth"},
	"training":       {units: []string{"samples/s", "tokens/s", "images/s"}, what: "a representative training Job's throughput"},
	"inference":      {units: []string{"tokens/s", "requests/s", "ms"}, what: "a representative inference service's throughput or latency"},
}

// unitLowerIsBetter are the units of times: for them the worse side of the
// baseline is above it. Every other known unit is a throughput.
var unitLowerIsBetter = map[string]bool{"ms": true, "us": true, "s": true}

// knownUnits are the units a measured check may be given in, exactly as
// written: a unit the gate does not know cannot say which side is worse.
var knownUnits = []string{"GB/s", "GiB/s", "Gb/s", "TFLOPS", "GFLOPS", "samples/s", "tokens/s", "images/s", "requests/s", "ms", "us", "s"}

// KnownCheckKinds lists the documented check kinds, sorted.
func KnownCheckKinds() []string {
	return slices.Sorted(maps.Keys(knownCheckKinds))
}

var checkKindPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// CheckName is how messages name a check: its kind, with the level of a
// DCGM diagnostic.
func (c CanaryCheck) CheckName() string {
	if c.Level != 0 {
		return fmt.Sprintf("%s level %d", c.Kind, c.Level)
	}
	return c.Kind
}

// Deviation is how far the figure lies on the worse side of the baseline,
// in percent of the baseline (0 when it is as good or better), and whether
// that is beyond the allowed deviation. A pass/fail check deviates when it
// did not pass.
func (c CanaryCheck) Deviation() (percent float64, outside bool) {
	if c.Passed != nil {
		return 0, !*c.Passed
	}
	if c.Value == nil || c.Baseline == nil || c.MaxDeviationPercent == nil || *c.Baseline == 0 {
		return 0, false
	}
	worse := *c.Baseline - *c.Value
	if unitLowerIsBetter[c.Unit] {
		worse = -worse
	}
	if worse <= 0 {
		return 0, false
	}
	percent = 100 * worse / *c.Baseline
	return percent, percent > *c.MaxDeviationPercent
}

// Summary says the check's result on one line, for messages, decisions
// and inventory.
func (c CanaryCheck) Summary() string {
	if c.Passed != nil {
		if *c.Passed {
			return c.CheckName() + " passed"
		}
		return c.CheckName() + " failed"
	}
	if c.Value == nil || c.Baseline == nil {
		return c.CheckName()
	}
	pct, _ := c.Deviation()
	side := "within"
	if pct > 0 {
		side = fmt.Sprintf("%s worse than", formatFigure(pct)+"%")
	}
	allowed := ""
	if c.MaxDeviationPercent != nil {
		allowed = fmt.Sprintf(", %s%% allowed", formatFigure(*c.MaxDeviationPercent))
	}
	return fmt.Sprintf("%s %s %s is %s the baseline %s %s%s", c.CheckName(), formatFigure(*c.Value), c.Unit, side, formatFigure(*c.Baseline), c.Unit, allowed)
}

func formatFigure(f float64) string { return strconv.FormatFloat(f, 'g', 6, 64) }

// ExplainedDeviations lists the record's checks outside their threshold
// that carry an explanation: they do not stop the record, and every
// decision that uses it and inventory show them.
func (r *Record) ExplainedDeviations() []string {
	var out []string
	for _, c := range r.Canary.Checks {
		if _, outside := c.Deviation(); outside && strings.TrimSpace(c.Explanation) != "" {
			out = append(out, c.Summary()+"; explained: "+ClipTo(strings.TrimSpace(c.Explanation), 512))
		}
	}
	return out
}

// checkCanaryChecks reports the structure of canary.checks (Invalid) and
// every check outside its threshold without an explanation
// (CanaryIncomplete).
func checkCanaryChecks(r *Record, add func(ProblemKind, *field.Error)) {
	path := field.NewPath("canary", "checks")
	if len(r.Canary.Checks) > 0 && r.APIVersion == APIVersionKubeDC {
		add(ProblemInvalid, field.Forbidden(path, fmt.Sprintf("only %s records have typed canary checks; use that apiVersion to record them", APIVersionGate)))
		return
	}
	seen := map[string]int{}
	for i, c := range r.Canary.Checks {
		p := path.Index(i)
		invalid := func(err *field.Error) { add(ProblemInvalid, err) }
		known, isKnown := knownCheckKinds[c.Kind]
		switch {
		case c.Kind == "":
			invalid(field.Required(p.Child("kind"), "what was run, e.g. one of "+strings.Join(KnownCheckKinds(), ", ")+", or a lowercase name of your own"))
			continue
		case !checkKindPattern.MatchString(c.Kind):
			invalid(field.Invalid(p.Child("kind"), Clip(c.Kind), "expected lowercase letters, digits and '-' (at most 63), e.g. "+strings.Join(KnownCheckKinds(), ", ")))
			continue
		}
		name := c.CheckName()
		if j, dup := seen[name]; dup {
			e := field.Duplicate(p.Child("kind"), name)
			e.Detail = fmt.Sprintf("canary.checks[%d] already records %s; one figure per kind (and DCGM level), so nobody has to guess which counts", j, name)
			invalid(e)
			continue
		}
		seen[name] = i
		switch {
		case c.Kind == "dcgm-diag" && (c.Level < 1 || c.Level > 4):
			invalid(field.Invalid(p.Child("level"), c.Level, "a dcgm-diag check names the DCGM diagnostic level it ran, 1 to 4 (dcgmi diag -r <level>): the levels prove different things"))
		case c.Kind != "dcgm-diag" && c.Level != 0:
			invalid(field.Forbidden(p.Child("level"), "only a dcgm-diag check has a level"))
		}
		measured := c.Value != nil || c.Baseline != nil || c.Unit != "" || c.MaxDeviationPercent != nil
		switch {
		case c.Passed != nil && measured:
			invalid(field.Forbidden(p.Child("passed"), "a check is either pass/fail (passed) or measured (value, unit, baseline, maxDeviationPercent), not both"))
			continue
		case c.Passed == nil && !measured:
			invalid(field.Required(p, "a check records passed: true|false, or value, unit, baseline and maxDeviationPercent"))
			continue
		case isKnown && known.passFail && measured:
			invalid(field.Forbidden(p.Child("value"), fmt.Sprintf("%s (%s) is pass/fail: record passed: true|false", c.Kind, known.what)))
			continue
		case isKnown && !known.passFail && c.Passed != nil:
			invalid(field.Forbidden(p.Child("passed"), fmt.Sprintf("%s (%s) is measured: record value, unit (%s), baseline and maxDeviationPercent", c.Kind, known.what, strings.Join(known.units, " or "))))
			continue
		}
		if measured {
			if !checkFigures(p, c, known, isKnown, invalid) {
				continue
			}
		}
		if _, outside := c.Deviation(); outside && strings.TrimSpace(c.Explanation) == "" {
			if c.Passed != nil {
				add(ProblemCanaryIncomplete, field.Invalid(p.Child("passed"), false,
					fmt.Sprintf("the canary's %s did not pass; run it until it passes, or explain it in canary.checks[%d].explanation and have the record reviewed again", name, i)))
				continue
			}
			add(ProblemCanaryIncomplete, field.Invalid(p.Child("value"), formatFigure(*c.Value),
				fmt.Sprintf("%s: beyond the allowed deviation; find the cause, or explain it in canary.checks[%d].explanation and have the record reviewed again", c.Summary(), i)))
		}
	}
}

// checkFigures reports a measured check's missing or impossible figures
// and unit, and tells whether it can be compared.
func checkFigures(p *field.Path, c CanaryCheck, known checkKind, isKnown bool, invalid func(*field.Error)) bool {
	ok := true
	units := knownUnits
	if isKnown {
		units = known.units
	}
	switch {
	case c.Unit == "":
		invalid(field.Required(p.Child("unit"), "one of "+strings.Join(units, ", ")))
		ok = false
	case !slices.Contains(units, c.Unit):
		invalid(field.NotSupported(p.Child("unit"), Clip(c.Unit), units))
		ok = false
	}
	for _, fig := range []struct {
		name string
		v    *float64
		what string
	}{
		{"value", c.Value, "the figure measured on the target tuple"},
		{"baseline", c.Baseline, "the figure the same hardware measured on the source tuple"},
	} {
		switch {
		case fig.v == nil:
			invalid(field.Required(p.Child(fig.name), fig.what+", a number"))
			ok = false
		case *fig.v < 0 || (fig.name == "baseline" && *fig.v == 0):
			invalid(field.Invalid(p.Child(fig.name), formatFigure(*fig.v), fig.what+"; expected a number above 0"))
			ok = false
		}
	}
	switch dev := c.MaxDeviationPercent; {
	case dev == nil:
		invalid(field.Required(p.Child("maxDeviationPercent"), "how far below (above, for a time) the baseline the figure may fall, in percent, e.g. 5"))
		ok = false
	case *dev < 0 || *dev > 100:
		invalid(field.Invalid(p.Child("maxDeviationPercent"), formatFigure(*dev), "expected a percentage from 0 to 100"))
		ok = false
	}
	return ok
}

// parseFigure reads a plain YAML number; quoted numbers, .nan and .inf are
// refused by the loader before this.
func parseFigure(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("not a finite number")
	}
	return f, nil
}
