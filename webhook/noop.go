package webhook

import (
	"context"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// PathBenchNoop is served only with Options.BenchNoop: a webhook that
// allows every review without looking at it, the standard way
// (controller-runtime's handler decodes the review and answers its uid).
// It is the floor a webhook hop costs on a machine, measured beside the
// gate in the same process (test/scale's admission phase, series noop):
// the gate's own cost is its series minus this one. Nothing the chart
// renders calls it.
const PathBenchNoop = "/bench/noop"

func benchNoop() http.Handler {
	return &admission.Webhook{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return admission.Allowed("")
	})}
}
