package gate

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// requesterRule (review-level, Plan writes): a Plan's requested-by names
// the user who writes it, whenever the write sets it or changes the spec
// under it, so a halt names the rollout's real requester.
func (r *PlanReview) requesterRule(f *findings) {
	p := r.req.Plan
	v, set := p.Annotations[AnnotationRequestedBy]
	if !r.write || !set {
		return
	}
	if o := r.req.OldPlan; o != nil && o.Annotations[AnnotationRequestedBy] == v && specEqual(o, p) {
		return
	}
	if v != r.req.User.Name {
		f.add(requesterMismatch(v, r.req.User.Name))
	}
}

func specEqual(a, b *upgradev1.Plan) bool { return equality.Semantic.DeepEqual(a.Spec, b.Spec) }

var pathRequestedBy = field.NewPath("metadata", "annotations").Key(AnnotationRequestedBy)

// requesterMismatch builds every RequesterMismatch blocker.
func requesterMismatch(seen, user string) Blocker {
	return invalid(CodeRequesterMismatch, "", pathRequestedBy, seen, "annotation %s is %q but this write is from %q; set it to %q (or leave it out: a halt of this rollout is then cleared only by the break-glass group)", AnnotationRequestedBy, seen, user, user)
}
