package gate

import (
	"errors"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// InvalidReview is the decision on a request the adapter cannot read (a
// malformed object, a kind that does not match the resource): denied with
// ReviewInvalid, never allowed. The engine itself never emits it.
func InvalidReview(object string, err error) Decision {
	d := Decision{Object: object}
	r := &invalidReview{err: err}
	r.kinds = kindsAdmission
	var f findings
	applyTable(r, &f, &d)
	d.Blockers = f.blockers
	return d
}

// invalidReview is a request the adapter cannot read.
type invalidReview struct {
	reviewBase
	err error
}

// reviewInvalidRule (admission): the adapter's reading error, as is.
func reviewInvalidRule(rv review, f *findings, _ *Decision) {
	if r, ok := rv.(*invalidReview); ok {
		f.add(reviewInvalid(r.err))
	}
}

// reviewInvalid builds every ReviewInvalid blocker.
func reviewInvalid(err error) Blocker {
	var fe *field.Error
	if !errors.As(err, &fe) {
		fe = field.Invalid(field.NewPath("request"), nil, err.Error()+"; send a well-formed AdmissionReview of the resource this endpoint reviews")
	}
	return Blocker{Code: CodeReviewInvalid, Err: fe}
}
