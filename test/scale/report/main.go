// Command report writes docs/performance.md from what `make bench` measured:
// the engine and handler benchmarks (go test -bench output), their CPU
// profiles (pprof -top), and the scale and fault run (scale.json).
//
//	go run ./test/scale/report -dir bin/bench -out docs/performance.md
package main

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/test/scale"
)

//go:embed notes.md
var notes string

func main() {
	dir := flag.String("dir", "bin/bench", "what make bench wrote: bench.txt, *.pprof.txt, scale.json")
	out := flag.String("out", "docs/performance.md", "the report")
	paceOnly := flag.Bool("pace", false, "rewrite only the rollout pace section of -out from -dir/pace.json (make bench-pace)")
	growthOnly := flag.Bool("growth", false, "rewrite only the growth section of -out from -dir/growth.json (make bench-growth)")
	only28 := flag.Bool("splice", false, "refresh only issue 28's block (goals, peers) in the existing -out (make bench-peers)")
	flag.Parse()
	for _, o := range []struct {
		on   bool
		part partial
		what string
	}{{*paceOnly, pacePartial, "rollout pace"}, {*growthOnly, growthPartial, "growth"}} {
		if !o.on {
			continue
		}
		if err := o.part.splice(*dir, *out); err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
		fmt.Println("wrote the", o.what, "section of", *out)
		return
	}
	render := render
	if *only28 {
		render = func(dir string) (string, error) { return spliceInto(dir, *out) }
	}
	doc, err := render(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, []byte(doc), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	fmt.Println("wrote", *out)
}

// bench is one benchmark's median over its runs.
type bench struct {
	name              string
	ns, bytes, allocs float64
	// cpu is the process's CPU time per op (internal/benchcpu), 0 if not reported.
	cpu          float64
	runs         int
	nsMin, nsMax float64
}

// judgedOn says how the engine targets are judged: on a shared machine
// time/op counts the wait for a core, CPU/op the work.
const judgedOn = "met judged on CPU/op: time/op counts the wait for a core on this shared machine"

// work is the CPU time per op when reported, else the time per op.
func (b *bench) work() float64 {
	if b.cpu > 0 {
		return b.cpu
	}
	return b.ns
}

// timeAndCPU is "time/op (CPU/op CPU)", or just the time.
func timeAndCPU(b *bench) string {
	if b.cpu > 0 {
		return fmt.Sprintf("%s (%s CPU)", dur(b.ns), dur(b.cpu))
	}
	return dur(b.ns)
}

type benchFile struct {
	benches    map[string]*bench
	order      []string
	loadBefore string
	loadAfter  string
	cpu        string
}

func parseBench(path string) (*benchFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	bf := &benchFile{benches: map[string]*bench{}}
	samples := map[string][][4]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "load-before "):
			bf.loadBefore = strings.TrimPrefix(line, "load-before ")
		case strings.HasPrefix(line, "load-after "):
			bf.loadAfter = strings.TrimPrefix(line, "load-after ")
		case strings.HasPrefix(line, "cpu: "):
			bf.cpu = strings.TrimPrefix(line, "cpu: ")
		case strings.HasPrefix(line, "Benchmark"):
			fs := strings.Fields(line)
			if len(fs) < 4 {
				continue
			}
			name := fs[0]
			if i := strings.LastIndexByte(name, '-'); i > 0 {
				if _, err := strconv.Atoi(name[i+1:]); err == nil {
					name = name[:i]
				}
			}
			var v [4]float64
			for i := 2; i+1 < len(fs); i += 2 {
				x, err := strconv.ParseFloat(fs[i], 64)
				if err != nil {
					continue
				}
				switch fs[i+1] {
				case "ns/op":
					v[0] = x
				case "B/op":
					v[1] = x
				case "allocs/op":
					v[2] = x
				case "cpu-ns/op":
					v[3] = x
				}
			}
			if _, ok := samples[name]; !ok {
				bf.order = append(bf.order, name)
			}
			samples[name] = append(samples[name], v)
		}
	}
	for name, s := range samples {
		b := &bench{name: name, runs: len(s)}
		col := func(i int) []float64 {
			var c []float64
			for _, v := range s {
				c = append(c, v[i])
			}
			return c
		}
		b.ns, b.bytes, b.allocs, b.cpu = median(col(0)), median(col(1)), median(col(2)), median(col(3))
		b.nsMin, b.nsMax = slices.Min(col(0)), slices.Max(col(0))
		bf.benches[name] = b
	}
	return bf, sc.Err()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func dur(ns float64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.1f s", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

// cpuPerReview is a process's CPU time per answered review ("–": not measured).
func cpuPerReview(d time.Duration) string {
	if d <= 0 {
		return "–"
	}
	return dur(float64(d))
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

type target struct {
	id, what, goal, measured, how string
	met                           bool
	known                         bool
}

func render(dir string) (string, error) {
	bf, err := parseBench(filepath.Join(dir, "bench.txt"))
	if err != nil {
		return "", err
	}
	var res scale.Results
	data, err := os.ReadFile(filepath.Join(dir, "scale.json"))
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return "", err
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	get := func(name string) *bench { return bf.benches[name] }

	w("# Performance and reliability under load\n\n")
	w("Generated by `make bench` (test/scale/report) on %s; issues 5 and 14 set the targets. ", res.Finished.Format("2006-01-02 15:04 MST"))
	w("Every figure is a median of repeated runs, measured on a small shared machine with the load generator, ")
	w("the API server and etcd on the same cores, so read them as lower bounds of what a cluster node does. ")
	w("The load average (`uptime`: 1, 5, 15 min) is given beside each figure.\n\n")

	m := res.Machine
	w("## Machine\n\n| | |\n|---|---|\n")
	w("| CPU | %d cores, %s |\n| Memory | %d MiB |\n| Kernel | %s |\n| Go | %s |\n", m.CPUs, m.CPUModel, m.MemoryMiB, m.Kernel, m.Go)
	w("| Load during the benchmarks | %s → %s |\n\n", bf.loadBefore, bf.loadAfter)

	fl := res.Fleet
	w("## The fleet\n\n")
	w("internal/fleetgen, seed 1: %d Nodes, %d of them GPU nodes of %d hardware identities (V100 10de:1db6/10de:124a, A100 10de:20b2/10de:1463, ",
		fl.Nodes, fl.GPUNodes, fl.Hardware)
	w("H200 10de:2335/10de:18bf, L40S 10de:26b9/10de:1851) across %d zones, %.0f labels and %.0f images a node, the five kubelet conditions; ", fl.Zones, fl.LabelsPerNode, fl.ImagesPerNode)
	w("%d Plans (RKE2 server and agent Plans that leave GPU nodes out, GPU canary, wave and driver Plans), %d records, %d Pods holding GPUs. ", fl.Plans, fl.Records, fl.Pods)
	w("A Node review's body (the whole Node twice, as the API server sends it, with managed fields) is %.1f KB on average. ", float64(fl.NodeReviewBytes)/1000)
	w("The real kube-apiserver took %.1f s to create the fleet (%d parallel writers; load %s).\n\n", fl.CreateSeconds, fl.Workers, fl.Load)

	// Targets.
	var ts []target
	medianRun := func(name string, pick func(s *scale.LoadRun) float64) (float64, *scale.LoadResult) {
		for i := range res.Load {
			if res.Load[i].Name == name {
				var xs []float64
				for j := range res.Load[i].Runs {
					xs = append(xs, pick(&res.Load[i].Runs[j]))
				}
				return median(xs), &res.Load[i]
			}
		}
		return 0, nil
	}
	tput := func(r *scale.LoadRun) float64 { return r.Summary.Throughput }
	p99 := func(r *scale.LoadRun) float64 { return float64(r.Summary.P99) }
	if v, lr := medianRun("node-relabel-flat", tput); lr != nil {
		mix, _ := medianRun("node-mix-flat", tput)
		srv, _ := medianRun("node-relabel-flat", func(r *scale.LoadRun) float64 { return float64(r.Summary.ServerCPUPerReview()) })
		gen, _ := medianRun("node-relabel-flat", func(r *scale.LoadRun) float64 { return float64(r.Summary.LoadgenCPUPerReview()) })
		cpu := ""
		if srv > 0 {
			cpu = fmt.Sprintf(", CPU a review: server %s, load generator %s", dur(srv), dur(gen))
		}
		ts = append(ts, target{id: "node-throughput", what: "Node label-change reviews, flat out", goal: "≥ 5,000/s",
			measured: fmt.Sprintf("%.0f/s (relabel%s); %.0f/s (every Node scenario)", v, cpu, mix), met: v >= 5000, known: true,
			how: "load generator, 16 workers, TLS keep-alive, against `serve`"})
	}
	if v, lr := medianRun("node-relabel-2500", p99); lr != nil {
		got, _ := medianRun("node-relabel-2500", tput)
		m := fmt.Sprintf("p99 %s (answered %.0f/s: overload, the p99 is the backlog)", dur(v), got)
		if got >= 2400 {
			m = fmt.Sprintf("p99 %s (answered %.0f/s)", dur(v), got)
		}
		if h, hl := medianRun("node-relabel-half", p99); hl != nil {
			ht, _ := medianRun("node-relabel-half", tput)
			m += fmt.Sprintf("; at half the measured flat-out rate (%.0f/s) p99 %s", ht, dur(h))
		}
		ts = append(ts, target{id: "node-p99", what: "Node reviews p99 at half that rate (2,500/s offered)", goal: "≤ 5 ms",
			measured: m, met: v <= 5e6 && got >= 2400, known: true, how: "open loop: latency from the scheduled send"})
	}
	if v, lr := medianRun("plan-200", p99); lr != nil {
		got, _ := medianRun("plan-200", tput)
		ts = append(ts, target{id: "plan-p99", what: "Plan reviews at 200/s against the 5,000-node fleet", goal: "p99 ≤ 10 ms",
			measured: fmt.Sprintf("p99 %s (answered %.0f/s)", dur(v), got), met: v <= 10e6 && got >= 190, known: true, how: "open loop, all 50 Plans, CREATE and UPDATE"})
	}
	planNames := []string{"BenchmarkPlanDecision/canary", "BenchmarkPlanDecision/wave", "BenchmarkPlanDecision/rke2-agent"}
	var planParts []string
	planMet := true
	for _, n := range planNames {
		if x := get(n); x != nil {
			planParts = append(planParts, fmt.Sprintf("%s %s", strings.TrimPrefix(n, "BenchmarkPlanDecision/"), timeAndCPU(x)))
			planMet = planMet && x.work() <= 1e6
		}
	}
	ts = append(ts, target{id: "engine-plan", what: "Engine: one Plan decision at 5,000 nodes, selecting up to 500", goal: "≤ 1 ms", measured: strings.Join(planParts, "; "), met: planMet, known: len(planParts) > 0, how: "`go test -bench PlanDecision ./gate/`; " + judgedOn})
	if x := get("BenchmarkPlanDecision/select-everything"); x != nil {
		ts = append(ts, target{id: "engine-plan-all", what: "Engine: one Plan decision selecting all 5,000 nodes (1,000 GPU nodes, denied: ~750 refused nodes, one blocker per problem)", goal: "≤ 5 ms",
			measured: timeAndCPU(x), met: x.work() <= 5e6, known: true, how: "`go test -bench PlanDecision/select-everything ./gate/`; " + judgedOn})
	}
	var nodeParts []string
	nodeMet := true
	for _, n := range []string{"BenchmarkNodeDecision/relabel", "BenchmarkNodeDecision/mode-change"} {
		if x := get(n); x != nil {
			nodeParts = append(nodeParts, fmt.Sprintf("%s %s", strings.TrimPrefix(n, "BenchmarkNodeDecision/"), timeAndCPU(x)))
			nodeMet = nodeMet && x.work() <= 20e3
		}
	}
	if x := get("BenchmarkNodeDecision/join-wave"); x != nil {
		nodeParts = append(nodeParts, fmt.Sprintf("join-wave %s (pulls the node into a Plan: a Plan decision)", timeAndCPU(x)))
	}
	ts = append(ts, target{id: "engine-node", what: "Engine: one Node label-change decision, 50 Plans", goal: "≤ 20 µs", measured: strings.Join(nodeParts, "; "), met: nodeMet, known: len(nodeParts) > 0, how: "`go test -bench NodeDecision ./gate/`; " + judgedOn})
	if res.Memory != nil {
		ts = append(ts, target{id: "rss", what: "Webhook RSS with the 5,000-node fleet cached", goal: "≤ 100 MiB",
			measured: fmt.Sprintf("%s once synced (peak %s)", mib(res.Memory.SyncedRSS), mib(res.Memory.SyncedHWM)) + afterLoad(res.Memory),
			met:      res.Memory.SyncedRSS <= 100<<20, known: true, how: "VmRSS / VmHWM of the `serve` process"})
	}
	ts = append(ts, admissionTargets(&res, get("BenchmarkHandler/plan-create"))...)
	if fa := res.Faults; fa != nil {
		ok := fa.Summary.Wrong == 0 && fa.Panics == 0 && fa.Summary.Status5xx == 0 && fa.Summary.Failed == 0 && fa.FinalWrong == 0 && fa.Restarts == 0
		ts = append(ts, target{id: "faults", what: "Faults under load (certificate rotation, API server restart, record deleted and recreated)", goal: "0 wrong, 0 panics, 0 5xx",
			measured: fmt.Sprintf("%d wrong, %d panics, %d 5xx, %d failed requests, %d fail-closed denials, of %d answers", fa.Summary.Wrong, fa.Panics, fa.Summary.Status5xx, fa.Summary.Failed, fa.Summary.FailClosed, fa.Summary.Answered),
			met:      ok, known: true, how: fmt.Sprintf("%.0f reviews/s of every kind during the faults", fa.Rate)})
	}
	growth, gts, err := growthOf(dir)
	if err != nil {
		return "", err
	}
	ts = append(ts, gts...)
	pace, pts, err := paceOf(dir)
	if err != nil {
		return "", err
	}
	ts = append(ts, pts...)
	w("## Targets\n\n| target | goal | measured | met | how |\n|---|---|---|---|---|\n")
	for _, t := range ts {
		met := "yes"
		if !t.met {
			met = "**no**"
		}
		w("| %s | %s | %s | %s | %s |\n", t.what, t.goal, t.measured, met, t.how)
	}
	if len(res.Failures) > 0 {
		w("\nPhases that did not complete: %s (see the test log).\n", strings.Join(res.Failures, ", "))
	}
	w("\n")

	// Benchmarks.
	w("## Engine and handler benchmarks\n\n")
	w("Median of %d runs (`-count`), load %s → %s. The handler benchmarks run one recorded AdmissionReview through the controller-runtime admission handler in process (decode, facts from an informer store holding the fleet, engine, response, metrics, log line), without TLS.\n\n", runsOf(bf), bf.loadBefore, bf.loadAfter)
	w("CPU/op is the process's CPU time per operation, every thread and the garbage collector included (internal/benchcpu): on a shared machine time/op also counts waiting for a core.\n\n")
	w("| benchmark | time/op | range | CPU/op | B/op | allocs/op |\n|---|---|---|---|---|---|\n")
	for _, n := range bf.order {
		x := bf.benches[n]
		cpu := "–"
		if x.cpu > 0 {
			cpu = dur(x.cpu)
		}
		w("| `%s` | %s | %s – %s | %s | %.0f | %.0f |\n", strings.TrimPrefix(n, "Benchmark"), dur(x.ns), dur(x.nsMin), dur(x.nsMax), cpu, x.bytes, x.allocs)
	}
	w("\n")

	// Load runs.
	w("## Load runs against `gpu-upgrade-gate serve`\n\n")
	w("`serve` ran as its own process with the chart's configuration and webhook configuration, pointed at the real kube-apiserver holding the fleet; ")
	w("the load generator (test/loadgen) posted the fleet's recorded AdmissionReviews over TLS on keep-alive HTTP/1.1 connections, each with its own UID, ")
	w("and checked every answer against the engine's decision for the same review. Plan reviews list GPU holders live from the API server, as in production. ")
	w("*Server CPU/review* is the `serve` process's CPU time (user and system, every thread, /proc/<pid>/stat) over the run divided by the reviews answered, and *load generator CPU/review* the load generator's own (getrusage): both share the same cores, so together they bound the rate these cores can answer, whatever the other takes. ")
	w("*Shed (busy)* counts the gate's overload answer (more review bytes in flight than its budget for a second: denied with 429 \"the gate is busy\", never allowed), apart from *wrong*: it is a denial the API server's client retries, not a wrong decision; an allow is never counted as shed.\n\n")
	for _, lr := range res.Load {
		w("### %s\n\n%s. `%s`\n\n", lr.Name, lr.Description, lr.Command)
		w("| run | load before | answered/s | server CPU/review | load generator CPU/review | p50 | p90 | p99 | max | shed (busy) | wrong | failed | 5xx |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for i, r := range lr.Runs {
			s := r.Summary
			w("| %d | %s | %.0f | %s | %s | %s | %s | %s | %s | %d | %d | %d | %d |\n", i+1, r.LoadBefore, s.Throughput, cpuPerReview(s.ServerCPUPerReview()), cpuPerReview(s.LoadgenCPUPerReview()),
				ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max), s.Shed, s.Wrong, s.Failed, s.Status5xx)
		}
		w("\n")
	}

	writeAdmission(w, &res)

	if mem := res.Memory; mem != nil {
		w("## Memory\n\n| | VmRSS | VmHWM (peak) |\n|---|---|---|\n")
		w("| caches synced, idle (load %s) | %s | %s |\n", mem.Load, mib(mem.SyncedRSS), mib(mem.SyncedHWM))
		w("| after the load runs | %s | %s |\n\n", mib(mem.AfterLoadRSS), mib(mem.AfterLoadHWM))
	}
	w("%s", growth)
	w("%s", pace)

	if fa := res.Faults; fa != nil {
		w("## Faults under load\n\n")
		w("The load generator sent all %d recorded reviews round-robin at %.0f/s (open loop) while the faults below happened, one after another (load %s). ", fa.Reviews, fa.Rate, fa.Load)
		w("A denial where the fleet expects an allow counts as *fail-closed* only when every reason code it gives is one the fault in progress explains ")
		w("(FactsMissing while the API server is away, RecordMissing while the record is deleted and RecordNotApproved while it is created again, between its author's create and its approver's approval, CanaryNotProven while the canary is cordoned); ")
		w("an allow where a denial is expected is always wrong. Once a Plan naming the deleted record was refused, no answer for it went back to allow before the record was created again (checked).\n\n")
		w("| fault | window (s) | answers | correct | fail-closed | shed (busy) | wrong | failed | detail |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, win := range fa.Windows {
			w("| %s | %.1f – %.1f | %d | %d | %d | %d | %d | %d | %s |\n", win.Name, win.From, win.To, win.Answered, win.Correct, win.FailClosed, win.Shed, win.Wrong, win.Failed, win.Detail)
		}
		s := fa.Summary
		w("| **whole run** | 0 – %.1f | %d | %d | %d | %d | %d | %d | p50 %s, p99 %s, max %s; %d 5xx; %d panics in the serve log; %d restarts; %d wrong after the faults |\n\n",
			s.Duration.Seconds(), s.Answered, s.Correct, s.FailClosed, s.Shed, s.Wrong, s.Failed, ms(s.P50), ms(s.P99), ms(s.Max), s.Status5xx, fa.Panics, fa.Restarts, fa.FinalWrong)
		w("Timeline:\n\n")
		for _, n := range fa.Notes {
			w("- %s\n", n)
		}
		w("\n")
	}

	// Missed targets.
	var missed []target
	for _, t := range ts {
		if !t.met && t.known {
			missed = append(missed, t)
		}
	}
	if len(missed) > 0 {
		w("## Missed targets: what the profiles show and what would close them\n\n")
		for _, t := range missed {
			w("### %s (%s; measured %s)\n\n", t.what, t.goal, t.measured)
			if n := section(notes, t.id); n != "" {
				w("%s\n\n", n)
			}
			for _, p := range profilesFor(t.id) {
				if top := pprofTop(filepath.Join(dir, p.file), 12); top != "" {
					w("`%s` (CPU profile, top by flat time):\n\n```\n%s```\n\n", p.cmd, top)
				}
			}
		}
	}
	if n := section(notes, "observations"); n != "" {
		w("## Observations\n\n%s\n\n", n)
	}
	if n := section(notes, "changes"); n != "" {
		w("## Changes made for these targets\n\n%s\n\n", n)
	}

	if n := section(notes, "cli"); n != "" {
		w("## CLI memory on snapshots\n\n%s\n\n", n)
	}
	in, err := readInputs(dir)
	if err != nil {
		return "", err
	}
	w("%s\n", issue28Block(in))

	w("## Reproduce\n\n```sh\nmake bench    # all of the below, then this file (about 20 minutes on 2 idle cores)\n")
	w("make bench-growth   # the growth curve alone (1,000 / 5,000 / 15,000 nodes), then its section here\n")
	w("make bench-pace     # the rollout pace alone (real SUC), then its section here\n")
	w("make bench-peers    # the Plan create beside Kyverno and Gatekeeper, then issue 28's block here\n```\n\n")
	w("```sh\n%s```\n", commands)
	return b.String(), nil
}

const commands = `go test -run '^$' -bench . -benchmem -count 5 ./gate/ ./webhook/
go test -run '^$' -bench 'PlanDecision/rke2-agent$' -benchtime 3s -cpuprofile plan.cpu ./gate/
go test -run '^$' -bench 'Handler/node-relabel$' -benchtime 3s -cpuprofile node.cpu ./webhook/
GUG_SCALE_OUT=bin/bench go test -tags scale -run TestScale -timeout 60m -v ./test/scale/
# only the writes through the API server and the holder reads (issue 14), fewer rounds:
GUG_SCALE_PHASES=admission GUG_SCALE_ADMISSION_N=40 go test -tags scale -run TestScale -v ./test/scale/
go run ./test/scale/report -dir bin/bench -out docs/performance.md
# against your own cluster and serve process (loopback only):
go run ./test/loadgen/cmd/loadgen fleet --kubeconfig $KUBECONFIG
go run ./test/loadgen/cmd/loadgen run --url https://127.0.0.1:9443 --ca ca.crt --kinds node --scenarios relabel --workers 16 --duration 20s --pid $(pidof gpu-upgrade-gate)
`

// afterLoad is the memory after the load runs, when they completed.
func afterLoad(m *scale.Memory) string {
	if m.AfterLoadRSS == 0 {
		return ""
	}
	return fmt.Sprintf("; %s after the load runs (peak %s)", mib(m.AfterLoadRSS), mib(m.AfterLoadHWM))
}

func runsOf(bf *benchFile) int {
	for _, b := range bf.benches {
		return b.runs
	}
	return 0
}

type profile struct{ file, cmd string }

func profilesFor(id string) []profile {
	switch id {
	case "engine-plan":
		return []profile{{"plan.pprof.txt", "go test -bench 'PlanDecision/rke2-agent$' -cpuprofile ./gate/"}}
	case "engine-plan-all":
		return []profile{{"plan-all.pprof.txt", "go test -bench 'PlanDecision/select-everything$' -cpuprofile ./gate/"}}
	case "node-throughput":
		return []profile{{"node.pprof.txt", "go test -bench 'Handler/node-relabel$' -cpuprofile ./webhook/"}}
	}
	return nil
}

// pprofTop keeps the table of a `go tool pprof -top` output.
func pprofTop(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var out []string
	table := false
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, "flat%") {
			table = true
		}
		if table && strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
		if len(out) > n {
			break
		}
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "\n") + "\n"
}

// section returns the text under "## id" in notes.md.
func section(doc, id string) string {
	var out []string
	in := false
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, "## ") {
			in = strings.TrimSpace(strings.TrimPrefix(l, "## ")) == id
			continue
		}
		if in {
			out = append(out, l)
		}
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}
