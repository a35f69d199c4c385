package webhook

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

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

// maintenanceProbe is how often the maintenance watcher asks discovery
// whether the API server serves NodeMaintenances (absent: look again;
// watched: still there), and how long it waits before it tries again a
// cache that failed: one discovery request per period, where it used to
// ask every VersionRefresh (2 s) forever on a cluster without the
// maintenance operator.
const maintenanceProbe = 30 * time.Second

// newMaintenanceCache adds the watcher of the maintenance operator's
// NodeMaintenances (the budget counts another requestor's node out,
// gate/nodemaintenance.go), read per review (few objects) from a cache of
// their own, started where and while the API server serves them: a cluster
// without the maintenance operator is never asked for them, and one that
// installs it after the gate is picked up. Their cache is outside the
// caches every review waits for, with a watch health of its own: its
// failure refuses only the moves that consume the budget
// (gate.Cluster.NodeMaintenancesErr), never the gate.
func newMaintenanceCache(mgr manager.Manager, restCfg *rest.Config, scheme *runtime.Scheme, facts *Facts, every time.Duration) error {
	disc, err := discovery.NewDiscoveryClientForConfig(restCfg)
	if err != nil {
		return err
	}
	facts.setMaintenanceErr(errors.New("the gate has not asked the API server whether it serves them yet"))
	return mgr.Add(&maintenanceWatcher{disc: disc, facts: facts, every: every,
		newCache: func() (cache.Cache, error) { return maintenanceCache(restCfg, mgr, scheme, facts) }})
}

func maintenanceCache(restCfg *rest.Config, mgr manager.Manager, scheme *runtime.Scheme, facts *Facts) (cache.Cache, error) {
	c, err := cache.New(restCfg, cache.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper(),
		DefaultWatchErrorHandler: facts.maintenanceWatches.failedWatch,
		ByObject:                 map[client.Object]cache.ByObject{nodeMaintenanceObject(): {Transform: StripNodeMaintenance}}})
	if err != nil {
		return nil, fmt.Errorf("NodeMaintenance cache: %w", err)
	}
	return c, nil
}

// maintenanceWatcher probes discovery every period; while the API server
// serves NodeMaintenances it runs their cache and hands it to the reviews
// once synced. It never stops the manager: whatever keeps the cache from
// running (discovery failing, the cache failing to start or to sync) is
// kept as why NodeMaintenances cannot be read, and tried again.
type maintenanceWatcher struct {
	disc     discovery.DiscoveryInterface
	facts    *Facts
	every    time.Duration
	newCache func() (cache.Cache, error)
}

func (w *maintenanceWatcher) Start(ctx context.Context) error {
	every := w.every
	if every <= 0 {
		every = maintenanceProbe
	}
	for {
		served, err := loader.NodeMaintenancesServed(w.disc)
		var other *loader.OtherVersionError
		switch {
		case errors.As(err, &other):
			w.facts.setMaintenanceErr(err)
		case err != nil:
			w.facts.setMaintenanceErr(fmt.Errorf("whether the API server serves them is unknown: %w", err))
		case !served:
			w.facts.setMaintenanceErr(nil) // none: no maintenance operator
		default:
			err := w.watch(ctx, every)
			if ctx.Err() != nil {
				return nil
			}
			w.facts.setMaintenanceErr(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// watch runs a cache of NodeMaintenances until the API server stops
// serving them (nil) or the cache fails (why); the reviews read it once
// it has synced, and not after watch returns.
func (w *maintenanceWatcher) watch(ctx context.Context, every time.Duration) error {
	// Unreadable from the moment the cache goes until Start records why:
	// never a moment of "no maintenance" in between.
	defer func() {
		w.facts.setMaintenanceErr(errors.New("their cache stopped"))
		w.facts.useMaintenance(nil)
	}()
	c, err := w.newCache()
	if err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inf, err := c.GetInformer(cctx, nodeMaintenanceObject(), cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("informer for NodeMaintenances: %w", err)
	}
	// Before the cache starts: its first events are its initial list.
	if err := w.facts.maintenanceSnap.watch(inf); err != nil {
		return fmt.Errorf("informer for NodeMaintenances: %w", err)
	}
	w.facts.setMaintenanceErr(errors.New("their cache has not synced yet"))
	stopped := make(chan error, 1)
	go func() { stopped <- c.Start(cctx) }()
	synced := make(chan bool, 1)
	go func() { synced <- c.WaitForCacheSync(cctx) }()
	probe := time.NewTicker(every)
	defer probe.Stop()
	for {
		select {
		case ok := <-synced:
			if ok {
				w.facts.useMaintenance(&c)
				w.facts.setMaintenanceErr(nil)
			}
		case err := <-stopped:
			if err == nil {
				err = errors.New("it stopped")
			}
			return fmt.Errorf("their cache failed: %w", err)
		case <-probe.C:
			// The maintenance operator uninstalled: no requests (its
			// watch errors meanwhile refuse budget moves until then).
			// Upgraded to a version the gate does not read: why they
			// cannot be read.
			served, err := loader.NodeMaintenancesServed(w.disc)
			var other *loader.OtherVersionError
			switch {
			case errors.As(err, &other):
				return err
			case err == nil && !served:
				return nil
			}
		case <-ctx.Done():
			return nil
		}
	}
}

func nodeMaintenanceObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(loader.NodeMaintenanceGVK)
	return u
}

// nodeMaintenances are the cached NodeMaintenances as the budget reads
// them; none without the cache (not served). An error says why they cannot
// be read: the budget then refuses the moves that consume it, and only
// those (gate.Cluster.NodeMaintenancesErr). They are listed and converted
// once per event of their informer or change of their cache
// (maintenanceSnap), not once per review (every review's Cluster reads
// them). A malformed object is kept as the error until the next event; a
// failed list is tried again by the next review.
func (f *Facts) nodeMaintenances(ctx context.Context) ([]gate.NodeMaintenance, error) {
	if err := f.maintenanceUnreadable(); err != nil {
		return nil, err
	}
	c := f.maintenance.Load()
	if c == nil {
		// Not served, or the watcher just dropped its cache: it records
		// why before it drops it, so a second look tells the two apart.
		return nil, f.maintenanceUnreadable()
	}
	if err := f.maintenanceWatches.fresh(); err != nil {
		return nil, err
	}
	read, err := f.maintenanceSnap.get(func(*maintenanceRead) (maintenanceRead, error) {
		// The cache as of this generation (read after it: useMaintenance).
		c := f.maintenance.Load()
		if c == nil { // dropped since the look above: never "none"
			return maintenanceRead{}, errors.New("the NodeMaintenance cache stopped while it was read")
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(loader.NodeMaintenanceGVK.GroupVersion().WithKind(loader.NodeMaintenanceGVK.Kind + "List"))
		// Read only, converted into values of their own: no deep copy.
		if err := (*c).List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			return maintenanceRead{}, fmt.Errorf("list cached NodeMaintenances: %w", err)
		}
		nms, err := loader.NodeMaintenancesOf(list.Items)
		return maintenanceRead{nms: slices.Clip(nms), err: err}, nil
	})
	if err != nil {
		return nil, err
	}
	return read.nms, read.err
}

// maintenanceUnreadable is why NodeMaintenances cannot be read (nil: they
// can, or none is served).
func (f *Facts) maintenanceUnreadable() error {
	e := f.maintenanceErr.Load()
	if e == nil {
		return nil
	}
	if werr := f.maintenanceWatches.fresh(); werr != nil {
		return fmt.Errorf("%w; %w", *e, werr)
	}
	return *e
}

// maintenanceRead is the NodeMaintenances one generation of their cache
// holds, or why one of them cannot be read.
type maintenanceRead struct {
	nms []gate.NodeMaintenance
	err error
}

// useMaintenance hands the reviews the synced cache of NodeMaintenances
// (nil: none any more). The pointer is stored before the generation moves
// on, so a conversion of the old cache is never labelled with the new
// generation (snapshot).
func (f *Facts) useMaintenance(c *cache.Cache) {
	f.maintenance.Store(c)
	f.maintenanceSnap.gen.Add(1)
}

// setMaintenanceErr records why NodeMaintenances cannot be read (nil: they
// can, or none is served).
func (f *Facts) setMaintenanceErr(err error) {
	if err == nil {
		f.maintenanceErr.Store(nil)
		return
	}
	f.maintenanceErr.Store(&err)
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
