package webhook

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
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
	// DRA caches what proofs of DRA nodes read (newDRACache); nil without
	// DRA drivers in the config. draUnserved says why it holds no
	// ResourceSlices and ResourceClaims ("" : it does).
	DRA         cache.Cache
	draUnserved string
	// maintenance caches the maintenance operator's NodeMaintenances
	// (newMaintenanceCache); nil while the API server does not serve them
	// or their cache has not synced. maintenanceErr says why they cannot be
	// read (nil: they can, or none is served), maintenanceWatches when
	// their watch last failed: either refuses only the moves that consume
	// the budget, outside the gate-wide readiness (watches).
	maintenance        atomic.Pointer[cache.Cache]
	maintenanceErr     atomic.Pointer[error]
	maintenanceWatches watchHealth
	// etcdUnserved is when a review last found that the API server serves
	// no ETCDSnapshotFile kind (etcdSnapshots); nil: it did, or not read.
	etcdUnserved atomic.Pointer[time.Time]
	// draWatches is when the DRA cache's watches last failed: that makes
	// only the proofs of DRA nodes unknown (Cluster), not every review.
	draWatches watchHealth
	// Halts caches the halt record ConfigMap and the validator DaemonSet
	// (each by name; the main cache holds the DCGM exporter's DaemonSet);
	// nil: neither is kept (tests of other paths read both from Cache).
	Halts cache.Cache
	// Gates caches each creation gate's object, by its Read's What (a
	// cache holds one selector per type, and each gate names one object).
	// A gate's object usually lives in another team's namespace: its cache's
	// failures (gateWatches) and sync make only that gate unreadable, which
	// counts as open for the reviews that read it, never every webhook.
	Gates       map[string]cache.Cache
	gateWatches watchHealth
	// Preconditions reads the declared preconditions (nil: none
	// configured, or tests of other paths).
	Preconditions *Preconditions

	// haltProbe and haltWrite: why the halt record could not be written,
	// by this replica's dry-run write (haltWriter) and by the halt loop's
	// last write (haltKeeper); nil while it can be. Either fails the
	// record closed.
	haltProbe, haltWrite atomic.Pointer[error]

	serverVersion atomic.Pointer[string]
	synced        atomic.Bool
	watches       watchHealth
	// loader builds each part of the engine's view from the caches
	// (cacheSource), as `check` and `inventory` build theirs from a file
	// or a live read.
	loaderOnce sync.Once
	loader     *loader.Loader
	// holderFlights are the request checks' Pod listings in flight, by
	// node (SharedPods: RequestHolders and the drain check).
	holderFlights singleflight.Group

	// What the engine reads from the informer caches is built once per
	// informer event, not once per review (snapshot): the Node list and
	// its index (listing 5,000 nodes cost each review ~0.1 ms and ~120 KB
	// of garbage), the proof facts (sorting a fleet's ~1,000 validator
	// Pods by selector was a quarter of a Node review's CPU), the Plans
	// with their selectors, the records, the two workloads' images and the
	// halt record (the cache Lists and Gets of these were 24% of a Node
	// review's CPU under load, their RESTMapper lookups alone 8%).
	nodeList  snapshot[nodeSnapshot]
	proofSnap snapshot[gate.ProofFacts]
	planSnap  snapshot[planSnapshot]
	recordMap snapshot[map[string]gate.RecordEntry]
	imageSnap snapshot[workloadImages]
	haltSnap  snapshot[gate.HaltRecord]
	// view is the fleet view of the parts last assembled (Cluster): built
	// again only when one of them is a new generation.
	view atomic.Pointer[gate.FleetView]
	// maintenanceSnap is the NodeMaintenances converted (nodeMaintenances),
	// once per event of their informer or change of their cache.
	maintenanceSnap snapshot[maintenanceRead]
}

// snapshot is one part of the engine's view built from informer stores,
// kept until one of its informers reports an event (watch). A handler runs
// only after the informer's store has the change (client-go's
// processDeltas updates the store, then notifies the handlers, each on its
// listener's goroutine), so a generation read before the stores never
// labels an older state as newer: an event during a build makes the next
// review build again. A review in the hand-off between the store and the
// handler sees the store as it was a moment before, no older than the
// cache's own lag behind the API server already allows. Without watch
// every review builds its own (tests of other paths).
type snapshot[T any] struct {
	watching atomic.Bool
	// gen counts the events of every informer the part is built from.
	gen  atomic.Uint64
	last atomic.Pointer[generation[T]]
	// build is held while building, so concurrent reviews after an event
	// build the part once, the others waiting for it.
	build sync.Mutex
}

type generation[T any] struct {
	gen uint64
	val T
}

// watch makes the informers' events start a new generation.
func (s *snapshot[T]) watch(infs ...cache.Informer) error {
	bump := func() { s.gen.Add(1) }
	for _, inf := range infs {
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { bump() },
			UpdateFunc: func(any, any) { bump() },
			DeleteFunc: func(any) { bump() },
		}); err != nil {
			return err
		}
	}
	s.watching.Store(true)
	return nil
}

// Load is the generation built last (nil before the first).
func (s *snapshot[T]) Load() *generation[T] { return s.last.Load() }

// get returns the current generation's value, building it (from the
// previous value, nil at first) when an event came since. A failed build
// is not kept: its value and error go to this review, the next builds
// again. The value is shared by every review of the generation: read only.
func (s *snapshot[T]) get(build func(prev *T) (T, error)) (T, error) {
	if !s.watching.Load() {
		return build(nil)
	}
	if g := s.last.Load(); g != nil && g.gen == s.gen.Load() {
		return g.val, nil
	}
	s.build.Lock()
	defer s.build.Unlock()
	// The generation before the stores (see snapshot).
	gen := s.gen.Load()
	g := s.last.Load()
	if g != nil && g.gen == gen {
		return g.val, nil // built by the review this one waited for
	}
	var prev *T
	if g != nil {
		prev = &g.val
	}
	v, err := build(prev)
	if err != nil {
		return v, err
	}
	s.last.Store(&generation[T]{gen: gen, val: v})
	return v, nil
}

// WatchProof makes the informers' events (the proof Pods' and SUC Jobs')
// invalidate the cached proof facts (NewManager calls it with every such
// informer); without it they are rebuilt on every review.
func (f *Facts) WatchProof(infs ...cache.Informer) error { return f.proofSnap.watch(infs...) }

// WatchNodes makes the Node informer's events invalidate the Node list
// (NewManager calls it); without it the list is read from the store every
// time.
func (f *Facts) WatchNodes(inf cache.Informer) error { return f.nodeList.watch(inf) }

// WatchPlans makes the Plan informer's events invalidate the Plans and
// their selectors (NewManager calls it).
func (f *Facts) WatchPlans(inf cache.Informer) error { return f.planSnap.watch(inf) }

// WatchRecords makes the record ConfigMap informer's events invalidate the
// records (NewManager calls it).
func (f *Facts) WatchRecords(inf cache.Informer) error { return f.recordMap.watch(inf) }

// WatchImages makes the GPU Operator Deployment's and the DCGM exporter
// DaemonSet's informers' events invalidate their images (NewManager calls
// it with both).
func (f *Facts) WatchImages(infs ...cache.Informer) error { return f.imageSnap.watch(infs...) }

// WatchHaltRecord makes the halt record informer's events invalidate the
// parsed record (NewManager calls it).
func (f *Facts) WatchHaltRecord(inf cache.Informer) error { return f.haltSnap.watch(inf) }

type nodeSnapshot struct {
	nodes []*corev1.Node
	// index is the engine's index of nodes, built from the previous one so
	// what it knew about unchanged nodes carries over (nil unwatched).
	index *gate.NodeIndex
}

// planSnapshot is the stored Plans and, at the same index, their
// converted selectors.
type planSnapshot struct {
	plans     []*upgradev1.Plan
	selectors []*gate.PlanSelector
}

type workloadImages struct {
	gpuOperator, dcgmExporter string
	versions                  *gate.WorkloadVersions // read once per change of the images
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

func (w *watchHealth) fresh() error { return w.freshFor("") }

// freshFor is fresh for the watches named what ("": every watch).
func (w *watchHealth) freshFor(what string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, fail := range w.failed {
		if time.Since(fail.at) > staleWindow {
			delete(w.failed, name)
			continue
		}
		if what != "" && name != what {
			continue
		}
		return fmt.Errorf("%s failed %s ago (%v), so the caches may miss changes; reviews resume %s after it recovers", name, time.Since(fail.at).Round(time.Second), fail.err, staleWindow)
	}
	return nil
}

// SetServerVersion records the API server's gitVersion (refreshed by a
// runnable through discovery).
func (f *Facts) SetServerVersion(v string) { f.serverVersion.Store(&v) }

// Cluster assembles the engine's view from the snapshots: nothing is
// listed or copied per review. What it shares between reviews (the Nodes,
// the Plans and their selectors, the records, the proof facts, the halt
// record) the engine only reads; a handler that changes its view replaces
// a slice, never writes into it (withPlan), and the shared slices have no
// spare capacity an append could write into. Each part is built by the
// loader (internal/loader), once per event of its informers.
func (f *Facts) Cluster(ctx context.Context) (*gate.Cluster, error) {
	if err := f.ready(); err != nil {
		return nil, err
	}
	l := f.load()
	cl := &gate.Cluster{}
	if v := f.serverVersion.Load(); v != nil {
		cl.ServerVersion = *v
	}
	nodes, err := f.nodes(ctx)
	if err != nil {
		return nil, err
	}
	cl.Nodes, cl.Index = slices.Clip(nodes.nodes), nodes.index
	plans, err := f.planSnap.get(func(*planSnapshot) (planSnapshot, error) {
		p, s, err := l.Plans(ctx)
		return planSnapshot{plans: p, selectors: s}, err
	})
	if err != nil {
		return nil, err
	}
	cl.Plans, cl.PlanSelectors = slices.Clip(plans.plans), slices.Clip(plans.selectors)
	if cl.Records, err = f.recordMap.get(func(*map[string]gate.RecordEntry) (map[string]gate.RecordEntry, error) { return l.Records(ctx) }); err != nil {
		return nil, err
	}
	images, err := f.imageSnap.get(func(*workloadImages) (w workloadImages, err error) {
		w.gpuOperator, w.dcgmExporter, err = l.Images(ctx)
		w.versions = gate.VersionsOf(w.gpuOperator, w.dcgmExporter)
		return w, err
	})
	if err != nil {
		return nil, err
	}
	cl.GPUOperatorImage, cl.DCGMExporterImage, cl.Versions = images.gpuOperator, images.dcgmExporter, images.versions
	if cl.Proof, err = f.proofFacts(ctx); err != nil {
		return nil, err
	}
	// The DRA cache's store stays as it last was: a broken watch leaves
	// the DRA nodes' devices and claims unknown, so their proofs fail
	// (cl.Proof is this review's copy; the snapshot keeps its own).
	if err := f.draWatches.fresh(); err != nil && cl.Proof.DRA.Unreadable == "" {
		cl.Proof.DRA.Unreadable = err.Error()
	}
	cl.Halts = f.haltRecordOf(ctx)
	if err := f.haltUnwritable(); err != nil && cl.Halts.Err == nil {
		cl.Halts.Err = err
	}
	// Once per event of what it is built from; concurrent reviews after one
	// may each build it, and the last kept serves the next.
	cl.View = gate.FleetViewFor(cl, f.view.Load())
	f.view.Store(cl.View)
	// One cached object per gate, read by name per review (cheap, and
	// never a part that could be stale across an event).
	cl.CreationGates = l.CreationGates(ctx)
	if f.Preconditions != nil {
		cl.Preconditions = f.Preconditions.Readings()
	}
	// Few objects, listed per review from the cache; unreadable, they hold
	// only the moves that consume the budget.
	cl.NodeMaintenances, cl.NodeMaintenancesErr = f.nodeMaintenances(ctx)
	return cl, nil
}

// haltUnwritable says why the halt record cannot be written, nil when it can
// (as far as this replica last tried): a record the gate cannot write holds
// no new halt, so every forward move is refused meanwhile (fail closed).
func (f *Facts) haltUnwritable() error {
	for _, p := range []*atomic.Pointer[error]{&f.haltWrite, &f.haltProbe} {
		if e := p.Load(); e != nil {
			return fmt.Errorf("the gate cannot write it: %w", *e)
		}
	}
	return nil
}

// noteHaltWrite records the outcome of a write (or dry-run write) of the
// halt record into p.
func noteHaltWrite(p *atomic.Pointer[error], err error) {
	if err == nil {
		p.Store(nil)
		return
	}
	p.Store(&err)
}

// load is the loader over the caches, made on first use.
func (f *Facts) load() *loader.Loader {
	f.loaderOnce.Do(func() { f.loader = loader.New(f.Config, cacheSource{f}) })
	return f.loader
}

// haltRecordOf reads the halt record from its cache. A record that is
// missing or cannot be read fails closed (gate.HaltRecord.Err); one that
// could not be read is read again by the next review, a missing one is
// kept (its creation is an event).
func (f *Facts) haltRecordOf(ctx context.Context) gate.HaltRecord {
	if f.Halts == nil {
		return gate.HaltRecord{}
	}
	rec, _ := f.haltSnap.get(func(*gate.HaltRecord) (gate.HaltRecord, error) { return f.load().HaltRecord(ctx) })
	return rec
}

// proofFacts are the few objects proofs read: the validator and
// allocation-check Pods from their informers' stores (pointers, never
// copied: a fleet has one validator Pod per GPU node, and every review
// reads them), SUC's Jobs, a handful, listed.
func (f *Facts) proofFacts(ctx context.Context) (gate.ProofFacts, error) {
	return f.proofSnap.get(func(*gate.ProofFacts) (gate.ProofFacts, error) { return f.load().Proof(ctx) })
}

// nodes are the Node informer's store; indexed when watched (the index
// then carries over from generation to generation).
func (f *Facts) nodes(ctx context.Context) (nodeSnapshot, error) {
	return f.nodeList.get(func(prev *nodeSnapshot) (nodeSnapshot, error) {
		nodes, err := f.load().Nodes(ctx)
		if err != nil {
			return nodeSnapshot{}, err
		}
		snap := nodeSnapshot{nodes: nodes}
		if f.nodeList.watching.Load() {
			var before *gate.NodeIndex
			if prev != nil {
				before = prev.index
			}
			snap.index = gate.NewNodeIndex(f.Config, nodes, before)
		}
		return snap, nil
	})
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

// listPods lists the Pods on node from the API server (its watch cache,
// no older than the Pod informer has seen).
func (f *Facts) listPods(ctx context.Context, node string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := f.Live.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node}, f.holderListOptions()); err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// nodePods are a per-node guard's live listings of nodes' Pods, one a node,
// each read by every fact the guard judges about that node's Pods (its GPU
// holders and the drain check): SUC's Job start used to list its node twice,
// once for each. They are the guard's own listings (listPods), never a
// request check's shared one (SharedPods): the guard's read is the one made
// right where the upgrade begins (docs/performance.md, "GPU holders: how
// fresh, and why"). Every listing is added before any reader of the map
// starts (the map is not locked).
type nodePods map[string]*podListing

type podListing struct {
	done chan struct{} // closed once pods and err are set, or the listing panicked
	pods []corev1.Pod  // read only: shared by the holders and the drain check
	err  error
}

// add is a new listing of node, nil when node is listed already.
func (ps nodePods) add(node string) *podListing {
	if _, ok := ps[node]; ok {
		return nil
	}
	l := &podListing{done: make(chan struct{})}
	ps[node] = l
	return l
}

// listInto runs l, a listing of node (on the reader's goroutine).
func (f *Facts) listInto(ctx context.Context, node string, l *podListing) {
	defer close(l.done)
	l.pods, l.err = f.listPods(ctx, node)
}

// holders are the GPU holders of nodes from their listings, once all have
// answered; an error names the first failing node in the given order, as
// Facts.Holders does.
func (ps nodePods) holders(cfg *gate.Config, nodes []string) (map[string][]gate.Holder, error) {
	if len(nodes) == 0 {
		return nil, nil
	}
	out := make(map[string][]gate.Holder, len(nodes))
	for _, n := range nodes {
		l := ps[n]
		if l == nil {
			return nil, fmt.Errorf("list Pods on %s: not listed", n)
		}
		<-l.done
		if l.err != nil {
			return nil, fmt.Errorf("list Pods on %s: %w", n, l.err)
		}
		out[n] = cfg.HoldersOf(l.pods)
	}
	return out, nil
}

// podsOn reads the Pods on a node for the drain check: the node's listing,
// or, for a node without one, a listing of its own.
func (ps nodePods) podsOn(f *Facts) func(context.Context, string) ([]corev1.Pod, error) {
	return func(ctx context.Context, node string) ([]corev1.Pod, error) {
		l := ps[node]
		if l == nil {
			return f.listPods(ctx, node)
		}
		select {
		case <-l.done:
			return l.pods, l.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (f *Facts) listHolders(ctx context.Context, node string) ([]gate.Holder, error) {
	pods, err := f.listPods(ctx, node)
	if err != nil {
		return nil, err
	}
	return f.Config.HoldersOf(pods), nil
}

// holderListTimeout bounds a shared listing, which runs apart from the
// review that started it (that one may give up; the others still wait):
// the webhook's timeout in the chart.
const holderListTimeout = 10 * time.Second

// SharedPods joins the listing of the node's Pods in flight, or starts
// one: a Plan review's holders and its drain check read one listing, and
// reviews of the same node share it. The Pods it returns are shared: read
// only.
func (f *Facts) SharedPods(ctx context.Context, node string) ([]corev1.Pod, error) {
	ch := f.holderFlights.DoChan(node, func() (any, error) {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), holderListTimeout)
		defer cancel()
		return f.listPods(lctx, node)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.([]corev1.Pod), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *Facts) sharedHolders(ctx context.Context, node string) ([]gate.Holder, error) {
	pods, err := f.SharedPods(ctx, node)
	if err != nil {
		return nil, err
	}
	return f.Config.HoldersOf(pods), nil
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
// etcdUnservedFor is how long a request check takes a cluster found to
// serve no ETCDSnapshotFile kind (no RKE2) as such without asking again.
const etcdUnservedFor = 10 * time.Second

// requestEtcdSnapshots reads the ETCDSnapshotFiles for a request check (a
// Plan write): as etcdSnapshots, except that a kind found not served is
// taken as such for etcdUnservedFor. The client's REST mapper answers a
// group it does not know with a discovery of every API group on each call
// (controller-runtime apiutil), which made most of a Plan create's rules
// phase on a cluster without RKE2's CRD (bench-peers: 1.8-2.0 ms of
// 2.2-2.4 ms). A CRD installed meanwhile is seen by the request check
// within that time (until then such a Plan is admitted with the warning
// that the kind is not served, as a moment before); SUC's Job start, where
// the node's upgrade begins, always asks (etcdSnapshots).
func (f *Facts) requestEtcdSnapshots(ctx context.Context) gate.EtcdSnapshots {
	if at := f.etcdUnserved.Load(); at != nil && time.Since(*at) < etcdUnservedFor {
		return gate.EtcdSnapshots{}
	}
	return f.etcdSnapshots(ctx)
}

// etcdSnapshots reads the ETCDSnapshotFiles (loader.ReadEtcdSnapshots) and
// remembers whether the kind is served, for requestEtcdSnapshots.
func (f *Facts) etcdSnapshots(ctx context.Context) gate.EtcdSnapshots {
	s := loader.ReadEtcdSnapshots(ctx, f.Live)
	if s.Served {
		f.etcdUnserved.Store(nil)
	} else {
		now := time.Now()
		f.etcdUnserved.Store(&now)
	}
	return s
}

func (f *Facts) liveGet(ctx context.Context, key client.ObjectKey, obj client.Object, rv string) error {
	if rv == "" {
		return f.Live.Get(ctx, key, obj)
	}
	return f.Live.Get(ctx, key, obj, &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: rv}})
}
