//go:build e2e

package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// ncclCheck creates an NCCL check of node as deploy/examples/checks does it:
// a Job (created paused: no Job controller runs here) and the Pod its Job
// controller would create, controlled by it; then the Pod's status as its
// kubelet writes it when the container ends, the result JSON in the
// container's termination message (read from /dev/termination-log).
func ncclCheck(ctx context.Context, t *testing.T, name, node, result string) {
	t.Helper()
	labels := map[string]string{"gpu-upgrade-gate.io/allocation-check": "true", gate.LabelCheck: "nccl-allreduce"}
	zero := int32(0)
	gpus := corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}
	spec := corev1.PodSpec{NodeName: node, RestartPolicy: corev1.RestartPolicyNever,
		Tolerations: []corev1.Toleration{{Key: gate.TaintUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		Containers:  []corev1.Container{{Name: "check", Image: "registry.example.com/platform/nccl-tests:2.16.2-cuda12.8", Resources: gpus}}}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-upgrade-gate", Name: name, Labels: labels},
		Spec: batchv1.JobSpec{Parallelism: &zero, Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}
	require.NoError(t, env.Admin.Create(ctx, job))
	t.Cleanup(func() {
		require.NoError(t, client.IgnoreNotFound(env.Admin.Delete(context.Background(), job, client.PropagationPolicy(metav1.DeletePropagationBackground))))
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: name + "-x7k2p", Labels: labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: new(true), BlockOwnerDeletion: new(true)}}},
		Spec: spec}
	require.NoError(t, env.Admin.Create(ctx, pod))
	t.Cleanup(func() { deletePod(t, pod.Namespace, pod.Name) })
	started := time.Now()
	pod.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, StartTime: &metav1.Time{Time: started},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "check", Image: spec.Containers[0].Image, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 0, Reason: "Completed", Message: result, StartedAt: metav1.NewTime(started), FinishedAt: metav1.NewTime(started.Add(time.Second))}}}}}
	require.NoError(t, env.Admin.Status().Update(ctx, pod))
}

// TestNodeCheckHaltsTheRolloutThroughAPIServer (issue 26 item 2): with
// proof.checks requiring an NCCL all-reduce, the proven canary gpu-v100-03
// (at the target) is unproven until an NCCL check Pod reports a figure
// within the record's allowed deviation of its baseline; then the next
// canary is admitted. A rerun whose figure is below the baseline's threshold
// halts the rollout of the hardware: the next Plan is refused
// (RolloutHalted), naming the node, the kind, the figure and the baseline.
// The check Pods' status is written as their kubelet would write it.
func TestNodeCheckHaltsTheRolloutThroughAPIServer(t *testing.T) {
	ctx := context.Background()
	const node = "gpu-v100-03"
	// The record: the canary's NCCL figure against its baseline on the source.
	rec := testenv.Record("v100-nccl-1", now.Add(-24*time.Hour), func(r *qualification.Record) {
		r.Canary.Checks = []qualification.CanaryCheck{{Kind: "nccl-allreduce", Value: new(186.0), Unit: "GB/s", Baseline: new(190.0), MaxDeviationPercent: new(5.0)}}
	})
	require.NoError(t, env.CreateRecords(ctx, map[string]*qualification.Record{"v100-nccl": rec}))
	t.Cleanup(func() {
		require.NoError(t, client.IgnoreNotFound(env.Admin.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: env.Config.Namespace, Name: "v100-nccl"}})))
	})
	// The gate, restarted with the check required (and back as it was after).
	require.NoError(t, env.StopWebhook())
	// A check's figure can halt a rollout: only the platform team's
	// namespace counts (a config with checks requires one).
	env.Config.Proof.Checks, env.Config.Proof.AllocationCheck.Namespace = []gate.NodeCheck{{Kind: "nccl-allreduce"}}, "gpu-upgrade-gate"
	require.Empty(t, env.Config.Validate())
	// The chart for that config grants the reads of the checks' Jobs.
	require.NoError(t, env.ApplyChartRBAC(ctx))
	started := false
	t.Cleanup(func() {
		if started {
			require.NoError(t, env.StopWebhook())
		}
		env.Config.Proof.Checks, env.Config.Proof.AllocationCheck.Namespace = nil, ""
		require.NoError(t, env.StartWebhook(context.Background()))
	})
	require.NoError(t, env.StartWebhook(ctx))
	started = true

	// Other V100 nodes earlier tests left at the target (their upgrades
	// completed) need the check too: each passes one within the threshold,
	// so only gpu-v100-03 is judged below.
	var nodes corev1.NodeList
	require.NoError(t, env.Admin.List(ctx, &nodes))
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Name != node && env.Config.IsGPUNode(n) && slices.Equal(env.Config.FactsOf(n).Identities, rec.NormalizedHardware()) &&
			n.Status.NodeInfo.KernelVersion == testenv.Target.Kernel {
			ncclCheck(ctx, t, "nccl-allreduce-"+n.Name, n.Name, `{"kind":"nccl-allreduce","value":188,"unit":"GB/s"}`)
		}
	}

	alice, _ := as(t, "alice")
	canary := func() error {
		return alice.Create(ctx, plan("nccl-canary", "v100-nccl", "gpu-v100-01"), client.DryRunAll)
	}
	eventuallyWrite(t, canary, gate.CodePreviousNodeUnproven)
	err := canary()
	assert.Contains(t, err.Error(), "node gpu-v100-03 already runs the destination tuple of record v100-nccl-1 but is not proven")
	assert.Contains(t, err.Error(), "no nccl-allreduce check (Pod labelled gpu-upgrade-gate.io/check=nccl-allreduce, controlled by a Job) passed after")

	// Within the threshold: 184.5 GB/s against 190, 5% allowed. The node is
	// proven and the next canary admitted.
	ncclCheck(ctx, t, "nccl-allreduce-"+node, node, `{"kind":"nccl-allreduce","value":184.5,"unit":"GB/s"}`)
	eventuallyWrite(t, canary)

	// The rollout of the record on the canary node, stored (SUC, if it runs,
	// waits for the Secret it mounts: it writes no Job).
	fwd := sucPlan("nccl-fwd", "v100-nccl", node)
	eventuallyWrite(t, func() error { return alice.Create(ctx, fwd.DeepCopy()) })
	t.Cleanup(func() {
		require.NoError(t, client.IgnoreNotFound(env.Admin.Delete(context.Background(), &upgradev1.Plan{ObjectMeta: fwd.ObjectMeta})))
	})

	// A rerun measures 150 GB/s: beyond the allowed deviation. The rollout
	// of the V100s halts at once (seen now; no halt loop runs here).
	ncclCheck(ctx, t, "nccl-allreduce-rerun-"+node, node, `{"kind":"nccl-allreduce","value":150,"unit":"GB/s"}`)
	var last error
	eventually(t, 30*time.Second, "the next Plan is refused as halted", func() bool {
		last = canary()
		return last != nil && containsAll(last.Error(), []gate.Code{gate.CodeRolloutHalted})
	})
	assert.Contains(t, last.Error(), "[RolloutHalted] the rollout of hardware 10de:1db6/10de:124a is halted: node gpu-v100-03: check Pod gpu-upgrade-gate/nccl-allreduce-rerun-gpu-v100-03-x7k2p: nccl-allreduce 150 GB/s is 21.0526% worse than the baseline 190 GB/s, 5% allowed (baseline of record v100-nccl-1)")
	assert.Contains(t, last.Error(), "Plan system-upgrade/nccl-fwd, record v100-nccl-1")
	assert.Contains(t, last.Error(), "[PreviousNodeUnproven]")
	assert.Contains(t, last.Error(), "check nccl-allreduce failed")
}
