//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// TestDRADriverGPUCluster: the GPU Operator's GPUCluster (its DRA model)
// naming a new DRA driver version is a driver-path change, reviewed through
// the chart's driver webhook: without a record naming that version it is
// refused; edits that leave the DRA driver alone never reach the gate. The
// GPUCluster CRD is a minimal one written for the test (the real one is not
// available here: testdata/nvidia/crd-gpuclusters.yaml), and the test plays
// the operator's install by writing the GPUCluster before the gate.
func TestDRADriverGPUCluster(t *testing.T) {
	driverWorld(t)
	ctx := context.Background()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	_, err = envtest.InstallCRDs(env.CP.RESTConfig(), envtest.CRDInstallOptions{Paths: []string{filepath.Join(root, "testdata", "nvidia", "crd-gpuclusters.yaml")}})
	require.NoError(t, err)
	ref := nvidiaObject("nvidia.com/v1alpha1", "GPUCluster", "gpu-cluster", nil)
	preGate(t, func() {
		createAll(t,
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "gpuclusters-editor"}, Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"nvidia.com"}, Resources: []string{"gpuclusters"}, Verbs: []string{"*"}}}},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "gpuclusters-editors"},
				RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "gpuclusters-editor"},
				Subjects: []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "platform-admins"}}},
			nvidiaObject("nvidia.com/v1alpha1", "GPUCluster", "gpu-cluster", map[string]any{
				"draDriver":    map[string]any{"repository": "nvcr.io/nvidia", "image": "k8s-dra-driver-gpu", "version": "v25.3.0"},
				"dcgmExporter": map[string]any{"version": testenv.Source.DCGMExporter},
			}),
		)
	})
	defer preGate(t, func() { require.NoError(t, client.IgnoreNotFound(env.Admin.Delete(ctx, ref))) })
	alice, _ := as(t, "alice")

	t.Run("a new DRA driver version without a record naming it is refused", func(t *testing.T) {
		requireDenied(t, edit(t, alice, ref, set("spec.draDriver.version", "v25.8.1")), gate.CodeRecordMissing)
	})
	t.Run("a new DRA driver image tag (no version field) likewise", func(t *testing.T) {
		requireDenied(t, edit(t, alice, ref, func(u *unstructured.Unstructured) {
			unstructured.RemoveNestedField(u.Object, "spec", "draDriver", "version")
			set("spec.draDriver.image", "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1")(u)
		}), gate.CodeRecordMissing)
	})
	t.Run("a record that does not name the DRA driver qualifies no move of it", func(t *testing.T) {
		err := edit(t, alice, ref, func(u *unstructured.Unstructured) {
			set("spec.draDriver.version", "v25.8.1")(u)
			annotate(gate.AnnotationQualification, "v100-driver")(u)
		})
		requireDeniedWith(t, err, gate.CodeTargetNotQualified)
		require.Contains(t, err.Error(), "the record names no DRA driver version; the change moves it from v25.3.0")
	})
	t.Run("an edit that leaves the DRA driver alone is admitted", func(t *testing.T) {
		require.NoError(t, edit(t, alice, ref, set("spec.draDriver.repository", "registry.corp/nvidia")), "same version: nothing moves")
		require.NoError(t, edit(t, alice, ref, annotate("touch", "1")), "metadata only: not sent")
		require.Equal(t, "v25.3.0", getObj(t, ref).Object["spec"].(map[string]any)["draDriver"].(map[string]any)["version"])
	})
	// Issue 25 follow-up: a GPUCluster's CREATE reads what is left of the
	// DRA driver on the nodes, as its plugin DaemonSet's CREATE does. The
	// orphan is written as `kubectl delete --cascade=orphan` of the plugin
	// DaemonSet leaves it (the garbage collector strips its owner; no
	// kubelet runs here, so it is written, not scheduled).
	t.Run("created while an orphaned DRA plugin Pod still runs on a node, the version there is unknown", func(t *testing.T) {
		orphan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nvidiaDRA.Namespace, Name: nvidiaDRA.DaemonSet + "-orphan"},
			Spec: corev1.PodSpec{NodeName: "gpu-v100-holder", Containers: []corev1.Container{{Name: "gpus", Image: "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0"}}}}
		preGate(t, func() {
			require.NoError(t, env.Admin.Delete(ctx, ref))
			require.NoError(t, client.IgnoreAlreadyExists(env.Admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nvidiaDRA.Namespace}})))
			require.NoError(t, env.Admin.Create(ctx, orphan))
		})
		t.Cleanup(func() {
			require.NoError(t, client.IgnoreNotFound(env.Admin.Delete(ctx, orphan, client.GracePeriodSeconds(0))))
		})
		// Named records, so the review reaches the nodes' facts.
		again := func() error {
			u := nvidiaObject("nvidia.com/v1alpha1", "GPUCluster", "gpu-cluster", map[string]any{
				"draDriver": map[string]any{"repository": "nvcr.io/nvidia", "image": "k8s-dra-driver-gpu", "version": "v25.3.0"}})
			annotate(gate.AnnotationQualification, "v100-driver")(u)
			return alice.Create(ctx, u)
		}
		var err error
		// Each try is refused (the gate's cache may not hold the Pod yet).
		assert.Eventually(t, func() bool {
			err = again()
			return err != nil && strings.Contains(err.Error(), "still run there")
		}, 10*time.Second, 100*time.Millisecond)
		requireDeniedWith(t, err, gate.CodeFactsMissing)
		assert.Contains(t, err.Error(), "Pod nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin-orphan still run there, and the GPUCluster does not say which version they run")
		// The orphan gone, the CREATE is a fresh install again, judged
		// against the records it names.
		require.NoError(t, env.Admin.Delete(ctx, orphan, client.GracePeriodSeconds(0)))
		assert.Eventually(t, func() bool {
			err = again()
			return err != nil && !strings.Contains(err.Error(), "still run there")
		}, 10*time.Second, 100*time.Millisecond)
		requireDeniedWith(t, err, gate.CodeTargetNotQualified)
	})
}

// TestDRADriverKubeletPlugin: a new image of the configured DRA driver's
// kubelet-plugin DaemonSet (config draDrivers, set for the suite) reaches
// the gate through the chart's own dradaemonsets webhook and is judged as a
// driver-path change: without a record naming the new version it is
// refused, also when the DaemonSet is deleted and created again; so is any
// other change of its Pod template (a rollout restart, a command, an env),
// which restarts the plugin on every node. Edits that leave the Pod template
// alone, the driver's configured controller's DaemonSets and the GPU
// Operator's own ServiceAccount's write never reach the webhook (its request
// count does not move); another ServiceAccount of the operator's or the
// driver's namespace is judged.
// Another DaemonSet of the namespace is admitted unless it runs the
// driver's image (DRAPluginForged). Deleting the plugin while a node it serves holds GPUs
// is refused (the suite's gpu-v100-holder). No DaemonSet controller runs
// here: the test writes the DaemonSets as the driver's Helm chart would
// (helm upgrade, as alice), and plays the GPU Operator by its
// ServiceAccount. Narrowing the plugin's scheduling off the node that holds
// GPUs is refused as its deletion is, and creating it again at a release
// older than the records name for the nodes' tuple is a downgrade (issue
// 25).
func TestDRADriverKubeletPlugin(t *testing.T) {
	const computeDomainDaemon = "computedomain-daemon-x7k2"
	driverWorld(t)
	ctx := context.Background()
	ns := nvidiaDRA.Namespace
	daemonSet := func(name, image string) *appsv1.DaemonSet {
		labels := map[string]string{"app": name}
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "gpus", Image: image}}}}}}
	}
	plugin := daemonSet(nvidiaDRA.DaemonSet, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0")
	other := daemonSet("nvidia-dra-driver-gpu-node-exporter", "quay.io/prometheus/node-exporter:v1.9.0")
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "daemonsets-editor"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"*"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "daemonsets-editors"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "platform-admins"},
			{Kind: rbacv1.ServiceAccountKind, Name: "gpu-operator", Namespace: "gpu-operator"},
			{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: "gpu-operator"},
			{Kind: rbacv1.ServiceAccountKind, Name: nvidiaDRAControllerSA, Namespace: ns},
			{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: ns}}}
	preGate(t, func() {
		require.NoError(t, client.IgnoreAlreadyExists(env.Admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})))
		createAll(t, role, binding, plugin, other)
	})
	t.Cleanup(func() {
		// The plugin's deletion is reviewed: done with the gate away.
		preGate(t, func() {
			for _, o := range []client.Object{plugin, other, binding, role} {
				require.NoError(t, client.IgnoreNotFound(env.Admin.Delete(ctx, o)))
			}
		})
	})
	alice, _ := as(t, "alice")
	update := func(c client.Client, ds *appsv1.DaemonSet, f func(*appsv1.DaemonSet)) error {
		got := &appsv1.DaemonSet{}
		require.NoError(t, env.Admin.Get(ctx, client.ObjectKeyFromObject(ds), got))
		f(got)
		return c.Update(ctx, got)
	}
	newImage := func(image string) func(*appsv1.DaemonSet) {
		return func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = image }
	}
	// own are the test's writes of its DaemonSets from now (ownWrites).
	// (the compute-domain daemon is the driver's controller's DaemonSet).
	own := func() ownWrites {
		return ownWrites{since: time.Now(), resources: []string{"daemonsets"}, names: []string{plugin.Name, other.Name, computeDomainDaemon}}
	}
	// notSent runs write, which must succeed without the webhook being called.
	notSent := func(t *testing.T, write func() error) {
		t.Helper()
		own := own()
		require.NoError(t, write())
		assert.Equal(t, 0, own.reviews(t, webhook.WebhookDRAPlugins, 1), "the write reached the DRA plugin webhook")
	}

	t.Run("a new kubelet-plugin image without a record naming it is refused", func(t *testing.T) {
		own := own()
		requireDenied(t, update(alice, plugin, newImage("nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1")), gate.CodeRecordMissing)
		assert.Equal(t, 1, own.reviews(t, webhook.WebhookDRAPlugins, 1), "the chart's DRA plugin webhook judged it")
	})
	t.Run("a record that does not name the DRA driver qualifies no move of it", func(t *testing.T) {
		err := update(alice, plugin, func(ds *appsv1.DaemonSet) {
			newImage("nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1")(ds)
			metav1.SetMetaDataAnnotation(&ds.ObjectMeta, gate.AnnotationQualification, "v100-driver")
		})
		requireDeniedWith(t, err, gate.CodeTargetNotQualified)
		require.Contains(t, err.Error(), "the record names no DRA driver version; the change moves it from v25.3.0")
	})
	t.Run("an edit that leaves the Pod template alone never reaches the gate", func(t *testing.T) {
		notSent(t, func() error {
			return update(alice, plugin, func(ds *appsv1.DaemonSet) {
				metav1.SetMetaDataLabel(&ds.ObjectMeta, "team", "gpu-platform")
				ds.Spec.MinReadySeconds = 10
			})
		})
	})
	// Issue 25: any other change of the Pod template restarts the plugin
	// on every node, as a new image does: a reload of the version it runs.
	for name, edit := range map[string]func(*appsv1.DaemonSet){
		"kubectl rollout restart": func(ds *appsv1.DaemonSet) {
			metav1.SetMetaDataAnnotation(&ds.Spec.Template.ObjectMeta, "kubectl.kubernetes.io/restartedAt", "2026-12-02T06:00:00Z")
		},
		"another command": func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].Command = []string{"gpu-kubelet-plugin", "--v=6"}
		},
		"another env": func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "NVIDIA_DRIVER_ROOT", Value: "/"}}
		},
	} {
		t.Run(name+" without a record naming the version is refused", func(t *testing.T) {
			err := update(alice, plugin, edit)
			requireDeniedWith(t, err, gate.CodeRecordMissing)
		})
	}
	t.Run("another DaemonSet of the driver's namespace with another image is admitted", func(t *testing.T) {
		require.NoError(t, update(alice, other, newImage("quay.io/prometheus/node-exporter:v1.10.0")))
	})
	t.Run("another DaemonSet running the driver's image under another name is refused", func(t *testing.T) {
		copyOf := daemonSet("nvidia-dra-driver-gpu-copy", "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1")
		err := alice.Create(ctx, copyOf)
		requireDenied(t, err, gate.CodeDRAPluginForged)
		assert.Contains(t, err.Error(), "the image of the DRA kubelet plugin DaemonSet "+ns+"/"+nvidiaDRA.DaemonSet+" (config draDrivers), under another name")
		requireDenied(t, update(alice, other, newImage("nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0")), gate.CodeDRAPluginForged)
	})
	t.Run("the driver's configured controller never reaches the gate", func(t *testing.T) {
		controller, err := client.New(env.CP.ConfigFor("system:serviceaccount:"+ns+":"+nvidiaDRAControllerSA, "system:serviceaccounts", "system:serviceaccounts:"+ns, "system:authenticated"),
			client.Options{Scheme: env.Scheme})
		require.NoError(t, err)
		daemon := daemonSet(computeDomainDaemon, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0")
		notSent(t, func() error { return controller.Create(ctx, daemon, client.DryRunAll) })
	})
	t.Run("another ServiceAccount of the driver's namespace is judged", func(t *testing.T) {
		podSA, err := client.New(env.CP.ConfigFor("system:serviceaccount:"+ns+":default", "system:serviceaccounts", "system:serviceaccounts:"+ns, "system:authenticated"),
			client.Options{Scheme: env.Scheme})
		require.NoError(t, err)
		own := own()
		requireDenied(t, podSA.Create(ctx, daemonSet(computeDomainDaemon, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0"), client.DryRunAll), gate.CodeDRAPluginForged)
		assert.Equal(t, 1, own.reviews(t, webhook.WebhookDRAPlugins, 1), "the chart's DRA plugin webhook judged it")
	})
	t.Run("the GPU Operator's own write never reaches the gate", func(t *testing.T) {
		op := gpuOperator(t)
		notSent(t, func() error { return update(op, plugin, newImage("nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.1")) })
	})
	t.Run("another ServiceAccount of the GPU Operator's namespace is judged", func(t *testing.T) {
		podSA, err := client.New(env.CP.ConfigFor("system:serviceaccount:gpu-operator:default", "system:serviceaccounts", "system:serviceaccounts:gpu-operator", "system:authenticated"),
			client.Options{Scheme: env.Scheme})
		require.NoError(t, err)
		requireDenied(t, update(podSA, plugin, newImage("nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1")), gate.CodeRecordMissing)
	})
	t.Run("narrowing the plugin's nodeSelector off a node that holds GPUs is refused", func(t *testing.T) {
		own := own()
		err := update(alice, plugin, func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.NodeSelector = map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200"}
		})
		requireDeniedWith(t, err, gate.CodeGPUHolders)
		assert.Contains(t, err.Error(), "node gpu-v100-holder runs 1 GPU holder(s)")
		assert.Contains(t, err.Error(), "this change of the DRA kubelet plugin's scheduling (nodeSelector, required node affinity) no longer selects the node")
		assert.Equal(t, 1, own.reviews(t, webhook.WebhookDRAPlugins, 1), "the chart's match condition sent the scheduling change")
	})
	t.Run("deleting the plugin while a node it serves holds GPUs is refused", func(t *testing.T) {
		err := alice.Delete(ctx, plugin)
		requireDeniedWith(t, err, gate.CodeGPUHolders)
		assert.Contains(t, err.Error(), "node gpu-v100-holder runs 1 GPU holder(s)")
		assert.Contains(t, err.Error(), "deleting this object removes the driver from the node and nothing drains them first")
	})
	t.Run("created again at a new release after its deletion, it is judged", func(t *testing.T) {
		// Deleted while the gate was away (its DELETE is judged above).
		preGate(t, func() { require.NoError(t, env.Admin.Delete(ctx, plugin)) })
		again := daemonSet(nvidiaDRA.DaemonSet, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1")
		requireDenied(t, alice.Create(ctx, again), gate.CodeRecordMissing)
	})
	// Issue 25: with nothing of the deleted plugin left on a node (no Pod,
	// no ResourceSlice here), the release it ran is the one the records
	// name for the tuple it runs: created again older, it is a downgrade.
	t.Run("created again at an older release than its records name, nothing of it left, it is a downgrade", func(t *testing.T) {
		rec := testenv.Record("v100-dra-25-8", now.Add(-24*time.Hour), func(r *qualification.Record) {
			r.Target = testenv.Source
			r.Target.DRADriver = "v25.8.1"
		})
		require.NoError(t, env.CreateRecords(ctx, map[string]*qualification.Record{"v100-dra": rec}))
		defer func() {
			require.NoError(t, env.Admin.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: env.Config.Namespace, Name: "v100-dra"}}))
		}()
		older := daemonSet(nvidiaDRA.DaemonSet, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0")
		metav1.SetMetaDataAnnotation(&older.ObjectMeta, gate.AnnotationQualification, "v100-dra")
		var err error
		// Each try is refused (the gate's cache may not hold the record yet).
		require.Eventually(t, func() bool {
			err = alice.Create(ctx, older.DeepCopy())
			return err != nil && strings.Contains(err.Error(), "["+string(gate.CodeComponentDowngrade)+"]")
		}, 10*time.Second, 100*time.Millisecond, "%v", err)
		requireDeniedWith(t, err, gate.CodeComponentDowngrade)
		assert.Contains(t, err.Error(), " runs draDriver v25.8.1 (nothing names the DRA driver version the node ran any more, so it is the one record(s) v100-dra-25-8 (v25.8.1) name for the tuple it runs) and the change moves it back to v25.3.0")
	})
	got := &appsv1.DaemonSet{}
	require.True(t, apierrors.IsNotFound(env.Admin.Get(ctx, client.ObjectKeyFromObject(plugin), got)), "the refused create stored nothing")
}

// TestDRANodeInstall (issue 25 follow-up 3): a label added to a GPU node
// that the configured DRA plugin DaemonSet's nodeSelector reads would make
// the DaemonSet controller start the plugin there, installing the DRA
// driver: the Node webhook refuses it while no record names that version
// for the node's tuple; a label the DaemonSet does not read is admitted. No
// DaemonSet controller runs here: the DaemonSet is written as the driver's
// Helm chart would, before the gate; the writes are dry runs.
func TestDRANodeInstall(t *testing.T) {
	driverWorld(t)
	ctx := context.Background()
	const label = "e2e.gpu-upgrade-gate.io/dra-install"
	labels := map[string]string{"app": "dra-install"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: nvidiaDRA.Namespace, Name: nvidiaDRA.DaemonSet},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				// The suite's nodes carry the not-ready NoSchedule taint (no
				// kubelet runs): the plugin tolerates every taint.
				Spec: corev1.PodSpec{NodeSelector: map[string]string{label: "true"}, Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{Name: "gpus", Image: "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"}}}}}}
	preGate(t, func() {
		require.NoError(t, client.IgnoreAlreadyExists(env.Admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nvidiaDRA.Namespace}})))
		require.NoError(t, env.Admin.Create(ctx, ds))
	})
	t.Cleanup(func() { preGate(t, func() { require.NoError(t, client.IgnoreNotFound(env.Admin.Delete(ctx, ds))) }) })
	alice, _ := as(t, "alice")
	write := func(labels string) func() error {
		return func() error {
			n := &corev1.Node{}
			n.Name = "gpu-v100-01"
			return alice.Patch(ctx, n, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{`+labels+`}}}`)), client.DryRunAll)
		}
	}
	var err error
	// Each try is refused once the gate's cache holds the DaemonSet.
	assert.Eventually(t, func() bool {
		err = write(`"` + label + `":"true"`)()
		return err != nil && strings.Contains(err.Error(), "installing DRA driver v25.8.1 there")
	}, 15*time.Second, 200*time.Millisecond)
	requireDeniedWith(t, err)
	assert.Contains(t, err.Error(), "this write makes DaemonSet nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin schedule its DRA kubelet plugin on node gpu-v100-01")
	assert.True(t, strings.Contains(err.Error(), "["+string(gate.CodeRecordMissing)+"]") || strings.Contains(err.Error(), "["+string(gate.CodeTargetNotQualified)+"]"), err.Error())
	require.NoError(t, write(`"team":"ml"`)(), "a label the DaemonSet does not read installs nothing")
}

// TestDRANodeUnloadAndTaints (issue 25): a Node write that stops the
// configured DRA plugin DaemonSet running on a GPU node (a label its
// nodeSelector reads removed, or a NoExecute taint it does not tolerate
// added) makes the DaemonSet controller delete the plugin Pod there,
// unloading the driver under the node's GPU holders: refused with
// GPUHolders while the node holds GPUs, allowed on a node without. And a
// taint write alone now reaches the Node webhook when it can start or stop
// the plugin: lifting a NoSchedule taint the plugin does not tolerate
// installs it (refused without a record naming its version), the same lift
// of a taint it tolerates is allowed. Which taint writes reach the webhook
// is decided by who writes, not by the key: a person's made-up
// node.kubernetes.io/ NoExecute taint is refused GPUHolders like any, while
// the node-lifecycle controller's, a cluster autoscaler's and Karpenter's
// taints never reach the webhook (counted from the audit log). No
// DaemonSet controller, node-lifecycle controller, autoscaler nor Karpenter
// runs here: the DaemonSet is written as the driver's Helm chart would, the
// test writes the controllers' taints as their ServiceAccounts would (by
// impersonation), and the refused writes are dry runs.
func TestDRANodeUnloadAndTaints(t *testing.T) {
	driverWorld(t)
	ctx := context.Background()
	const label = "e2e.gpu-upgrade-gate.io/dra-unload"
	dedicated := corev1.Taint{Key: "e2e.gpu-upgrade-gate.io/dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}
	tolerated := corev1.Taint{Key: "e2e.gpu-upgrade-gate.io/tolerated", Value: "x", Effect: corev1.TaintEffectNoSchedule}
	maintenance := corev1.Taint{Key: "e2e.gpu-upgrade-gate.io/maintenance", Effect: corev1.TaintEffectNoExecute}
	madeUp := corev1.Taint{Key: "node.kubernetes.io/made-up", Effect: corev1.TaintEffectNoExecute}
	labels := map[string]string{"app": "dra-unload"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: nvidiaDRA.Namespace, Name: nvidiaDRA.DaemonSet},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				// The suite's nodes carry the not-ready NoSchedule taint (no
				// kubelet runs): the plugin tolerates it, and tolerated.
				Spec: corev1.PodSpec{NodeSelector: map[string]string{label: "true"}, Tolerations: []corev1.Toleration{
					{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists}, {Key: tolerated.Key, Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{Name: "gpus", Image: "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"}}}}}}
	// gpu-v100-holder (a GPU holder) and gpu-v100-02 run the plugin;
	// gpu-v100-04 is selected but tainted dedicated, gpu-v100-02 also
	// tolerated: the plugin is scheduled on neither by those taints' lift
	// before it lands.
	nodes := []string{"gpu-v100-holder", "gpu-v100-02", "gpu-v100-04"}
	editTaints := func(c client.Client, name string, f func([]corev1.Taint) []corev1.Taint, opts ...client.UpdateOption) error {
		for {
			n := &corev1.Node{}
			require.NoError(t, env.Admin.Get(ctx, client.ObjectKey{Name: name}, n))
			n.Spec.Taints = f(n.Spec.Taints)
			if err := c.Update(ctx, n, opts...); !apierrors.IsConflict(err) {
				return err
			}
		}
	}
	add := func(ts ...corev1.Taint) func([]corev1.Taint) []corev1.Taint {
		return func(cur []corev1.Taint) []corev1.Taint { return append(cur, ts...) }
	}
	lift := func(keys ...string) func([]corev1.Taint) []corev1.Taint {
		return func(cur []corev1.Taint) []corev1.Taint {
			var out []corev1.Taint
			for _, tt := range cur {
				if !slices.Contains(keys, tt.Key) {
					out = append(out, tt)
				}
			}
			return out
		}
	}
	preGate(t, func() {
		require.NoError(t, client.IgnoreAlreadyExists(env.Admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nvidiaDRA.Namespace}})))
		require.NoError(t, env.Admin.Create(ctx, ds))
		for _, n := range nodes {
			require.NoError(t, patchNode(env.Admin, n, `{"metadata":{"labels":{"`+label+`":"true"}}}`))
		}
		require.NoError(t, editTaints(env.Admin, "gpu-v100-04", add(dedicated)))
		require.NoError(t, editTaints(env.Admin, "gpu-v100-02", add(tolerated)))
	})
	t.Cleanup(func() {
		preGate(t, func() {
			require.NoError(t, client.IgnoreNotFound(env.Admin.Delete(ctx, ds)))
			for _, n := range nodes {
				require.NoError(t, patchNode(env.Admin, n, `{"metadata":{"labels":{"`+label+`":null}}}`))
				require.NoError(t, editTaints(env.Admin, n, lift(dedicated.Key, tolerated.Key, maintenance.Key, corev1.TaintNodeUnreachable, "ToBeDeletedByClusterAutoscaler", "karpenter.sh/unregistered", "node.cloudprovider.kubernetes.io/uninitialized")))
			}
		})
	})
	alice, _ := as(t, "alice")
	unlabel := func(node string) error {
		n := &corev1.Node{}
		n.Name = node
		return alice.Patch(ctx, n, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+label+`":null}}}`)), client.DryRunAll)
	}
	var err error
	// Each try is refused once the gate's cache holds the DaemonSet.
	assert.Eventually(t, func() bool {
		err = unlabel("gpu-v100-holder")
		return err != nil && strings.Contains(err.Error(), "["+string(gate.CodeGPUHolders)+"]")
	}, 15*time.Second, 200*time.Millisecond)
	t.Run("GPUHolders: the label the plugin selects on removed from a node with a GPU holder", func(t *testing.T) {
		requireDeniedWith(t, err, gate.CodeGPUHolders)
		assert.Contains(t, err.Error(), "node gpu-v100-holder runs 1 GPU holder(s)")
		assert.Contains(t, err.Error(), "this change of the node's labels (which DaemonSet nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin's scheduling reads) no longer selects the node")
	})
	t.Run("the same label removed from a node without holders", func(t *testing.T) {
		require.NoError(t, unlabel("gpu-v100-02"))
	})
	t.Run("GPUHolders: a NoExecute taint the plugin does not tolerate, alone", func(t *testing.T) {
		err := editTaints(alice, "gpu-v100-holder", add(maintenance), client.DryRunAll)
		requireDeniedWith(t, err, gate.CodeGPUHolders)
		assert.Contains(t, err.Error(), "this change of the node's taints")
	})
	t.Run("lifting a taint the plugin does not tolerate installs it: refused", func(t *testing.T) {
		own := ownWrites{since: time.Now(), resources: []string{"nodes"}, users: []string{"alice"}, names: []string{"gpu-v100-04"}}
		err := editTaints(alice, "gpu-v100-04", lift(dedicated.Key), client.DryRunAll)
		requireDeniedWith(t, err)
		assert.Contains(t, err.Error(), "this write makes DaemonSet nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin schedule its DRA kubelet plugin on node gpu-v100-04, installing DRA driver v25.8.1 there")
		assert.True(t, strings.Contains(err.Error(), "["+string(gate.CodeRecordMissing)+"]") || strings.Contains(err.Error(), "["+string(gate.CodeTargetNotQualified)+"]"), err.Error())
		assert.Equal(t, 1, own.reviews(t, webhook.WebhookNodes, 1), "the taint's lift alone reached the Node webhook")
	})
	t.Run("lifting a taint the plugin tolerates: allowed", func(t *testing.T) {
		own := ownWrites{since: time.Now(), resources: []string{"nodes"}, users: []string{"alice"}, names: []string{"gpu-v100-02"}}
		require.NoError(t, editTaints(alice, "gpu-v100-02", lift(tolerated.Key)))
		assert.Equal(t, 1, own.reviews(t, webhook.WebhookNodes, 1), "judged, and allowed")
	})
	// Which taint writes reach the webhook is decided by who writes, not by
	// the key (webhook/nodes.md).
	t.Run("GPUHolders: a person's made-up node.kubernetes.io/ NoExecute taint", func(t *testing.T) {
		own := ownWrites{since: time.Now(), resources: []string{"nodes"}, users: []string{"alice"}, names: []string{"gpu-v100-holder"}}
		err := editTaints(alice, "gpu-v100-holder", add(madeUp), client.DryRunAll)
		requireDeniedWith(t, err, gate.CodeGPUHolders)
		assert.Contains(t, err.Error(), "this change of the node's taints")
		assert.Equal(t, 1, own.reviews(t, webhook.WebhookNodes, 1), "the system's key prefix hides no person's taint")
	})
	t.Run("the same made-up taint on a node without holders: judged, and allowed", func(t *testing.T) {
		own := ownWrites{since: time.Now(), resources: []string{"nodes"}, users: []string{"alice"}, names: []string{"gpu-v100-02"}}
		require.NoError(t, editTaints(alice, "gpu-v100-02", add(madeUp), client.DryRunAll))
		assert.Equal(t, 1, own.reviews(t, webhook.WebhookNodes, 1))
	})
	// The system's identities never wait on the gate for a taint. No
	// node-lifecycle controller, cluster autoscaler or Karpenter runs here:
	// the test writes their taints as their ServiceAccounts would, by
	// impersonation (in platform-admins for the RBAC their charts grant; the
	// node-lifecycle controller's is Kubernetes' bootstrap policy), on the
	// node with a GPU holder, where a reviewed write would be refused.
	system := func(t *testing.T, user string, groups ...string) client.Client {
		groups = append(groups, "system:authenticated")
		if sa := strings.Split(user, ":"); len(sa) == 4 && sa[1] == "serviceaccount" {
			groups = append(groups, "system:serviceaccounts", "system:serviceaccounts:"+sa[2])
		}
		c, err := client.New(env.CP.ConfigFor(user, groups...), client.Options{Scheme: env.Scheme})
		require.NoError(t, err)
		return c
	}
	for _, tc := range []struct {
		name   string
		user   string
		groups []string
		taint  corev1.Taint
	}{
		{"the node-lifecycle controller's unreachable taint", "system:serviceaccount:kube-system:node-controller", nil, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}},
		// Added on scale-down and lifted again when it aborts.
		{"a cluster autoscaler's ToBeDeletedByClusterAutoscaler", "system:serviceaccount:kube-system:cluster-autoscaler", []string{testenv.PlatformAdmins}, corev1.Taint{Key: "ToBeDeletedByClusterAutoscaler", Value: "1733148000", Effect: corev1.TaintEffectNoSchedule}},
		// RKE2's cloud controller manager is a user (a client certificate of
		// the cluster's CA), no ServiceAccount; it lifts uninitialized from
		// every joining node.
		{"RKE2's cloud controller manager's uninitialized taint", "rke2-cloud-controller-manager", []string{testenv.PlatformAdmins}, corev1.Taint{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		// Outside kube-system: the chart's default webhook.nodeTaintControllers.
		{"Karpenter's karpenter.sh/unregistered, lifted at registration", "system:serviceaccount:karpenter:karpenter", []string{testenv.PlatformAdmins}, corev1.Taint{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}},
	} {
		t.Run(tc.name+" never reaches the webhook", func(t *testing.T) {
			c := system(t, tc.user, tc.groups...)
			own := ownWrites{since: time.Now(), resources: []string{"nodes"}, users: []string{tc.user}, names: []string{"gpu-v100-holder"}}
			require.NoError(t, editTaints(c, "gpu-v100-holder", add(tc.taint)))
			require.NoError(t, editTaints(c, "gpu-v100-holder", lift(tc.taint.Key)))
			assert.Equal(t, 0, own.reviews(t, webhook.WebhookNodes, 2), "a system taint's add and lift reached the Node webhook")
		})
	}
	t.Run("another ServiceAccount of Karpenter's namespace is judged", func(t *testing.T) {
		const other = "system:serviceaccount:karpenter:default"
		own := ownWrites{since: time.Now(), resources: []string{"nodes"}, users: []string{other}, names: []string{"gpu-v100-holder"}}
		err := editTaints(system(t, other, testenv.PlatformAdmins), "gpu-v100-holder", add(corev1.Taint{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}), client.DryRunAll)
		requireDeniedWith(t, err, gate.CodeGPUHolders)
		assert.Equal(t, 1, own.reviews(t, webhook.WebhookNodes, 1))
	})
}
