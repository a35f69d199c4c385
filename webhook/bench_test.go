package webhook

// Handler benchmarks: one recorded AdmissionReview (internal/fleetgen) through
// the controller-runtime admission HTTP handler (decode, kind check, facts
// from an informer store holding the 5,000-node fleet, engine, response,
// metrics, one JSON log line), without TLS or the network: what each review
// costs the webhook's CPU. The load generator (test/loadgen) measures the
// same over TLS. Run: go test -run '^$' -bench . -benchmem ./webhook/

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	sigsjson "sigs.k8s.io/json"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/benchcpu"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
)

var benchNow = time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)

// fleetCache serves a generated fleet as the manager's cache would: Nodes
// from an informer store (transformed by StripNode), the rest by List/Get.
type fleetCache struct {
	cache.Cache
	nodes toolscache.SharedIndexInformer
	// pods holds what the proof's Pod informers would: the fleet's proof Pods.
	pods  toolscache.SharedIndexInformer
	fleet *fleetgen.Fleet
	plans []upgradev1.Plan
}

func newFleetCache(f *fleetgen.Fleet) *fleetCache { return newFleetCacheWith(f, StripNode, StripPod) }

// newFleetCacheWith holds the fleet's Nodes and proof Pods as the informers
// would with these transforms (each given its own copy).
func newFleetCacheWith(f *fleetgen.Fleet, stripNode, stripPod toolscache.TransformFunc) *fleetCache {
	c := &fleetCache{fleet: f, nodes: toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.Node{}, 0, toolscache.Indexers{}),
		pods: toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.Pod{}, 0, toolscache.Indexers{})}
	for _, p := range f.ProofPods {
		s, _ := stripPod(p.DeepCopy())
		_ = c.pods.GetStore().Add(s)
	}
	for _, n := range f.Nodes {
		s, _ := stripNode(n.DeepCopy())
		s.(*corev1.Node).ResourceVersion = fleetRV
		_ = c.nodes.GetStore().Add(s)
	}
	for _, p := range f.Cluster(nil).Plans {
		c.plans = append(c.plans, *p)
	}
	return c
}

func (c *fleetCache) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	if _, ok := obj.(*corev1.Pod); ok {
		return c.pods, nil
	}
	return c.nodes, nil
}

func (c *fleetCache) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	switch l := list.(type) {
	case *upgradev1.PlanList:
		l.Items = append(l.Items[:0], c.plans...)
	case *corev1.ConfigMapList:
		l.Items = l.Items[:0]
		for _, cm := range c.fleet.RecordConfigMaps {
			cm := *cm
			cm.UID, cm.ResourceVersion = types.UID("uid-"+cm.Name), "1"
			l.Items = append(l.Items, cm)
		}
	case *batchv1.JobList: // no SUC Job runs in the fleet
		l.Items = l.Items[:0]
	default:
		return fmt.Errorf("fleetCache: no list of %T", list)
	}
	return nil
}

func (c *fleetCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		*o = *c.fleet.GPUOperator
	case *appsv1.DaemonSet:
		*o = *c.fleet.DCGMExporter
		if key.Name == c.fleet.ValidatorDaemonSet.Name {
			*o = *c.fleet.ValidatorDaemonSet
		}
	case *corev1.Node: // the store's copy, as a Get without deep copy
		n, ok, _ := c.nodes.GetStore().GetByKey(key.Name)
		if !ok {
			return apierrors.NewNotFound(corev1.Resource("nodes"), key.Name)
		}
		*o = *n.(*corev1.Node)
	case *upgradev1.Plan:
		i := slices.IndexFunc(c.plans, func(p upgradev1.Plan) bool { return p.Namespace == key.Namespace && p.Name == key.Name })
		if i < 0 {
			return apierrors.NewNotFound(upgradev1.Resource("plans"), key.Name)
		}
		*o = c.plans[i]
	default:
		return fmt.Errorf("fleetCache: no get of %T %s", obj, key)
	}
	return nil
}

// fleetPods answers the live Pod listing by node name.
type fleetPods struct {
	client.Reader
	fleet *fleetgen.Fleet
}

func (p fleetPods) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := &client.ListOptions{}
	lo.ApplyOptions(opts)
	if _, ok := list.(*unstructured.UnstructuredList); ok {
		// The fleet is not RKE2's: it serves no ETCDSnapshotFile API.
		return &meta.NoKindMatchError{GroupKind: loader.ETCDSnapshotFileGVK.GroupKind(), SearchedVersions: []string{"v1"}}
	}
	if _, ok := list.(*policyv1.PodDisruptionBudgetList); ok {
		return nil // the fleet's workloads have no budgets
	}
	node, _ := lo.FieldSelector.RequiresExactMatch("spec.nodeName")
	pl := list.(*corev1.PodList)
	for _, pod := range p.fleet.Pods {
		if pod.Spec.NodeName == node {
			pl.Items = append(pl.Items, *pod)
		}
	}
	return nil
}

// fleetRV is the resourceVersion of the cache's and the live reads' Nodes:
// a Job start's live Node is, as a rule, the version the cache holds.
const fleetRV = "1"

// Get answers the per-node guard's live reads of the Node and the Plan with
// a deep copy of the fleet's (a real client decodes a new object).
func (p fleetPods) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	switch o := obj.(type) {
	case *corev1.Node:
		n := p.fleet.Node(key.Name)
		if n == nil {
			return apierrors.NewNotFound(corev1.Resource("nodes"), key.Name)
		}
		n.DeepCopyInto(o)
		o.ResourceVersion = fleetRV
	case *upgradev1.Plan:
		i := slices.IndexFunc(p.fleet.Plans, func(q *upgradev1.Plan) bool { return q.Namespace == key.Namespace && q.Name == key.Name })
		if i < 0 {
			return apierrors.NewNotFound(upgradev1.Resource("plans"), key.Name)
		}
		p.fleet.Plans[i].DeepCopyInto(o)
	case *appsv1.Deployment:
		// The driver path's live read of the GPU Operator: a steady fleet's,
		// rolled out (the Deployment controller's status).
		d := p.fleet.GPUOperator
		if d == nil || d.Namespace != key.Namespace || d.Name != key.Name {
			return apierrors.NewNotFound(appsv1.Resource("deployments"), key.Name)
		}
		d.DeepCopyInto(o)
		o.Status = appsv1.DeploymentStatus{ObservedGeneration: o.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	default:
		return fmt.Errorf("fleetPods: no get of %T %s", obj, key)
	}
	return nil
}

// jobStart is SUC's Job for node of plan created running, as SUC's
// ServiceAccount writes it: the write the per-node guard reviews.
func jobStart(plan, node, hash string) fleetgen.Review {
	one := int32(1)
	job := &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Namespace: fleetgen.NamespaceSUC, Name: "apply-" + plan + "-on-" + node + "-with-abc",
			Labels: map[string]string{upgradev1.LabelPlan: plan, upgradev1.LabelNode: node}},
		Spec: batchv1.JobSpec{Parallelism: &one}}
	if hash != "" {
		// SUC labels its Jobs with the Plan's status.latestHash it built
		// them from.
		job.Labels[upgradev1.LabelPlanName(plan)] = hash
	}
	raw, err := json.Marshal(job)
	if err != nil {
		panic(err)
	}
	req := admissionv1.AdmissionRequest{UID: fleetgen.UIDPlaceholder, Operation: admissionv1.Create, Namespace: job.Namespace, Name: job.Name,
		Kind: metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, Resource: metav1.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"},
		UserInfo: authenticationv1.UserInfo{Username: "system:serviceaccount:" + fleetgen.NamespaceSUC + ":system-upgrade",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + fleetgen.NamespaceSUC, "system:authenticated"}},
		Object: runtime.RawExtension{Raw: raw}, DryRun: new(bool)}
	body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: &req})
	if err != nil {
		panic(err)
	}
	return fleetgen.Review{Name: "job/start/" + node, Kind: "job", Scenario: "start", Path: PathJobs, Body: body, Allowed: true}
}

// latestHash is the fleet Plan's status.latestHash ("" for none).
func latestHash(f *fleetgen.Fleet, plan string) string {
	for _, p := range f.Plans {
		if p.Name == plan {
			return p.Status.LatestHash
		}
	}
	return ""
}

type benchEnv struct {
	fleet    *fleetgen.Fleet
	facts    *Facts
	server   *Server
	reviews  []fleetgen.Review
	handlers map[string]http.Handler
	// slow serves the Node path through controller-runtime's handler, the
	// way it was served before the one pass (review.go), for comparison.
	slow map[string]http.Handler
}

var benchSetup = sync.OnceValue(func() *benchEnv {
	f := fleetgen.Generate(fleetgen.Options{Seed: 1, Now: benchNow.Truncate(24 * time.Hour), Kubelet: true})
	return newBenchEnv(f, newFleetCache(f))
})

// newBenchEnv serves the fleet's reviews from fc, watched as NewManager
// watches the caches.
func newBenchEnv(f *fleetgen.Fleet, fc *fleetCache) *benchEnv {
	facts := &Facts{Config: f.Config, Cache: fc, Live: fleetPods{fleet: f}}
	// Watched as NewManager watches them: the fleet's other informers
	// never report an event, so each part is built once.
	idle := func(obj runtime.Object) cache.Informer {
		return toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, obj, 0, toolscache.Indexers{})
	}
	if err := errors.Join(facts.WatchNodes(fc.nodes), facts.WatchProof(fc.pods, idle(&batchv1.Job{})), facts.WatchPlans(idle(&upgradev1.Plan{})),
		facts.WatchRecords(idle(&corev1.ConfigMap{})), facts.WatchImages(idle(&appsv1.Deployment{}), idle(&appsv1.DaemonSet{}))); err != nil {
		panic(err)
	}
	facts.SetServerVersion(fleetgen.ServerVersion)
	facts.synced.Store(true)
	// The log line is part of each review's cost: JSON to a discarded writer.
	log := ctrlzap.New(ctrlzap.WriteTo(io.Discard))
	s := &Server{Config: f.Config, Facts: facts, Log: log.WithName("decision"), Now: func() time.Time { return benchNow }}
	ctrl.SetLogger(log)
	return &benchEnv{fleet: f, facts: facts, server: s, reviews: f.Reviews(benchNow), handlers: map[string]http.Handler{
		PathPlans:   s.handlerAt(PathPlans).serve(),
		PathNodes:   s.handlerAt(PathNodes).serve(),
		PathRecords: s.handlerAt(PathRecords).serve(),
		PathJobs:    s.handlerAt(PathJobs).serve(),
	}, slow: map[string]http.Handler{PathNodes: &webhook.Admission{Handler: s.handlerAt(PathNodes)}}}
}

func (e *benchEnv) serve(r fleetgen.Review) (int, bool, error) { return e.serveWith(e.handlers, r) }

func (e *benchEnv) serveWith(hs map[string]http.Handler, r fleetgen.Review) (int, bool, error) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, r.Path, bytes.NewReader(r.Body))
	req.Header.Set("Content-Type", "application/json")
	hs[r.Path].ServeHTTP(rec, req)
	var out struct {
		Response struct {
			Allowed bool `json:"allowed"`
		} `json:"response"`
	}
	err := json.Unmarshal(rec.Body.Bytes(), &out)
	return rec.Code, out.Response.Allowed, err
}

// TestFleetReviewsThroughHandlers: every recorded review gets its expected
// decision from the handlers (the load generator relies on the same
// expectations against a real server).
func TestFleetReviewsThroughHandlers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the 5,000-node fleet")
	}
	e := benchSetup()
	for _, r := range e.reviews {
		code, allowed, err := e.serve(r)
		if err != nil || code != http.StatusOK || allowed != r.Allowed {
			t.Errorf("%s: HTTP %d allowed=%v err=%v, want allowed=%v %v", r.Name, code, allowed, err, r.Allowed, r.Codes)
		}
	}
}

// TestFleetReviewsThroughLimiter: the same, behind serve's review limiter,
// from 8 goroutines at once, twice over: the limiter's pooled body buffers,
// which the Node endpoint decodes in place, are reused across reviews, so a
// byte kept past its review would change another's answer.
func TestFleetReviewsThroughLimiter(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the 5,000-node fleet")
	}
	e := benchSetup()
	hs := limited(e.handlers)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2 * len(e.reviews) {
				r := e.reviews[(i+w*len(e.reviews)/8)%len(e.reviews)]
				code, allowed, err := e.serveWith(hs, r)
				if err != nil || code != http.StatusOK || allowed != r.Allowed {
					t.Errorf("%s: HTTP %d allowed=%v err=%v, want allowed=%v %v", r.Name, code, allowed, err, r.Allowed, r.Codes)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkHandler is one review through the handler, per scenario.
func BenchmarkHandler(b *testing.B) {
	e := benchSetup()
	for _, sc := range []struct{ kind, scenario string }{
		{fleetgen.KindNode, "relabel"}, {fleetgen.KindNode, "mode-cordoned"}, {fleetgen.KindNode, "join-wave"},
		{fleetgen.KindPlan, "create"}, {fleetgen.KindPlan, "update"}, {fleetgen.KindRecord, "create"},
		{"job", "start"}, {"job", "start-cpu"},
	} {
		rs := fleetgen.Select(e.reviews, []string{sc.kind}, sc.scenario)
		switch sc.kind {
		case "job": // SUC's Job start: the V100 canary node, a CPU node of an RKE2 agent Plan
			rs = []fleetgen.Review{jobStart("gpu-v100-canary-zone-a", e.fleet.ByRole("v100", "zone-a", fleetgen.RoleCanaryPlan)[0].Name, latestHash(e.fleet, "gpu-v100-canary-zone-a"))}
			if sc.scenario == "start-cpu" {
				rs = []fleetgen.Review{jobStart("rke2-agent-cpu-pool-1", "cpu-0001", latestHash(e.fleet, "rke2-agent-cpu-pool-1"))}
			}
		}
		run := func(name string, hs map[string]http.Handler) {
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				cpu := benchcpu.Start(b)
				for b.Loop() {
					r := rs[i%len(rs)]
					i++
					if code, allowed, err := e.serveWith(hs, r); err != nil || code != http.StatusOK || allowed != r.Allowed {
						b.Fatalf("%s: HTTP %d allowed=%v err=%v", r.Name, code, allowed, err)
					}
				}
				cpu.Stop()
			})
		}
		run(sc.kind+"-"+sc.scenario, e.handlers)
		if sc.scenario == "relabel" || sc.kind == fleetgen.KindPlan && sc.scenario == "create" {
			// Behind the review limiter, as serve runs them: the body read
			// and charged to the budget first.
			run(sc.kind+"-"+sc.scenario+"-limited", limited(e.handlers))
		}
		if sc.kind == fleetgen.KindNode {
			// The same reviews through controller-runtime's handler, in the
			// same run: the before of the one pass.
			run(sc.kind+"-"+sc.scenario+"-controller-runtime", e.slow)
		}
	}
}

// limited is hs each behind serve's review limiter (its defaults).
func limited(hs map[string]http.Handler) map[string]http.Handler {
	l := newReviewLimiter(MaxReviewBytes, DefaultReviewBudget, DefaultReviewWait)
	out := map[string]http.Handler{}
	for path, h := range hs {
		out[path] = l.wrap(h)
	}
	return out
}

// TestNodeStatusShowsProof: the node status metric carries each at-target
// node's proof; the fleet's canaries are proven.
func TestNodeStatusShowsProof(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the 5,000-node fleet")
	}
	e := benchSetup()
	srv := &Server{Config: e.fleet.Config, Facts: e.facts, Now: func() time.Time { return benchNow }}
	(&inventoryExporter{server: srv, every: time.Minute}).refresh(context.Background())
	canary := ""
	for name, role := range e.fleet.Roles {
		if role == fleetgen.RoleCanary {
			canary = name
			break
		}
	}
	require.NotEmpty(t, canary)
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	proofs := map[string]string{}
	for _, f := range families {
		if f.GetName() != "gpu_upgrade_gate_node_status" {
			continue
		}
		for _, m := range f.Metric {
			l := map[string]string{}
			for _, p := range m.Label {
				l[p.GetName()] = p.GetValue()
			}
			proofs[l["node"]] = l["proof"]
		}
	}
	assert.Equal(t, "proven", proofs[canary], "canary %s", canary)
	for name, role := range e.fleet.Roles {
		if role == fleetgen.RoleWave1 {
			assert.Empty(t, proofs[name], "%s is not at its target", name)
		}
	}
	// The proof gauges: the proven state 1, the other 0, no wait; nodes
	// not at their target have none.
	got := gauges(t)
	assert.Equal(t, 1.0, got[`gpu_upgrade_gate_node_proof{node="`+canary+`",state="proven"}`])
	assert.Equal(t, 0.0, got[`gpu_upgrade_gate_node_proof{node="`+canary+`",state="unproven"}`])
	assert.Contains(t, got, `gpu_upgrade_gate_node_unproven_seconds{node="`+canary+`"}`)
	assert.Equal(t, 0.0, got[`gpu_upgrade_gate_node_unproven_seconds{node="`+canary+`"}`])
	for name, role := range e.fleet.Roles {
		if role == fleetgen.RoleWave1 {
			assert.NotContains(t, got, `gpu_upgrade_gate_node_proof{node="`+name+`",state="proven"}`)
		}
	}
	// Each record's expiry: its canary's completion plus maxCanaryAge.
	require.NotEmpty(t, e.fleet.Records)
	for cm, rec := range e.fleet.Records {
		done, err := rec.CompletedAt()
		require.NoError(t, err)
		assert.Equal(t, float64(done.Add(e.fleet.Config.MaxCanaryAge.Duration).Unix()),
			got[`gpu_upgrade_gate_record_expiry_timestamp_seconds{configmap="`+cm+`",record="`+rec.ID+`"}`], cm)
	}
	assert.Equal(t, e.fleet.Config.Proof.Soak.Seconds(), got["gpu_upgrade_gate_proof_soak_seconds"])
}

// gauges reads every gauge of the registry by its series text,
// name{label="value",...} with the labels sorted.
func gauges(t *testing.T) map[string]float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.Metric {
			if m.Gauge == nil {
				continue
			}
			var ls []string
			for _, p := range m.Label {
				ls = append(ls, p.GetName()+`="`+p.GetValue()+`"`)
			}
			key := f.GetName()
			if len(ls) > 0 {
				key += "{" + strings.Join(ls, ",") + "}"
			}
			out[key] = m.Gauge.GetValue()
		}
	}
	return out
}

// BenchmarkNodeReviewDecode is the decode alone of one recorded Node
// review, three ways (issue 14 item 3): the one-pass scan (nodescan.go);
// encoding/json into the same fields (the one pass before it: the
// fields as typed structs and maps, the rest skipped by the decoder); and
// only walking a json.Decoder's tokens, decoding nothing, the floor of a
// token-based decoder.
func BenchmarkNodeReviewDecode(b *testing.B) {
	e := benchSetup()
	rs := fleetgen.Select(e.reviews, []string{fleetgen.KindNode}, "relabel")
	body := rs[0].Body
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		cpu := benchcpu.Start(b)
		defer cpu.Stop()
		for b.Loop() {
			req, ok := decodeNodeReview(body)
			if !ok {
				b.Fatal("does not decode")
			}
			req.maps.release() // as the endpoint does once answered
		}
	})
	b.Run("encoding-json-fields", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		cpu := benchcpu.Start(b)
		defer cpu.Stop()
		for b.Loop() {
			var rv struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Request    *struct {
					admissionv1.AdmissionRequest
					Object    *nodeFields `json:"object"`
					OldObject *nodeFields `json:"oldObject"`
				} `json:"request"`
			}
			if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, &rv); err != nil {
				b.Fatal(err)
			}
			if _, err := rv.Request.Object.node(); err != nil {
				b.Fatal(err)
			}
			if _, err := rv.Request.OldObject.node(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json-decoder-tokens", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		cpu := benchcpu.Start(b)
		defer cpu.Stop()
		for b.Loop() {
			dec := json.NewDecoder(bytes.NewReader(body))
			for {
				if _, err := dec.Token(); err == io.EOF {
					break
				} else if err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
