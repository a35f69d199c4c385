//go:build e2e

package neighbours

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLabelExemptionRefusedAtStartup (issue 10 item 4): `serve` refuses a
// configuration that exempts by labels without an identity, saying why, and
// never starts serving.
func TestLabelExemptionRefusedAtStartup(t *testing.T) {
	need(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct{ name, config string }{
		{"labels only", "exemptions:\n  - name: rancher-managed\n    resources: [plans]\n    matchLabels: {rancher-managed: \"true\"}\n"},
		{"namespaces and labels", "exemptions:\n  - name: rancher-managed\n    resources: [plans]\n    namespaces: [cattle-system]\n    matchLabels: {rancher-managed: \"true\"}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			require.NoError(t, os.WriteFile(path, []byte(tc.config), 0o644))
			out, err := exec.CommandContext(ctx, serveBin, "serve", "--config", path, "--kubeconfig", cp.Kubeconfig(),
				"--cert-dir", certDir, "--host", "127.0.0.1", "--port", "0").CombinedOutput()
			require.Error(t, err, "serve must not start:\n%s", out)
			assert.Contains(t, string(out), "exemptions[0].users")
			assert.Contains(t, string(out), "matchLabels and namespaces only narrow an exemption")
		})
	}
}
