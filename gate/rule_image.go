package gate

import "k8s.io/apimachinery/pkg/util/validation/field"

// imageInvalid builds every ImageInvalid blocker: a GPU Plan's upgrade
// image that does not parse, so neither what SUC runs nor whether it is an
// RKE2 Plan can be told.
// imageRule (Plans): the upgrade image parses as an image reference.
func imageRule(rv review, f *findings, _ *Decision) {
	r, ok := rv.(*PlanReview)
	if !ok || r.req.Plan.Spec.Upgrade == nil {
		return
	}
	if _, err := ParseImage(r.req.Plan.Spec.Upgrade.Image); err != nil {
		f.add(imageInvalid(pathImage, r.req.Plan.Spec.Upgrade.Image, err))
	}
}

func imageInvalid(path *field.Path, value string, err error) Blocker {
	return invalid(CodeImageInvalid, "", path, value, "%v; fix spec.upgrade.image", err)
}
