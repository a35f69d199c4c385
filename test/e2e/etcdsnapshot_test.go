//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
)

// TestEtcdSnapshotBeforeRKE2Minor (issue 27): through the real API server,
// the chart's RBAC and the webhook, a Plan that moves gpu-v100-01 from RKE2
// 1.35 to 1.36 is admitted with a warning while the cluster serves no
// ETCDSnapshotFile API, refused once it does and no ready snapshot is
// recent (none, then one RKE2 reports failed), and admitted once a fresh
// ready one is there. The test plays RKE2, which cannot run here: it
// installs k3s's CRD (reduced, testdata/k3s) and writes each
// ETCDSnapshotFile as RKE2 does, spec and status in one create (the CRD has
// no status subresource). It removes the CRD afterwards, so the other tests'
// RKE2-minor Plans see a cluster without it again.
func TestEtcdSnapshotBeforeRKE2Minor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alice, warnings := as(t, "alice")
	p := plan("etcd-snapshot", "v100-r580", "gpu-v100-01")
	dryRun := func() error { return alice.Create(ctx, p.DeepCopy(), client.DryRunAll) }

	t.Run("no ETCDSnapshotFile API: admitted with a warning", func(t *testing.T) {
		warnings.Take()
		require.NoError(t, dryRun())
		assert.Contains(t, strings.Join(warnings.Take(), "\n"), "serves no ETCDSnapshotFile API")
	})

	crd := installSnapshotCRD(ctx, t)
	t.Cleanup(func() { removeSnapshotCRD(t, crd) })

	t.Run("EtcdSnapshotStale: no snapshot", func(t *testing.T) {
		require.Eventually(t, func() bool { return dryRun() != nil }, 30*time.Second, 200*time.Millisecond, "the webhook never saw the new API")
		err := dryRun()
		requireDenied(t, err, gate.CodeEtcdSnapshotStale)
		assert.Contains(t, err.Error(), "node gpu-v100-01 from Kubernetes 1.35 to 1.36")
		assert.Contains(t, err.Error(), "no ready ETCDSnapshotFile exists (0 seen")
		assert.Contains(t, err.Error(), "rke2 etcd-snapshot save")
	})
	t.Run("EtcdSnapshotStale: RKE2 reports the fresh one failed", func(t *testing.T) {
		writeSnapshotFile(ctx, t, "local-etcd-snapshot-server-1-failed", map[string]any{
			"readyToUse": false, "creationTime": time.Now().UTC().Format(time.RFC3339),
			"error": map[string]any{"message": "snapshot save: context deadline exceeded", "time": time.Now().UTC().Format(time.RFC3339)}})
		err := deniedOnceSeen(t, dryRun, "(1 seen")
		requireDenied(t, err, gate.CodeEtcdSnapshotStale)
	})
	t.Run("EtcdSnapshotStale: the ready one is older than maxAge", func(t *testing.T) {
		writeSnapshotFile(ctx, t, "local-etcd-snapshot-server-1-old", map[string]any{
			"readyToUse": true, "size": "10485792", "creationTime": now.Add(-env.Config.EtcdSnapshot.MaxAge.Duration - time.Hour).UTC().Format(time.RFC3339)})
		err := deniedOnceSeen(t, dryRun, "the newest ready ETCDSnapshotFile, local-etcd-snapshot-server-1-old (snapshot etcd-snapshot-server-1-old on node server-1)")
		requireDenied(t, err, gate.CodeEtcdSnapshotStale)
	})
	t.Run("a fresh ready snapshot admits the Plan", func(t *testing.T) {
		writeSnapshotFile(ctx, t, "local-etcd-snapshot-server-1-fresh", map[string]any{
			"readyToUse": true, "size": "10485792", "creationTime": now.Add(-10 * time.Minute).UTC().Format(time.RFC3339)})
		// Until the API server's watch cache has the new object, the gate's
		// read (resourceVersion 0) still sees only the old one.
		require.Eventually(t, func() bool { return dryRun() == nil }, 10*time.Second, 100*time.Millisecond, "the fresh snapshot never admitted the Plan")
	})
}

// deniedOnceSeen dry-runs until the denial names want and returns it: the
// gate lists the ETCDSnapshotFiles from the API server's watch cache
// (resourceVersion 0), which may not yet hold an object written a moment
// before (a fresh machine's run was denied for the snapshots it had seen).
func deniedOnceSeen(t *testing.T, dryRun func() error, want string) error {
	t.Helper()
	var err error
	require.Eventually(t, func() bool {
		err = dryRun()
		return err != nil && strings.Contains(err.Error(), want)
	}, 10*time.Second, 100*time.Millisecond, "the denial never named %q", want)
	return err
}

// installSnapshotCRD creates the reduced ETCDSnapshotFile CRD and waits
// until the API server serves the kind.
func installSnapshotCRD(ctx context.Context, t *testing.T) *unstructured.Unstructured {
	t.Helper()
	return installReducedCRD(ctx, t, filepath.Join("k3s", "crd-etcdsnapshotfiles.yaml"), loader.ETCDSnapshotFileGVK, false)
}

// installReducedCRD creates a reduced CRD from testdata (file, under it)
// and waits until the API server serves kind. mayExist: an earlier test
// left it installed, which is fine.
func installReducedCRD(ctx context.Context, t *testing.T, file string, kind schema.GroupVersionKind, mayExist bool) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", file))
	require.NoError(t, err)
	crd := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal(data, &crd.Object))
	if err := env.Admin.Create(ctx, crd); !mayExist || !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(kind.GroupVersion().WithKind(kind.Kind + "List"))
		return env.Admin.List(ctx, list) == nil
	}, 30*time.Second, 200*time.Millisecond, "the %s API is never served", kind.Kind)
	return crd
}

// removeSnapshotCRD deletes the CRD (and so every ETCDSnapshotFile) and
// waits until the kind is no longer served.
func removeSnapshotCRD(t *testing.T, crd *unstructured.Unstructured) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := env.Admin.Delete(ctx, crd); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete the ETCDSnapshotFile CRD: %v", err)
		return
	}
	assert.Eventually(t, func() bool {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(loader.ETCDSnapshotFileGVK.GroupVersion().WithKind("ETCDSnapshotFileList"))
		err := env.Admin.List(ctx, list)
		return apierrors.IsNotFound(err) || meta.IsNoMatchError(err)
	}, 30*time.Second, 200*time.Millisecond, "the ETCDSnapshotFile API is still served")
}

// writeSnapshotFile creates one ETCDSnapshotFile as RKE2 does for a local
// snapshot of server-1: named local-<snapshot>, spec and status together.
func writeSnapshotFile(ctx context.Context, t *testing.T, name string, status map[string]any) {
	t.Helper()
	snapshot := strings.TrimPrefix(name, "local-")
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k3s.cattle.io/v1", "kind": "ETCDSnapshotFile",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"snapshotName": snapshot, "nodeName": "server-1",
			"location": "file:///var/lib/rancher/rke2/server/db/snapshots/" + snapshot},
		"status": status,
	}}
	require.NoError(t, env.Admin.Create(ctx, obj))
}
