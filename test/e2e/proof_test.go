//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// The proof of an upgraded node through the real API server. No kubelet,
// GPU Operator or scheduler runs: the test writes what they would (the
// validator Pod's Ready condition, an allocation check's Succeeded phase,
// the node's allocatable GPUs) through the status subresources.

const sucUser = "system:serviceaccount:system-upgrade:system-upgrade"

// proveNode creates the proof Pods of node with their status, as the
// kubelet would write it.
func proveNode(ctx context.Context, node string, readyAt time.Time) error {
	return env.ProveNode(ctx, node, readyAt)
}

// reproveAllocation replaces node's allocation check by one that started
// now, after its SUC Job completed (played by the test as the kubelet).
func reproveAllocation(ctx context.Context, node string) error {
	check := testenv.ProofPods(node, time.Now())[1]
	if err := client.IgnoreNotFound(env.Admin.Delete(ctx, check.DeepCopy(), client.GracePeriodSeconds(0))); err != nil {
		return err
	}
	status := check.Status
	status.StartTime = &metav1.Time{Time: time.Now().Add(time.Second)}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err := env.Admin.Create(ctx, check)
		if err == nil {
			break
		}
		if !apierrors.IsAlreadyExists(err) || time.Now().After(deadline) {
			return err
		}
	}
	check.Status = status
	return env.Admin.Status().Update(ctx, check)
}

func deletePod(t *testing.T, ns, name string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	require.NoError(t, client.IgnoreNotFound(env.Admin.Delete(context.Background(), p, client.GracePeriodSeconds(0))))
}

// eventuallyWrite retries a write until it fails with exactly codes (or
// succeeds, for none): the caches see a change a moment after it is made.
func eventuallyWrite(t *testing.T, write func() error, codes ...gate.Code) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		err = write()
		if len(codes) == 0 && err == nil {
			return
		}
		if len(codes) > 0 && err != nil && apierrors.IsForbidden(err) && sameCodes(err.Error(), codes) {
			break
		}
	}
	if len(codes) == 0 {
		require.NoError(t, err)
		return
	}
	requireDenied(t, err, codes...)
}

// sameCodes: msg names exactly codes, as requireDenied holds it (a stale
// cache can add a blocker as well as miss one).
func sameCodes(msg string, codes []gate.Code) bool {
	return len(codesIn(msg)) == len(codes) && containsAll(msg, codes)
}

func containsAll(msg string, codes []gate.Code) bool {
	for _, c := range codes {
		if !strings.Contains(msg, "["+string(c)+"]") {
			return false
		}
	}
	return true
}

// TestPreviousNodeUnprovenThroughAPIServer: a V100 node at the target tuple
// without proof holds every V100 Plan; its proof, written as the kubelet
// and the GPU Operator would, releases them; a lost GPU holds them again.
func TestPreviousNodeUnprovenThroughAPIServer(t *testing.T) {
	ctx := context.Background()
	const node = "gpu-v100-05"
	require.NoError(t, env.CreateNodes(ctx, []testenv.NodeSpec{{Name: node, Fixture: "node-v100.json", Tuple: testenv.Target, Zone: "zone-a"}}))
	t.Cleanup(func() {
		deletePod(t, "gpu-operator", "nvidia-operator-validator-"+node)
		deletePod(t, "gpu-upgrade-gate", "allocation-check-"+node)
		require.NoError(t, env.Admin.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}))
		// Later tests must not see the node: wait until the caches drop it.
		c, _ := as(t, "alice")
		eventuallyWrite(t, func() error { return c.Create(ctx, plan("after-proof", "v100-r580", "gpu-v100-01"), client.DryRunAll) })
	})
	alice, _ := as(t, "alice")
	canary := func() error {
		return alice.Create(ctx, plan("next-canary", "v100-r580", "gpu-v100-01"), client.DryRunAll)
	}

	eventuallyWrite(t, canary, gate.CodePreviousNodeUnproven)
	err := canary()
	assert.Contains(t, err.Error(), "node gpu-v100-05 already runs the destination tuple of record v100-r580-canary-1 but is not proven")
	assert.Contains(t, err.Error(), "no validator Pod (namespace gpu-operator, app=nvidia-operator-validator) on the node")
	assert.Contains(t, err.Error(), "no allocation check (gpu-upgrade-gate.io/allocation-check=true) Succeeded")

	// The neighbouring safe case: the same node, proven.
	require.NoError(t, proveNode(ctx, node, now.Add(-2*time.Hour)))
	eventuallyWrite(t, canary)

	// The device plugin advertises 6 of 8 GPUs (written as the kubelet would).
	var n corev1.Node
	require.NoError(t, env.Admin.Get(ctx, client.ObjectKey{Name: node}, &n))
	n.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("6")
	require.NoError(t, env.Admin.Status().Update(ctx, &n))
	eventuallyWrite(t, canary, gate.CodePreviousNodeUnproven)
	assert.Contains(t, canary().Error(), "allocatable nvidia.com/gpu 6 of 8")
	n.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("8")
	require.NoError(t, env.Admin.Status().Update(ctx, &n))
	eventuallyWrite(t, canary)
}

// TestUncordonBeforeProofThroughAPIServer: SUC's completion write (uncordon
// and plan label in one UPDATE) and a person's uncordon of a GPU node at the
// Plan's destination are denied until the node is proven; SUC's cordon never
// reaches the completions webhook.
func TestUncordonBeforeProofThroughAPIServer(t *testing.T) {
	ctx := context.Background()
	const node = "gpu-v100-06"
	require.NoError(t, env.CreateNodes(ctx, []testenv.NodeSpec{{Name: node, Fixture: "node-v100.json", Tuple: testenv.Source, Zone: "zone-a"}}))
	alice, _ := as(t, "alice")
	// The test plays SUC's Job below: a real SUC, if an earlier test
	// started it, waits for the Secret the Plan mounts and writes no Job.
	p := sucPlan("canary-06", "v100-r580", node)
	eventuallyWrite(t, func() error { return alice.Create(ctx, p) })
	t.Cleanup(func() {
		deletePod(t, "gpu-operator", "nvidia-operator-validator-"+node)
		deletePod(t, "gpu-upgrade-gate", "allocation-check-"+node)
		require.NoError(t, client.IgnoreNotFound(env.Admin.Delete(ctx, p)))
		require.NoError(t, env.Admin.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}))
		eventuallyWrite(t, func() error {
			return alice.Create(ctx, plan("after-uncordon", "v100-r580", "gpu-v100-01"), client.DryRunAll)
		})
	})
	suc, _ := as(t, sucUser)

	// SUC's Job for the node (played: SUC's controller creates it with its
	// own labels, the Job controller starts it) cordons the node from its
	// Pod: the gate knows the cordon is SUC's by that Job, which ran no
	// later than the cordon (CordonedByOther otherwise). The cordon is never
	// reviewed by the completions webhook (match conditions).
	// Created paused by SUC's ServiceAccount (only SUC writes a Job with
	// its labels: SUCJobForged); the Job controller's status below says it ran.
	zero := int32(0)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SUCNamespace, Name: "apply-canary-06-on-" + node,
		Labels: map[string]string{upgradev1.LabelPlan: p.Name, upgradev1.LabelNode: node}},
		Spec: batchv1.JobSpec{Parallelism: &zero, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "upgrade", Image: "rancher/rke2-upgrade:" + strings.ReplaceAll(testenv.Target.RKE2, "+", "-")}}}}}}
	require.NoError(t, sucJobWriter(t).Create(ctx, job))
	t.Cleanup(func() {
		require.NoError(t, client.IgnoreNotFound(env.Admin.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))))
	})
	own := ownWrites{since: time.Now(), resources: []string{"nodes"}, users: []string{sucUser}, names: []string{node}}
	require.NoError(t, patchNode(suc, node, `{"spec":{"unschedulable":true}}`))
	assert.Equal(t, 0, own.reviews(t, webhook.WebhookCompletions, 1), "SUC's cordon reached the completions webhook")

	// The Job completed (played here, as the Job controller would mark it):
	// the node runs the target tuple.
	require.NoError(t, env.FinishJob(ctx, job, true))
	var n corev1.Node
	require.NoError(t, env.Admin.Get(ctx, client.ObjectKey{Name: node}, &n))
	n.Status.NodeInfo.KernelVersion, n.Status.NodeInfo.KubeletVersion = testenv.Target.Kernel, testenv.Target.RKE2
	require.NoError(t, env.Admin.Status().Update(ctx, &n))
	// NFD's and GFD's labels, as nfd-master writes them (docs/ownership.md).
	require.NoError(t, patchNode(nfdMaster(t), node, `{"metadata":{"labels":{"feature.node.kubernetes.io/kernel-version.full":"`+testenv.Target.Kernel+`","nvidia.com/cuda.driver-version.full":"`+testenv.Target.Driver+`"}}}`))

	// SUC's completion write, as SUC v0.20.1 makes it: one Node update that
	// uncordons and sets the Plan's label.
	completion := func() error {
		var cur corev1.Node
		if err := env.Admin.Get(ctx, client.ObjectKey{Name: node}, &cur); err != nil {
			return err
		}
		cur.Spec.Unschedulable = false
		cur.Labels[upgradev1.LabelPlanName(p.Name)] = "0123abcd"
		return suc.Update(ctx, &cur)
	}
	eventuallyWrite(t, completion, gate.CodeUncordonBeforeProof)
	err := completion()
	assert.Contains(t, err.Error(), `admission webhook "completions.gpu-upgrade-gate.io" denied the request`)
	assert.Contains(t, err.Error(), "node gpu-v100-06 runs the destination tuple of Plan system-upgrade/canary-06")
	require.NoError(t, env.Admin.Get(ctx, client.ObjectKey{Name: node}, &n))
	assert.True(t, n.Spec.Unschedulable, "the node stays cordoned")

	// A person's uncordon of the same node is denied too.
	requireDenied(t, patchNode(alice, node, `{"spec":{"unschedulable":false}}`), gate.CodeUncordonBeforeProof)

	// Proof arrives: SUC's retry passes.
	require.NoError(t, proveNode(ctx, node, now.Add(-2*time.Hour)))
	// The allocation check counts only when it ran after the Job completed.
	require.NoError(t, reproveAllocation(ctx, node))
	eventuallyWrite(t, completion)
	require.NoError(t, env.Admin.Get(ctx, client.ObjectKey{Name: node}, &n))
	assert.False(t, n.Spec.Unschedulable)
}

// TestValidatorImageChangedThroughAPIServer (issue 25): the validator
// DaemonSet's own Pod (the test plays the DaemonSet controller: it creates
// the Pod with the DaemonSet's UID and its template's image, and the
// kubelet: it writes the Pod Ready) proves its node; once a person changes
// its container's image in place (a Pod's image is mutable, and no kubelet
// runs here to restart it, so it stays Ready), the Pod no longer counts: the
// node is unproven and the refusal names the Pod and both images.
func TestValidatorImageChangedThroughAPIServer(t *testing.T) {
	ctx := context.Background()
	const node = "gpu-v100-08"
	require.NoError(t, env.CreateNodes(ctx, []testenv.NodeSpec{{Name: node, Fixture: "node-v100.json", Tuple: testenv.Target, Zone: "zone-a"}}))
	t.Cleanup(func() {
		deletePod(t, "gpu-operator", "nvidia-operator-validator-"+node)
		deletePod(t, "gpu-upgrade-gate", "allocation-check-"+node)
		require.NoError(t, env.Admin.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}))
		c, _ := as(t, "alice")
		eventuallyWrite(t, func() error { return c.Create(ctx, plan("after-image", "v100-r580", "gpu-v100-01"), client.DryRunAll) })
	})
	alice, warnings := as(t, "alice")
	canary := func() error {
		return alice.Create(ctx, plan("next-canary-image", "v100-r580", "gpu-v100-01"), client.DryRunAll)
	}
	require.NoError(t, proveNode(ctx, node, now.Add(-2*time.Hour)))
	eventuallyWrite(t, canary) // the neighbour: the template's image proves the node

	var v corev1.Pod
	require.NoError(t, env.Admin.Get(ctx, client.ObjectKey{Namespace: "gpu-operator", Name: "nvidia-operator-validator-" + node}, &v))
	v.Spec.Containers[0].Image = "busybox:always-ready"
	require.NoError(t, env.Admin.Update(ctx, &v), "a Pod's image changes in place")
	eventuallyWrite(t, canary, gate.CodePreviousNodeUnproven)
	warnings.Take()
	err := canary()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no validator Pod (namespace gpu-operator, app=nvidia-operator-validator) on the node")
	assert.Contains(t, warnings.Take(), "gpu-upgrade-gate: node "+node+": Pod gpu-operator/nvidia-operator-validator-"+node+
		" carries the validator label (app=nvidia-operator-validator) and DaemonSet gpu-operator/nvidia-operator-validator's UID as its controller,"+
		" but its container validator runs image busybox:always-ready, not the DaemonSet's Pod template's nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.3.3 nor a release of nvcr.io/nvidia/cloud-native/gpu-operator-validator: ignored (a Pod's image can be changed in place)")
}

// TestForgedValidatorThroughAPIServer (issue 24): a Pod labelled as the
// validator that the GPU Operator's validator DaemonSet does not control,
// Pending on a proven node (created by anyone who may create Pods in the
// GPU Operator's namespace), neither un-proves the node nor holds the next
// Plan of its hardware; the decision names it in a warning. The neighbouring
// case: the DaemonSet's own Pod not Ready still un-proves it.
func TestForgedValidatorThroughAPIServer(t *testing.T) {
	ctx := context.Background()
	const node = "gpu-v100-07"
	require.NoError(t, env.CreateNodes(ctx, []testenv.NodeSpec{{Name: node, Fixture: "node-v100.json", Tuple: testenv.Target, Zone: "zone-a"}}))
	forged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-operator", Name: "forged-validator", Labels: map[string]string{"app": "nvidia-operator-validator"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	t.Cleanup(func() {
		deletePod(t, "gpu-operator", forged.Name)
		deletePod(t, "gpu-operator", "nvidia-operator-validator-"+node)
		deletePod(t, "gpu-upgrade-gate", "allocation-check-"+node)
		require.NoError(t, env.Admin.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}))
		c, _ := as(t, "alice")
		eventuallyWrite(t, func() error { return c.Create(ctx, plan("after-forged", "v100-r580", "gpu-v100-01"), client.DryRunAll) })
	})
	alice, warnings := as(t, "alice")
	canary := func() error {
		return alice.Create(ctx, plan("next-canary-forged", "v100-r580", "gpu-v100-01"), client.DryRunAll)
	}
	require.NoError(t, proveNode(ctx, node, now.Add(-2*time.Hour)))
	eventuallyWrite(t, canary)

	// The attack: one Pending Pod with the validator's label and no owner
	// (no kubelet runs it: Pending is what it would be until it ran).
	require.NoError(t, env.Admin.Create(ctx, forged))
	named := false
	for deadline := time.Now().Add(15 * time.Second); !named && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		warnings.Take()
		require.NoError(t, canary(), "a forged validator Pod must not un-prove node %s", node)
		for _, w := range warnings.Take() {
			named = named || strings.Contains(w, "Pod gpu-operator/forged-validator carries the validator label (app=nvidia-operator-validator) but is not controlled by DaemonSet gpu-operator/nvidia-operator-validator (it has no controller): ignored")
		}
	}
	assert.True(t, named, "the decision names the ignored Pod in a warning")

	// Issue 25: the same Pod naming the validator DaemonSet as its
	// controller, with a UID that is not the DaemonSet's, is ignored too.
	byName := forged.DeepCopy()
	byName.ObjectMeta = metav1.ObjectMeta{Namespace: "gpu-operator", Name: "forged-validator-by-name", Labels: forged.Labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "nvidia-operator-validator",
			UID: "00000000-0000-4000-8000-000000000bad", Controller: new(true)}}}
	t.Cleanup(func() { deletePod(t, "gpu-operator", byName.Name) })
	require.NoError(t, env.Admin.Create(ctx, byName))
	named = false
	for deadline := time.Now().Add(15 * time.Second); !named && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		warnings.Take()
		require.NoError(t, canary(), "a Pod naming the validator DaemonSet with another UID must not un-prove node %s", node)
		for _, w := range warnings.Take() {
			named = named || strings.Contains(w, "Pod gpu-operator/forged-validator-by-name carries the validator label (app=nvidia-operator-validator) but is not controlled by DaemonSet gpu-operator/nvidia-operator-validator (it has controller DaemonSet nvidia-operator-validator with UID 00000000-0000-4000-8000-000000000bad, not the DaemonSet's ")
		}
	}
	assert.True(t, named, "the decision names the Pod and both UIDs in a warning")

	// The neighbouring case: the DaemonSet's own validator not Ready (as
	// the kubelet would write it) un-proves the node.
	var v corev1.Pod
	require.NoError(t, env.Admin.Get(ctx, client.ObjectKey{Namespace: "gpu-operator", Name: "nvidia-operator-validator-" + node}, &v))
	v.Status.Conditions[0].Status = corev1.ConditionFalse
	require.NoError(t, env.Admin.Status().Update(ctx, &v))
	eventuallyWrite(t, canary, gate.CodePreviousNodeUnproven)
	assert.Contains(t, canary().Error(), "validator Pod gpu-operator/nvidia-operator-validator-"+node+" is not Ready")
}

// grant creates a binding (kept if it exists) and waits until the
// authorizer lets its subjects use it: its informers lag the write.
func grant(t *testing.T, b client.Object) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, client.IgnoreAlreadyExists(env.Admin.Create(ctx, b)))
	require.NoError(t, env.WaitBound(ctx, b))
}

// createAll creates objs as the admin, in order (none may exist yet), and
// waits until the authorizer honours the bindings among them.
func createAll(t *testing.T, objs ...client.Object) {
	t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		require.NoError(t, env.Admin.Create(ctx, o))
	}
	require.NoError(t, env.WaitBound(ctx, objs...))
}
