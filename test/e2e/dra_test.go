//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/dra"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
)

// The proof of a DRA GPU node through the real API server's
// resource.k8s.io/v1 (issue 25 items 1 and 4). No kubelet, DRA driver or
// scheduler runs here: the test writes what each would. NVIDIA's kubelet
// plugin publishes the node's ResourceSlice (driver gpu.nvidia.com, one pool
// named after the node, its GPUs typed "gpu"); the scheduler allocates the
// allocation check's ResourceClaim from that pool (status.allocation through
// the status subresource); the kubelet writes the plugin Pod's readiness
// and the check's Succeeded phase. No DaemonSet controller runs either: the
// driver's kubelet-plugin DaemonSet is created (as its Helm chart would,
// before the gate), and the plugin Pod carries the controller reference the
// DaemonSet controller would set, with the DaemonSet's UID.

// nvidiaDRA is NVIDIA's DRA driver as its Helm chart names it (release
// nvidia-dra-driver-gpu), its ComputeDomain controller's ServiceAccount
// too.
var nvidiaDRA = dra.Driver{Name: "gpu.nvidia.com", Namespace: "nvidia-dra-driver-gpu", DaemonSet: "nvidia-dra-driver-gpu-kubelet-plugin",
	Controllers: []string{"system:serviceaccount:nvidia-dra-driver-gpu:" + nvidiaDRAControllerSA}}

// nvidiaDRAControllerSA is the ServiceAccount NVIDIA's DRA driver chart
// runs its ComputeDomain controller as (<release>-service-account-controller).
const nvidiaDRAControllerSA = "nvidia-dra-driver-gpu-service-account-controller"

// draPluginOwner is the controller reference the DaemonSet controller sets
// on ds's Pods.
func draPluginOwner(ds *appsv1.DaemonSet) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: new(true), BlockOwnerDeletion: new(true)}
}

// draLabel marks the nodes the test's kubelet-plugin DaemonSet is scheduled
// on (its nodeSelector): only the DRA node, so the suite's other GPU nodes
// stay device-plugin nodes.
const draLabel = "e2e.gpu-upgrade-gate.io/dra-plugin"

// writeStatus creates obj and then writes its status through the status
// subresource, as its controller (kubelet, scheduler) would.
func writeStatus(ctx context.Context, obj client.Object, setStatus func()) error {
	if err := env.Admin.Create(ctx, obj); err != nil {
		return fmt.Errorf("create %T %s: %w", obj, obj.GetName(), err)
	}
	setStatus()
	return env.Admin.Status().Update(ctx, obj)
}

// draNodeSlice is the ResourceSlice NVIDIA's kubelet plugin publishes for
// node: gpus whole GPUs in pool generation gen.
func draNodeSlice(node string, gen int64, gpus int) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu.nvidia.com"},
		Spec: resourcev1.ResourceSliceSpec{Driver: nvidiaDRA.Name, NodeName: new(node),
			Pool: resourcev1.ResourcePool{Name: node, Generation: gen, ResourceSliceCount: 1}},
	}
	for i := range gpus {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type":        {StringValue: new("gpu")},
				"productName": {StringValue: new("Tesla V100-SXM2-32GB")},
			}})
	}
	return s
}

// TestDRAProofThroughAPIServer: a DRA canary (no nvidia.com/gpu at all) is
// proven by its plugin Pod, its slice and an allocation check through a
// claim allocated on it, and the next node's Plan is allowed; a plugin Pod
// not Ready, a slice that lost a device and a check that used no claim each
// leave it unproven, named in the denial.
func TestDRAProofThroughAPIServer(t *testing.T) {
	ctx := context.Background()
	const node = "gpu-v100-dra"
	// The API server serves resource.k8s.io/v1 (GA since Kubernetes 1.34).
	_, err := env.Admin.RESTMapper().RESTMapping(resourcev1.SchemeGroupVersion.WithKind("ResourceSlice").GroupKind(), "v1")
	require.NoError(t, err, "the control plane must serve resource.k8s.io/v1")

	require.NoError(t, client.IgnoreAlreadyExists(env.Admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nvidiaDRA.Namespace}})))
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.nvidia.com"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: `device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"`}}}}}
	require.NoError(t, client.IgnoreAlreadyExists(env.Admin.Create(ctx, class)))

	// The node offers its GPUs through DRA only: no device plugin, so no
	// nvidia.com/gpu in its capacity (written as its kubelet would).
	require.NoError(t, env.CreateNodes(ctx, []testenv.NodeSpec{{Name: node, Fixture: "node-v100.json", Tuple: testenv.Target, Zone: "zone-a",
		Mutate: func(n *corev1.Node) {
			delete(n.Status.Capacity, "nvidia.com/gpu")
			delete(n.Status.Allocatable, "nvidia.com/gpu")
			n.Labels[draLabel] = "true"
		}}}))
	// The driver's kubelet-plugin DaemonSet, installed before the gate.
	labels := map[string]string{"app.kubernetes.io/name": "nvidia-dra-driver-gpu-kubelet-plugin"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: nvidiaDRA.Namespace, Name: nvidiaDRA.DaemonSet},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{NodeSelector: map[string]string{draLabel: "true"},
					Containers: []corev1.Container{{Name: "gpus", Image: "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.0"}}}}}}
	preGate(t, func() { require.NoError(t, env.Admin.Create(ctx, ds)) })
	t.Cleanup(func() { preGate(t, func() { require.NoError(t, client.IgnoreNotFound(env.Admin.Delete(ctx, ds))) }) })
	readyAt := now.Add(-2 * time.Hour)
	plugin := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nvidiaDRA.Namespace, Name: nvidiaDRA.DaemonSet + "-x8k2d", Labels: labels,
		OwnerReferences: []metav1.OwnerReference{draPluginOwner(ds)}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "gpus", Image: "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.0"}}}}
	slice := draNodeSlice(node, 1, 8)
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-upgrade-gate", Name: "allocation-check-" + node + "-gpu"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
			{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class.Name}}}}}}
	checkName := "allocation-check-" + node
	t.Cleanup(func() {
		for _, obj := range []client.Object{
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-operator", Name: "nvidia-operator-validator-" + node}},
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-upgrade-gate", Name: checkName}},
			&corev1.Pod{ObjectMeta: plugin.ObjectMeta},
			&resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: slice.Name}},
			&resourcev1.ResourceClaim{ObjectMeta: claim.ObjectMeta},
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}},
		} {
			require.NoError(t, client.IgnoreNotFound(env.Admin.Delete(ctx, obj, client.GracePeriodSeconds(0))))
		}
		// Later tests must not see the node: wait until the caches drop it.
		c, _ := as(t, "alice")
		eventuallyWrite(t, func() error { return c.Create(ctx, plan("after-dra", "v100-r580", "gpu-v100-01"), client.DryRunAll) })
	})
	alice, _ := as(t, "alice")
	next := func() error {
		return alice.Create(ctx, plan("next-after-dra", "v100-r580", "gpu-v100-01"), client.DryRunAll)
	}

	// The validator (GPU Operator) as for any node; the plugin Pod Ready,
	// as its kubelet writes it.
	validator := testenv.ProofPods(node, readyAt)[0]
	require.NoError(t, writeStatus(ctx, validator, func() { validator.Status = testenv.ProofPods(node, readyAt)[0].Status }))
	setPluginReady := func(ready corev1.ConditionStatus) {
		plugin.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: readyAt},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.NewTime(readyAt.Add(time.Minute))}}}
	}
	require.NoError(t, writeStatus(ctx, plugin, func() { setPluginReady(corev1.ConditionTrue) }))
	require.NoError(t, env.Admin.Create(ctx, slice))

	// Before any allocation check, the node is unproven.
	eventuallyWrite(t, next, gate.CodePreviousNodeUnproven)
	assert.Contains(t, next().Error(), "no allocation check (gpu-upgrade-gate.io/allocation-check=true) with a ResourceClaim of gpu.nvidia.com allocated on the node")

	// The scheduler allocates the claim from the node's pool; the check
	// Pod ran with it and Succeeded (the kubelet's status).
	require.NoError(t, writeStatus(ctx, claim, func() {
		claim.Status.Allocation = &resourcev1.AllocationResult{
			Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
				{Request: "gpu", Driver: nvidiaDRA.Name, Pool: node, Device: "gpu-3"}}},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
				{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}},
		}
	}))
	writeCheck := func(claimName string) {
		t.Helper()
		deletePod(t, "gpu-upgrade-gate", checkName)
		check := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-upgrade-gate", Name: checkName, Labels: map[string]string{"gpu-upgrade-gate.io/allocation-check": "true"}},
			Spec: corev1.PodSpec{NodeName: node, RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "check", Image: "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04"}}}}
		if claimName != "" {
			check.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: new(claimName)}}
			check.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
		}
		// The deleted check may linger a moment (AlreadyExists).
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.NoError(c, env.Admin.Create(ctx, check))
		}, 10*time.Second, 100*time.Millisecond)
		check.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, StartTime: &metav1.Time{Time: readyAt.Add(5 * time.Minute)}}
		require.NoError(t, env.Admin.Status().Update(ctx, check))
	}
	writeCheck(claim.Name)

	// The done-when: the DRA canary is proven, the next node's Plan allowed.
	eventuallyWrite(t, next)

	t.Run("plugin Pod not Ready", func(t *testing.T) {
		setPluginReady(corev1.ConditionFalse)
		require.NoError(t, env.Admin.Status().Update(ctx, plugin))
		eventuallyWrite(t, next, gate.CodePreviousNodeUnproven)
		assert.Contains(t, next().Error(), "DRA plugin Pod nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin-x8k2d of gpu.nvidia.com is not Ready")
		setPluginReady(corev1.ConditionTrue)
		require.NoError(t, env.Admin.Status().Update(ctx, plugin))
		eventuallyWrite(t, next)
	})
	t.Run("slice lost a device", func(t *testing.T) {
		// The plugin republishes its pool without gpu-7 (a new generation).
		require.NoError(t, env.Admin.Get(ctx, client.ObjectKeyFromObject(slice), slice))
		lost := draNodeSlice(node, 2, 7)
		slice.Spec = lost.Spec
		require.NoError(t, env.Admin.Update(ctx, slice))
		eventuallyWrite(t, next, gate.CodePreviousNodeUnproven)
		assert.Contains(t, next().Error(), "ResourceSlices of gpu.nvidia.com list 7 devices, expected 8 (nvidia.com/gpu.count)")
		slice.Spec = draNodeSlice(node, 3, 8).Spec
		require.NoError(t, env.Admin.Update(ctx, slice))
		eventuallyWrite(t, next)
	})
	t.Run("a forged plugin Pod (the DaemonSet's name, another UID) is not the plugin", func(t *testing.T) {
		deletePod(t, plugin.Namespace, plugin.Name)
		forged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nvidiaDRA.Namespace, Name: nvidiaDRA.DaemonSet + "-f0rg3", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: "0badc0de-0000-4000-8000-000000000000", Controller: new(true)}}},
			Spec: plugin.Spec}
		t.Cleanup(func() { deletePod(t, forged.Namespace, forged.Name) })
		require.NoError(t, writeStatus(ctx, forged, func() { forged.Status = plugin.Status }))
		eventuallyWrite(t, next, gate.CodePreviousNodeUnproven)
		assert.Contains(t, next().Error(), "ignored (they name it as their controller, but not its UID): nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin-f0") // the message is clipped
		deletePod(t, forged.Namespace, forged.Name)
		plugin.ResourceVersion = ""
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.NoError(c, writeStatus(ctx, plugin, func() { setPluginReady(corev1.ConditionTrue) }))
		}, 10*time.Second, 100*time.Millisecond)
		eventuallyWrite(t, next)
	})
	t.Run("a crashed plugin whose slices went: still a DRA node, unproven", func(t *testing.T) {
		// The kubelet marks the crashed plugin not Ready and withdraws the
		// node's slices; the DaemonSet still selects the node.
		setPluginReady(corev1.ConditionFalse)
		require.NoError(t, env.Admin.Status().Update(ctx, plugin))
		require.NoError(t, env.Admin.Delete(ctx, &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: slice.Name}}))
		eventuallyWrite(t, next, gate.CodePreviousNodeUnproven)
		msg := next().Error()
		assert.Contains(t, msg, "DRA plugin Pod nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin-x8k2d of gpu.nvidia.com is not Ready")
		assert.Contains(t, msg, "no ResourceSlices of gpu.nvidia.com for the node")
		assert.NotContains(t, msg, "no nvidia.com/ GPU resource", "not proven (nor refused) as a device-plugin node")
		setPluginReady(corev1.ConditionTrue)
		require.NoError(t, env.Admin.Status().Update(ctx, plugin))
		require.NoError(t, env.Admin.Create(ctx, draNodeSlice(node, 4, 8)))
		eventuallyWrite(t, next)
	})
	t.Run("allocation check used no claim", func(t *testing.T) {
		writeCheck("")
		eventuallyWrite(t, next, gate.CodePreviousNodeUnproven)
		assert.Contains(t, next().Error(), "gpu-upgrade-gate/allocation-check-gpu-v100-dra used no ResourceClaim allocated on the node")
		writeCheck(claim.Name)
		eventuallyWrite(t, next)
	})
}
