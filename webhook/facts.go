package webhook

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Facts reads the cluster state the engine needs from informer caches, and
// GPU holders from the API server: holders are listed for the few pending
// nodes only (a cluster's Pods would cost far more memory than the rest
// together), from the API server's watch cache (holderListOptions).
type Facts struct {
	Config *gate.Config
	Cache  cache.Cache
	// Live reads from the API server: the per-node steps' Node and Plan, and
	// the GPU holders.
	Live client.Reader
	// PodsSeen returns the newest Pod resourceVersion the gate's own Pod
	// informer has seen, "" before it has synced (NewManager sets it).
	PodsSeen func() string
	// Allocations caches the allocation-check Pods only (their own label).
	Allocations cache.Cache
	// Halts caches the halt record ConfigMap only (by name); nil: no halt
	// record is kept (tests of other paths).
	Halts cache.Cache

	serverVersion atomic.Pointer[string]
	synced        atomic.Bool
	records       recordCache
	haltRecord    haltRecordCache
	selectors     selectorCache
	watches       watchHealth
	// holderFlights are the request checks' holder listings in flight, by
	// node (RequestHolders).
	holderFlights singleflight.Group

	// The Node list is rebuilt from the informer's store only after the
	// store changed (nodeGen counts the informer's events), not on every
	// review: listing 5,000 nodes cost each review ~0.1 ms and ~120 KB of
	// garbage.
	watchingNodes atomic.Bool
	nodeGen       atomic.Uint64
	nodeList      atomic.Pointer[nodeSnapshot]
	// The proof facts likewise, per event of the proof Pod and SUC Job
	// informers (WatchProof): sorting a fleet's ~1,000 validator Pods by
	// selector was a quarter of a Node review's CPU.
	watchingProof atomic.Bool
	proofGen      atomic.Uint64
	proofSnap     atomic.Pointer[proofSnapshot]
}

type proofSnapshot struct {
	gen   uint64
	facts gate.ProofFacts
}

// WatchProof makes the informers' events (the proof Pods' and SUC Jobs')
// invalidate the cached proof facts (NewManager calls it with every such
// informer); without it they are rebuilt on every review.
func (f *Facts) WatchProof(infs ...cache.Informer) error {
	if err := countEvents(&f.proofGen, infs...); err != nil {
		return err
	}
	f.watchingProof.Store(true)
	return nil
}

type nodeSnapshot struct {
	gen   uint64
	nodes []*corev1.Node
	// index is the engine's index of nodes, built from the previous one so
	// what it knew about unchanged nodes carries over.
	index *gate.NodeIndex
}

// WatchNodes makes the Node informer's events invalidate the Node list
// (NewManager calls it); without it the list is read from the store every
// time.
func (f *Facts) WatchNodes(inf cache.Informer) error {
	if err := countEvents(&f.nodeGen, inf); err != nil {
		return err
	}
	f.watchingNodes.Store(true)
	return nil
}

// countEvents adds one to gen on every event of the informers.
func countEvents(gen *atomic.Uint64, infs ...cache.Informer) error {
	bump := func() { gen.Add(1) }
	for _, inf := range infs {
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { bump() },
			UpdateFunc: func(any, any) { bump() },
			DeleteFunc: func(any) { bump() },
		}); err != nil {
			return err
		}
	}
	return nil
}

// ready says whether reviews can be decided: no request waits on, or reads
// from, a cache that has not synced, or one whose watch broke (an API server
// restart) and has not caught up yet.
func (f *Facts) ready() error {
	if !f.synced.Load() {
		return errors.New("informer caches have not synced, or the API server version is not known yet")
	}
	return f.watches.fresh()
}

// staleWindow is how long reviews keep failing closed after the caches may
// have missed changes: longer than the reflector's largest retry backoff
// (30s), and longer than a restarted API server takes to stream events
// again (its watch cache warms for several seconds after a relist already
// succeeds; 4-17 s measured).
const staleWindow = 35 * time.Second

// watchHealth remembers when the caches may have missed changes: an
// informer's watch failed, or the API server did not answer the liveness
// probe (client-go retries a refused watch quietly, without reporting it).
// Each counts as caught up staleWindow after its last failure.
type watchHealth struct {
	mu     sync.Mutex
	failed map[string]watchFailure
}

type watchFailure struct {
	at  time.Time
	err error
}

func (w *watchHealth) fail(what string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed == nil {
		w.failed = map[string]watchFailure{}
	}
	w.failed[what] = watchFailure{at: time.Now(), err: err}
}

// failedWatch is the caches' watch error handler.
func (w *watchHealth) failedWatch(ctx context.Context, r *toolscache.Reflector, err error) {
	w.fail("the "+r.TypeDescription()+" watch", err)
	toolscache.DefaultWatchErrorHandler(ctx, r, err)
}

func (w *watchHealth) fresh() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for what, fail := range w.failed {
		if time.Since(fail.at) > staleWindow {
			delete(w.failed, what)
			continue
		}
		return fmt.Errorf("%s failed %s ago (%v), so the caches may miss changes; reviews resume %s after it recovers", what, time.Since(fail.at).Round(time.Second), fail.err, staleWindow)
	}
	return nil
}

// SetServerVersion records the API server's gitVersion (refreshed by a
// runnable through discovery).
func (f *Facts) SetServerVersion(v string) { f.serverVersion.Store(&v) }

// Cluster assembles the engine's view. Nodes come from the informer's store
// without copying: the engine only reads them, and the list itself is shared
// by the reviews until the store changes.
func (f *Facts) Cluster(ctx context.Context) (*gate.Cluster, error) {
	if err := f.ready(); err != nil {
		return nil, err
	}
	cl := &gate.Cluster{Records: map[string]gate.RecordEntry{}}
	if v := f.serverVersion.Load(); v != nil {
		cl.ServerVersion = *v
	}
	snap, err := f.nodes(ctx)
	if err != nil {
		return nil, err
	}
	cl.Nodes, cl.Index = snap.nodes, snap.index
	var plans upgradev1.PlanList
	if err := f.Cache.List(ctx, &plans, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list Plans: %w", err)
	}
	for i := range plans.Items {
		p := &plans.Items[i]
		cl.Plans = append(cl.Plans, p)
		cl.PlanSelectors = append(cl.PlanSelectors, f.selectors.get(p))
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
	if cl.Proof, err = f.proofFacts(ctx); err != nil {
		return nil, err
	}
	cl.Halts = f.haltRecordOf(ctx)
	return cl, nil
}

// haltRecordOf reads the halt record from its cache. A record that is
// missing or cannot be read fails closed (gate.HaltRecord.Err).
func (f *Facts) haltRecordOf(ctx context.Context) gate.HaltRecord {
	if f.Halts == nil {
		return gate.HaltRecord{}
	}
	var cm corev1.ConfigMap
	if err := f.Halts.Get(ctx, client.ObjectKey{Namespace: f.Config.Namespace, Name: f.Config.Halts.ConfigMap}, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			err = errors.New("the ConfigMap does not exist")
		}
		return f.Config.MissingHaltRecord(err)
	}
	return f.haltRecord.load(f.Config, &cm)
}

// haltRecordCache keeps the parsed halt record per resourceVersion.
type haltRecordCache struct {
	mu     sync.Mutex
	rv     string
	record gate.HaltRecord
}

func (c *haltRecordCache) load(cfg *gate.Config, cm *corev1.ConfigMap) gate.HaltRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cm.ResourceVersion == "" || cm.ResourceVersion != c.rv {
		c.rv, c.record = cm.ResourceVersion, cfg.ParseHaltRecord(cm)
	}
	return c.record
}

// proofFacts are the few objects proofs read. Pods come from their
// informers' stores (pointers, never copied: a fleet has one validator Pod
// per GPU node, and every review reads them); SUC's Jobs, a handful, are
// listed.
func (f *Facts) proofFacts(ctx context.Context) (gate.ProofFacts, error) {
	// The generation before the stores: an event during the listing makes
	// the next review list again.
	gen, watching := f.proofGen.Load(), f.watchingProof.Load()
	if prev := f.proofSnap.Load(); watching && prev != nil && prev.gen == gen {
		return prev.facts, nil
	}
	var pods []*corev1.Pod
	caches := []cache.Cache{f.Cache}
	if f.Allocations != nil {
		caches = append(caches, f.Allocations)
	}
	for _, c := range caches {
		got, err := podsOf(ctx, c)
		if err != nil {
			return gate.ProofFacts{}, fmt.Errorf("proof Pods: %w", err)
		}
		pods = append(pods, got...)
	}
	var list batchv1.JobList
	if err := f.Cache.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return gate.ProofFacts{}, fmt.Errorf("SUC Jobs: %w", err)
	}
	jobs := make([]*batchv1.Job, len(list.Items))
	for i := range list.Items {
		jobs[i] = &list.Items[i]
	}
	// The caches hold only what the selectors picked; ProofFactsOf sorts
	// them into validators and checks (a Pod could be both).
	facts := f.Config.ProofFactsOf(pods, jobs)
	if watching {
		f.proofSnap.Store(&proofSnapshot{gen: gen, facts: facts})
	}
	return facts, nil
}

// podsOf lists a cache's Pods: its informer's store when it has one, else
// a List.
func podsOf(ctx context.Context, c cache.Cache) ([]*corev1.Pod, error) {
	inf, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	if si, ok := inf.(toolscache.SharedIndexInformer); ok {
		for _, o := range si.GetStore().List() {
			if p, ok := o.(*corev1.Pod); ok {
				out = append(out, p)
			}
		}
		return out, nil
	}
	var list corev1.PodList
	if err := c.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

func (f *Facts) nodes(ctx context.Context) (*nodeSnapshot, error) {
	inf, err := f.Cache.GetInformer(ctx, &corev1.Node{})
	if err != nil {
		return nil, fmt.Errorf("node informer: %w", err)
	}
	if si, ok := inf.(toolscache.SharedIndexInformer); ok {
		// Read the generation before the store: an event during the listing
		// makes the next review list again.
		gen := f.nodeGen.Load()
		watching := f.watchingNodes.Load()
		prev := f.nodeList.Load()
		if watching && prev != nil && prev.gen == gen {
			return prev, nil
		}
		objs := si.GetStore().List()
		nodes := make([]*corev1.Node, 0, len(objs))
		for _, o := range objs {
			if n, ok := o.(*corev1.Node); ok {
				nodes = append(nodes, n)
			}
		}
		snap := &nodeSnapshot{gen: gen, nodes: nodes}
		if watching {
			var before *gate.NodeIndex
			if prev != nil {
				before = prev.index
			}
			snap.index = gate.NewNodeIndex(f.Config, nodes, before)
			f.nodeList.Store(snap)
		}
		return snap, nil
	}
	var list corev1.NodeList
	if err := f.Cache.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list Nodes: %w", err)
	}
	nodes := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		nodes[i] = &list.Items[i]
	}
	return &nodeSnapshot{nodes: nodes}, nil
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

// Holders lists the GPU holders of each named node from the API server,
// each listing the review's own: what the per-node guards (SUC's Job start,
// the GPU Operator's driver step) read right where a node's upgrade begins.
// The nodes are listed concurrently (a wave's latency is then one listing,
// not one per node), at most maxHolderLists at once; an error names the
// first failing node in the given order.
func (f *Facts) Holders(ctx context.Context, nodes []string) (map[string][]gate.Holder, error) {
	return f.holders(ctx, nodes, f.listHolders)
}

// RequestHolders are Holders for the request checks (Plan, Node and driver
// writes): a review joins a listing of the same node already in flight
// instead of sending its own. Under load (Plan reviews at 200/s, a few
// pending nodes each, mostly the same ones) one listing then answers every
// review waiting for that node, where each used to queue its own at the
// API server (issue 14 item 4: reviews waited hundreds of ms there). The
// joined listing is at most one round trip older than the review's own
// would be; the request check is the early answer, and the guard lists
// again, alone, where the upgrade begins (docs/performance.md, "GPU
// holders: how fresh, and why").
func (f *Facts) RequestHolders(ctx context.Context, nodes []string) (map[string][]gate.Holder, error) {
	return f.holders(ctx, nodes, f.sharedHolders)
}

func (f *Facts) listHolders(ctx context.Context, node string) ([]gate.Holder, error) {
	var pods corev1.PodList
	if err := f.Live.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node}, f.holderListOptions()); err != nil {
		return nil, err
	}
	return f.Config.HoldersOf(pods.Items), nil
}

// holderListTimeout bounds a shared listing, which runs apart from the
// review that started it (that one may give up; the others still wait):
// the webhook's timeout in the chart.
const holderListTimeout = 10 * time.Second

// sharedHolders joins the node's listing in flight, or starts one. The
// holders it returns are shared: read only.
func (f *Facts) sharedHolders(ctx context.Context, node string) ([]gate.Holder, error) {
	ch := f.holderFlights.DoChan(node, func() (any, error) {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), holderListTimeout)
		defer cancel()
		return f.listHolders(lctx, node)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.([]gate.Holder), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *Facts) holders(ctx context.Context, nodes []string, listOne func(context.Context, string) ([]gate.Holder, error)) (map[string][]gate.Holder, error) {
	holders := make([][]gate.Holder, len(nodes))
	errs := make([]error, len(nodes))
	list := func(i int) {
		h, err := listOne(ctx, nodes[i])
		if err != nil {
			errs[i] = fmt.Errorf("list Pods on %s: %w", nodes[i], err)
			return
		}
		holders[i] = h
	}
	if len(nodes) == 1 {
		list(0)
	} else {
		var wg sync.WaitGroup
		sem := make(chan struct{}, maxHolderLists)
		for i := range nodes {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				list(i)
			}()
		}
		wg.Wait()
	}
	out := make(map[string][]gate.Holder, len(nodes))
	for i, n := range nodes {
		if errs[i] != nil {
			return nil, errs[i]
		}
		out[n] = holders[i]
	}
	return out, nil
}

// maxHolderLists bounds one review's concurrent Pod listings.
const maxHolderLists = 8

// holderListOptions ask for the holders as the API server's watch cache has
// them, no older than the Pods the gate's informer has already seen
// (resourceVersionMatch=NotOlderThan). A consistent list (no
// resourceVersion) made each review wait for etcd's next progress
// notification, up to ~100 ms (p50 +50 ms a Plan create), to rule out a
// lag of a millisecond or so, while the race it was meant to close runs
// seconds, until the node is cordoned (docs/performance.md, "GPU holders:
// how fresh, and why"). The floor keeps a review from reading older Pods
// than the gate already saw, also from another API server whose cache
// lags: that one waits to catch up (3 s at most), then answers an error,
// and so does a cache that is not ready: both fail closed (FactsMissing).
// Before the informer has a resourceVersion the list is consistent.
func (f *Facts) holderListOptions() *client.ListOptions {
	rv := ""
	if f.PodsSeen != nil {
		rv = f.PodsSeen()
	}
	return notOlderThan(rv)
}

// notOlderThan lists from the watch cache no older than rv (what an
// informer has seen); consistent when there is none yet.
func notOlderThan(rv string) *client.ListOptions {
	if rv == "" {
		return &client.ListOptions{}
	}
	return &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}}
}

// cachedCopy fills obj with the gate's cached copy of the object at key
// (shared with the cache: read only) and says whether the cache holds it.
func (f *Facts) cachedCopy(ctx context.Context, key client.ObjectKey, obj client.Object) bool {
	return f.Cache != nil && f.Cache.Get(ctx, key, obj, client.UnsafeDisableDeepCopy) == nil
}

// liveGet reads obj from the API server's watch cache no older than the
// gate's own cached copy of it (rv, its resourceVersion): a GET with a
// resourceVersion other than 0 is served "not older than" it from the
// watch cache, at once, since the cache the gate's informer was fed from
// is already past it; without one (rv "", the gate has no copy yet) it is
// a quorum read from etcd, which cost the Job guard 5-8 ms a read at the
// median (docs/performance.md, "SUC's Job start"). Reading the object no
// older than its own cached resourceVersion is as fresh for it as reading
// no older than the informer's newest: the informer has every event up
// to that, so the object did not change between the two. What the read
// can miss, and why the guard accepts it: webhook/jobs.md, "Freshness".
func (f *Facts) liveGet(ctx context.Context, key client.ObjectKey, obj client.Object, rv string) error {
	if rv == "" {
		return f.Live.Get(ctx, key, obj)
	}
	return f.Live.Get(ctx, key, obj, &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: rv}})
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
	entry := gate.RecordEntry{Record: rec, Err: err, Attestation: qualification.AttestationOf(cm)}
	if c.entries == nil {
		c.entries = map[string]cachedRecord{}
	}
	c.entries[cm.Name] = cachedRecord{uid: string(cm.UID), resourceVersion: cm.ResourceVersion, entry: entry}
	return entry
}

// selectorCache keeps each stored Plan's converted selector per UID and
// resourceVersion: converting validates every key and value, which would
// otherwise dominate a Node review.
type selectorCache struct {
	mu sync.Mutex
	m  map[types.UID]cachedSelector
}

type cachedSelector struct {
	resourceVersion string
	sel             *gate.PlanSelector
}

// get returns nil for a Plan whose selector does not convert (the engine
// then converts it and skips it, as it would any invalid selector).
func (c *selectorCache) get(p *upgradev1.Plan) *gate.PlanSelector {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[p.UID]; ok && e.resourceVersion == p.ResourceVersion && p.ResourceVersion != "" {
		return e.sel
	}
	sel, err := gate.NewPlanSelector(p)
	if err != nil {
		return nil
	}
	if c.m == nil || len(c.m) > 4096 {
		c.m = map[types.UID]cachedSelector{} // deleted Plans never pile up
	}
	c.m[p.UID] = cachedSelector{resourceVersion: p.ResourceVersion, sel: sel}
	return sel
}
