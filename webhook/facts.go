package webhook

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Facts reads the cluster state the engine needs from informer caches, and
// GPU holders live: holders are listed for the few pending nodes only, which
// also closes the race with a Pod scheduled a moment ago.
type Facts struct {
	Config *gate.Config
	Cache  cache.Cache
	// Live lists Pods straight from the API server (never cached: a cluster's
	// Pods would cost far more memory than the rest together).
	Live client.Reader

	serverVersion atomic.Pointer[string]
	synced        atomic.Bool
	records       recordCache
}

// ready says whether reviews can be decided: no request waits on, or reads
// from, a cache that has not synced.
func (f *Facts) ready() error {
	if !f.synced.Load() {
		return errors.New("informer caches have not synced, or the API server version is not known yet")
	}
	return nil
}

// SetServerVersion records the API server's gitVersion (refreshed by a
// runnable through discovery).
func (f *Facts) SetServerVersion(v string) { f.serverVersion.Store(&v) }

// Cluster assembles the engine's view. Nodes come from the informer's store
// without copying: the engine only reads them.
func (f *Facts) Cluster(ctx context.Context) (*gate.Cluster, error) {
	if err := f.ready(); err != nil {
		return nil, err
	}
	cl := &gate.Cluster{Records: map[string]gate.RecordEntry{}}
	if v := f.serverVersion.Load(); v != nil {
		cl.ServerVersion = *v
	}
	nodes, err := f.nodes(ctx)
	if err != nil {
		return nil, err
	}
	cl.Nodes = nodes
	var plans upgradev1.PlanList
	if err := f.Cache.List(ctx, &plans, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list Plans: %w", err)
	}
	for i := range plans.Items {
		cl.Plans = append(cl.Plans, &plans.Items[i])
	}
	var cms corev1.ConfigMapList
	if err := f.Cache.List(ctx, &cms, client.InNamespace(f.Config.Namespace), client.MatchingLabels{qualification.ConfigMapLabel: "true"}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list record ConfigMaps: %w", err)
	}
	for i := range cms.Items {
		cl.Records[cms.Items[i].Name] = f.records.load(&cms.Items[i])
	}
	if cl.GPUOperatorImage, err = f.image(ctx, &appsv1.Deployment{}, f.Config.GPUOperator); err != nil {
		return nil, err
	}
	if cl.DCGMExporterImage, err = f.image(ctx, &appsv1.DaemonSet{}, f.Config.DCGMExporter); err != nil {
		return nil, err
	}
	return cl, nil
}

func (f *Facts) nodes(ctx context.Context) ([]*corev1.Node, error) {
	inf, err := f.Cache.GetInformer(ctx, &corev1.Node{})
	if err != nil {
		return nil, fmt.Errorf("node informer: %w", err)
	}
	if si, ok := inf.(toolscache.SharedIndexInformer); ok {
		objs := si.GetStore().List()
		nodes := make([]*corev1.Node, 0, len(objs))
		for _, o := range objs {
			if n, ok := o.(*corev1.Node); ok {
				nodes = append(nodes, n)
			}
		}
		return nodes, nil
	}
	var list corev1.NodeList
	if err := f.Cache.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list Nodes: %w", err)
	}
	nodes := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		nodes[i] = &list.Items[i]
	}
	return nodes, nil
}

// image returns the image of the referenced workload's container; "" when the
// workload does not exist (the engine then reports FactsMissing).
func (f *Facts) image(ctx context.Context, obj client.Object, ref gate.WorkloadRef) (string, error) {
	err := f.Cache.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, obj)
	if client.IgnoreNotFound(err) != nil {
		return "", fmt.Errorf("get %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	if err != nil {
		return "", nil
	}
	var spec corev1.PodSpec
	switch o := obj.(type) {
	case *appsv1.Deployment:
		spec = o.Spec.Template.Spec
	case *appsv1.DaemonSet:
		spec = o.Spec.Template.Spec
	}
	for _, c := range spec.Containers {
		if ref.Container == "" || c.Name == ref.Container {
			return c.Image, nil
		}
	}
	return "", nil
}

// Holders lists the GPU holders of each named node from the API server.
func (f *Facts) Holders(ctx context.Context, nodes []string) (map[string][]gate.Holder, error) {
	out := make(map[string][]gate.Holder, len(nodes))
	for _, n := range nodes {
		var pods corev1.PodList
		if err := f.Live.List(ctx, &pods, client.MatchingFields{"spec.nodeName": n}); err != nil {
			return nil, fmt.Errorf("list Pods on %s: %w", n, err)
		}
		out[n] = gate.HoldersOf(pods.Items)
	}
	return out, nil
}

// recordCache keeps parsed records by ConfigMap name and resourceVersion, so
// a record is parsed once per change, not once per review.
type recordCache struct {
	mu      sync.Mutex
	entries map[string]cachedRecord
}

type cachedRecord struct {
	uid, resourceVersion string
	entry                gate.RecordEntry
}

func (c *recordCache) load(cm *corev1.ConfigMap) gate.RecordEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[cm.Name]; ok && e.uid == string(cm.UID) && e.resourceVersion == cm.ResourceVersion && cm.ResourceVersion != "" {
		return e.entry
	}
	rec, err := qualification.FromConfigMap(cm)
	entry := gate.RecordEntry{Record: rec, Err: err}
	if c.entries == nil {
		c.entries = map[string]cachedRecord{}
	}
	c.entries[cm.Name] = cachedRecord{uid: string(cm.UID), resourceVersion: cm.ResourceVersion, entry: entry}
	return entry
}
