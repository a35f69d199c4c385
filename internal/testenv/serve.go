package testenv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/test/chart"
)

// BuildServe builds the gpu-upgrade-gate binary into dir for the tests
// that run it as its own process. It is built as `go test` and `go vet`
// compile (cgo as the environment says, no -trimpath), so it reuses every
// package they compiled: built as `make build` does (CGO_ENABLED=0,
// -trimpath), it shared none of them, and a first `make test` compiled the
// whole dependency graph a second time (about four minutes on two cores).
// What the tests read of it (its answers, its restarts, its RSS against the
// chart's limit) does not depend on either.
func BuildServe(ctx context.Context, dir string) (string, error) {
	return buildGate(ctx, dir, nil, "-ldflags", "-s -w")
}

// BuildRelease builds the gpu-upgrade-gate binary into dir exactly as
// `make build` and the Dockerfile do: for measurements of the shipped
// binary (its RSS, its pages).
func BuildRelease(ctx context.Context, dir string) (string, error) {
	return buildGate(ctx, dir, []string{"CGO_ENABLED=0"}, "-trimpath", "-ldflags", "-s -w")
}

func buildGate(ctx context.Context, dir string, env []string, flags ...string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "gpu-upgrade-gate")
	cmd := exec.CommandContext(ctx, "go", append(append([]string{"build"}, flags...), "-o", bin, "./cmd/gpu-upgrade-gate")...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// ServeOptions start `gpu-upgrade-gate serve` as its own process.
type ServeOptions struct {
	// Binary is the gpu-upgrade-gate binary (BuildServe).
	Binary string
	// Kubeconfig is the cluster the webhook reads.
	Kubeconfig string
	// Config is the engine configuration (nil: defaults).
	Config *gate.Config
	// Dir holds the config, the serving certificate and the log.
	Dir string
	// CertDir, when set, holds tls.crt and tls.key that someone else keeps
	// current (e.g. a test copying cert-manager's Secret, as the kubelet's
	// Secret volume does); otherwise the process gets a certificate of a new CA.
	CertDir string
	// Port is the webhook port; 0 picks a free one.
	Port int
	// HaltInterval runs the halt loop, leader-elected (0: no loop and no
	// election, so a process beside the shared e2e fleet keeps no halts).
	HaltInterval time.Duration
	// Args are more flags for serve (e.g. --pprof-bind-address).
	Args []string
}

// ServeProcess is a running `gpu-upgrade-gate serve`.
type ServeProcess struct {
	Cmd     *exec.Cmd
	CA      *CA
	CertDir string
	Port    int
	Probe   string // host:port of /healthz and /readyz
	Metrics string // host:port of /metrics
	LogPath string
	vwc     *admissionregistrationv1.ValidatingWebhookConfiguration
	done    chan struct{}
	waitErr error
}

// StartServe starts the process, serving TLS on 127.0.0.1 with a
// certificate of a new CA, and waits until /readyz answers (caches synced).
func StartServe(ctx context.Context, o ServeOptions) (_ *ServeProcess, err error) {
	if o.Config == nil {
		o.Config = gate.DefaultConfig()
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	// The chart is the source of the configuration file and the webhook
	// configuration, as in a cluster.
	vwc, cfgData, err := renderChart(o.Config)
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(o.Dir, "config.yaml")
	if err := os.WriteFile(cfgPath, cfgData, 0o644); err != nil {
		return nil, err
	}
	p := &ServeProcess{CertDir: o.CertDir, LogPath: filepath.Join(o.Dir, "serve.log"), vwc: vwc, done: make(chan struct{})}
	if p.CertDir == "" {
		p.CertDir = filepath.Join(o.Dir, "tls")
		if p.CA, err = NewCA(); err != nil {
			return nil, err
		}
		if _, err := p.CA.WriteServing(p.CertDir); err != nil {
			return nil, err
		}
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	p.Port, p.Probe, p.Metrics = ports[0], "127.0.0.1:"+strconv.Itoa(ports[1]), "127.0.0.1:"+strconv.Itoa(ports[2])
	if o.Port != 0 {
		p.Port = o.Port
	}
	log, err := os.Create(p.LogPath)
	if err != nil {
		return nil, err
	}
	p.Cmd = exec.Command(o.Binary, "serve", "--config", cfgPath, "--kubeconfig", o.Kubeconfig, "--cert-dir", p.CertDir,
		"--host", "127.0.0.1", "--port", strconv.Itoa(p.Port), "--metrics-bind-address", p.Metrics, "--health-probe-bind-address", p.Probe,
		"--server-version-refresh", "5s", "--halt-interval", o.HaltInterval.String(), "--leader-elect="+strconv.FormatBool(o.HaltInterval > 0))
	p.Cmd.Args = append(p.Cmd.Args, o.Args...)
	p.Cmd.Stdout, p.Cmd.Stderr = log, log
	// Killed with the test binary if it dies without Stop.
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.Cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	go func() {
		p.waitErr = p.Cmd.Wait()
		log.Close()
		close(p.done)
	}()
	defer func() {
		if err != nil {
			_ = p.Stop()
		}
	}()
	deadline := time.Now().Add(120 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return nil, fmt.Errorf("serve exited while starting (%v); see %s", p.waitErr, p.LogPath)
		case <-ctx.Done():
			return nil, ctx.Err()
		default:
		}
		if resp, err := http.Get("http://" + p.Probe + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, fmt.Errorf("serve not ready within 120s; see %s", p.LogPath)
}

// PID is the process ID.
func (p *ServeProcess) PID() int { return p.Cmd.Process.Pid }

// URL is the webhook's base URL.
func (p *ServeProcess) URL() string { return fmt.Sprintf("https://127.0.0.1:%d", p.Port) }

// Exited says whether the process has ended.
func (p *ServeProcess) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM (the server finishes in-flight reviews) and waits,
// killing it after 30s.
func (p *ServeProcess) Stop() error {
	if p.Exited() {
		return nil
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.Cmd.Process.Kill()
		<-p.done
		return errors.New("serve did not stop within 30s of SIGTERM; killed")
	}
	var exit *exec.ExitError
	if errors.As(p.waitErr, &exit) && exit.ExitCode() != 0 {
		return fmt.Errorf("serve exited with %v; see %s", p.waitErr, p.LogPath)
	}
	return nil
}

// WebhookConfiguration is the chart's ValidatingWebhookConfiguration
// pointed at this process by URL, with its CA as the bundle.
func (p *ServeProcess) WebhookConfiguration() (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	vwc := p.vwc.DeepCopy()
	delete(vwc.Annotations, "cert-manager.io/inject-ca-from")
	for i := range vwc.Webhooks {
		w := &vwc.Webhooks[i]
		if w.ClientConfig.Service == nil || w.ClientConfig.Service.Path == nil {
			return nil, fmt.Errorf("webhook %s: the chart's clientConfig names no Service path", w.Name)
		}
		url := p.URL() + *w.ClientConfig.Service.Path
		w.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: p.CA.PEM}
	}
	return vwc, nil
}

// ChartValues are the chart values whose engine configuration is cfg (every
// key set), as the e2e environment renders the chart with.
func ChartValues(cfg *gate.Config) (map[string]any, error) { return (&Env{Config: cfg}).chartValues() }

// FreePort is a TCP port free on 127.0.0.1 right now.
func FreePort() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// renderChart renders the Helm chart with cfg as its values, as the e2e
// environment does, and returns its webhook configuration and the engine
// configuration file it mounts.
func renderChart(cfg *gate.Config) (*admissionregistrationv1.ValidatingWebhookConfiguration, []byte, error) {
	values, err := (&Env{Config: cfg}).chartValues()
	if err != nil {
		return nil, nil, err
	}
	objs, err := chart.Render(chart.Options{Release: Release, Namespace: cfg.Namespace, Values: values})
	if err != nil {
		return nil, nil, fmt.Errorf("render the chart: %w", err)
	}
	vwcs := chart.Find[*admissionregistrationv1.ValidatingWebhookConfiguration](objs)
	if len(vwcs) != 1 {
		return nil, nil, fmt.Errorf("the chart rendered %d ValidatingWebhookConfigurations, want 1", len(vwcs))
	}
	for _, cm := range chart.Find[*corev1.ConfigMap](objs) {
		if data, ok := cm.Data["config.yaml"]; ok {
			if _, err := gate.LoadConfig([]byte(data)); err != nil {
				return nil, nil, fmt.Errorf("the chart's configuration does not load: %w", err)
			}
			return vwcs[0], []byte(data), nil
		}
	}
	return nil, nil, errors.New("the chart rendered no ConfigMap with config.yaml")
}

// ServingSerial is the serial number of the certificate served now.
func (p *ServeProcess) ServingSerial() (string, error) {
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p.Port), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reading the presented cert only
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}
