//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/controlplane"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// The real system-upgrade-controller v0.20.1 (built from the workplace's
// shared/thirdparty archive, hack/suc.sh) runs out of cluster against the
// control plane as its upstream ServiceAccount. No kube-controller-manager or
// kubelet runs here: the tests play the Job controller, marking SUC's Jobs
// complete or failed through the status subresource (testenv.FinishJob), and
// nothing else of a Job ever runs. SUC reacts as in a cluster: it labels the
// node plan.upgrade.cattle.io/<plan>=<hash>, uncordons it, moves on.

var suc struct {
	once sync.Once
	proc *testenv.SUC
	err  error
}

// needSUC starts SUC once for the package. Plans other tests left in SUC's
// namespace are deleted first, so SUC runs only what these tests create.
func needSUC(t *testing.T) *testenv.SUC {
	t.Helper()
	suc.once.Do(func() {
		ctx := context.Background()
		bin, archive, err := testenv.BuildSUC(ctx)
		if err != nil {
			suc.err = err
			return
		}
		if err := env.Admin.DeleteAllOf(ctx, &upgradev1.Plan{}, client.InNamespace(testenv.SUCNamespace)); err != nil {
			suc.err = err
			return
		}
		suc.proc, suc.err = env.StartSUC(ctx, bin, archive, filepath.Join(env.CP.WorkDir(), "suc"))
	})
	if errors.Is(suc.err, testenv.ErrNoSUCSource) {
		t.Skip(suc.err.Error())
	}
	require.NoError(t, suc.err)
	t.Cleanup(func() {
		// One GPU rollout at a time: the next test's Plans start alone.
		var plans upgradev1.PlanList
		require.NoError(t, env.Admin.List(context.Background(), &plans, client.InNamespace(testenv.SUCNamespace)))
		for i := range plans.Items {
			p := &plans.Items[i]
			require.NoError(t, client.IgnoreNotFound(env.Admin.Delete(context.Background(), p)))
			// SUC's Jobs carry no owner reference: a Job still running for a
			// deleted Plan keeps its node out (in flight, in the budget) until
			// SUC's Job handler sees the Plan gone and deletes it, which it does
			// only on the Job's next event. Delete them as SUC would.
			require.NoError(t, env.Admin.DeleteAllOf(context.Background(), &batchv1.Job{}, client.InNamespace(testenv.SUCNamespace),
				client.MatchingLabels{upgradev1.LabelPlan: p.Name}, client.PropagationPolicy(metav1.DeletePropagationBackground)))
			removePlan(t, p)
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			log := strings.Split(suc.proc.Log(), "\n")
			t.Logf("SUC's log (last 80 lines of %s):\n%s", suc.proc.LogPath, strings.Join(log[max(0, len(log)-80):], "\n"))
			var jobs batchv1.JobList
			_ = env.Admin.List(context.Background(), &jobs, client.InNamespace(testenv.SUCNamespace))
			for _, j := range jobs.Items {
				t.Logf("Job %s: parallelism %v, conditions %v", j.Name, j.Spec.Parallelism, j.Status.Conditions)
			}
		}
	})
	return suc.proc
}

func stopSUC() {
	if suc.proc != nil {
		suc.proc.Stop()
	}
}

// sucPlan is a safe V100 Plan that SUC runs once the Secret gate-release
// exists: SUC validates that every Secret a Plan mounts exists before it
// writes any Job, which lets a test set the scene first.
func sucPlan(name, record string, nodes ...string) *upgradev1.Plan {
	p := plan(name, record, nodes...)
	p.Spec.Secrets = []upgradev1.SecretSpec{{Name: "gate-release-" + name, Path: "/run/release"}}
	return p
}

func release(t *testing.T, p *upgradev1.Plan) {
	t.Helper()
	require.NoError(t, env.Admin.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Spec.Secrets[0].Name}}))
}

// unsafePlan is what issue 10 saw pass: unpinned to a record, concurrency
// 10, no cordon; SUC needs a version to resolve, so it has one.
func unsafePlan(name string, sel *metav1.LabelSelector) *upgradev1.Plan {
	p := plan(name, "")
	p.Spec.NodeSelector, p.Spec.Concurrency, p.Spec.Cordon = sel, 10, false
	return p
}

func jobFor(t *testing.T, planName, node string) *batchv1.Job {
	t.Helper()
	var jobs batchv1.JobList
	require.NoError(t, env.Admin.List(context.Background(), &jobs, client.InNamespace(testenv.SUCNamespace),
		client.MatchingLabels{upgradev1.LabelPlan: planName, upgradev1.LabelNode: node}))
	if len(jobs.Items) == 0 {
		return nil
	}
	return &jobs.Items[0]
}

func running(j *batchv1.Job) bool { return j != nil && gate.JobRuns(j.Spec) }

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// jobDenials are the gate's denials of starting planName's Job on node.
func jobDenials(t *testing.T, planName, node string) []controlplane.AuditEvent {
	t.Helper()
	events, err := env.CP.AuditEvents()
	require.NoError(t, err)
	var out []controlplane.AuditEvent
	for _, e := range events {
		if e.Stage == "ResponseComplete" && e.ObjectRef != nil && e.ObjectRef.Resource == "jobs" && e.ObjectRef.Subresource == "" &&
			strings.HasPrefix(e.ObjectRef.Name, "apply-"+planName+"-on-") && e.Annotations[webhook.WebhookJobs+"/decision"] == "deny" &&
			e.Annotations[webhook.WebhookJobs+"/nodes"] == node {
			out = append(out, e)
		}
	}
	return out
}

// stoppedAtTheJob: the gate refused to start the node's Job (at least
// twice: SUC retries on its own) with want among the codes, and no pod of it
// can run: the Job is paused, or not there at all (SUC creates it running
// when the node is already in status.applying, and that create was refused).
func stoppedAtTheJob(t *testing.T, planName, node string, want ...gate.Code) {
	t.Helper()
	eventually(t, 90*time.Second, fmt.Sprintf("SUC retries starting %s's Job on %s and the gate refuses each time", planName, node), func() bool {
		if j := jobFor(t, planName, node); running(j) {
			t.Fatalf("%s's Job on %s started (parallelism %d): the node's upgrade began unjudged", planName, node, *j.Spec.Parallelism)
		}
		return len(jobDenials(t, planName, node)) >= 2
	})
	job := jobFor(t, planName, node)
	assert.False(t, running(job), "the Job is paused or absent: %v", job)
	reasons := strings.Split(jobDenials(t, planName, node)[0].Annotations[webhook.WebhookJobs+"/reasons"], ",")
	for _, c := range want {
		assert.Contains(t, reasons, string(c))
	}
	assert.Equal(t, testenv.SUCUser, jobDenials(t, planName, node)[0].Username())
}

func completeJob(t *testing.T, planName, node string) {
	t.Helper()
	var job *batchv1.Job
	eventually(t, 60*time.Second, fmt.Sprintf("SUC starts %s's Job on %s", planName, node), func() bool {
		job = jobFor(t, planName, node)
		return running(job)
	})
	require.NoError(t, env.FinishJob(context.Background(), job, true))
	eventually(t, 60*time.Second, fmt.Sprintf("SUC labels %s as done with %s", node, planName), func() bool {
		var n corev1.Node
		require.NoError(t, env.Admin.Get(context.Background(), types.NamespacedName{Name: node}, &n))
		return n.Labels[upgradev1.LabelPlanPrefix+planName] != "" && n.Labels[upgradev1.LabelPlanPrefix+planName] == job.Labels[upgradev1.LabelPlanPrefix+planName]
	})
}

// completeUpgrade plays a GPU node's whole upgrade once SUC started its Job
// (none of these parts runs here): the Job's pod cordons the node
// (CordonAsSUCJob), the upgrade moves it to the record's target, which its
// kubelet and nfd-master report (MoveNodeTo), the Job controller completes
// the Job (FinishJob), and the proof arrives (ProveUpgradedNode: the
// validator Ready and an allocation check Succeeded, as the kubelet writes
// them). SUC's completion write passes once the soak elapsed; SUC retries
// the ones refused before on its own (docs/proof.md).
func completeUpgrade(t *testing.T, planName, node string) {
	t.Helper()
	ctx := context.Background()
	var job *batchv1.Job
	eventually(t, 60*time.Second, fmt.Sprintf("SUC starts %s's Job on %s", planName, node), func() bool {
		job = jobFor(t, planName, node)
		return running(job)
	})
	require.NoError(t, env.CordonAsSUCJob(ctx, node))
	require.NoError(t, env.MoveNodeTo(ctx, node, testenv.Target))
	require.NoError(t, env.FinishJob(ctx, job, true))
	require.NoError(t, env.ProveUpgradedNode(ctx, node, time.Now()))
	eventually(t, sucRetryDeadline, fmt.Sprintf("SUC uncordons %s and labels it done with %s", node, planName), func() bool {
		n := getNode(t, node)
		return !n.Spec.Unschedulable && n.Labels[upgradev1.LabelPlanPrefix+planName] != "" && n.Labels[upgradev1.LabelPlanPrefix+planName] == job.Labels[upgradev1.LabelPlanPrefix+planName]
	})
}

func v100Spec(name string, mut func(*corev1.Node)) testenv.NodeSpec {
	return testenv.NodeSpec{Name: name, Fixture: "node-v100.json", Tuple: testenv.Source, Zone: "zone-a", Mutate: mut}
}

// gateReviewed says whether one of the gate's webhooks answered the request.
// reviewedBy says whether the webhook named reviewed the request.
func reviewedBy(e controlplane.AuditEvent, name string) bool {
	_, ok := e.Annotations[name+"/decision"]
	return ok
}

func gateReviewed(e controlplane.AuditEvent) bool {
	for k := range e.Annotations {
		if strings.HasSuffix(k, ".gpu-upgrade-gate.io/decision") {
			return true
		}
	}
	return false
}

// TestSUCJobGuardPausesOnlyThatNode: a GPU holder scheduled after the Plan
// was admitted stops that node's Job and nothing else; SUC's other writes
// never reach the gate; the node starts on SUC's own retry once the holder
// is gone, and is upgraded, proven and completed.
func TestSUCJobGuardPausesOnlyThatNode(t *testing.T) {
	proc := needSUC(t)
	ctx := context.Background()
	// The audit log holds every earlier test's writes too (some play SUC's
	// ServiceAccount on purpose, e.g. TestOwnedFactsAttack7's mode switch):
	// count only this test's.
	began := time.Now()
	require.NoError(t, env.CreateNodes(ctx, []testenv.NodeSpec{v100Spec("suc-v100-a", nil), {Name: "suc-cpu-1", Tuple: testenv.Source, Zone: "zone-a"}}))
	alice, _ := as(t, "alice")
	// One GPU rollout at a time (RolloutInFlight): the Plan beside it is a CPU one.
	pa := sucPlan("suc-a", "v100-r580", "suc-v100-a")
	pc := sucPlan("suc-cpu", "", "suc-cpu-1")
	for _, p := range []*upgradev1.Plan{pa, pc} {
		require.NoError(t, alice.Create(ctx, p), "the request check admits %s", p.Name)
	}
	// Scheduled after the Plan was admitted; the request check could not see it.
	holder := testenv.Holder("suc-train", "suc-v100-a")
	require.NoError(t, env.Admin.Create(ctx, holder))
	for _, p := range []*upgradev1.Plan{pa, pc} {
		release(t, p)
	}

	stoppedAtTheJob(t, "suc-a", "suc-v100-a", gate.CodeGPUHolders)
	den := jobDenials(t, "suc-a", "suc-v100-a")[0]
	assert.Contains(t, den.ResponseStatus.Message, "Plan system-upgrade/suc-a: [GPUHolders] node suc-v100-a runs 1 GPU holder(s): Pod ml/suc-train")
	assert.Contains(t, proc.Log(), `admission webhook \"jobs.gpu-upgrade-gate.io\" denied the request`, "SUC saw the refusal")

	// Nothing else waits: the CPU node runs and finishes.
	completeJob(t, "suc-cpu", "suc-cpu-1")
	assert.False(t, running(jobFor(t, "suc-a", "suc-v100-a")), "the refused node is still paused")

	// The kubelet of the paused node keeps writing its Node (played here).
	kubelet, err := client.New(env.CP.ConfigFor("system:node:suc-v100-a", "system:nodes", "system:authenticated"), client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	require.NoError(t, patchNode(kubelet, "suc-v100-a", `{"metadata":{"labels":{"nvidia.com/gpu.count":"8"}}}`))

	// Only starts of Jobs reached the gate: none of SUC's Node, Plan status
	// or paused-Job writes, none of the kubelet's.
	events, err := env.CP.AuditEvents()
	require.NoError(t, err)
	counts := map[string]int{}
	for _, e := range events {
		if e.Stage != "ResponseComplete" || e.ObjectRef == nil || e.Verb == "get" || e.Verb == "list" || e.Verb == "watch" || e.RequestReceivedTimestamp.Before(began) {
			continue
		}
		what := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			what += "/" + e.ObjectRef.Subresource
		}
		switch u := e.Username(); {
		case u == testenv.SUCUser:
			what = "suc " + e.Verb + " " + what
		case strings.HasPrefix(u, "system:node:"):
			what = "kubelet " + e.Verb + " " + what
		default:
			continue
		}
		if gateReviewed(e) {
			what += " reviewed"
			if strings.HasPrefix(what, "suc ") && !reviewedBy(e, webhook.WebhookCompletions) {
				// A reviewed SUC write is a Job start of one of these Plans,
				// or its completion write of a node (the proof, docs/proof.md).
				assert.Equal(t, "jobs", e.ObjectRef.Resource, "%s %s at %s", what, e.ObjectRef.Name, e.RequestReceivedTimestamp)
			}
		}
		counts[what]++
	}
	t.Logf("SUC's and kubelets' writes in the audit log since this test began (%s ago): %v", time.Since(began).Round(time.Second), counts)
	for _, w := range []string{"suc update nodes", "suc update plans/status", "suc create jobs", "kubelet patch nodes"} {
		assert.Positive(t, counts[w], "SUC/kubelet wrote %q unreviewed", w)
	}
	for w, n := range counts {
		if strings.HasSuffix(w, " reviewed") {
			assert.True(t, strings.HasPrefix(w, "suc ") && (strings.Contains(w, " jobs ") || w == "suc update nodes reviewed"),
				"%d reviews of %q: only SUC's Job starts and completion writes may reach the gate", n, w)
		}
	}
	assert.GreaterOrEqual(t, counts["suc patch jobs reviewed"]+counts["suc update jobs reviewed"]+counts["suc create jobs reviewed"], 3,
		"the starts: suc-cpu once, suc-a at least twice")

	// The cause goes; SUC's own retry starts the node.
	require.NoError(t, env.Admin.Delete(ctx, holder, client.GracePeriodSeconds(0)))
	completeUpgrade(t, "suc-a", "suc-v100-a")
}

// TestSUCJobGuardStopsBypasses: each way issue 10 found to bring a GPU node
// into an unjudged rollout ends at the node's Job.
func TestSUCJobGuardStopsBypasses(t *testing.T) {
	needSUC(t)
	ctx := context.Background()
	alice, _ := as(t, "alice")
	unsafe := []gate.Code{gate.CodeConcurrencyNotSerial, gate.CodeCordonRequired, gate.CodeRecordMissing}

	t.Run("a Plan admitted while it selected no GPU node, then a GPU node labelled in through nodes/status", func(t *testing.T) {
		require.NoError(t, env.CreateNodes(ctx, []testenv.NodeSpec{v100Spec("suc-v100-late", nil)}))
		p := unsafePlan("suc-late", &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "suc-late"}})
		require.NoError(t, alice.Create(ctx, p), "no node carries the label yet: nothing for the request check to judge")
		var n corev1.Node
		require.NoError(t, env.Admin.Get(ctx, types.NamespacedName{Name: "suc-v100-late"}, &n))
		n.Labels["pool"] = "suc-late"
		// A person's label change through nodes/status is now reviewed like
		// one through the Node: the request check refuses it.
		err := env.Admin.Status().Update(ctx, n.DeepCopy())
		require.Error(t, err, "label changes through nodes/status reach the Node webhook")
		assert.Contains(t, err.Error(), "Plan system-upgrade/suc-late:")
		// The kubelet's own status write never reaches it (not-a-kubelet):
		// that one ends at the Job.
		kubelet, err := client.New(env.CP.ConfigFor("system:node:suc-v100-late", "system:nodes", "system:authenticated"), client.Options{Scheme: env.Scheme})
		require.NoError(t, err)
		require.NoError(t, kubelet.Status().Update(ctx, &n), "the kubelet's status write is not reviewed")
		stoppedAtTheJob(t, "suc-late", "suc-v100-late", unsafe...)
	})

	t.Run("a GPU node labelled in by an exempt identity (NFD master)", func(t *testing.T) {
		require.NoError(t, env.CreateNodes(ctx, []testenv.NodeSpec{v100Spec("suc-v100-nfd", nil)}))
		p := unsafePlan("suc-nfd", &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "suc-nfd"}})
		require.NoError(t, alice.Create(ctx, p))
		// NFD master as NFD's chart runs it (helm install nfd), exempt by its
		// namespace's group, with the rights its chart grants (here through
		// the platform-admins binding).
		nfd, err := client.New(env.CP.ConfigFor("system:serviceaccount:node-feature-discovery:nfd-node-feature-discovery",
			"system:serviceaccounts", "system:serviceaccounts:node-feature-discovery", "platform-admins", "system:authenticated"), client.Options{Scheme: env.Scheme})
		require.NoError(t, err)
		require.NoError(t, patchNode(nfd, "suc-v100-nfd", `{"metadata":{"labels":{"pool":"suc-nfd"}}}`), "exempt from the Node webhook")
		stoppedAtTheJob(t, "suc-nfd", "suc-v100-nfd", unsafe...)
	})

	t.Run("a stripped-identity GPU node: no GPU label left, GPU capacity still reported", func(t *testing.T) {
		require.NoError(t, env.CreateNodes(ctx, []testenv.NodeSpec{v100Spec("suc-v100-stripped", func(n *corev1.Node) {
			for k := range n.Labels {
				if strings.HasPrefix(k, "feature.node.kubernetes.io/pci-") || strings.HasPrefix(k, "nvidia.com/") {
					delete(n.Labels, k)
				}
			}
		})}))
		var n corev1.Node
		require.NoError(t, env.Admin.Get(ctx, types.NamespacedName{Name: "suc-v100-stripped"}, &n))
		require.Equal(t, "8", n.Status.Capacity.Name("nvidia.com/gpu", resource.DecimalSI).String(), "the kubelet still reports the GPUs")
		// GPU capacity makes a GPU node for the request check too
		// (gate/gpunode.go), so the Plan is refused there; admitted while it
		// selected nothing and joined by the kubelet's label, it ends at the Job.
		p := unsafePlan("suc-stripped", &metav1.LabelSelector{MatchLabels: map[string]string{upgradev1.LabelHostname: "suc-v100-stripped"}})
		err := alice.Create(ctx, p.DeepCopy())
		require.Error(t, err, "the request check sees the GPU node by its capacity")
		assert.Contains(t, err.Error(), "denied the request")
		p.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "suc-stripped"}}
		require.NoError(t, alice.Create(ctx, p), "no node carries the label yet")
		kubelet, err := client.New(env.CP.ConfigFor("system:node:suc-v100-stripped", "system:nodes", "system:authenticated"), client.Options{Scheme: env.Scheme})
		require.NoError(t, err)
		require.NoError(t, patchNode(kubelet, "suc-v100-stripped", `{"metadata":{"labels":{"pool":"suc-stripped"}}}`), "the kubelet's write is not reviewed")
		stoppedAtTheJob(t, "suc-stripped", "suc-v100-stripped", append(unsafe, gate.CodeHardwareUnknown)...)
	})

	t.Run("a label written a few ms before the Plan", func(t *testing.T) {
		// The request check reads the node cache, which may lag the label by
		// milliseconds; the race goes either way, so each attempt fires the
		// label and the Plan together, and whichever got through must end at
		// the Job.
		const attempts = 8
		var specs []testenv.NodeSpec
		for i := range attempts {
			specs = append(specs, v100Spec(fmt.Sprintf("suc-v100-race-%d", i), nil))
		}
		require.NoError(t, env.CreateNodes(ctx, specs))
		raced := 0
		for i := range attempts {
			node, key := fmt.Sprintf("suc-v100-race-%d", i), fmt.Sprintf("suc-race-%d", i)
			p := unsafePlan(key, &metav1.LabelSelector{MatchLabels: map[string]string{"pool": key}})
			var labelErr, planErr error
			var wg sync.WaitGroup
			wg.Go(func() { labelErr = patchNode(alice, node, `{"metadata":{"labels":{"pool":"`+key+`"}}}`) })
			time.Sleep(time.Duration(i) * time.Millisecond)
			wg.Go(func() { planErr = alice.Create(ctx, p) })
			wg.Wait()
			if labelErr != nil || planErr != nil {
				t.Logf("attempt %d: the request check caught it (label: %v; plan: %v)", i, labelErr != nil, planErr != nil)
				continue
			}
			raced++
			stoppedAtTheJob(t, key, node, unsafe...)
		}
		t.Logf("%d of %d label+Plan pairs passed the request check; each was stopped at the node's Job", raced, attempts)
	})
}

// TestSUCSelectionEqualsGatePending (issue 11 item 3): with the real SUC
// running a Plan the gate admitted, the nodes SUC upgrades are the nodes the
// gate judged as pending, node by node, including a node already at the
// target tuple that lacks plan.upgrade.cattle.io/<plan>=<latestHash>.
func TestSUCSelectionEqualsGatePending(t *testing.T) {
	needSUC(t)
	ctx := context.Background()
	const name = "suc-pending"
	require.NoError(t, env.CreateNodes(ctx, []testenv.NodeSpec{
		v100Spec("suc-pend-source", nil),
		{Name: "suc-pend-at-target", Fixture: "node-v100.json", Tuple: testenv.Target, Zone: "zone-a"},
		v100Spec("suc-pend-disabled", func(n *corev1.Node) { n.Labels[upgradev1.LabelPlanPrefix+name] = upgradev1.LabelPlanValueDisabled }),
	}))
	nodes := []string{"suc-pend-source", "suc-pend-at-target", "suc-pend-disabled"}
	// Two of them end at the target, one proven moments ago: remove them
	// and the Plan so they hold no later V100 Plan.
	t.Cleanup(func() {
		assert.NoError(t, client.IgnoreNotFound(env.Admin.Delete(ctx, &upgradev1.Plan{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SUCNamespace, Name: name}})))
		removeV100Nodes(t, "after-"+name, nodes...)
	})
	// The node at the target is proven (validator Ready, allocation check
	// Succeeded, written as its kubelet would), so SUC's completion write of
	// it passes the proof (docs/proof.md).
	require.NoError(t, proveNode(ctx, "suc-pend-at-target", now.Add(-2*time.Hour)))
	alice, _ := as(t, "alice")
	p := sucPlan(name, "v100-r580", nodes...)
	require.NoError(t, alice.Create(ctx, p))
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ev, err := env.CP.WaitAuditEvent(wctx, func(e controlplane.AuditEvent) bool {
		return e.ObjectRef != nil && e.ObjectRef.Resource == "plans" && e.ObjectRef.Name == name && e.Verb == "create" && e.Stage == "ResponseComplete"
	})
	require.NoError(t, err)
	var pending []string
	if s := ev.Annotations[webhook.WebhookPlans+"/nodes"]; s != "" {
		pending = strings.Split(s, ",")
	}
	release(t, p)

	// Play the Job controller until SUC reports the Plan complete; SUC
	// starts one node at a time (concurrency 1).
	var selected []string
	eventually(t, 3*time.Minute, "SUC completes the Plan", func() bool {
		var jobs batchv1.JobList
		require.NoError(t, env.Admin.List(ctx, &jobs, client.InNamespace(testenv.SUCNamespace), client.MatchingLabels{upgradev1.LabelPlan: name}))
		for i := range jobs.Items {
			j := &jobs.Items[i]
			node := j.Labels[upgradev1.LabelNode]
			if !slices.Contains(selected, node) {
				selected = append(selected, node)
			}
			if running(j) && j.Status.CompletionTime == nil {
				if node == "suc-pend-source" {
					// The upgrade moves the node to the target, which its
					// kubelet and nfd-master report (played here): SUC's
					// completion of a node short of the target is refused.
					require.NoError(t, env.MoveNodeTo(ctx, node, testenv.Target))
				}
				require.NoError(t, env.FinishJob(ctx, j, true))
				switch node {
				case "suc-pend-at-target":
					// The upgrade ran again: a new allocation check proves it.
					require.NoError(t, reproveAllocation(ctx, node))
				case "suc-pend-source":
					// Its proof arrives (validator Ready, allocation check
					// Succeeded, as the kubelet writes them).
					require.NoError(t, env.ProveUpgradedNode(ctx, node, time.Now()))
				}
			}
		}
		var cur upgradev1.Plan
		require.NoError(t, env.Admin.Get(ctx, client.ObjectKeyFromObject(p), &cur))
		return len(cur.Status.Applying) == 0 && slices.ContainsFunc(cur.Status.Conditions, func(c upgradev1.GenericCondition) bool {
			return c.Type == "Complete" && c.Status == corev1.ConditionTrue
		}) && len(selected) > 0
	})
	sort.Strings(selected)
	sort.Strings(pending)
	assert.NotContains(t, selected, "suc-pend-disabled", "SUC skips an opted-out node")
	assert.Contains(t, selected, "suc-pend-at-target", "SUC upgrades a node at the target tuple that lacks the Plan's hash label")
	assert.Equal(t, selected, pending, "node by node: the nodes SUC upgraded vs the nodes the gate judged as pending")
}

// TestJobMatchConditions: the chart's Job webhook, evaluated by the real API
// server, sees only SUC's writes that start a Job in a SUC namespace. The Job
// names a Plan that does not exist, so any review would refuse it
// (FactsMissing): an allowed write was never sent. Server-side dry runs:
// nothing is stored.
func TestJobMatchConditions(t *testing.T) {
	ctx := context.Background()
	// Rights to write Jobs, for SUC's ServiceAccount and alice (no
	// controller-manager aggregates the bootstrap edit role here).
	require.NoError(t, client.IgnoreAlreadyExists(env.Admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-jobs"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create", "update", "patch", "get"}}}})))
	for _, ns := range []string{testenv.SUCNamespace, "ml"} {
		grant(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e2e-jobs"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "e2e-jobs"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts:" + testenv.SUCNamespace}, {Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}})
	}
	sucClient, err := client.New(env.CP.ConfigFor(testenv.SUCUser), client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	alice, _ := as(t, "alice")
	job := func(ns string, parallelism int32, labels map[string]string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "apply-mc-", Labels: labels},
			Spec: batchv1.JobSpec{Parallelism: &parallelism, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "upgrade", Image: "rancher/rke2-upgrade:v1.36.1-rke2r1"}}}}}}
	}
	sucLabels := map[string]string{upgradev1.LabelPlan: "mc-no-such-plan", upgradev1.LabelNode: "gpu-v100-holder"}
	cases := []struct {
		name     string
		c        client.Client
		job      *batchv1.Job
		reviewed bool
	}{
		{"SUC creates a running Job", sucClient, job(testenv.SUCNamespace, 1, sucLabels), true},
		{"SUC creates its Job paused", sucClient, job(testenv.SUCNamespace, 0, sucLabels), false},
		// Reviewed and refused (SUCJobForged, TestSUCJobForgedThroughAPIServer).
		{"a person's running Job with SUC's labels", alice, job(testenv.SUCNamespace, 1, sucLabels), true},
		{"SUC's running Job without the plan label", sucClient, job(testenv.SUCNamespace, 1, map[string]string{upgradev1.LabelNode: "gpu-v100-holder"}), false},
		{"SUC's running Job outside the SUC namespaces", sucClient, job("ml", 1, sucLabels), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Create(ctx, tc.job, client.DryRunAll)
			if !tc.reviewed {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), `admission webhook "jobs.gpu-upgrade-gate.io" denied the request`)
			if tc.c == alice {
				requireDenied(t, err, gate.CodeSUCJobForged)
				return
			}
			assert.Contains(t, err.Error(), "[FactsMissing] the Job's Plan system-upgrade/mc-no-such-plan (for node gpu-v100-holder) cannot be read")
		})
	}

	// Updates of a stored Job (no controller label, so a running SUC leaves
	// it alone): only paused -> running is a start.
	paused := job(testenv.SUCNamespace, 0, sucLabels)
	require.NoError(t, sucClient.Create(ctx, paused), "SUC's paused create")
	defer env.Admin.Delete(ctx, paused)
	relabel := paused.DeepCopy()
	relabel.Labels["note"] = "relabel"
	require.NoError(t, sucClient.Update(ctx, relabel, client.DryRunAll), "a relabel of a paused Job starts nothing")
	start := paused.DeepCopy()
	start.Spec.Parallelism = ptrTo(int32(1))
	err = sucClient.Update(ctx, start, client.DryRunAll)
	require.Error(t, err, "raising parallelism 0 -> 1 is the start")
	assert.Contains(t, err.Error(), `admission webhook "jobs.gpu-upgrade-gate.io" denied the request`)
	// A person's raise is not SUC's step, and only SUC starts SUC's Job.
	requireDenied(t, alice.Update(ctx, start, client.DryRunAll), gate.CodeSUCJobForged)
}

func ptrTo[T any](v T) *T { return &v }
