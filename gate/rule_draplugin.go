package gate

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// A DaemonSet of a DRA driver's namespace other than its configured
// kubelet plugin can run the driver's image too (a second Helm release of
// the driver under another name): a kubelet plugin of the driver on GPU
// nodes that the gate neither judged nor reads, at a version no record
// names. The DRA plugin webhook sends every DaemonSet created there, or
// whose Pod template changes, except the GPU Operator's and the
// namespace's own ServiceAccounts' writes (the driver's controllers:
// NVIDIA's creates its ComputeDomain daemons there from the driver's
// image).

// draPluginForgedRule (review-level, DaemonSet writes in a DRA driver's
// namespace): a DaemonSet that is no configured kubelet plugin runs none of
// the images the configured plugins of its namespace run (the same
// repository on any registry or below a mirror's prefix, any tag or
// digest; or the same digest under another name: Image.SameCode).
func draPluginForgedRule(rv review, f *findings, _ *Decision) {
	r, ok := rv.(*daemonSetReview)
	if !ok {
		return
	}
	ds := r.req.DaemonSet
	if r.templateKept() || r.inNamespaceServiceAccount() {
		return
	}
	for _, d := range r.cfg.DRADrivers {
		if d.Namespace == ds.Namespace && d.DaemonSet == ds.Name {
			return // the plugin itself: judged on the driver path
		}
	}
	// The drivers' images, from their plugins' containers.
	type pluginImage struct {
		img    Image
		plugin string
	}
	var drivers []pluginImage
	for _, p := range r.req.Plugins {
		for _, c := range p.Spec.Template.Spec.Containers {
			if img, err := ParseImage(c.Image); err == nil {
				drivers = append(drivers, pluginImage{img, p.Namespace + "/" + p.Name})
			}
		}
	}
	spec := &ds.Spec.Template.Spec
	check := func(path *field.Path, image string) bool {
		// A reference that does not parse cannot be pulled either (the
		// runtimes parse it alike): it runs nothing.
		img, err := ParseImage(image)
		if err != nil {
			return false
		}
		for _, d := range drivers {
			if img.SameCode(d.img) {
				f.add(draPluginForged(path, ds.Namespace, ds.Name, image, d.plugin, r.req.User.Name))
				return true
			}
		}
		return false
	}
	base := field.NewPath("spec", "template", "spec")
	for i, c := range spec.Containers {
		if check(base.Child("containers").Index(i).Child("image"), c.Image) {
			return
		}
	}
	for i, c := range spec.InitContainers {
		if check(base.Child("initContainers").Index(i).Child("image"), c.Image) {
			return
		}
	}
}

// draPluginForged builds every DRAPluginForged blocker.
func draPluginForged(path *field.Path, ns, name, image, plugin, user string) Blocker {
	return forbidden(CodeDRAPluginForged, "", path,
		"DaemonSet %s/%s, written by %q, runs %s, the image of the DRA kubelet plugin DaemonSet %s (config draDrivers), under another name: a second kubelet plugin of the driver on GPU nodes, which the gate neither judges nor reads, at a version no record names; run the driver only in its configured DaemonSet (or name this one in draDrivers), or run another image here (webhook/dradaemonsets.md)",
		ns, qualification.Clip(name), qualification.Clip(user), qualification.Clip(image), plugin)
}
