package webhook

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// fedInformer is a real shared informer whose watch the test feeds (it plays
// the API server): its store and event handlers run as in the gate.
type fedInformer struct {
	toolscache.SharedIndexInformer
	w *watch.FakeWatcher
}

func newFedInformer(t *testing.T, ctx context.Context, obj runtime.Object, list runtime.Object) *fedInformer {
	t.Helper()
	fw := watch.NewFake()
	inf := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			l := list.DeepCopyObject()
			require.NoError(t, meta.SetList(l, nil))
			la, _ := meta.ListAccessor(l)
			la.SetResourceVersion("1")
			return l, nil
		},
		WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				// A streaming list (client-go's WatchListClient): no initial
				// objects, then the bookmark that ends them.
				mark := obj.DeepCopyObject()
				a, _ := meta.Accessor(mark)
				a.SetResourceVersion("1")
				a.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
				go fw.Action(watch.Bookmark, mark)
			}
			return fw, nil
		},
	}, obj, 0, toolscache.Indexers{})
	go inf.Run(ctx.Done())
	require.True(t, toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced))
	return &fedInformer{SharedIndexInformer: inf, w: fw}
}

// storeCache answers the controller-runtime cache calls Facts makes from
// the fed informers' stores, counting the Lists and Gets (what a review
// would pay per call), and fails the Gets while getErr is set.
type storeCache struct {
	cache.Cache
	infs   map[reflect.Type]*fedInformer
	calls  atomic.Int64
	getErr atomic.Pointer[error]
	// listTime is how long a List takes (a build the reviews overlap).
	listTime atomic.Int64
}

func (c *storeCache) informer(obj runtime.Object) (*fedInformer, error) {
	inf, ok := c.infs[reflect.TypeOf(obj)]
	if !ok {
		return nil, fmt.Errorf("storeCache: no informer for %T", obj)
	}
	return inf, nil
}

func (c *storeCache) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	inf, err := c.informer(obj)
	if err != nil {
		return nil, err
	}
	return inf.SharedIndexInformer, nil
}

func (c *storeCache) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.calls.Add(1)
	time.Sleep(time.Duration(c.listTime.Load()))
	items := map[reflect.Type]runtime.Object{
		reflect.TypeOf(&upgradev1.PlanList{}):   &upgradev1.Plan{},
		reflect.TypeOf(&corev1.ConfigMapList{}): &corev1.ConfigMap{},
		reflect.TypeOf(&batchv1.JobList{}):      &batchv1.Job{},
		reflect.TypeOf(&corev1.NodeList{}):      &corev1.Node{},
	}[reflect.TypeOf(list)]
	inf, err := c.informer(items)
	if err != nil {
		return err
	}
	var objs []runtime.Object
	for _, o := range inf.GetStore().List() {
		objs = append(objs, o.(runtime.Object))
	}
	return meta.SetList(list, objs) // the items copied, as with UnsafeDisableDeepCopy
}

func (c *storeCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	c.calls.Add(1)
	if err := c.getErr.Load(); err != nil {
		return *err
	}
	inf, err := c.informer(obj)
	if err != nil {
		return err
	}
	got, ok, err := inf.GetStore().GetByKey(key.String())
	if err != nil {
		return err
	}
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: fmt.Sprintf("%T", obj)}, key.Name)
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(got).Elem())
	return nil
}

type watchedFacts struct {
	facts       *Facts
	main, halts *storeCache
}

// newWatchedFacts wires Facts as NewManager does, over fed informers.
func newWatchedFacts(t *testing.T, ctx context.Context) *watchedFacts {
	cfg := gate.DefaultConfig()
	inf := func(obj, list runtime.Object) *fedInformer { return newFedInformer(t, ctx, obj, list) }
	main := &storeCache{infs: map[reflect.Type]*fedInformer{
		reflect.TypeOf(&corev1.Node{}):       inf(&corev1.Node{}, &corev1.NodeList{}),
		reflect.TypeOf(&corev1.Pod{}):        inf(&corev1.Pod{}, &corev1.PodList{}),
		reflect.TypeOf(&batchv1.Job{}):       inf(&batchv1.Job{}, &batchv1.JobList{}),
		reflect.TypeOf(&upgradev1.Plan{}):    inf(&upgradev1.Plan{}, &upgradev1.PlanList{}),
		reflect.TypeOf(&corev1.ConfigMap{}):  inf(&corev1.ConfigMap{}, &corev1.ConfigMapList{}),
		reflect.TypeOf(&appsv1.Deployment{}): inf(&appsv1.Deployment{}, &appsv1.DeploymentList{}),
		reflect.TypeOf(&appsv1.DaemonSet{}):  inf(&appsv1.DaemonSet{}, &appsv1.DaemonSetList{}),
	}}
	// The halts cache holds the validator DaemonSet too (cacheSource).
	halts := &storeCache{infs: map[reflect.Type]*fedInformer{reflect.TypeOf(&corev1.ConfigMap{}): inf(&corev1.ConfigMap{}, &corev1.ConfigMapList{}),
		reflect.TypeOf(&appsv1.DaemonSet{}): inf(&appsv1.DaemonSet{}, &appsv1.DaemonSetList{})}}
	f := &Facts{Config: cfg, Cache: main, Halts: halts}
	of := func(obj runtime.Object) cache.Informer { return main.infs[reflect.TypeOf(obj)].SharedIndexInformer }
	require.NoError(t, errors.Join(f.WatchNodes(of(&corev1.Node{})), f.WatchProof(of(&corev1.Pod{}), of(&batchv1.Job{})),
		f.WatchPlans(of(&upgradev1.Plan{})), f.WatchRecords(of(&corev1.ConfigMap{})),
		f.WatchImages(of(&appsv1.Deployment{}), of(&appsv1.DaemonSet{})),
		f.WatchHaltRecord(halts.infs[reflect.TypeOf(&corev1.ConfigMap{})].SharedIndexInformer)))
	f.synced.Store(true)
	return &watchedFacts{facts: f, main: main, halts: halts}
}

func (w *watchedFacts) feed(obj runtime.Object) *watch.FakeWatcher {
	return w.main.infs[reflect.TypeOf(obj)].w
}

func testPlan(name, rv string, sel map[string]string) *upgradev1.Plan {
	return &upgradev1.Plan{TypeMeta: metav1.TypeMeta{APIVersion: "upgrade.cattle.io/v1", Kind: "Plan"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "system-upgrade", Name: name, UID: types.UID("uid-" + name), ResourceVersion: rv},
		Spec:       upgradev1.PlanSpec{NodeSelector: &metav1.LabelSelector{MatchLabels: sel}}}
}

func operatorDeployment(cfg *gate.Config, image, rv string) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.GPUOperator.Namespace, Name: cfg.GPUOperator.Name, ResourceVersion: rv}}
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: cfg.GPUOperator.Container, Image: image}}
	return d
}

// eventually waits for the informer's handler (it runs after the store has
// the change, on the informer's own goroutine).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, 5*time.Millisecond, what)
}

// TestClusterFollowsItsInformers: each part of the engine's view is read
// from the caches once, reused while its informers report no event (no
// List or Get per review), and rebuilt for the first review after one of
// them reports a change, an addition or a deletion.
func TestClusterFollowsItsInformers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newWatchedFacts(t, ctx)
	cfg := w.facts.Config
	cluster := func() *gate.Cluster {
		cl, err := w.facts.Cluster(ctx)
		require.NoError(t, err)
		return cl
	}
	cluster()
	calls := w.main.calls.Load() + w.halts.calls.Load()
	for range 3 {
		cluster()
	}
	assert.Equal(t, calls, w.main.calls.Load()+w.halts.calls.Load(), "no event: no review lists or gets")

	record := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: "a100-record", ResourceVersion: "5",
		Labels: map[string]string{qualification.ConfigMapLabel: "true"}}}
	for _, tc := range []struct {
		name  string
		event func()
		seen  func(*gate.Cluster) bool
	}{
		{"a Plan is added", func() { w.feed(&upgradev1.Plan{}).Add(testPlan("p", "2", map[string]string{"a": "b"})) },
			func(cl *gate.Cluster) bool { return len(cl.Plans) == 1 && cl.PlanSelectors[0] != nil }},
		{"a Plan changes", func() { w.feed(&upgradev1.Plan{}).Modify(testPlan("p", "3", map[string]string{"a": "c"})) },
			func(cl *gate.Cluster) bool { return len(cl.Plans) == 1 && cl.Plans[0].ResourceVersion == "3" }},
		{"a Plan is deleted", func() { w.feed(&upgradev1.Plan{}).Delete(testPlan("p", "3", nil)) },
			func(cl *gate.Cluster) bool { return len(cl.Plans) == 0 }},
		{"a record is added", func() { w.feed(&corev1.ConfigMap{}).Add(record) },
			func(cl *gate.Cluster) bool { _, ok := cl.Records["a100-record"]; return ok }},
		{"a record is deleted", func() { w.feed(&corev1.ConfigMap{}).Delete(record) },
			func(cl *gate.Cluster) bool { return len(cl.Records) == 0 }},
		{"the GPU Operator appears", func() {
			w.feed(&appsv1.Deployment{}).Add(operatorDeployment(cfg, "nvcr.io/nvidia/gpu-operator:v25.3.0", "7"))
		},
			func(cl *gate.Cluster) bool { return cl.GPUOperatorImage == "nvcr.io/nvidia/gpu-operator:v25.3.0" }},
		{"the GPU Operator is upgraded", func() {
			w.feed(&appsv1.Deployment{}).Modify(operatorDeployment(cfg, "nvcr.io/nvidia/gpu-operator:v25.10.0", "8"))
		},
			func(cl *gate.Cluster) bool { return cl.GPUOperatorImage == "nvcr.io/nvidia/gpu-operator:v25.10.0" }},
		{"the DCGM exporter appears", func() {
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.DCGMExporter.Namespace, Name: cfg.DCGMExporter.Name, ResourceVersion: "9"}}
			ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: cfg.DCGMExporter.Container, Image: "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3"}}
			w.feed(&appsv1.DaemonSet{}).Add(ds)
		}, func(cl *gate.Cluster) bool { return cl.DCGMExporterImage == "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3" }},
		{"a validator Pod is added", func() {
			// It counts only under its DaemonSet's UID (gate.Config.OwnValidators),
			// which is read when the Pod's event rebuilds the proof facts.
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Proof.Validator.Namespace, Name: cfg.Proof.Validator.DaemonSet,
				UID: fleetgen.ValidatorOwner.UID, ResourceVersion: "10"}}
			dss := w.halts.infs[reflect.TypeOf(&appsv1.DaemonSet{})]
			dss.w.Add(ds)
			eventually(t, "the validator DaemonSet is cached", func() bool {
				_, ok, _ := dss.GetStore().GetByKey(ds.Namespace + "/" + ds.Name)
				return ok
			})
			w.feed(&corev1.Pod{}).Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Proof.Validator.Namespace, Name: "v", ResourceVersion: "10",
				Labels: selectorLabels(t, cfg.Proof.Validator.Selector), OwnerReferences: []metav1.OwnerReference{fleetgen.ValidatorOwner}}, Spec: corev1.PodSpec{NodeName: "gpu-1"}})
		}, func(cl *gate.Cluster) bool { return len(cl.Proof.Validators) == 1 }},
		{"a Node is added", func() {
			w.feed(&corev1.Node{}).Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", ResourceVersion: "11"}})
		},
			func(cl *gate.Cluster) bool { return len(cl.Nodes) == 1 && cl.Index != nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.event()
			eventually(t, "the next reviews see it", func() bool { return tc.seen(cluster()) })
			before := w.main.calls.Load()
			assert.True(t, tc.seen(cluster()))
			assert.Equal(t, before, w.main.calls.Load(), "built once for the event, then reused")
		})
	}
}

func selectorLabels(t *testing.T, sel string) map[string]string {
	set, err := labels.ConvertSelectorToLabelsMap(sel)
	require.NoError(t, err)
	return set
}

// TestClusterFailsClosedOnItsReads: a workload whose read fails makes the
// review fail (the same error as before the snapshots), and the failure is
// not kept: the next review reads again, with no event needed. A halt record
// that is missing, or whose read fails, fails closed; its creation reaches
// the next review.
func TestClusterFailsClosedOnItsReads(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newWatchedFacts(t, ctx)
	cfg := w.facts.Config

	readErr := errors.New("the cache is gone")
	w.main.getErr.Store(&readErr)
	_, err := w.facts.Cluster(ctx)
	require.EqualError(t, err, fmt.Sprintf("get %s/%s: the cache is gone", cfg.GPUOperator.Namespace, cfg.GPUOperator.Name))
	w.main.getErr.Store(nil)
	cl, err := w.facts.Cluster(ctx)
	require.NoError(t, err, "a failed read is read again")
	assert.Empty(t, cl.GPUOperatorImage, "no GPU Operator: no image (the engine reports FactsMissing)")

	require.Error(t, cl.Halts.Err)
	assert.EqualError(t, cl.Halts.Err, "the ConfigMap does not exist")
	w.halts.getErr.Store(&readErr)
	w.halts.infs[reflect.TypeOf(&corev1.ConfigMap{})].w.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Halts.ConfigMap, ResourceVersion: "3"}})
	eventually(t, "a halt record that cannot be read fails closed", func() bool {
		cl, err := w.facts.Cluster(ctx)
		return err == nil && cl.Halts.Err == readErr
	})
	w.halts.getErr.Store(nil)
	cl, err = w.facts.Cluster(ctx)
	require.NoError(t, err)
	assert.NoError(t, cl.Halts.Err, "the record is read again, no event needed")
}

// TestClusterBuildsOncePerEvent: reviews arriving together after an event
// build the changed part once between them (the others wait for that
// build, which takes a while here); the rest is not read again.
func TestClusterBuildsOncePerEvent(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newWatchedFacts(t, ctx)
	_, err := w.facts.Cluster(ctx)
	require.NoError(t, err)
	gen := w.facts.planSnap.gen.Load()
	w.feed(&upgradev1.Plan{}).Add(testPlan("p", "2", nil))
	eventually(t, "the event is counted", func() bool { return w.facts.planSnap.gen.Load() != gen })
	before := w.main.calls.Load()
	w.main.listTime.Store(int64(20 * time.Millisecond))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 16 {
		wg.Go(func() {
			<-start
			cl, err := w.facts.Cluster(ctx)
			assert.NoError(t, err)
			assert.Len(t, cl.Plans, 1)
		})
	}
	close(start)
	wg.Wait()
	assert.Equal(t, before+1, w.main.calls.Load(), "one Plan List for 16 reviews, nothing else read")
}

// TestReviewChangesStayInTheReview: a Job start puts its live Plan into its
// own view (withPlan); the next reviews, which share the snapshot, still
// see the cache's Plans and selectors, and reviews doing so at once do not
// race (go test -race).
func TestReviewChangesStayInTheReview(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newWatchedFacts(t, ctx)
	s := &Server{Config: w.facts.Config, Facts: w.facts}
	w.feed(&upgradev1.Plan{}).Add(testPlan("p", "2", map[string]string{"a": "b"}))
	w.feed(&upgradev1.Plan{}).Add(testPlan("q", "3", map[string]string{"a": "b"}))
	eventually(t, "the Plans are seen", func() bool {
		cl, err := w.facts.Cluster(ctx)
		return err == nil && len(cl.Plans) == 2
	})
	cl, err := w.facts.Cluster(ctx)
	require.NoError(t, err)
	plans, sels := append([]*upgradev1.Plan(nil), cl.Plans...), append([]*gate.PlanSelector(nil), cl.PlanSelectors...)
	require.NotContains(t, sels, (*gate.PlanSelector)(nil))

	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			cl, err := w.facts.Cluster(ctx)
			if !assert.NoError(t, err) {
				return
			}
			live := cl.Plans[i%2].DeepCopy()
			live.ResourceVersion = "99"
			s.withPlan(cl, live)                      // replaces the cache's copy
			s.withPlan(cl, testPlan("new", "1", nil)) // added: not in the cache yet
			assert.Len(t, cl.Plans, 3)
			assert.Same(t, live, cl.Plans[i%2])
			assert.Nil(t, cl.PlanSelectors[i%2], "the engine converts the live Plan's own selector")
		})
	}
	wg.Wait()
	next, err := w.facts.Cluster(ctx)
	require.NoError(t, err)
	// By name: an informer event in between may rebuild the snapshot, whose
	// store lists in no fixed order.
	byName := func(plans []*upgradev1.Plan, sels []*gate.PlanSelector) map[string]*gate.PlanSelector {
		m := map[string]*gate.PlanSelector{}
		for i, p := range plans {
			m[p.Name+"@"+p.ResourceVersion] = sels[i]
		}
		return m
	}
	assert.ElementsMatch(t, plans, next.Plans, "the next review sees the cache's Plans")
	assert.Equal(t, byName(plans, sels), byName(next.Plans, next.PlanSelectors), "and their selectors")
	assert.Equal(t, len(next.Plans), cap(next.Plans), "no spare capacity an append would share")
}

// TestClusterViewOncePerEvent: the fleet view is built from the assembled
// parts once per event of what it reads, and shared by the reviews until
// then (no event: the same view); after a SUC Job event the next review's
// view is a new one that holds the Job, and after a Plan event one of the
// new Plans.
func TestClusterViewOncePerEvent(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newWatchedFacts(t, ctx)
	cluster := func() *gate.Cluster {
		cl, err := w.facts.Cluster(ctx)
		require.NoError(t, err)
		require.NotNil(t, cl.View)
		return cl
	}
	first := cluster().View
	assert.Same(t, first, cluster().View, "no event: the same view")
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: w.facts.Config.SUCNamespaces[0], Name: "apply-drivers-on-gpu-1", ResourceVersion: "12",
		Labels: map[string]string{upgradev1.LabelNode: "gpu-1", upgradev1.LabelPlan: "drivers"}}}
	w.feed(&batchv1.Job{}).Add(job)
	eventually(t, "the next review's view holds the Job", func() bool { return len(cluster().View.SUCJobsFor("gpu-1")) == 1 })
	next := cluster().View
	assert.NotSame(t, first, next)
	assert.Same(t, next, cluster().View, "built once for the event, then shared")
	// A Plan event too: halt detection's scope (the view's) reads the Plans.
	w.feed(&upgradev1.Plan{}).Add(testPlan("p", "13", map[string]string{"a": "b"}))
	eventually(t, "the next review's view is of the new Plans", func() bool { return len(cluster().Plans) == 1 && cluster().View != next })
	last := cluster().View
	assert.Equal(t, next.SUCJobsFor("gpu-1"), last.SUCJobsFor("gpu-1"), "the Jobs' parts are shared")
	assert.Same(t, last, cluster().View, "built once for the event, then shared")
}
