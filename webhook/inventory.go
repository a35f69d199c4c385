package webhook

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// nodeStatus is the fleet's readiness for the next upgrade, one series per
// GPU node, so a dashboard shows which nodes are qualified, stale or
// uncovered. Holders are not listed for it (that would list every GPU
// node's Pods each time); `gpu-upgrade-gate inventory` shows them.
var nodeStatus = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "gpu_upgrade_gate_node_status",
	Help: "1 for each GPU node's inventory status (at-target, qualified, stale, no-record, hardware-mismatch, holders, not-approved), with its hardware, covering record and, at its target, its proof (proven, unproven; empty otherwise).",
}, []string{"node", "hardware", "status", "record", "proof"})

func init() { metrics.Registry.MustRegister(nodeStatus) }

// inventoryExporter refreshes nodeStatus from the caches.
type inventoryExporter struct {
	server *Server
	every  time.Duration
	// shown are the label sets exported last time; the ones that are gone
	// are deleted after the new ones are set, so a scrape never sees a gap.
	shown map[[5]string]bool
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
	cl, err := e.server.Facts.Cluster(ctx)
	if err != nil {
		return 5 * time.Second // caches not synced yet
	}
	now := map[[5]string]bool{}
	for _, n := range gate.Inventory(e.server.Config, cl, nil, e.server.now()) {
		record := ""
		if n.Record != nil {
			record = n.Record.ID
		}
		l := [5]string{n.Node, strings.Join(n.Hardware, ","), string(n.Status), record, n.Proof}
		nodeStatus.WithLabelValues(l[:]...).Set(1)
		now[l] = true
	}
	for l := range e.shown {
		if !now[l] {
			nodeStatus.DeleteLabelValues(l[:]...)
		}
	}
	e.shown = now
	return e.every
}

func (e *inventoryExporter) NeedLeaderElection() bool { return false }
