package webhook

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
)

// cacheSource is the loader's source in the webhook: the informer caches,
// which cacheOptions configures from the same Reads, so a cache holds
// exactly what its row selects and is read without selectors.
type cacheSource struct{ f *Facts }

func (s cacheSource) Read(ctx context.Context, r loader.Read) ([]client.Object, error) {
	if r.Field != nil {
		return nil, fmt.Errorf("%s: the gate keeps no cache of them (GPU holders are listed live: Facts.Holders)", r.What)
	}
	if err := s.f.draNotServed(r); err != nil {
		return nil, err
	}
	c := s.cacheOf(r)
	if c == nil {
		return nil, nil // no such cache: none kept (tests of other paths)
	}
	if r.Name != "" {
		obj := r.Object.DeepCopyObject().(client.Object)
		err := c.Get(ctx, client.ObjectKey{Namespace: r.Namespaces[0], Name: r.Name}, obj, client.UnsafeDisableDeepCopy)
		if client.IgnoreNotFound(err) != nil {
			return nil, err
		}
		if err != nil {
			return nil, nil
		}
		return []client.Object{obj}, nil
	}
	if clusterWide(r) {
		// A cluster-wide informer keeps a plain store: its objects are
		// read in place, not copied (5,000 Nodes, ~1,000 validator Pods).
		inf, err := c.GetInformer(ctx, r.Object)
		if err != nil {
			return nil, fmt.Errorf("%s informer: %w", r.What, err)
		}
		if si, ok := inf.(toolscache.SharedIndexInformer); ok {
			objs := si.GetStore().List()
			out := make([]client.Object, 0, len(objs))
			for _, o := range objs {
				if obj, ok := o.(client.Object); ok {
					out = append(out, obj)
				}
			}
			return out, nil
		}
	}
	list := r.NewList()
	if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(items))
	for _, it := range items {
		if obj, ok := it.(client.Object); ok {
			out = append(out, obj)
		}
	}
	return out, nil
}

// gateCache is a creation gate's own cache, read only while it has synced
// and its watch is healthy: else that gate is unreadable (open).
type gateCache struct {
	cache.Cache
	f *Facts
	r loader.Read
}

func (g gateCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	inf, err := g.GetInformer(ctx, g.r.Object, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	if !inf.HasSynced() {
		return fmt.Errorf("%s: its cache has not synced (can the gate read it?)", g.r.What)
	}
	if err := g.f.gateWatches.freshFor(g.r.What); err != nil {
		return err
	}
	return g.Cache.Get(ctx, key, obj, opts...)
}

// cacheOf is the cache holding r's objects: a cache holds one selector per
// type, so the allocation checks (with the check Jobs), the halt record and
// each creation gate have their own.
func (s cacheSource) cacheOf(r loader.Read) cache.Cache {
	reads := s.f.load().Reads
	if c, ok := s.f.Gates[r.What]; ok {
		return gateCache{c, s.f, r}
	}
	for _, g := range reads.CreationGates {
		if r.What == g.What {
			return nil // no cache of it: not read, so open
		}
	}
	if d := reads.DRA; d != nil && (r.What == d.PluginDaemonSets.What || r.What == d.PluginPods.What || r.What == d.Slices.What || r.What == d.Claims.What) {
		if s.f.DRA == nil {
			return nil // no cache of them (tests of other paths)
		}
		return s.f.DRA
	}
	switch {
	case r.What == reads.AllocationChecks.What, reads.CheckJobs.Object != nil && r.What == reads.CheckJobs.What:
		return s.f.Allocations
	case r.What == reads.HaltRecord.What:
		return s.f.Halts
	case r.What == reads.ValidatorDaemonSet.What && s.f.Halts != nil:
		return s.f.Halts
	}
	return s.f.Cache
}

func (s cacheSource) ServerVersion(context.Context) (string, error) {
	if v := s.f.serverVersion.Load(); v != nil {
		return *v, nil
	}
	return "", errors.New("the API server version is not known yet")
}

// clusterWide says whether the gate caches r's kind with a cluster-wide
// informer (a namespace, if any, by field selector): Nodes and Pods.
func clusterWide(r loader.Read) bool {
	switch r.Object.(type) {
	case *corev1.Node, *corev1.Pod:
		return true
	}
	return false
}

// byObject is the cache configuration of r's row.
func byObject(r loader.Read) cache.ByObject {
	var b cache.ByObject
	if clusterWide(r) {
		if len(r.Namespaces) == 1 {
			b.Field = namespaceField(r.Namespaces[0])
		}
	} else if r.Namespaces != nil {
		b.Namespaces = map[string]cache.Config{}
		for _, ns := range r.Namespaces {
			b.Namespaces[ns] = cache.Config{}
		}
	}
	if r.Name != "" {
		b.Field = fields.OneTermEqualSelector("metadata.name", r.Name)
	}
	b.Label = r.Label
	return b
}
