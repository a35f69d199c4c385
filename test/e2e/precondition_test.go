//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// TestOperatorRolloutUnfinished (issue 27): a driver change during an
// unfinished rollout of the GPU Operator itself is refused, naming what the
// gate saw; once the operator's Deployment reports the rollout finished the
// same change is admitted. No kube-controller-manager runs in this control
// plane, so the test writes the Deployment's status as the Deployment
// controller would (mid rollout: a new replica up, the old one not yet
// terminated). The cluster serves no OLM ClusterServiceVersion API here
// (a Helm install): the CSV is not checked.
func TestOperatorRolloutUnfinished(t *testing.T) {
	driverWorld(t)
	ctx := context.Background()
	alice, _ := as(t, "alice")
	defer func() { require.NoError(t, env.OperatorRollout(ctx, 1, 1, 1)) }()
	change := func(u *unstructured.Unstructured) {
		set("spec.version", "580.130.00")(u)
		annotate(gate.AnnotationQualification, "v100-driver")(u)
	}

	require.NoError(t, env.OperatorRollout(ctx, 2, 1, 1))
	err := edit(t, alice, ndRef("v100"), change)
	requireDenied(t, err, gate.CodeOperatorRolloutUnfinished)
	assert.Contains(t, err.Error(), "Deployment gpu-operator/gpu-operator: 1 old replica(s) pending termination (status.replicas 2, updatedReplicas 1)")

	require.NoError(t, env.OperatorRollout(ctx, 1, 1, 0))
	err = edit(t, alice, ndRef("v100"), change)
	requireDenied(t, err, gate.CodeOperatorRolloutUnfinished)
	assert.Contains(t, err.Error(), "0 of 1 updated replicas available")

	require.NoError(t, env.OperatorRollout(ctx, 1, 1, 1))
	require.NoError(t, edit(t, alice, ndRef("v100"), change), "the operator's rollout finished: the qualified change is admitted")
	preGate(t, func() { require.NoError(t, edit(t, env.Admin, ndRef("v100"), set("spec.version", "580.126.20"))) })
}

// TestDrainBlockedNamedAtAdmission (issue 27): a Plan with spec.drain whose
// pending GPU node runs a Pod under a PodDisruptionBudget that allows no
// disruption is admitted with a warning naming the node, the Pod and the
// budget (drainCheck.deny is off by default), read live through the
// chart's RBAC; once the budget allows a disruption the warning is gone.
// No kubelet and no kube-controller-manager run here: the test writes the
// Pod's status as the kubelet would (Running, Ready) and the budget's as
// the disruption controller would.
func TestDrainBlockedNamedAtAdmission(t *testing.T) {
	ctx := context.Background()
	alice, warnings := as(t, "alice")
	labels := map[string]string{"app": "drain-db"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "drain-db-0", Labels: labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "drain-db", UID: "0b6f3c1e-5d2a-4f7e-9c1b-2a3d4e5f6a7b", Controller: new(true)}}},
		Spec: corev1.PodSpec{NodeName: "gpu-v100-01", Containers: []corev1.Container{{Name: "db", Image: "postgres:17"}}}}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "drain-db"},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, MaxUnavailable: nil}}
	require.NoError(t, env.Admin.Create(ctx, pod))
	require.NoError(t, env.Admin.Create(ctx, pdb))
	t.Cleanup(func() {
		_ = env.Admin.Delete(ctx, pod, client.GracePeriodSeconds(0))
		_ = env.Admin.Delete(ctx, pdb)
	})
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	require.NoError(t, env.Admin.Status().Update(ctx, pod), "the kubelet reports the Pod running and ready")
	budget := func(allowed int32) {
		t.Helper()
		require.NoError(t, env.Admin.Get(ctx, client.ObjectKeyFromObject(pdb), pdb))
		pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: allowed, CurrentHealthy: 1, DesiredHealthy: 1 - allowed, ExpectedPods: 1}
		require.NoError(t, env.Admin.Status().Update(ctx, pdb), "the disruption controller's status")
	}
	p := plan("drain-check", "v100-r580", "gpu-v100-01")
	p.Spec.Drain = &upgradev1.DrainSpec{}
	dryRun := func() string {
		t.Helper()
		warnings.Take()
		require.NoError(t, alice.Create(ctx, p.DeepCopy(), client.DryRunAll), "a warning, not a refusal (drainCheck.deny is off)")
		return strings.Join(warnings.Take(), "\n")
	}

	budget(0)
	w := dryRun()
	assert.Contains(t, w, "[DrainBlocked] ")
	assert.Contains(t, w, "node gpu-v100-01: Pod ml/drain-db-0: PodDisruptionBudget ml/drain-db allows no disruption (status.disruptionsAllowed 0, currentHealthy 1, desiredHealthy 1)")

	budget(1)
	assert.NotContains(t, dryRun(), "DrainBlocked", "the budget allows the eviction: the drain can finish")
}
