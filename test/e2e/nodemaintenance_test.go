//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
)

// TestNodeMaintenanceCountsOut (issue 27 item 2): through the real API
// server, the chart's RBAC and the webhook, a GPU node in the Network
// Operator's NodeMaintenance counts out for the budget: the next GPU Plan
// is refused naming the request, still while it is being deleted (the
// maintenance operator uncordons in its finalizer), and admitted once it
// is gone. The maintenance operator cannot run here: the test installs a
// reduced copy of its CRD (testdata/maintenance; the real one is not
// available here), after the gate started, so the gate finds the API by
// discovery as it would on a cluster where the operator is installed
// later; it writes the NodeMaintenance as the Network Operator would and
// plays the maintenance operator's finalizer. The CRD stays: the gate keeps
// watching an API it found served.
func TestNodeMaintenanceCountsOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	installMaintenanceCRD(ctx, t)
	alice, _ := as(t, "alice")
	p := plan("node-maintenance", "v100-r580", "gpu-v100-01")
	dryRun := func() error { return alice.Create(ctx, p.DeepCopy(), client.DryRunAll) }

	nm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "maintenance.nvidia.com/v1alpha1", "kind": "NodeMaintenance",
		"metadata": map[string]any{"namespace": "default", "name": "ofed-upgrade-gpu-v100-02",
			"finalizers": []any{"maintenance.nvidia.com/finalizer"}},
		"spec": map[string]any{"requestorID": "network.operator", "nodeName": "gpu-v100-02", "cordon": true,
			"drainSpec": map[string]any{"force": true, "podSelector": "", "timeoutSeconds": int64(300), "deleteEmptyDir": true}},
	}}
	require.NoError(t, env.Admin.Create(ctx, nm))
	t.Cleanup(func() {
		if err := env.Admin.Patch(context.Background(), nm, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("drop the finalizer: %v", err)
		}
		_ = client.IgnoreNotFound(env.Admin.Delete(context.Background(), nm))
	})

	t.Run("DisruptionBudgetExceeded: gpu-v100-02 is in the Network Operator's maintenance", func(t *testing.T) {
		// The gate asks discovery every 30 s (maintenanceProbe), then syncs.
		eventually(t, 60*time.Second, "the gate counts the NodeMaintenance", func() bool {
			err := dryRun()
			return err != nil && strings.Contains(err.Error(), "NodeMaintenance default/ofed-upgrade-gpu-v100-02")
		})
		err := dryRun()
		requireDenied(t, err, gate.CodeDisruptionBudgetExceeded)
		assert.Contains(t, err.Error(), "already out: gpu-v100-02 (NodeMaintenance default/ofed-upgrade-gpu-v100-02 of requestor network.operator)")
	})
	t.Run("DisruptionBudgetExceeded: still while it is being deleted", func(t *testing.T) {
		require.NoError(t, env.Admin.Delete(ctx, nm))
		eventually(t, 15*time.Second, "the gate sees the deletion mark", func() bool {
			err := dryRun()
			return err != nil && strings.Contains(err.Error(), "NodeMaintenance default/ofed-upgrade-gpu-v100-02 of requestor network.operator (being deleted")
		})
		requireDenied(t, dryRun(), gate.CodeDisruptionBudgetExceeded)
	})
	t.Run("admitted once the maintenance operator's finalizer lets it go", func(t *testing.T) {
		require.NoError(t, env.Admin.Patch(ctx, nm, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))))
		eventuallyWrite(t, dryRun)
	})
}

// installMaintenanceCRD installs the reduced NodeMaintenance CRD (if an
// earlier run left it, as it is) and waits until it is served.
func installMaintenanceCRD(ctx context.Context, t *testing.T) {
	t.Helper()
	installReducedCRD(ctx, t, filepath.Join("maintenance", "crd-nodemaintenances.yaml"), loader.NodeMaintenanceGVK, true)
}
