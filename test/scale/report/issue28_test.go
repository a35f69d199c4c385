package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/test/scale"
)

func peersRun(gate, kyverno, gatekeeper time.Duration) scale.PeersRun {
	const plain = 10 * time.Millisecond
	return scale.PeersRun{Name: "idle, paced 150 ms", Rounds: 3, LoadBefore: "1.00 1.00 1.00", Series: map[string]scale.Stats{
		"plain": {N: 3, P50: plain}, "gate": {N: 3, P50: plain + gate}, "kyverno": {N: 3, P50: plain + kyverno}, "gatekeeper": {N: 3, P50: plain + gatekeeper}}}
}

// TestIssue28Goals: each goal's row says met, not met or not measured from
// what the directory holds.
func TestIssue28Goals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    inputs
		goal  int
		met   string
		shows string
	}{
		{"plan: the gate below the best peer", inputs{peers: &scale.Peers{Runs: []scale.PeersRun{peersRun(2*time.Millisecond, 3*time.Millisecond, 4*time.Millisecond)}}},
			2, "yes", "gate +2.00 ms, best peer kyverno +3.00 ms"},
		{"plan: the gate above the best peer", inputs{peers: &scale.Peers{Runs: []scale.PeersRun{peersRun(5*time.Millisecond, 3*time.Millisecond, 2*time.Millisecond)}}},
			2, "**no**", "best peer gatekeeper +2.00 ms"},
		{"plan: no peer ran", inputs{peers: &scale.Peers{Runs: []scale.PeersRun{{Name: "x", Series: map[string]scale.Stats{"plain": {}, "gate": {}}}},
			Absent: map[string]string{"kyverno": "no binary"}}}, 2, notMeasured, "not measured: kyverno"},
		{"memory: a third of the smallest peer", inputs{peers: &scale.Peers{Idle: []scale.ProcessUse{{Name: "gate", RSS: 40 << 20}, {Name: "kyverno", RSS: 130 << 20}, {Name: "gatekeeper", RSS: 116 << 20}}}},
			3, "**no**", "0.34 of the smallest peer's"},
		{"memory: 5,000 nodes over the goal", inputs{growth: &scale.Growth{Points: []scale.GrowthPoint{{Fleet: scale.FleetInfo{Nodes: 5000}, SyncedRSS: 110 << 20}}}},
			3, "**no**", "5000 nodes 110.0 MiB"},
		{"memory: 5,000 nodes within", inputs{growth: &scale.Growth{Points: []scale.GrowthPoint{{Fleet: scale.FleetInfo{Nodes: 5000}, SyncedRSS: 90 << 20}}}},
			3, "yes", "5000 nodes 90.0 MiB"},
		{"rollout: within the goal", inputs{pace: paceRun(2*time.Second, 3*time.Second)}, 1, "yes", "median 2.0 s, p99 3.0 s"},
		{"rollout: a slow gap over p99", inputs{pace: paceRun(2*time.Second, 20*time.Second)}, 1, "**no**", "p99 20.0 s"},
		{"rollout: absent", inputs{}, 1, notMeasured, "| – |"},
		{"job guard: absent points at the last figure", inputs{}, 4, notMeasured, "per-node guard"},
		{"job guard: beyond its holder listing, within", inputs{res: jobRun(8*time.Millisecond, 4*time.Millisecond, 0)}, 4, "yes", "+4.00 ms beyond its 4.00 ms holder listing (+8.00 ms in all)"},
		{"job guard: the etcd read is the longer wait", inputs{res: jobRun(9*time.Millisecond, 2*time.Millisecond, 3*time.Millisecond)}, 4, "**no**", "+6.00 ms beyond its 3.00 ms etcd snapshot read (beside a 2.00 ms holder listing)"},
		{"job guard: no trace, the holder read alone", inputs{res: &scale.Results{Admission: &scale.Admission{
			Modes: []scale.AdmissionMode{{Name: "idle", Series: map[string]scale.Stats{"job-plain": {N: 1, P50: time.Millisecond}, "job-gate": {N: 1, P50: 7 * time.Millisecond}}}},
			Reads: []scale.HolderReadMode{{Mode: "idle", Reads: map[string]scale.Stats{gateRead: {N: 1, P50: time.Millisecond}}}}}}}, 4, "yes", "+5.00 ms beyond a 1.00 ms holder read (+6.00 ms in all)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := goalRow(t, &tc.in, tc.goal)
			assert.Contains(t, row, "| "+tc.met+" |")
			assert.Contains(t, row, tc.shows)
		})
	}
}

// TestSplice: the block is replaced in place, once, and appended when
// absent; the rest of the document is kept.
func TestSplice(t *testing.T) {
	block := issue28Begin + "\nnew\n" + issue28End + "\n"
	doc := "# Title\n\nbefore\n\n" + issue28Begin + "\nold\n" + issue28End + "\n\n## Reproduce\n"
	got := splice(doc, block)
	assert.Equal(t, "# Title\n\nbefore\n\n"+block+"\n## Reproduce\n", got)
	assert.Equal(t, got, splice(got, block))
	assert.Equal(t, "# Title\n\n"+block, splice("# Title\n", block))
}

// paceRun is a pace.json of a gate wave whose proof → next Job gaps are
// gaps, and a floor wave.
func paceRun(gaps ...time.Duration) *paceResults {
	t0 := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	wave := paceWave{Mode: "gate", Start: t0}
	at := t0
	wave.Nodes = append(wave.Nodes, paceNode{Node: "n0", Started: at, ProofHeld: at.Add(time.Second)})
	for i, g := range gaps {
		at = wave.Nodes[i].ProofHeld.Add(g)
		wave.Nodes = append(wave.Nodes, paceNode{Node: fmt.Sprint("n", i+1), Started: at, ProofHeld: at.Add(time.Second)})
	}
	floor := paceWave{Mode: "floor", Nodes: []paceNode{{Completed: t0}, {Started: t0.Add(100 * time.Millisecond)}}}
	return &paceResults{Soak: 3 * time.Second, LoadAvg: [2]string{"1 1 1", "1 1 1"}, Command: "make bench-pace", Waves: []paceWave{wave, floor}}
}

// jobRun is a scale.json of one idle mode whose Job start took added more
// than the plain Job, with its trace's holder listing and etcd read
// (none: 0) at the median.
func jobRun(added, holders, etcd time.Duration) *scale.Results {
	phases := map[string]scale.Stats{"holders": {N: 1, P50: holders}}
	if etcd > 0 {
		phases["etcd"] = scale.Stats{N: 1, P50: etcd}
	}
	return &scale.Results{Admission: &scale.Admission{Modes: []scale.AdmissionMode{{Name: "idle", LoadBefore: "1.00 1.00 1.00", JobPhases: phases,
		Series: map[string]scale.Stats{"job-plain": {N: 1, P50: time.Millisecond}, "job-gate": {N: 1, P50: time.Millisecond + added}}}}}}
}

// TestPeerWebhooks: the API server's wait on each webhook and the gate's
// own phases are written beside each other, one row a run; none measured,
// no table.
func TestPeerWebhooks(t *testing.T) {
	run := peersRun(5*time.Millisecond, 3*time.Millisecond, 4*time.Millisecond)
	run.Webhooks = map[string]time.Duration{"plans.gpu-upgrade-gate.io": 4 * time.Millisecond, "validate.kyverno.svc-fail": 2 * time.Millisecond}
	run.GateHandler = scale.Stats{N: 3, P50: 3 * time.Millisecond, P90: 4 * time.Millisecond}
	run.GatePhases = map[string]scale.Stats{"holders": {N: 3, P50: 2 * time.Millisecond, P90: 3 * time.Millisecond}, "read": {N: 3, P50: time.Millisecond, P90: time.Millisecond}}
	var b strings.Builder
	w := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	writePeerWebhooks(w, &scale.Peers{Runs: []scale.PeersRun{run}})
	assert.Contains(t, b.String(), "| idle, paced 150 ms | 4.00 ms | 2.00 ms | 3.00 ms (4.00 ms) | read 1.00 ms (1.00 ms), holders 2.00 ms (3.00 ms) |")
	b.Reset()
	writePeerWebhooks(w, &scale.Peers{Runs: []scale.PeersRun{peersRun(1, 1, 1)}})
	assert.Empty(t, b.String())
}

// TestIssue28Causes: a goal not met carries what the same runs measured of
// its cause (the gate's traced holder listing, the binary's own pages); a
// goal met carries none.
func TestIssue28Causes(t *testing.T) {
	traced := func(r scale.PeersRun) scale.PeersRun {
		r.GateHandler = scale.Stats{N: 3, P50: 1500 * time.Microsecond}
		r.GatePhases = map[string]scale.Stats{"admit": {P50: 100 * time.Microsecond}, "read": {P50: 100 * time.Microsecond},
			"decode": {P50: 100 * time.Microsecond}, "facts": {P50: 100 * time.Microsecond}, "engine": {P50: 50 * time.Microsecond},
			"holders": {P50: 1200 * time.Microsecond}}
		return r
	}
	over := &scale.Growth{Points: []scale.GrowthPoint{{Fleet: scale.FleetInfo{Nodes: 5000}, SyncedRSS: 110 << 20, SyncedFileRSS: 34 << 20}}}
	for _, tc := range []struct {
		name  string
		in    inputs
		goal  int
		cause string
	}{
		{"plan over: the holder listing", inputs{peers: &scale.Peers{Runs: []scale.PeersRun{traced(peersRun(3*time.Millisecond, 4*time.Millisecond, 2500*time.Microsecond))}}},
			2, "0.50 ms over gatekeeper; the gate's handler 1.50 ms p50, its longest part the holder listing (1.20 ms), a live read of the Pods on the Plan's pending nodes, starting about 0.45 ms into the review"},
		{"plan over, untraced", inputs{peers: &scale.Peers{Runs: []scale.PeersRun{peersRun(3*time.Millisecond, 4*time.Millisecond, 2500*time.Microsecond)}}},
			2, "the gate's phases were not traced in this run"},
		{"plan met", inputs{peers: &scale.Peers{Runs: []scale.PeersRun{traced(peersRun(2*time.Millisecond, 4*time.Millisecond, 2500*time.Microsecond))}}},
			2, "| – |"},
		{"memory over: the binary's pages", inputs{growth: over}, 3, "of the 110.0 MiB, 34.0 MiB is the binary's own pages (RssFile) and 76.0 MiB anonymous"},
		{"memory beside the peers", inputs{peers: &scale.Peers{Idle: []scale.ProcessUse{{Name: "gate", RSS: 60 << 20, FileRSS: 33 << 20}, {Name: "gatekeeper", RSS: 105 << 20}}}},
			3, "a third of the smallest is 35.0 MiB and the gate's own pages (RssFile) are 33.0 MiB of its 60.0 MiB"},
		{"memory met", inputs{growth: &scale.Growth{Points: []scale.GrowthPoint{{Fleet: scale.FleetInfo{Nodes: 5000}, SyncedRSS: 90 << 20, SyncedFileRSS: 34 << 20}}}},
			3, "| – |"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := goalRow(t, &tc.in, tc.goal)
			assert.Contains(t, row, tc.cause)
			assert.True(t, strings.HasSuffix(row, "| – |") == strings.HasSuffix(tc.cause, "| – |"), row)
		})
	}
}

// goalRow is goal n's row of the block rendered from in.
func goalRow(t *testing.T, in *inputs, n int) string {
	block := issue28Block(in)
	for _, l := range strings.Split(block, "\n") {
		if strings.HasPrefix(l, fmt.Sprintf("| %d |", n)) {
			return l
		}
	}
	require.Failf(t, "no row", "goal %d in:\n%s", n, block)
	return ""
}

// TestReplaceSection: a section is replaced up to the next "## " heading,
// the rest kept, and added before "## Reproduce" when absent.
func TestReplaceSection(t *testing.T) {
	doc := "# T\n\n## Memory\n\nm\n\n" + growthHeading + "\n\nold\n| 1 |\n\n## Faults\n\nf\n\n## Reproduce\n\nr\n"
	got := replaceSection(doc, growthHeading, growthHeading+"\n\nnew\n\n")
	assert.Equal(t, "# T\n\n## Memory\n\nm\n\n"+growthHeading+"\n\nnew\n\n## Faults\n\nf\n\n## Reproduce\n\nr\n", got)
	assert.Equal(t, got, replaceSection(got, growthHeading, growthHeading+"\n\nnew\n\n"))
	added := replaceSection("# T\n\n## Reproduce\n\nr\n", paceHeading, paceHeading+"\n\np\n")
	assert.Equal(t, "# T\n\n"+paceHeading+"\n\np\n\n## Reproduce\n\nr\n", added)
}
