//go:build scale

package scale

// make bench-peers (issue 28 goal 2): the Plan create's added latency through
// one real kube-apiserver, the gate beside its peers. Kyverno and Gatekeeper
// run here as processes with the control plane's kubeconfig, built from their
// Go modules (hack/peers.mk), their CRDs installed, each serving loopback TLS
// and enforcing hack/tools/peers/policies on its own namespace's Plans; a
// ValidatingAdmissionPolicy guards a fourth namespace, a webhook that only
// allows a fifth (the hop's floor, served by the gate's process), and the
// gate the SUC namespace with every rule it applies. The same Plan create
// goes round-robin to each, the order rotated every round, paced and back to
// back. It measures and never asserts a time: it fails only when an engine
// gives a wrong answer (a Plan breaking a rule allowed, the valid Plan
// denied) or a run cannot complete. A peer whose binary is missing or that
// does not start is recorded as absent, with why, and the rest is measured.
//
//	GUG_PEERS_KYVERNO=<bin> GUG_PEERS_KYVERNO_SRC=<module dir> \
//	GUG_PEERS_GATEKEEPER=<bin> GUG_PEERS_GATEKEEPER_SRC=<module dir> \
//	go test -tags scale -run '^TestScalePeers$' -timeout 40m -v ./test/scale/
//
// GUG_PEERS_N (rounds per mode, default 150), GUG_PEERS_NODES (the fleet,
// default 1000).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/controlplane"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/test/loadgen"
)

const (
	nsVAP        = "bench-vap"
	nsKyverno    = "bench-kyverno"
	nsGatekeeper = "bench-gatekeeper"
	// The peers' own namespaces (their defaults), for their leases, Secrets
	// and ConfigMaps.
	nsKyvernoSystem    = "kyverno"
	nsGatekeeperSystem = "gatekeeper-system"
	peersCommand       = "make bench-peers"
)

// peerProc is a peer running beside the control plane.
type peerProc struct {
	name, ns string
	proc     *controlplane.Process
	log      string
}

// breaking is a Plan breaking only the rule of its code; the policies in
// hack/tools/peers/policies name the same codes.
var breaking = []struct {
	code   gate.Code
	mutate func(p *upgradev1.Plan)
}{
	{gate.CodeConcurrencyNotSerial, func(p *upgradev1.Plan) { p.Spec.Concurrency = 3 }},
	{gate.CodeCordonRequired, func(p *upgradev1.Plan) { p.Spec.Cordon, p.Spec.Drain = false, nil }},
	{gate.CodeUnpinnedVersion, func(p *upgradev1.Plan) { p.Spec.Version = "" }},
	{gate.CodeRecordMissing, func(p *upgradev1.Plan) { delete(p.Annotations, gate.AnnotationQualification) }},
	{gate.CodeRequesterMissing, func(p *upgradev1.Plan) { delete(p.Annotations, gate.AnnotationRequestedBy) }},
	{gate.CodeRequesterMismatch, func(p *upgradev1.Plan) { p.Annotations[gate.AnnotationRequestedBy] = "someone-else" }},
	{gate.CodeWindowInvalid, func(p *upgradev1.Plan) { p.Spec.Window = nil }},
}

func TestScalePeers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 38*time.Minute)
	defer cancel()
	ctrllog.SetLogger(logr.Discard()) // the clients below log nothing of use
	out := os.Getenv("GUG_SCALE_OUT")
	if out == "" {
		out = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(out, 0o755))
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	policies := filepath.Join(root, "hack", "tools", "peers", "policies")
	res := &Peers{Command: peersCommand, Started: time.Now().UTC(), Machine: ThisMachine(), Versions: map[string]string{}, Absent: map[string]string{}}
	defer func() {
		res.Finished = time.Now().UTC()
		data, _ := json.MarshalIndent(res, "", "  ")
		require.NoError(t, os.WriteFile(filepath.Join(out, "peers.json"), data, 0o644))
		t.Logf("results: %s", filepath.Join(out, "peers.json"))
	}()

	// Which peers can run: a binary and the module's manifests (CRDs).
	e := &scaleEnv{out: out, res: &Results{Started: time.Now().UTC(), Machine: res.Machine},
		fleetOptions: fleetgen.Options{Nodes: envInt("GUG_PEERS_NODES", 1000)}}
	kyvernoBin, kyvernoCRDs := peerFiles(t, res, "kyverno", "GUG_PEERS_KYVERNO", func(src string) ([]string, error) {
		var dirs []string
		for _, d := range []string{"kyverno", "policies.kyverno.io", "reports", "policyreport"} {
			dirs = append(dirs, filepath.Join(src, "config", "crds", d))
		}
		return dirs, nil
	})
	gatekeeperBin, gatekeeperCRDs := peerFiles(t, res, "gatekeeper", "GUG_PEERS_GATEKEEPER", func(src string) ([]string, error) {
		dst := filepath.Join(out, "gatekeeper-crds.yaml")
		return []string{dst}, crdsOf(filepath.Join(src, "deploy", "gatekeeper.yaml"), dst)
	})
	e.crdPaths = append(kyvernoCRDs, gatekeeperCRDs...)
	e.setup(ctx, t)
	defer func() { require.NoError(t, e.serve.Stop()) }()
	res.Fleet = e.res.Fleet
	require.NoError(t, e.register(ctx, true))
	for _, ns := range []string{nsPlain, nsVAP, nsNoop, nsKyverno, nsGatekeeper, nsKyvernoSystem, nsGatekeeperSystem} {
		require.NoError(t, client.IgnoreAlreadyExists(e.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})))
	}
	cs, err := kubernetes.NewForConfig(e.cp.RESTConfig())
	require.NoError(t, err)
	require.NoError(t, e.noop(ctx, cs))
	require.NoError(t, e.applyYAML(ctx, filepath.Join(policies, "vap.yaml")))
	require.NoError(t, e.enforced(ctx, nsVAP, 30*time.Second), "the ValidatingAdmissionPolicy")

	engines := []struct{ name, ns string }{{"vap", nsVAP}, {"gate", fleetgen.NamespaceSUC}}
	var peers []*peerProc
	if kyvernoBin != "" {
		if p, err := e.startKyverno(ctx, kyvernoBin, filepath.Join(policies, "kyverno.yaml")); err != nil {
			res.Absent["kyverno"] = err.Error()
			t.Logf("kyverno not measured: %v", err)
		} else {
			peers, engines = append(peers, p), append(engines, struct{ name, ns string }{"kyverno", nsKyverno})
			res.Versions["kyverno"] = versionOf(kyvernoBin)
		}
	}
	if gatekeeperBin != "" {
		if p, err := e.startGatekeeper(ctx, gatekeeperBin, filepath.Join(policies, "gatekeeper.yaml")); err != nil {
			res.Absent["gatekeeper"] = err.Error()
			t.Logf("gatekeeper not measured: %v", err)
		} else {
			peers, engines = append(peers, p), append(engines, struct{ name, ns string }{"gatekeeper", nsGatekeeper})
			res.Versions["gatekeeper"] = versionOf(gatekeeperBin)
		}
	}
	defer func() {
		for _, p := range peers {
			p.proc.Stop()
		}
	}()
	procs := map[string]int{"gate": e.serve.PID()}
	for _, p := range peers {
		procs[p.name] = p.proc.PID()
	}

	// Each engine denies a Plan breaking only one rule, and allows the one
	// breaking none: the policies are the same rules.
	node := e.fleet.ByRole("v100", "", fleetgen.RolePlain)[0].Name
	valid := func(ns string) *upgradev1.Plan {
		p := byAuthor(fleetgen.HostnamePlan("adm-write", fleetgen.RecordName("v100"), node))
		p.Namespace = ns
		return p
	}
	answer := func(ns string, mutate func(*upgradev1.Plan)) string {
		p := valid(ns)
		if mutate != nil {
			mutate(p)
		}
		err := e.person.Create(ctx, p, client.DryRunAll)
		switch {
		case err == nil:
			return "allowed"
		case strings.Contains(err.Error(), "denied"):
			return "denied"
		}
		return "error: " + clip(err.Error())
	}
	rule := PeerRule{Code: "none (the valid Plan)", Answers: map[string]string{}}
	for _, en := range engines {
		rule.Answers[en.name] = answer(en.ns, nil)
		if rule.Answers[en.name] != "allowed" {
			t.Errorf("%s: the valid Plan: %s", en.name, rule.Answers[en.name])
		}
	}
	res.Rules = append(res.Rules, rule)
	for _, b := range breaking {
		rule := PeerRule{Code: string(b.code), Answers: map[string]string{}}
		for _, en := range engines {
			rule.Answers[en.name] = answer(en.ns, b.mutate)
			if rule.Answers[en.name] != "denied" {
				t.Errorf("%s: a Plan breaking only %s: %s", en.name, b.code, rule.Answers[en.name])
			}
		}
		res.Rules = append(res.Rules, rule)
	}

	time.Sleep(5 * time.Second) // idle: let the start-up garbage go
	for _, name := range sortedKeys(procs) {
		rss, hwm, err := loadgen.ProcessMemory(procs[name])
		require.NoError(t, err, name)
		file, err := loadgen.ProcessFileRSS(procs[name])
		require.NoError(t, err, name)
		res.Idle = append(res.Idle, ProcessUse{Name: name, RSS: rss, HWM: hwm, FileRSS: file})
	}

	res.Plan = "GPU canary Plan (one V100 node by hostname), created and deleted, allowed by every engine"
	series := []string{"plain", "vap", "noop", "gate"}
	nsOf := map[string]string{"plain": nsPlain, "vap": nsVAP, "noop": nsNoop, "gate": fleetgen.NamespaceSUC, "kyverno": nsKyverno, "gatekeeper": nsGatekeeper}
	for _, p := range peers {
		series = append(series, p.name)
	}
	res.Series = series
	var writes []write
	for _, s := range series {
		ns := nsOf[s]
		writes = append(writes, write{s, func(ctx context.Context, _ int) (time.Duration, error) {
			p := valid(ns)
			start := time.Now()
			if err := e.person.Create(ctx, p); err != nil {
				return 0, fmt.Errorf("Plan %s/%s: %w", ns, p.Name, err)
			}
			took := time.Since(start)
			return took, e.admin.Delete(ctx, p)
		}})
		_, err := writes[len(writes)-1].do(ctx, -1) // each is allowed, and warm
		require.NoError(t, err, s)
	}
	n := envInt("GUG_PEERS_N", 150)
	for _, m := range []struct {
		name string
		gap  time.Duration
	}{{"idle, paced 150 ms", pacedGap}, {"idle, back to back", 0}} {
		run := PeersRun{Name: m.name, Gap: m.gap, Rounds: n, LoadBefore: LoadAverage()}
		metricsBefore, err := apiserverMetrics(ctx, cs)
		require.NoError(t, err)
		logStart := fileSize(e.serve.LogPath)
		cpu := map[string]time.Duration{}
		for name, pid := range procs {
			cpu[name], err = loadgen.ProcessCPU(pid)
			require.NoError(t, err, name)
		}
		took := map[string][]time.Duration{}
		next := time.Now()
		for round := range n {
			for k := range writes {
				w := writes[(round+k)%len(writes)]
				time.Sleep(time.Until(next))
				next = time.Now().Add(m.gap)
				d, err := w.do(ctx, round)
				require.NoError(t, err, "%s, %s", m.name, w.name)
				took[w.name] = append(took[w.name], d)
			}
		}
		run.LoadAfter = LoadAverage()
		run.Series = statsOf(took)
		metricsAfter, err := apiserverMetrics(ctx, cs)
		require.NoError(t, err)
		run.Webhooks = metricsAfter.webhookMeans(metricsBefore, "CREATE")
		var phases map[string][]time.Duration
		run.GateHandler, phases = handlerDurations(e.serve.LogPath, logStart, "Plan "+fleetgen.NamespaceSUC+"/adm-write")
		run.GatePhases = statsOf(phases)
		for _, name := range sortedKeys(procs) {
			after, err := loadgen.ProcessCPU(procs[name])
			require.NoError(t, err, name)
			rss, hwm, err := loadgen.ProcessMemory(procs[name])
			require.NoError(t, err, name)
			run.Processes = append(run.Processes, ProcessUse{Name: name, RSS: rss, HWM: hwm, CPU: after - cpu[name]})
		}
		res.Runs = append(res.Runs, run)
		var parts []string
		for _, s := range series {
			parts = append(parts, fmt.Sprintf("%s p50 %s (+%s)", s, run.Series[s].P50, run.Series[s].P50-run.Series["plain"].P50))
		}
		t.Logf("%s (load %s): %s", m.name, run.LoadBefore, strings.Join(parts, ", "))
	}
	for _, p := range peers {
		select {
		case <-p.proc.Done():
			t.Errorf("%s exited during the runs: see %s", p.name, p.log)
		default:
		}
	}
	if t.Failed() {
		res.Failures = append(res.Failures, "a wrong answer or a peer's exit: see the test log")
	}
}

// peerFiles is a peer's binary (env) and CRD paths (from the module's
// sources, env+"_SRC"); "" and nil, recorded in res.Absent, when either is
// missing.
func peerFiles(t *testing.T, res *Peers, name, env string, crds func(src string) ([]string, error)) (string, []string) {
	bin, src := os.Getenv(env), os.Getenv(env+"_SRC")
	if st, err := os.Stat(bin); bin == "" || err != nil || st.IsDir() {
		res.Absent[name] = fmt.Sprintf("no binary: %s=%q (make %s builds it)", env, bin, name)
		t.Log(res.Absent[name])
		return "", nil
	}
	if _, err := os.Stat(src); src == "" || err != nil {
		res.Absent[name] = fmt.Sprintf("no module sources for its CRDs: %s_SRC=%q", env, src)
		t.Log(res.Absent[name])
		return "", nil
	}
	paths, err := crds(src)
	if err != nil {
		res.Absent[name] = "its CRDs: " + err.Error()
		t.Log(res.Absent[name])
		return "", nil
	}
	return bin, paths
}

// versionOf is the version in a binary's cache path
// (<cache>/peers/<name>/<version>/<name>).
func versionOf(bin string) string { return filepath.Base(filepath.Dir(bin)) }

// crdsOf writes the CustomResourceDefinitions of a multi-document manifest
// to dst.
func crdsOf(manifest, dst string) error {
	data, err := os.ReadFile(manifest)
	if err != nil {
		return err
	}
	var keep [][]byte
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		if bytes.Contains(doc, []byte("\nkind: CustomResourceDefinition")) {
			keep = append(keep, bytes.TrimPrefix(bytes.TrimSpace(doc), []byte("---")))
		}
	}
	if len(keep) == 0 {
		return fmt.Errorf("%s holds no CustomResourceDefinition", manifest)
	}
	return os.WriteFile(dst, bytes.Join(keep, []byte("\n---\n")), 0o644)
}

// applyYAML creates every object of a multi-document manifest, retrying a
// kind the API server does not serve yet (a Constraint's, until Gatekeeper
// compiles its template) for up to two minutes.
func (e *scaleEnv) applyYAML(ctx context.Context, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		var last error
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
			// A new client each try: its REST mapper learns a new kind.
			c, err := client.New(e.cp.RESTConfig(), client.Options{})
			if err != nil {
				return err
			}
			if last = client.IgnoreAlreadyExists(c.Create(ctx, u.DeepCopy())); last == nil {
				break
			}
		}
		if last != nil {
			return fmt.Errorf("%s: %s %s: %w", path, u.GetKind(), u.GetName(), last)
		}
	}
}

// enforced waits until a Plan breaking a rule is denied in ns.
func (e *scaleEnv) enforced(ctx context.Context, ns string, within time.Duration) error {
	var last error
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(time.Second) {
		p := fleetgen.HostnamePlan("policy-probe", fleetgen.RecordName("v100"), "nowhere")
		p.Namespace, p.Spec.Concurrency = ns, 3
		last = e.admin.Create(ctx, p, client.DryRunAll)
		if last != nil && strings.Contains(last.Error(), "denied") {
			return nil
		}
	}
	return fmt.Errorf("a Plan with concurrency 3 in %s was not denied within %s (last answer: %v)", ns, within, last)
}

// startKyverno runs Kyverno's admission controller out of cluster
// (--serverIP: its webhooks point at that address, its own CA signs a
// serving certificate for it), its webhooks scoped to the kyverno bench
// namespace by its ConfigMap, and applies its policy.
func (e *scaleEnv) startKyverno(ctx context.Context, bin, policy string) (*peerProc, error) {
	port, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	metrics, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	sel, _ := json.Marshal(map[string]any{"namespaceSelector": metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": nsKyverno}}})
	if err := client.IgnoreAlreadyExists(e.admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsKyvernoSystem, Name: "kyverno"},
		Data: map[string]string{"webhooks": string(sel)}})); err != nil {
		return nil, err
	}
	log := filepath.Join(e.out, "kyverno.log")
	args := []string{"--kubeconfig", e.cp.Kubeconfig(),
		"--serverIP", fmt.Sprintf("127.0.0.1:%d", port), "--webhookServerHost", "127.0.0.1", "--webhookServerPort", fmt.Sprint(port),
		"--caSecretName", "kyverno-svc.kyverno.svc.kyverno-tls-ca", "--tlsSecretName", "kyverno-svc.kyverno.svc.kyverno-tls-pair",
		"--metricsHost", "127.0.0.1", "--metricsPort", fmt.Sprint(metrics), "--controllerRuntimeMetricsAddress", "0",
		// Only the admission path: no admission reports, and no
		// ValidatingAdmissionPolicy generated from the policy (that would
		// measure the API server, not Kyverno).
		"--admissionReports=false", "--generateValidatingAdmissionPolicy=false", "--disableLogColor"}
	proc, err := controlplane.StartProcess("kyverno", bin, args, []string{
		// What its chart's Deployment sets; Kyverno exits without any of them.
		"KYVERNO_NAMESPACE=" + nsKyvernoSystem, "KYVERNO_POD_NAME=kyverno-bench", "KYVERNO_SERVICEACCOUNT_NAME=kyverno-admission-controller",
		"KYVERNO_DEPLOYMENT=kyverno-admission-controller", "INIT_CONFIG=kyverno", "METRICS_CONFIG=kyverno-metrics"}, log)
	if err != nil {
		return nil, err
	}
	p := &peerProc{name: "kyverno", ns: nsKyverno, proc: proc, log: log}
	return e.enforcing(ctx, p, policy)
}

// startGatekeeper runs Gatekeeper's manager (the webhook operation: its
// template and constraint controllers and the validating webhook; and the
// generate one, which creates each template's constraint CRD, as its chart's
// audit Pod does) with a
// serving certificate from a test CA, registers its webhook configuration
// for the gatekeeper bench namespace's Plans (what its chart would, pointed
// at loopback), and applies its template and constraint.
func (e *scaleEnv) startGatekeeper(ctx context.Context, bin, policy string) (*peerProc, error) {
	port, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	health, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	prom, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	ca, err := testenv.NewCA()
	if err != nil {
		return nil, err
	}
	certs := filepath.Join(e.out, "gatekeeper-certs")
	if _, err := ca.WriteServing(certs); err != nil {
		return nil, err
	}
	// Gatekeeper's template controller makes its own Pod the owner of the
	// status objects it writes, and retries until it can read it; no kubelet
	// runs here, so the harness writes that Pod object (never started).
	if err := client.IgnoreAlreadyExists(e.admin.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsGatekeeperSystem, Name: "gatekeeper-bench"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "openpolicyagent/gatekeeper:" + versionOf(bin)}}}})); err != nil {
		return nil, err
	}
	log := filepath.Join(e.out, "gatekeeper.log")
	args := []string{"--port", fmt.Sprint(port), "--host", "127.0.0.1", "--cert-dir", certs, "--disable-cert-rotation",
		"--operation", "webhook", "--operation", "generate", "--health-addr", fmt.Sprintf("127.0.0.1:%d", health), "--metrics-addr", "0", "--prometheus-port", fmt.Sprint(prom)}
	proc, err := controlplane.StartProcess("gatekeeper", bin, args,
		[]string{"KUBECONFIG=" + e.cp.Kubeconfig(), "POD_NAMESPACE=" + nsGatekeeperSystem, "POD_NAME=gatekeeper-bench"}, log)
	if err != nil {
		return nil, err
	}
	p := &peerProc{name: "gatekeeper", ns: nsGatekeeper, proc: proc, log: log}
	url := fmt.Sprintf("https://127.0.0.1:%d/v1/admit", port)
	fail, none, timeout := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone, int32(10)
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "bench-gatekeeper"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "validation.gatekeeper.sh",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca.PEM},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE", "UPDATE"},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{upgradev1.GroupName}, APIVersions: []string{"v1"}, Resources: []string{"plans"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": nsGatekeeper}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"}}}}
	if err := client.IgnoreAlreadyExists(e.admin.Create(ctx, vwc)); err != nil {
		proc.Stop()
		return nil, err
	}
	return e.enforcing(ctx, p, policy)
}

// enforcing applies the peer's policy and waits until the peer enforces it
// (enforcedOrExited); on failure it stops the peer.
func (e *scaleEnv) enforcing(ctx context.Context, p *peerProc, policy string) (*peerProc, error) {
	if err := e.applyYAML(ctx, policy); err != nil {
		p.proc.Stop()
		return nil, err
	}
	if err := e.enforcedOrExited(ctx, p, 4*time.Minute); err != nil {
		p.proc.Stop()
		return nil, err
	}
	return p, nil
}

// enforcedOrExited is enforced, failing at once, with its log's tail, when
// the peer exits.
func (e *scaleEnv) enforcedOrExited(ctx context.Context, p *peerProc, within time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- e.enforced(ctx, p.ns, within) }()
	select {
	case err := <-errc:
		if err != nil {
			return fmt.Errorf("%w; %s's log: %s", err, p.name, logTail(p.log))
		}
		return nil
	case <-p.proc.Done():
		return fmt.Errorf("%s exited: %s", p.name, logTail(p.log))
	}
}

func logTail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return clip(strings.Join(lines, " | "))
}

func clip(s string) string {
	if len(s) > 1500 {
		return s[:1500] + "…"
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
