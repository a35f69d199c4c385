// Package testenv runs the product the way a cluster does, on one machine: a
// real kube-apiserver and etcd (internal/controlplane), the webhook server
// with real TLS, and the Helm chart's own ValidatingWebhookConfiguration,
// ServiceAccount and RBAC (rendered by `helm template`, release namespace =
// the gate's namespace). The webhook runs as the chart's ServiceAccount, so
// every e2e test also proves the chart's RBAC is enough. The e2e tests, the
// load tests and `make demo` share it.
package testenv

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/controlplane"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/test/chart"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// Release is the Helm release name the chart is rendered with; the
// ValidatingWebhookConfiguration, ServiceAccount and ClusterRole carry it.
const Release = "gpu-upgrade-gate"

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
	// ServiceAccount is the chart's ServiceAccount, which the webhook runs
	// as unless Options.WebhookConfig says otherwise.
	ServiceAccount types.NamespacedName
	// Server is the running webhook (its Facts are the view its reviews
	// read, for tests that compare another reader with it).
	Server *webhook.Server

	webhookRestConfig *rest.Config
	vwc               *admissionregistrationv1.ValidatingWebhookConfiguration
	stopWebhook       context.CancelFunc
	webhookDone       chan error
	now               func() time.Time
	haltInterval      time.Duration
	// NoPlanNudge starts the webhook with its Plan nudge off (the pace
	// benchmark's "before"); StartWebhook reads it.
	NoPlanNudge bool
}

// Options for Start.
type Options struct {
	Config *gate.Config
	// Now is the webhook's clock (nil: time.Now).
	Now func() time.Time
	// WebhookConfig is the identity the webhook runs as (nil: the chart's
	// ServiceAccount, through a TokenRequest).
	WebhookConfig *rest.Config
	// KeepWorkDir keeps the control plane's files after Stop.
	KeepWorkDir bool
	// HaltInterval runs the webhook's halt loop (0: none, so halts are kept
	// only by a test that starts one: the shared fleet holds failure
	// signals that would halt every later test's rollout).
	HaltInterval time.Duration
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
	e := &Env{CP: cp, Config: o.Config, now: o.Now, webhookRestConfig: o.WebhookConfig, CertDir: filepath.Join(cp.WorkDir(), "webhook-tls"), haltInterval: o.HaltInterval}
	defer func() {
		if err != nil {
			_ = e.Stop()
		}
	}()
	if e.Config == nil {
		e.Config = gate.DefaultConfig()
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
	if err = e.installChart(ctx); err != nil {
		return nil, err
	}
	if e.webhookRestConfig == nil {
		if e.webhookRestConfig, err = e.serviceAccountConfig(ctx); err != nil {
			return nil, err
		}
	}
	if err = e.StartWebhook(ctx); err != nil {
		return nil, err
	}
	if err = e.RegisterWebhook(ctx); err != nil {
		return nil, fmt.Errorf("register webhook: %w", err)
	}
	return e, nil
}

// RegisterWebhook creates the webhook configuration and returns once the API
// server calls the webhook: its admission plugin learns of the object through
// an informer, a moment after the create returns.
func (e *Env) RegisterWebhook(ctx context.Context) error {
	return e.Register(ctx, e.WebhookConfiguration())
}

// UnregisterWebhook deletes the webhook configuration and returns once the
// API server no longer calls the webhook.
func (e *Env) UnregisterWebhook(ctx context.Context) error {
	return e.Unregister(ctx, e.WebhookConfiguration())
}

// Register creates vwc (e.g. a ServeProcess's) and returns once the API
// server calls its record webhook.
func (e *Env) Register(ctx context.Context, vwc *admissionregistrationv1.ValidatingWebhookConfiguration) error {
	if err := e.Admin.Create(ctx, vwc); err != nil {
		return err
	}
	return e.waitWebhookCalled(ctx, true)
}

// Unregister deletes vwc and returns once the API server no longer calls it.
func (e *Env) Unregister(ctx context.Context, vwc *admissionregistrationv1.ValidatingWebhookConfiguration) error {
	if err := e.Admin.Delete(ctx, vwc); err != nil {
		return err
	}
	return e.waitWebhookCalled(ctx, false)
}

// waitWebhookCalled polls with a server-side dry run (nothing is stored) of
// a record ConfigMap the record webhook refuses, until the API server does or
// does not call the webhook, as wanted.
func (e *Env) waitWebhookCalled(ctx context.Context, want bool) error {
	denied := fmt.Sprintf("admission webhook %q denied", webhook.WebhookRecords)
	deadline := time.Now().Add(30 * time.Second)
	for {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.Config.Namespace, GenerateName: "testenv-probe-", Labels: map[string]string{"gpu-upgrade-gate.io/qualification": "true"}},
			Data:       map[string]string{"qualification.yaml": "not a record"},
		}
		err := e.Admin.Create(ctx, cm, client.DryRunAll)
		called := err != nil && strings.Contains(err.Error(), denied)
		if err != nil && !called {
			return fmt.Errorf("probe the webhook registration: %w", err)
		}
		if called == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server still %s the webhook after 30s", map[bool]string{true: "does not call", false: "calls"}[want])
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WebhookConfiguration is the chart's ValidatingWebhookConfiguration with
// one change: each webhook's clientConfig points at this machine's webhook by
// URL (https://127.0.0.1:<port><the chart's path>) with the test CA as the
// bundle, instead of the Service and cert-manager's injection. Each call
// returns a fresh copy, ready to Create.
func (e *Env) WebhookConfiguration() *admissionregistrationv1.ValidatingWebhookConfiguration {
	return e.vwc.DeepCopy()
}

// WebhookRESTConfig is the identity the webhook runs as.
func (e *Env) WebhookRESTConfig() *rest.Config { return rest.CopyConfig(e.webhookRestConfig) }

// chartValues are the values that make the chart's engine configuration
// e.Config: every key is set, so no chart default stands in for a value the
// test chose (an empty breakGlassGroup or no exemptions included).
func (e *Env) chartValues() (map[string]any, error) {
	data, err := json.Marshal(e.Config)
	if err != nil {
		return nil, err
	}
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, err
	}
	delete(cfg, "namespace") // the release namespace
	if _, ok := cfg["exemptions"]; !ok {
		cfg["exemptions"] = []any{}
	}
	if _, ok := cfg["breakGlassGroup"]; !ok {
		cfg["breakGlassGroup"] = ""
	}
	return map[string]any{"config": cfg}, nil
}

// installChart renders the chart for e.Config, checks that its configuration
// ConfigMap loads back to e.Config, creates the namespaces it needs, its
// ServiceAccount, ClusterRole, Roles and bindings, and keeps its
// ValidatingWebhookConfiguration (rewritten to this machine's URL) for
// WebhookConfiguration. Nothing else of the chart runs here: the webhook is
// this process, and there is no cert-manager or NFD.
func (e *Env) installChart(ctx context.Context) error {
	objs, err := e.renderChart()
	if err != nil {
		return err
	}
	var install []client.Object
	namespaces := []string{e.Config.Namespace}
	for _, o := range objs {
		if o.GetAnnotations()["helm.sh/hook"] != "" {
			continue
		}
		switch obj := o.Object.(type) {
		case *corev1.ServiceAccount:
			e.ServiceAccount = types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}
			install = append(install, obj)
		case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *rbacv1.Role, *rbacv1.RoleBinding:
			install = append(install, obj)
		case *corev1.ConfigMap:
			if obj.Name == e.Config.Halts.ConfigMap {
				install = append(install, obj) // the halt record, as helm creates it
				break
			}
			if err := e.checkChartConfig(obj); err != nil {
				return err
			}
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			e.vwc = obj
		default:
			continue
		}
		if ns := o.GetNamespace(); ns != "" && !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	if e.vwc == nil || e.ServiceAccount.Name == "" {
		return errors.New("the chart rendered no ValidatingWebhookConfiguration or ServiceAccount")
	}
	delete(e.vwc.Annotations, "cert-manager.io/inject-ca-from")
	for i := range e.vwc.Webhooks {
		w := &e.vwc.Webhooks[i]
		if w.ClientConfig.Service == nil || w.ClientConfig.Service.Path == nil {
			return fmt.Errorf("webhook %s: the chart's clientConfig names no Service path", w.Name)
		}
		url := fmt.Sprintf("https://127.0.0.1:%d%s", e.Port, *w.ClientConfig.Service.Path)
		w.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: e.CA.PEM}
	}
	for _, ns := range namespaces {
		if err := client.IgnoreAlreadyExists(e.Admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})); err != nil {
			return err
		}
	}
	for _, o := range install {
		if err := e.Admin.Create(ctx, o); err != nil {
			return fmt.Errorf("create the chart's %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// renderChart renders the chart for e.Config as it is now.
func (e *Env) renderChart() ([]chart.Object, error) {
	values, err := e.chartValues()
	if err != nil {
		return nil, err
	}
	objs, err := chart.Render(chart.Options{Release: Release, Namespace: e.Config.Namespace, Values: values})
	if err != nil {
		return nil, fmt.Errorf("render the chart: %w", err)
	}
	return objs, nil
}

// ApplyChartRBAC renders the chart for e.Config as it is now and creates
// the Roles, RoleBindings, ClusterRoles and bindings that are not there yet
// (and their namespaces): a test that changes the configuration
// (proof.checks) gives the webhook the reads the chart would grant for it.
// Nothing already there is changed or removed, so later tests keep theirs.
func (e *Env) ApplyChartRBAC(ctx context.Context) error {
	objs, err := e.renderChart()
	if err != nil {
		return err
	}
	for _, o := range objs {
		switch obj := o.Object.(type) {
		case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *rbacv1.Role, *rbacv1.RoleBinding:
			if o.GetAnnotations()["helm.sh/hook"] != "" {
				continue
			}
			if ns := o.GetNamespace(); ns != "" {
				if err := client.IgnoreAlreadyExists(e.Admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})); err != nil {
					return err
				}
			}
			if err := client.IgnoreAlreadyExists(e.Admin.Create(ctx, obj)); err != nil {
				return fmt.Errorf("create the chart's %T %s: %w", obj, obj.GetName(), err)
			}
		}
	}
	return nil
}

// checkChartConfig: the configuration the chart renders from the values must
// load to exactly e.Config, or the webhook here would not be the one the
// chart deploys.
func (e *Env) checkChartConfig(cm *corev1.ConfigMap) error {
	data, ok := cm.Data["config.yaml"]
	if !ok {
		return nil // not the engine configuration
	}
	cfg, err := gate.LoadConfig([]byte(data))
	if err != nil {
		return fmt.Errorf("the chart's configuration does not load: %w", err)
	}
	want, _ := json.Marshal(e.Config)
	got, _ := json.Marshal(cfg)
	if !bytes.Equal(want, got) {
		return fmt.Errorf("the chart renders a different configuration:\n got %s\nwant %s", got, want)
	}
	return nil
}

// serviceAccountConfig returns a config that authenticates as the chart's
// ServiceAccount with a token from the TokenRequest API.
func (e *Env) serviceAccountConfig(ctx context.Context) (*rest.Config, error) {
	return e.TokenConfig(ctx, e.ServiceAccount)
}

// TokenConfig returns a config that authenticates as a ServiceAccount with a
// token from the TokenRequest API, as a pod running as it would.
func (e *Env) TokenConfig(ctx context.Context, account types.NamespacedName) (*rest.Config, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: account.Namespace, Name: account.Name}}
	// Long enough for a demo left running; the control plane sets no maximum.
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(7 * 24 * 3600))}}
	if err := e.Admin.SubResource("token").Create(ctx, sa, tr); err != nil {
		return nil, fmt.Errorf("token for ServiceAccount %s: %w", account, err)
	}
	cfg := e.CP.RESTConfig()
	cfg.BearerToken, cfg.BearerTokenFile = tr.Status.Token, ""
	cfg.Impersonate = rest.ImpersonationConfig{}
	return cfg, nil
}

func ptrTo[T any](v T) *T { return &v }

// StartWebhook runs `serve`'s manager in this process and waits until it is
// ready (caches synced, TLS listener answering).
func (e *Env) StartWebhook(ctx context.Context) error {
	mgr, srv, err := webhook.NewManager(e.webhookRestConfig, e.Config, webhook.Options{
		Host: "127.0.0.1", Port: e.Port, CertDir: e.CertDir, MetricsAddr: e.Metrics, ProbeAddr: e.Probe, VersionRefresh: 5 * time.Second,
		HaltInterval: e.haltInterval, NoPlanNudge: e.NoPlanNudge,
	})
	if err != nil {
		return err
	}
	srv.Now = e.now
	e.Server = srv
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

// RepoRoot finds the repository root; the chart package knows how.
func RepoRoot() (string, error) { return chart.RepoRoot() }

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

// ServiceAccountKubeconfig writes a kubeconfig that authenticates as the
// chart's ServiceAccount (a TokenRequest token), for a `serve` process that
// runs as the gate does in a cluster.
func (e *Env) ServiceAccountKubeconfig(ctx context.Context, path string) error {
	cfg, err := e.serviceAccountConfig(ctx)
	if err != nil {
		return err
	}
	return writeTokenKubeconfig(cfg, path)
}

// writeTokenKubeconfig writes a kubeconfig for a TokenConfig identity.
func writeTokenKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["token"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "token"}
	kc.CurrentContext = "local"
	return clientcmd.WriteToFile(*kc, path)
}
