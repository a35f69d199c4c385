//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
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
		for _, o := range []client.Object{
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "gpuclusters-editor"}, Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"nvidia.com"}, Resources: []string{"gpuclusters"}, Verbs: []string{"*"}}}},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "gpuclusters-editors"},
				RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "gpuclusters-editor"},
				Subjects: []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "platform-admins"}}},
			nvidiaObject("nvidia.com/v1alpha1", "GPUCluster", "gpu-cluster", map[string]any{
				"draDriver":    map[string]any{"repository": "nvcr.io/nvidia", "image": "k8s-dra-driver-gpu", "version": "v25.3.0"},
				"dcgmExporter": map[string]any{"version": testenv.Source.DCGMExporter},
			}),
		} {
			require.NoError(t, env.Admin.Create(ctx, o))
		}
	})
	defer preGate(t, func() { require.NoError(t, env.Admin.Delete(ctx, ref)) })
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
}
