//go:build e2e

package neighbours

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/test/chart"
)

// TestHelmUpgradeWhileDown (issue 24): with no gate replica answering, a
// plain `helm upgrade --reuse-values` of the release (the way a fixed image
// or config is rolled out) succeeds with the real helm against the real
// API server: the chart writes nothing the gate's webhooks (failurePolicy
// Fail) review, and the halt record in particular is created only when it
// does not exist, never rewritten. The neighbouring case, that the gate is
// really down: a write the halts webhook reviews fails calling it. The
// record is left as it was (same resourceVersion).
func TestHelmUpgradeWhileDown(t *testing.T) {
	need(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: namespace, Name: cfg.Halts.ConfigMap}
	var before corev1.ConfigMap
	require.NoError(t, admin.Get(ctx, key, &before))

	require.NoError(t, serve.Stop())
	t.Cleanup(func() {
		saKubeconfig, err := kubeconfigFor(ctx, namespace, release)
		require.NoError(t, err)
		serve, err = testenv.StartServe(ctx, testenv.ServeOptions{Binary: serveBin, Kubeconfig: saKubeconfig, Config: cfg,
			Dir: filepath.Join(work, "serve-after-upgrade"), CertDir: certDir, Port: serve.Port})
		require.NoError(t, err)
	})
	down := before.DeepCopy()
	err := admin.Update(ctx, down, client.DryRunAll)
	require.Error(t, err, "the gate is stopped: its halts webhook (Fail) cannot be called")
	assert.Contains(t, err.Error(), "failed calling webhook \"halts.gpu-upgrade-gate.io\"")

	dir, err := chart.Dir()
	require.NoError(t, err)
	require.NoError(t, helmCmd(ctx, "upgrade", release, dir, "--namespace", namespace, "--reuse-values"))
	var after corev1.ConfigMap
	require.NoError(t, admin.Get(ctx, key, &after))
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "the upgrade does not write the halt record")
}
