package gate

import "k8s.io/apimachinery/pkg/util/validation/field"

// imageInvalid builds every ImageInvalid blocker: a GPU Plan's upgrade
// image that does not parse, so neither what SUC runs nor whether it is an
// RKE2 Plan can be told.
func imageInvalid(path *field.Path, value string, err error) Blocker {
	return invalid(CodeImageInvalid, "", path, value, "%v; fix spec.upgrade.image", err)
}
