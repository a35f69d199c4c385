package gate

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// freshnessLimits denies on limits a caller failed to validate, so a zero
// or oversize maximum age never silently means the default or "forever".
func freshnessLimits(f *findings, fr qualification.Freshness) {
	for _, e := range qualification.ValidateFreshness(fr.MaxAge, fr.ClockSkew, nil) {
		detail := fmt.Sprintf("%s; got %v, so the freshness of the canary evidence cannot be judged", e.Detail, e.BadValue)
		if e.Field == "clockSkew" {
			f.add(evidenceFromFuture(field.Invalid(pathClockSkew, e.BadValue, detail), nil, "", ""))
		} else {
			f.add(evidenceStale(field.Invalid(pathMaxCanaryAge, e.BadValue, detail), nil, "", ""))
		}
	}
}

// evidenceStale builds every EvidenceStale blocker: the record's canary is
// older than the maximum age (or the limit itself is unusable). See
// recordBlocker for where and id.
func evidenceStale(e *field.Error, where *field.Path, name, id string) Blocker {
	return recordBlocker(CodeEvidenceStale, e, where, name, id)
}

// evidenceFromFuture builds every EvidenceFromFuture blocker.
func evidenceFromFuture(e *field.Error, where *field.Path, name, id string) Blocker {
	return recordBlocker(CodeEvidenceFromFuture, e, where, name, id)
}
