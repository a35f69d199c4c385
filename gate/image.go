package gate

import "strings"

// splitImage cuts a reference into name, tag and digest. The digest follows
// the first '@'; the tag follows a ':' in the last path segment only, so a
// registry port (registry:5000/ns/name) is never taken for a tag.
func splitImage(image string) (name, tag, digest string) {
	name = image
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name, digest = name[:i], name[i+1:]
	}
	if i := strings.LastIndexByte(name, ':'); i >= 0 && i > strings.LastIndexByte(name, '/') {
		name, tag = name[:i], name[i+1:]
	}
	return name, tag, digest
}

// ImageVersion returns the version part of an image reference, because for
// operands such as the DCGM exporter and the RKE2 upgrade image the image is
// the only place the running version is recorded. A digest ("sha256:...")
// wins over a tag, since it is what the runtime actually pulls. ok=false when
// the reference has neither: "latest" is implied and names no version.
func ImageVersion(image string) (version string, ok bool) {
	_, tag, digest := splitImage(image)
	if digest != "" {
		return digest, true
	}
	if tag != "" {
		return tag, true
	}
	return "", false
}

// ImageRepository returns the reference without tag or digest, and without a
// docker.io/ or docker.io/library/ prefix, so the short and fully qualified
// spellings of one Docker Hub image compare equal
// ("rancher/rke2-upgrade:v1.36.1-rke2r1" -> "rancher/rke2-upgrade").
func ImageRepository(image string) string {
	name, _, _ := splitImage(image)
	if rest, ok := strings.CutPrefix(name, "docker.io/library/"); ok {
		return rest
	}
	if rest, ok := strings.CutPrefix(name, "docker.io/"); ok {
		return rest
	}
	return name
}
