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
)

// The rollout's pace (issue 28 goal 1): pace.json, which `make bench-pace`
// writes (test/e2e/zpace_test.go, TestRolloutPace). Its own section and two
// targets; `report -pace` rewrites only that section of an existing report.

type paceNode struct {
	Node                                 string
	Started, Completed, ProofHeld, Freed time.Time
}

type paceWave struct {
	Mode       string
	Nodes      []paceNode
	Start, End time.Time
}

type paceResults struct {
	Soak     time.Duration
	LoadAvg  [2]string
	Command  string
	Waves    []paceWave
	Finished time.Time
}

var paceModes = map[string]string{
	"gate":          "with the gate, its Plan nudge on",
	"gate-no-nudge": "with the gate, its nudge off (SUC's backoff alone, as before)",
	"floor":         "the gate absent (its webhook configuration removed): SUC alone, the floor",
}

// gaps: each next Job's start minus the previous node's proof (from
// "proof") or completion by the Job controller (from "complete").
func (w paceWave) gaps(from string) []time.Duration {
	var out []time.Duration
	for i := 0; i+1 < len(w.Nodes); i++ {
		at := w.Nodes[i].ProofHeld
		if from == "complete" {
			at = w.Nodes[i].Completed
		}
		out = append(out, w.Nodes[i+1].Started.Sub(at))
	}
	return out
}

// quantile is the nearest-rank quantile (q in (0,1]); with a handful of
// gaps p99 is their largest.
func quantile(xs []time.Duration, q float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(float64(len(s))*q+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func paceOf(dir string) (string, []target, error) {
	data, err := os.ReadFile(filepath.Join(dir, "pace.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	var r paceResults
	if err := json.Unmarshal(data, &r); err != nil {
		return "", nil, fmt.Errorf("pace.json: %w", err)
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("%s\n\n", paceHeading)
	w("Issue 28 goal 1: from the moment a node's proof holds to the moment SUC starts the next node's Job, ")
	w("≤ 5 s at the median and ≤ 15 s at p99. The real SUC v0.20.1 and kube-apiserver, a wave of %d fake V100 nodes ", len(r.Waves[0].Nodes))
	w("under one Plan of concurrency 1, proof.soak %s; the test plays the kubelet, the Job controller, the GPU Operator's ", r.Soak)
	w("validator and nfd-master at once (no node takes time to upgrade), so each wave's time is SUC's and the gate's. ")
	w("A proof holds at its soak's end, to the second of the objects' timestamps; a start is seen by a 50 ms poll. ")
	w("With four gaps a wave, p99 is the largest. Load average (1, 5, 15 min) %s before, %s after; `%s`, %s. ",
		r.LoadAvg[0], r.LoadAvg[1], r.Command, r.Finished.Format("2006-01-02 15:04 MST"))
	w("Why SUC waits and what the nudge changes: [rollout.md](rollout.md#the-waves-pace-how-suc-looks-again).\n\n")
	w("| wave | proof → next Job: median, p99 | Job complete → next Job: median, p99 | proof → completion landed: median, max | wave | its Jobs and soaks | wave − Jobs and soaks |\n|---|---|---|---|---|---|---|\n")
	for _, wv := range r.Waves {
		var landed []time.Duration
		var sum time.Duration
		for _, n := range wv.Nodes {
			landed = append(landed, n.Freed.Sub(n.ProofHeld))
			if wv.Mode == "floor" {
				sum += n.Completed.Sub(n.Started)
			} else {
				sum += n.ProofHeld.Sub(n.Started)
			}
		}
		proof, complete := wv.gaps("proof"), wv.gaps("complete")
		pg := secs(quantile(proof, 0.5)) + ", " + secs(quantile(proof, 0.99))
		pl := secs(quantile(landed, 0.5)) + ", " + secs(quantile(landed, 1))
		if wv.Mode == "floor" {
			pg, pl = "- (nothing waits for proof)", "-"
		}
		wave := wv.End.Sub(wv.Start)
		w("| %s | %s | %s, %s | %s | %s | %s | %s |\n", paceModes[wv.Mode], pg, secs(quantile(complete, 0.5)), secs(quantile(complete, 0.99)), pl,
			secs(wave), secs(sum), secs(wave-sum))
	}
	w("\n\"Its Jobs and soaks\" is what the policy itself needs: with the gate, each node's time from its Job's start to its proof ")
	w("(the Job, the facts, the soak); without it, each Job alone.\n\n")
	var ts []target
	for _, wv := range r.Waves {
		if wv.Mode != "gate" {
			continue
		}
		gaps := wv.gaps("proof")
		how := fmt.Sprintf("real SUC, %d-node wave, soak %s, load %s (`make bench-pace`)", len(wv.Nodes), r.Soak, r.LoadAvg[0])
		med, p99 := quantile(gaps, 0.5), quantile(gaps, 0.99)
		ts = append(ts,
			target{id: "pace", what: "Rollout pace: proof holds → next node's Job, median", goal: "≤ 5 s", measured: secs(med), met: med <= 5*time.Second, known: true, how: how},
			target{id: "pace", what: "Rollout pace: proof holds → next node's Job, p99", goal: "≤ 15 s", measured: secs(p99), met: p99 <= 15*time.Second, known: true, how: how})
	}
	return b.String(), ts, nil
}

const paceHeading = "## Rollout pace"

// partial is a section a partial bench run rewrites alone in an existing
// report (make bench-pace, make bench-growth), leaving the rest as the last
// full report wrote it.
type partial struct {
	heading, file string
	render        func(dir string) (string, []target, error)
}

var (
	pacePartial   = partial{paceHeading, "pace.json", paceOf}
	growthPartial = partial{growthHeading, "growth.json", growthOf}
)

// splice rewrites p's section of the report at out from dir (or adds it).
func (p partial) splice(dir, out string) error {
	section, _, err := p.render(dir)
	if err != nil {
		return err
	}
	if section == "" {
		return fmt.Errorf("no %s", filepath.Join(dir, p.file))
	}
	return spliceSection(out, p.heading, section)
}

// spliceSection rewrites the section under heading (up to the next "## ")
// of the report at out with section, or adds it before "## Reproduce".
func spliceSection(out, heading, section string) error {
	data, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	return os.WriteFile(out, []byte(replaceSection(string(data), heading, section)), 0o644)
}

func replaceSection(doc, heading, section string) string {
	start := strings.Index(doc, "\n"+heading+"\n")
	if start < 0 {
		i := strings.Index(doc, "\n## Reproduce")
		if i < 0 {
			i = len(doc)
		}
		return doc[:i] + "\n" + strings.TrimRight(section, "\n") + "\n" + doc[i:]
	}
	end := strings.Index(doc[start+1:], "\n## ")
	if end < 0 {
		end = len(doc)
	} else {
		end += start + 1
	}
	return doc[:start+1] + strings.TrimRight(section, "\n") + "\n" + doc[end:]
}
