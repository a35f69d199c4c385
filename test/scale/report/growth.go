package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/test/scale"
)

const growthHeading = "## Growth with the fleet"

// growthOf renders the growth curve (growth.json, TestScaleGrowth; issue 14
// item 6) and its memory target. No file: no section, no target.
func growthOf(dir string) (string, []target, error) {
	data, err := os.ReadFile(filepath.Join(dir, "growth.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	var g scale.Growth
	if err := json.Unmarshal(data, &g); err != nil {
		return "", nil, fmt.Errorf("growth.json: %w", err)
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("%s\n\n", growthHeading)
	w("Each size on a control plane of its own: the fleet as above scaled (a fifth GPU nodes), with a Ready GPU Operator validator Pod on every GPU node, ")
	w("the proof facts the webhook caches by label; `serve` synced to it, then Node relabel reviews flat out (16 workers) and Plan reviews at 200/s offered. `%s`\n\n", g.Command)
	w("| nodes (GPU) | proof Pods | RSS synced (peak) | of it the binary's pages (RssFile) | load | Node relabel reviews/s | Node p99 | Plan p99 at 200/s (answered/s) | load | RSS after load (peak) |\n|---|---|---|---|---|---|---|---|---|---|\n")
	var ts []target
	for _, p := range g.Points {
		file := "–"
		if p.SyncedFileRSS > 0 {
			file = mib(p.SyncedFileRSS)
		}
		w("| %d (%d) | %d | %s (%s) | %s | %s | %.0f | %s | %s (%.0f) | %s | %s (%s) |\n", p.Fleet.Nodes, p.Fleet.GPUNodes, p.ProofPods,
			mib(p.SyncedRSS), mib(p.SyncedHWM), file, p.Load, p.NodeFlat.Summary.Throughput, ms(p.NodeFlat.Summary.P99),
			ms(p.Plan200.Summary.P99), p.Plan200.Summary.Throughput, p.Plan200.LoadBefore, mib(p.AfterLoadRSS), mib(p.AfterLoadHWM))
		if p.Fleet.Nodes == 5000 {
			ts = append(ts, target{id: "rss-proof", what: "Webhook RSS with 5,000 nodes synced, with the proof facts (a validator Pod per GPU node)", goal: "≤ 100 MiB",
				measured: fmt.Sprintf("%s once synced (peak %s; load %s); %s after the load runs", mib(p.SyncedRSS), mib(p.SyncedHWM), p.Load, mib(p.AfterLoadRSS)),
				met:      p.SyncedRSS <= 100<<20, known: true, how: "VmRSS of `serve`, `make bench-growth`"})
		}
	}
	if len(g.Failures) > 0 {
		w("\nSizes that did not complete: %s (see the test log).\n", strings.Join(g.Failures, ", "))
	}
	w("\n")
	return b.String(), ts, nil
}
