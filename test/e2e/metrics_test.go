//go:build e2e

package e2e

import (
	"bufio"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
)

// scrape reads the running gate's /metrics: each series' value by its
// text (name and labels).
func scrape(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + env.Metrics + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		out[line[:i]] = v
	}
	require.NoError(t, sc.Err())
	return out
}

// TestMetricsOfARunningGate: what the real gate serves on /metrics. Its
// own families are all in webhook/testdata/metrics.txt (which the
// dashboard and the alerts are checked against), it is ready, and it
// exports the notAfter of the certificate it serves.
func TestMetricsOfARunningGate(t *testing.T) {
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	list, err := os.ReadFile(filepath.Join(root, "webhook", "testdata", "metrics.txt"))
	require.NoError(t, err)
	known := strings.Fields(string(list))
	got := scrape(t)
	for series := range got {
		name, _, _ := strings.Cut(series, "{")
		if strings.HasPrefix(name, "gpu_upgrade_gate_") {
			assert.Contains(t, known, name, "served but not in webhook/testdata/metrics.txt")
		}
	}
	assert.Equal(t, 1.0, got["gpu_upgrade_gate_ready"], "the gate is ready")
	pemData, err := os.ReadFile(filepath.Join(env.CertDir, "tls.crt"))
	require.NoError(t, err)
	block, _ := pem.Decode(pemData)
	require.NotNil(t, block)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	served, err := env.ServingCert()
	require.NoError(t, err)
	require.Equal(t, cert.Raw, served, "the file is the certificate served")
	assert.Equal(t, float64(cert.NotAfter.Unix()), got["gpu_upgrade_gate_serving_certificate_expiry_timestamp_seconds"])
	assert.Equal(t, env.Config.ExpiryWarning.Seconds(), got["gpu_upgrade_gate_record_expiry_warning_seconds"])
	assert.Equal(t, env.Config.Proof.Soak.Seconds(), got["gpu_upgrade_gate_proof_soak_seconds"])
}
