package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
)

// TestNodeMaintenanceServed: the gate watches NodeMaintenances only where
// the API server serves them at the version it reads; served only at
// another version (an operator upgraded past what the gate knows) is not
// "no maintenance" but an error naming the versions.
func TestNodeMaintenanceServed(t *testing.T) {
	nms := func(gv string, more ...metav1.APIResource) *metav1.APIResourceList {
		return &metav1.APIResourceList{GroupVersion: gv, APIResources: append(more, metav1.APIResource{Name: "nodemaintenances", Namespaced: true, Kind: "NodeMaintenance"})}
	}
	configs := func(gv string) *metav1.APIResourceList {
		return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: "maintenanceoperatorconfigs"}}}
	}
	for _, tc := range []struct {
		name      string
		resources []*metav1.APIResourceList
		want      bool
		err       string
	}{
		{name: "served", want: true, resources: []*metav1.APIResourceList{nms("maintenance.nvidia.com/v1alpha1", metav1.APIResource{Name: "maintenanceoperatorconfigs"})}},
		{name: "served at the gate's version and another", want: true, resources: []*metav1.APIResourceList{nms("maintenance.nvidia.com/v1alpha1"), nms("maintenance.nvidia.com/v1beta1")}},
		{name: "the group without the resource", resources: []*metav1.APIResourceList{configs("maintenance.nvidia.com/v1alpha1")}},
		{name: "another version of the group without the resource", resources: []*metav1.APIResourceList{configs("maintenance.nvidia.com/v1beta1")}},
		{name: "no maintenance operator", resources: []*metav1.APIResourceList{nms("other.example.com/v1alpha1")}},
		{name: "served at another version only", resources: []*metav1.APIResourceList{nms("maintenance.nvidia.com/v1beta1"), nms("other.example.com/v1alpha1")},
			err: "the API server serves them at maintenance.nvidia.com/v1beta1, not at maintenance.nvidia.com/v1alpha1, the version the gate reads"},
		{name: "the gate's version without the resource, another with it", resources: []*metav1.APIResourceList{configs("maintenance.nvidia.com/v1alpha1"), nms("maintenance.nvidia.com/v1"), nms("maintenance.nvidia.com/v1beta1")},
			err: "serves them at maintenance.nvidia.com/v1, maintenance.nvidia.com/v1beta1, not at maintenance.nvidia.com/v1alpha1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := loader.NodeMaintenancesServed(&fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tc.resources}})
			assert.Equal(t, tc.want, got)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

// TestStripNodeMaintenance: the cached object keeps its node, requestors
// and deletion mark, and reads as the loader reads a live one.
func TestStripNodeMaintenance(t *testing.T) {
	in := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "maintenance.nvidia.com/v1alpha1", "kind": "NodeMaintenance",
		"metadata": map[string]any{"namespace": "nvidia-network-operator", "name": "ofed-gpu-01", "resourceVersion": "7",
			"deletionTimestamp": "2026-12-02T00:00:00Z", "labels": map[string]any{"x": "y"}, "finalizers": []any{"maintenance.nvidia.com/finalizer"}},
		"spec": map[string]any{"requestorID": "network.operator", "additionalRequestors": []any{"sriov.operator"}, "nodeName": "gpu-01",
			"cordon": true, "drainSpec": map[string]any{"force": true, "podSelector": "app=x"}},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready"}}},
	}}
	out, err := StripNodeMaintenance(in)
	require.NoError(t, err)
	got := out.(*unstructured.Unstructured)
	assert.Equal(t, map[string]any{"requestorID": "network.operator", "additionalRequestors": []any{"sriov.operator"}, "nodeName": "gpu-01"}, got.Object["spec"])
	assert.NotContains(t, got.Object, "status")
	assert.Nil(t, got.GetLabels())
	assert.Equal(t, "7", got.GetResourceVersion())
	read, err := loader.NodeMaintenancesOf([]unstructured.Unstructured{*got})
	require.NoError(t, err)
	assert.Equal(t, []gate.NodeMaintenance{{Namespace: "nvidia-network-operator", Name: "ofed-gpu-01", Node: "gpu-01", Requestors: []string{"network.operator", "sriov.operator"}, Deleting: true}}, read)
}

// switchedDiscovery answers whether NodeMaintenances are served as the test
// sets it: served, not served, served at v1beta1 only, or discovery failing.
type switchedDiscovery struct {
	discovery.DiscoveryInterface
	state atomic.Value // "served", "absent", "upgraded" or "failing"
	asks  atomic.Int64
}

func (d *switchedDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	d.asks.Add(1)
	switch st := d.state.Load(); {
	case st == "served" && gv == "maintenance.nvidia.com/v1alpha1", st == "upgraded" && gv == "maintenance.nvidia.com/v1beta1":
		return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: loader.NodeMaintenanceResource, Namespaced: true}}}, nil
	case st == "failing":
		return nil, errors.New("connection refused")
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "maintenance.nvidia.com"}, gv)
}

func (d *switchedDiscovery) ServerGroups() (*metav1.APIGroupList, error) {
	if d.state.Load() != "upgraded" {
		return &metav1.APIGroupList{}, nil
	}
	return &metav1.APIGroupList{Groups: []metav1.APIGroup{{Name: "maintenance.nvidia.com",
		Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "maintenance.nvidia.com/v1beta1", Version: "v1beta1"}}}}}, nil
}

// listedCache plays the NodeMaintenance cache: synced at once, listing
// what the test holds (set), each change reported to its informer's
// handlers as an informer reports it; lists counts its lists.
type listedCache struct {
	cache.Cache
	items atomic.Pointer[[]unstructured.Unstructured]
	lists atomic.Int64
	inf   handlerInformer
}

// set is a change of the cached objects, then its event.
func (c *listedCache) set(items []unstructured.Unstructured) {
	c.items.Store(&items)
	c.inf.changed()
}

// handlerInformer keeps the handlers added to it; changed calls each.
type handlerInformer struct {
	cache.Informer
	mu       sync.Mutex
	handlers []toolscache.ResourceEventHandler
}

func (i *handlerInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.handlers = append(i.handlers, h)
	return nil, nil
}

func (i *handlerInformer) changed() {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, h := range i.handlers {
		h.OnUpdate(nil, nil)
	}
}

func (c *listedCache) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return &c.inf, nil
}
func (c *listedCache) Start(ctx context.Context) error       { <-ctx.Done(); return nil }
func (c *listedCache) WaitForCacheSync(context.Context) bool { return true }
func (c *listedCache) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	c.lists.Add(1)
	if items := c.items.Load(); items != nil {
		list.(*unstructured.UnstructuredList).Items = *items
	}
	return nil
}

// TestMaintenanceWatcher: the watcher never stops the manager (the gate):
// discovery failing, or a cache that cannot be made, leaves NodeMaintenances
// unreadable, saying why, and is tried again; an API not served is no
// maintenance; a served one is read once its cache syncs, and a malformed
// object, a failed watch or the operator uninstalled are each the
// maintenance's own state, while the gate-wide readiness stays as it was.
func TestMaintenanceWatcher(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	disc := &switchedDiscovery{}
	disc.state.Store("failing")
	facts := &Facts{}
	facts.synced.Store(true)
	facts.setMaintenanceErr(errors.New("not asked yet"))
	lc := &listedCache{}
	var makeErr atomic.Pointer[error]
	w := &maintenanceWatcher{disc: disc, facts: facts, every: 10 * time.Millisecond, newCache: func() (cache.Cache, error) {
		if e := makeErr.Load(); e != nil {
			return nil, *e
		}
		return lc, nil
	}}
	done := make(chan error, 1)
	go func() { done <- w.Start(ctx) }()
	read := func() error { _, err := facts.nodeMaintenances(ctx); return err }
	wait := func(what string, cond func() bool) {
		t.Helper()
		require.Eventually(t, cond, 5*time.Second, 5*time.Millisecond, what)
	}

	wait("discovery failing: unreadable, saying so", func() bool {
		err := read()
		return err != nil && strings.Contains(err.Error(), "whether the API server serves them is unknown: discover maintenance.nvidia.com/v1alpha1: connection refused")
	})
	disc.state.Store("absent")
	wait("not served: no maintenance, readable", func() bool { return read() == nil })
	cantMake := errors.New("no REST mapping")
	makeErr.Store(&cantMake)
	disc.state.Store("served")
	wait("a cache that cannot be made: unreadable, saying why", func() bool {
		err := read()
		return err != nil && strings.Contains(err.Error(), "no REST mapping")
	})
	asks := disc.asks.Load()
	wait("tried again", func() bool { return disc.asks.Load() > asks+2 })
	select {
	case err := <-done:
		t.Fatalf("the watcher stopped (and with it the manager): %v", err)
	default:
	}
	makeErr.Store(nil)
	lc.set([]unstructured.Unstructured{{Object: map[string]any{"apiVersion": "maintenance.nvidia.com/v1alpha1", "kind": "NodeMaintenance",
		"metadata": map[string]any{"namespace": "nvidia-network-operator", "name": "ofed-gpu-01"}, "spec": map[string]any{"requestorID": "network.operator", "nodeName": "gpu-01"}}}})
	wait("served and synced: read", func() bool {
		nms, err := facts.nodeMaintenances(ctx)
		return err == nil && len(nms) == 1 && nms[0].Node == "gpu-01"
	})

	facts.maintenanceWatches.fail("the NodeMaintenance watch", errors.New("too old resource version"))
	err := read()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the NodeMaintenance watch failed")
	assert.NoError(t, facts.ready(), "the gate stays ready: only the budget's moves read them")
	facts.maintenanceWatches = watchHealth{}

	lc.set([]unstructured.Unstructured{{Object: map[string]any{"apiVersion": "maintenance.nvidia.com/v1alpha1", "kind": "NodeMaintenance",
		"metadata": map[string]any{"namespace": "ns", "name": "odd"}, "spec": map[string]any{"requestorID": "network.operator"}}}})
	err = read()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "NodeMaintenance ns/odd: spec.nodeName")

	// The operator upgraded to a version the gate does not read: not "no
	// maintenance", whether the watcher was watching or not.
	upgraded := func(what string) {
		t.Helper()
		wait(what, func() bool {
			err := read()
			return err != nil && strings.Contains(err.Error(), "the API server serves them at maintenance.nvidia.com/v1beta1, not at maintenance.nvidia.com/v1alpha1") &&
				facts.maintenance.Load() == nil
		})
	}
	disc.state.Store("served")
	lc.set(nil) // as the informer reports the odd one deleted
	wait("served again", func() bool { return read() == nil && facts.maintenance.Load() != nil })
	disc.state.Store("upgraded")
	upgraded("upgraded while watched: unreadable, naming the versions")
	disc.state.Store("absent")
	wait("uninstalled: no maintenance again", func() bool { return read() == nil && facts.maintenance.Load() == nil })
	disc.state.Store("upgraded")
	upgraded("upgraded while not watched: unreadable, naming the versions")
	disc.state.Store("absent")
	wait("uninstalled: no maintenance again", func() bool { return read() == nil && facts.maintenance.Load() == nil })
	cancel()
	require.NoError(t, <-done)
}

// nodeMaintenance is a NodeMaintenance of requestor for node, as the
// maintenance operator's clients write it ("" node: malformed).
func nodeMaintenance(name, node, requestor string) unstructured.Unstructured {
	spec := map[string]any{"requestorID": requestor}
	if node != "" {
		spec["nodeName"] = node
	}
	return unstructured.Unstructured{Object: map[string]any{"apiVersion": "maintenance.nvidia.com/v1alpha1", "kind": "NodeMaintenance",
		"metadata": map[string]any{"namespace": "nvidia-network-operator", "name": name}, "spec": spec}}
}

// TestNodeMaintenancesConvertedOncePerEvent: the reviews read the
// NodeMaintenances listed and converted once per event of their informer
// (a malformed one's error too), and afresh from a cache that replaced the
// last one, whether or not it has reported an event yet.
func TestNodeMaintenancesConvertedOncePerEvent(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	disc := &switchedDiscovery{}
	disc.state.Store("served")
	facts := &Facts{}
	facts.synced.Store(true)
	first, second := &listedCache{}, &listedCache{}
	first.set([]unstructured.Unstructured{nodeMaintenance("ofed-gpu-01", "gpu-01", "network.operator")})
	var current atomic.Pointer[listedCache]
	current.Store(first)
	w := &maintenanceWatcher{disc: disc, facts: facts, every: 10 * time.Millisecond, newCache: func() (cache.Cache, error) { return current.Load(), nil }}
	done := make(chan error, 1)
	go func() { done <- w.Start(ctx) }()
	nodes := func(t *testing.T) []string {
		t.Helper()
		nms, err := facts.nodeMaintenances(ctx)
		require.NoError(t, err)
		var out []string
		for _, nm := range nms {
			out = append(out, nm.Node)
		}
		return out
	}
	// Whether the reviews read a cache (held: one is synced) or none, with
	// no error; waiting lists nothing.
	settled := func(held bool) func() bool {
		return func() bool { return (facts.maintenance.Load() != nil) == held && facts.maintenanceErr.Load() == nil }
	}
	require.Eventually(t, settled(true), 5*time.Second, 5*time.Millisecond, "synced")

	for _, step := range []struct {
		name  string
		event []unstructured.Unstructured // set (an event) before the reads; nil: none
		want  []string
		// wantErr: every read fails, naming the object.
		wantErr string
		// wantLists: the lists its three reads made.
		wantLists int64
	}{
		{name: "synced: listed at the first read", want: []string{"gpu-01"}, wantLists: 1},
		{name: "no event: not listed again", want: []string{"gpu-01"}, wantLists: 0},
		{name: "an event: listed again", event: []unstructured.Unstructured{nodeMaintenance("ofed-gpu-01", "gpu-01", "network.operator"), nodeMaintenance("ofed-gpu-02", "gpu-02", "network.operator")},
			want: []string{"gpu-01", "gpu-02"}, wantLists: 1},
		{name: "a malformed object: its error kept until the next event", event: []unstructured.Unstructured{nodeMaintenance("odd", "", "network.operator")},
			wantErr: "NodeMaintenance nvidia-network-operator/odd: spec.nodeName", wantLists: 1},
		{name: "fixed: read again", event: []unstructured.Unstructured{nodeMaintenance("ofed-gpu-03", "gpu-03", "network.operator")}, want: []string{"gpu-03"}, wantLists: 1},
	} {
		t.Run(step.name, func(t *testing.T) {
			lists := first.lists.Load()
			if step.event != nil {
				first.set(step.event)
			}
			for range 3 {
				if step.wantErr != "" {
					_, err := facts.nodeMaintenances(ctx)
					require.Error(t, err)
					assert.Contains(t, err.Error(), step.wantErr)
					continue
				}
				assert.Equal(t, step.want, nodes(t))
			}
			assert.Equal(t, lists+step.wantLists, first.lists.Load(), "the lists of its three reads")
		})
	}

	// The operator uninstalled, then installed again: the new cache is
	// read at once, though it has reported no event (it holds the objects
	// the test put there without one).
	second.items.Store(&[]unstructured.Unstructured{nodeMaintenance("ofed-gpu-04", "gpu-04", "network.operator")})
	disc.state.Store("absent")
	require.Eventually(t, settled(false), 5*time.Second, 5*time.Millisecond, "uninstalled")
	assert.Empty(t, nodes(t), "no maintenance without their cache")
	current.Store(second)
	disc.state.Store("served")
	require.Eventually(t, settled(true), 5*time.Second, 5*time.Millisecond, "served again")
	assert.Equal(t, []string{"gpu-04"}, nodes(t), "the new cache's objects, not the last conversion")
	cancel()
	require.NoError(t, <-done)
}

// TestMaintenanceUnreadableHoldsOnlyBudgetMoves: through the handlers, over
// the generated fleet's reviews, NodeMaintenances that cannot be read
// refuse only what the rules would let take a GPU node out (FactsMissing,
// naming why), and SUC's Job start on a GPU node; every other review is
// decided as before.
func TestMaintenanceUnreadableHoldsOnlyBudgetMoves(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the 5,000-node fleet")
	}
	e := benchSetup()
	gpu := e.fleet.ByRole("v100", "zone-a", fleetgen.RoleCanaryPlan)[0].Name
	decide := func(r fleetgen.Review) admission.Response {
		var review admissionv1.AdmissionReview
		require.NoError(t, json.Unmarshal(r.Body, &review))
		return e.server.handlerAt(r.Path).Handle(context.Background(), admission.Request{AdmissionRequest: *review.Request})
	}
	before := map[string]bool{}
	reviews := append(slices.Clone(e.reviews), jobStart("gpu-v100-canary-zone-a", gpu, latestHash(e.fleet, "gpu-v100-canary-zone-a")))
	for _, r := range reviews {
		before[r.Name] = decide(r).Allowed
	}
	e.facts.setMaintenanceErr(errors.New("their cache failed: forbidden"))
	t.Cleanup(func() { e.facts.setMaintenanceErr(nil) })
	held, kept := map[string]int{}, map[string]int{}
	for _, r := range reviews {
		resp := decide(r)
		switch {
		case resp.Allowed == before[r.Name]:
			kept[r.Kind+"/"+r.Scenario]++
		case before[r.Name] && !resp.Allowed:
			assert.Equal(t, string(gate.CodeFactsMissing), resp.AuditAnnotations[gate.AuditReasons], r.Name)
			assert.Contains(t, resp.Result.Message, "NodeMaintenances (maintenance.nvidia.com) cannot be read (their cache failed: forbidden)", r.Name)
			held[r.Kind+"/"+r.Scenario]++
		default:
			t.Errorf("%s: denied before, allowed with the maintenance unreadable", r.Name)
		}
	}
	t.Logf("held %v, decided as before %v", held, kept)
	assert.Equal(t, 1, held["job/start"], "SUC's Job start on a GPU node takes it out")
	for _, sc := range []string{"node/relabel", "node/uncordon", "node/mode-cordoned"} {
		assert.Zero(t, held[sc], "%s takes no GPU node out", sc)
		assert.NotZero(t, kept[sc], "%s: reviewed", sc)
	}
}
