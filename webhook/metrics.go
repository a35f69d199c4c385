package webhook

import (
	"slices"
	"strings"
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
		Name: "gpu_upgrade_gate_decision_duration_seconds",
		Help: "Time to decide one review, facts and holder listing included.",
		// Up to the longest webhook timeout (10s), so a p99 near any
		// configured timeout is measurable (GPUUpgradeGateSlowReviews).
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, []string{"resource"})
	refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gpu_upgrade_gate_reviews_refused_total",
		Help: "Reviews denied unread by reason: too_large (body above the cap), busy (no memory budget within the wait), read_timeout (body not received within --review-read-timeout), read_error (body cut off), source_busy (--max-requests-per-source in flight from its address) or no_client_cert (--client-ca set, none presented).",
	}, []string{"reason"})
	// systemDenials: labels are a fixed set each (resources, identity
	// classes, codes), never a user name.
	systemDenials = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gpu_upgrade_gate_system_denials_total",
		Help: "Denials of a system controller (identity: kubelet, suc, exempt, control-plane) outside the per-node steps the gate guards on purpose (SUC's Job start and completion write, the GPU Operator's driver step), by resource and code.",
	}, []string{"resource", "identity", "code"})
	// wouldDenials: labels are the fixed webhook names and codes.
	wouldDenials = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gpu_upgrade_gate_would_deny_total",
		Help: "Writes a webhook in warn or audit mode (config enforcement) admitted that enforce mode would have denied, by webhook name and reason code (once per code).",
	}, []string{"webhook", "code"})
	// rolloutHalted is 1 for each hardware whose rollout a halt holds, 0 for
	// the other hardware of the records (the label is bounded by them).
	rolloutHalted = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gpu_upgrade_gate_rollout_halted",
		Help: "1 while a halt holds the rollout of the hardware (a key of the halt record, docs/proof.md), 0 for the other hardware of the records; every hardware is 1 while the halt record cannot be read.",
	}, []string{"hardware"})
	// haltRecordUnwritable is 1 while this replica cannot write the halt
	// record (haltWriter, haltKeeper): it then refuses every forward move.
	haltRecordUnwritable = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gpu_upgrade_gate_halt_record_unwritable",
		Help: "1 while this replica cannot write the halt record (missing, immutable, or its write refused: a dry-run write each halt interval, and the halt loop's own writes); every forward move of GPU hardware is refused meanwhile.",
	})
	ready = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gpu_upgrade_gate_ready",
		Help: "1 when the caches are synced and fresh and the API server's version is known (readiness), 0 while reviews fail closed.",
	})
	servingCertExpiry = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gpu_upgrade_gate_serving_certificate_expiry_timestamp_seconds",
		Help: "notAfter of the serving certificate the webhook presents now (Unix seconds), as certwatcher loaded it.",
	})
)

// guardedSteps are the per-node steps the gate holds on purpose: a system
// controller waiting there is the design, not an incident.
var guardedSteps = []string{"jobs", "completions", "driver-step"}

func init() {
	register(decisions, latency, refused, systemDenials, wouldDenials, rolloutHalted, haltRecordUnwritable, ready, servingCertExpiry)
}

// gateCollectors are the gate's own metrics: the dashboard and the alerts
// may name only these (webhook/testdata/metrics.txt, TestMetricNames).
var gateCollectors []prometheus.Collector

// register registers the gate's own metrics on controller-runtime's
// registry, which /metrics serves.
func register(cs ...prometheus.Collector) {
	gateCollectors = append(gateCollectors, cs...)
	metrics.Registry.MustRegister(cs...)
}

// observe counts one decision as answered (allowed: what the API server
// was told, which the enforcement mode may have turned from a denial);
// identity is the requester's system identity class ("" for anyone else).
// A denial admitted by the mode counts as an allow with its codes, and in
// gpu_upgrade_gate_would_deny_total under webhook.
func observe(resource, webhook, identity string, d gate.Decision, allowed bool, took time.Duration) {
	decision := "allow"
	if !allowed {
		decision = "deny"
	}
	latency.WithLabelValues(resource).Observe(took.Seconds())
	codes := d.Codes()
	if len(codes) == 0 {
		decisions.WithLabelValues(resource, decision, "").Inc()
	}
	system := !allowed && identity != "" && !slices.Contains(guardedSteps, resource)
	for _, c := range codes {
		decisions.WithLabelValues(resource, decision, string(c)).Inc()
		if allowed && !d.Allowed {
			wouldDenials.WithLabelValues(webhook, string(c)).Inc()
		}
		if system {
			systemDenials.WithLabelValues(resource, identity, string(c)).Inc()
		}
	}
	if system && len(codes) == 0 {
		systemDenials.WithLabelValues(resource, identity, "").Inc()
	}
}

// Built-in preconditions, as gpu_upgrade_gate_precondition_state names them
// (kind "builtin", beside the declared ones).
const (
	preconditionOperatorRollout = "operator-rollout"
	preconditionDrain           = "drain"
	preconditionEtcdSnapshot    = "etcd-snapshot"
	preconditionBuiltin         = "builtin"
)

// notePrecondition records what a review that checked the precondition
// found: unmet when the decision carries its code as a blocker or as a
// warning ("[Code] ...").
func notePrecondition(name string, d gate.Decision, code gate.Code) {
	unmet := slices.Contains(d.Codes(), code) || slices.ContainsFunc(d.Warnings, func(w string) bool { return strings.HasPrefix(w, "["+string(code)+"]") })
	setPreconditionState(func(g *prometheus.GaugeVec, v float64, l ...string) { g.WithLabelValues(l...).Set(v) }, name, preconditionBuiltin, builtinState(unmet))
}

// notePreconditions records the Plan path's built-in preconditions a
// review checked.
func notePreconditions(d gate.Decision, etcd, drain bool) {
	if etcd {
		notePrecondition(preconditionEtcdSnapshot, d, gate.CodeEtcdSnapshotStale)
	}
	if drain {
		notePrecondition(preconditionDrain, d, gate.CodeDrainBlocked)
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
