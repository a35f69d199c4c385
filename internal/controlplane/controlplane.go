// Package controlplane runs a real etcd and kube-apiserver on loopback for the
// e2e tests, the load tests and the demo: real TLS, RBAC and Node
// authorization, NodeRestriction, an audit log, and CRDs installed.
//
// The binaries are built once by `make controlplane` (hack/controlplane.sh).
package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Options configure Start. The zero value is usable.
type Options struct {
	// BinDir holds the etcd and kube-apiserver binaries. Default:
	// $GUG_CONTROLPLANE_DIR, else the cache directory `hack/controlplane.sh
	// --print-dir` names (found by walking up from the working directory).
	BinDir string
	// CRDPaths are CRD manifests (files or directories) to install.
	CRDPaths []string
	// WorkDir holds certificates, etcd data, logs, the audit log and the
	// kubeconfig. Default: a new temporary directory.
	WorkDir string
	// KeepWorkDir leaves WorkDir in place after Stop, for post-mortems.
	KeepWorkDir bool
	// APIServerFlags are extra kube-apiserver flags ("--name=value"); one
	// naming a flag the harness sets replaces the harness's value.
	APIServerFlags []string
	// StartTimeout bounds the start of each process. Default: 60s, generous
	// because the machines running this are small and shared.
	StartTimeout time.Duration
}

// ControlPlane is a running etcd and kube-apiserver. Stop it when done;
// cancelling the context given to Start stops it too.
type ControlPlane struct {
	ctx     context.Context
	opts    Options
	workDir string
	bin     string
	args    []string // kube-apiserver's, reused by StartAPIServer
	admin   *rest.Config

	mu        sync.Mutex
	etcd      *process
	apiserver *process
	stopped   bool
	unwatch   func() bool
}

// Start starts etcd and kube-apiserver, waits until the apiserver is ready and
// installs the CRDs. ctx bounds both the start-up and the control plane's life.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	bin, err := binDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	c := &ControlPlane{ctx: ctx, opts: opts, bin: bin, workDir: opts.WorkDir}
	if c.workDir == "" {
		if c.workDir, err = os.MkdirTemp("", "gug-controlplane-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(c.workDir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()

	caPEM, err := writePKI(c.path("pki"))
	if err != nil {
		return nil, fmt.Errorf("controlplane: certificates: %w", err)
	}
	token, err := writeTokenFile(c.path("tokens.csv"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.path("audit-policy.yaml"), []byte(auditPolicy), 0o644); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL := "http://127.0.0.1:" + ports[0]
	peerURL := "http://127.0.0.1:" + ports[1]
	c.admin = &rest.Config{
		Host:            "https://127.0.0.1:" + ports[2],
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: caPEM},
		// The load tests drive it hard; client-side throttling would hide that.
		QPS:   1000,
		Burst: 2000,
	}

	c.etcd, err = startProcess("etcd", filepath.Join(bin, "etcd"), []string{
		"--data-dir=" + c.path("etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--unsafe-no-fsync", // throw-away data; fsync only slows tests down
		"--log-level=warn",
	}, c.path("etcd.log"))
	if err != nil {
		return nil, err
	}
	if err := c.waitReady(c.etcd, httpOK(http.DefaultClient, etcdURL+"/health")); err != nil {
		return nil, err
	}

	pki := c.path("pki")
	c.args = mergeFlags([][2]string{
		{"etcd-servers", etcdURL},
		{"bind-address", "127.0.0.1"},
		{"advertise-address", "127.0.0.1"},
		{"secure-port", ports[2]},
		// The default reconciler refuses a loopback advertise address.
		{"endpoint-reconciler-type", "none"},
		{"service-cluster-ip-range", "10.0.0.0/24"},
		{"tls-cert-file", filepath.Join(pki, "apiserver.crt")},
		{"tls-private-key-file", filepath.Join(pki, "apiserver.key")},
		{"service-account-issuer", "https://kubernetes.default.svc.cluster.local"},
		{"service-account-key-file", filepath.Join(pki, "sa.key")},
		{"service-account-signing-key-file", filepath.Join(pki, "sa.key")},
		{"token-auth-file", c.path("tokens.csv")},
		// As in RKE2: kubelets (impersonated system:node:<name>) may only
		// touch their own Node.
		{"authorization-mode", "Node,RBAC"},
		// As RKE2 runs it: SUC's upgrade Jobs are privileged.
		{"allow-privileged", "true"},
		{"enable-admission-plugins", "NodeRestriction"},
		// Nothing here creates service account tokens for pods.
		{"disable-admission-plugins", "ServiceAccount"},
		{"audit-policy-file", c.path("audit-policy.yaml")},
		{"audit-log-path", c.AuditLogPath()},
	}, opts.APIServerFlags)
	if err := c.StartAPIServer(); err != nil {
		return nil, err
	}
	if err := c.waitDefaultNamespace(); err != nil {
		return nil, err
	}
	if len(opts.CRDPaths) > 0 {
		// InstallCRDs waits until discovery serves every CRD version.
		_, err := envtest.InstallCRDs(c.admin, envtest.CRDInstallOptions{
			Paths: opts.CRDPaths, ErrorIfPathMissing: true, MaxTime: 30 * time.Second,
		})
		if err != nil {
			return nil, fmt.Errorf("controlplane: install CRDs: %w", err)
		}
	}
	if err := c.writeKubeconfig(); err != nil {
		return nil, err
	}
	c.unwatch = context.AfterFunc(ctx, func() { _ = c.Stop() })
	return c, nil
}

// RESTConfig returns a config for the admin user (group system:masters).
func (c *ControlPlane) RESTConfig() *rest.Config { return rest.CopyConfig(c.admin) }

// ConfigFor returns a config that impersonates user with groups, e.g.
// ("alice", "platform-admins") or ("system:node:gpu-v100-01", "system:nodes").
// The apiserver adds system:authenticated; with no groups given it also adds
// the service account groups to a system:serviceaccount:<ns>:<name> user.
func (c *ControlPlane) ConfigFor(user string, groups ...string) *rest.Config {
	cfg := rest.CopyConfig(c.admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return cfg
}

// Kubeconfig is the path of a kubeconfig file for the admin user.
func (c *ControlPlane) Kubeconfig() string { return c.path("kubeconfig") }

// AuditLogPath is the path of the apiserver's JSON-lines audit log.
func (c *ControlPlane) AuditLogPath() string { return c.path("audit.log") }

// WorkDir holds the logs (etcd.log, kube-apiserver.log) and everything else.
func (c *ControlPlane) WorkDir() string { return c.workDir }

// HostForWebhooks is the address a webhook server should listen on so that
// the apiserver can call it; its serving certificate must name it as an IP SAN.
func (c *ControlPlane) HostForWebhooks() string { return "127.0.0.1" }

// StartAPIServer starts kube-apiserver (again, after StopAPIServer) on the
// same port, with the same certificates and etcd, and waits until it is ready.
func (c *ControlPlane) StartAPIServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("controlplane: already stopped")
	}
	if c.apiserver != nil {
		select {
		case <-c.apiserver.done: // it died: start a new one
		default:
			return nil
		}
	}
	client, err := rest.HTTPClientFor(c.admin)
	if err != nil {
		return err
	}
	p, err := startProcess("kube-apiserver", filepath.Join(c.bin, "kube-apiserver"), c.args, c.path("kube-apiserver.log"))
	if err != nil {
		return err
	}
	if err := c.waitReady(p, httpOK(client, c.admin.Host+"/readyz")); err != nil {
		p.stop()
		return err
	}
	c.apiserver = p
	return nil
}

// StopAPIServer stops kube-apiserver, leaving etcd and its data alone.
func (c *ControlPlane) StopAPIServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.apiserver != nil {
		c.apiserver.stop()
		c.apiserver = nil
	}
	return nil
}

// Stop stops both processes and removes the work directory unless
// Options.KeepWorkDir. It is safe to call more than once.
func (c *ControlPlane) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	c.stopped = true
	if c.unwatch != nil {
		c.unwatch()
	}
	for _, p := range []*process{c.apiserver, c.etcd} {
		if p != nil {
			p.stop()
		}
	}
	c.apiserver, c.etcd = nil, nil
	if c.opts.KeepWorkDir {
		return nil
	}
	return os.RemoveAll(c.workDir)
}

func (c *ControlPlane) path(name string) string { return filepath.Join(c.workDir, name) }

// waitReady polls check until it succeeds, p exits, StartTimeout passes or
// the context is cancelled; errors carry the tail of p's log.
func (c *ControlPlane) waitReady(p *process, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.StartTimeout)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("controlplane: %s exited while starting; its log ends:\n%s", p.name, tail(p.log))
		case <-ctx.Done():
			return fmt.Errorf("controlplane: %s not ready (%v; last check: %v); its log ends:\n%s", p.name, ctx.Err(), err, tail(p.log))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitDefaultNamespace waits for the namespace a controller creates after
// /readyz already passes, so that tests never race it.
func (c *ControlPlane) waitDefaultNamespace() error {
	cs, err := kubernetes.NewForConfig(c.admin)
	if err != nil {
		return err
	}
	return c.waitReady(c.apiserver, func(ctx context.Context) error {
		_, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
		return err
	})
}

func (c *ControlPlane) writeKubeconfig() error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["gpu-upgrade-gate"] = &clientcmdapi.Cluster{Server: c.admin.Host, CertificateAuthorityData: c.admin.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: c.admin.BearerToken}
	cfg.Contexts["gpu-upgrade-gate"] = &clientcmdapi.Context{Cluster: "gpu-upgrade-gate", AuthInfo: "admin"}
	cfg.CurrentContext = "gpu-upgrade-gate"
	return clientcmd.WriteToFile(*cfg, c.Kubeconfig())
}

// binDir finds the binaries, or says how to build them.
func binDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("GUG_CONTROLPLANE_DIR")
	}
	if dir == "" {
		// The script is the one place that knows the versioned cache path.
		script, err := findUp(filepath.Join("hack", "controlplane.sh"))
		if err != nil {
			return "", fmt.Errorf("controlplane: set GUG_CONTROLPLANE_DIR to the directory `make controlplane` builds into: %w", err)
		}
		out, err := exec.Command(script, "--print-dir").Output()
		if err != nil {
			return "", fmt.Errorf("controlplane: %s --print-dir: %w", script, err)
		}
		dir = strings.TrimSpace(string(out))
	}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("controlplane: no %s in %s: run `make controlplane` first "+
				"(builds etcd and kube-apiserver from their Go modules; about 15 minutes the first time)", name, dir)
		}
	}
	return dir, nil
}

// findUp looks for rel in the working directory and its parents.
func findUp(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, rel)); err == nil {
			return filepath.Join(dir, rel), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no %s above the working directory", rel)
		}
		dir = parent
	}
}

// writeTokenFile writes the static token of the admin user and returns it.
func writeTokenFile(path string) (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	token := hex.EncodeToString(b)
	line := token + `,admin,admin,"system:masters"` + "\n"
	return token, os.WriteFile(path, []byte(line), 0o600)
}

// freePorts asks the kernel for n free loopback ports. They are released
// before the processes bind them; on a test machine that race is acceptable.
func freePorts(n int) ([]string, error) {
	var ports []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close() // held until all are picked, so they differ
		ports = append(ports, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	return ports, nil
}

// mergeFlags renders defaults as --name=value, minus those extra names again;
// extra comes last.
func mergeFlags(defaults [][2]string, extra []string) []string {
	override := map[string]bool{}
	for _, f := range extra {
		name, _, _ := strings.Cut(strings.TrimLeft(f, "-"), "=")
		override[name] = true
	}
	var args []string
	for _, d := range defaults {
		if !override[d[0]] {
			args = append(args, "--"+d[0]+"="+d[1])
		}
	}
	return append(args, extra...)
}

func httpOK(client *http.Client, url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}
