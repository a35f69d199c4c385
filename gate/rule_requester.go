package gate

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// requesterRule (review-level, Plan writes): a Plan's requested-by names
// the user who writes it, whenever the write sets it or changes the spec
// under it, so a halt names the rollout's real requester. With
// requireRequester (the default) a GPU Plan's CREATE, and an UPDATE that
// changes its spec (a new rollout) or drops the annotation, must carry it;
// an edit that leaves the spec and a missing annotation alone (an existing
// Plan's labels, say) is not held, so Plans from before keep working.
func requesterRule(rv review, f *findings, _ *Decision) {
	r, ok := rv.(*PlanReview)
	if !ok || !r.write {
		return
	}
	p, o := r.req.Plan, r.req.OldPlan
	v, set := p.Annotations[AnnotationRequestedBy]
	if !set {
		switch {
		case !r.cfg.RequireRequester:
		case o == nil:
			f.add(requesterMissing(r.req.User.Name, "a GPU Plan is created without annotation "+AnnotationRequestedBy))
		case hasKey(o.Annotations, AnnotationRequestedBy):
			f.add(requesterMissing(r.req.User.Name, "this update removes annotation "+AnnotationRequestedBy))
		case !specEqual(o, p):
			f.add(requesterMissing(r.req.User.Name, "this update changes the GPU Plan's spec (a new rollout) without annotation "+AnnotationRequestedBy))
		}
		return
	}
	if o != nil && o.Annotations[AnnotationRequestedBy] == v && specEqual(o, p) {
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
	return invalid(CodeRequesterMismatch, "", pathRequestedBy, seen, "annotation %s is %q but this write is from %q; set it to %q (a halt of this rollout names its requester, who may not clear it)", AnnotationRequestedBy, seen, user, user)
}

// requesterMissing builds every RequesterMissing blocker.
func requesterMissing(user, what string) Blocker {
	return Blocker{Code: CodeRequesterMissing, Err: field.Required(pathRequestedBy, fmt.Sprintf(
		"%s, which names who asked for the rollout (a halt of it may not be cleared by them); add it with your username: metadata.annotations: {%s: %q}",
		what, AnnotationRequestedBy, qualification.Clip(user)))}
}
