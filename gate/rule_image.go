package gate

import "k8s.io/apimachinery/pkg/util/validation/field"

// imageInvalid builds every ImageInvalid blocker: a GPU Plan's upgrade
// image that does not parse, so neither what SUC runs nor whether it is an
// RKE2 Plan can be told.
// imageRule (Plans): the upgrade image parses as an image reference.
func imageRule(rv review, f *findings, _ *Decision) {
	if r, ok := rv.(*PlanReview); ok && r.imageErr != nil {
		f.add(imageInvalid(pathImage, r.req.Plan.Spec.Upgrade.Image, r.imageErr))
	}
}

func imageInvalid(path *field.Path, value string, err error) Blocker {
	return invalid(CodeImageInvalid, "", path, value, "%v; fix spec.upgrade.image", err)
}
