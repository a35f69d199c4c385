package chart

import (
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// The hook Jobs' shell scripts run here, with the machine's sh and curl,
// against stand-in servers: the script logic (TLS against the CA, every
// path, the answer check, the status codes) is tested, not only rendered.

func hookJob(t *testing.T, objs []Object, suffix string) *corev1.Container {
	t.Helper()
	for _, j := range Find[*batchv1.Job](objs) {
		if strings.HasSuffix(j.Name, suffix) {
			require.Len(t, j.Spec.Template.Spec.Containers, 1)
			return &j.Spec.Template.Spec.Containers[0]
		}
	}
	t.Fatalf("no Job *%s", suffix)
	return nil
}

func needShell(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"sh", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the hook scripts cannot run here", tool)
		}
	}
}

// runScript runs the container's command with its env (overridden by env),
// with rewrite's old, new pairs applied to the script in order (paths that
// exist only in a pod).
func runScript(t *testing.T, c *corev1.Container, env map[string]string, rewrite ...string) (string, error) {
	t.Helper()
	require.GreaterOrEqual(t, len(c.Command), 3)
	script := c.Command[len(c.Command)-1]
	for i := 0; i+1 < len(rewrite); i += 2 {
		script = strings.ReplaceAll(script, rewrite[i], rewrite[i+1])
	}
	cmd := exec.Command(c.Command[0], append(c.Command[1:len(c.Command)-1], script)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for _, e := range c.Env {
		if v, ok := env[e.Name]; ok {
			cmd.Env = append(cmd.Env, e.Name+"="+v)
		} else {
			cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
		}
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestProbeHookScript(t *testing.T) {
	needShell(t)
	r := load(t, "own-ca-values.yaml")
	c := hookJob(t, r.objs, "-probe")
	var mu sync.Mutex
	var paths []string
	answer := "echo" // echo: a review for the request's uid; other: a wrong answer
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &review); err != nil || review.Request == nil || req.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		mu.Lock()
		paths = append(paths, req.URL.Path)
		a := answer
		mu.Unlock()
		uid := review.Request.UID
		if a != "echo" {
			uid = "someone-else"
		}
		_ = json.NewEncoder(w).Encode(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta,
			Response: &admissionv1.AdmissionResponse{UID: uid, Allowed: false}})
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the wrong-CA case's handshake error
	srv.StartTLS()
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	tmp := t.TempDir()
	env := map[string]string{"URL": srv.URL, "CA_BUNDLE": string(caPEM), "CA_FILE": filepath.Join(tmp, "ca.crt"), "RETRIES": "0"}

	out, err := runScript(t, c, env)
	require.NoError(t, err, out)
	var table []string
	for _, w := range webhook.Webhooks {
		table = append(table, w.Path)
	}
	assert.ElementsMatch(t, table, paths, "the probe posts to every path of the webhook table: %s", out)

	// A server answering for another request fails the probe.
	answer = "wrong"
	out, err = runScript(t, c, env)
	assert.Error(t, err, out)
	assert.Contains(t, out, "not an AdmissionReview answer")

	// A server whose certificate another CA signed fails the probe: the
	// own-CA variant's bundle did not sign httptest's certificate.
	answer = "echo"
	var ownCA string
	for _, e := range c.Env {
		if e.Name == "CA_BUNDLE" {
			ownCA = e.Value
		}
	}
	require.Contains(t, ownCA, "BEGIN CERTIFICATE")
	env["CA_BUNDLE"] = ownCA
	out, err = runScript(t, c, env)
	assert.Error(t, err, "TLS must be verified against the CA: %s", out)
}

func TestDeleteWebhookHookScript(t *testing.T) {
	needShell(t)
	r := load(t, "networkpolicy-servicemonitor-values.yaml")
	c := hookJob(t, r.objs, "-delete-webhook")
	var mu sync.Mutex
	var got []string
	status := http.StatusOK
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		got = append(got, req.Method+" "+req.URL.Path+" "+req.Header.Get("Authorization"))
		s := status
		mu.Unlock()
		w.WriteHeader(s)
		_, _ = w.Write([]byte(`{"kind":"Status"}`))
	}))
	defer srv.Close()
	sa := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(sa, "token"), []byte("the-token"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(sa, "ca.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))
	tmp := t.TempDir()
	rewrite := []string{"/tmp/answer", filepath.Join(tmp, "answer"), "/var/run/secrets/kubernetes.io/serviceaccount", sa, "https://kubernetes.default.svc", srv.URL}

	for _, tc := range []struct {
		status int
		ok     bool
	}{{http.StatusOK, true}, {http.StatusNotFound, true}, {http.StatusForbidden, false}} {
		mu.Lock()
		status, got = tc.status, nil
		mu.Unlock()
		out, err := runScript(t, c, nil, rewrite...)
		if tc.ok {
			assert.NoError(t, err, "HTTP %d: %s", tc.status, out)
		} else {
			assert.Error(t, err, "HTTP %d: %s", tc.status, out)
		}
		assert.Equal(t, []string{"DELETE /apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/gpu-upgrade-gate Bearer the-token"}, got, out)
	}
}
