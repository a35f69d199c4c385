//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/controlplane"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// restartWith restarts the gate's webhook after change has edited its
// configuration; the returned func restores the configuration before.
func restartWith(t *testing.T, change func(*gate.Config)) func() {
	t.Helper()
	was := *env.Config
	require.NoError(t, env.StopWebhook())
	change(env.Config)
	require.NoError(t, env.StartWebhook(context.Background()))
	return func() {
		require.NoError(t, env.StopWebhook())
		*env.Config = was
		require.NoError(t, env.StartWebhook(context.Background()))
	}
}

// TestEnforcementModes: through the real API server, a Plan of concurrency
// 3 is refused by the enforcing gate; a gate in audit or warn mode admits
// it, and the API server's audit log (its would-deny annotation), the
// warnings (warn only) and gpu_upgrade_gate_would_deny_total name its
// blocker.
func TestEnforcementModes(t *testing.T) {
	ctx := context.Background()
	alice, warnings := as(t, "alice")
	unsafe := func(name string) error {
		p := plan(name, "v100-r580", "gpu-v100-01")
		p.Spec.Concurrency = 3
		return alice.Create(ctx, p, client.DryRunAll)
	}
	requireDeniedWith(t, unsafe("mode-enforce"), gate.CodeConcurrencyNotSerial)

	series := `gpu_upgrade_gate_would_deny_total{code="ConcurrencyNotSerial",webhook="` + webhook.WebhookPlans + `"}`
	for _, mode := range []gate.EnforcementMode{gate.EnforcementAudit, gate.EnforcementWarn} {
		t.Run(string(mode), func(t *testing.T) {
			defer restartWith(t, func(c *gate.Config) { c.Enforcement = gate.EnforcementConfig{Mode: mode} })()
			before := scrape(t)[series]
			warnings.Take()
			name := "mode-" + string(mode)
			require.NoError(t, unsafe(name), "%s mode admits the unsafe Plan", mode)

			ws := strings.Join(warnings.Take(), "\n")
			if mode == gate.EnforcementWarn {
				assert.Contains(t, ws, "gpu-upgrade-gate would deny this write (enforcement: warn): [ConcurrencyNotSerial]")
			} else {
				assert.NotContains(t, ws, "would deny", "audit mode tells the client nothing")
			}

			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			ev, err := env.CP.WaitAuditEvent(wctx, func(e controlplane.AuditEvent) bool {
				return e.Stage == "ResponseComplete" && e.ObjectRef != nil && e.ObjectRef.Resource == "plans" && e.ObjectRef.Name == name
			})
			require.NoError(t, err)
			a := ev.Annotations
			assert.Equal(t, "allow", a[webhook.WebhookPlans+"/"+gate.AuditDecision])
			assert.Equal(t, string(mode), a[webhook.WebhookPlans+"/"+gate.AuditEnforcement])
			assert.Contains(t, strings.Split(a[webhook.WebhookPlans+"/"+gate.AuditWouldDeny], ","), string(gate.CodeConcurrencyNotSerial))
			require.NotNil(t, ev.ResponseStatus)
			assert.Equal(t, int32(201), ev.ResponseStatus.Code, "the API server admitted it")

			assert.Equal(t, before+1, scrape(t)[series])
		})
	}
	requireDeniedWith(t, unsafe("mode-enforce-again"), gate.CodeConcurrencyNotSerial)
}
