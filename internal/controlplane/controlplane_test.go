//go:build e2e

package controlplane_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/controlplane"
)

var planGVR = schema.GroupVersionResource{Group: "upgrade.cattle.io", Version: "v1", Resource: "plans"}

func TestControlPlane(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	start := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{CRDPaths: []string{"../../testdata/suc/crd-plans.yaml"}})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, cp.Stop()) })
	t.Logf("control plane ready with CRDs in %s (work dir %s)", time.Since(start).Round(time.Millisecond), cp.WorkDir())

	admin := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	_, err = admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "system-upgrade"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "suc-plan-editor"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"upgrade.cattle.io"}, Resources: []string{"plans"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().RoleBindings("system-upgrade").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "platform-admins-plans"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "platform-admins"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "suc-plan-editor"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Run("kubelet registers its own node", func(t *testing.T) {
		var node corev1.Node
		readJSON(t, "../../testdata/nodes/node-v100.json", &node)
		kubelet := kubernetes.NewForConfigOrDie(cp.ConfigFor("system:node:gpu-v100-01", "system:nodes"))
		got, err := kubelet.CoreV1().Nodes().Create(ctx, &node, metav1.CreateOptions{})
		require.NoError(t, err)
		if got.Status.NodeInfo.KubeletVersion == "" { // in case create drops the status
			got.Status = node.Status
			got, err = kubelet.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
		assert.Equal(t, node.Status.NodeInfo.KubeletVersion, got.Status.NodeInfo.KubeletVersion)
		assert.Equal(t, "8", got.Labels["nvidia.com/gpu.count"])

		other := kubernetes.NewForConfigOrDie(cp.ConfigFor("system:node:gpu-v100-02", "system:nodes"))
		_, err = other.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"nvidia.com/gpu.count":"0"}}}`), metav1.PatchOptions{})
		assert.True(t, apierrors.IsForbidden(err), "another kubelet patching the node: %v", err)
	})

	plan := readPlan(t, "../../testdata/suc/rke2-agent-plan.yaml")
	alice := dynamic.NewForConfigOrDie(cp.ConfigFor("alice", "platform-admins")).Resource(planGVR).Namespace("system-upgrade")
	created, err := alice.Create(ctx, plan, metav1.CreateOptions{})
	require.NoError(t, err)

	bob := dynamic.NewForConfigOrDie(cp.ConfigFor("bob", "developers")).Resource(planGVR).Namespace("system-upgrade")
	_, err = bob.Create(ctx, plan, metav1.CreateOptions{})
	assert.True(t, apierrors.IsForbidden(err), "bob without RBAC: %v", err)

	t.Run("apiserver restart keeps the data", func(t *testing.T) {
		require.NoError(t, cp.StopAPIServer())
		_, err := admin.Discovery().ServerVersion()
		require.Error(t, err, "apiserver still answering after StopAPIServer")
		restart := time.Now()
		require.NoError(t, cp.StartAPIServer())
		t.Logf("apiserver restarted in %s", time.Since(restart).Round(time.Millisecond))

		got, err := alice.Get(ctx, plan.GetName(), metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, created.GetUID(), got.GetUID())
	})

	t.Run("audit log", func(t *testing.T) {
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		defer wcancel()
		e, err := cp.WaitAuditEvent(wctx, func(e controlplane.AuditEvent) bool {
			return e.Verb == "create" && e.Username() == "alice" && e.ObjectRef != nil && e.ObjectRef.Resource == "plans"
		})
		require.NoError(t, err)
		assert.Equal(t, "ResponseComplete", e.Stage)
		assert.Equal(t, "system-upgrade", e.ObjectRef.Namespace)
		assert.Equal(t, "agent-plan", e.ObjectRef.Name)
		assert.Equal(t, "upgrade.cattle.io", e.ObjectRef.APIGroup)
		require.NotNil(t, e.ResponseStatus)
		assert.EqualValues(t, 201, e.ResponseStatus.Code)
		assert.Equal(t, "admin", e.User.Username, "the impersonator")
		assert.NotEmpty(t, e.AuditID)

		_, err = cp.WaitAuditEvent(wctx, func(e controlplane.AuditEvent) bool {
			return e.Username() == "bob" && e.ResponseStatus != nil && e.ResponseStatus.Code == 403
		})
		assert.NoError(t, err, "bob's forbidden create")

		events, err := cp.AuditEvents()
		require.NoError(t, err)
		for _, e := range events { // the policy keeps reads and other resources out
			assert.Contains(t, []string{"plans", "nodes", "configmaps"}, e.ObjectRef.Resource, "%+v", e)
			assert.NotContains(t, []string{"get", "list", "watch"}, e.Verb, "%+v", e)
		}
		t.Logf("%d audit events", len(events))
	})

	t.Run("kubeconfig", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", cp.Kubeconfig())
		require.NoError(t, err)
		_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().Nodes().Get(ctx, "gpu-v100-01", metav1.GetOptions{})
		assert.NoError(t, err)
	})

	t.Run("cancelling the context stops everything", func(t *testing.T) {
		cancel()
		assert.Eventually(t, func() bool {
			_, err := os.Stat(cp.WorkDir())
			return os.IsNotExist(err)
		}, 30*time.Second, 50*time.Millisecond, "work dir not removed")
		cfg := cp.RESTConfig()
		cfg.Timeout = time.Second
		_, err := kubernetes.NewForConfigOrDie(cfg).Discovery().ServerVersion()
		assert.Error(t, err, "apiserver still answering")
	})
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, v))
}

func readPlan(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal(b, &u.Object))
	return u
}
