// Command loadgen drives a running `gpu-upgrade-gate serve` with recorded
// AdmissionReviews of a generated fleet and prints throughput, latency
// percentiles, wrong decisions and errors, and the server's peak RSS.
//
//	loadgen fleet --kubeconfig KUBECONFIG [--seed 1 --nodes 5000]
//	    create the fleet in a cluster (a local control plane: make demo)
//	loadgen run --url https://127.0.0.1:9443 --ca ca.crt [--rate 200 | --workers 8]
//	    --duration 30s [--kinds plan,node,record] [--scenarios relabel,...] [--pid PID]
//
// The expected decisions are the engine's for the same fleet (same --seed,
// --nodes, --gpu-nodes and day), so the cluster must hold that fleet and
// nothing that changes its decisions. Only loopback targets are accepted.
// Exit status: 0 all answers correct, 1 wrong decisions or errors, 2 usage.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/test/loadgen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

type fleetFlags struct {
	seed            uint64
	nodes, gpuNodes int
	day             string
}

func (f *fleetFlags) add(fs *pflag.FlagSet) {
	fs.Uint64Var(&f.seed, "seed", 1, "fleet seed")
	fs.IntVar(&f.nodes, "nodes", 5000, "nodes in the fleet")
	fs.IntVar(&f.gpuNodes, "gpu-nodes", 0, "GPU nodes (default: a fifth of --nodes)")
	fs.StringVar(&f.day, "day", "", "the fleet's day, YYYY-MM-DD (default: today, UTC); records are dated two days before")
}

func (f *fleetFlags) generate() (*fleetgen.Fleet, error) {
	o := fleetgen.Options{Seed: f.seed, Nodes: f.nodes, GPUNodes: f.gpuNodes, Kubelet: true}
	if f.day != "" {
		d, err := time.Parse("2006-01-02", f.day)
		if err != nil {
			return nil, fmt.Errorf("--day: %w", err)
		}
		o.Now = d
	}
	return fleetgen.Generate(o), nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: loadgen fleet|run [flags] (see --help of each)")
		return 2
	}
	switch args[0] {
	case "fleet":
		return runFleet(ctx, args[1:], stdout, stderr)
	case "run":
		return runLoad(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "loadgen: unknown command %q (fleet, run)\n", args[0])
	return 2
}

func runFleet(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("fleet", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var ff fleetFlags
	ff.add(fs)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster (default $KUBECONFIG)")
	workers := fs.Int("workers", 16, "parallel creates")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	f, err := ff.generate()
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 2
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: *kubeconfig, Precedence: clientcmd.NewDefaultClientConfigLoadingRules().Precedence},
		&clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		fmt.Fprintln(stderr, "loadgen: kubeconfig:", err)
		return 2
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = upgradev1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 1
	}
	start := time.Now()
	if err := f.Apply(ctx, c, *workers); err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 1
	}
	fmt.Fprintf(stdout, "created %d nodes, %d Plans, %d records, %d Pods in %s\n", len(f.Nodes), len(f.Plans), len(f.RecordConfigMaps), len(f.Pods), time.Since(start).Round(time.Millisecond))
	return 0
}

func runLoad(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var ff fleetFlags
	ff.add(fs)
	url := fs.String("url", "https://127.0.0.1:9443", "the webhook server (loopback only)")
	caFile := fs.String("ca", "", "CA bundle (PEM) that signs the serving certificate")
	rate := fs.Float64("rate", 0, "offered reviews per second (open loop); 0: flat out")
	workers := fs.Int("workers", 0, "senders flat out, or most requests in flight at a rate (default 8 flat out, 64 at a rate)")
	duration := fs.Duration("duration", 10*time.Second, "how long to send (at most 10m)")
	kinds := fs.StringSlice("kinds", []string{"plan", "node", "record"}, "review kinds: plan, node, record")
	scenarios := fs.StringSlice("scenarios", nil, "only these scenarios (e.g. relabel,join-wave,create,update)")
	pid := fs.Int("pid", 0, "the server's process ID, for its VmRSS and VmHWM")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	warmup := fs.Bool("warmup", true, "send each review once first and stop if one is answered wrongly")
	cpuProfile := fs.String("cpuprofile", "", "write the load generator's own CPU profile of the run to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *caFile == "" {
		fmt.Fprintln(stderr, "loadgen: --ca is required")
		return 2
	}
	ca, err := os.ReadFile(*caFile)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 2
	}
	f, err := ff.generate()
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 2
	}
	reviews := fleetgen.Select(f.Reviews(time.Now()), *kinds, *scenarios...)
	if len(reviews) == 0 {
		fmt.Fprintf(stderr, "loadgen: no reviews of kinds %v scenarios %v\n", *kinds, *scenarios)
		return 2
	}
	if *workers == 0 {
		*workers = 8
		if *rate > 0 {
			*workers = 64
		}
	}
	if *cpuProfile != "" {
		pf, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(pf)
		}
		if err != nil {
			fmt.Fprintln(stderr, "loadgen: --cpuprofile:", err)
			return 2
		}
		defer func() { pprof.StopCPUProfile(); _ = pf.Close() }()
	}
	s, err := loadgen.Run(ctx, loadgen.Options{URL: *url, CA: ca, Reviews: reviews, Rate: *rate, Workers: *workers,
		Duration: *duration, PID: *pid, Warmup: *warmup})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s)
	} else {
		fmt.Fprintf(stdout, "%d reviews (%s)\n%s", len(reviews), strings.Join(*kinds, ","), s)
	}
	if s.Errors() > 0 {
		return 1
	}
	return 0
}
