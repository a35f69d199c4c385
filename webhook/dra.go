package webhook

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
)

// draResources are the resource.k8s.io/v1 resources proofs of DRA nodes
// read.
var draResources = []string{"resourceslices", "resourceclaims"}

// newDRACache makes the cache of what proofs of DRA nodes read (the
// drivers' plugin DaemonSets and Pods, the ResourceSlices, the allocation checks'
// ResourceClaims) and returns its informers, for the proof facts to watch;
// nil without DRA drivers in the config, so a cluster without them is
// never asked for resource.k8s.io. An API server that does not serve
// resource.k8s.io/v1 leaves slices and claims out (Facts.draUnserved): the
// proof of a node running a driver's plugin then names it.
func newDRACache(ctx context.Context, mgr manager.Manager, restCfg *rest.Config, scheme *runtime.Scheme, cfg *gate.Config, facts *Facts) ([]cache.Informer, error) {
	r := loader.ReadsOf(cfg).DRA
	if r == nil {
		return nil, nil
	}
	disc, err := discovery.NewDiscoveryClientForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	if facts.draUnserved, err = draServed(disc); err != nil {
		return nil, err
	}
	byObject := map[client.Object]cache.ByObject{r.PluginPods.Object: pluginPods(r.PluginPods),
		r.PluginDaemonSets.Object: {Transform: StripDaemonSet, Namespaces: pluginPods(r.PluginDaemonSets).Namespaces}}
	if facts.draUnserved == "" {
		byObject[r.Slices.Object] = cache.ByObject{Transform: StripSlice}
		claims := cache.ByObject{Transform: StripClaim}
		if ns := r.Claims.Namespaces; ns != nil {
			claims.Namespaces = map[string]cache.Config{ns[0]: {}}
		}
		byObject[r.Claims.Object] = claims
	}
	if facts.DRA, err = cache.New(restCfg, cache.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper(),
		DefaultWatchErrorHandler: facts.draWatches.failedWatch, ByObject: byObject}); err != nil {
		return nil, fmt.Errorf("DRA proof cache: %w", err)
	}
	if err := mgr.Add(facts.DRA); err != nil {
		return nil, err
	}
	var infs []cache.Informer
	for obj := range byObject {
		inf, err := facts.DRA.GetInformer(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("informer for %T: %w", obj, err)
		}
		infs = append(infs, inf)
	}
	return infs, nil
}

// draServed says why the API server does not serve what proofs of DRA
// nodes read ("" : it does); an error only when discovery itself failed.
func draServed(disc discovery.DiscoveryInterface) (string, error) {
	gv := resourcev1.SchemeGroupVersion.String()
	list, err := disc.ServerResourcesForGroupVersion(gv)
	if apierrors.IsNotFound(err) {
		return "the API server does not serve " + gv, nil
	}
	if err != nil {
		return "", fmt.Errorf("discover %s: %w", gv, err)
	}
	for _, want := range draResources {
		if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == want }) {
			return fmt.Sprintf("the API server serves no %s in %s", want, gv), nil
		}
	}
	return "", nil
}

// pluginPods configures the plugin Pods' cache: the drivers' namespaces,
// stripped as the validator Pods are (their controller, node, readiness).
func pluginPods(r loader.Read) cache.ByObject {
	b := cache.ByObject{Transform: StripPod, Namespaces: map[string]cache.Config{}}
	for _, ns := range r.Namespaces {
		b.Namespaces[ns] = cache.Config{}
	}
	return b
}

// StripDaemonSet keeps what a proof and a Node review read of a DRA driver's kubelet-plugin
// DaemonSet: its identity (its Pods' controller references carry its UID)
// and where its Pods may be scheduled (docs/proof.md#dra-nodes).
func StripDaemonSet(obj any) (any, error) { return asIs(obj, stripDaemonSet) }

func stripDaemonSet(obj any) (any, error) {
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok {
		return obj, nil
	}
	out := &appsv1.DaemonSet{TypeMeta: ds.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: ds.Name, Namespace: ds.Namespace, UID: ds.UID, ResourceVersion: ds.ResourceVersion}}
	if v, ok := ds.Labels[gate.LabelVersion]; ok {
		out.Labels = map[string]string{gate.LabelVersion: v}
	}
	spec := &ds.Spec.Template.Spec
	// What schedulesOn reads (nodeName, tolerations, host networking) and
	// the release a Node write would install (the containers' images).
	out.Spec.Template.Spec.NodeName, out.Spec.Template.Spec.Tolerations, out.Spec.Template.Spec.HostNetwork = spec.NodeName, spec.Tolerations, spec.HostNetwork
	for _, c := range spec.Containers {
		out.Spec.Template.Spec.Containers = append(out.Spec.Template.Spec.Containers, corev1.Container{Name: c.Name, Image: c.Image})
	}
	out.Spec.Template.Spec.NodeSelector = spec.NodeSelector
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil {
		out.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution}}
	}
	return out, nil
}

// draNotServed is the error a read of slices or claims gets from the
// caches when the API server does not serve them (the loader's live reads
// get the same kind from the REST mapper).
func (f *Facts) draNotServed(r loader.Read) error {
	d := f.load().Reads.DRA
	if f.draUnserved == "" || d == nil || (r.What != d.Slices.What && r.What != d.Claims.What) {
		return nil
	}
	kind := "ResourceClaim"
	if r.What == d.Slices.What {
		kind = "ResourceSlice"
	}
	return &meta.NoKindMatchError{GroupKind: resourcev1.SchemeGroupVersion.WithKind(kind).GroupKind(),
		SearchedVersions: []string{resourcev1.SchemeGroupVersion.Version}}
}

// StripClaim keeps what a proof reads of a ResourceClaim: its name and
// where its devices were allocated.
func StripClaim(obj any) (any, error) { return asIs(obj, stripClaim) }

func stripClaim(obj any) (any, error) {
	c, ok := obj.(*resourcev1.ResourceClaim)
	if !ok {
		return obj, nil
	}
	out := &resourcev1.ResourceClaim{TypeMeta: c.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace, UID: c.UID, ResourceVersion: c.ResourceVersion}}
	if a := c.Status.Allocation; a != nil {
		out.Status.Allocation = &resourcev1.AllocationResult{NodeSelector: a.NodeSelector}
		for _, res := range a.Devices.Results {
			out.Status.Allocation.Devices.Results = append(out.Status.Allocation.Devices.Results,
				resourcev1.DeviceRequestAllocationResult{Request: res.Request, Driver: res.Driver, Pool: res.Pool, Device: res.Device})
		}
	}
	return out, nil
}

// StripSlice keeps what a proof reads of a ResourceSlice: its driver, node
// and pool, and each device's name and type (a driver lists many attributes
// and capacities per device, and the cache holds every driver's slices).
func StripSlice(obj any) (any, error) { return asIs(obj, stripSlice) }

func stripSlice(obj any) (any, error) {
	s, ok := obj.(*resourcev1.ResourceSlice)
	if !ok {
		return obj, nil
	}
	out := &resourcev1.ResourceSlice{TypeMeta: s.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion},
		Spec:       resourcev1.ResourceSliceSpec{Driver: s.Spec.Driver, NodeName: s.Spec.NodeName, Pool: s.Spec.Pool}}
	for _, d := range s.Spec.Devices {
		kept := resourcev1.Device{Name: d.Name}
		for name, a := range d.Attributes {
			if name == "type" || name == resourcev1.QualifiedName(s.Spec.Driver+"/type") {
				if kept.Attributes == nil {
					kept.Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{}
				}
				kept.Attributes[name] = a
			}
		}
		out.Spec.Devices = append(out.Spec.Devices, kept)
	}
	return out, nil
}
