// Package testenv runs the product the way a cluster does, on one machine: a
// real kube-apiserver and etcd (internal/controlplane), the webhook server
// with real TLS, and its ValidatingWebhookConfiguration. The e2e tests, the
// load tests and `make demo` share it.
package testenv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/controlplane"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// Env is a running control plane with the webhook in front of it.
type Env struct {
	CP      *controlplane.ControlPlane
	Config  *gate.Config
	Scheme  *runtime.Scheme
	Admin   client.Client
	CA      *CA
	CertDir string
	Port    int
	Probe   string // host:port of /healthz and /readyz
	Metrics string // host:port of /metrics

	webhookRestConfig *rest.Config
	stopWebhook       context.CancelFunc
	webhookDone       chan error
	now               func() time.Time
}

// Options for Start.
type Options struct {
	Config *gate.Config
	// Now is the webhook's clock (nil: time.Now).
	Now func() time.Time
	// WebhookConfig is the identity the webhook runs as (nil: admin).
	WebhookConfig *rest.Config
	// KeepWorkDir keeps the control plane's files after Stop.
	KeepWorkDir bool
}

// Start brings up the control plane and the webhook and registers it.
func Start(ctx context.Context, o Options) (_ *Env, err error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	cp, err := controlplane.Start(ctx, controlplane.Options{
		CRDPaths:    []string{filepath.Join(root, "testdata", "suc", "crd-plans.yaml")},
		KeepWorkDir: o.KeepWorkDir,
	})
	if err != nil {
		return nil, err
	}
	e := &Env{CP: cp, Config: o.Config, now: o.Now, webhookRestConfig: o.WebhookConfig, CertDir: filepath.Join(cp.WorkDir(), "webhook-tls")}
	defer func() {
		if err != nil {
			_ = e.Stop()
		}
	}()
	if e.Config == nil {
		e.Config = gate.DefaultConfig()
	}
	if e.webhookRestConfig == nil {
		e.webhookRestConfig = cp.RESTConfig()
	}
	e.Scheme = runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(e.Scheme)
	_ = upgradev1.AddToScheme(e.Scheme)
	if e.Admin, err = client.New(cp.RESTConfig(), client.Options{Scheme: e.Scheme}); err != nil {
		return nil, err
	}
	if e.CA, err = NewCA(); err != nil {
		return nil, err
	}
	if _, err = e.CA.WriteServing(e.CertDir); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	e.Port, e.Probe, e.Metrics = ports[0], "127.0.0.1:"+strconv.Itoa(ports[1]), "127.0.0.1:"+strconv.Itoa(ports[2])
	if err = e.StartWebhook(ctx); err != nil {
		return nil, err
	}
	if err = e.Admin.Create(ctx, e.WebhookConfiguration()); err != nil {
		return nil, fmt.Errorf("register webhook: %w", err)
	}
	return e, nil
}

// WebhookConfiguration is the product's configuration pointed at this
// machine's webhook by URL, with the test CA as the bundle.
func (e *Env) WebhookConfiguration() *admissionregistrationv1.ValidatingWebhookConfiguration {
	return webhook.Configuration(e.Config, webhook.ConfigurationOptions{
		Name: "gpu-upgrade-gate", TimeoutSeconds: 5, NodeFailurePolicy: admissionregistrationv1.Fail,
		ClientConfig: func(path string) admissionregistrationv1.WebhookClientConfig {
			url := fmt.Sprintf("https://127.0.0.1:%d%s", e.Port, path)
			return admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: e.CA.PEM}
		},
	})
}

// StartWebhook runs `serve`'s manager in this process and waits until it is
// ready (caches synced, TLS listener answering).
func (e *Env) StartWebhook(ctx context.Context) error {
	mgr, srv, err := webhook.NewManager(e.webhookRestConfig, e.Config, webhook.Options{
		Host: "127.0.0.1", Port: e.Port, CertDir: e.CertDir, MetricsAddr: e.Metrics, ProbeAddr: e.Probe, VersionRefresh: 5 * time.Second,
	})
	if err != nil {
		return err
	}
	srv.Now = e.now
	wctx, cancel := context.WithCancel(ctx)
	e.stopWebhook, e.webhookDone = cancel, make(chan error, 1)
	go func() { e.webhookDone <- mgr.Start(wctx) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-e.webhookDone:
			return fmt.Errorf("webhook stopped while starting: %v", err)
		default:
		}
		if resp, err := http.Get("http://" + e.Probe + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	cancel()
	return errors.New("webhook not ready within 60s")
}

// StopWebhook stops the webhook server and waits for it to finish.
func (e *Env) StopWebhook() error {
	if e.stopWebhook == nil {
		return nil
	}
	e.stopWebhook()
	e.stopWebhook = nil
	select {
	case err := <-e.webhookDone:
		return err
	case <-time.After(60 * time.Second):
		return errors.New("webhook did not stop within 60s")
	}
}

// Stop stops the webhook and the control plane.
func (e *Env) Stop() error {
	return errors.Join(e.StopWebhook(), e.CP.Stop())
}

// ServingCert returns the certificate the webhook presents now.
func (e *Env) ServingCert() ([]byte, error) {
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", e.Port), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reading the presented cert only
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Raw, nil
}

// RepoRoot finds the repository root (the directory holding go.mod).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "gate")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root (go.mod with gate/) not found above the working directory")
		}
		dir = parent
	}
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
