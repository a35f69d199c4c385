package webhook

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

var (
	decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gpu_upgrade_gate_decisions_total",
		Help: "Admission decisions by resource, decision (allow|deny) and reason code; a denial counts once per code, an allow with no code has code=\"\".",
	}, []string{"resource", "decision", "code"})
	latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gpu_upgrade_gate_decision_duration_seconds",
		Help:    "Time to decide one review, facts and holder listing included.",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
	}, []string{"resource"})
	refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gpu_upgrade_gate_reviews_refused_total",
		Help: "Reviews denied unread by reason: too_large (body above the cap), busy (no memory budget within the wait) or no_client_cert (--client-ca set, none presented).",
	}, []string{"reason"})
)

func init() { metrics.Registry.MustRegister(decisions, latency, refused) }

func observe(resource string, d gate.Decision, took time.Duration) {
	decision := "allow"
	if !d.Allowed {
		decision = "deny"
	}
	latency.WithLabelValues(resource).Observe(took.Seconds())
	codes := d.Codes()
	if len(codes) == 0 {
		decisions.WithLabelValues(resource, decision, "").Inc()
	}
	for _, c := range codes {
		decisions.WithLabelValues(resource, decision, string(c)).Inc()
	}
}
