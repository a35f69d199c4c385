package fleet

import (
	"fmt"
	"slices"
	"strings"

	"github.com/distribution/reference"
)

// maxImageLen bounds an image reference before it is parsed (the registry
// limit on a repository name is 255; a tag and a digest add ~200).
const maxImageLen = 512

// imageExpected is the accepted form of an image reference, for messages.
const imageExpected = "[registry[:port]/]repository[:tag][@sha256:<64 hex>] in lower case, e.g. rancher/rke2-upgrade:v1.36.1-rke2r1"

// Image is an image reference as the container runtime reads it
// (github.com/distribution/reference, normalised: docker.io is the default
// registry, index.docker.io is docker.io, library/ is implied for
// single-name Docker Hub images).
type Image struct {
	Domain string // registry host[:port], e.g. docker.io
	Path   string // repository path on that registry, e.g. rancher/rke2-upgrade
	Tag    string
	Digest string
}

// ImageError is a reference that does not parse; the message names the
// value (clipped) and the accepted form.
type ImageError struct {
	Value string
	Err   error
}

func (e *ImageError) Error() string {
	v := e.Value
	if len(v) > 80 {
		v = v[:80] + "..."
	}
	return fmt.Sprintf("image %q is not a valid image reference (%v); expected %s", v, e.Err, imageExpected)
}

// ParseImage parses an image reference.
func ParseImage(s string) (Image, error) {
	if len(s) > maxImageLen {
		return Image{}, &ImageError{Value: s, Err: fmt.Errorf("%d bytes, more than %d", len(s), maxImageLen)}
	}
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return Image{}, &ImageError{Value: s, Err: err}
	}
	img := Image{Domain: reference.Domain(named), Path: reference.Path(named)}
	if t, ok := named.(reference.Tagged); ok {
		img.Tag = t.Tag()
	}
	if d, ok := named.(reference.Digested); ok {
		img.Digest = d.Digest().String()
	}
	return img, nil
}

// ImageVersion returns the version part of an image reference, because for
// operands such as the DCGM exporter and the RKE2 upgrade image the image is
// the only place the running version is recorded. A digest ("sha256:...")
// wins over a tag, since it is what the runtime actually pulls. ok=false when
// the reference has neither ("latest" is implied and names no version) or
// does not parse.
func ImageVersion(image string) (version string, ok bool) {
	img, err := ParseImage(image)
	switch {
	case err != nil:
		return "", false
	case img.Digest != "":
		return img.Digest, true
	case img.Tag != "":
		return img.Tag, true
	}
	return "", false
}

// imageTag is the reference's tag alone ("" when none or unparsable): the
// GPU Operator's version is its tag, a digest beside it says which build.
func imageTag(image string) string {
	img, _ := ParseImage(image)
	return img.Tag
}

// matchesRepository says whether img is the configured repository entry:
// an entry that names a registry (its first part has a dot or a port, or is
// localhost) pins it; any other entry matches its repository path on any
// registry, also below a mirror's own prefix (harbor.corp/hub/rancher/...),
// so mirrors and proxy caches count.
func matchesRepository(img Image, entry string) bool {
	want, err := ParseImage(entry)
	if err != nil {
		return false
	}
	if first, _, found := strings.Cut(entry, "/"); found && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return img.Domain == want.Domain && img.Path == want.Path
	}
	return img.below(want.Path)
}

// below: img's repository path is path, or path below a mirror's own
// prefix (harbor.corp/hub/rancher/rke2-upgrade is rancher/rke2-upgrade).
func (img Image) below(path string) bool {
	return img.Path == path || strings.HasSuffix(img.Path, "/"+path)
}

// SameCode says whether img and o name the same repository on any
// registry, the one below a mirror's prefix of the other too, or the same
// digest under any name: what a runtime pulls for them is one image (a
// pull-through cache or a copy serves it under another host).
func (img Image) SameCode(o Image) bool {
	return img.below(o.Path) || o.below(img.Path) || (img.Digest != "" && img.Digest == o.Digest)
}

// LabelVersion is the label a DRA driver's DaemonSet carries its release in
// (app.kubernetes.io/version, as Helm charts set it): read only when the
// kubelet plugin's image is pinned by digest alone, which names no release.
const LabelVersion = "app.kubernetes.io/version"

// DRADriverVersion is the DRA driver release its kubelet-plugin DaemonSet
// runs: the tag of its containers' images (all must agree; a digest beside
// the tag says which build), else, for images pinned by digest alone, the
// DaemonSet's LabelVersion. ok=false when it cannot tell: the value is then
// what it saw (the images, the label), which no record names and which
// VersionInvalid reports with the accepted form.
func DRADriverVersion(images []string, labelVersion string) (version string, ok bool) {
	var tags []string
	digestOnly := false
	for _, image := range images {
		img, err := ParseImage(image)
		switch {
		case err != nil:
			return image, false
		case img.Tag != "":
			if !slices.Contains(tags, img.Tag) {
				tags = append(tags, img.Tag)
			}
		case img.Digest != "":
			digestOnly = true
		default:
			return image, false // "latest" is implied and names no release
		}
	}
	switch {
	case len(tags) > 1 || (len(tags) == 1 && digestOnly):
		return strings.Join(images, " and "), false
	case len(tags) == 1:
		return tags[0], true
	case digestOnly && labelVersion != "":
		return labelVersion, true
	case digestOnly:
		// The digest, short: the message must leave room for the fix.
		img, _ := ParseImage(images[0])
		return img.Digest[:min(len(img.Digest), 19)] + "...", false
	}
	return "", false
}
