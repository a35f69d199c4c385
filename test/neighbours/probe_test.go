//go:build e2e

package neighbours

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/test/chart"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// TestProbeAnswersFromServe: the chart's probe hook, rendered for this
// release with the probe on, posts its reviews (generated from the webhook
// table, one a path) to the real serve, verifying TLS against the CA in
// cert-manager's serving Secret as the Job mounts it, and every path
// answers a review for the probe's uid. This machine's sh and curl play the
// Job's pod (no kubelet runs here): the URL is serve's address instead of
// the Service's. The neighbouring case: a path serve does not have fails
// the probe.
func TestProbeAnswersFromServe(t *testing.T) {
	need(t)
	for _, tool := range []string{"sh", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the probe's script cannot run here", tool)
		}
	}
	ctx := context.Background()
	objs, err := chart.Render(chart.Options{Release: release, Namespace: namespace,
		ValuesFiles: []string{filepath.Join(work, "values.yaml")},
		Values:      map[string]any{"hooks": map[string]any{"probe": map[string]any{"enabled": true}}}})
	require.NoError(t, err)
	var probe *corev1.Container
	for _, j := range chart.Find[*batchv1.Job](objs) {
		if strings.HasSuffix(j.Name, "-probe") {
			probe = &j.Spec.Template.Spec.Containers[0]
		}
	}
	require.NotNil(t, probe, "the chart renders no probe Job")

	var tlsSecret corev1.Secret
	require.NoError(t, admin.Get(ctx, types.NamespacedName{Namespace: namespace, Name: release + "-tls"}, &tlsSecret))
	require.NotEmpty(t, tlsSecret.Data["ca.crt"], "cert-manager's serving Secret holds the CA the probe mounts")
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(caFile, tlsSecret.Data["ca.crt"], 0o600))

	run := func(script string) (string, error) {
		cmd := exec.CommandContext(ctx, probe.Command[0], append(probe.Command[1:len(probe.Command)-1], script)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		for _, e := range probe.Env {
			switch e.Name {
			case "URL":
				e.Value = serve.URL()
			case "CA_FILE":
				e.Value = caFile
			case "RETRIES":
				e.Value = "2"
			}
			cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
		}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	script := probe.Command[len(probe.Command)-1]
	out, err := run(script)
	require.NoError(t, err, out)
	for _, w := range webhook.Webhooks {
		assert.Contains(t, out, w.Path+": answered\n", "serve answers the probe's review on every path of the webhook table")
	}

	out, err = run(strings.Replace(script, "probe "+webhook.PathPlans+" ", "probe /validate/nothing ", 1))
	assert.Error(t, err, "a path serve does not have fails the probe: %s", out)
	assert.Contains(t, out, "404", "serve has no /validate/nothing")
}
