package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/test/scale"
)

// Issue 28's goals, each beside its figure, the load average and the
// command, and the side-by-side run with the peers (peers.json, `make
// bench-peers`). The block sits between markers so that `make bench-peers`
// can refresh it alone in an existing docs/performance.md (-splice) while
// `make bench` writes it with the rest.

const (
	issue28Begin = "<!-- generated: issue 28 (make bench-peers refreshes this block alone) -->"
	issue28End   = "<!-- end generated: issue 28 -->"
)

// inputs are the bench directory's results; a nil one was not measured.
type inputs struct {
	res    *scale.Results
	growth *scale.Growth
	peers  *scale.Peers
	// pace is `make bench-pace`'s pace.json (pace.go).
	pace *paceResults
}

func readInputs(dir string) (*inputs, error) {
	in := &inputs{}
	for name, v := range map[string]any{"scale.json": &in.res, "growth.json": &in.growth, "peers.json": &in.peers, "pace.json": &in.pace} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, v); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return in, nil
}

type goal struct {
	n                           int
	goal, figure, load, command string
	// met: "yes", "**no**" or "not measured in this run".
	met string
	// cause: for a goal not met, what the same runs measured of why, and
	// what would close it.
	cause string
}

func metWord(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

const notMeasured = "not measured in this run"

// issue28Block renders the goals table and the peers section.
func issue28Block(in *inputs) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("%s\n\n## Issue 28: goals beside their figures\n\n", issue28Begin)
	w("Each goal of issue 28 with what this directory's last runs measured, the load average (`uptime`: 1, 5, 15 min) when it was measured, and the command; a goal not met, with what the same runs measured of its cause and what would close it. A goal whose run is absent says so.\n\n")
	w("| # | goal | measured | met | load | command | not met: the measured cause, and what would close it |\n|---|---|---|---|---|---|---|\n")
	for _, g := range []goal{rolloutPace(in), planVsPeers(in), memoryGoal(in), jobGuard(in)} {
		cause := "–"
		if g.met == metWord(false) && g.cause != "" {
			cause = g.cause
		}
		w("| %d | %s | %s | %s | %s | %s | %s |\n", g.n, g.goal, g.figure, g.met, g.load, g.command, cause)
	}
	w("\n")
	if in.peers != nil {
		writePeers(w, in.peers)
	}
	w("%s\n", issue28End)
	return b.String()
}

func rolloutPace(in *inputs) goal {
	g := goal{n: 1, goal: "Rollout pace: a node's proof holding → SUC starting the next node's Job ≤ 5 s median, ≤ 15 s p99 (real SUC, a wave of ≥ 5 GPU nodes, beside the wave without the gate)",
		figure: "–", met: notMeasured, load: "–", command: "`make bench-pace` (writes pace.json)"}
	r := in.pace
	if r == nil {
		return g
	}
	var floor string
	for _, wv := range r.Waves {
		if wv.Mode == "floor" {
			floor = fmt.Sprintf("; the gate absent, Job complete → next Job %s median", secs(quantile(wv.gaps("complete"), 0.5)))
		}
	}
	for _, wv := range r.Waves {
		if wv.Mode != "gate" {
			continue
		}
		gaps := wv.gaps("proof")
		med, p99 := quantile(gaps, 0.5), quantile(gaps, 0.99)
		g.figure = fmt.Sprintf("median %s, p99 %s over a %d-node wave, soak %s%s (section Rollout pace)", secs(med), secs(p99), len(wv.Nodes), r.Soak, floor)
		g.met, g.load, g.command = metWord(med <= 5*time.Second && p99 <= 15*time.Second), r.LoadAvg[0], "`"+r.Command+"`"
	}
	return g
}

// bestPeer is the lowest added p50 of the webhook peers (Kyverno,
// Gatekeeper) in a run, and its name; "" when none ran.
func bestPeer(p *scale.Peers, r *scale.PeersRun) (string, time.Duration) {
	name, best := "", time.Duration(0)
	for _, s := range []string{"kyverno", "gatekeeper"} {
		st, ok := r.Series[s]
		if !ok {
			continue
		}
		a := st.P50 - r.Series["plain"].P50
		if name == "" || a < best {
			name, best = s, a
		}
	}
	return name, best
}

func planVsPeers(in *inputs) goal {
	g := goal{n: 2, goal: "Plan create: the gate's added p50 (every rule) ≤ the best peer's (Kyverno, Gatekeeper), one interleaved run through one kube-apiserver",
		figure: "–", met: notMeasured, load: "–", command: "`make bench-peers`"}
	p := in.peers
	if p == nil || len(p.Runs) == 0 {
		return g
	}
	var parts, loads, causes []string
	met, known := true, false
	for i := range p.Runs {
		r := &p.Runs[i]
		gate := r.Series["gate"].P50 - r.Series["plain"].P50
		line := fmt.Sprintf("%s: gate %s", r.Name, plus(gate))
		if name, best := bestPeer(p, r); name != "" {
			line += fmt.Sprintf(", best peer %s %s", name, plus(best))
			known = true
			met = met && gate <= best
			if gate > best {
				causes = append(causes, fmt.Sprintf("%s: %s over %s; %s", r.Name, ms(gate-best), name, holderPath(r)))
			}
		}
		if st, ok := r.Series["vap"]; ok {
			line += fmt.Sprintf(", VAP %s", plus(st.P50-r.Series["plain"].P50))
		}
		parts = append(parts, line)
		if !slices.Contains(loads, r.LoadBefore) {
			loads = append(loads, r.LoadBefore)
		}
	}
	if len(p.Absent) > 0 {
		parts = append(parts, "not measured: "+strings.Join(sortedNames(p.Absent), ", ")+" (see below)")
	}
	g.figure, g.load = strings.Join(parts, "; "), strings.Join(loads, "; ")
	if known {
		g.met = metWord(met)
	}
	if len(causes) > 0 {
		g.cause = strings.Join(causes, "; ") + ". No peer makes this read: it is one round trip through the API server, about what the hop to a webhook costs (noop). Would close it: the listing started before the facts and the engine (its nodes chosen from the last fleet view; those phases' time at most), holders from an informer instead of a live read, which section “GPU holders: how fresh, and why” weighs and declines (a less fresh answer, and memory and a watch per GPU node), or no holder read at the Plan's create at all, leaving it to SUC's Job start, whose guard repeats it live: the person applying the Plan would learn of the holders only when the node's Job is held"
	}
	return g
}

// beforeHolders are the review's phases that run one after another before
// the Plan's holder listing starts (webhook/plans.go).
var beforeHolders = []string{"admit", "read", "decode", "facts", "engine"}

// holderPath is the gate's critical path in a peers run, from its trace:
// the holder listing and how far into the review it starts.
func holderPath(r *scale.PeersRun) string {
	h, ok := r.GatePhases["holders"]
	if !ok || r.GateHandler.N == 0 {
		return "the gate's phases were not traced in this run"
	}
	var start time.Duration
	for _, ph := range beforeHolders {
		start += r.GatePhases[ph].P50
	}
	return fmt.Sprintf("the gate's handler %s p50, its longest part the holder listing (%s), a live read of the Pods on the Plan's pending nodes, starting about %s into the review (%s)",
		ms(r.GateHandler.P50), ms(h.P50), ms(start), strings.Join(beforeHolders, ", "))
}

func memoryGoal(in *inputs) goal {
	g := goal{n: 3, goal: "Memory: RSS ≤ 100 MiB with 5,000 nodes synced with the proof facts; the curve at 1,000 / 5,000 / 15,000 nodes published; at most a third of the peers' RSS on the same cluster",
		figure: "–", met: notMeasured, load: "–", command: "`make bench-growth`, `make bench-peers`"}
	var parts, loads, causes []string
	met, known := true, false
	if gr := in.growth; gr != nil {
		var curve []string
		for _, pt := range gr.Points {
			curve = append(curve, fmt.Sprintf("%d nodes %s", pt.Fleet.Nodes, mib(pt.SyncedRSS)))
			if pt.Fleet.Nodes == 5000 {
				known = true
				met = met && pt.SyncedRSS <= 100<<20
				loads = append(loads, pt.Load)
				if pt.SyncedRSS > 100<<20 {
					c := fmt.Sprintf("at 5,000 nodes %s over", mib(pt.SyncedRSS-100<<20))
					if pt.SyncedFileRSS > 0 {
						c += fmt.Sprintf("; of the %s, %s is the binary's own pages (RssFile) and %s anonymous", mib(pt.SyncedRSS), mib(pt.SyncedFileRSS), mib(pt.SyncedRSS-pt.SyncedFileRSS))
					}
					causes = append(causes, c+": the Go heap at 1.5× the live one (GOGC=50), the live one mostly the cached Nodes, the largest part of each its label map (`BenchmarkCachedNodes`). Would close it: the cached Nodes' labels kept compact (a sorted slice of interned pairs) behind one accessor in the engine, which reads them in ~60 places in gate/ and gate/fleet")
				}
			}
		}
		parts = append(parts, "curve (RSS synced, proof facts cached): "+strings.Join(curve, ", "))
	} else {
		parts = append(parts, "5,000 nodes and the curve: the last `make bench-growth`'s, section “Growth with the fleet” above")
	}
	if p := in.peers; p != nil && len(p.Idle) > 0 {
		var gate, peerMin int64
		var gateUse scale.ProcessUse
		var idle []string
		for _, u := range p.Idle {
			idle = append(idle, fmt.Sprintf("%s %s", u.Name, mib(u.RSS)))
			switch {
			case u.Name == "gate":
				gate, gateUse = u.RSS, u
			case peerMin == 0 || u.RSS < peerMin:
				peerMin = u.RSS
			}
		}
		line := fmt.Sprintf("same cluster (%d nodes), idle after the policies hold: %s", p.Fleet.Nodes, strings.Join(idle, ", "))
		if peerMin > 0 && gate > 0 {
			line += fmt.Sprintf("; the gate at %.2f of the smallest peer's (goal ≤ 0.33)", float64(gate)/float64(peerMin))
			known = true
			met = met && 3*gate <= peerMin
			if 3*gate > peerMin {
				c := fmt.Sprintf("beside the peers, a third of the smallest is %s", mib(peerMin/3))
				if file := gateUse.FileRSS; file > 0 {
					c += fmt.Sprintf(" and the gate's own pages (RssFile) are %s of its %s", mib(file), mib(gate))
				}
				causes = append(causes, c+". Would close it: a smaller binary (controller-runtime brings every typed client and informer of client-go; the preconditions bring CEL), not smaller caches")
			}
		}
		parts = append(parts, line)
		if len(p.Runs) > 0 {
			loads = append(loads, p.Runs[0].LoadBefore)
		}
	}
	if len(parts) > 0 {
		g.figure, g.load = strings.Join(parts, "; "), strings.Join(loads, "; ")
	}
	if known {
		g.met = metWord(met)
	}
	g.cause = strings.Join(causes, "; ")
	return g
}

// jobGuard is goal 4: the admission phase's job-gate series (scale.json,
// test/scale/admission_test.go) minus the plain Job minus its reads
// (guardReads), in the idle modes.
func jobGuard(in *inputs) goal {
	g := goal{n: 4, goal: "The per-node guard: SUC's Job start adds ≤ 5 ms at the median beyond its reads",
		figure: "–", met: notMeasured, load: "–", command: "`make bench-scale` (admission phase: `GUG_SCALE_PHASES=admission go test -tags scale -run TestScale ./test/scale/`)"}
	if in.res == nil || in.res.Admission == nil || len(in.res.Admission.Modes) == 0 {
		g.figure = "the last `make bench`'s: the Targets table above, row “SUC's Job start through the per-node guard”"
		return g
	}
	a := in.res.Admission
	var parts, loads []string
	met, known := true, false
	for i := range a.Modes {
		m := &a.Modes[i]
		if m.Churn || m.Series["job-gate"].N == 0 {
			continue
		}
		jg, _, _ := added(m, "job-gate", "job-plain")
		read, reads := guardReads(a, m)
		parts = append(parts, fmt.Sprintf("%s: %s beyond %s (%s in all)", m.Name, plus(jg-read), reads, plus(jg)))
		loads = append(loads, m.LoadBefore)
		known = true
		met = met && jg-read <= 5*time.Millisecond
	}
	if known {
		g.figure, g.load, g.met = strings.Join(parts, "; "), strings.Join(loads, "; "), metWord(met)
	}
	return g
}

// plus is a signed difference ("+1.20 ms", "−0.30 ms").
func plus(d time.Duration) string {
	if d < 0 {
		return "−" + ms(-d)
	}
	return "+" + ms(d)
}

func sortedNames(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func writePeers(w func(string, ...any), p *scale.Peers) {
	w("## The Plan create beside the peers\n\n")
	w("One run through one kube-apiserver (`%s`, %s → %s): the %s, round-robin (the order rotated each round) ", p.Command, p.Started.Format("2006-01-02 15:04 MST"), p.Finished.Format("15:04 MST"), p.Plan)
	w("to a plain namespace (`plain`), to one a ValidatingAdmissionPolicy guards (`vap`), to one a webhook that allows every review unread (`noop`: `serve --bench-noop`, the hop's floor), ")
	w("to `system-upgrade`, where the gate reviews it with every rule it applies (`gate`: holders listed, records, proof, budget, halts, windows…), ")
	w("and to namespaces Kyverno and Gatekeeper guard, each running as its own process from its Go module (%s) with the control plane's kubeconfig, its CRDs installed, serving loopback TLS. ", versions(p))
	w("The fleet: %d nodes (%d GPU). The peers and the VAP enforce the same rules, the gate's Plan-shape rules that read only the Plan and the request (`hack/tools/peers/policies`); ", p.Fleet.Nodes, p.Fleet.GPUNodes)
	w("each engine was checked to deny a Plan breaking only each rule and to allow the valid Plan (dry run):\n\n")
	engines := []string{"gate", "vap", "kyverno", "gatekeeper"}
	w("| rule (reason code) | %s |\n|---|%s\n", strings.Join(engines, " | "), strings.Repeat("---|", len(engines)))
	for _, r := range p.Rules {
		var cells []string
		for _, e := range engines {
			a, ok := r.Answers[e]
			if !ok {
				a = "–"
			}
			cells = append(cells, a)
		}
		w("| %s | %s |\n", r.Code, strings.Join(cells, " | "))
	}
	w("\nThe gate's other Plan rules have no peer equivalent on the Plan alone: they read the cluster (the nodes the selector picks and their hardware and tuples, the qualification records and their approvals and evidence, the GPU holders on each pending node, the proof of the previous node, other Plans in flight, halts, the disruption budget, the etcd snapshot, the creation gates). ")
	w("A peer could reach some with an API call (Kyverno `context.apiCall`) or replicated data (Gatekeeper `data.inventory`), at the cost of a read per review or a cache per peer; none is written here.\n\n")
	if len(p.Absent) > 0 {
		w("Not measured in this run:\n\n")
		for _, k := range sortedNames(p.Absent) {
			w("- %s: %s\n", k, strings.ReplaceAll(p.Absent[k], "|", "\\|"))
		}
		w("\n")
	}
	w("*Added* is the series' percentile minus the plain one's in the same run. CPU is each process's user and system time over the run (/proc/<pid>/stat), RSS its VmRSS after it.\n\n")
	w("| run | load before → after | series | p50 | p90 | p99 | added p50 | added p99 |\n|---|---|---|---|---|---|---|---|\n")
	for i := range p.Runs {
		r := &p.Runs[i]
		for _, s := range p.Series {
			st := r.Series[s]
			ad50, ad99 := "", ""
			if s != "plain" {
				ad50, ad99 = ms(st.P50-r.Series["plain"].P50), ms(st.P99-r.Series["plain"].P99)
			}
			w("| %s (%d rounds) | %s → %s | `%s` | %s | %s | %s | %s | %s |\n", r.Name, r.Rounds, r.LoadBefore, r.LoadAfter, s, ms(st.P50), ms(st.P90), ms(st.P99), ad50, ad99)
		}
	}
	w("\n| process | RSS idle (peak) |")
	for _, r := range p.Runs {
		w(" CPU in %s | RSS after |", r.Name)
	}
	w("\n|---|---|%s\n", strings.Repeat("---|---|", len(p.Runs)))
	for _, u := range p.Idle {
		w("| %s | %s (%s) |", u.Name, mib(u.RSS), mib(u.HWM))
		for _, r := range p.Runs {
			for _, q := range r.Processes {
				if q.Name == u.Name {
					w(" %s | %s |", dur(float64(q.CPU)), mib(q.RSS))
				}
			}
		}
		w("\n")
	}
	w("\n")
	writePeerWebhooks(w, p)
	if len(p.Failures) > 0 {
		w("Failures: %s\n\n", strings.Join(p.Failures, "; "))
	}
}

// writePeerWebhooks: where each engine's time goes, as the API server saw
// each webhook call and as the gate saw its own handling.
func writePeerWebhooks(w func(string, ...any), p *scale.Peers) {
	var names []string
	for _, r := range p.Runs {
		for n := range r.Webhooks {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 {
		return
	}
	slices.Sort(names)
	w("What the API server waited for each validating webhook it called on the runs' Plan creates, the mean of `apiserver_admission_webhook_admission_duration_seconds` by webhook (the hop and the engine together; the VAP is not a webhook), ")
	w("and the gate's own handling of its series from its decision log (`durationMs`, `phasesMs`: webhook/trace.go), p50 (p90):\n\n")
	w("| run | %s | the gate's handler | the gate's phases |\n|---|%s---|---|\n", strings.Join(names, " | "), strings.Repeat("---|", len(names)))
	for _, r := range p.Runs {
		var cells []string
		for _, n := range names {
			if d, ok := r.Webhooks[n]; ok {
				cells = append(cells, ms(d))
			} else {
				cells = append(cells, "–")
			}
		}
		var phases []string
		for _, ph := range phaseOrder {
			if st, ok := r.GatePhases[ph]; ok {
				phases = append(phases, fmt.Sprintf("%s %s (%s)", ph, ms(st.P50), ms(st.P90)))
			}
		}
		handler := "–"
		if r.GateHandler.N > 0 {
			handler = fmt.Sprintf("%s (%s)", ms(r.GateHandler.P50), ms(r.GateHandler.P90))
		}
		w("| %s | %s | %s | %s |\n", r.Name, strings.Join(cells, " | "), handler, strings.Join(phases, ", "))
	}
	w("\n")
}

func versions(p *scale.Peers) string {
	var v []string
	for _, k := range sortedNames(p.Versions) {
		v = append(v, k+" "+p.Versions[k])
	}
	if len(v) == 0 {
		return "none ran"
	}
	return strings.Join(v, ", ")
}

// splice replaces the issue 28 block in doc (appended when absent).
func splice(doc, block string) string {
	i, j := strings.Index(doc, issue28Begin), strings.Index(doc, issue28End)
	if i < 0 || j < i {
		return strings.TrimRight(doc, "\n") + "\n\n" + block
	}
	return doc[:i] + block + strings.TrimPrefix(doc[j+len(issue28End):], "\n")
}

// spliceInto is the existing report at path with the issue 28 block
// rendered from dir.
func spliceInto(dir, path string) (string, error) {
	in, err := readInputs(dir)
	if err != nil {
		return "", err
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return splice(string(doc), issue28Block(in)), nil
}
