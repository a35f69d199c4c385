//go:build scale

package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/test/loadgen"
)

// TestScaleGrowth measures the growth curve (issue 14 item 6): for each
// fleet size in GUG_SCALE_GROWTH (default 1000,5000,15000), a control plane
// of its own holding that fleet with a validator Pod on every GPU node (the
// proof facts a real fleet's webhook caches), `gpu-upgrade-gate serve` synced
// to it, its RSS, then Node relabel reviews flat out and Plan reviews at
// 200/s offered (GUG_SCALE_RUN each, default 10s). It measures, never
// asserts a figure; GUG_SCALE_OUT/growth.json holds the points, written
// after each size.
func TestScaleGrowth(t *testing.T) {
	out := os.Getenv("GUG_SCALE_OUT")
	if out == "" {
		out = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(out, 0o755))
	sizes := os.Getenv("GUG_SCALE_GROWTH")
	if sizes == "" {
		sizes = "1000,5000,15000"
	}
	run := envDuration("GUG_SCALE_RUN", 10*time.Second)
	g := &Growth{Started: time.Now().UTC(), Machine: ThisMachine(),
		Command: fmt.Sprintf("GUG_SCALE_GROWTH=%s GUG_SCALE_RUN=%s go test -tags scale -run TestScaleGrowth ./test/scale/ (make bench-growth)", sizes, run)}
	write := func() {
		data, _ := json.MarshalIndent(g, "", "  ")
		require.NoError(t, os.WriteFile(filepath.Join(out, "growth.json"), data, 0o644))
	}
	defer write()
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		require.NoError(t, err, "GUG_SCALE_GROWTH=%q", sizes)
		if !t.Run(strconv.Itoa(n), func(t *testing.T) { g.Points = append(g.Points, growthPoint(t, out, n, run)) }) {
			g.Failures = append(g.Failures, strconv.Itoa(n))
		}
		write()
	}
}

func growthPoint(t *testing.T, out string, nodes int, run time.Duration) GrowthPoint {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	e := &scaleEnv{out: filepath.Join(out, fmt.Sprintf("growth-%d", nodes)), res: &Results{},
		fleetOptions: fleetgen.Options{Nodes: nodes, Validators: true}}
	require.NoError(t, os.MkdirAll(e.out, 0o755))
	e.setup(ctx, t)
	defer func() { require.NoError(t, e.serve.Stop()) }()
	p := GrowthPoint{Fleet: e.res.Fleet, ProofPods: len(e.fleet.ProofPods)}

	time.Sleep(5 * time.Second) // idle: let the start-up garbage go
	var err error
	p.SyncedRSS, p.SyncedHWM, err = loadgen.ProcessMemory(e.serve.PID())
	require.NoError(t, err)
	p.SyncedFileRSS, err = loadgen.ProcessFileRSS(e.serve.PID())
	require.NoError(t, err)
	p.Load = LoadAverage()
	t.Logf("%d nodes: serve RSS %.1f MiB (peak %.1f MiB), %d proof Pods cached", nodes, float64(p.SyncedRSS)/(1<<20), float64(p.SyncedHWM)/(1<<20), p.ProofPods)

	for _, l := range []struct {
		into      *LoadRun
		kind      string
		scenarios []string
		rate      float64
		workers   int
	}{
		{&p.NodeFlat, fleetgen.KindNode, []string{"relabel"}, 0, 16},
		{&p.Plan200, fleetgen.KindPlan, nil, 200, 64},
	} {
		o := e.options(fleetgen.Select(e.reviews, []string{l.kind}, l.scenarios...))
		o.Rate, o.Workers, o.Duration = l.rate, l.workers, run
		before := LoadAverage()
		sum, err := loadgen.Run(ctx, o)
		require.NoError(t, err)
		*l.into = LoadRun{Summary: *sum, LoadBefore: before, LoadAfter: LoadAverage()}
		t.Logf("%d nodes, %s (load %s):\n%s", nodes, l.kind, before, sum)
		require.Zero(t, sum.Errors(), "%s: wrong decisions or failures", l.kind)
	}
	p.AfterLoadRSS, p.AfterLoadHWM, err = loadgen.ProcessMemory(e.serve.PID())
	require.NoError(t, err)
	return p
}
