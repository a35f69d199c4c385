//go:build e2e

package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// webhookRequests counts the reviews the webhook server received at path,
// from every test of this process. Only for paths no other test's
// controller writes to (a real SUC writes Plans, Jobs and Nodes, so those
// count their own writes from the audit log: ownWrites).
func webhookRequests(t *testing.T, path string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	var sum float64
	for _, f := range families {
		if f.GetName() == "controller_runtime_webhook_requests_total" {
			for _, m := range f.Metric {
				if label(m, "webhook") == path {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}
