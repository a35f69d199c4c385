// Command demo is `make demo`: it starts a real etcd and kube-apiserver with
// the gpu-upgrade-gate webhook in front of them, creates a small GPU fleet,
// and walks through the Plans and node-label changes the gate stops (and the
// one it lets through), printing each answer the way kubectl shows it. Then
// the real system-upgrade-controller (when its source is on this machine:
// `make demo` builds it) runs a wave of two GPU nodes, proven node by node
// (rollout.go).
//
// Everything printed comes from a real API response, the API server's audit
// log or the webhook's /metrics. Each step says what it expects; the program
// exits non-zero when an outcome differs, so `make demo ARGS=--once` is also
// a smoke test.
//
//	--once  exit after the sequence (default: stay up for kubectl until Ctrl-C)
//	--keep  keep the work directory (kubeconfig, audit log, logs, manifests)
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/controlplane"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

const (
	sucNamespace = "system-upgrade"
	recordName   = "v100-r580"
	v100Product  = "Tesla-V100-PCIE-32GB"
	holderPod    = "llama-finetune-0"
	labelProduct = "nvidia.com/gpu.product"
)

// Exit codes: 0 every step behaved as its caption says; 1 some did not; 2
// the demo could not run; 130 Ctrl-C before the sequence finished.
const (
	exitMismatch    = 1
	exitSetup       = 2
	exitInterrupted = 130
)

func main() {
	once := flag.Bool("once", false, "exit after the sequence instead of staying up for kubectl")
	keep := flag.Bool("keep", false, "keep the work directory (kubeconfig, audit log, logs, manifests) after exit")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./test/demo [--once] [--keep]\n\n"+
			"Starts etcd, kube-apiserver and the gpu-upgrade-gate webhook, and shows what the gate stops.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(exitSetup)
	}
	sig, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(sig, *once, *keep))
}

// person is who a command runs as (impersonated by the admin kubeconfig, as
// `kubectl --as=<name> --as-group=<group>` does).
type person struct {
	name   string
	groups []string
	prompt string
}

var (
	alice   = person{name: "alice", groups: []string{"platform-admins"}, prompt: "alice$"}
	bob     = person{name: "bob", groups: []string{"platform-admins"}, prompt: "bob$"}
	kubelet = person{name: "system:node:gpu-h200-01", groups: []string{"system:nodes"}, prompt: "system:node:gpu-h200-01$"}
)

type demo struct {
	ctx       context.Context
	env       *testenv.Env
	out       *printer
	manifests string
	warnings  *testenv.Warnings
	clients   map[string]client.Client
	step      int
	failures  []string
	// planRequests counts the Plan writes sent, to know when the audit log
	// holds them all.
	planRequests int
	// suc is the real system-upgrade-controller, once the rollout started it.
	suc *testenv.SUC
}

func run(sig context.Context, once, keep bool) int {
	p := newPrinter(os.Stdout)
	logs := &lazyFile{}
	// The webhook's and controller-runtime's logs go to <workdir>/webhook.log,
	// not the terminal.
	ctrl.SetLogger(ctrlzap.New(ctrlzap.WriteTo(logs)))

	p.title("gpu-upgrade-gate demo")
	p.line("Starting a real etcd and kube-apiserver (built from their Go modules by `make controlplane`),")
	p.line("then the gpu-upgrade-gate webhook in this process, serving TLS with a throw-away CA, and")
	p.line("registering its ValidatingWebhookConfiguration so the API server calls it for every Plan,")
	p.line("record ConfigMap and GPU node-label change. Then the real system-upgrade-controller runs a")
	p.line(fmt.Sprintf("wave of two GPU nodes. The gate runs its defaults but for waveSize 2 and a proof soak of %s (30m).", demoSoak))
	p.blank()

	started := time.Now()
	// The environment gets its own context: on Ctrl-C it is stopped in order
	// (webhook first, then the control plane), not torn down all at once.
	// The gate's defaults, but for a wave of two after a proven canary and a
	// short proof soak, so the rollout with SUC fits in a minute or two.
	cfg := gate.DefaultConfig()
	cfg.WaveSize, cfg.Proof.Soak.Duration = 2, demoSoak
	env, err := testenv.Start(context.Background(), testenv.Options{Config: cfg, KeepWorkDir: keep, HaltInterval: time.Second})
	if err != nil {
		p.errorf("could not start the control plane and webhook: %v", err)
		return exitSetup
	}
	workDir := env.CP.WorkDir()
	var d *demo
	defer func() {
		if d != nil && d.suc != nil {
			d.suc.Stop()
		}
		if err := env.Stop(); err != nil {
			p.errorf("stopping: %v", err)
		}
		logs.close()
		if keep {
			p.line("Work directory kept: " + workDir)
		}
	}()
	if err := logs.open(filepath.Join(workDir, "webhook.log")); err != nil {
		p.errorf("%v", err)
		return exitSetup
	}
	version := "kube-apiserver"
	if dc, err := discovery.NewDiscoveryClientForConfig(env.CP.RESTConfig()); err == nil {
		if v, err := dc.ServerVersion(); err == nil {
			version += " " + v.GitVersion
		}
	}
	p.ok(fmt.Sprintf("%s at %s, etcd, and the webhook at https://127.0.0.1:%d ready in %s",
		version, env.CP.RESTConfig().Host, env.Port, time.Since(started).Round(100*time.Millisecond)))
	p.dim("  work directory: " + workDir + " (kubeconfig, audit.log, kube-apiserver.log, webhook.log)")

	d = &demo{ctx: sig, env: env, out: p, manifests: filepath.Join(workDir, "manifests"), warnings: &testenv.Warnings{}, clients: map[string]client.Client{}}
	if err := d.setup(); err != nil {
		if sig.Err() != nil {
			p.blank()
			p.line("Interrupted; stopping.")
			return exitInterrupted
		}
		p.errorf("setting up the fleet: %v", err)
		return exitSetup
	}
	d.sequence()
	if sig.Err() != nil {
		p.blank()
		p.line("Interrupted; stopping.")
		return exitInterrupted
	}
	d.summary()

	if !once {
		d.stayUp()
	}
	if len(d.failures) > 0 {
		return exitMismatch
	}
	return 0
}

// ---------------------------------------------------------------------------
// The fleet

func (d *demo) setup() error {
	p, env, ctx := d.out, d.env, d.ctx
	if err := os.MkdirAll(d.manifests, 0o755); err != nil {
		return err
	}
	p.section("The fleet")
	p.blank()
	if err := env.Base(ctx); err != nil {
		return err
	}
	p.para(fmt.Sprintf("As the cluster admin: namespaces %s, %s, %s and ml; the GPU Operator Deployment (%s) "+
		"and DCGM exporter DaemonSet (%s); ClusterRole platform-admin bound to group platform-admins (alice and bob). "+
		"Nodes carry the labels NFD and GPU Feature Discovery publish and the status a kubelet reports "+
		"(no kubelet runs: the nodes are API objects).",
		env.Config.Namespace, sucNamespace, env.Config.GPUOperator.Namespace, testenv.Source.GPUOperator, testenv.Source.DCGMExporter))
	p.blank()
	specs := []testenv.NodeSpec{
		{Name: "gpu-v100-01", Fixture: "node-v100.json", Tuple: testenv.Source, Zone: "zone-a"},
		{Name: "gpu-v100-02", Fixture: "node-v100.json", Tuple: testenv.Source, Zone: "zone-a"},
		{Name: "gpu-v100-03", Fixture: "node-v100.json", Tuple: testenv.Target, Zone: "zone-a"},
		{Name: "gpu-h200-01", Fixture: "node-h200.json", Tuple: testenv.Source, Zone: "zone-b"},
		{Name: "cpu-01", Tuple: testenv.Source, Zone: "zone-a"},
		{Name: "cpu-02", Tuple: testenv.Source, Zone: "zone-b"},
	}
	if err := env.CreateNodes(ctx, specs); err != nil {
		return err
	}
	// gpu-v100-03, the canary at the target, is proven (docs/proof.md): its
	// validator Pod Ready and an allocation check Succeeded two hours ago, the
	// status a kubelet would write.
	if err := env.ProveNode(ctx, "gpu-v100-03", time.Now().Add(-2*time.Hour)); err != nil {
		return fmt.Errorf("prove gpu-v100-03: %w", err)
	}
	p.para("gpu-v100-03, the canary already at the target, is proven (docs/proof.md): a Ready validator Pod and a " +
		"Succeeded allocation check on it, their status written as a kubelet would.")
	if err := env.Admin.Create(ctx, testenv.Holder(holderPod, "gpu-v100-02")); err != nil {
		return fmt.Errorf("create holder pod: %w", err)
	}
	if err := d.printNodes(); err != nil {
		return err
	}
	var pod corev1.Pod
	if err := env.Admin.Get(ctx, client.ObjectKey{Namespace: "ml", Name: holderPod}, &pod); err != nil {
		return err
	}
	lim := pod.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"]
	p.blank()
	p.para(fmt.Sprintf("Pod ml/%s is bound to %s and holds nvidia.com/gpu: %s (phase %s: no kubelet starts it; "+
		"a Pod bound to a node counts as a GPU holder).", pod.Name, pod.Spec.NodeName, lim.String(), pod.Status.Phase))
	p.blank()
	p.para("Two people run every command: alice, who ran the canary, writes the record and applies the Plans; bob approves the record. Commands run as alice or bob (group platform-admins), impersonated through the admin kubeconfig " +
		"as `kubectl --as=<user> --as-group=platform-admins` would. `alice$ kubectl apply -f <file>` means " +
		"the manifest <file> in " + d.manifests + " was sent as kubectl sends it.")

	// The qualification record, through the records webhook.
	p.section("Qualification records")
	p.blank()
	completed := time.Now().Add(-48 * time.Hour).Truncate(time.Minute)
	rec := testenv.Record(recordName, completed, waveRecordChecks)
	good, err := env.RecordConfigMap(recordName, rec)
	if err != nil {
		return err
	}
	good.Annotations[qualification.AnnotationAuthor] = alice.name // the demo's two people: alice writes, bob approves
	good.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	goodFile, err := d.writeManifest(recordName+".yaml", good)
	if err != nil {
		return err
	}
	p.para(fmt.Sprintf("Record %s: state %s, approved by %s, hardware %s (V100), canary completed %s (2 days ago), "+
		"moving RKE2 %s -> %s, kernel %s -> %s, driver %s -> %s.",
		rec.ID, rec.State, rec.ApprovedBy, strings.Join(rec.Hardware, ","), rec.Canary.CompletedAt,
		rec.Source.RKE2, rec.Target.RKE2, rec.Source.Kernel, rec.Target.Kernel, rec.Source.Driver, rec.Target.Driver))
	d.runStep(stepSpec{
		title:  "alice, who ran the canary, stores the reviewed record as a ConfigMap (annotated gpu-upgrade-gate.io/author: alice)",
		why:    "records live in the gate's own namespace and are validated when written, not at upgrade time; the record webhook accepts the author annotation only from the user it names, as the API server authenticated her.",
		expect: allowed(),
		do:     func() result { return d.apply(alice, goodFile, false) },
	})
	d.approvalSteps(good)

	// Broken records are the good one with a few lines edited, as a person
	// would edit the file.
	edited := func(id string, edits ...string) (string, error) {
		cm := good.DeepCopy()
		cm.Name = id
		cm.Data[qualification.ConfigMapKey] = strings.NewReplacer(append(edits, "id: "+recordName, "id: "+id)...).Replace(good.Data[qualification.ConfigMapKey])
		return d.writeManifest(id+".yaml", cm)
	}
	yesFile, err := edited("v100-r581", "allocationPassed: true", "allocationPassed: yes")
	if err != nil {
		return err
	}
	d.runStep(stepSpec{
		title:  "alice stores a record that says `allocationPassed: yes`",
		why:    "`yes` is true to YAML 1.1 tools and a string to others; a record must say exactly true, so the gate refuses it when it is written, not at upgrade time.",
		note:   "v100-r581.yaml: the reviewed record with  allocationPassed: yes",
		expect: denied(webhook.WebhookRecords, gate.CodeRecordInvalid),
		do:     func() result { return d.apply(alice, yesFile, false) },
	})
	shortFile, err := edited("v100-r582", "sourceRevision: "+rec.SourceRevision, "sourceRevision: 9f2c4e1",
		"allocationPassed: true", "allocationPassed: false")
	if err != nil {
		return err
	}
	d.runStep(stepSpec{
		title:  "alice stores a record with an abbreviated sourceRevision and a failed GPU allocation",
		why:    "an abbreviated commit does not pin the reviewed evidence, and a canary that never allocated a GPU proves nothing; every problem is reported at once.",
		note:   "v100-r582.yaml: the reviewed record with  sourceRevision: 9f2c4e1  allocationPassed: false",
		expect: denied(webhook.WebhookRecords, gate.CodeRecordInvalid, gate.CodeCanaryIncomplete),
		do:     func() result { return d.apply(alice, shortFile, false) },
	})
	prev := qualification.Tuple{Kernel: "6.8.0-131-generic", RKE2: "v1.34.6+rke2r1", Driver: "570.195.03",
		GPUOperator: testenv.Source.GPUOperator, DCGMExporter: testenv.Source.DCGMExporter}
	old := testenv.Record("v100-r570-to-r580", time.Now().Add(-40*24*time.Hour).Truncate(time.Minute), func(r *qualification.Record) {
		r.Source, r.Target = &prev, testenv.Source
	})
	stale, err := env.RecordConfigMap(old.ID, old)
	if err != nil {
		return err
	}
	stale.Annotations[qualification.AnnotationAuthor] = alice.name
	stale.TypeMeta = good.TypeMeta
	staleFile, err := d.writeManifest(old.ID+".yaml", stale)
	if err != nil {
		return err
	}
	d.runStep(stepSpec{
		title:  "alice stores the previous upgrade's record v100-r570-to-r580 (canary completed 40 days ago)",
		why:    "an expired record is history, not an error: it is stored, with a warning that it can no longer qualify a Plan.",
		expect: allowed(),
		do:     func() result { return d.apply(alice, staleFile, false) },
	})
	// The webhook reads Nodes, Plans and records from informer caches; give
	// the watch events of the objects just created time to arrive (they take
	// milliseconds; this is generous for a small shared machine).
	select {
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
		return ctx.Err()
	}
	return ctx.Err()
}

func (d *demo) printNodes() error {
	var nodes corev1.NodeList
	if err := d.env.Admin.List(d.ctx, &nodes); err != nil {
		return err
	}
	slices.SortFunc(nodes.Items, func(a, b corev1.Node) int { return strings.Compare(nodeOrder(a.Name), nodeOrder(b.Name)) })
	tw := d.out.table()
	fmt.Fprintln(tw, "  NAME\tGPU\tZONE\tSCHEDULABLE\tKERNEL\tRKE2 (KUBELET)\tDRIVER")
	for _, n := range nodes.Items {
		gpu := n.Labels[labelProduct]
		if gpu == "" {
			gpu = "-"
		}
		sched := "yes"
		if n.Spec.Unschedulable {
			sched = "cordoned"
		}
		drv := n.Labels["nvidia.com/cuda.driver-version.full"]
		if drv == "" {
			drv = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, gpu, n.Labels[gate.LabelZone], sched, n.Status.NodeInfo.KernelVersion, n.Status.NodeInfo.KubeletVersion, drv)
	}
	return tw.Flush()
}

// nodeOrder lists GPU nodes first.
func nodeOrder(name string) string {
	if strings.HasPrefix(name, "gpu-") {
		return "0" + name
	}
	return "1" + name
}

// ---------------------------------------------------------------------------
// The sequence

func (d *demo) sequence() {
	p := d.out
	p.section("Plans and node-label changes")

	stock, err := os.ReadFile(filepath.Join(mustRoot(), "testdata", "suc", "rke2-agent-plan.yaml"))
	if err == nil {
		err = os.WriteFile(filepath.Join(d.manifests, "rke2-agent-plan.yaml"), stock, 0o644)
	}
	if err != nil {
		d.fail("setup", err.Error())
		return
	}
	d.runStep(stepSpec{
		title:  "The stock RKE2 agent Plan (testdata/suc/rke2-agent-plan.yaml)",
		why:    "it follows a release channel and selects every non-control-plane node, GPU or not: one apply would upgrade the whole GPU pool to whatever the channel says.",
		file:   "rke2-agent-plan.yaml",
		expect: denied(webhook.WebhookPlans, gate.CodeMixedPlan, gate.CodeUnpinnedVersion, gate.CodeRecordMissing),
		do:     func() result { return d.apply(alice, "rke2-agent-plan.yaml", false) },
	})
	if d.ctx.Err() != nil {
		return
	}

	pool := d.plan("gpu-v100-pool", &metav1.LabelSelector{MatchLabels: map[string]string{labelProduct: v100Product}}, func(pl *upgradev1.Plan) {
		pl.Spec.Concurrency = 3
		pl.Spec.Cordon = false
	})
	var poolCodes []string
	poolStep := 0
	d.runStep(stepSpec{
		title:  "A pinned V100 Plan under the record, with concurrency 3 and no cordon",
		why:    "SUC upgrades as many nodes at once as concurrency says and would leave them schedulable mid-upgrade; a GPU pool goes one node at a time, in waves no wider than the wave size.",
		file:   pool,
		expect: denied(webhook.WebhookPlans, gate.CodeConcurrencyNotSerial, gate.CodeCordonRequired, gate.CodeMultipleCanaries),
		do: func() result {
			poolStep = d.step
			r := d.apply(alice, pool, false)
			poolCodes = r.codes
			return r
		},
	})

	h200 := d.plan("gpu-h200-01", hostnames("gpu-h200-01"), nil)
	d.runStep(stepSpec{
		title:  "A Plan that selects the H200 node under the V100 record",
		why:    "a record qualifies one exact hardware set (PCI IDs read from NFD labels); an H200 needs its own canary.",
		file:   h200,
		expect: denied(webhook.WebhookPlans, gate.CodeHardwareNotQualified),
		do:     func() result { return d.apply(alice, h200, false) },
	})

	busy := d.plan("gpu-v100-02", hostnames("gpu-v100-02"), nil)
	d.runStep(stepSpec{
		title:  "A Plan for gpu-v100-02, where a training job holds all 8 GPUs",
		why:    "upgrading a node restarts its kubelet and driver under running GPU work; the gate lists the holders from the API server at review time.",
		file:   busy,
		expect: denied(webhook.WebhookPlans, gate.CodeGPUHolders),
		do:     func() result { return d.apply(alice, busy, false) },
	})

	d.runStep(stepSpec{
		title:  "A server-side dry run of the pool Plan from step " + strconv.Itoa(poolStep),
		why:    "a GitOps pipeline can ask the real cluster before merging: same decision, nothing stored.",
		file:   pool,
		expect: denied(webhook.WebhookPlans, gate.CodeConcurrencyNotSerial, gate.CodeCordonRequired, gate.CodeMultipleCanaries),
		okNote: "the same blockers as the real apply, and nothing stored",
		do: func() result {
			r := d.apply(alice, pool, true)
			if r.err != nil && !slices.Equal(r.codes, poolCodes) {
				r.problems = append(r.problems, fmt.Sprintf("dry run gave %v, the real apply gave %v", r.codes, poolCodes))
			}
			return r
		},
		after: func(r *result) {
			d.out.blank()
			d.out.cmd(alice.prompt, "kubectl get plan gpu-v100-pool -n "+sucNamespace)
			var pl upgradev1.Plan
			err := d.client(alice).Get(d.ctx, client.ObjectKey{Namespace: sucNamespace, Name: "gpu-v100-pool"}, &pl)
			switch {
			case apierrors.IsNotFound(err):
				d.out.output(kubectlError(err, "", ""))
			case err == nil:
				d.out.output("gpu-v100-pool exists")
				r.problems = append(r.problems, "the dry run stored the Plan")
			default:
				d.out.output(kubectlError(err, "", ""))
				r.problems = append(r.problems, err.Error())
			}
			d.out.blank()
			d.out.cmd(alice.prompt, "kubectl get plans -n "+sucNamespace)
			var plans upgradev1.PlanList
			if err := d.client(alice).List(d.ctx, &plans, client.InNamespace(sucNamespace)); err != nil {
				r.problems = append(r.problems, err.Error())
				return
			}
			tw := d.out.table()
			fmt.Fprintln(tw, "    NAME\tIMAGE\tCHANNEL\tVERSION")
			var names []string
			for _, pl := range plans.Items {
				names = append(names, pl.Name)
				fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\n", pl.Name, pl.Spec.Upgrade.Image, pl.Spec.Channel, pl.Spec.Version)
			}
			_ = tw.Flush()
			if len(names) != 0 {
				r.problems = append(r.problems, fmt.Sprintf("expected no Plan stored yet (every one so far was denied), found %v", names))
			}
		},
	})
	if d.ctx.Err() != nil {
		return
	}
	byBob := d.plan("gpu-v100-canary", hostnames("gpu-v100-01"), requestedBy("bob"))
	d.runStep(stepSpec{
		title:  "bob applies the canary Plan for gpu-v100-01 under the record he approved himself",
		why:    "two-person rule: whoever approved the evidence (as the record webhook attested it) may not also roll it out; its author may (config separation: three-person refuses the author too).",
		file:   byBob,
		expect: denied(webhook.WebhookPlans, gate.CodeSelfApproved),
		do:     func() result { return d.apply(bob, byBob, false) },
	})
	canary := d.plan("gpu-v100-canary", hostnames("gpu-v100-01"), nil)
	d.runStep(stepSpec{
		title:  "alice, who wrote the record bob approved, applies the same canary Plan",
		why:    "the seed's flow: the operator who ran the canary applies the Plan a second person reviewed. One idle V100 node at the record's source tuple, pinned to the qualified version, serial, cordoned: this is the safe upgrade, and it goes through.",
		file:   canary,
		expect: allowed(),
		do:     func() result { return d.apply(alice, canary, false) },
	})
	if d.ctx.Err() != nil {
		return
	}

	second := d.plan("gpu-v100-03", hostnames("gpu-v100-03"), nil)
	d.runStep(stepSpec{
		title:  "alice applies a second single-node Plan, for gpu-v100-03, while the canary is in flight",
		why:    "two serial Plans are two rollouts at once: one GPU rollout at a time (docs/rollout.md), so the second waits until the canary's is done.",
		file:   second,
		expect: denied(webhook.WebhookPlans, gate.CodeRolloutInFlight),
		do:     func() result { return d.apply(alice, second, false) },
	})

	d.rollout()
	if d.ctx.Err() != nil {
		return
	}

	p.section("GPU mode changes")
	d.runStep(stepSpec{
		title:  "alice switches gpu-v100-03 to VM passthrough while it is schedulable",
		why:    "a GPU mode change swaps drivers and device plugins under the node's workloads; it must happen on a cordoned, idle node.",
		expect: denied(webhook.WebhookNodes, gate.CodeModeChangeNotCordoned),
		do:     func() result { return d.label(alice, "gpu-v100-03", gate.LabelExpectedWorkloadMode, "vm-passthrough") },
	})
	d.runStep(stepSpec{
		title:  "alice cordons gpu-v100-03 first, then makes the same change",
		why:    "the denial said what to do; done in that order, the gate lets the change through.",
		expect: allowed(),
		do: func() result {
			if r := d.cordon(alice, "gpu-v100-03"); r.err != nil {
				return r
			}
			d.out.blank()
			return d.label(alice, "gpu-v100-03", gate.LabelExpectedWorkloadMode, "vm-passthrough")
		},
	})
	var reviewsBefore float64
	d.runStep(stepSpec{
		title: "The kubelet of gpu-h200-01 makes the same change on its own, schedulable node",
		why: "kubelets write their Node all the time; the webhook configuration's matchCondition " +
			"`not-a-kubelet` keeps their writes away from the webhook, so the gate can never stall a kubelet " +
			"(the Node authorizer and NodeRestriction already limit a kubelet to its own Node).",
		expect: allowed(),
		okNote: "the webhook never saw it",
		do: func() result {
			var err error
			if reviewsBefore, err = d.nodeReviews(); err != nil {
				return result{err: err}
			}
			return d.label(kubelet, "gpu-h200-01", gate.LabelExpectedWorkloadMode, "vm-passthrough")
		},
		after: func(r *result) {
			if r.err != nil {
				return
			}
			after, err := d.nodeReviews()
			if err != nil {
				r.problems = append(r.problems, err.Error())
				return
			}
			d.out.blank()
			d.out.line(fmt.Sprintf("    webhook /metrics: Node reviews before %v, after %v", reviewsBefore, after))
			if after != reviewsBefore {
				r.problems = append(r.problems, "the webhook reviewed the kubelet's change")
			}
			ev, err := d.waitAudit(func(e controlplane.AuditEvent) bool {
				return isResource(e, "nodes", "gpu-h200-01") && e.Username() == kubelet.name && e.Verb == "patch"
			})
			if err != nil {
				r.problems = append(r.problems, err.Error())
				return
			}
			var ours []string
			for k, v := range ev.Annotations {
				if strings.HasPrefix(k, webhook.WebhookNodes+"/") {
					ours = append(ours, k+"="+v)
				}
			}
			slices.Sort(ours)
			if len(ours) == 0 {
				d.out.line(fmt.Sprintf("    audit log: %s %s node %s -> %d, no %s/* annotation: the webhook was not called",
					ev.Username(), ev.Verb, ev.ObjectRef.Name, ev.ResponseStatus.Code, webhook.WebhookNodes))
			} else {
				d.out.line("    audit log: " + strings.Join(ours, " "))
				r.problems = append(r.problems, "the audit event carries the webhook's annotations")
			}
		},
	})
	if d.ctx.Err() != nil {
		return
	}
	d.haltSteps()
	d.changeRecordStep()
	d.auditStep()
}

func (d *demo) auditStep() {
	d.step++
	p := d.out
	p.stepTitle(d.step, "The API server's audit log for the Plan requests above")
	p.why("every decision, allowed or denied, dry run or not, is in the audit log with its reason codes, keyed by the webhook's name.")
	var planEvents []controlplane.AuditEvent
	want := d.planRequests
	gateUser := "system:serviceaccount:" + d.env.ServiceAccount.Namespace + ":" + d.env.ServiceAccount.Name
	ctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
	defer cancel()
	for {
		events, err := d.env.CP.AuditEvents()
		if err != nil {
			d.fail("audit log", err.Error())
			return
		}
		planEvents = planEvents[:0]
		for _, e := range events {
			// People's Plan writes; SUC's own (its status) and the gate's
			// (its nudge once SUC's completion lands: docs/rollout.md, timed
			// by SUC) are not the subject.
			if e.Stage == "ResponseComplete" && e.ObjectRef != nil && e.ObjectRef.Resource == "plans" && e.ObjectRef.Subresource == "" &&
				e.Username() != testenv.SUCUser && e.Username() != gateUser {
				planEvents = append(planEvents, e)
			}
		}
		if len(planEvents) >= want {
			break
		}
		select {
		case <-ctx.Done():
			d.fail("audit log", fmt.Sprintf("found %d Plan events in %s, expected %d", len(planEvents), d.env.CP.AuditLogPath(), want))
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	dk, rk := webhook.WebhookPlans+"/"+gate.AuditDecision, webhook.WebhookPlans+"/"+gate.AuditReasons
	p.dim("  " + d.env.CP.AuditLogPath() + ": the ResponseComplete events of resource plans;")
	p.dim("  DECISION and REASONS are their annotations " + dk + " and " + rk)
	tw := p.table()
	fmt.Fprintln(tw, "    USER\tVERB\tOBJECT\tCODE\tDECISION\tREASONS")
	var problems []string
	for _, e := range planEvents {
		verb := e.Verb
		if strings.Contains(e.RequestURI, "dryRun=") {
			verb += " (dry run)"
		}
		code := int32(0)
		if e.ResponseStatus != nil {
			code = e.ResponseStatus.Code
		}
		dec, ok := e.Annotations[dk]
		reasons := e.Annotations[rk]
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%d\t%s\t%s\n", e.Username(), verb, e.ObjectRef.Namespace+"/"+e.ObjectRef.Name, code, orDash(dec), orDash(reasons))
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s %s: no %s annotation", e.Verb, e.ObjectRef.Name, dk))
		case (code == 403) != (dec == "deny"):
			problems = append(problems, fmt.Sprintf("%s %s: response %d but decision %q", e.Verb, e.ObjectRef.Name, code, dec))
		}
	}
	_ = tw.Flush()
	if len(planEvents) != want {
		problems = append(problems, fmt.Sprintf("%d Plan events in the audit log, %d requests sent", len(planEvents), want))
	}
	if len(problems) > 0 {
		for _, pr := range problems {
			p.bad("UNEXPECTED: " + pr)
		}
		d.failures = append(d.failures, fmt.Sprintf("step %d (audit log): %s", d.step, strings.Join(problems, "; ")))
		return
	}
	p.ok(fmt.Sprintf("as expected: %d Plan requests, each with its decision in the audit log", want))
}

func (d *demo) summary() {
	p := d.out
	p.section("Summary")
	p.blank()
	if len(d.failures) == 0 {
		p.ok(fmt.Sprintf("all %d steps behaved as their captions say", d.step))
		return
	}
	p.bad(fmt.Sprintf("%d of %d steps did not behave as their captions say:", len(d.failures), d.step))
	for _, f := range d.failures {
		p.line("  - " + f)
	}
}

func (d *demo) stayUp() {
	p := d.out
	root := mustRoot()
	p.section("The cluster is still running")
	p.blank()
	p.line("From the repository root, in another terminal:")
	p.blank()
	p.line("  export KUBECONFIG=" + d.env.CP.Kubeconfig())
	p.line("  kubectl get plans -n " + sucNamespace)
	if d.suc != nil {
		p.line("  kubectl get jobs -n " + sucNamespace + " -L " + upgradev1.LabelNode + "   # SUC keeps running: " + d.suc.LogPath)
	}
	p.line("  kubectl get nodes -L " + labelProduct + "," + gate.LabelZone + "," + gate.LabelExpectedWorkloadMode)
	p.line("  kubectl get configmaps -n " + d.env.Config.Namespace + " -l " + qualification.ConfigMapLabel + "=true")
	p.line("  kubectl apply --as=alice --as-group=platform-admins -f " + filepath.Join(d.manifests, "gpu-v100-pool.yaml"))
	p.line("  kubectl label node gpu-v100-01 " + gate.LabelExpectedWorkloadMode + "=vm-passthrough")
	// The example manifests another part of the repository ships, when present.
	for _, dir := range []string{filepath.Join("records", "configmaps"), "plans"} {
		abs := filepath.Join(root, "deploy", "examples", dir)
		if files, _ := filepath.Glob(filepath.Join(abs, "*.yaml")); len(files) > 0 {
			p.line("  kubectl apply --as=alice --as-group=platform-admins -f " + relToCwd(abs) + string(filepath.Separator))
		}
	}
	p.line("  tail -f " + d.env.CP.AuditLogPath())
	p.blank()
	p.line("Press Ctrl-C to stop.")
	<-d.ctx.Done()
	p.blank()
	p.line("Stopping the webhook, kube-apiserver and etcd.")
}

// ---------------------------------------------------------------------------
// Steps

type expectation struct {
	allowed bool
	webhook string
	codes   []gate.Code
}

func allowed() expectation { return expectation{allowed: true} }

func denied(webhook string, codes ...gate.Code) expectation {
	return expectation{webhook: webhook, codes: codes}
}

type stepSpec struct {
	title, why string
	// file is the Plan manifest the step applies, summarised under the title.
	file   string
	note   string
	expect expectation
	// okNote completes the "as expected" line.
	okNote string
	do     func() result
	// after runs extra checks and output; it may add problems.
	after func(*result)
}

// result is one command's outcome.
type result struct {
	err      error
	codes    []string
	problems []string
}

func (d *demo) runStep(s stepSpec) {
	if d.ctx.Err() != nil {
		return
	}
	d.step++
	p := d.out
	p.stepTitle(d.step, s.title)
	p.why(s.why)
	if s.file != "" {
		if sum, err := d.planSummary(s.file); err == nil {
			p.dim("  " + s.file + ": " + sum)
		}
	}
	if s.note != "" {
		p.dim("  " + s.note)
	}
	r := s.do()
	if s.after != nil {
		s.after(&r)
	}
	if d.ctx.Err() != nil {
		return
	}
	problems := append(s.expect.check(r), r.problems...)
	if len(problems) == 0 {
		msg := "as expected: allowed"
		if !s.expect.allowed {
			msg = "as expected: denied with " + strings.Join(r.codes, ", ")
		}
		if s.okNote != "" {
			msg += "; " + s.okNote
		}
		p.ok(msg)
		return
	}
	for _, pr := range problems {
		p.bad("UNEXPECTED: " + pr)
	}
	d.failures = append(d.failures, fmt.Sprintf("step %d (%s): %s", d.step, s.title, strings.Join(problems, "; ")))
}

func (e expectation) check(r result) []string {
	if e.allowed {
		if r.err != nil {
			return []string{"expected the request to be allowed, got: " + firstLine(r.err.Error())}
		}
		return nil
	}
	if r.err == nil {
		return []string{fmt.Sprintf("expected a denial by %s with %v; the request was allowed", e.webhook, e.codes)}
	}
	var problems []string
	if !strings.Contains(r.err.Error(), fmt.Sprintf("admission webhook %q denied the request", e.webhook)) {
		problems = append(problems, fmt.Sprintf("expected a denial by %s, got: %s", e.webhook, firstLine(r.err.Error())))
	}
	for _, c := range e.codes {
		if !slices.Contains(r.codes, string(c)) {
			problems = append(problems, fmt.Sprintf("expected reason %s among %v", c, r.codes))
		}
	}
	return problems
}

func (d *demo) fail(what, msg string) {
	d.out.bad("UNEXPECTED: " + what + ": " + msg)
	d.failures = append(d.failures, what+": "+msg)
}

// ---------------------------------------------------------------------------
// Commands, answered as kubectl answers

func (d *demo) client(who person) client.Client {
	if c, ok := d.clients[who.name]; ok {
		return c
	}
	cfg := d.env.CP.ConfigFor(who.name, who.groups...)
	cfg.WarningHandler = d.warnings
	c, err := client.New(cfg, client.Options{Scheme: d.env.Scheme})
	if err != nil {
		panic(err) // only fails on a malformed config, which ConfigFor never returns
	}
	d.clients[who.name] = c
	return c
}

// apply sends a manifest from the manifests directory as `kubectl apply -f`
// sends a new object (a create), or with --dry-run=server.
func (d *demo) apply(who person, file string, dryRun bool) result {
	cmd := "kubectl apply -f " + file
	if dryRun {
		cmd = "kubectl apply --dry-run=server -f " + file
	}
	d.out.cmd(who.prompt, cmd)
	obj, err := readManifest(filepath.Join(d.manifests, file))
	if err != nil {
		d.out.output("error: " + err.Error())
		return result{err: err}
	}
	// kubectl apply records what it applied, so a later apply of the file
	// from a terminal patches the object as usual.
	applied, err := obj.MarshalJSON()
	if err != nil {
		d.out.output("error: " + err.Error())
		return result{err: err}
	}
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[corev1.LastAppliedConfigAnnotation] = string(applied) + "\n"
	obj.SetAnnotations(ann)
	opts := []client.CreateOption{}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if obj.GetKind() == "Plan" {
		d.planRequests++
	}
	d.warnings.Take()
	err = d.client(who).Create(d.ctx, obj, opts...)
	d.printWarnings()
	if err != nil {
		d.out.output(kubectlError(err, "creating", file))
		return result{err: err, codes: codesOf(err)}
	}
	msg := resourceName(obj) + " created"
	if dryRun {
		msg += " (server dry run)"
	}
	d.out.output(msg)
	return result{}
}

// approvalSteps: the record is approved by a second person, attested by
// the API server: the record webhook refuses the author's approval and an
// approval written in someone else's name; until the approval, the record
// qualifies nothing.
func (d *demo) approvalSteps(rec *corev1.ConfigMap) {
	sha := qualification.DataSHA256(rec.Data[qualification.ConfigMapKey])
	approve := func(who person, by string) result {
		return d.annotate(who, rec.Name, qualification.AnnotationApprovedBy, by, qualification.AnnotationApprovedSHA256, sha)
	}
	d.runStep(stepSpec{
		title:  "alice approves the record she wrote",
		why:    "the approval names a user and the SHA-256 of exactly the data approved; the record webhook accepts it only from that user, and never from the author.",
		expect: denied(webhook.WebhookRecords, gate.CodeAttestationForged),
		do:     func() result { return approve(alice, alice.name) },
	})
	d.runStep(stepSpec{
		title:  "alice annotates her record as approved by bob",
		why:    "an approval in someone else's name: the webhook compares the annotation with the username the API server authenticated, exactly (alice@example.com, Alice or a Cyrillic а would fail the same way).",
		expect: denied(webhook.WebhookRecords, gate.CodeAttestationForged),
		do:     func() result { return approve(alice, bob.name) },
	})
	d.waitCaches()
	canary := d.plan("gpu-v100-canary", hostnames("gpu-v100-01"), nil)
	d.runStep(stepSpec{
		title:  "alice dry-runs the canary Plan before anyone approved the record",
		why:    "a record qualifies a Plan only with an attested approval; the denial gives the command that approves it.",
		file:   canary,
		expect: denied(webhook.WebhookPlans, gate.CodeRecordNotApproved),
		do:     func() result { return d.apply(alice, canary, true) },
	})
	d.runStep(stepSpec{
		title:  "bob, the record's approvedBy, approves exactly this data",
		why:    "a second person's approval, attested by the API server; any later change of the data withdraws it.",
		expect: allowed(),
		do:     func() result { return approve(bob, bob.name) },
	})
}

// annotate sets annotations of a record ConfigMap as `kubectl annotate
// --overwrite` does (a merge patch).
func (d *demo) annotate(who person, name string, kv ...string) result {
	ann := map[string]string{}
	var args []string
	for i := 0; i+1 < len(kv); i += 2 {
		ann[kv[i]] = kv[i+1]
		args = append(args, kv[i]+"="+kv[i+1])
	}
	d.out.cmd(who.prompt, fmt.Sprintf("kubectl annotate configmap -n %s %s %s --overwrite", d.env.Config.Namespace, name, strings.Join(args, " ")))
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return result{err: err}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: d.env.Config.Namespace, Name: name}}
	d.warnings.Take()
	err = d.client(who).Patch(d.ctx, cm, client.RawPatch(types.MergePatchType, patch))
	d.printWarnings()
	if err != nil {
		d.out.output(kubectlError(err, "", ""))
		return result{err: err, codes: codesOf(err)}
	}
	d.out.output("configmap/" + name + " annotated")
	return result{}
}

// waitCaches gives the webhook's informers time to see the objects just
// written (they take milliseconds; this is generous for a small shared
// machine).
func (d *demo) waitCaches() {
	select {
	case <-time.After(2 * time.Second):
	case <-d.ctx.Done():
	}
}

// applyEdit edits a Plan manifest of the manifests directory, as a person
// edits the file, and sends it as `kubectl apply -f` sends a change to a
// stored object (an update of that object).
func (d *demo) applyEdit(who person, file string, edit func(*upgradev1.Plan)) result {
	d.out.cmd(who.prompt, "kubectl apply -f "+file)
	fail := func(err error) result {
		d.out.output(kubectlError(err, "applying", file))
		return result{err: err, codes: codesOf(err)}
	}
	data, err := os.ReadFile(filepath.Join(d.manifests, file))
	if err != nil {
		return fail(err)
	}
	var want upgradev1.Plan
	if err := yaml.Unmarshal(data, &want); err != nil {
		return fail(err)
	}
	edit(&want)
	if _, err := d.writeManifest(file, &want); err != nil {
		return fail(err)
	}
	var cur upgradev1.Plan
	if err := d.client(who).Get(d.ctx, client.ObjectKeyFromObject(&want), &cur); err != nil {
		return fail(err)
	}
	cur.Spec = want.Spec
	d.planRequests++
	d.warnings.Take()
	err = d.client(who).Update(d.ctx, &cur)
	d.printWarnings()
	if err != nil {
		return fail(err)
	}
	d.out.output("plan.upgrade.cattle.io/" + cur.Name + " configured")
	return result{}
}

// label patches one label as `kubectl label node` does.
func (d *demo) label(who person, node, key, value string) result {
	d.out.cmd(who.prompt, fmt.Sprintf("kubectl label node %s %s=%s", node, key, value))
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	return d.patchNode(who, node, patch, "labeled")
}

// cordon marks the node unschedulable as `kubectl cordon` does.
func (d *demo) cordon(who person, node string) result {
	d.out.cmd(who.prompt, "kubectl cordon "+node)
	return d.patchNode(who, node, `{"spec":{"unschedulable":true}}`, "cordoned")
}

func (d *demo) patchNode(who person, node, patch, done string) result {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	d.warnings.Take()
	err := d.client(who).Patch(d.ctx, n, client.RawPatch(types.StrategicMergePatchType, []byte(patch)))
	d.printWarnings()
	if err != nil {
		d.out.output(kubectlError(err, "", ""))
		return result{err: err, codes: codesOf(err)}
	}
	d.out.output("node/" + node + " " + done)
	return result{}
}

func (d *demo) printWarnings() {
	for _, w := range d.warnings.Take() {
		d.out.warning("Warning: " + w)
	}
}

// kubectlError renders an API error as kubectl prints it: the status reason,
// and for a file the "error when <verb> <file>" prefix kubectl adds.
func kubectlError(err error, verb, source string) string {
	msg := err.Error()
	if source != "" {
		msg = fmt.Sprintf("error when %s %q: %s", verb, source, msg)
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		if reason := st.Status().Reason; reason != "" {
			return fmt.Sprintf("Error from server (%s): %s", reason, msg)
		}
		return "Error from server: " + msg
	}
	return "error: " + msg
}

// codeRE finds the reason codes in a denial: one line per blocker,
// "[Code] ..." (node reviews prefix Plan blockers with "Plan ns/name: ").
var codeRE = regexp.MustCompile(`(?m)^(?:Plan \S+: )?\[([A-Za-z]+)\] `)

func codesOf(err error) []string {
	var codes []string
	for _, m := range codeRE.FindAllStringSubmatch(err.Error(), -1) {
		if !slices.Contains(codes, m[1]) {
			codes = append(codes, m[1])
		}
	}
	return codes
}

func resourceName(obj *unstructured.Unstructured) string {
	gvk := obj.GroupVersionKind()
	kind := strings.ToLower(gvk.Kind)
	if gvk.Group != "" {
		kind += "." + gvk.Group
	}
	return kind + "/" + obj.GetName()
}

// ---------------------------------------------------------------------------
// Manifests

// plan writes a GPU Plan manifest: pinned to the record's RKE2 version,
// serial, cordoned, annotated with the record and with alice, who applies
// the demo's Plans, as its requester (requireRequester); mod varies it.
func (d *demo) plan(name string, sel *metav1.LabelSelector, mod func(*upgradev1.Plan)) string {
	pl := &upgradev1.Plan{
		TypeMeta: metav1.TypeMeta{APIVersion: upgradev1.SchemeGroupVersion.String(), Kind: "Plan"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: sucNamespace,
			Annotations: map[string]string{gate.AnnotationQualification: recordName, gate.AnnotationRequestedBy: "alice"}},
		Spec: upgradev1.PlanSpec{
			Concurrency: 1, Cordon: true, NodeSelector: sel, ServiceAccountName: "system-upgrade",
			Upgrade: &upgradev1.ContainerSpec{Image: "rancher/rke2-upgrade"}, Version: testenv.Target.RKE2,
			// Open all week, so SUC starts it whenever the demo runs.
			Window: &upgradev1.TimeWindowSpec{Days: upgradev1.AllDays(), StartTime: "00:00", EndTime: "23:59:59", TimeZone: "UTC"},
		},
	}
	if mod != nil {
		mod(pl)
	}
	file := name + ".yaml"
	if _, err := d.writeManifest(file, pl); err != nil {
		d.fail("write manifest", err.Error())
	}
	return file
}

func hostnames(names ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: upgradev1.LabelHostname, Operator: metav1.LabelSelectorOpIn, Values: names}}}
}

// writeManifest writes obj as YAML without the empty fields a Go struct
// carries (status, creationTimestamp), as a person would write it.
func (d *demo) writeManifest(file string, obj any) (string, error) {
	data, err := yaml.Marshal(obj)
	if err != nil {
		return "", err
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return "", err
	}
	delete(m, "status")
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	if data, err = yaml.Marshal(m); err != nil {
		return "", err
	}
	return file, os.WriteFile(filepath.Join(d.manifests, file), data, 0o644)
}

func readManifest(path string) (*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return obj, nil
}

// planSummary is one line of what a Plan manifest asks for.
func (d *demo) planSummary(file string) (string, error) {
	data, err := os.ReadFile(filepath.Join(d.manifests, file))
	if err != nil {
		return "", err
	}
	var pl upgradev1.Plan
	if err := yaml.Unmarshal(data, &pl); err != nil {
		return "", err
	}
	sel := "no nodeSelector"
	if pl.Spec.NodeSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(pl.Spec.NodeSelector)
		if err != nil {
			return "", err
		}
		sel = "selects " + s.String()
		if s.Empty() {
			sel = "selects every node"
		}
	}
	parts := []string{sel}
	if pl.Spec.Version != "" {
		parts = append(parts, "version "+pl.Spec.Version)
	} else {
		parts = append(parts, "channel "+pl.Spec.Channel)
	}
	parts = append(parts, fmt.Sprintf("concurrency %d", pl.Spec.Concurrency))
	switch {
	case pl.Spec.Drain != nil:
		parts = append(parts, "drain")
	case pl.Spec.Cordon:
		parts = append(parts, "cordon")
	default:
		parts = append(parts, "no cordon")
	}
	if rec := pl.Annotations[gate.AnnotationQualification]; rec != "" {
		parts = append(parts, "record "+rec)
	} else {
		parts = append(parts, "no record")
	}
	return strings.Join(parts, "; "), nil
}

// ---------------------------------------------------------------------------
// Evidence: audit log and metrics

func isResource(e controlplane.AuditEvent, resource, name string) bool {
	return e.Stage == "ResponseComplete" && e.ObjectRef != nil && e.ObjectRef.Resource == resource &&
		e.ObjectRef.Subresource == "" && e.ObjectRef.Name == name && e.ResponseStatus != nil
}

func (d *demo) waitAudit(match func(controlplane.AuditEvent) bool) (controlplane.AuditEvent, error) {
	ctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
	defer cancel()
	return d.env.CP.WaitAuditEvent(ctx, match)
}

// nodeReviews reads how many Node reviews the webhook has decided from its
// /metrics (the latency histogram's count).
func (d *demo) nodeReviews() (float64, error) {
	resp, err := http.Get("http://" + d.env.Metrics + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	prefix := `gpu_upgrade_gate_decision_duration_seconds_count{resource="nodes"} `
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, sc.Err() // no series yet: no Node review so far
}

// ---------------------------------------------------------------------------
// Output

type printer struct {
	w     io.Writer
	color bool
}

func newPrinter(f *os.File) *printer {
	color := false
	if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb" {
		color = true
	}
	return &printer{w: f, color: color}
}

func (p *printer) paint(code, s string) string {
	if !p.color {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func (p *printer) line(s string) { fmt.Fprintln(p.w, s) }
func (p *printer) blank()        { fmt.Fprintln(p.w) }
func (p *printer) dim(s string)  { p.line(p.paint("2", s)) }
func (p *printer) ok(s string)   { p.line(p.paint("32", "  ✓ "+s)) }
func (p *printer) bad(s string)  { p.line(p.paint("1;31", "  ✗ "+s)) }
func (p *printer) errorf(format string, a ...any) {
	fmt.Fprintln(os.Stderr, p.paint("1;31", "demo: "+fmt.Sprintf(format, a...)))
}

func (p *printer) title(s string) {
	p.line(p.paint("1", s))
	p.line(strings.Repeat("=", len(s)))
}

func (p *printer) section(s string) {
	p.blank()
	p.line(p.paint("1", "── "+s+" "+strings.Repeat("─", max(3, 76-len(s)))))
}

func (p *printer) stepTitle(n int, s string) {
	p.blank()
	p.line(p.paint("1", fmt.Sprintf("%2d. %s", n, s)))
}

// para prints prose wrapped at 100 columns.
func (p *printer) para(s string) {
	for _, l := range wrap(s, "", "", 100) {
		p.line(l)
	}
}

// why prints a step's caption, wrapped under its label.
func (p *printer) why(s string) {
	for _, l := range wrap(s, "    why: ", "         ", 100) {
		p.line(p.paint("36", l))
	}
}

// wrap breaks s into lines of at most width columns (a longer word gets a
// line of its own), the first starting with first, the rest with rest.
func wrap(s, first, rest string, width int) []string {
	var lines []string
	line := first
	empty := true
	for _, w := range strings.Fields(s) {
		if !empty && len([]rune(line))+1+len([]rune(w)) > width {
			lines = append(lines, line)
			line, empty = rest, true
		}
		if !empty {
			line += " "
		}
		line += w
		empty = false
	}
	if !empty {
		lines = append(lines, line)
	}
	return lines
}

func (p *printer) cmd(prompt, s string) {
	p.line("  " + p.paint("1;34", prompt) + " " + p.paint("1", s))
}

// output prints what kubectl would print, indented, line by line.
func (p *printer) output(s string) {
	for _, l := range strings.Split(s, "\n") {
		p.line("    " + l)
	}
}

func (p *printer) warning(s string) { p.line(p.paint("33", "    "+s)) }

func (p *printer) table() *tabwriter.Writer { return tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0) }

// lazyFile buffers log output until the work directory exists, then writes
// to a file there.
type lazyFile struct {
	mu  sync.Mutex
	buf []byte
	f   *os.File
}

func (l *lazyFile) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		return l.f.Write(b)
	}
	l.buf = append(l.buf, b...)
	return len(b), nil
}

func (l *lazyFile) open(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err = f.Write(l.buf)
	l.f, l.buf = f, nil
	return err
}

func (l *lazyFile) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
	l.buf = nil
}

// ---------------------------------------------------------------------------
// Small helpers

func mustRoot() string {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "."
	}
	return root
}

func relToCwd(path string) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	return path
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// requestedBy names user as the Plan's requester, as user writes it.
func requestedBy(user string) func(*upgradev1.Plan) {
	return func(pl *upgradev1.Plan) { pl.Annotations[gate.AnnotationRequestedBy] = user }
}
