//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
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
func installMaintenanceCRD(ctx context.Context, t *testing.T) *unstructured.Unstructured {
	t.Helper()
	return installReducedCRD(ctx, t, filepath.Join("maintenance", "crd-nodemaintenances.yaml"), loader.NodeMaintenanceGVK, true)
}

// TestNodeMaintenanceOtherVersion (issue 27 item 2): the maintenance
// operator upgraded to a NodeMaintenance version the gate does not read
// (the CRD served at v1beta1 only) is not "no maintenance": through the
// real API server's discovery, the gate refuses the budget's moves
// (FactsMissing) naming the version served and the one it reads, while a
// write that takes no GPU node out is decided as before; served at the
// gate's version again, the move is admitted. The CRD is put back however
// the test ends, and the test waits until the gate reads it again, so the
// tests after it see the budget as before. Slow: the gate asks discovery
// every 30 s (maintenanceProbe), once to see the change and once to see it
// undone.
func TestNodeMaintenanceOtherVersion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	crd := installMaintenanceCRD(ctx, t)
	alice, _ := as(t, "alice")
	p := plan("node-maintenance-version", "v100-r580", "gpu-v100-01")
	// Not ctx: the cleanup dry-runs too, after ctx is cancelled.
	dryRun := func() error { return alice.Create(context.Background(), p.DeepCopy(), client.DryRunAll) }
	eventually(t, 60*time.Second, "the gate reads NodeMaintenances at v1alpha1 (the Plan is admitted)", func() bool { return dryRun() == nil })

	// The operator's upgrade: v1beta1 served and stored, v1alpha1 no
	// longer served (kept in the CRD: objects may still be stored at it).
	serveOnly(ctx, t, crd, "v1beta1")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		serveOnly(ctx, t, crd, loader.NodeMaintenanceGVK.Version)
		eventually(t, 100*time.Second, "the gate reads NodeMaintenances at v1alpha1 again (the Plan is admitted)", func() bool { return dryRun() == nil })
	})
	const why = "NodeMaintenances (maintenance.nvidia.com) cannot be read (the API server serves them at maintenance.nvidia.com/v1beta1, not at maintenance.nvidia.com/v1alpha1, the version the gate reads"
	eventually(t, 75*time.Second, "the gate refuses the move, naming the versions", func() bool {
		err := dryRun()
		return err != nil && strings.Contains(err.Error(), why)
	})
	err := dryRun()
	requireDenied(t, err, gate.CodeFactsMissing)
	assert.Contains(t, err.Error(), why)
	require.NoError(t, patchNode(alice, "gpu-v100-02", `{"metadata":{"labels":{"team":"maintenance-version"}}}`), "a label change that takes no GPU node out is decided as before")
	defer patchNode(env.Admin, "gpu-v100-02", `{"metadata":{"labels":{"team":null}}}`)
}

// serveOnly makes the NodeMaintenance CRD serve and store version alone
// (adding it as a copy of the first version's schema if missing), and waits
// until the API server serves it and no other.
func serveOnly(ctx context.Context, t *testing.T, crd *unstructured.Unstructured, version string) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := crd.DeepCopy()
		if err := env.Admin.Get(ctx, client.ObjectKeyFromObject(crd), cur); err != nil {
			return err
		}
		versions, _, err := unstructured.NestedSlice(cur.Object, "spec", "versions")
		if err != nil || len(versions) == 0 {
			return fmt.Errorf("the NodeMaintenance CRD's spec.versions: %v", err)
		}
		found := false
		for _, v := range versions {
			m := v.(map[string]any)
			m["served"], m["storage"] = m["name"] == version, m["name"] == version
			found = found || m["name"] == version
		}
		if !found {
			m := runtime.DeepCopyJSONValue(versions[0]).(map[string]any)
			m["name"], m["served"], m["storage"] = version, true, true
			versions = append(versions, m)
		}
		if err := unstructured.SetNestedSlice(cur.Object, versions, "spec", "versions"); err != nil {
			return err
		}
		return env.Admin.Update(ctx, cur)
	}))
	served := func(v string) bool {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: loader.NodeMaintenanceGVK.Group, Version: v, Kind: "NodeMaintenanceList"})
		return env.Admin.List(ctx, list) == nil
	}
	other := "v1beta1"
	if version == other {
		other = loader.NodeMaintenanceGVK.Version
	}
	eventually(t, 30*time.Second, "the API server serves NodeMaintenances at "+version+", not "+other, func() bool { return served(version) && !served(other) })
}
