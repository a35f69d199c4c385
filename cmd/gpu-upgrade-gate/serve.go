package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// runServe starts the admission webhook: TLS from --cert-dir (reloaded when
// the files change), one JSON log line per decision on stderr.
func runServe(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("serve")
	configPath := fs.String("config", "", "engine configuration file (YAML); empty: the defaults")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; empty: in-cluster or $KUBECONFIG")
	opts := webhook.Options{}
	fs.StringVar(&opts.CertDir, "cert-dir", "/tls", "directory holding tls.crt and tls.key")
	fs.StringVar(&opts.Host, "host", "", "address the webhook listens on (empty: all)")
	fs.IntVar(&opts.Port, "port", 9443, "webhook port")
	fs.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":8080", `metrics address ("0" disables)`)
	fs.StringVar(&opts.PprofAddr, "pprof-bind-address", "0", `net/http/pprof address, to profile the webhook ("0" disables)`)
	fs.StringVar(&opts.ProbeAddr, "health-probe-bind-address", ":8081", "/healthz and /readyz address")
	fs.DurationVar(&opts.VersionRefresh, "server-version-refresh", 2*time.Second, "how often the API server is probed (version; a failed probe makes reviews fail closed while the caches catch up)")
	budget := fs.String("review-memory-budget", "24Mi", "review body bytes in flight at once (a quantity); reviews beyond it wait up to 1s, then are denied, never allowed")
	fs.DurationVar(&opts.ReviewReadTimeout, "review-read-timeout", webhook.DefaultReviewReadTimeout, "how long one review body may take to arrive (the API server sends it at once); a body not read by then is denied (408), never allowed")
	fs.IntVar(&opts.PerSourceRequests, "max-requests-per-source", webhook.DefaultPerSourceRequests, "requests in flight from one source address; more are denied (429), never allowed")
	fs.StringVar(&opts.ClientCA, "client-ca", "", "PEM file of the CA that signs the API server's client certificate (--admission-control-config-file kubeconfig); set: requests without such a certificate are refused unread")
	fs.BoolVar(&opts.LeaderElection, "leader-elect", true, "elect one replica (a Lease in the gate's namespace) to keep the halt record; every replica serves the webhooks")
	fs.DurationVar(&opts.HaltInterval, "halt-interval", 10*time.Second, "how often the elected replica records new halts and removes cleared ones (docs/proof.md); 0 keeps no new halts")
	nudge := fs.Bool("plan-nudge", true, "when SUC's completion of a node lands, the elected replica annotates its Plan (gpu-upgrade-gate.cattle.io/nudge) so SUC starts the next node at once instead of at its backoff (docs/rollout.md)")
	fs.BoolVar(&opts.BenchNoop, "bench-noop", false, "also serve "+webhook.PathBenchNoop+", a webhook that allows every review unread: the cost of a webhook hop, for benchmarks only (nothing the chart renders calls it)")
	if help, err := parseFlags(fs, args, false, stdout); help || err != nil {
		if err != nil {
			return fail(stderr, "serve", err)
		}
		return exitAllowed
	}
	q, err := resource.ParseQuantity(*budget)
	if err != nil || q.Value() < webhook.MaxReviewBytes {
		return fail(stderr, "serve", usagef("--review-memory-budget %q: expected a quantity of at least %d bytes (one review at the body cap), e.g. 24Mi", *budget, webhook.MaxReviewBytes))
	}
	opts.ReviewBudget = q.Value()
	opts.NoPlanNudge = !*nudge
	cfg := gate.DefaultConfig()
	if *configPath != "" {
		data, err := readInput("--config", *configPath)
		if err != nil {
			return fail(stderr, "serve", err)
		}
		if cfg, err = gate.LoadConfig(data); err != nil {
			return fail(stderr, "serve", inputf("--config %s: %v", *configPath, err))
		}
	}
	ctrl.SetLogger(ctrlzap.New(ctrlzap.WriteTo(stderr)))
	ctrl.Log.WithName("serve").Info(setGCPercent(os.Getenv))
	if msg, err := setMemoryLimit(os.Getenv); err != nil {
		return fail(stderr, "serve", inputf("%v", err))
	} else if msg != "" {
		ctrl.Log.WithName("serve").Info(msg)
	}
	restCfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: *kubeconfig, Precedence: clientcmd.NewDefaultClientConfigLoadingRules().Precedence},
		&clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		fmt.Fprintf(stderr, "serve: kubeconfig: %v\n", err)
		return 2
	}
	mgr, _, err := webhook.NewManager(restCfg, cfg, opts)
	if err != nil {
		fmt.Fprintf(stderr, "serve: %v\n", err)
		return 1
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintf(stderr, "serve: %v\n", err)
		return 1
	}
	return 0
}
