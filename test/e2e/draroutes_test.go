//go:build e2e

package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// TestDRANamespaceDeletion (issue 25): deleting a DRA driver's namespace
// makes the namespace controller delete its kubelet-plugin Pods on every
// node, so the chart's namespaces webhook judges it as the plugin
// DaemonSet's deletion: refused while a node it serves holds GPUs (the
// suite's gpu-v100-holder). Without the plugin DaemonSet it is admitted;
// another namespace's deletion never reaches the webhook, nor does the
// namespace controller's deletion of the plugin that follows. The deletions
// are server-side dry runs (the API server calls the webhooks for them and
// stores nothing), so the driver's namespace survives the test; the
// plugin DaemonSet is written as the driver's Helm chart would.
func TestDRANamespaceDeletion(t *testing.T) {
	driverWorld(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nvidiaDRA.Namespace}}
	scratch := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ml-scratch"}}
	labels := map[string]string{"app": nvidiaDRA.DaemonSet}
	plugin := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: nvidiaDRA.DaemonSet},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "gpus", Image: "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0"}}}}}}
	require.NoError(t, client.IgnoreAlreadyExists(env.Admin.Create(ctx, ns)))
	require.NoError(t, client.IgnoreAlreadyExists(env.Admin.Create(ctx, scratch)))
	// alice may delete namespaces.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "namespaces-deleter"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "delete"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "namespaces-deleters"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "platform-admins"}}}
	// The namespace controller and the garbage collector may delete the
	// plugin DaemonSet, as their bootstrap roles let them.
	dsRole := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "daemonsets-deleter"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"delete"}}}}
	dsBinding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "daemonsets-deleters"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: dsRole.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "namespace-controller", Namespace: "kube-system"},
			{Kind: rbacv1.ServiceAccountKind, Name: "generic-garbage-collector", Namespace: "kube-system"}}}
	createAll(t, role, binding, dsRole, dsBinding)
	t.Cleanup(func() {
		preGate(t, func() {
			for _, o := range []client.Object{plugin, binding, role, dsBinding, dsRole} {
				require.NoError(t, client.IgnoreNotFound(env.Admin.Delete(ctx, o)))
			}
		})
	})
	alice, _ := as(t, "alice")
	deleteNS := func(name string) error {
		return alice.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.DryRunAll)
	}

	t.Run("without its plugin DaemonSet it is admitted, judged", func(t *testing.T) {
		before := webhookRequests(t, webhook.PathNamespaces)
		require.NoError(t, deleteNS(ns.Name))
		assert.Greater(t, webhookRequests(t, webhook.PathNamespaces), before, "the chart's namespaceSelector sent it")
	})
	t.Run("while a node its plugin serves holds GPUs it is refused", func(t *testing.T) {
		preGate(t, func() { require.NoError(t, env.Admin.Create(ctx, plugin)) })
		err := deleteNS(ns.Name)
		requireDeniedWith(t, err, gate.CodeGPUHolders)
		assert.Contains(t, err.Error(), "Namespace "+ns.Name+" (DRA kubelet plugin DaemonSet "+ns.Name+"/"+nvidiaDRA.DaemonSet+")")
		assert.Contains(t, err.Error(), "node gpu-v100-holder runs 1 GPU holder(s)")
	})
	// The namespace controller then deletes the plugin DaemonSet (and its
	// Pods, whatever the gate answers): after the namespace's reviewed
	// deletion, it must not wait on the gate. The garbage collector's
	// deletion stays judged (an owner reference is an unreviewed edit).
	// The test plays both by their ServiceAccounts, with dry runs.
	t.Run("the namespace controller's deletion of the plugin never reaches the gate, the garbage collector's is judged", func(t *testing.T) {
		controller := func(name string) client.Client {
			c, err := env.As("system:serviceaccount:kube-system:"+name, "system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated")
			require.NoError(t, err)
			return c
		}
		before := webhookRequests(t, webhook.PathDRAPlugins)
		require.NoError(t, controller("namespace-controller").Delete(ctx, plugin.DeepCopy(), client.DryRunAll))
		assert.Equal(t, before, webhookRequests(t, webhook.PathDRAPlugins), "the namespace controller's delete reached the DRA plugin webhook")
		requireDeniedWith(t, controller("generic-garbage-collector").Delete(ctx, plugin.DeepCopy(), client.DryRunAll), gate.CodeGPUHolders)
	})
	t.Run("another namespace's deletion never reaches the gate", func(t *testing.T) {
		before := webhookRequests(t, webhook.PathNamespaces)
		require.NoError(t, deleteNS(scratch.Name))
		assert.Equal(t, before, webhookRequests(t, webhook.PathNamespaces))
	})
	got := &corev1.Namespace{}
	require.NoError(t, env.Admin.Get(ctx, client.ObjectKeyFromObject(ns), got))
	assert.Nil(t, got.DeletionTimestamp, "dry runs only")
}

// TestGPUOperatorNamespaceDeletion (issue 25): deleting the GPU Operator's
// namespace makes the namespace controller delete every operand in it (the
// driver DaemonSets, device plugin, validator, DCGM exporter) from every
// GPU node at once, and nothing is created again there: the chart's
// namespaces webhook, rendered without any DRA driver too, judges it as
// the unload of every GPU node's driver. Refused while a GPU node runs a
// holder (the suite's gpu-v100-holder, named with its Pod) or a rollout is
// in flight; admitted once no node holds GPUs and nothing is in flight.
// The deletions are server-side dry runs (the API server calls the
// webhooks and stores nothing); the test plays the GPU Operator's upgrade
// controller writing a node's driver upgrade state, and removes and
// creates again the suite's holder Pod as its owner would.
func TestGPUOperatorNamespaceDeletion(t *testing.T) {
	driverWorld(t)
	ctx := context.Background()
	ns := env.Config.GPUOperator.Namespace
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "operator-namespace-deleter"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "delete"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "operator-namespace-deleters"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "platform-admins"}}}
	createAll(t, role, binding)
	op, err := client.New(env.CP.ConfigFor(operatorSA, "system:serviceaccounts", "system:serviceaccounts:gpu-operator", "system:authenticated"), client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = patchNode(op, "gpu-v100-01", `{"metadata":{"labels":{"`+gate.LabelDriverUpgradeState+`":null}}}`) // the operator's own label
		require.NoError(t, client.IgnoreAlreadyExists(env.Admin.Create(ctx, testenv.Holder("train-0", "gpu-v100-holder"))))
		for _, o := range []client.Object{binding, role} {
			require.NoError(t, client.IgnoreNotFound(env.Admin.Delete(ctx, o)))
		}
	})
	alice, _ := as(t, "alice")
	deleteNS := func() error {
		return alice.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.DryRunAll)
	}

	t.Run("while a GPU node runs a holder it is refused, the node and holder named", func(t *testing.T) {
		before := webhookRequests(t, webhook.PathNamespaces)
		err := deleteNS()
		requireDenied(t, err, gate.CodeGPUHolders)
		assert.Contains(t, err.Error(), "Namespace "+ns+" is denied")
		assert.Contains(t, err.Error(), "node gpu-v100-holder runs 1 GPU holder(s): Pod ml/train-0 [nvidia.com/gpu]")
		assert.Greater(t, webhookRequests(t, webhook.PathNamespaces), before, "the chart's namespaceSelector sent it")
	})
	require.NoError(t, env.Admin.Delete(ctx, testenv.Holder("train-0", "gpu-v100-holder"), client.GracePeriodSeconds(0)))
	t.Run("with no GPU holder and nothing in flight it is admitted", func(t *testing.T) {
		eventuallyWrite(t, deleteNS)
	})
	t.Run("while the operator's driver rollout is in flight it is refused", func(t *testing.T) {
		require.NoError(t, operatorStep(t, op, "gpu-v100-01", "upgrade-required"))
		eventuallyWrite(t, deleteNS, gate.CodeRolloutInFlight)
	})
	got := &corev1.Namespace{}
	require.NoError(t, env.Admin.Get(ctx, client.ObjectKey{Name: ns}, got))
	assert.Nil(t, got.DeletionTimestamp, "dry runs only")
}

// TestValidatorDaemonSet (issue 25): only the GPU Operator creates its
// validator DaemonSet, or changes what its Pods run: a proof counts the
// validator Pods its UID controls, so one written under its name by anyone
// else would own forged validators. Through the chart's validatordaemonset
// webhook: alice's CREATE and image change are refused with
// ValidatorForged, naming who may; her rollout restart, and the GPU
// Operator's own write, never reach the webhook. The writes are
// server-side dry runs (the suite's validator DaemonSet stays as it is);
// the test plays the GPU Operator by its ServiceAccount.
func TestValidatorDaemonSet(t *testing.T) {
	ctx := context.Background()
	v := env.Config.Proof.Validator
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: v.Namespace, Name: "validator-editor"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"*"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: v.Namespace, Name: "validator-editors"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "platform-admins"},
			{Kind: rbacv1.ServiceAccountKind, Name: "gpu-operator", Namespace: "gpu-operator"}}}
	createAll(t, role, binding)
	t.Cleanup(func() {
		for _, o := range []client.Object{binding, role} {
			require.NoError(t, client.IgnoreNotFound(env.Admin.Delete(ctx, o)))
		}
	})
	alice, _ := as(t, "alice")
	current := func() *appsv1.DaemonSet {
		ds := &appsv1.DaemonSet{}
		require.NoError(t, env.Admin.Get(ctx, client.ObjectKey{Namespace: v.Namespace, Name: v.DaemonSet}, ds))
		return ds
	}
	uid := current().UID

	t.Run("created under its name by someone but the operator, refused", func(t *testing.T) {
		before := webhookRequests(t, webhook.PathValidator)
		again := current()
		again.ObjectMeta = metav1.ObjectMeta{Namespace: v.Namespace, Name: v.DaemonSet}
		again.Status = appsv1.DaemonSetStatus{}
		err := alice.Create(ctx, again, client.DryRunAll)
		requireDenied(t, err, gate.CodeValidatorForged)
		assert.Contains(t, err.Error(), `"alice" creates DaemonSet gpu-operator/nvidia-operator-validator`)
		assert.Contains(t, err.Error(), "only the GPU Operator may (its ServiceAccounts, the chart's webhook.gpuOperatorServiceAccounts)")
		assert.Greater(t, webhookRequests(t, webhook.PathValidator), before)
	})
	t.Run("its Pods' image changed by someone but the operator, refused", func(t *testing.T) {
		ds := current()
		ds.Spec.Template.Spec.Containers[0].Image = "registry.example.com/always-ready:1"
		requireDenied(t, alice.Update(ctx, ds, client.DryRunAll), gate.CodeValidatorForged)
	})
	notSent := func(t *testing.T, write func() error) {
		t.Helper()
		before := webhookRequests(t, webhook.PathValidator)
		require.NoError(t, write())
		assert.Equal(t, before, webhookRequests(t, webhook.PathValidator), "the write reached the validator webhook")
	}
	t.Run("a rollout restart never reaches the gate", func(t *testing.T) {
		ds := current()
		metav1.SetMetaDataAnnotation(&ds.Spec.Template.ObjectMeta, "kubectl.kubernetes.io/restartedAt", "2026-12-02T06:00:00Z")
		notSent(t, func() error { return alice.Update(ctx, ds, client.DryRunAll) })
	})
	t.Run("the GPU Operator's own write never reaches the gate", func(t *testing.T) {
		ds := current()
		ds.Spec.Template.Spec.Containers[0].Image = "nvcr.io/nvidia/gpu-operator:v26.7.0"
		notSent(t, func() error { return gpuOperator(t).Update(ctx, ds, client.DryRunAll) })
	})
	assert.Equal(t, uid, current().UID, "the validator DaemonSet is the one the suite created")
}
