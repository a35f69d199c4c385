//go:build scale

package scale

// The scale and fault tests: a real kube-apiserver and etcd holding the
// issue's fleet (5,000 Nodes with images and conditions, 50 Plans, records,
// GPU holders), `gpu-upgrade-gate serve` as its own process with the chart's
// configuration, and the load generator on this machine over loopback TLS.
// They measure (never assert timings) and write GUG_SCALE_OUT/scale.json for
// test/scale/report; they fail only on wrong decisions, errors, panics or a
// phase that cannot run. make bench runs them:
//
//	go test -tags scale -run TestScale -timeout 60m -v ./test/scale/
//
// GUG_SCALE_NODES (default 5000), GUG_SCALE_RUN (each load run, default
// 20s), GUG_SCALE_REPEAT (runs per load scenario, default 3),
// GUG_SCALE_FAULT_TAIL (load after the last fault, default 10s) make a
// shorter or longer run; GUG_SCALE_PHASES (e.g. "memory,admission") runs
// only some phases, GUG_SCALE_LOAD (e.g. "plan-200") only some load runs;
// GUG_SCALE_SERVE_ARGS adds flags to serve (e.g. "--pprof-bind-address
// 127.0.0.1:6061" to take heap profiles while it runs).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/controlplane"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/test/loadgen"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

const seed = 1

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// scaleEnv is what the phases share.
type scaleEnv struct {
	out   string
	cp    *controlplane.ControlPlane
	admin client.Client
	// person writes the benches' Plans: `serve` runs with the admin's
	// kubeconfig, so the admin is the gate's own identity, whose Plan
	// writes other than its nudge are refused (NudgeForged).
	person  client.Client
	fleet   *fleetgen.Fleet
	serve   *testenv.ServeProcess
	reviews []fleetgen.Review
	res     *Results
	// fleet options beyond the seed; zero: GUG_SCALE_NODES nodes (growth_test.go sets them).
	fleetOptions fleetgen.Options
	// crdPaths are CRDs installed beside SUC's Plan CRD (peers_test.go: the peers').
	crdPaths []string
}

func TestScale(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Minute)
	defer cancel()
	out := os.Getenv("GUG_SCALE_OUT")
	if out == "" {
		out = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(out, 0o755))
	e := &scaleEnv{out: out, res: &Results{Started: time.Now().UTC(), Machine: ThisMachine()}}
	defer func() {
		e.res.Finished = time.Now().UTC()
		data, _ := json.MarshalIndent(e.res, "", "  ")
		require.NoError(t, os.WriteFile(filepath.Join(out, "scale.json"), data, 0o644))
		t.Logf("results: %s", filepath.Join(out, "scale.json"))
	}()

	e.setup(ctx, t)
	defer func() { require.NoError(t, e.serve.Stop()) }()
	only := os.Getenv("GUG_SCALE_PHASES")
	phase := func(name string, f func(t *testing.T)) {
		if only != "" && !slices.Contains(strings.Split(only, ","), name) {
			return
		}
		if !t.Run(name, f) {
			e.res.Failures = append(e.res.Failures, name)
		}
	}
	phase("memory", e.memory)
	phase("admission", func(t *testing.T) { e.admission(ctx, t) })
	phase("load", func(t *testing.T) { e.load(ctx, t) })
	phase("faults", func(t *testing.T) { e.faults(ctx, t) })
}

func (e *scaleEnv) setup(ctx context.Context, t *testing.T) {
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	e.cp, err = controlplane.Start(ctx, controlplane.Options{CRDPaths: append([]string{filepath.Join(root, "testdata", "suc", "crd-plans.yaml")}, e.crdPaths...)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.cp.Stop() })
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, upgradev1.AddToScheme(scheme))
	e.admin, err = client.New(e.cp.RESTConfig(), client.Options{Scheme: scheme})
	require.NoError(t, err)
	e.person, err = client.New(e.cp.ConfigFor(planAuthor, "system:masters"), client.Options{Scheme: scheme})
	require.NoError(t, err)

	o := e.fleetOptions
	if o.Nodes == 0 {
		o.Nodes = envInt("GUG_SCALE_NODES", 5000)
	}
	o.Seed, o.Kubelet = seed, true
	e.fleet = fleetgen.Generate(o)
	f := e.fleet
	const workers = 32
	start, load := time.Now(), LoadAverage()
	require.NoError(t, f.Apply(ctx, e.admin, workers))
	info := FleetInfo{Nodes: len(f.Nodes), Hardware: len(fleetgen.Hardwares), Zones: len(fleetgen.Zones), Plans: len(f.Plans),
		Records: len(f.RecordConfigMaps), Pods: len(f.Pods), CreateSeconds: time.Since(start).Seconds(), Workers: workers, Load: load}
	labels, images := 0, 0
	for _, n := range f.Nodes {
		labels += len(n.Labels)
		images += len(n.Status.Images)
		if f.Config.IsGPUNode(n) {
			info.GPUNodes++
		}
	}
	info.LabelsPerNode, info.ImagesPerNode = float64(labels)/float64(len(f.Nodes)), float64(images)/float64(len(f.Nodes))
	e.reviews = f.Reviews(time.Now())
	nodeReviews := fleetgen.Select(e.reviews, []string{fleetgen.KindNode})
	for _, r := range nodeReviews {
		info.NodeReviewBytes += len(r.Body)
	}
	info.NodeReviewBytes /= max(1, len(nodeReviews))
	e.res.Fleet = info
	t.Logf("fleet: %d nodes (%d GPU), %.0f labels and %.0f images a node, created in %.1fs", info.Nodes, info.GPUNodes, info.LabelsPerNode, info.ImagesPerNode, info.CreateSeconds)

	bin, err := testenv.BuildRelease(ctx, e.out) // its RSS as shipped
	require.NoError(t, err)
	// --bench-noop: the admission phase's noop series, a webhook hop alone.
	e.serve, err = testenv.StartServe(ctx, testenv.ServeOptions{Binary: bin, Kubeconfig: e.cp.Kubeconfig(), Config: f.Config, Dir: filepath.Join(e.out, "serve"),
		Args: append([]string{"--bench-noop"}, strings.Fields(os.Getenv("GUG_SCALE_SERVE_ARGS"))...)})
	require.NoError(t, err)
	// The caches hold the fleet once every review gets the fleet's decision.
	require.NoError(t, e.settle(ctx, e.reviews, 3*time.Minute))
}

func (e *scaleEnv) options(reviews []fleetgen.Review) loadgen.Options {
	return loadgen.Options{URL: e.serve.URL(), CA: e.serve.CA.PEM, Reviews: reviews, PID: e.serve.PID()}
}

// settle waits until every review gets its expected decision.
func (e *scaleEnv) settle(ctx context.Context, reviews []fleetgen.Review, within time.Duration) error {
	var last string
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(time.Second) {
		wrong, err := loadgen.Check(ctx, e.options(reviews))
		if err == nil && len(wrong) == 0 {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("%d wrong, e.g. %s", len(wrong), loadgen.Describe(wrong[0]))
		}
	}
	return fmt.Errorf("the webhook did not give the expected decisions within %s: %s", within, last)
}

func (e *scaleEnv) memory(t *testing.T) {
	time.Sleep(5 * time.Second) // idle: let the start-up garbage go
	rss, hwm, err := loadgen.ProcessMemory(e.serve.PID())
	require.NoError(t, err)
	e.res.Memory = &Memory{SyncedRSS: rss, SyncedHWM: hwm, Load: LoadAverage()}
	t.Logf("serve RSS %.1f MiB (peak %.1f MiB) with %d nodes cached", float64(rss)/(1<<20), float64(hwm)/(1<<20), len(e.fleet.Nodes))
}

// register creates or deletes the webhook configuration and waits until the
// API server does or does not call the webhook.
func (e *scaleEnv) register(ctx context.Context, want bool) error {
	vwc, err := e.serve.WebhookConfiguration()
	if err != nil {
		return err
	}
	if want {
		err = client.IgnoreAlreadyExists(e.admin.Create(ctx, vwc))
	} else {
		err = client.IgnoreNotFound(e.admin.Delete(ctx, vwc))
	}
	if err != nil {
		return err
	}
	denied := fmt.Sprintf("admission webhook %q denied", webhook.WebhookRecords)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: fleetgen.NamespaceGate, GenerateName: "probe-",
			Labels: map[string]string{qualification.ConfigMapLabel: "true"}}, Data: map[string]string{qualification.ConfigMapKey: "not a record"}}
		err := e.admin.Create(ctx, cm, client.DryRunAll)
		called := err != nil && strings.Contains(err.Error(), denied)
		if err != nil && !called {
			return err
		}
		if called == want {
			return nil
		}
	}
	return fmt.Errorf("the API server did not start or stop calling the webhook (want %v)", want)
}

type loadSpec struct {
	name, description string
	kinds, scenarios  []string
	rate              float64
	workers           int
}

func (e *scaleEnv) load(ctx context.Context, t *testing.T) {
	run, repeat := envDuration("GUG_SCALE_RUN", 20*time.Second), envInt("GUG_SCALE_REPEAT", 3)
	specs := []loadSpec{
		{"node-relabel-flat", "Node label UPDATE (a rack label no Plan selects; answered from the caches), flat out", []string{"node"}, []string{"relabel"}, 0, 16},
		{"node-mix-flat", "Node label UPDATEs of every scenario (relabel, join a wave, GPU mode change, uncordon; some list holders live), flat out", []string{"node"}, nil, 0, 16},
		{"node-relabel-2500", "Node label UPDATE (relabel) at 2,500/s offered (half the target's flat-out rate), open loop", []string{"node"}, []string{"relabel"}, 2500, 128},
		{"node-relabel-half", "Node label UPDATE (relabel) at half the rate measured flat out above, open loop", []string{"node"}, []string{"relabel"}, -0.5, 128},
		{"plan-200", "Plan CREATE and UPDATE (all 50 Plans) at 200/s offered, open loop", []string{"plan"}, nil, 200, 64},
		{"record-flat", "record ConfigMap CREATE, flat out", []string{"record"}, nil, 0, 8},
	}
	only := os.Getenv("GUG_SCALE_LOAD")
	flat := map[string]float64{} // median throughput of each flat-out spec
	for _, s := range specs {
		if only != "" && !slices.Contains(strings.Split(only, ","), s.name) {
			continue
		}
		if s.rate < 0 { // a fraction of the relabel flat-out rate
			if flat["node-relabel-flat"] == 0 {
				continue
			}
			s.rate = math.Round(-s.rate * flat["node-relabel-flat"])
			s.description += fmt.Sprintf(" (%.0f/s)", s.rate)
		}
		reviews := fleetgen.Select(e.reviews, s.kinds, s.scenarios...)
		lr := LoadResult{Name: s.name, Description: s.description,
			Command: fmt.Sprintf("loadgen run --kinds %s%s --workers %d --duration %s%s", strings.Join(s.kinds, ","), scenarioFlag(s.scenarios), s.workers, run, rateFlag(s.rate))}
		for i := range repeat {
			o := e.options(reviews)
			o.Rate, o.Workers, o.Duration = s.rate, s.workers, run
			before := LoadAverage()
			sum, err := loadgen.Run(ctx, o)
			require.NoError(t, err)
			lr.Runs = append(lr.Runs, LoadRun{Summary: *sum, LoadBefore: before, LoadAfter: LoadAverage()})
			t.Logf("%s #%d (load %s):\n%s", s.name, i+1, before, sum)
			if sum.Errors() != 0 || sum.Status5xx != 0 {
				e.res.Load = append(e.res.Load, lr) // the report shows the run that failed
			}
			require.Zero(t, sum.Errors(), "%s: wrong decisions or failures", s.name)
			require.Zero(t, sum.Status5xx)
		}
		var tputs []float64
		for _, r := range lr.Runs {
			tputs = append(tputs, r.Summary.Throughput)
		}
		slices.Sort(tputs)
		flat[s.name] = tputs[len(tputs)/2]
		e.res.Load = append(e.res.Load, lr)
	}
	rss, hwm, err := loadgen.ProcessMemory(e.serve.PID())
	require.NoError(t, err)
	if e.res.Memory != nil {
		e.res.Memory.AfterLoadRSS, e.res.Memory.AfterLoadHWM = rss, hwm
	}
}

func scenarioFlag(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return " --scenarios " + strings.Join(s, ",")
}

func rateFlag(r float64) string {
	if r == 0 {
		return ""
	}
	return fmt.Sprintf(" --rate %.0f", r)
}

// windows are the faults in progress; the judge reads them.
type windows struct {
	mu    sync.Mutex
	start time.Time
	ws    []*window
}

type window struct {
	FaultWindow
	from, to time.Time // to: zero while open
}

func (w *windows) open(name string, accepted ...string) *window {
	w.mu.Lock()
	defer w.mu.Unlock()
	win := &window{FaultWindow: FaultWindow{Name: name, Accepted: accepted}, from: time.Now()}
	w.ws = append(w.ws, win)
	return win
}

// close ends a window grace after now: informers and in-flight requests
// lag the restoring action.
func (w *windows) close(win *window, grace time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	win.to = time.Now().Add(grace)
}

// during returns the windows a result overlaps.
func (w *windows) during(r *loadgen.Result) []*window {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*window
	for _, win := range w.ws {
		if !r.Done.Before(win.from) && (win.to.IsZero() || !r.Scheduled.After(win.to)) {
			out = append(out, win)
		}
	}
	return out
}

// judge: the expected decision is correct; a denial where an allow is
// expected is fail-closed when every code it gives is one a fault in
// progress explains (or the expected codes); an allow where a denial is
// expected is always wrong.
func (w *windows) judge(r *loadgen.Result) loadgen.Verdict {
	v := loadgen.Expected(r)
	wins := w.during(r)
	if v == loadgen.Wrong && !r.Allowed && len(r.Codes) > 0 {
		ok := true
		for _, c := range r.Codes {
			explained := slices.ContainsFunc(r.Review.Codes, func(e gate.Code) bool { return string(e) == c })
			for _, win := range wins {
				explained = explained || slices.Contains(win.Accepted, c)
			}
			ok = ok && explained
		}
		if ok {
			v = loadgen.FailClosed
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, win := range wins {
		win.Answered++
		switch v {
		case loadgen.Correct:
			win.Correct++
		case loadgen.FailClosed:
			win.FailClosed++
		case loadgen.Shed:
			win.Shed++
		case loadgen.Wrong:
			win.Wrong++
		case loadgen.Failed:
			win.Failed++
		}
	}
	return v
}

// waitReview polls one review until it gets the decision r expects.
func (e *scaleEnv) waitReview(ctx context.Context, r fleetgen.Review, within time.Duration) (time.Duration, error) {
	start := time.Now()
	var last string
	for time.Since(start) < within {
		wrong, err := loadgen.Check(ctx, e.options([]fleetgen.Review{r}))
		if err == nil && len(wrong) == 0 {
			return time.Since(start), nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = loadgen.Describe(wrong[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, fmt.Errorf("%s: not the expected decision within %s: %s", r.Name, within, last)
}

// faults runs the load generator at a fixed rate over every review while
// (a) the serving certificate is rotated on disk, (b) kube-apiserver stops
// and starts again, (c) a record ConfigMap is deleted and created again; and
// checks, after the API server's restart, that decisions which need fresh
// state (a record created then, a canary cordoned then) come right without
// restarting the webhook.
func (e *scaleEnv) faults(ctx context.Context, t *testing.T) {
	const rate = 300
	tail := envDuration("GUG_SCALE_FAULT_TAIL", 10*time.Second)
	f := e.fleet
	res := &Faults{Rate: rate, Reviews: len(e.reviews), Load: LoadAverage()}
	e.res.Faults = res
	ws := &windows{start: time.Now()}
	recordName := fleetgen.RecordName("v100")
	var mu sync.Mutex
	var recordResults []loadgen.Result // Plan reviews naming the record
	o := e.options(e.reviews)
	stop := make(chan struct{})
	o.Rate, o.Workers, o.Duration, o.Stop = rate, 128, loadgen.MaxDuration, stop
	o.Judge = ws.judge
	o.OnResult = func(r *loadgen.Result) {
		if r.Review.Record == recordName {
			mu.Lock()
			recordResults = append(recordResults, *r)
			mu.Unlock()
		}
	}
	pid := e.serve.PID()
	type outcome struct {
		s   *loadgen.Summary
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		s, err := loadgen.Run(ctx, o)
		done <- outcome{s, err}
	}()
	at := func(d time.Duration) { time.Sleep(time.Until(ws.start.Add(d))) }
	note := func(format string, args ...any) {
		msg := fmt.Sprintf("%5.1fs ", time.Since(ws.start).Seconds()) + fmt.Sprintf(format, args...)
		res.Notes = append(res.Notes, msg)
		t.Log(msg)
	}
	step := func(err error) {
		if err != nil {
			t.Error(err)
			note("error: %v", err)
		}
	}

	// (a) Rotate the serving certificate on disk, as a Secret update does.
	at(5 * time.Second)
	win := ws.open("certificate rotation")
	before, err := e.serve.ServingSerial()
	step(err)
	_, err = e.serve.CA.WriteServing(e.serve.CertDir)
	step(err)
	rotated := time.Now()
	for time.Since(rotated) < 30*time.Second {
		if s, err := e.serve.ServingSerial(); err == nil && s != before {
			win.Recovered = time.Since(rotated)
			win.Detail = fmt.Sprintf("serial %s → %s served after %s, no restart", before, s, win.Recovered.Round(time.Millisecond))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if win.Recovered == 0 {
		step(errors.New("the rotated certificate was not served within 30s"))
	}
	note("certificate rotated: %s", win.Detail)
	ws.close(win, 5*time.Second)

	// (b) Stop kube-apiserver for a while and start it again. The webhook
	// keeps answering from its caches; what needs the API server (GPU
	// holders, listed live) fails closed with FactsMissing.
	at(15 * time.Second)
	win = ws.open("kube-apiserver stop and restart", string(gate.CodeFactsMissing))
	step(e.cp.StopAPIServer())
	note("kube-apiserver stopped")
	time.Sleep(8 * time.Second)
	step(e.cp.StartAPIServer())
	restarted := time.Now()
	note("kube-apiserver ready again")
	// Fresh state after the restart: a record created now...
	labelsOnly := f.Options
	labelsOnly.Kubelet = false // the same fleet, without what the engine never reads
	fresh := fleetgen.Generate(labelsOnly)
	recFresh := fleetgen.NewRecord(fleetgen.Hardwares[0], f.Options.Now.Add(-24*time.Hour))
	recFresh.ID = "v100-r580-canary-2"
	cm := fresh.AddRecord("v100-r580-after-restart", recFresh)
	step(e.writeRecord(ctx, cm))
	freshPlan := fleetgen.HostnamePlan("after-restart-canary", cm.Name, f.ByRole("v100", "zone-c", fleetgen.RolePlain)[2].Name)
	rv := fresh.PlanReview(freshPlan, nil, time.Now())
	require.True(t, rv.Allowed, rv.Codes)
	took, err := e.waitReview(ctx, rv, 60*time.Second)
	step(err)
	note("a Plan naming a record created after the restart was allowed %s after the create (ConfigMap informer recovered)", took.Round(time.Millisecond))
	win.Recovered = time.Since(restarted)
	win.Detail = fmt.Sprintf("down %.1fs–%.1fs (SIGTERM to ready); a record created after the restart was used %s after it was ready", win.from.Sub(ws.start).Seconds(), restarted.Sub(ws.start).Seconds(), win.Recovered.Round(time.Millisecond))
	ws.close(win, 5*time.Second)
	// ... and the only V100 canary cordoned now: a V100 wave loses its
	// proven canary (Node informer recovered).
	canary := f.ByRole("v100", "", fleetgen.RoleCanary)[0].Name
	cwin := ws.open("V100 canary cordoned after the restart", string(gate.CodeCanaryNotProven))
	step(e.cordon(ctx, canary, true))
	cordoned := time.Now()
	fresh.Node(canary).Spec.Unschedulable = true
	var wave *upgradev1.Plan
	for _, p := range f.Plans {
		if p.Name == "gpu-v100-zone-a-wave-1" {
			wave = p
		}
	}
	rvWave := fresh.PlanReview(wave, nil, time.Now())
	require.False(t, rvWave.Allowed)
	took, err = e.waitReview(ctx, rvWave, 60*time.Second)
	step(err)
	cwin.Recovered = took
	note("the V100 wave Plan was refused (%v) %s after the canary was cordoned (Node informer recovered)", rvWave.Codes, took.Round(time.Millisecond))
	step(e.cordon(ctx, canary, false))
	fresh.Node(canary).Spec.Unschedulable = false
	took, err = e.waitReview(ctx, fresh.PlanReview(wave, nil, time.Now()), 60*time.Second)
	step(err)
	note("the V100 wave Plan was allowed again %s after the uncordon", took.Round(time.Millisecond))
	cwin.Detail = fmt.Sprintf("cordoned at %.1fs (after the restart); the wave was refused %s later (until then the Node cache still held the old node); uncordoned: allowed again after %s", cordoned.Sub(ws.start).Seconds(), cwin.Recovered.Round(time.Millisecond), took.Round(time.Millisecond))
	ws.close(cwin, 5*time.Second)

	// (c) Delete a record ConfigMap and create it again.
	at(max(time.Since(ws.start)+2*time.Second, 50*time.Second))
	// Recreated the attested way, the record exists unapproved between its
	// author's create and its approver's approval: RecordNotApproved then
	// is the right denial, not a wrong one.
	rwin := ws.open("record ConfigMap deleted and recreated", string(gate.CodeRecordMissing), string(gate.CodeRecordNotApproved))
	var stored *corev1.ConfigMap
	for _, c := range f.RecordConfigMaps {
		if c.Name == recordName {
			stored = c
		}
	}
	deleting := time.Now()
	step(e.admin.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: stored.Namespace, Name: stored.Name}}))
	deleted := time.Now()
	var canaryPlan *upgradev1.Plan
	for _, p := range f.Plans {
		if p.Name == "gpu-v100-canary-zone-a" {
			canaryPlan = p
		}
	}
	missing := fleetgen.Generate(labelsOnly)
	missing.RecordConfigMaps = slices.DeleteFunc(missing.RecordConfigMaps, func(c *corev1.ConfigMap) bool { return c.Name == recordName })
	rvMissing := missing.PlanReview(canaryPlan, nil, time.Now())
	took, err = e.waitReview(ctx, rvMissing, 30*time.Second)
	step(err)
	note("record %s deleted: Plans naming it refused (%v) after %s", recordName, rvMissing.Codes, took.Round(time.Millisecond))
	time.Sleep(5 * time.Second)
	recreating := time.Now()
	step(e.writeRecord(ctx, stored))
	recreated := time.Now()
	took, err = e.waitReview(ctx, f.PlanReview(canaryPlan, nil, time.Now()), 30*time.Second)
	step(err)
	rwin.Recovered = took
	note("record %s created again: Plans naming it allowed again after %s", recordName, took.Round(time.Millisecond))
	rwin.Detail = fmt.Sprintf("deleted at %.1fs, created again at %.1fs; allowed again after %s", deleted.Sub(ws.start).Seconds(), recreated.Sub(ws.start).Seconds(), took.Round(time.Millisecond))
	ws.close(rwin, 5*time.Second)

	// Load goes on a while after the last fault, then stops.
	time.Sleep(tail)
	close(stop)
	out := <-done
	require.NoError(t, out.err)
	res.Summary = *out.s
	t.Logf("fault run:\n%s", out.s)

	// Monotonic: once a Plan naming the deleted record was refused for it,
	// none was allowed again before the record came back. Only an answer
	// decided wholly inside the window counts: one whose round trip spans
	// the delete or the re-create (seconds under this load) may have been
	// decided on either side of it.
	slices.SortFunc(recordResults, func(a, b loadgen.Result) int { return a.Sent.Compare(b.Sent) })
	var firstMissing time.Time
	var flips []string
	for _, r := range recordResults {
		missingCode := slices.Contains(r.Codes, string(gate.CodeRecordMissing))
		if missingCode && firstMissing.IsZero() {
			firstMissing = r.Done
			if r.Done.Before(deleting) {
				flips = append(flips, "refused for a missing record before the delete was sent: "+loadgen.Describe(&r))
			}
		}
		if r.Allowed && !firstMissing.IsZero() && r.Sent.After(firstMissing) && r.Done.Before(recreating) {
			flips = append(flips, fmt.Sprintf("allowed at %.1fs, after the first refusal at %.1fs and before the re-create at %.1fs: %s",
				r.Done.Sub(ws.start).Seconds(), firstMissing.Sub(ws.start).Seconds(), recreating.Sub(ws.start).Seconds(), loadgen.Describe(&r)))
		}
	}
	if len(flips) > 0 {
		t.Errorf("record %s: %d answers went back to the old state while it was deleted, e.g. %s", recordName, len(flips), flips[0])
		note("record flip-flops: %d, e.g. %s", len(flips), flips[0])
	}

	// The state is restored: every review gets the fleet's decision again.
	wrong, err := loadgen.Check(ctx, e.options(e.reviews))
	require.NoError(t, err)
	res.FinalWrong = len(wrong)
	for _, w := range wrong {
		t.Errorf("after the faults: %s", loadgen.Describe(w))
	}
	if e.serve.Exited() || e.serve.PID() != pid {
		res.Restarts = 1
		t.Error("the webhook process exited during the faults")
	}
	logData, err := os.ReadFile(e.serve.LogPath)
	require.NoError(t, err)
	res.Panics = strings.Count(strings.ToLower(string(logData)), "panic")
	for _, win := range ws.ws {
		win.From, win.To = win.from.Sub(ws.start).Seconds(), win.to.Sub(ws.start).Seconds()
		res.Windows = append(res.Windows, win.FaultWindow)
	}
	require.Zero(t, res.Panics, "the serve log mentions a panic: %s", e.serve.LogPath)
	require.Zero(t, out.s.Wrong, "wrong decisions under faults")
	require.Zero(t, out.s.Failed, "failed requests under faults")
	require.Zero(t, out.s.Status5xx, "5xx answers under faults")
}

func (e *scaleEnv) cordon(ctx context.Context, name string, on bool) error {
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%v}}`, on)
	return e.admin.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// writeRecord writes a record ConfigMap through the record webhook the
// attested way: its author creates it, its approver approves its data
// (impersonated with the admin's group: no people's RBAC is installed here;
// the webhook attests usernames, never groups).
func (e *scaleEnv) writeRecord(ctx context.Context, cm *corev1.ConfigMap) error {
	as := func(user string) (client.Client, error) {
		return client.New(e.cp.ConfigFor(user, "system:masters"), client.Options{Scheme: e.admin.Scheme()})
	}
	author, err := as(cm.Annotations[qualification.AnnotationAuthor])
	if err != nil {
		return err
	}
	by := cm.Annotations[qualification.AnnotationApprovedBy]
	approver, err := as(by)
	if err != nil {
		return err
	}
	return testenv.WriteRecord(ctx, author, approver, by, cm)
}
