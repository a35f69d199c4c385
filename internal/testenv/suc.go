package testenv

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/controlplane"
)

// The system-upgrade-controller as its upstream manifest deploys it: in
// namespace system-upgrade, as ServiceAccount system-upgrade, controller name
// system-upgrade-controller (manifests/system-upgrade-controller.yaml of
// v0.20.1).
const (
	SUCNamespace = "system-upgrade"
	SUCName      = "system-upgrade-controller"
)

// SUCAccount is the ServiceAccount SUC runs as; its Jobs run as it too.
var SUCAccount = types.NamespacedName{Namespace: SUCNamespace, Name: "system-upgrade"}

// SUCUser is the username the API server sees for SUC.
var SUCUser = "system:serviceaccount:" + SUCAccount.Namespace + ":" + SUCAccount.Name

// ErrNoSUCSource says the SUC source archive is not on this machine; tests
// that run SUC skip with it.
var ErrNoSUCSource = errors.New("system-upgrade-controller-v0.20.1.tar.gz is not in GUG_THIRDPARTY_DIR, ../shared/thirdparty or ../../shared/thirdparty (the workplace's shared/thirdparty folder); the tests that run the real SUC need it")

// BuildSUC returns the SUC binary and the source archive it was built from,
// building it first when the cache lacks it (hack/suc.sh: once, about 6-11
// minutes on 2 cores, progress on stderr). ErrNoSUCSource when the archive
// is absent.
func BuildSUC(ctx context.Context) (bin, archive string, err error) {
	root, err := RepoRoot()
	if err != nil {
		return "", "", err
	}
	script := filepath.Join(root, "hack", "suc.sh")
	out, err := exec.CommandContext(ctx, script, "--print-src").Output()
	if err != nil {
		return "", "", fmt.Errorf("%s --print-src: %w", script, err)
	}
	if archive = strings.TrimSpace(string(out)); archive == "" {
		return "", "", ErrNoSUCSource
	}
	if bin = os.Getenv("GUG_SUC"); bin == "" || !isExecutable(bin) {
		cmd := exec.CommandContext(ctx, script)
		cmd.Stderr = os.Stderr
		if out, err = cmd.Output(); err != nil {
			return "", "", fmt.Errorf("build SUC (%s): %w", script, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		bin = lines[len(lines)-1]
	}
	if !isExecutable(bin) {
		return "", "", fmt.Errorf("%s did not produce %s", script, bin)
	}
	return bin, archive, nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// archiveFile reads one file of a `git archive` tarball.
func archiveFile(archive, name string) ([]byte, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("%s has no %s", archive, name)
		}
		if err != nil {
			return nil, err
		}
		if h.Name == name {
			return io.ReadAll(io.LimitReader(tr, 1<<20))
		}
	}
}

// SUC is a running system-upgrade-controller process.
type SUC struct {
	LogPath string
	proc    *controlplane.Process
}

// StartSUC runs SUC out of cluster against the control plane, as its
// upstream Deployment would run it: its ServiceAccount, ClusterRoles, Role
// and bindings come from the upstream manifests in the archive, it
// authenticates with a TokenRequest token of that ServiceAccount, and leader
// election is off (one replica). Its CRD is the one testenv installs
// (testdata/suc, byte-identical to v0.20.1's); SUC re-applies its own at
// start.
func (e *Env) StartSUC(ctx context.Context, bin, archive, dir string) (_ *SUC, err error) {
	if err := e.installSUCRBAC(ctx, archive); err != nil {
		return nil, err
	}
	cfg, err := e.TokenConfig(ctx, SUCAccount)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeTokenKubeconfig(cfg, kubeconfig); err != nil {
		return nil, err
	}
	s := &SUC{LogPath: filepath.Join(dir, "suc.log")}
	s.proc, err = controlplane.StartProcess("system-upgrade-controller", bin, nil, []string{
		"SYSTEM_UPGRADE_CONTROLLER_KUBE_CONFIG=" + kubeconfig,
		"SYSTEM_UPGRADE_CONTROLLER_NAMESPACE=" + SUCNamespace,
		"SYSTEM_UPGRADE_CONTROLLER_NAME=" + SUCName,
		"SYSTEM_UPGRADE_CONTROLLER_NODE_NAME=testenv",
		"SYSTEM_UPGRADE_CONTROLLER_LEADER_ELECT=false",
	}, s.LogPath)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	// Ready once its Job controller runs: it logs the start of each of its
	// controllers.
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.proc.Done():
			return nil, fmt.Errorf("SUC exited while starting; see %s", s.LogPath)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if data, _ := os.ReadFile(s.LogPath); bytes.Contains(data, []byte("Starting batch/v1, Kind=Job controller")) {
			return s, nil
		}
	}
	return nil, fmt.Errorf("SUC did not start its Job controller within 60s; see %s", s.LogPath)
}

// installSUCRBAC creates SUC's namespace, ServiceAccount and the upstream
// ClusterRoles, Role and bindings (namespaced objects into SUC's namespace).
func (e *Env) installSUCRBAC(ctx context.Context, archive string) error {
	if err := client.IgnoreAlreadyExists(e.Admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SUCNamespace}})); err != nil {
		return err
	}
	if err := client.IgnoreAlreadyExists(e.Admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: SUCAccount.Namespace, Name: SUCAccount.Name}})); err != nil {
		return err
	}
	dec := serializer.NewCodecFactory(e.Scheme).UniversalDeserializer()
	for _, name := range []string{"manifests/clusterrole.yaml", "manifests/clusterrolebinding.yaml"} {
		data, err := archiveFile(archive, name)
		if err != nil {
			return err
		}
		for _, doc := range strings.Split(string(data), "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			obj, _, err := dec.Decode([]byte(doc), nil, nil)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			o, ok := obj.(client.Object)
			if !ok {
				return fmt.Errorf("%s: %T is not an object", name, obj)
			}
			switch r := o.(type) {
			case *rbacv1.Role:
				r.Namespace = SUCNamespace
			case *rbacv1.RoleBinding:
				r.Namespace = SUCNamespace
				setSubjectNamespace(r.Subjects)
			case *rbacv1.ClusterRoleBinding:
				setSubjectNamespace(r.Subjects)
			}
			if err := client.IgnoreAlreadyExists(e.Admin.Create(ctx, o)); err != nil {
				return fmt.Errorf("%s: create %T %s: %w", name, o, o.GetName(), err)
			}
		}
	}
	return nil
}

// setSubjectNamespace: the upstream manifests leave it to kustomize.
func setSubjectNamespace(subjects []rbacv1.Subject) {
	for i := range subjects {
		if subjects[i].Kind == rbacv1.ServiceAccountKind && subjects[i].Namespace == "" {
			subjects[i].Namespace = SUCNamespace
		}
	}
}

// Log is what SUC has logged so far.
func (s *SUC) Log() string {
	data, _ := os.ReadFile(s.LogPath)
	return string(data)
}

// Stop terminates SUC and waits.
func (s *SUC) Stop() { s.proc.Stop() }

// FinishJob writes what the Job controller would once the Job's pod ended
// (no kube-controller-manager or kubelet runs here): through the status
// subresource, as the Job controller does, a start and completion time, one
// succeeded or failed pod, and the terminal conditions.
func (e *Env) FinishJob(ctx context.Context, job *batchv1.Job, succeeded bool) error {
	now := metav1.Now()
	start := metav1.NewTime(now.Add(-time.Second))
	job.Status.StartTime = &start
	cond := func(t batchv1.JobConditionType, reason string) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now, Reason: reason, Message: "marked by the e2e test playing the Job controller"}
	}
	if succeeded {
		job.Status.Succeeded, job.Status.CompletionTime = 1, &now
		job.Status.Conditions = append(job.Status.Conditions, cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached"), cond(batchv1.JobComplete, "CompletionsReached"))
	} else {
		job.Status.Failed = 1
		job.Status.Conditions = append(job.Status.Conditions, cond(batchv1.JobFailureTarget, "BackoffLimitExceeded"), cond(batchv1.JobFailed, "BackoffLimitExceeded"))
	}
	return e.Admin.Status().Update(ctx, job)
}
