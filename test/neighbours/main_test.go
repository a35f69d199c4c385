//go:build e2e

// Package neighbours runs the gate next to the real components a platform
// team runs beside it (issue 11): cert-manager's controller and cainjector
// v1.21.1 and nfd-master v0.19.0, built from the source archives in the
// workplace's shared/thirdparty folder by hack/neighbours.sh, on the local
// kube-apiserver; the chart is installed with a real `helm install`.
//
// What cannot run here is played by the test, and said where it happens: no
// kubelet runs, so `gpu-upgrade-gate serve` runs as a process on this machine
// and the chart is installed with webhook.url=https://127.0.0.1:<port> (the
// API server calls it by URL instead of the Service, which has no endpoints
// here) and tls.ipAddresses=[127.0.0.1] (so cert-manager's serving
// certificate names that address); the test copies cert-manager's Secret into
// serve's certificate directory as the kubelet's Secret volume would; it
// writes the NodeFeature objects nfd-worker would write and creates Nodes as
// kubelets would.
//
// Where the archives are absent (a machine outside this workplace) every test
// skips with a message naming them.
package neighbours

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/controlplane"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/test/chart"
)

const (
	release   = testenv.Release
	namespace = "gpu-upgrade-gate"
	nfdNS     = "node-feature-discovery"
)

var (
	// skipReason is set when the neighbours are not built here.
	skipReason string
	root       string
	nfdDir     string
	cp         *controlplane.ControlPlane
	admin      client.Client
	scheme     *runtime.Scheme
	cfg        *gate.Config
	serve      *testenv.ServeProcess
	certDir    string
	helm       string
	work       string
	serveBin   string
)

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	code, err := run(ctx, m)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "neighbours:", err)
		code = 1
	}
	os.Exit(code)
}

// need skips a test when the neighbours are not built here.
func need(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}

func run(ctx context.Context, m *testing.M) (code int, err error) {
	if root, err = testenv.RepoRoot(); err != nil {
		return 1, err
	}
	out, err := exec.Command(filepath.Join(root, "hack", "neighbours.sh"), "--print-dirs").Output()
	if err != nil {
		return 1, fmt.Errorf("hack/neighbours.sh --print-dirs: %w", err)
	}
	dirs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		dirs[k] = v
	}
	nfdDir = dirs["NFD_DIR"]
	cmDir := dirs["CERT_MANAGER_DIR"]
	for _, bin := range []string{filepath.Join(nfdDir, "nfd-master"), filepath.Join(cmDir, "controller"), filepath.Join(cmDir, "cainjector")} {
		if _, err := os.Stat(bin); err != nil {
			skipReason = fmt.Sprintf("%s is not built: it needs node-feature-discovery-v0.19.0.tar.gz and cert-manager-v1.21.1.tar.gz in ../shared/thirdparty (run hack/neighbours.sh, which `make test` does)", bin)
			return m.Run(), nil
		}
	}
	if helm, err = chart.Helm(); err != nil {
		return 1, err
	}
	if work, err = os.MkdirTemp("", "gug-neighbours-"); err != nil {
		return 1, err
	}
	// The neighbours' logs stay for a post-mortem when anything failed.
	defer func() {
		if code == 0 && err == nil {
			os.RemoveAll(work)
		} else {
			fmt.Fprintln(os.Stderr, "neighbours: logs kept in", work)
		}
	}()

	cp, err = controlplane.Start(ctx, controlplane.Options{CRDPaths: []string{
		filepath.Join(root, "testdata", "suc", "crd-plans.yaml"),
		filepath.Join(cmDir, "crds"),
		filepath.Join(nfdDir, "crds.yaml"),
	}})
	if err != nil {
		return 1, err
	}
	defer cp.Stop()
	scheme = runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = upgradev1.AddToScheme(scheme)
	_ = certmanagerv1.AddToScheme(scheme)
	if admin, err = client.New(cp.RESTConfig(), client.Options{Scheme: scheme}); err != nil {
		return 1, err
	}
	for _, ns := range []string{"cert-manager", "system-upgrade", "gpu-operator", nfdNS} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return 1, err
		}
	}
	// cert-manager as its chart runs it, minus leader election (one replica)
	// and with metrics off; the Venafi issuer is compiled out (hack/neighbours.sh).
	// The cainjector's client reads KUBECONFIG (controller-runtime), not its
	// --kubeconfig flag; both are given. Listeners stay on loopback.
	kubeconfigEnv := []string{"KUBECONFIG=" + cp.Kubeconfig()}
	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = testenv.FreePort(); err != nil {
			return 1, err
		}
	}
	stopCM, err := startProcess("cert-manager-controller", filepath.Join(cmDir, "controller"), kubeconfigEnv,
		"--kubeconfig="+cp.Kubeconfig(), "--leader-elect=false", "--cluster-resource-namespace=cert-manager",
		fmt.Sprintf("--metrics-listen-address=127.0.0.1:%d", ports[0]), fmt.Sprintf("--internal-healthz-listen-address=127.0.0.1:%d", ports[1]))
	if err != nil {
		return 1, err
	}
	defer stopCM()
	stopInjector, err := startProcess("cert-manager-cainjector", filepath.Join(cmDir, "cainjector"), kubeconfigEnv,
		"--kubeconfig="+cp.Kubeconfig(), "--leader-elect=false", fmt.Sprintf("--metrics-listen-address=127.0.0.1:%d", ports[2]))
	if err != nil {
		return 1, err
	}
	defer stopInjector()

	cfg = gate.DefaultConfig()
	port, err := testenv.FreePort()
	if err != nil {
		return 1, err
	}
	if err := helmInstall(ctx, port); err != nil {
		return 1, err
	}
	certDir = filepath.Join(work, "serve-tls")
	if _, err := syncServingSecret(ctx, ""); err != nil {
		return 1, err
	}
	saKubeconfig, err := kubeconfigFor(ctx, namespace, release)
	if err != nil {
		return 1, err
	}
	if serveBin, err = testenv.BuildServe(ctx, work); err != nil {
		return 1, err
	}
	serve, err = testenv.StartServe(ctx, testenv.ServeOptions{Binary: serveBin, Kubeconfig: saKubeconfig, Config: cfg,
		Dir: filepath.Join(work, "serve"), CertDir: certDir, Port: port})
	if err != nil {
		return 1, err
	}
	defer serve.Stop()
	if err := waitInjected(ctx); err != nil {
		return 1, err
	}
	return m.Run(), nil
}

// helmInstall installs the chart for cfg with a real `helm install`, pointed
// at serve on this machine by URL (no kubelet runs the chart's Deployment).
func helmInstall(ctx context.Context, port int) error {
	values, err := testenv.ChartValues(cfg)
	if err != nil {
		return err
	}
	values["webhook"] = map[string]any{"url": fmt.Sprintf("https://127.0.0.1:%d", port), "timeoutSeconds": 5, "nodeFailurePolicy": "Fail"}
	values["tls"] = map[string]any{"ipAddresses": []string{"127.0.0.1"}}
	data, err := yaml.Marshal(values)
	if err != nil {
		return err
	}
	path := filepath.Join(work, "values.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return err
	}
	dir, err := chart.Dir()
	if err != nil {
		return err
	}
	return helmCmd(ctx, "install", release, dir, "--namespace", namespace, "--create-namespace", "--values", path)
}

func helmCmd(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, helm, append(args, "--kubeconfig", cp.Kubeconfig())...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(work, "helm-cache"), "HELM_CONFIG_HOME="+filepath.Join(work, "helm-config"), "HELM_DATA_HOME="+filepath.Join(work, "helm-data"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// syncServingSecret waits until cert-manager's serving Secret holds a
// certificate other than previous (PEM; "" for any) and writes it into
// serve's certificate directory, as the kubelet syncs a Secret volume.
func syncServingSecret(ctx context.Context, previous string) (string, error) {
	var s corev1.Secret
	err := poll(ctx, 2*time.Minute, func() (bool, error) {
		err := admin.Get(ctx, types.NamespacedName{Namespace: namespace, Name: release + "-tls"}, &s)
		if err != nil {
			return false, client.IgnoreNotFound(err)
		}
		crt := string(s.Data["tls.crt"])
		return crt != "" && len(s.Data["tls.key"]) > 0 && crt != previous, nil
	})
	if err != nil {
		return "", fmt.Errorf("cert-manager's serving Secret: %w", err)
	}
	if err := writeServing(s); err != nil {
		return "", err
	}
	return string(s.Data["tls.crt"]), nil
}

// writeServing writes the Secret's key and certificate the way the kubelet's
// atomic writer makes them appear: each file replaced whole.
func writeServing(s corev1.Secret) error {
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return err
	}
	for _, f := range []string{"tls.key", "tls.crt"} {
		tmp := filepath.Join(certDir, "."+f+".tmp")
		if err := os.WriteFile(tmp, s.Data[f], 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(certDir, f)); err != nil {
			return err
		}
	}
	return nil
}

// kubeconfigFor writes a kubeconfig that authenticates as a ServiceAccount
// with a token from the TokenRequest API, as a pod's projected token would.
func kubeconfigFor(ctx context.Context, ns, name string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}
	if err := admin.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("token for ServiceAccount %s/%s: %w", ns, name, err)
	}
	kc, err := clientcmd.LoadFromFile(cp.Kubeconfig())
	if err != nil {
		return "", err
	}
	for _, ai := range kc.AuthInfos {
		ai.ClientCertificate, ai.ClientKey, ai.ClientCertificateData, ai.ClientKeyData = "", "", nil, nil
		ai.Token, ai.TokenFile, ai.Impersonate, ai.ImpersonateGroups = tr.Status.Token, "", "", nil
		ai.Username, ai.Password = "", ""
	}
	path := filepath.Join(work, "kubeconfig-"+ns+"-"+name)
	return path, clientcmd.WriteToFile(*kc, path)
}

// clientFor is a client authenticated as a ServiceAccount.
func clientFor(ctx context.Context, ns, name string) (client.Client, error) {
	path, err := kubeconfigFor(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	return client.New(rc, client.Options{Scheme: scheme})
}

func ptr[T any](v T) *T { return &v }

// startProcess runs a neighbour with its log in the work directory; the
// returned func stops it.
func startProcess(name, bin string, env []string, args ...string) (func(), error) {
	log, err := os.Create(filepath.Join(work, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), env...)
	// Killed with the test binary if it dies without the stop func.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(done) }()
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}, nil
}

// poll calls f every 200ms until it reports true, fails, or timeout passes.
func poll(ctx context.Context, timeout time.Duration, f func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := f()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
