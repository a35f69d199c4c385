//go:build e2e

package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// kubeDCGates are kube-dc's creation gates as the e2e config names them: the
// environment of its manager Deployment (reference anchor-cli-gate.md,
// "Creation gates"), closed at "false".
var kubeDCGates = []gate.CreationGate{
	{Name: "gpu-shared-creation", Kind: gate.GateDeploymentEnv, Namespace: "kube-dc", Object: "kube-dc-manager", Container: "manager", Key: "GPU_SHARED_CREATION_ENABLED", Closed: "false"},
	{Name: "gpu-vm-creation", Kind: gate.GateDeploymentEnv, Namespace: "kube-dc", Object: "kube-dc-manager", Container: "manager", Key: "GPU_VM_CREATION_ENABLED", Closed: "false"},
}

// kubeDCManager is kube-dc's manager Deployment with its two gates' values.
func kubeDCManager(shared, vm string) *appsv1.Deployment {
	labels := map[string]string{"app": "kube-dc-manager"}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-dc", Name: "kube-dc-manager"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "manager", Image: "shalb/kube-dc-manager:v0.1.0",
				Env: []corev1.EnvVar{{Name: "GPU_SHARED_CREATION_ENABLED", Value: shared}, {Name: "GPU_VM_CREATION_ENABLED", Value: vm}}}}}}}}
}

// setGates writes the manager's gate values, as kube-dc's overlay would.
func setGates(t *testing.T, shared, vm string) {
	t.Helper()
	ctx := context.Background()
	var d appsv1.Deployment
	require.NoError(t, env.Admin.Get(ctx, client.ObjectKey{Namespace: "kube-dc", Name: "kube-dc-manager"}, &d))
	d.Spec.Template.Spec.Containers[0].Env = kubeDCManager(shared, vm).Spec.Template.Spec.Containers[0].Env
	require.NoError(t, env.Admin.Update(ctx, &d))
}

// TestCreationGates (issue 24 item 3): a GPU Plan is refused while one of
// kube-dc's creation gates (its manager Deployment's environment) is open,
// saying where to close it, and admitted once both are closed. On main no
// gate was read: the Plan was admitted whatever the environment said.
func TestCreationGates(t *testing.T) {
	ctx := context.Background()
	c, _ := as(t, "alice")
	write := func() error { return c.Create(ctx, plan("gates-canary", "v100-r580", "gpu-v100-01"), client.DryRunAll) }
	t.Cleanup(func() { setGates(t, "false", "false") })

	setGates(t, "false", "true")
	eventuallyWrite(t, write, gate.CodeCreationGateOpen)
	err := write()
	requireDenied(t, err, gate.CodeCreationGateOpen)
	assert.Contains(t, err.Error(), `creation gate gpu-vm-creation (Deployment kube-dc/kube-dc-manager container manager env GPU_VM_CREATION_ENABLED) reads "true", expected "false" (closed)`)
	assert.Contains(t, err.Error(), "kubectl -n kube-dc set env deployment/kube-dc-manager -c manager GPU_VM_CREATION_ENABLED=false")

	// A person's mode change of a cordoned GPU node without holders meets
	// it too; the same write with the gates closed is admitted.
	mode := func() error {
		return patchNode(c, "gpu-v100-04", `{"metadata":{"labels":{"kube-dc.com/gpu.expected-workload-mode":"vm-passthrough"}}}`)
	}
	require.NoError(t, patchNode(env.Admin, "gpu-v100-04", `{"spec":{"unschedulable":true}}`))
	back := func() {
		_ = patchNode(env.Admin, "gpu-v100-04", `{"metadata":{"labels":{"kube-dc.com/gpu.expected-workload-mode":null}}}`)
		_ = patchNode(env.Admin, "gpu-v100-04", `{"spec":{"unschedulable":false}}`)
	}
	t.Cleanup(back)
	requireDeniedWith(t, mode(), gate.CodeCreationGateOpen)

	setGates(t, "false", "false")
	eventuallyWrite(t, mode)
	back() // the node back in service, out of the budget's count
	eventuallyWrite(t, write)
}
