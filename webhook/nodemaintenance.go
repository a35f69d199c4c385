package webhook

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
)

// newMaintenanceCache makes the cache of the maintenance operator's
// NodeMaintenances (the budget counts another requestor's node out,
// gate/nodemaintenance.go), read per review (few objects), where the API
// server serves them: a cluster without the maintenance operator is never
// asked for them. Where it does not yet, a maintenanceWatcher starts the
// cache once it does (the operator installed after the gate).
func newMaintenanceCache(ctx context.Context, mgr manager.Manager, restCfg *rest.Config, scheme *runtime.Scheme, facts *Facts, every time.Duration) (cache.Cache, error) {
	disc, err := discovery.NewDiscoveryClientForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	served, err := nodeMaintenanceServed(disc)
	if err != nil {
		return nil, err
	}
	if !served {
		return nil, mgr.Add(&maintenanceWatcher{disc: disc, facts: facts, every: every,
			newCache: func() (cache.Cache, error) { return maintenanceCache(restCfg, mgr, scheme, facts) }})
	}
	c, err := maintenanceCache(restCfg, mgr, scheme, facts)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(c); err != nil {
		return nil, err
	}
	// Start the informer with the cache, so the caches' sync waits for it.
	if _, err := c.GetInformer(ctx, nodeMaintenanceObject()); err != nil {
		return nil, fmt.Errorf("informer for NodeMaintenances: %w", err)
	}
	facts.maintenance.Store(&c)
	return c, nil
}

func maintenanceCache(restCfg *rest.Config, mgr manager.Manager, scheme *runtime.Scheme, facts *Facts) (cache.Cache, error) {
	c, err := cache.New(restCfg, cache.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper(),
		DefaultWatchErrorHandler: facts.watches.failedWatch,
		ByObject:                 map[client.Object]cache.ByObject{nodeMaintenanceObject(): {Transform: StripNodeMaintenance}}})
	if err != nil {
		return nil, fmt.Errorf("NodeMaintenance cache: %w", err)
	}
	return c, nil
}

// maintenanceWatcher probes discovery until the API server serves
// NodeMaintenances, then starts their cache and hands it to the reviews
// once synced.
type maintenanceWatcher struct {
	disc     discovery.DiscoveryInterface
	facts    *Facts
	every    time.Duration
	newCache func() (cache.Cache, error)
}

func (w *maintenanceWatcher) Start(ctx context.Context) error {
	every := max(w.every, 2*time.Second)
	for {
		if served, err := nodeMaintenanceServed(w.disc); err == nil && served {
			c, err := w.newCache()
			if err != nil {
				return err
			}
			errc := make(chan error, 1)
			go func() { errc <- c.Start(ctx) }()
			if _, err := c.GetInformer(ctx, nodeMaintenanceObject()); err != nil {
				return fmt.Errorf("informer for NodeMaintenances: %w", err)
			}
			if !c.WaitForCacheSync(ctx) {
				return nil // stopping
			}
			w.facts.maintenance.Store(&c)
			return <-errc
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

func nodeMaintenanceObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(loader.NodeMaintenanceGVK)
	return u
}

// nodeMaintenanceServed: the API server serves NodeMaintenances; an error
// only when discovery itself failed.
func nodeMaintenanceServed(disc discovery.DiscoveryInterface) (bool, error) {
	gv := loader.NodeMaintenanceGVK.GroupVersion().String()
	list, err := disc.ServerResourcesForGroupVersion(gv)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", gv, err)
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == loader.NodeMaintenanceResource }), nil
}

// nodeMaintenances are the cached NodeMaintenances as the budget reads
// them; none without the cache (not served).
func (f *Facts) nodeMaintenances(ctx context.Context) ([]gate.NodeMaintenance, error) {
	c := f.maintenance.Load()
	if c == nil {
		return nil, nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(loader.NodeMaintenanceGVK.GroupVersion().WithKind(loader.NodeMaintenanceGVK.Kind + "List"))
	if err := (*c).List(ctx, list); err != nil {
		return nil, fmt.Errorf("list cached NodeMaintenances: %w", err)
	}
	return loader.NodeMaintenancesOf(list.Items)
}

// StripNodeMaintenance keeps what the budget reads of a NodeMaintenance:
// its name, whether it is being deleted, its node and its requestors (its
// drain spec and status are the maintenance operator's business).
func StripNodeMaintenance(obj any) (any, error) { return asIs(obj, stripNodeMaintenance) }

func stripNodeMaintenance(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	out.SetNamespace(u.GetNamespace())
	out.SetName(u.GetName())
	out.SetUID(u.GetUID())
	out.SetResourceVersion(u.GetResourceVersion())
	out.SetDeletionTimestamp(u.GetDeletionTimestamp())
	spec := map[string]any{}
	if s, ok := u.Object["spec"].(map[string]any); ok {
		// Copied as found (a wrong type then fails the read closed,
		// loader.NodeMaintenancesOf, rather than vanishing here).
		for _, k := range []string{"nodeName", "requestorID", "additionalRequestors"} {
			if v, ok := s[k]; ok {
				spec[k] = runtime.DeepCopyJSONValue(v)
			}
		}
	}
	out.Object["spec"] = spec
	return out, nil
}

// NeedLeaderElection: every replica decides, so every replica reads them.
func (w *maintenanceWatcher) NeedLeaderElection() bool { return false }
