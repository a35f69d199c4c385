//go:build scale

package scale

// The admission phase (issue 14): what a write waits on through the real
// kube-apiserver. The same Plan create goes, round-robin, to a plain
// namespace, to one a ValidatingAdmissionPolicy guards (the peers' four
// rules in CEL), to one a webhook that only allows reviews (the hop's
// floor, served by the same serve process) and to the gate (every rule,
// holders listed); SUC's Job
// start to a plain namespace and to the gate's per-node guard. Each mode is
// paced (a write every 150 ms: the API server's watch cache then sees no
// event in between) or back to back, idle or with another client creating,
// listing and deleting Pods. Then the ways to read a node's holders are
// compared alone, for latency and freshness, and a Pod informer per GPU
// node is costed. The harness plays SUC (it writes SUC's Job as SUC's
// ServiceAccount) because no controller runs here.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/test/loadgen"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// The Job guard's Plan list, read alone (issue 14 item 2), and its Node
// and Plan GETs.
const (
	planConsistent = "Plans: consistent (no resourceVersion)"
	planGateRead   = "Plans: NotOlderThan the gate's Plan informer"
	nodeEtcd       = "Node: GET from etcd (no resourceVersion)"
	nodeCache      = "Node: GET NotOlderThan the gate's copy"
	planEtcd       = "Plan: GET from etcd (no resourceVersion)"
	planCache      = "Plan: GET NotOlderThan the gate's copy"
)

const (
	nsPlain  = "bench-plain"
	nsPolicy = "bench-policy"
	nsChurn  = "bench-churn"
	// nsNoop: reviewed by a webhook that only allows (webhook.PathBenchNoop).
	nsNoop = "bench-noop"
	// sucUser is SUC's ServiceAccount, as the chart's Job guard expects it.
	sucUser = "system:serviceaccount:" + fleetgen.NamespaceSUC + ":system-upgrade"
	// pacedGap: longer than the API server's progress-notify period (100 ms).
	pacedGap = 150 * time.Millisecond
)

// policyRules are the peers' four rules, in CEL.
var policyRules = []string{
	"object.spec.concurrency == 1",
	"(has(object.spec.cordon) && object.spec.cordon) || has(object.spec.drain)",
	"has(object.spec.version) && object.spec.version != ''",
	"has(object.metadata.annotations) && 'gpu-upgrade-gate.io/qualification' in object.metadata.annotations",
}

// write is one series: it makes its write i and returns how long the timed
// request took (the cleanup after it is not timed).
type write struct {
	name string
	do   func(ctx context.Context, i int) (time.Duration, error)
}

func (e *scaleEnv) admission(ctx context.Context, t *testing.T) {
	n := envInt("GUG_SCALE_ADMISSION_N", 100)
	ctrllog.SetLogger(logr.Discard()) // the clients below log nothing of use
	f := e.fleet
	require.NoError(t, e.register(ctx, true))
	cs, err := kubernetes.NewForConfig(e.cp.RESTConfig())
	require.NoError(t, err)
	for _, ns := range []string{nsPlain, nsPolicy, nsChurn, nsNoop} {
		require.NoError(t, client.IgnoreAlreadyExists(e.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})))
	}
	require.NoError(t, e.policy(ctx))
	require.NoError(t, e.noop(ctx, cs))
	// SUC's ServiceAccount may write Jobs (the chart's RBAC is SUC's own
	// chart's business; here it gets what it needs).
	require.NoError(t, client.IgnoreAlreadyExists(e.admin.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench-suc"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: fleetgen.NamespaceSUC, Name: "system-upgrade"}}})))
	suc, err := client.New(e.cp.ConfigFor(sucUser), client.Options{Scheme: e.admin.Scheme()})
	require.NoError(t, err)

	node := f.ByRole("v100", "", fleetgen.RolePlain)[0].Name
	jobPlan := f.ByRole("v100", "zone-a", fleetgen.RoleCanaryPlan)[0].Name
	a := &Admission{Plan: "GPU canary Plan (one V100 node by hostname), allowed", Policy: policyRules,
		Job: "SUC's upgrade Job for the V100 canary node of Plan gpu-v100-canary-zone-a, created running (parallelism 1) as SUC's ServiceAccount, allowed"}
	e.res.Admission = a
	plan := func(ns string) func(ctx context.Context, i int) (time.Duration, error) {
		return func(ctx context.Context, i int) (time.Duration, error) {
			// One name every round: the gate's Plan informer may still hold
			// the last round's copy (deleted a moment before, under load) and
			// would count it as another rollout in flight; its own name is
			// its re-apply instead.
			p := byAuthor(fleetgen.HostnamePlan("adm-write", fleetgen.RecordName("v100"), node))
			p.Namespace = ns
			start := time.Now()
			if err := e.person.Create(ctx, p); err != nil {
				return 0, fmt.Errorf("Plan %s/%s: %w", ns, p.Name, err)
			}
			took := time.Since(start)
			return took, e.admin.Delete(ctx, p)
		}
	}
	job := func(ns string) func(ctx context.Context, i int) (time.Duration, error) {
		return func(ctx context.Context, i int) (time.Duration, error) {
			j := e.sucJob(ns, fmt.Sprintf("apply-gpu-v100-canary-zone-a-on-%s-with-%d", jobPlan, i), "gpu-v100-canary-zone-a", jobPlan)
			start := time.Now()
			if err := suc.Create(ctx, j); err != nil {
				return 0, fmt.Errorf("Job %s/%s: %w", ns, j.Name, err)
			}
			took := time.Since(start)
			return took, e.admin.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))
		}
	}
	// job-cpu: an RKE2 agent Plan's Job on a CPU node through the guard
	// (no holder listing: webhook/jobs.go).
	cpuJob := func(ctx context.Context, i int) (time.Duration, error) {
		j := e.sucJob(fleetgen.NamespaceSUC, fmt.Sprintf("apply-rke2-agent-cpu-pool-1-on-cpu-0001-with-%d", i), "rke2-agent-cpu-pool-1", "cpu-0001")
		start := time.Now()
		if err := suc.Create(ctx, j); err != nil {
			return 0, fmt.Errorf("Job %s/%s: %w", j.Namespace, j.Name, err)
		}
		took := time.Since(start)
		return took, e.admin.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))
	}
	writes := []write{
		{"plain", plan(nsPlain)}, {"policy", plan(nsPolicy)}, {"noop", plan(nsNoop)}, {"gate", plan(fleetgen.NamespaceSUC)},
		{"job-plain", job(nsPlain)}, {"job-gate", job(fleetgen.NamespaceSUC)}, {"job-cpu", cpuJob},
	}
	for _, w := range writes {
		a.Series = append(a.Series, w.name)
		_, err := w.do(ctx, -1) // each is allowed, and warm
		require.NoError(t, err, w.name)
	}
	modes := []struct {
		name  string
		gap   time.Duration
		churn bool
	}{
		{"idle, paced 150 ms", pacedGap, false}, {"idle, back to back", 0, false},
		{"Pod churn, paced 150 ms", pacedGap, true}, {"Pod churn, back to back", 0, true},
	}
	// GUG_SCALE_ADMISSION_QUICK=1: the idle modes' writes only (a before
	// and after comparison on a shared machine), not the read comparisons.
	quick := os.Getenv("GUG_SCALE_ADMISSION_QUICK") != ""
	if quick {
		modes = modes[:2]
	}
	for _, m := range modes {
		mode, err := e.admissionMode(ctx, cs, m.name, m.gap, m.churn, writes, n)
		require.NoError(t, err, m.name)
		a.Modes = append(a.Modes, *mode)
		t.Logf("%s (load %s): %s", m.name, mode.LoadBefore, modeLine(mode))
	}
	if quick {
		return
	}
	e.holderReads(ctx, t, cs, a)
	e.direct(ctx, t, a, node)
	e.nodeInformers(ctx, t, cs, a)
}

func modeLine(m *AdmissionMode) string {
	var parts []string
	for _, s := range []string{"plain", "policy", "noop", "gate", "job-plain", "job-gate", "job-cpu"} {
		parts = append(parts, fmt.Sprintf("%s p50 %s", s, m.Series[s].P50))
	}
	return strings.Join(parts, ", ") + fmt.Sprintf("; gate handler p50 %s, API server's webhook call mean %s, %d connections", m.GateHandler.P50, m.WebhookMean, m.Connections)
}

// sucJob is SUC's upgrade Job for node, created running, labelled as SUC
// labels it (the Plan's status.latestHash it was built from, under
// upgradev1.LabelPlanName: the guard's check that its cached Plan is that
// one).
func (e *scaleEnv) sucJob(ns, name, plan, node string) *batchv1.Job {
	one := int32(1)
	labels := map[string]string{upgradev1.LabelPlan: plan, upgradev1.LabelNode: node}
	for _, p := range e.fleet.Plans {
		if p.Name == plan && p.Status.LatestHash != "" {
			labels[upgradev1.LabelPlanName(plan)] = p.Status.LatestHash
		}
	}
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: batchv1.JobSpec{Parallelism: &one, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			NodeName: node, Containers: []corev1.Container{{Name: "upgrade", Image: "rancher/rke2-upgrade:" + fleetgen.Target.RKE2}}}}}}
}

// policy registers the ValidatingAdmissionPolicy for the policy namespace
// and waits until it denies.
func (e *scaleEnv) policy(ctx context.Context) error {
	var v []admissionregistrationv1.Validation
	for _, r := range policyRules {
		v = append(v, admissionregistrationv1.Validation{Expression: r, Message: "bench rule: " + r})
	}
	fail := admissionregistrationv1.Fail
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bench-plan-rules"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{FailurePolicy: &fail, Validations: v,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{"CREATE", "UPDATE"},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{upgradev1.GroupName}, APIVersions: []string{"v1"}, Resources: []string{"plans"}}}}}}}}
	if err := client.IgnoreAlreadyExists(e.admin.Create(ctx, vap)); err != nil {
		return err
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench-plan-rules"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: vap.Name, ValidationActions: []admissionregistrationv1.ValidationAction{"Deny"},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": nsPolicy}}}}}
	if err := client.IgnoreAlreadyExists(e.admin.Create(ctx, binding)); err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		p := fleetgen.HostnamePlan("policy-probe", fleetgen.RecordName("v100"), "nowhere")
		p.Namespace, p.Spec.Concurrency = nsPolicy, 3
		err := e.admin.Create(ctx, p, client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "bench rule") {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return fmt.Errorf("the ValidatingAdmissionPolicy did not start denying")
}

// noop registers, for the noop namespace's Plans, the gate's Plan webhook
// entry pointed at the same serve process's webhook that only allows
// (webhook.PathBenchNoop): same TLS, same connection handling, same
// process; and waits until the API server calls it.
func (e *scaleEnv) noop(ctx context.Context, cs kubernetes.Interface) error {
	vwc, err := e.serve.WebhookConfiguration()
	if err != nil {
		return err
	}
	var hook *admissionregistrationv1.ValidatingWebhook
	for i := range vwc.Webhooks {
		if vwc.Webhooks[i].Name == webhook.WebhookPlans {
			hook = vwc.Webhooks[i].DeepCopy()
		}
	}
	if hook == nil {
		return fmt.Errorf("the chart's webhook configuration has no %s", webhook.WebhookPlans)
	}
	url := e.serve.URL() + webhook.PathBenchNoop
	hook.Name, hook.ClientConfig.URL = "noop.bench.gpu-upgrade-gate.io", &url
	hook.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": nsNoop}}
	noop := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "bench-noop"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{*hook}}
	if err := client.IgnoreAlreadyExists(e.admin.Create(ctx, noop)); err != nil {
		return err
	}
	called := `name="` + hook.Name + `"`
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		p := fleetgen.HostnamePlan("noop-probe", fleetgen.RecordName("v100"), "nowhere")
		p.Namespace = nsNoop
		if err := e.admin.Create(ctx, p, client.DryRunAll); err != nil {
			return err
		}
		m, err := apiserverMetrics(ctx, cs)
		if err != nil {
			return err
		}
		for k, v := range m {
			if strings.HasPrefix(k, "apiserver_admission_webhook_admission_duration_seconds_count") && strings.Contains(k, called) && v > 0 {
				return nil
			}
		}
	}
	return fmt.Errorf("the API server did not start calling the noop webhook")
}

// admissionMode runs n rounds of every write, the order rotated each round.
func (e *scaleEnv) admissionMode(ctx context.Context, cs kubernetes.Interface, name string, gap time.Duration, churn bool, writes []write, n int) (*AdmissionMode, error) {
	m := &AdmissionMode{Name: name, Gap: gap, Churn: churn, Series: map[string]Stats{}, LoadBefore: LoadAverage()}
	var stopChurn func() int
	if churn {
		stopChurn = e.churn(ctx)
	}
	before, err := apiserverMetrics(ctx, cs)
	if err != nil {
		return nil, err
	}
	logStart := fileSize(e.serve.LogPath)
	gcBefore := gateGCs(e.serve.Metrics)
	conns := watchConnections(e.serve.Port)
	took := map[string][]time.Duration{}
	next := time.Now()
	for round := range n {
		for k := range writes {
			w := writes[(round+k)%len(writes)]
			time.Sleep(time.Until(next))
			next = time.Now().Add(gap)
			d, err := w.do(ctx, round)
			if err != nil {
				conns()
				if stopChurn != nil {
					stopChurn()
				}
				return nil, err
			}
			took[w.name] = append(took[w.name], d)
		}
	}
	m.Connections = conns()
	if stopChurn != nil {
		m.ChurnOps = stopChurn()
	}
	after, err := apiserverMetrics(ctx, cs)
	if err != nil {
		return nil, err
	}
	m.LoadAfter = LoadAverage()
	m.GateGCs = gateGCs(e.serve.Metrics) - gcBefore
	for s, ds := range took {
		m.Series[s] = StatsOf(ds)
	}
	m.WebhookMean = after.mean(before, "apiserver_admission_webhook_admission_duration_seconds", `name="`+webhook.WebhookPlans+`"`)
	m.PodReadWaitMean = after.mean(before, "apiserver_watch_cache_read_wait_seconds", `resource="pods"`)
	var phases map[string][]time.Duration
	m.GateHandler, phases = handlerDurations(e.serve.LogPath, logStart, "Plan "+fleetgen.NamespaceSUC+"/adm-")
	m.GatePhases = statsOf(phases)
	_, phases = handlerDurations(e.serve.LogPath, logStart, "Job "+fleetgen.NamespaceSUC+"/apply-gpu-")
	m.JobPhases = statsOf(phases)
	return m, nil
}

// churn is another client creating, listing and deleting Pods (on a CPU
// node) until the returned func is called; it returns the requests made.
func (e *scaleEnv) churn(ctx context.Context) func() int {
	ctx, cancel := context.WithCancel(ctx)
	cpu := ""
	for _, n := range e.fleet.Nodes {
		if _, cp := n.Labels["node-role.kubernetes.io/control-plane"]; !cp && !e.fleet.Config.IsGPUNode(n) {
			cpu = n.Name
			break
		}
	}
	var ops atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsChurn, Name: fmt.Sprintf("churn-%d", i)},
				Spec: corev1.PodSpec{NodeName: cpu, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
			if e.admin.Create(ctx, p) == nil {
				var list corev1.PodList
				_ = e.admin.List(ctx, &list, client.InNamespace(nsChurn))
				_ = e.admin.Delete(ctx, p, client.GracePeriodSeconds(0))
				ops.Add(3)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return func() int { cancel(); wg.Wait(); return int(ops.Load()) }
}

// holderReads: the ways to list a node's Pods, alone, each right after a
// write (as the gate's read follows the Plan's write), round-robin.
func (e *scaleEnv) holderReads(ctx context.Context, t *testing.T, cs kubernetes.Interface, a *Admission) {
	n := envInt("GUG_SCALE_READS_N", 60)
	node := e.fleet.ByRole("v100", "", fleetgen.RolePlain)[0].Name
	// The gate's own Pod informer: the validator Pods, by label and namespace.
	cfg := e.fleet.Config
	inf := toolscache.NewSharedIndexInformer(toolscache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "pods", cfg.Proof.Validator.Namespace,
		func(o *metav1.ListOptions) { o.LabelSelector = cfg.Proof.ValidatorSelector().String() }), &corev1.Pod{}, 0, toolscache.Indexers{})
	stop := make(chan struct{})
	defer close(stop)
	go inf.Run(stop)
	require.True(t, toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced))
	// The gate's Plan informer, for the Job guard's Plan list (issue 14
	// item 2): the SUC namespace's Plans, consistent or NotOlderThan it.
	dyn, err := dynamic.NewForConfig(e.cp.RESTConfig())
	require.NoError(t, err)
	plans := dyn.Resource(upgradev1.SchemeGroupVersion.WithResource("plans")).Namespace(fleetgen.NamespaceSUC)
	planInf := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{
		ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (kruntime.Object, error) { return plans.List(ctx, o) },
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return plans.Watch(ctx, o) },
	}, &unstructured.Unstructured{}, 0, toolscache.Indexers{})
	go planInf.Run(stop)
	require.True(t, toolscache.WaitForCacheSync(ctx.Done(), planInf.HasSynced))
	planReads := []struct {
		name string
		opts func() metav1.ListOptions
	}{
		{planConsistent, func() metav1.ListOptions { return metav1.ListOptions{} }},
		{planGateRead, func() metav1.ListOptions {
			return metav1.ListOptions{ResourceVersion: planInf.LastSyncResourceVersion(), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}
		}},
	}
	// The Job guard's Node and Plan GETs (webhook/jobs.go): from etcd, or
	// from the watch cache no older than the gate's cached copy (here an
	// informer on that node, and the Plan informer's copy of the Plan).
	jobNode := e.fleet.ByRole("v100", "zone-a", fleetgen.RoleCanaryPlan)[0].Name
	oneNode := toolscache.NewSharedIndexInformer(toolscache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "nodes", "",
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", jobNode).String()
		}), &corev1.Node{}, 0, toolscache.Indexers{})
	go oneNode.Run(stop)
	require.True(t, toolscache.WaitForCacheSync(ctx.Done(), oneNode.HasSynced))
	cachedRV := func(inf toolscache.SharedIndexInformer, key string) string {
		o, ok, _ := inf.GetStore().GetByKey(key)
		require.True(t, ok, key)
		m, err := meta.Accessor(o)
		require.NoError(t, err)
		return m.GetResourceVersion()
	}
	jobPlan := "gpu-v100-canary-zone-a"
	getReads := []struct {
		name string
		get  func(rv string) error
		rv   func() string
	}{
		{nodeEtcd, func(string) error { _, err := cs.CoreV1().Nodes().Get(ctx, jobNode, metav1.GetOptions{}); return err }, nil},
		{nodeCache, func(rv string) error {
			_, err := cs.CoreV1().Nodes().Get(ctx, jobNode, metav1.GetOptions{ResourceVersion: rv})
			return err
		}, func() string { return cachedRV(oneNode, jobNode) }},
		{planEtcd, func(string) error { _, err := plans.Get(ctx, jobPlan, metav1.GetOptions{}); return err }, nil},
		{planCache, func(rv string) error {
			_, err := plans.Get(ctx, jobPlan, metav1.GetOptions{ResourceVersion: rv})
			return err
		},
			func() string { return cachedRV(planInf, fleetgen.NamespaceSUC+"/"+jobPlan) }},
	}
	marker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsPlain, Name: "write-marker"}, Data: map[string]string{"i": "0"}}
	require.NoError(t, client.IgnoreAlreadyExists(e.admin.Create(ctx, marker)))
	var lastWrite string
	reads := []struct {
		name string
		opts func() metav1.ListOptions
	}{
		{"consistent (no resourceVersion)", func() metav1.ListOptions { return metav1.ListOptions{} }},
		{"resourceVersion=0", func() metav1.ListOptions { return metav1.ListOptions{ResourceVersion: "0"} }},
		{"NotOlderThan the gate's Pod informer", func() metav1.ListOptions {
			return metav1.ListOptions{ResourceVersion: inf.LastSyncResourceVersion(), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}
		}},
		{"NotOlderThan the write just made", func() metav1.ListOptions {
			return metav1.ListOptions{ResourceVersion: lastWrite, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}
		}},
	}
	sel := fields.OneTermEqualSelector("spec.nodeName", node).String()
	for _, m := range []struct {
		name  string
		gap   time.Duration
		churn bool
	}{{"idle, paced 150 ms", pacedGap, false}, {"idle, back to back", 0, false}, {"Pod churn, paced 150 ms", pacedGap, true}, {"Pod churn, back to back", 0, true}} {
		var stopChurn func() int
		if m.churn {
			stopChurn = e.churn(ctx)
		}
		mode := HolderReadMode{Mode: m.name, Reads: map[string]Stats{}, Load: LoadAverage()}
		took := map[string][]time.Duration{}
		next := time.Now()
		for round := range n {
			for k := range reads {
				r := reads[(round+k)%len(reads)]
				time.Sleep(time.Until(next))
				next = time.Now().Add(m.gap)
				marker.Data["i"] = strconv.Itoa(round*len(reads) + k)
				require.NoError(t, e.admin.Update(ctx, marker))
				lastWrite = marker.ResourceVersion
				o := r.opts()
				o.FieldSelector = sel
				start := time.Now()
				_, err := cs.CoreV1().Pods("").List(ctx, o)
				require.NoError(t, err, r.name)
				took[r.name] = append(took[r.name], time.Since(start))
			}
			for k := range planReads {
				r := planReads[(round+k)%len(planReads)]
				time.Sleep(time.Until(next))
				next = time.Now().Add(m.gap)
				marker.Data["i"] = "plans-" + strconv.Itoa(round*len(planReads)+k)
				require.NoError(t, e.admin.Update(ctx, marker))
				start := time.Now()
				_, err := plans.List(ctx, r.opts())
				require.NoError(t, err, r.name)
				took[r.name] = append(took[r.name], time.Since(start))
			}
			for k := range getReads {
				r := getReads[(round+k)%len(getReads)]
				time.Sleep(time.Until(next))
				next = time.Now().Add(m.gap)
				marker.Data["i"] = "gets-" + strconv.Itoa(round*len(getReads)+k)
				require.NoError(t, e.admin.Update(ctx, marker))
				rv := ""
				if r.rv != nil {
					rv = r.rv()
				}
				start := time.Now()
				require.NoError(t, r.get(rv), r.name)
				took[r.name] = append(took[r.name], time.Since(start))
			}
		}
		for name, ds := range took {
			mode.Reads[name] = StatsOf(ds)
		}
		a.Reads = append(a.Reads, mode)
		t.Logf("holder reads, %s: %v", m.name, mode.Reads)
		if stopChurn != nil {
			stopChurn()
		}
	}
	// Freshness: a Pod created on a GPU node, then listed at once.
	fresh := e.fleet.ByRole("v100", "", fleetgen.RolePlain)[1].Name
	nodeInf := toolscache.NewSharedIndexInformer(toolscache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "pods", "",
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", fresh).String()
		}), &corev1.Pod{}, 0, toolscache.Indexers{})
	go nodeInf.Run(stop)
	require.True(t, toolscache.WaitForCacheSync(ctx.Done(), nodeInf.HasSynced))
	names := []string{}
	for _, r := range reads {
		names = append(names, r.name)
	}
	names = append(names, "a Pod informer for the node (its store, no request)")
	freshSel := fields.OneTermEqualSelector("spec.nodeName", fresh).String()
	for _, churn := range []bool{false, true} {
		var stopChurn func() int
		if churn {
			stopChurn = e.churn(ctx)
		}
		seen := map[string]int{}
		for i := range n {
			for k := range names {
				name := names[(i+k)%len(names)]
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsChurn, Name: fmt.Sprintf("fresh-%v-%d-%d", churn, i, k)},
					Spec: corev1.PodSpec{NodeName: fresh, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
				require.NoError(t, e.admin.Create(ctx, p))
				lastWrite = p.ResourceVersion
				found := false
				if idx := slices.Index(names, name); idx < len(reads) {
					o := reads[idx].opts()
					o.FieldSelector = freshSel
					list, err := cs.CoreV1().Pods("").List(ctx, o)
					require.NoError(t, err)
					found = slices.ContainsFunc(list.Items, func(q corev1.Pod) bool { return q.Name == p.Name })
				} else {
					_, found, _ = nodeInf.GetStore().GetByKey(p.Namespace + "/" + p.Name)
				}
				if found {
					seen[name]++
				}
				require.NoError(t, e.admin.Delete(ctx, p, client.GracePeriodSeconds(0)))
			}
		}
		for _, name := range names {
			a.Freshness = append(a.Freshness, HolderFreshness{Read: name, Churn: churn, Trials: n, Seen: seen[name]})
		}
		t.Logf("freshness (churn %v): %v of %d", churn, seen, n)
		if stopChurn != nil {
			stopChurn()
		}
	}
}

// direct: the same Plan review sent by the load generator straight to the
// webhook, paced and back to back: whatever the paced writes add beyond
// this is between the API server and the webhook.
func (e *scaleEnv) direct(ctx context.Context, t *testing.T, a *Admission, node string) {
	p := fleetgen.HostnamePlan("adm-direct", fleetgen.RecordName("v100"), node)
	rv := e.fleet.PlanReview(p, nil, time.Now())
	for _, m := range []struct {
		name string
		gap  time.Duration
		dur  time.Duration
	}{{"paced 150 ms", pacedGap, 15 * time.Second}, {"back to back", 0, 5 * time.Second}} {
		o := e.options([]fleetgen.Review{rv})
		o.Workers, o.Duration = 1, m.dur
		if m.gap > 0 {
			o.Rate = float64(time.Second) / float64(m.gap)
		}
		load := LoadAverage()
		var ds []time.Duration
		var mu sync.Mutex
		o.OnResult = func(r *loadgen.Result) { mu.Lock(); ds = append(ds, r.Done.Sub(r.Sent)); mu.Unlock() }
		sum, err := loadgen.Run(ctx, o)
		require.NoError(t, err)
		require.Zero(t, sum.Errors(), "direct %s", m.name)
		a.Direct = append(a.Direct, DirectRun{Name: m.name, Gap: m.gap, Stat: StatsOf(ds), Load: load})
		t.Logf("direct %s: p50 %s", m.name, StatsOf(ds).P50)
	}
}

// nodeInformers costs a Pod informer per GPU node (spec.nodeName), as a
// kubelet watches its own Pods: memory and goroutines in this process, the
// time to sync, and the lag from a Pod's create to its informer.
func (e *scaleEnv) nodeInformers(ctx context.Context, t *testing.T, cs kubernetes.Interface, a *Admission) {
	var gpu []string
	for _, n := range e.fleet.Nodes {
		if e.fleet.Config.IsGPUNode(n) {
			gpu = append(gpu, n.Name)
		}
	}
	load := LoadAverage()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()
	stop := make(chan struct{})
	defer close(stop)
	type added struct {
		name string
		at   time.Time
	}
	events := make(chan added, 1024)
	infs := make([]toolscache.SharedIndexInformer, len(gpu))
	start := time.Now()
	for i, name := range gpu {
		infs[i] = toolscache.NewSharedIndexInformer(toolscache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "pods", "",
			func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", name).String()
			}), &corev1.Pod{}, 0, toolscache.Indexers{})
		_, err := infs[i].AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(o any) {
			if p, ok := o.(*corev1.Pod); ok && strings.HasPrefix(p.Name, "lag-") {
				events <- added{p.Name, time.Now()}
			}
		}})
		require.NoError(t, err)
		go infs[i].Run(stop)
	}
	for _, inf := range infs {
		require.True(t, toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced))
	}
	ni := &NodeInformers{Nodes: len(gpu), SyncTime: time.Since(start), Load: load}
	runtime.GC()
	runtime.ReadMemStats(&after)
	ni.HeapBytes = int64(after.HeapAlloc) - int64(before.HeapAlloc)
	ni.Goroutines = runtime.NumGoroutine() - goroutines
	var lags []time.Duration
	for i := range 30 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsChurn, Name: fmt.Sprintf("lag-%d", i)},
			Spec: corev1.PodSpec{NodeName: gpu[(i*37)%len(gpu)], Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		require.NoError(t, e.admin.Create(ctx, p))
		created := time.Now()
		select {
		case ev := <-events:
			require.Equal(t, p.Name, ev.name)
			lags = append(lags, max(0, ev.at.Sub(created)))
		case <-time.After(10 * time.Second):
			t.Fatalf("the informer of node %s did not see Pod %s", p.Spec.NodeName, p.Name)
		}
		require.NoError(t, e.admin.Delete(ctx, p, client.GracePeriodSeconds(0)))
	}
	ni.Lag = StatsOf(lags)
	a.Informers = ni
	t.Logf("%d node Pod informers: synced in %s, heap +%.1f MiB, +%d goroutines, lag p50 %s", ni.Nodes, ni.SyncTime, float64(ni.HeapBytes)/(1<<20), ni.Goroutines, ni.Lag.P50)
}

// metricSums are the _sum and _count of histograms, by metric and labels.
type metricSums map[string]float64

func apiserverMetrics(ctx context.Context, cs kubernetes.Interface) (metricSums, error) {
	data, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("API server metrics: %w", err)
	}
	out := metricSums{}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "apiserver_admission_webhook_admission_duration_seconds_") && !strings.HasPrefix(l, "apiserver_watch_cache_read_wait_seconds_") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
			out[l[:i]] = v
		}
	}
	return out, sc.Err()
}

// mean is the mean of a histogram's observations since before, over the
// series whose labels contain match.
func (m metricSums) mean(before metricSums, metric, match string) time.Duration {
	var sum, count float64
	for k, v := range m {
		if !strings.Contains(k, match) {
			continue
		}
		switch {
		case strings.HasPrefix(k, metric+"_sum"):
			sum += v - before[k]
		case strings.HasPrefix(k, metric+"_count"):
			count += v - before[k]
		}
	}
	if count == 0 {
		return 0
	}
	return time.Duration(sum / count * float64(time.Second))
}

// webhookMeans is mean, since before, of each validating webhook's
// admission duration on operation, by the webhook's name.
func (m metricSums) webhookMeans(before metricSums, operation string) map[string]time.Duration {
	const metric = "apiserver_admission_webhook_admission_duration_seconds"
	out := map[string]time.Duration{}
	for k := range m {
		if !strings.HasPrefix(k, metric+"_count{") || !strings.Contains(k, `operation="`+operation+`"`) || !strings.Contains(k, `type="validating"`) {
			continue
		}
		_, rest, _ := strings.Cut(k, `name="`)
		name, _, _ := strings.Cut(rest, `"`)
		if _, done := out[name]; done || name == "" {
			continue
		}
		if d := m.mean(before, metric, `name="`+name+`",operation="`+operation+`"`); d > 0 {
			out[name] = d
		}
	}
	return out
}

// gateGCs is the serve process's count of garbage collections
// (go_gc_duration_seconds_count on its metrics endpoint; -1 unknown).
func gateGCs(addr string) int {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_gc_duration_seconds_count "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	return -1
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

func statsOf(ds map[string][]time.Duration) map[string]Stats {
	out := map[string]Stats{}
	for k, v := range ds {
		out[k] = StatsOf(v)
	}
	return out
}

// handlerDurations are the durationMs of the decision log lines written
// after offset whose object starts with prefix, and their phasesMs by phase.
func handlerDurations(path string, offset int64, prefix string) (Stats, map[string][]time.Duration) {
	phases := map[string][]time.Duration{}
	fh, err := os.Open(path)
	if err != nil {
		return Stats{}, phases
	}
	defer fh.Close()
	if _, err := fh.Seek(offset, 0); err != nil {
		return Stats{}, phases
	}
	var out []time.Duration
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l struct {
			Object     string  `json:"object"`
			DurationMs float64 `json:"durationMs"`
			PhasesMs   string  `json:"phasesMs"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && strings.HasPrefix(l.Object, prefix) {
			out = append(out, time.Duration(l.DurationMs*float64(time.Millisecond)))
			for _, f := range strings.Fields(l.PhasesMs) {
				name, v, _ := strings.Cut(f, "=")
				if x, err := strconv.ParseFloat(v, 64); err == nil {
					phases[name] = append(phases[name], time.Duration(x*float64(time.Millisecond)))
				}
			}
		}
	}
	return StatsOf(out), phases
}

// watchConnections samples the established TCP connections to port (the
// webhook, from the API server) until the returned func is called, which
// returns how many distinct ones it saw.
func watchConnections(port int) func() int {
	hexPort := fmt.Sprintf(":%04X", port)
	seen := map[string]bool{}
	var mu sync.Mutex
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
				data, err := os.ReadFile(file)
				if err != nil {
					continue
				}
				for _, l := range strings.Split(string(data), "\n")[1:] {
					f := strings.Fields(l)
					if len(f) > 3 && strings.HasSuffix(f[1], hexPort) && f[3] == "01" {
						mu.Lock()
						seen[f[2]] = true
						mu.Unlock()
					}
				}
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() int {
		close(done)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
}

// planAuthor writes the benches' Plans (scaleEnv.person), a person of the
// platform team (impersonated with the admin's group: no people's RBAC is
// installed here).
const planAuthor = "platform-admin"

// byAuthor: the phases write their Plans as planAuthor, so they name them
// as their requester (requested-by must be the writer).
func byAuthor(p *upgradev1.Plan) *upgradev1.Plan {
	p.Annotations[gate.AnnotationRequestedBy] = planAuthor
	return p
}
