//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
)

// In a suc*_test.go file: it starts the real SUC, which then acts on every
// later test's Plans, so it runs after the tests that need SUC stopped.

// TestEtcdSnapshotHoldsSUCJob: the real SUC's start of a GPU node's Job
// that moves its RKE2 minor is held while no ready snapshot is recent, even
// for a Plan admitted while one was (RKE2 prunes old snapshots; the Plan may
// wait for its window), and starts by SUC's own retry once RKE2 has taken a
// new one. The test plays RKE2 as above.
func TestEtcdSnapshotHoldsSUCJob(t *testing.T) {
	needSUC(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	crd := installSnapshotCRD(ctx, t)
	t.Cleanup(func() { removeSnapshotCRD(t, crd) })
	const node = "etcd-v100-a"
	require.NoError(t, env.CreateNodes(ctx, []testenv.NodeSpec{v100Spec(node, nil)}))
	writeSnapshotFile(ctx, t, "local-etcd-snapshot-server-1-pruned", map[string]any{
		"readyToUse": true, "size": "10485792", "creationTime": now.Add(-10 * time.Minute).UTC().Format(time.RFC3339)})
	alice, _ := as(t, "alice")
	p := sucPlan("etcd-suc", "v100-r580", node)
	require.Eventually(t, func() bool { return alice.Create(ctx, p.DeepCopy(), client.DryRunAll) == nil }, 30*time.Second, 200*time.Millisecond)
	require.NoError(t, alice.Create(ctx, p), "admitted while a fresh snapshot exists")
	// As a SUC wave's: the started Job and the node go, so no later test
	// sees a node out or at the target unproven.
	w := &sucWave{plan: p, nodes: []string{node}}
	t.Cleanup(func() { w.cleanup(t) })

	// RKE2 prunes the snapshot (its retention) before SUC starts the node.
	pruned := &unstructured.Unstructured{}
	pruned.SetGroupVersionKind(loader.ETCDSnapshotFileGVK)
	pruned.SetName("local-etcd-snapshot-server-1-pruned")
	require.NoError(t, env.Admin.Delete(ctx, pruned))
	// The gate reads the snapshots from the API server's watch cache
	// (resourceVersion 0): wait until a Plan check no longer sees the
	// pruned one, so SUC's Job start cannot either.
	probe := sucPlan("etcd-suc-probe", "v100-r580", node)
	require.Eventually(t, func() bool { return alice.Create(ctx, probe.DeepCopy(), client.DryRunAll) != nil }, 10*time.Second, 100*time.Millisecond, "the gate still sees the pruned snapshot")
	release(t, p)
	stoppedAtTheJob(t, "etcd-suc", node, gate.CodeEtcdSnapshotStale)
	msg := jobDenials(t, "etcd-suc", node)[0].ResponseStatus.Message
	assert.Contains(t, msg, "no ready ETCDSnapshotFile exists (0 seen")

	// RKE2 takes a new one: SUC's own retry starts the node.
	writeSnapshotFile(ctx, t, "local-etcd-snapshot-server-1-new", map[string]any{
		"readyToUse": true, "size": "10485792", "creationTime": now.UTC().Format(time.RFC3339)})
	eventually(t, sucRetryDeadline, "SUC starts etcd-suc's Job on "+node+" once a fresh snapshot exists", func() bool {
		return running(jobFor(t, "etcd-suc", node))
	})
}
