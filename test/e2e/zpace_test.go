//go:build e2e && pace

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
)

// The rollout's pace (issue 28 goal 1), a benchmark, not a test of
// correctness: `make bench-pace` (build tags e2e and pace; never in `make
// test`). A wave of five V100 nodes under one Plan of concurrency 1, the
// real SUC and the real kube-apiserver, run three times: with the gate (its
// Plan nudge on), with the gate and its nudge off (SUC's backoff alone, as
// before), and with the gate absent (its webhook configuration removed, the
// nudge off: SUC alone, the floor). No kubelet, Job controller, GPU
// Operator or nfd-master runs here: the test plays each of them for every
// node, as TestSUCWaveWaitsForProof does (the Job's pod cordons the node,
// the node reports the target, the Job controller marks the Job complete,
// the validator turns Ready and an allocation check succeeds), at once and
// under their own identities; it never writes SUC's objects or the Plan once
// the wave started. The proof then holds after the soak (proof.soak, 3s in
// the e2e config), to the second of the objects' timestamps.
//
// Per node it records when SUC's Job started (parallelism 1 seen by a 50ms
// poll), when the test completed it, when its proof held (the validator's
// Ready time, which is the latest of the node's times, plus the soak) and
// when SUC's completion landed (uncordoned and labelled); the wave's pace is
// each next Job's start minus the previous node's proof (with the gate) or
// completion (the floor). The results go to $GUG_PACE_OUT/pace.json for the
// report (test/scale/report, docs/performance.md).

const paceNodes = 5

type paceNode struct {
	Node                                 string
	Started, Completed, ProofHeld, Freed time.Time
}

type paceWaveResult struct {
	Mode  string
	Nodes []paceNode
	// Start and End: the first Job's start, the last node's completion.
	Start, End time.Time
}

type paceResults struct {
	Soak     time.Duration
	LoadAvg  [2]string // before, after
	Command  string
	Waves    []paceWaveResult
	Finished time.Time
}

func TestRolloutPace(t *testing.T) {
	res := paceResults{Soak: env.Config.Proof.Soak.Duration, LoadAvg: [2]string{loadAvg(), ""},
		Command: "make bench-pace (go test -tags e2e,pace -run TestRolloutPace ./test/e2e/)"}
	ctx := context.Background()
	restart := func(noNudge bool) {
		require.NoError(t, env.StopWebhook())
		env.NoPlanNudge = noNudge
		require.NoError(t, env.StartWebhook(ctx))
	}
	// One Plan holds the whole wave: the config's wave size (2 in the e2e
	// config) is raised to it for this run (the canary gpu-v100-03 is proven).
	wave := env.Config.WaveSize
	env.Config.WaveSize = paceNodes
	restart(false)
	t.Cleanup(func() {
		env.Config.WaveSize = wave
		restart(false)
	})
	for _, mode := range []string{"gate", "gate-no-nudge", "floor"} {
		t.Run(mode, func(t *testing.T) {
			switch mode {
			case "gate-no-nudge":
				restart(true)
			case "floor":
				require.NoError(t, env.UnregisterWebhook(ctx))
				t.Cleanup(func() { require.NoError(t, env.RegisterWebhook(ctx)) })
			}
			res.Waves = append(res.Waves, paceWave(t, mode))
		})
	}
	res.LoadAvg[1], res.Finished = loadAvg(), time.Now()
	for _, w := range res.Waves {
		t.Log(w.summary())
	}
	if dir := os.Getenv("GUG_PACE_OUT"); dir != "" {
		data, err := json.MarshalIndent(res, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "pace.json"), data, 0o644))
	}
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// paceWave runs one wave and returns what it recorded.
func paceWave(t *testing.T, mode string) paceWaveResult {
	t.Helper()
	needSUC(t)
	ctx := context.Background()
	require.NoError(t, env.Admin.DeleteAllOf(ctx, &upgradev1.Plan{}, client.InNamespace(testenv.SUCNamespace)))
	var names []string
	var specs []testenv.NodeSpec
	for i := 1; i <= paceNodes; i++ {
		names = append(names, fmt.Sprintf("pace-%s-v100-%d", mode, i))
		specs = append(specs, v100Spec(names[i-1], nil))
	}
	require.NoError(t, env.CreateNodes(ctx, specs))
	t.Cleanup(func() { removeV100Nodes(t, "after-pace-"+mode, names...) })
	p := sucPlan("pace-"+mode, "v100-r580", names...)
	alice, _ := as(t, "alice")
	require.NoError(t, alice.Create(ctx, p))
	t.Cleanup(func() {
		_ = client.IgnoreNotFound(env.Admin.Delete(ctx, p))
		_ = env.Admin.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(testenv.SUCNamespace), client.MatchingLabels{upgradev1.LabelPlan: p.Name})
	})
	release(t, p)
	w := paceWaveResult{Mode: mode}
	done := map[string]bool{}
	hash := func(j *batchv1.Job) string { return j.Labels[upgradev1.LabelPlanName(p.Name)] }
	var hashes = map[string]string{}
	// freed records when each finished node's completion landed.
	freed := func(now time.Time) {
		for i := range w.Nodes {
			n := &w.Nodes[i]
			if n.Freed.IsZero() {
				if node := getNode(t, n.Node); !node.Spec.Unschedulable && node.Labels[upgradev1.LabelPlanName(p.Name)] == hashes[n.Node] {
					n.Freed = now
				}
			}
		}
	}
	for len(w.Nodes) < paceNodes {
		var node string
		var job *batchv1.Job
		deadline := time.Now().Add(5 * time.Minute)
		for job == nil {
			now := time.Now()
			require.True(t, now.Before(deadline), "%s: SUC started no Job of node %d within 5 minutes", mode, len(w.Nodes)+1)
			for _, n := range names {
				if j := jobFor(t, p.Name, n); !done[n] && running(j) && !finished(j) {
					node, job = n, j
				}
			}
			freed(now)
			if job == nil {
				time.Sleep(50 * time.Millisecond)
			}
		}
		rec := paceNode{Node: node, Started: time.Now()}
		done[node], hashes[node] = true, hash(job)
		require.NoError(t, env.CordonAsSUCJob(ctx, node))
		require.NoError(t, env.MoveNodeTo(ctx, node, testenv.Target))
		require.NoError(t, env.FinishJob(ctx, job, true))
		rec.Completed = time.Now()
		at := time.Now().Truncate(time.Second)
		require.NoError(t, env.ProveUpgradedNode(ctx, node, at))
		rec.ProofHeld = at.Add(env.Config.Proof.Soak.Duration)
		w.Nodes = append(w.Nodes, rec)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for slices.ContainsFunc(w.Nodes, func(n paceNode) bool { return n.Freed.IsZero() }) {
		require.True(t, time.Now().Before(deadline), "%s: SUC completed not every node within 5 minutes", mode)
		freed(time.Now())
		time.Sleep(50 * time.Millisecond)
	}
	w.Start, w.End = w.Nodes[0].Started, w.Nodes[len(w.Nodes)-1].Freed
	return w
}

func (w paceWaveResult) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: wave %s", w.Mode, w.End.Sub(w.Start).Round(time.Millisecond))
	for i, n := range w.Nodes {
		fmt.Fprintf(&b, "\n  %s: completion landed %s after proof", n.Node, n.Freed.Sub(n.ProofHeld).Round(time.Millisecond))
		if i+1 < len(w.Nodes) {
			fmt.Fprintf(&b, "; next Job %s after proof, %s after the Job completed", w.Nodes[i+1].Started.Sub(n.ProofHeld).Round(time.Millisecond), w.Nodes[i+1].Started.Sub(n.Completed).Round(time.Millisecond))
		}
	}
	return b.String()
}
