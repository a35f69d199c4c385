package gate

import (
	"errors"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// InvalidReview is the decision on a request the adapter cannot read (a
// malformed object, a kind that does not match the resource): denied with
// ReviewInvalid, never allowed. The engine itself never emits it.
func InvalidReview(object string, err error) Decision {
	return Decision{Object: object, Blockers: []Blocker{reviewInvalid(err)}}
}

// reviewInvalid builds every ReviewInvalid blocker.
func reviewInvalid(err error) Blocker {
	var fe *field.Error
	if !errors.As(err, &fe) {
		fe = field.Invalid(field.NewPath("request"), nil, err.Error()+"; send a well-formed AdmissionReview of the resource this endpoint reviews")
	}
	return Blocker{Code: CodeReviewInvalid, Err: fe}
}
