package webhook

import (
	"context"
	"fmt"
	"slices"

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
// gate/nodemaintenance.go), read per review (few objects); none where the
// API server does not serve them, so a cluster without the maintenance
// operator is never asked for them. A CRD installed later is seen at the
// gate's next start.
func newMaintenanceCache(ctx context.Context, mgr manager.Manager, restCfg *rest.Config, scheme *runtime.Scheme, facts *Facts) error {
	disc, err := discovery.NewDiscoveryClientForConfig(restCfg)
	if err != nil {
		return err
	}
	if served, err := nodeMaintenanceServed(disc); err != nil || !served {
		return err
	}
	obj := nodeMaintenanceObject()
	if facts.Maintenance, err = cache.New(restCfg, cache.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper(),
		DefaultWatchErrorHandler: facts.watches.failedWatch,
		ByObject:                 map[client.Object]cache.ByObject{obj: {Transform: StripNodeMaintenance}}}); err != nil {
		return fmt.Errorf("NodeMaintenance cache: %w", err)
	}
	if err := mgr.Add(facts.Maintenance); err != nil {
		return err
	}
	// Start the informer with the cache, so the caches' sync waits for it.
	if _, err := facts.Maintenance.GetInformer(ctx, obj); err != nil {
		return fmt.Errorf("informer for NodeMaintenances: %w", err)
	}
	return nil
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
	if f.Maintenance == nil {
		return nil, nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(loader.NodeMaintenanceGVK.GroupVersion().WithKind(loader.NodeMaintenanceGVK.Kind + "List"))
	if err := f.Maintenance.List(ctx, list); err != nil {
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
