package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/test/scale"
)

// The admission phase's part of the report (test/scale/admission_test.go):
// writes through the API server, interleaved, and the holder-read options.

// added is a series' latency minus the plain series' at each percentile.
func added(m *scale.AdmissionMode, series, base string) (p50, p90, p99 time.Duration) {
	s, b := m.Series[series], m.Series[base]
	return s.P50 - b.P50, s.P90 - b.P90, s.P99 - b.P99
}

// holderRead is the p50 of the gate's holder read alone in the mode of the
// same name (the read the gate makes).
func holderRead(a *scale.Admission, mode string) time.Duration {
	for _, r := range a.Reads {
		if r.Mode == mode {
			return r.Reads[gateRead].P50
		}
	}
	return 0
}

const gateRead = "NotOlderThan the gate's Pod informer"

// guardReads is what SUC's Job start waits for to read, at the median of
// mode m: the longest of the reads the guard makes at once, from its own
// trace (its holder listing and, for a Plan that moves the node's RKE2
// minor as the bench's does, the etcd snapshot list), and how to say it.
// Without a trace, the holder read alone from the holder-read table.
func guardReads(a *scale.Admission, m *scale.AdmissionMode) (time.Duration, string) {
	holders, traced := m.JobPhases["holders"]
	if !traced {
		read := holderRead(a, m.Name)
		return read, "a " + ms(read) + " holder read"
	}
	etcd, ok := m.JobPhases["etcd"]
	if !ok || etcd.P50 <= holders.P50 {
		return holders.P50, "its " + ms(holders.P50) + " holder listing"
	}
	return etcd.P50, "its " + ms(etcd.P50) + " etcd snapshot read (beside a " + ms(holders.P50) + " holder listing)"
}

// admissionTargets: handler is BenchmarkHandler/plan-create (nil: not run).
func admissionTargets(res *scale.Results, handler *bench) []target {
	a := res.Admission
	if a == nil || len(a.Modes) == 0 {
		return nil
	}
	var plan, job []string
	planMet, jobMet := true, true
	for i := range a.Modes {
		m := &a.Modes[i]
		g, _, _ := added(m, "gate", "plain")
		p, _, _ := added(m, "policy", "plain")
		floor := ""
		if _, ok := m.Series["noop"]; ok {
			h, _, _ := added(m, "noop", "plain")
			floor = fmt.Sprintf("; a webhook that only allows %s, the hop's floor here: the gate's own %s", ms(h), ms(g-h))
		}
		plan = append(plan, fmt.Sprintf("%s: %s (policy %s%s; load %s)", m.Name, ms(g), ms(p), floor, m.LoadBefore))
		if !m.Churn {
			planMet = planMet && g <= 2500*time.Microsecond
		}
		jg, _, _ := added(m, "job-gate", "job-plain")
		read, reads := guardReads(a, m)
		line := fmt.Sprintf("%s: %s beyond %s (%s in all)", m.Name, ms(jg-read), reads, ms(jg))
		if _, ok := m.Series["job-cpu"]; ok {
			cpu, _, _ := added(m, "job-cpu", "job-plain")
			line += fmt.Sprintf(", a CPU node's Job %s", ms(cpu))
		}
		job = append(job, line)
		if !m.Churn {
			jobMet = jobMet && jg-read <= 5*time.Millisecond
		}
	}
	n := a.Modes[0].Series["gate"].N
	if handler != nil {
		plan = append(plan, fmt.Sprintf("the Plan handler alone, in process with no I/O (`Handler/plan-create`): %s", dur(handler.ns)))
	}
	return []target{
		{id: "plan-added", what: "Plan create through the API server: added by the gate (every rule), median", goal: "≤ 2.5 ms (the best peer) idle",
			measured: strings.Join(plan, "; "), met: planMet, known: true,
			how: fmt.Sprintf("%d creates of each series a mode, round-robin with a plain namespace and a ValidatingAdmissionPolicy (%d CEL rules)", n, len(a.Policy))},
		{id: "job-added", what: "SUC's Job start through the per-node guard: added beyond its reads, median", goal: "≤ 5 ms idle",
			measured: strings.Join(job, "; "), met: jobMet, known: true,
			how: "Job create (parallelism 1) as SUC's ServiceAccount, round-robin with the same Job in a plain namespace (and an RKE2 agent Plan's Job on a CPU node, `job-cpu`, which lists no holders); its reads are the longest of those it makes at once, at the median of its trace (the holder listing; the etcd snapshot read, as the bench's Plan moves the node's RKE2 minor)"},
	}
}

func writeAdmission(w func(string, ...any), res *scale.Results) {
	a := res.Admission
	if a == nil || len(a.Modes) == 0 {
		return
	}
	w("## Writes through the API server, interleaved\n\n")
	w("One run, round-robin (the order rotated each round): the %s created and deleted in a plain namespace (`plain`), ", a.Plan)
	w("in one a ValidatingAdmissionPolicy guards (`policy`: the peers' %d rules in CEL: %s), ", len(a.Policy), "`"+strings.Join(a.Policy, "`, `")+"`")
	if a.Modes[0].Series["noop"].N > 0 {
		w("in one reviewed by a webhook that allows every review unread (`noop`: `serve --bench-noop`, the same process, TLS and connection as the gate; the floor of a webhook hop on this machine, so `gate` minus `noop` is the gate's own cost), ")
	}
	w("and in `system-upgrade`, where the gate reviews it with every rule (`gate`); and %s, in a plain namespace (`job-plain`) and where the per-node guard reviews it (`job-gate`). ", a.Job)
	w("Paced: a write every %s, longer than the API server's 100 ms progress-notify period; back to back: the next write as soon as the last returned. ", ms(150*time.Millisecond))
	w("Pod churn: another client creating, listing and deleting Pods (on a CPU node) all along. ")
	w("*Added* is the series' percentile minus the plain one's, in the same mode. `GUG_SCALE_PHASES=admission go test -tags scale -run TestScale -v ./test/scale/`\n\n")
	w("| mode | load before | series | p50 | p90 | p99 | added p50 | added p90 | added p99 |\n|---|---|---|---|---|---|---|---|---|\n")
	for i := range a.Modes {
		m := &a.Modes[i]
		for _, s := range a.Series {
			st := m.Series[s]
			base := "plain"
			if strings.HasPrefix(s, "job-") {
				base = "job-plain"
			}
			ad := [3]string{"", "", ""}
			if s != base {
				p50, p90, p99 := added(m, s, base)
				ad = [3]string{ms(p50), ms(p90), ms(p99)}
			}
			w("| %s | %s | `%s` | %s | %s | %s | %s | %s | %s |\n", m.Name, m.LoadBefore, s, ms(st.P50), ms(st.P90), ms(st.P99), ad[0], ad[1], ad[2])
		}
	}
	w("\nWhere the gate's time goes, per mode: its own handling of the Plan review (decision log `durationMs`: decode, facts, the holder read, the engine), ")
	w("the API server's mean time calling the Plan webhook (`apiserver_admission_webhook_admission_duration_seconds`), the mean wait of Pod reads for the watch cache ")
	w("(`apiserver_watch_cache_read_wait_seconds`, every client's), the TCP connections the API server used to the webhook (from /proc/net/tcp, sampled every 20 ms), and the webhook process's garbage collections (`go_gc_duration_seconds_count`).\n\n")
	w("| mode | gate handler p50 | p90 | API server's webhook call, mean | Pod read wait, mean | connections | GCs | churn requests |\n|---|---|---|---|---|---|---|---|\n")
	for _, m := range a.Modes {
		w("| %s | %s | %s | %s | %s | %d | %d | %d |\n", m.Name, ms(m.GateHandler.P50), ms(m.GateHandler.P90), ms(m.WebhookMean), ms(m.PodReadWaitMean), m.Connections, m.GateGCs, m.ChurnOps)
	}
	writePhases(w, a)
	if len(a.Direct) > 0 {
		w("\nThe same Plan review sent by the load generator straight to the webhook (one keep-alive connection, no API server in between):\n\n")
		w("| | load | p50 | p90 | p99 |\n|---|---|---|---|---|\n")
		for _, d := range a.Direct {
			w("| %s | %s | %s | %s | %s |\n", d.Name, d.Load, ms(d.Stat.P50), ms(d.Stat.P90), ms(d.Stat.P99))
		}
	}
	w("\n")
	if n := section(notes, "paced"); n != "" {
		w("%s\n\n", n)
	}
	if len(a.Reads) > 0 {
		w("## GPU holders: the read options\n\n")
		w("A node's Pods listed by `spec.nodeName` straight after a write (a ConfigMap update, standing in for the Plan's create: it moves etcd's revision, not the Pods'), ")
		w("each way round-robin in one run, in the same four modes. `NotOlderThan the gate's Pod informer` is what the gate does now (`webhook/facts.go` `holderListOptions`). The `Plans:` rows list the SUC namespace's Plans the same way, right after the same kind of write: the live read the Job guard made for the budget's other Plans until it took them from its cache (`webhook/jobs.go` `withPlan`). The `Node:` and `Plan:` rows are the Job guard's GETs of its node and its Plan the same way: from etcd (a quorum read), or with the resourceVersion of the gate's cached copy, which the API server serves from its watch cache no older than that (what the guard does now, `webhook/facts.go` `liveGet`).\n\n")
		w("| mode | load | read | p50 | p90 | p99 |\n|---|---|---|---|---|---|\n")
		for _, r := range a.Reads {
			for _, name := range readOrder(r.Reads) {
				s := r.Reads[name]
				w("| %s | %s | %s | %s | %s | %s |\n", r.Mode, r.Load, name, ms(s.P50), ms(s.P90), ms(s.P99))
			}
		}
		w("\nFreshness: a Pod created on a GPU node, then, as soon as its create returned, listed (or looked up in a Pod informer watching that node):\n\n")
		w("| read | idle: in the first read | with Pod churn |\n|---|---|---|\n")
		byRead := map[string][2]string{}
		var order []string
		for _, f := range a.Freshness {
			v, ok := byRead[f.Read]
			if !ok {
				order = append(order, f.Read)
			}
			i := 0
			if f.Churn {
				i = 1
			}
			v[i] = fmt.Sprintf("%d of %d", f.Seen, f.Trials)
			byRead[f.Read] = v
		}
		for _, r := range order {
			w("| %s | %s | %s |\n", r, byRead[r][0], byRead[r][1])
		}
		w("\n")
	}
	if ni := a.Informers; ni != nil {
		w("A Pod informer per GPU node (`spec.nodeName`, as each kubelet watches its own Pods), %d of them in one process (load %s): synced in %s, ", ni.Nodes, ni.Load, ms(ni.SyncTime))
		w("+%s of live heap and +%d goroutines with no holder Pods at all; a new Pod reached its node's informer p50 %s, p90 %s, p99 %s after its create returned.\n\n", mib(ni.HeapBytes), ni.Goroutines, ms(ni.Lag.P50), ms(ni.Lag.P90), ms(ni.Lag.P99))
	}
	if n := section(notes, "holder-freshness"); n != "" {
		w("## GPU holders: how fresh, and why\n\n%s\n\n", n)
	}
}

// readOrder lists the reads as the harness defines them, known ones first.
func readOrder(m map[string]scale.Stats) []string {
	known := []string{"consistent (no resourceVersion)", "resourceVersion=0", gateRead, "NotOlderThan the write just made",
		"Plans: consistent (no resourceVersion)", "Plans: NotOlderThan the gate's Plan informer",
		"Node: GET from etcd (no resourceVersion)", "Node: GET NotOlderThan the gate's copy", "Plan: GET from etcd (no resourceVersion)", "Plan: GET NotOlderThan the gate's copy"}
	var out []string
	for _, k := range known {
		if _, ok := m[k]; ok {
			out = append(out, k)
		}
	}
	for k := range m {
		found := false
		for _, o := range out {
			found = found || o == k
		}
		if !found {
			out = append(out, k)
		}
	}
	return out
}

// phaseOrder is the order of a review's phases (webhook/trace.go marks).
var phaseOrder = []string{"admit", "read", "decode", "node", "plan", "plans", "reads", "facts", "engine", "rules", "holders", "holders-after", "etcd", "drain", "wait", "decide", "respond"}

// writePhases: the gate's handling split by phase, p50 (p90), per mode.
func writePhases(w func(string, ...any), a *scale.Admission) {
	for _, kind := range []struct {
		name   string
		phases func(m *scale.AdmissionMode) map[string]scale.Stats
	}{{"the Plan review (`gate`)", func(m *scale.AdmissionMode) map[string]scale.Stats { return m.GatePhases }},
		{"the Job start (`job-gate`)", func(m *scale.AdmissionMode) map[string]scale.Stats { return m.JobPhases }}} {
		var cols []string
		for _, p := range phaseOrder {
			for _, m := range a.Modes {
				if _, ok := kind.phases(&m)[p]; ok {
					cols = append(cols, p)
					break
				}
			}
		}
		if len(cols) == 0 {
			continue
		}
		w("\nThe gate's handling of %s by phase, p50 (p90), from its decision log's `phasesMs` (webhook/trace.go): `admit` is the wait for the review budget, `read` the body read and the review's decode, then the handler's own steps (a Job start makes its reads at once: `node` and `plan` are its GETs, from the API server's watch cache no older than the gate's copy, `holders` its holder listing, `reads` the three together; a Plan review lists its holders while `rules` applies every rule but the holder rule, `wait` is what is left of the listing after them, `decide` the holder rule and the answer's settling); `respond` renders the answer and counts it.\n\n", kind.name)
		w("| mode | %s |\n|---|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
		for _, m := range a.Modes {
			ph := kind.phases(&m)
			var cells []string
			for _, c := range cols {
				s := ph[c]
				cells = append(cells, fmt.Sprintf("%s (%s)", ms(s.P50), ms(s.P90)))
			}
			w("| %s | %s |\n", m.Name, strings.Join(cells, " | "))
		}
	}
}
