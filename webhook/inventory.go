package webhook

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
)

// The fleet's readiness for the next upgrade, refreshed from the caches.
// Holders are not listed for it (that would list every GPU node's Pods each
// time); `gpu-upgrade-gate inventory` shows them. Every label is a node,
// a hardware, a record or one of a fixed set of states: no free text.
var (
	nodeStatus = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gpu_upgrade_gate_node_status",
		Help: "1 for each GPU node's inventory status (at-target, qualified, stale, no-record, hardware-mismatch, holders, not-approved), with its hardware, covering record and, at its target, its proof (proven, unproven; empty otherwise).",
	}, []string{"node", "hardware", "status", "record", "proof"})
	nodeProof = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gpu_upgrade_gate_node_proof",
		Help: "For each GPU node at its record's target, 1 for its proof state (proven or unproven) and 0 for the other (docs/proof.md).",
	}, []string{"node", "state"})
	nodeUnproven = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gpu_upgrade_gate_node_unproven_seconds",
		Help: "Seconds since a GPU node at its record's target reached it, while it is not proven; 0 once proven.",
	}, []string{"node"})
	recordExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gpu_upgrade_gate_record_expiry_timestamp_seconds",
		Help: "When each record's canary evidence gets older than maxCanaryAge (Unix seconds), by record id and ConfigMap.",
	}, []string{"record", "configmap"})
	expiryWarning = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gpu_upgrade_gate_record_expiry_warning_seconds",
		Help: "The configured expiryWarning: records expiring within it are warned about.",
	})
	proofSoak = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gpu_upgrade_gate_proof_soak_seconds",
		Help: "The configured proof.soak: how long every proof requirement must have held.",
	})
)

// proofStates are the states nodeProof shows, zeros included.
var proofStates = []string{"proven", "unproven"}

func init() {
	register(nodeStatus, nodeProof, nodeUnproven, recordExpiry, expiryWarning, proofSoak)
}

// inventoryExporter refreshes the fleet gauges from the caches.
type inventoryExporter struct {
	server *Server
	every  time.Duration
	// shown are the series exported last time; the ones that are gone are
	// deleted after the new ones are set, so a scrape never sees a gap.
	shown map[series]bool
}

// series is one exported label set of one gauge.
type series struct {
	gauge  *prometheus.GaugeVec
	labels [5]string
	n      int
}

func (e *inventoryExporter) Start(ctx context.Context) error {
	for {
		wait := e.refresh(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// refresh exports the inventory once and says when to refresh again.
func (e *inventoryExporter) refresh(ctx context.Context) time.Duration {
	cfg := e.server.Config
	expiryWarning.Set(cfg.ExpiryWarning.Seconds())
	proofSoak.Set(cfg.Proof.Soak.Seconds())
	cl, err := e.server.Facts.Cluster(ctx)
	if err != nil {
		return 5 * time.Second // caches not synced yet
	}
	now, at := map[series]bool{}, e.server.now()
	set := func(g *prometheus.GaugeVec, v float64, labels ...string) {
		s := series{gauge: g, n: len(labels)}
		copy(s.labels[:], labels)
		g.WithLabelValues(labels...).Set(v)
		now[s] = true
	}
	for _, n := range gate.Inventory(cfg, cl, nil, at) {
		record := ""
		if n.Record != nil {
			record = n.Record.ID
		}
		set(nodeStatus, 1, n.Node, strings.Join(n.Hardware, ","), string(n.Status), record, n.Proof)
		if n.Proof == "" {
			continue
		}
		for _, s := range proofStates {
			set(nodeProof, boolGauge(s == n.Proof), n.Node, s)
		}
		set(nodeUnproven, unprovenWait(n, at), n.Node)
	}
	for name, r := range cl.Records {
		if r.Record == nil {
			continue
		}
		if done, err := r.Record.CompletedAt(); err == nil {
			set(recordExpiry, float64(done.Add(cfg.MaxCanaryAge.Duration).Unix()), r.Record.ID, name)
		}
	}
	for key, halted := range haltedHardware(cl) {
		set(rolloutHalted, boolGauge(halted), key)
	}
	if cfg.OperatorRollout.Required && e.server.Facts.Live != nil {
		// The operator's own rollout, read as a driver change would read it.
		o := loader.ReadOperatorRollout(ctx, e.server.Facts.Live, cfg)
		setPreconditionState(set, preconditionOperatorRollout, preconditionBuiltin, builtinState(len(o.Unfinished()) > 0))
	}
	exportPreconditions(cl.Preconditions, at, set)
	for s := range e.shown {
		if !now[s] {
			s.gauge.DeleteLabelValues(s.labels[:s.n]...)
		}
	}
	e.shown = now
	return e.every
}

// unprovenWait is how long a node at its target has waited unproven: 0
// once proven, and when the objects give no time it reached its tuple.
func unprovenWait(n gate.NodeInventory, now time.Time) float64 {
	if n.Proof != "unproven" || n.ReachedAt.IsZero() {
		return 0
	}
	return max(0, now.Sub(n.ReachedAt).Seconds())
}

func (e *inventoryExporter) NeedLeaderElection() bool { return false }
