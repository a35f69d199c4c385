package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// runServe starts the admission webhook: TLS from --cert-dir (reloaded when
// the files change), one JSON log line per decision on stderr.
func runServe(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "engine configuration file (YAML); empty: the defaults")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; empty: in-cluster or $KUBECONFIG")
	opts := webhook.Options{}
	fs.StringVar(&opts.CertDir, "cert-dir", "/tls", "directory holding tls.crt and tls.key")
	fs.StringVar(&opts.Host, "host", "", "address the webhook listens on (empty: all)")
	fs.IntVar(&opts.Port, "port", 9443, "webhook port")
	fs.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":8080", `metrics address ("0" disables)`)
	fs.StringVar(&opts.ProbeAddr, "health-probe-bind-address", ":8081", "/healthz and /readyz address")
	fs.DurationVar(&opts.VersionRefresh, "server-version-refresh", 2*time.Second, "how often the API server is probed (version; a failed probe makes reviews fail closed while the caches catch up)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg := gate.DefaultConfig()
	if *configPath != "" {
		data, err := os.ReadFile(*configPath)
		if err == nil {
			cfg, err = gate.LoadConfig(data)
		}
		if err != nil {
			fmt.Fprintf(stderr, "serve: --config %s: %v\n", *configPath, err)
			return 2
		}
	}
	ctrl.SetLogger(ctrlzap.New(ctrlzap.WriteTo(stderr)))
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
