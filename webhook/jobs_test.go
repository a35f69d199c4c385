package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
)

// liveObjects answers Gets from a map keyed "kind/namespace/name"; anything
// else is NotFound, and "fail" keys fail as an unreachable API server would.
type liveObjects struct {
	client.Reader
	objs map[string]client.Object
	fail map[string]bool
}

func (l liveObjects) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	k := fmt.Sprintf("%T/%s/%s", obj, key.Namespace, key.Name)
	if l.fail[k] {
		return fmt.Errorf("connection refused")
	}
	src, ok := l.objs[k]
	if !ok {
		return apierrors.NewNotFound(upgradev1.SchemeGroupVersion.WithResource("thing").GroupResource(), key.Name)
	}
	data, _ := json.Marshal(src)
	return json.Unmarshal(data, obj)
}

// List finds nothing (no GPU holders), or fails for a "list/<kind>" key.
func (l liveObjects) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	if l.fail[fmt.Sprintf("list/%T", list)] {
		return fmt.Errorf("connection refused")
	}
	return nil
}

func sucJob(parallelism int32, labels map[string]string) *batchv1.Job {
	return &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: "apply-gpu-canary-on-gpu-v100-01-with-abc", Namespace: "system-upgrade", Labels: labels},
		Spec:       batchv1.JobSpec{Parallelism: &parallelism}}
}

// The Job webhook never allows a start it could not judge: every fact it
// cannot read is named in a FactsMissing denial; a write that starts nothing
// is allowed without reading anything.
// sucUserInfo is SUC's ServiceAccount as the API server sends it.
var sucUserInfo = authenticationv1.UserInfo{Username: "system:serviceaccount:system-upgrade:system-upgrade", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:system-upgrade"}}

func TestJobReviewFailsClosed(t *testing.T) {
	labels := map[string]string{upgradev1.LabelPlan: "gpu-canary", upgradev1.LabelNode: "gpu-v100-01"}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-v100-01", Labels: map[string]string{"nvidia.com/gpu.present": "true"}}}
	plan := &upgradev1.Plan{ObjectMeta: metav1.ObjectMeta{Name: "gpu-canary", Namespace: "system-upgrade"}}
	cpuLabels := map[string]string{upgradev1.LabelPlan: "gpu-canary", upgradev1.LabelNode: "cpu-01"}
	cpuNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-01"}}
	both := map[string]client.Object{"*v1.Node//gpu-v100-01": node, "*v1.Plan/system-upgrade/gpu-canary": plan}
	without := func(key string) map[string]client.Object {
		m := map[string]client.Object{}
		for k, v := range both {
			if k != key {
				m[k] = v
			}
		}
		return m
	}
	cases := []struct {
		name      string
		op        admissionv1.Operation
		old, job  runtime.Object
		objs      map[string]client.Object
		fail      map[string]bool
		allowed   bool
		code      int32
		reason    gate.Code
		inMessage string
		user      *authenticationv1.UserInfo // SUC's ServiceAccount when nil
	}{
		{name: "SUCJobForged: a person creates a Job with SUC's labels", op: admissionv1.Create, job: sucJob(0, labels), user: &authenticationv1.UserInfo{Username: "alice", Groups: []string{"platform-admins"}},
			reason: gate.CodeSUCJobForged, inMessage: `carries SUC's labels (upgrade.cattle.io/plan="gpu-canary", upgrade.cattle.io/node="gpu-v100-01") but is written by "alice"`},
		{name: "safe: a person's write that changes neither labels nor start", op: admissionv1.Update, old: sucJob(1, labels), job: sucJob(1, labels), allowed: true,
			user: &authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:generic-garbage-collector", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}}},
		{name: "SUC's paused create starts nothing", op: admissionv1.Create, job: sucJob(0, labels), allowed: true},
		{name: "a running Job's update starts nothing", op: admissionv1.Update, old: sucJob(1, labels), job: sucJob(1, labels), allowed: true},
		{name: "no node label", op: admissionv1.Update, old: sucJob(0, labels), job: sucJob(1, map[string]string{upgradev1.LabelPlan: "gpu-canary"}), objs: both,
			reason: gate.CodeFactsMissing, inMessage: "[FactsMissing] the Job's node (label upgrade.cattle.io/node) cannot be read (the label is absent or empty)"},
		{name: "the node does not exist", op: admissionv1.Update, old: sucJob(0, labels), job: sucJob(1, labels), objs: without("*v1.Node//gpu-v100-01"),
			reason: gate.CodeFactsMissing, inMessage: `[FactsMissing] the Job's node gpu-v100-01 cannot be read (thing.upgrade.cattle.io "gpu-v100-01" not found)`},
		{name: "the node cannot be read", op: admissionv1.Create, job: sucJob(1, labels), objs: both, fail: map[string]bool{"*v1.Node//gpu-v100-01": true},
			reason: gate.CodeFactsMissing, inMessage: "[FactsMissing] the Job's node gpu-v100-01 cannot be read (connection refused)"},
		{name: "the Plan does not exist", op: admissionv1.Update, old: sucJob(0, labels), job: sucJob(1, labels), objs: without("*v1.Plan/system-upgrade/gpu-canary"),
			reason: gate.CodeFactsMissing, inMessage: "[FactsMissing] the Job's Plan system-upgrade/gpu-canary (for node gpu-v100-01) cannot be read"},
		{name: "no plan label", op: admissionv1.Update, old: sucJob(0, labels), job: sucJob(1, map[string]string{upgradev1.LabelNode: "gpu-v100-01"}), objs: both,
			reason: gate.CodeFactsMissing, inMessage: "the label upgrade.cattle.io/plan is absent or empty"},
		{name: "caches not synced", op: admissionv1.Update, old: sucJob(0, labels), job: sucJob(1, labels), objs: both,
			reason: gate.CodeFactsMissing, inMessage: "informer caches have not synced"},
		{name: "caches not synced: a CPU node's start waits too", op: admissionv1.Update, old: sucJob(0, cpuLabels), job: sucJob(1, cpuLabels),
			objs:   map[string]client.Object{"*v1.Node//cpu-01": cpuNode, "*v1.Plan/system-upgrade/gpu-canary": plan},
			reason: gate.CodeFactsMissing, inMessage: "informer caches have not synced"},
		{name: "a Pod sent to the Job endpoint", op: admissionv1.Create, job: &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}},
			code: http.StatusBadRequest, reason: gate.CodeReviewInvalid, inMessage: `body is apiVersion "v1" kind "Pod", expected batch/v1 Job`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := gate.DefaultConfig()
			s := &Server{Config: cfg, Facts: &Facts{Config: cfg, Live: liveObjects{objs: tc.objs, fail: tc.fail}}, Log: logr.Discard(),
				Now: func() time.Time { return time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC) }}
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "1", Operation: tc.op, Namespace: "system-upgrade", Name: "apply-x",
				Kind: metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, Resource: metav1.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"},
				UserInfo: sucUserInfo}}
			if tc.user != nil {
				req.UserInfo = *tc.user
			}
			req.Object.Raw, _ = json.Marshal(tc.job)
			if tc.old != nil {
				req.OldObject.Raw, _ = json.Marshal(tc.old)
			}
			resp := s.handlerAt(PathJobs).Handle(context.Background(), req)
			assert.Equal(t, tc.allowed, resp.Allowed, "%+v", resp.Result)
			if tc.allowed {
				return
			}
			require.NotNil(t, resp.Result)
			if tc.code != 0 {
				assert.Equal(t, tc.code, resp.Result.Code)
			}
			assert.Contains(t, resp.Result.Message, tc.inMessage)
			assert.Equal(t, "deny", resp.AuditAnnotations[gate.AuditDecision])
			assert.Equal(t, string(tc.reason), resp.AuditAnnotations[gate.AuditReasons])
		})
	}
}

// TestJobPlanFromEtcd: the Job guard judges the budget on the cache's
// Plans with the Job's own Plan as read from etcd a moment ago in place of
// the cache's older copy (its stored selector dropped, so the engine
// converts this version's), added when the cache did not have it yet, and
// never a Plan outside the SUC namespaces. A copy of the cache's very
// version leaves the Cluster as built (its view then serves the start).
func TestJobPlanFromEtcd(t *testing.T) {
	cached := &upgradev1.Plan{ObjectMeta: metav1.ObjectMeta{Namespace: "system-upgrade", Name: "gpu-canary", ResourceVersion: "5", UID: "u-canary"}}
	other := &upgradev1.Plan{ObjectMeta: metav1.ObjectMeta{Namespace: "system-upgrade", Name: "gpu-wave", ResourceVersion: "6"},
		Status: upgradev1.PlanStatus{Applying: []string{"gpu-a100-01"}}}
	sel := &gate.PlanSelector{}
	s := &Server{Config: gate.DefaultConfig()}
	for _, tc := range []struct {
		name      string
		plan      *upgradev1.Plan
		wantPlans int
		wantAt    int
	}{
		{"a copy of the cache's version keeps the Cluster as built", cached.DeepCopy(), 2, -2},
		{"another object of the name at the same version is swapped in", &upgradev1.Plan{ObjectMeta: metav1.ObjectMeta{Namespace: "system-upgrade", Name: "gpu-canary", ResourceVersion: "5", UID: "u-recreated"}}, 2, 0},
		{"the cache's copy is replaced", &upgradev1.Plan{ObjectMeta: metav1.ObjectMeta{Namespace: "system-upgrade", Name: "gpu-canary", ResourceVersion: "9"},
			Status: upgradev1.PlanStatus{Applying: []string{"gpu-v100-01"}}}, 2, 0},
		{"a Plan the cache does not have yet is added", &upgradev1.Plan{ObjectMeta: metav1.ObjectMeta{Namespace: "system-upgrade", Name: "gpu-new"}}, 3, 2},
		{"a Plan outside the SUC namespaces is not SUC's", &upgradev1.Plan{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gpu-new"}}, 2, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := &gate.Cluster{Plans: []*upgradev1.Plan{cached, other}, PlanSelectors: []*gate.PlanSelector{sel, sel}}
			s.withPlan(cl, tc.plan)
			require.Len(t, cl.Plans, tc.wantPlans)
			if tc.wantAt >= 0 {
				assert.Same(t, tc.plan, cl.Plans[tc.wantAt])
			}
			if tc.wantAt == 0 {
				assert.Nil(t, cl.PlanSelectors[0], "the cache's selector is of the older version")
			}
			if tc.wantAt == -2 {
				assert.Same(t, cached, cl.Plans[0])
				assert.Same(t, sel, cl.PlanSelectors[0])
			}
			assert.Same(t, other, cl.Plans[1])
			assert.Same(t, sel, cl.PlanSelectors[1])
		})
	}
}

// jobReads records the per-node guard's live reads: the resourceVersion
// each Get asked for and the Pod listings, answering from the fleet.
type jobReads struct {
	fleetPods
	holder string // a node given a GPU holder Pod
	// etcdSnapshots, when set, is the served ETCDSnapshotFile list (RKE2's).
	etcdSnapshots *unstructured.UnstructuredList
	mu            sync.Mutex
	gets          map[string]string // "Node/name" → resourceVersion ("": etcd)
	listings      []string          // nodes listed
}

func (r *jobReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	o := (&client.GetOptions{}).ApplyOptions(opts)
	r.mu.Lock()
	r.gets[fmt.Sprintf("%T/%s", obj, key.Name)] = o.AsGetOptions().ResourceVersion
	r.mu.Unlock()
	return r.fleetPods.Get(ctx, key, obj, opts...)
}

func (r *jobReads) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if ul, ok := list.(*unstructured.UnstructuredList); ok {
		if r.etcdSnapshots == nil {
			return r.fleetPods.List(ctx, list, opts...) // ETCDSnapshotFiles: not served
		}
		r.etcdSnapshots.DeepCopyInto(ul)
		return nil
	}
	if _, ok := list.(*policyv1.PodDisruptionBudgetList); ok {
		return r.fleetPods.List(ctx, list, opts...) // the drain check's budgets: none
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	node, _ := lo.FieldSelector.RequiresExactMatch("spec.nodeName")
	r.mu.Lock()
	r.listings = append(r.listings, node)
	r.mu.Unlock()
	if node == r.holder {
		list.(*corev1.PodList).Items = []corev1.Pod{gpuPod("train-0", node)}
		return nil
	}
	return r.fleetPods.List(ctx, list, opts...)
}

// cacheAs serves the fleet's cache with each Node and Plan at
// resourceVersion "77", but for the nodes given in missing (not in the
// cache yet) and in asCPU (the cache's copy without its GPU labels and
// capacity: a write the cache has not seen made it a GPU node).
type cacheAs struct {
	*fleetCache
	missing, asCPU string
	// concurrency, when set, is the cached Plans' spec.concurrency.
	concurrency int64
	// drain: the cached Plans drain their nodes (SUC's defaults).
	drain bool
}

func (c cacheAs) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, node := obj.(*corev1.Node); node && key.Name == c.missing {
		return apierrors.NewNotFound(corev1.Resource("nodes"), key.Name)
	}
	if err := c.fleetCache.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if n, node := obj.(*corev1.Node); node && key.Name == c.asCPU {
		n.Labels = map[string]string{"kubernetes.io/hostname": n.Name}
		n.Status.Capacity, n.Status.Allocatable = nil, nil
	}
	if p, plan := obj.(*upgradev1.Plan); plan && c.concurrency != 0 {
		p.Spec.Concurrency = c.concurrency
	}
	if p, plan := obj.(*upgradev1.Plan); plan && c.drain {
		p.Spec.Drain = &upgradev1.DrainSpec{}
	}
	obj.SetResourceVersion("77")
	return nil
}

// TestJobStartReads: the guard judges a GPU node's start on the gate's
// cached copy of the Node, and on its cached Plan when that copy's
// status.latestHash is the hash SUC labelled the Job with and the Plan is
// serial (jobStepFacts); otherwise it reads each from the API server's
// watch cache no older than its cached copy (resourceVersion set: "not
// older than"), from etcd when it has none. It lists holders with the reads
// for a node its cache knows as a GPU node (or does not know), never for a
// CPU node's Job, and after the reads when the live Node turns out to be a
// GPU node its cache did not know as one, whose holder then stops the
// start. A draining Plan's start lists the node's Pods once: the one
// listing feeds its holders and the drain check.
func TestJobStartReads(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the 5,000-node fleet")
	}
	e := benchSetup()
	gpu := e.fleet.ByRole("v100", "zone-a", fleetgen.RoleCanaryPlan)[0].Name
	const canary = "gpu-v100-canary-zone-a"
	canaryHash := latestHash(e.fleet, canary)
	require.NotEmpty(t, canaryHash, "the fleet's canary Plan has a status.latestHash")
	for _, tc := range []struct {
		name, plan, node string
		// hash is the Job's SUC hash label ("": none).
		hash           string
		missing, asCPU string
		// concurrency, when set, is the cached Plan's.
		concurrency   int64
		drain         bool
		holder        string
		etcdSnapshots *unstructured.UnstructuredList
		// wantGets are the GETs made, by kind, with their resourceVersion
		// ("": from etcd).
		wantGets          map[string]string
		wantListings      []string
		wantAllowed       bool
		wantCode, wantMsg string
		// wantWarning is in the answer's warnings.
		wantWarning string
	}{
		{name: "a GPU node, SUC's hash: cached Node and Plan, holders alone", plan: canary, node: gpu, hash: canaryHash,
			wantGets: map[string]string{}, wantListings: []string{gpu}, wantAllowed: true},
		{name: "a GPU node, SUC's hash: a holder stops it", plan: canary, node: gpu, hash: canaryHash, holder: gpu,
			wantGets: map[string]string{}, wantListings: []string{gpu}, wantCode: "GPUHolders", wantMsg: "train-0"},
		{name: "a GPU node, no hash label: the Plan read", plan: canary, node: gpu,
			wantGets: map[string]string{"Plan": "77"}, wantListings: []string{gpu}, wantAllowed: true},
		{name: "a GPU node, another hash (the cache behind SUC): the Plan read", plan: canary, node: gpu, hash: "a-newer-hash",
			wantGets: map[string]string{"Plan": "77"}, wantListings: []string{gpu}, wantAllowed: true},
		{name: "a GPU node, SUC's hash of a Plan that is not serial: the Plan read", plan: canary, node: gpu, hash: canaryHash, concurrency: 3,
			wantGets: map[string]string{"Plan": "77"}, wantListings: []string{gpu}, wantAllowed: true},
		{name: "an RKE2-minor step without a ready snapshot is held", plan: canary, node: gpu, hash: canaryHash, etcdSnapshots: snapshotList(benchNow.Add(-48 * time.Hour)),
			wantGets: map[string]string{}, wantListings: []string{gpu}, wantCode: "EtcdSnapshotStale", wantMsg: "was taken at " + benchNow.Add(-48*time.Hour).UTC().Format(time.RFC3339) + ", 48h0m0s ago"},
		{name: "an RKE2-minor step with a fresh ready snapshot starts", plan: canary, node: gpu, hash: canaryHash, etcdSnapshots: snapshotList(benchNow.Add(-time.Hour)),
			wantGets: map[string]string{}, wantListings: []string{gpu}, wantAllowed: true},
		{name: "a CPU node of an RKE2 Plan: the Node read, no holder listing", plan: "rke2-agent-cpu-pool-1", node: "cpu-0001",
			wantGets: map[string]string{"Node": "77", "Plan": "77"}, wantAllowed: true},
		{name: "a node the cache does not have: from etcd, holders with it", plan: canary, node: gpu, hash: canaryHash, missing: gpu,
			wantGets: map[string]string{"Node": ""}, wantListings: []string{gpu}, wantAllowed: true},
		{name: "cached as a CPU node, live a GPU node: holders listed after the reads", plan: canary, node: gpu, hash: canaryHash, asCPU: gpu, holder: gpu,
			wantGets: map[string]string{"Node": "77"}, wantListings: []string{gpu}, wantCode: "GPUHolders", wantMsg: "train-0"},
		{name: "a draining Plan: one listing, its holder stops the start and the drain check names it", plan: canary, node: gpu, hash: canaryHash, drain: true, holder: gpu,
			wantGets: map[string]string{}, wantListings: []string{gpu}, wantCode: "GPUHolders", wantMsg: "train-0",
			wantWarning: "[DrainBlocked] SUC's drain (kubectl drain) of a pending GPU node cannot finish, and SUC would retry it with the node cordoned: node " + gpu + ": Pod ml/train-0: no controller owns it"},
		{name: "a draining Plan, nothing on the node blocks: one listing, the start goes ahead", plan: canary, node: gpu, hash: canaryHash, drain: true,
			wantGets: map[string]string{}, wantListings: []string{gpu}, wantAllowed: true},
		{name: "a draining Plan, cached as a CPU node, live a GPU node: one listing after the reads feeds both", plan: canary, node: gpu, hash: canaryHash, asCPU: gpu, drain: true, holder: gpu,
			wantGets: map[string]string{"Node": "77"}, wantListings: []string{gpu}, wantCode: "GPUHolders", wantMsg: "train-0",
			wantWarning: "node " + gpu + ": Pod ml/train-0: no controller owns it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := e.facts.Cache.(*fleetCache)
			live := &jobReads{fleetPods: fleetPods{fleet: e.fleet}, holder: tc.holder, etcdSnapshots: tc.etcdSnapshots, gets: map[string]string{}}
			facts := &Facts{Config: e.fleet.Config, Cache: cacheAs{fleetCache: fc, missing: tc.missing, asCPU: tc.asCPU, concurrency: tc.concurrency, drain: tc.drain}, Live: live}
			facts.SetServerVersion(fleetgen.ServerVersion)
			facts.synced.Store(true)
			s := &Server{Config: e.fleet.Config, Facts: facts, Log: logr.Discard(), Now: func() time.Time { return benchNow }}
			var review admissionv1.AdmissionReview
			require.NoError(t, json.Unmarshal(jobStart(tc.plan, tc.node, tc.hash).Body, &review))
			resp := s.handlerAt(PathJobs).Handle(context.Background(), admission.Request{AdmissionRequest: *review.Request})
			msg := ""
			if resp.Result != nil {
				msg = resp.Result.Message
			}
			assert.Equal(t, tc.wantAllowed, resp.Allowed, msg)
			want := map[string]string{}
			for kind, rv := range tc.wantGets {
				name := tc.node
				if kind == "Plan" {
					name = tc.plan
				}
				want["*v1."+kind+"/"+name] = rv
			}
			assert.Equal(t, want, live.gets)
			assert.Equal(t, tc.wantListings, live.listings)
			if tc.wantCode != "" {
				assert.Equal(t, tc.wantCode, resp.AuditAnnotations[gate.AuditReasons])
				assert.Contains(t, msg, tc.wantMsg)
			}
			if tc.wantWarning != "" {
				assert.Contains(t, strings.Join(resp.Warnings, "\n"), tc.wantWarning)
			}
		})
	}
}

// TestJobStartCachedFactsNeedSyncedCaches: before the caches are ready
// the guard uses no cached copy (jobStepFacts) and the start fails closed.
func TestJobStartCachedFactsNeedSyncedCaches(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the 5,000-node fleet")
	}
	e := benchSetup()
	gpu := e.fleet.ByRole("v100", "zone-a", fleetgen.RoleCanaryPlan)[0].Name
	const canary = "gpu-v100-canary-zone-a"
	fc := e.facts.Cache.(*fleetCache)
	live := &jobReads{fleetPods: fleetPods{fleet: e.fleet}, gets: map[string]string{}}
	facts := &Facts{Config: e.fleet.Config, Cache: cacheAs{fleetCache: fc}, Live: live} // not synced
	s := &Server{Config: e.fleet.Config, Facts: facts, Log: logr.Discard(), Now: func() time.Time { return benchNow }}
	var review admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(jobStart(canary, gpu, latestHash(e.fleet, canary)).Body, &review))
	resp := s.handlerAt(PathJobs).Handle(context.Background(), admission.Request{AdmissionRequest: *review.Request})
	assert.False(t, resp.Allowed)
	assert.Equal(t, string(gate.CodeFactsMissing), resp.AuditAnnotations[gate.AuditReasons])
	assert.Equal(t, map[string]string{"*v1.Node/" + gpu: "77", "*v1.Plan/" + canary: "77"}, live.gets, "both read live")
}

// snapshotList is one ready ETCDSnapshotFile taken at, as RKE2 writes it.
func snapshotList(at time.Time) *unstructured.UnstructuredList {
	return &unstructured.UnstructuredList{Items: []unstructured.Unstructured{{Object: map[string]any{
		"apiVersion": "k3s.cattle.io/v1", "kind": "ETCDSnapshotFile",
		"metadata": map[string]any{"name": "local-etcd-snapshot-server-1"},
		"spec":     map[string]any{"snapshotName": "etcd-snapshot-server-1", "nodeName": "server-1", "location": "file:///var/lib/rancher/rke2/server/db/snapshots/etcd-snapshot-server-1"},
		"status":   map[string]any{"readyToUse": true, "creationTime": at.UTC().Format(time.RFC3339)},
	}}}}
}
