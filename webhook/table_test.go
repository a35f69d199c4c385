package webhook

import (
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWebhookTableRows: every row of the webhook table is complete and is
// what the server serves at its path; the chart's side is test/chart's
// TestWebhookTable and TestWebhooksTemplateIsGenerated, the contract's codes
// TestDocumentedCodes. A new review path is a row, its decide function and
// its contract.
func TestWebhookTableRows(t *testing.T) {
	s := &Server{Log: logr.Discard()}
	hs := s.handlers()
	require.Len(t, hs, len(Webhooks), "two rows share a path")
	names := map[string]bool{}
	for i := range Webhooks {
		w := &Webhooks[i]
		t.Run(w.Name, func(t *testing.T) {
			assert.False(t, names[w.Name], "name used twice")
			names[w.Name] = true
			assert.True(t, strings.HasSuffix(w.Name, ".gpu-upgrade-gate.io"), "name")
			assert.True(t, strings.HasPrefix(w.Path, "/validate/"), "path")
			assert.Same(t, w, hs[w.Path].Webhook, "the handler at %s serves this row", w.Path)
			assert.NotNil(t, w.decide, "decide")
			assert.NotEmpty(t, w.Metric, "metric label")
			assert.NotEmpty(t, w.Operations, "operations")
			assert.NotEmpty(t, w.Scope, "scope")
			assert.NotEmpty(t, w.FailurePolicy, "failure policy")
			assert.NotEmpty(t, w.Why, "the chart's comment")
			require.NotEmpty(t, w.Resources, "resources")
			for _, r := range w.Resources {
				assert.NotEmpty(t, r.Kind.Kind, "%s holds no kind", r.Resource)
				assert.Subset(t, w.Operations, w.OperationsOf(r), "%s narrows the row's operations", r.Resource)
			}
			_, err := os.Stat(w.Contract)
			assert.NoError(t, err, "contract")
		})
	}
}
