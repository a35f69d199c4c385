//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// TestDRAWorkloads (issue 25 follow-up): in the DRA driver's namespace, a
// Deployment whose Pods run the kubelet plugin's image with the plugin's
// hostPaths reaches the gate through the chart's own draworkloads webhook
// and is refused (DRAPluginForged), and so is a bare Pod written as another
// ServiceAccount of the namespace (default); the same Deployment with
// another image, and the driver's image without the node's filesystem (the
// driver's controller Deployment as its Helm chart writes it), are admitted.
// A Pod the ReplicaSet controller creates from such a template reaches no
// review: no kube-controller-manager runs here, so the test plays the
// ReplicaSet controller by impersonating its identity,
// system:serviceaccount:kube-system:replicaset-controller, and counts the
// webhook's reviews of that write through the audit log. The plugin
// DaemonSet is written before the gate, as the driver's Helm chart would;
// every other write is a dry run.
func TestDRAWorkloads(t *testing.T) {
	ctx := context.Background()
	ns := nvidiaDRA.Namespace
	const image = "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"
	labels := map[string]string{"app": "forged"}
	podSpec := func(image string, hostPaths bool) corev1.PodSpec {
		s := corev1.PodSpec{Containers: []corev1.Container{{Name: "plugin", Image: image}}}
		if hostPaths {
			for name, path := range map[string]string{"plugins-registry": "/var/lib/kubelet/plugins_registry", "plugins": "/var/lib/kubelet/plugins"} {
				s.Volumes = append(s.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}})
				s.Containers[0].VolumeMounts = append(s.Containers[0].VolumeMounts, corev1.VolumeMount{Name: name, MountPath: path})
			}
		}
		return s
	}
	deployment := func(name, image string, hostPaths bool) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec(image, hostPaths)}}}
	}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: podSpec(image, true)}
	}
	plugin := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: nvidiaDRA.DaemonSet},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "plugin"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "plugin"}},
				Spec: podSpec("nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0", true)}}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workloads-editor"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"*"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"*"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workloads-editors"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "platform-admins"},
			{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: ns},
			{Kind: rbacv1.ServiceAccountKind, Name: "replicaset-controller", Namespace: "kube-system"}}}
	preGate(t, func() {
		require.NoError(t, client.IgnoreAlreadyExists(env.Admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})))
		createAll(t, role, binding, plugin)
	})
	t.Cleanup(func() {
		// The plugin's deletion is reviewed: done with the gate away.
		preGate(t, func() {
			for _, o := range []client.Object{plugin, binding, role} {
				require.NoError(t, client.IgnoreNotFound(env.Admin.Delete(ctx, o)))
			}
		})
	})
	serviceAccount := func(t *testing.T, sans, name string) client.Client {
		c, err := client.New(env.CP.ConfigFor("system:serviceaccount:"+sans+":"+name, "system:serviceaccounts", "system:serviceaccounts:"+sans, "system:authenticated"),
			client.Options{Scheme: env.Scheme})
		require.NoError(t, err)
		return c
	}
	alice, _ := as(t, "alice")
	own := func(resource string, names ...string) ownWrites {
		return ownWrites{since: time.Now(), resources: []string{resource}, names: names}
	}

	t.Run("a Deployment running the kubelet plugin's image with its hostPaths is refused", func(t *testing.T) {
		w := own("deployments", "dra-driver-copy")
		err := alice.Create(ctx, deployment("dra-driver-copy", image, true), client.DryRunAll)
		requireDenied(t, err, gate.CodeDRAPluginForged)
		assert.Contains(t, err.Error(), "Deployment "+ns+"/dra-driver-copy, written by \"alice\", runs "+image+", the image of the DRA kubelet plugin DaemonSet "+ns+"/"+nvidiaDRA.DaemonSet+" (config draDrivers), with the node's filesystem in reach")
		assert.Equal(t, 1, w.reviews(t, webhook.WebhookDRAWorkloads, 1), "the chart's DRA workload webhook judged it")
	})
	t.Run("a bare Pod written as another ServiceAccount of the namespace is refused", func(t *testing.T) {
		requireDenied(t, serviceAccount(t, ns, "default").Create(ctx, pod("dra-driver-pod"), client.DryRunAll), gate.CodeDRAPluginForged)
	})
	t.Run("the same Deployment with another image is admitted", func(t *testing.T) {
		require.NoError(t, alice.Create(ctx, deployment("node-exporter", "quay.io/prometheus/node-exporter:v1.9.0", true), client.DryRunAll))
	})
	t.Run("the driver's image without the node's filesystem (its controller Deployment) is admitted", func(t *testing.T) {
		w := own("deployments", "nvidia-dra-driver-gpu-controller")
		require.NoError(t, alice.Create(ctx, deployment("nvidia-dra-driver-gpu-controller", image, false), client.DryRunAll))
		assert.Equal(t, 1, w.reviews(t, webhook.WebhookDRAWorkloads, 1), "judged, and admitted")
	})
	t.Run("the ReplicaSet controller's Pod never reaches the gate", func(t *testing.T) {
		w := own("pods", "dra-driver-copy-7d9f8-x2k4q")
		// Played: the Pod the ReplicaSet controller would create from the
		// template of a ReplicaSet it owns, as that controller.
		require.NoError(t, serviceAccount(t, "kube-system", "replicaset-controller").Create(ctx, pod("dra-driver-copy-7d9f8-x2k4q"), client.DryRunAll))
		assert.Equal(t, 0, w.reviews(t, webhook.WebhookDRAWorkloads, 1), "the ReplicaSet controller's write reached the DRA workload webhook")
	})
}
