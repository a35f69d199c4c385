//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Issue 22's attacks 1, 3, 4 and 6 through the real API server (and the
// real SUC where SUC acts): a node's rollout state comes from facts only
// their owners write, so a person's opt-out, relabel, Plan deletion or
// made-up label does not make an out node serving. The kubelet, the Job
// controller, nfd-master (with GFD) and the GPU Operator are played by
// writing what they write, each under its own identity.

// halfway is the tuple of a node whose upgrade stopped half way: the kernel
// moved, RKE2 and the driver not.
var halfway = func() qualification.Tuple {
	t := testenv.Source
	t.Kernel = testenv.Target.Kernel
	return t
}()

// gpuOperator acts as the GPU Operator's ServiceAccount (its rights come
// from driverWorld, standing in for the operator's chart).
func gpuOperator(t *testing.T) client.Client {
	t.Helper()
	driverWorld(t)
	op, err := client.New(env.CP.ConfigFor(operatorSA, "system:serviceaccounts", "system:serviceaccounts:gpu-operator", "system:authenticated"), client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	return op
}

// heartbeat writes node's kubelet status heartbeat, as that kubelet: the
// Ready condition's lastHeartbeatTime (and, unchanged, the rest).
func heartbeat(t *testing.T, node string) {
	t.Helper()
	kubelet, err := env.KubeletClient(node)
	require.NoError(t, err)
	var n corev1.Node
	require.NoError(t, kubelet.Get(context.Background(), client.ObjectKey{Name: node}, &n))
	for i := range n.Status.Conditions {
		n.Status.Conditions[i].LastHeartbeatTime = metav1.Now()
	}
	require.NoError(t, kubelet.Status().Update(context.Background(), &n), "the kubelet's heartbeat of %s", node)
}

// storedPlanFor stores a V100 Plan of record v100-r580 as alice that SUC
// never runs (its release Secret is never created), on a fresh V100 node at
// the source; cleanup deletes both. Other tests' Plans go first: one GPU
// rollout at a time.
func storedPlanFor(t *testing.T, name, node string) *upgradev1.Plan {
	t.Helper()
	needSUC(t) // SUC's RBAC lets its ServiceAccount cordon (CordonAsSUCJob)
	ctx := context.Background()
	require.NoError(t, env.Admin.DeleteAllOf(ctx, &upgradev1.Plan{}, client.InNamespace(testenv.SUCNamespace)))
	require.NoError(t, env.CreateNodes(ctx, []testenv.NodeSpec{v100Spec(node, nil)}))
	p := sucPlan(name, "v100-r580", node)
	alice, _ := as(t, "alice")
	eventuallyWrite(t, func() error { return alice.Create(ctx, p.DeepCopy(), client.DryRunAll) })
	require.NoError(t, alice.Create(ctx, p))
	t.Cleanup(func() {
		removePlan(t, p)
		removeV100Nodes(t, "after-"+name, node)
	})
	return p
}

// TestInFlightNodeStaysOutThroughAPIServer: issue 22 attack 1, with the real
// SUC. The first node of a wave is cordoned by its Job and half upgraded
// (kernel moved, RKE2 not), its Job still running. A person then opts it
// out of the Plan, or the kubelet re-registers it under another hostname
// (a person's relabel is refused), or the Plan is deleted: SUC moves on to
// the second node, and the gate refuses its Job start (or its Plan) because
// the first node is still out and its rollout still in flight. On the code
// before issue 22 the gate forgot the first node and SUC started the second.
func TestInFlightNodeStaysOutThroughAPIServer(t *testing.T) {
	ctx := context.Background()
	alice, _ := as(t, "alice")
	// halfUpgraded starts the wave and stops its first node half way.
	halfUpgraded := func(t *testing.T, name string) (*sucWave, string, string) {
		w := startSUCWave(t, name)
		first, _ := w.started(t)
		require.NoError(t, env.CordonAsSUCJob(ctx, first), "the cordon of SUC's Job")
		require.NoError(t, env.MoveNodeTo(ctx, first, halfway), "the kernel moved, RKE2 not")
		return w, first, w.other(first)
	}
	// secondHeld: SUC tries the second node and the gate refuses its Job
	// start, naming the first node; the second node's Job never runs.
	secondHeld := func(t *testing.T, w *sucWave, first, second string) {
		eventually(t, sucRetryDeadline, "SUC tries "+second+"'s Job and the gate refuses it", func() bool {
			if running(jobFor(t, w.plan.Name, second)) {
				t.Fatalf("SUC started %s's Job while %s is half upgraded", second, first)
			}
			return len(w.jobDenials(t, second)) > 0
		})
		msg := w.jobDenials(t, second)[0].ResponseStatus.Message
		assert.Contains(t, msg, first, "the refusal names the node still out")
		t.Logf("SUC's Job start of %s refused: %s", second, msg)
		assert.False(t, running(jobFor(t, w.plan.Name, second)))
	}
	// haltSeen: the first node's Job fails (the Job controller, played):
	// halt detection still finds it, the Plan no longer selecting it.
	haltSeen := func(t *testing.T, w *sucWave, first string) {
		require.NoError(t, env.FinishJob(ctx, jobFor(t, w.plan.Name, first), false))
		probe := sucPlan("probe-"+w.plan.Name, "v100-r580", "gpu-v100-01")
		var err error
		eventually(t, 15*time.Second, "a probe Plan of the hardware is refused as halted", func() bool {
			err = alice.Create(ctx, probe.DeepCopy(), client.DryRunAll)
			return err != nil && strings.Contains(err.Error(), "[RolloutHalted]")
		})
		assert.Contains(t, err.Error(), "is halted: node "+first+": SUC Job system-upgrade/")
	}

	t.Run("opted out of its Plan", func(t *testing.T) {
		w, first, second := halfUpgraded(t, "optout")
		// The opt-out stays a person's right (SUC documents it): allowed.
		require.NoError(t, patchNode(alice, first, `{"metadata":{"labels":{"`+upgradev1.LabelPlanName(w.plan.Name)+`":"disabled"}}}`))
		secondHeld(t, w, first, second)
		haltSeen(t, w, first)
	})
	t.Run("its hostname label rewritten", func(t *testing.T) {
		w, first, second := halfUpgraded(t, "rehost")
		// A person's relabel is refused (the kubelet owns it).
		err := patchNode(alice, first, `{"metadata":{"labels":{"kubernetes.io/hostname":"elsewhere"}}}`)
		requireDeniedWith(t, err, gate.CodeOwnedFactWritten)
		// The kubelet may set it (re-registered with --hostname-override,
		// played): SUC's status.applying no longer maps back to the node.
		kubelet, err := env.KubeletClient(first)
		require.NoError(t, err)
		require.NoError(t, patchNode(kubelet, first, `{"metadata":{"labels":{"kubernetes.io/hostname":"elsewhere"}}}`), "the kubelet's own label")
		// The relabelled node no longer matches the Plan's selector, so SUC
		// resyncs the Plan on the next event of a node it selects: the
		// second node's kubelet heartbeat (played).
		heartbeat(t, second)
		secondHeld(t, w, first, second)
		haltSeen(t, w, first)
	})
	t.Run("its Plan deleted", func(t *testing.T) {
		w, first, second := halfUpgraded(t, "gone")
		require.NoError(t, alice.Delete(ctx, w.plan))
		// SUC deletes a deleted Plan's Job on the Job's next event
		// (handle_batch.go): played, its pod killed half way.
		job := jobFor(t, w.plan.Name, first)
		require.NoError(t, env.Admin.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)))
		eventually(t, 30*time.Second, "the Job is gone", func() bool { return jobFor(t, w.plan.Name, first) == nil })
		// A Plan for the second node: refused, the first node is out (and,
		// its cordon undated here, stranded half way: a halt, see
		// TestStrandedNodeHaltsThroughAPIServer).
		next := sucPlan("gone-next", "v100-r580", second)
		eventually(t, 15*time.Second, "the Plan for "+second+" is refused, "+first+" out", func() bool {
			err := alice.Create(ctx, next.DeepCopy(), client.DryRunAll)
			return err != nil && strings.Contains(err.Error(), "[DisruptionBudgetExceeded]")
		})
		err := alice.Create(ctx, next.DeepCopy())
		requireDeniedWith(t, err, gate.CodeDisruptionBudgetExceeded)
		assert.Contains(t, err.Error(), "already out: "+first+" (cordoned")
	})
}

// TestHaltedUncordonWithMadeUpIdentity: issue 22 attack 3. A GPU node whose
// driver upgrade failed (the GPU Operator's upgrade-failed state, played)
// halts its hardware's rollout; a person's uncordon that adds a made-up
// second NVIDIA PCI identity in the same patch (changing the node's
// hardware set, and so its halt's key) is refused. The safe neighbour:
// once the operator's state leaves upgrade-failed and the node is on its
// source, the plain uncordon is allowed.
func TestHaltedUncordonWithMadeUpIdentity(t *testing.T) {
	const node = "halt3-v100"
	storedPlanFor(t, "halt3", node)
	alice, _ := as(t, "alice")
	op := gpuOperator(t)
	require.NoError(t, env.CordonAsSUCJob(context.Background(), node))
	require.NoError(t, patchNode(op, node, `{"metadata":{"labels":{"`+gate.LabelDriverUpgradeState+`":"upgrade-failed"}}}`), "the operator's own state")
	t.Cleanup(func() { _ = patchNode(op, node, `{"metadata":{"labels":{"`+gate.LabelDriverUpgradeState+`":null}}}`) })

	const madeUp = "feature.node.kubernetes.io/pci-10de_0000_10de_0000.present"
	attack := `{"spec":{"unschedulable":false},"metadata":{"labels":{"` + madeUp + `":"true"}}}`
	eventuallyWrite(t, func() error { return patchNode(alice, node, attack) }, gate.CodeRolloutHalted, gate.CodeOwnedFactWritten)
	err := patchNode(alice, node, attack)
	requireDeniedWith(t, err, gate.CodeRolloutHalted, gate.CodeOwnedFactWritten)
	assert.Contains(t, err.Error(), "upgrade-failed")
	n := getNode(t, node)
	assert.True(t, n.Spec.Unschedulable, "the halted node stays cordoned")
	assert.NotContains(t, n.Labels, madeUp)

	// The plain uncordon of the halted node is refused too.
	requireDeniedWith(t, patchNode(alice, node, `{"spec":{"unschedulable":false}}`), gate.CodeRolloutHalted)

	// The safe neighbour: the failure is over (the operator moves on) and
	// the node never left its source: its uncordon is allowed.
	require.NoError(t, patchNode(op, node, `{"metadata":{"labels":{"`+gate.LabelDriverUpgradeState+`":"upgrade-done"}}}`))
	eventuallyWrite(t, func() error {
		return alice.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}},
			client.RawPatch(types.MergePatchType, []byte(`{"spec":{"unschedulable":false}}`)), client.DryRunAll)
	})
}

// TestOptOutThenUncordonUnproven: issue 22 attack 4. A node at its Plan's
// destination, cordoned by SUC's Job (played) and not proven: a person opts
// it out of the Plan (allowed: SUC's documented opt-out), then uncordons it
// in a second write: refused, the node stays cordoned. The safe neighbour:
// once proven, the same uncordon is allowed.
func TestOptOutThenUncordonUnproven(t *testing.T) {
	const node = "optout4-v100"
	ctx := context.Background()
	p := storedPlanFor(t, "optout4", node)
	alice, _ := as(t, "alice")
	require.NoError(t, env.CordonAsSUCJob(ctx, node))
	require.NoError(t, env.MoveNodeTo(ctx, node, testenv.Target))
	require.NoError(t, patchNode(alice, node, `{"metadata":{"labels":{"`+upgradev1.LabelPlanName(p.Name)+`":"disabled"}}}`), "the opt-out alone is allowed")

	uncordon := func(opts ...client.PatchOption) error {
		return alice.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"unschedulable":false}}`)), opts...)
	}
	eventuallyWrite(t, func() error { return uncordon(client.DryRunAll) }, gate.CodeUncordonBeforeProof)
	err := uncordon()
	requireDeniedWith(t, err, gate.CodeUncordonBeforeProof)
	assert.Contains(t, err.Error(), node)
	assert.True(t, getNode(t, node).Spec.Unschedulable, "the unproven node stays cordoned")

	require.NoError(t, proveNode(ctx, node, time.Now().Add(-time.Hour)))
	eventuallyWrite(t, func() error { return uncordon() })
}

// TestHaltNamesTheMoverThroughAPIServer: issue 22 attack 6, with the real
// SUC and the gate's halt loop. dave's Plan selects nodes by a label; alice
// pulls a node into it (without naming herself: MovedByMissing; naming
// herself: allowed); SUC runs its Job, which fails (the Job controller,
// played); the halt names dave as the requester and alice as the mover;
// neither may clear it; bob (neither) clears it.
func TestHaltNamesTheMoverThroughAPIServer(t *testing.T) {
	needSUC(t)
	ctx := context.Background()
	const node = "moved6-v100"
	require.NoError(t, env.Admin.DeleteAllOf(ctx, &upgradev1.Plan{}, client.InNamespace(testenv.SUCNamespace)))
	require.NoError(t, env.CreateNodes(ctx, []testenv.NodeSpec{v100Spec(node, nil)}))
	t.Cleanup(func() { removeV100Nodes(t, "after-moved6", node) })
	dir := filepath.Join(env.CP.WorkDir(), "moved6")
	bin, err := testenv.BuildServe(ctx, dir)
	require.NoError(t, err)
	keeper := startHaltKeeper(t, bin, filepath.Join(dir, "serve"))
	t.Cleanup(func() { _ = keeper.Stop() })
	alice, _ := as(t, "alice")
	bob, _ := as(t, "bob")
	dave, _ := as(t, "dave")
	key := gate.HardwareKey([]string{"10de:1db6/10de:124a"})

	p := sucPlan("moved6", "v100-r580")
	p.Annotations[gate.AnnotationRequestedBy] = "dave"
	p.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"wave6": "next"}}
	require.NoError(t, dave.Create(ctx, p), "it selects no node yet")
	release(t, p)

	// The gate's Plan cache sees moved6 a moment after its create: a dry
	// run waits for that, then the write itself is refused.
	eventuallyWrite(t, func() error {
		return alice.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"wave6":"next"}}}`)), client.DryRunAll)
	}, gate.CodeMovedByMissing)
	requireDenied(t, patchNode(alice, node, `{"metadata":{"labels":{"wave6":"next"}}}`), gate.CodeMovedByMissing)
	require.NoError(t, patchNode(alice, node, `{"metadata":{"labels":{"wave6":"next"},"annotations":{"`+gate.AnnotationMovedBy+`":"alice"}}}`), "alice names herself")

	eventually(t, 60*time.Second, "SUC starts moved6's Job", func() bool { return running(jobFor(t, "moved6", node)) })
	require.NoError(t, env.CordonAsSUCJob(ctx, node))
	require.NoError(t, env.FinishJob(ctx, jobFor(t, "moved6", node), false))
	eventually(t, 30*time.Second, "the halt loop records the halt", func() bool { _, ok := haltRecord(t).Halts[key]; return ok })
	h := haltRecord(t).Halts[key]
	assert.Equal(t, node, h.Node)
	assert.Equal(t, "dave", h.RequestedBy)
	assert.Equal(t, "alice", h.MovedBy)

	clear := func(c client.Client) error { return clearHalt(ctx, c, key, "INC-4806 the driver is fixed") }
	for _, who := range []struct {
		name string
		c    client.Client
	}{{"alice", alice}, {"dave", dave}} {
		err := clear(who.c)
		requireDenied(t, err, gate.CodeRolloutHalted)
		assert.Contains(t, err.Error(), who.name, fmt.Sprintf("the refusal of %s's clear names them", who.name))
	}
	require.NoError(t, env.Admin.Delete(ctx, jobFor(t, "moved6", node), client.PropagationPolicy(metav1.DeletePropagationBackground)))
	require.NoError(t, clear(bob), "bob neither requested nor moved it")
	eventually(t, 30*time.Second, "the gate removes the cleared halt", func() bool { _, ok := haltRecord(t).Halts[key]; return !ok })
}

// TestStrandedNodeHaltsThroughAPIServer: issue 22 item 2, with the real
// SUC. A node stopped half way (kernel moved, RKE2 not, cordoned by its
// Job) whose Plan is deleted, and its Job with it (as SUC does), becomes a
// failure once the recovery timeout has passed since its cordon (the node
// lifecycle controller's unschedulable taint, played, dates it): the next
// Plan of its hardware is refused as halted and a person's uncordon is
// refused. Within the timeout (the neighbouring case) it is out, not
// failed. The webhook runs with a recovery timeout of 20s here.
func TestStrandedNodeHaltsThroughAPIServer(t *testing.T) {
	ctx := context.Background()
	alice, _ := as(t, "alice")
	defer restartWith(t, func(c *gate.Config) { c.Halts.RecoveryTimeout = metav1.Duration{Duration: 20 * time.Second} })()
	w := startSUCWave(t, "strand")
	first, job := w.started(t)
	require.NoError(t, env.CordonAsSUCJob(ctx, first), "the cordon of SUC's Job")
	// The node lifecycle controller dates the cordon (played: it does not run here).
	n := getNode(t, first)
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: gate.TaintUnschedulable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &metav1.Time{Time: time.Now()}})
	require.NoError(t, env.Admin.Update(ctx, n))
	require.NoError(t, env.MoveNodeTo(ctx, first, halfway), "the kernel moved, RKE2 not")
	require.NoError(t, alice.Delete(ctx, w.plan))
	require.NoError(t, env.Admin.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)), "SUC deletes a deleted Plan's Job (played)")
	eventually(t, 30*time.Second, "the Job is gone", func() bool { return jobFor(t, w.plan.Name, first) == nil })

	probe := sucPlan("strand-probe", "v100-r580", w.other(first))
	uncordon := func() error {
		return alice.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: first}}, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"unschedulable":false}}`)), client.DryRunAll)
	}
	// Within the timeout: out (the budget), not failed. The gate's Job
	// cache may see the deletion a moment after the API server does.
	var err error
	eventually(t, 10*time.Second, "the gate sees the Job gone", func() bool {
		err = alice.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return err == nil || !strings.Contains(err.Error(), "["+string(gate.CodeRolloutInFlight)+"]")
	})
	requireDenied(t, err, gate.CodeDisruptionBudgetExceeded)

	var last error
	eventually(t, time.Minute, "the stranded node halts its hardware once the recovery timeout passed", func() bool {
		last = alice.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return last != nil && strings.Contains(last.Error(), "[RolloutHalted]")
	})
	assert.Contains(t, last.Error(), "is halted: node "+first+": tuple half applied and no stored Plan moves it")
	err = uncordon()
	requireDeniedWith(t, err, gate.CodeRolloutHalted)
	assert.Contains(t, err.Error(), "node "+first+" failed its upgrade")
	assert.True(t, getNode(t, first).Spec.Unschedulable)
}

// sucJobWriter acts as SUC's ServiceAccount with the right to write Jobs in
// SUC's namespace (SUC's chart gives it; needSUC's RBAC is not installed
// unless the real SUC runs).
func sucJobWriter(t *testing.T) client.Client {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, client.IgnoreAlreadyExists(env.Admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-suc-jobs"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create", "update", "patch", "get", "delete"}}}})))
	grant(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SUCNamespace, Name: "e2e-suc-jobs"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "e2e-suc-jobs"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts:" + testenv.SUCNamespace}}})
	return sucServiceAccount(t)
}

// TestSUCJobForgedThroughAPIServer: issue 22, SUC's Jobs are named by their
// labels only (SUC sets no owner reference). A person who may create Jobs
// in SUC's namespace creates one with SUC's labels for a GPU node, paused
// or running: refused (SUCJobForged), so it can never make that node's
// cordon SUC's. The neighbouring safe cases: the same person's Job without
// SUC's labels, and SUC's own (paused) create of the same Job. The real
// SUC's own Jobs are never refused (TestInFlightNodeStaysOutThroughAPIServer
// and the other SUC tests run them through the same webhook).
func TestSUCJobForgedThroughAPIServer(t *testing.T) {
	ctx := context.Background()
	suc := sucJobWriter(t)
	grant(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SUCNamespace, Name: "e2e-alice-jobs"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "e2e-suc-jobs"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}})
	alice, _ := as(t, "alice")
	job := func(parallelism int32, labels map[string]string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SUCNamespace, Name: "apply-forged-on-gpu-v100-02", Labels: labels},
			Spec: batchv1.JobSpec{Parallelism: &parallelism, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "upgrade", Image: "rancher/rke2-upgrade:v1.36.1-rke2r1"}}}}}}
	}
	sucLabels := map[string]string{upgradev1.LabelPlan: "forged", upgradev1.LabelNode: "gpu-v100-02"}
	for _, parallelism := range []int32{0, 1} {
		err := alice.Create(ctx, job(parallelism, sucLabels), client.DryRunAll)
		requireDenied(t, err, gate.CodeSUCJobForged)
		assert.Contains(t, err.Error(), `is written by "alice", not by SUC`)
	}
	require.NoError(t, alice.Create(ctx, job(1, map[string]string{"team": "ml"}), client.DryRunAll), "a person's own Job")
	require.NoError(t, suc.Create(ctx, job(0, sucLabels), client.DryRunAll), "SUC's paused create")
}
