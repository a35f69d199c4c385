//go:build e2e

package loadgen

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
)

// TestSmoke runs the load generator for a few seconds against the webhook
// (in this process, in front of a real kube-apiserver holding a 600-node
// fleet) and checks only correctness: every answer the expected decision, no
// errors. It measures nothing: make bench does (docs/performance.md).
func TestSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f := fleetgen.Generate(fleetgen.Options{Seed: 1, Nodes: 600, GPUNodes: 200, Kubelet: true})
	env, err := testenv.Start(ctx, testenv.Options{Config: f.Config})
	require.NoError(t, err)
	defer func() { require.NoError(t, env.Stop()) }()

	// The fleet predates the gate: written with the webhook unregistered.
	require.NoError(t, env.UnregisterWebhook(ctx))
	require.NoError(t, f.Apply(ctx, env.Admin, 16))
	require.NoError(t, env.RegisterWebhook(ctx))

	o := Options{URL: fmt.Sprintf("https://127.0.0.1:%d", env.Port), CA: env.CA.PEM, Reviews: f.Reviews(time.Now())}
	// Wait until the webhook's informers hold the fleet.
	var wrong []*Result
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if wrong, err = Check(ctx, o); err == nil && len(wrong) == 0 {
			break
		}
	}
	require.NoError(t, err)
	require.Empty(t, wrong, "the webhook never gave the fleet's decisions; first: %v", func() string {
		if len(wrong) > 0 {
			return Describe(wrong[0])
		}
		return ""
	}())

	o.Workers, o.Duration = 4, 3*time.Second
	s, err := Run(ctx, o)
	require.NoError(t, err)
	t.Logf("%s", s)
	require.Positive(t, s.Answered)
	require.Zero(t, s.Errors(), "wrong decisions or failed requests:\n%s", s)
	require.Zero(t, s.Status5xx)
}
