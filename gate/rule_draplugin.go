package gate

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Anything else in a DRA driver's namespace that runs the driver's image
// can be a kubelet plugin of the driver too: a DaemonSet under another
// name (a second Helm release of the driver), or a bare Pod, Deployment,
// ReplicaSet, ReplicationController, StatefulSet, Job or CronJob with the
// node's filesystem in reach, on GPU nodes that the gate neither judged nor
// reads, at a version no record names. The DRA plugin and DRA workload
// webhooks send every such object created there, or whose Pod template
// changes, except the writes of the GPU Operator, of the driver's
// configured controllers (draDrivers[].controllers: NVIDIA's creates its
// ComputeDomain daemons' DaemonSets from the driver's image), and, for the
// other kinds, of the kube-controller-manager's controllers and kubelets
// (their Pods follow a template that was judged, or a static Pod's file on
// the node).

// draPluginForgedRule (review-level, writes of what runs Pods in a DRA
// driver's namespace): a DaemonSet that is no configured kubelet plugin,
// or another workload whose Pods reach the node (reachesNode), runs none
// of the images the configured plugins of its namespace run (the same
// repository on any registry or below a mirror's prefix, any tag or
// digest; or the same digest under another name: Image.SameCode).
func draPluginForgedRule(rv review, f *findings, _ *Decision) {
	var w podWrite
	switch r := rv.(type) {
	case *daemonSetReview:
		w = r.podWrite()
	case *workloadReview:
		w = r.podWrite()
	default:
		return
	}
	b := rv.base()
	if w.kept || b.cfg.draController(w.namespace, b.user.Name) {
		return
	}
	if w.kind == "DaemonSet" {
		for _, d := range b.cfg.DRADrivers {
			if d.Namespace == w.namespace && d.DaemonSet == w.name {
				return // the plugin itself: judged on the driver path
			}
		}
	} else if !reachesNode(w.spec) {
		return // cannot register with the kubelet (the driver's controller)
	}
	// The drivers' images, from their plugins' containers.
	type pluginImage struct {
		img    Image
		plugin string
	}
	var drivers []pluginImage
	for _, p := range w.plugins {
		for _, c := range p.Spec.Template.Spec.Containers {
			if img, err := ParseImage(c.Image); err == nil {
				drivers = append(drivers, pluginImage{img, p.Namespace + "/" + p.Name})
			}
		}
	}
	check := func(path *field.Path, image string) bool {
		// A reference that does not parse cannot be pulled either (the
		// runtimes parse it alike): it runs nothing.
		img, err := ParseImage(image)
		if err != nil {
			return false
		}
		for _, d := range drivers {
			if img.SameCode(d.img) {
				f.add(draPluginForged(path, w.kind, w.namespace, w.name, image, d.plugin, b.user.Name))
				return true
			}
		}
		return false
	}
	for i, c := range w.spec.Containers {
		if check(w.specPath.Child("containers").Index(i).Child("image"), c.Image) {
			return
		}
	}
	for i, c := range w.spec.InitContainers {
		if check(w.specPath.Child("initContainers").Index(i).Child("image"), c.Image) {
			return
		}
	}
	for i, c := range w.spec.EphemeralContainers {
		if check(w.specPath.Child("ephemeralContainers").Index(i).Child("image"), c.Image) {
			return
		}
	}
}

// draPluginForged builds every DRAPluginForged blocker.
func draPluginForged(path *field.Path, kind, ns, name, image, plugin, user string) Blocker {
	how, fix, contract := "under another name", "run the driver only in its configured DaemonSet (or name this one in draDrivers), or run another image here", "dradaemonsets.md"
	if kind != "DaemonSet" {
		how = "with the node's filesystem in reach (a hostPath or other volume not the Pod's own, a privileged container or the node's PID namespace)"
		fix = "run the driver only in its configured DaemonSet, or run this without the node's filesystem (as the driver's controller does), or another image"
		contract = "draworkloads.md"
	}
	return forbidden(CodeDRAPluginForged, "", path,
		"%s %s/%s, written by %q, runs %s, the image of the DRA kubelet plugin DaemonSet %s (config draDrivers), %s: a second kubelet plugin of the driver on GPU nodes, which the gate neither judges nor reads, at a version no record names; %s (webhook/%s)",
		kind, ns, qualification.Clip(name), qualification.Clip(user), qualification.Clip(image), plugin, how, fix, contract)
}
