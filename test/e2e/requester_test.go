//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// TestRequesterRequired (requireRequester, the default) through the API
// server: a GPU Plan CREATE without gpu-upgrade-gate.io/requested-by is
// refused with the annotation to add, and admitted with it; a Plan from
// before the gate (written while the webhook was unregistered) keeps
// working for an edit that leaves its spec alone, and its spec change (a new
// rollout) is refused until it names its writer.
func TestRequesterRequired(t *testing.T) {
	ctx := context.Background()
	alice, _ := as(t, "alice")
	// sucPlan's Secret is never created: SUC starts no Job for it.
	p := sucPlan("requester-canary", "v100-r580", "gpu-v100-01")
	delete(p.Annotations, gate.AnnotationRequestedBy)
	err := alice.Create(ctx, p.DeepCopy(), client.DryRunAll)
	requireDenied(t, err, gate.CodeRequesterMissing)
	assert.Contains(t, err.Error(), `a GPU Plan is created without annotation gpu-upgrade-gate.io/requested-by, which names who asked for the rollout (a halt of it may not be cleared by them); add it with your username: metadata.annotations: {gpu-upgrade-gate.io/requested-by: "alice"}`)
	named := p.DeepCopy()
	named.Annotations[gate.AnnotationRequestedBy] = "alice"
	require.NoError(t, alice.Create(ctx, named, client.DryRunAll), "the same Plan naming its writer")

	// A Plan from before the gate.
	require.NoError(t, env.UnregisterWebhook(ctx))
	err = env.Admin.Create(ctx, p)
	require.NoError(t, env.RegisterWebhook(ctx))
	require.NoError(t, err)
	t.Cleanup(func() { removePlan(t, p) })
	edit := func(mod func(*upgradev1.Plan)) error {
		var cur upgradev1.Plan
		require.NoError(t, env.Admin.Get(ctx, client.ObjectKeyFromObject(p), &cur))
		mod(&cur)
		return alice.Update(ctx, &cur, client.DryRunAll)
	}
	newRollout := func(q *upgradev1.Plan) {
		q.Spec.Tolerations = append(q.Spec.Tolerations, corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists})
	}
	eventually(t, 30*time.Second, "the webhook is called again and refuses the spec change", func() bool {
		err := edit(newRollout)
		return err != nil && strings.Contains(err.Error(), "[RequesterMissing] this update changes the GPU Plan's spec (a new rollout) without annotation gpu-upgrade-gate.io/requested-by")
	})
	requireDenied(t, edit(newRollout), gate.CodeRequesterMissing)
	require.NoError(t, edit(func(q *upgradev1.Plan) { q.Labels = map[string]string{"team": "ml"} }), "an edit that leaves the spec alone")
	require.NoError(t, edit(func(q *upgradev1.Plan) { newRollout(q); q.Annotations[gate.AnnotationRequestedBy] = "alice" }), "the new rollout naming its writer")
}
