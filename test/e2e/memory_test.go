//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/test/chart"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/test/loadgen"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// chartMemoryLimit is the memory limit the chart gives the webhook's
// container by default.
func chartMemoryLimit(t *testing.T) int64 {
	objs, err := chart.Render(chart.Options{Release: testenv.Release, Namespace: env.Config.Namespace})
	require.NoError(t, err)
	ds := chart.Find[*appsv1.Deployment](objs)
	require.Len(t, ds, 1)
	limit, ok := ds[0].Spec.Template.Spec.Containers[0].Resources.Limits.Memory().AsInt64()
	require.True(t, ok && limit > 0, "the chart sets a memory limit")
	return limit
}

// peakMemory samples a process's RSS until stopped; VmHWM catches what
// falls between samples.
type peakMemory struct {
	pid  int
	max  atomic.Int64
	stop chan struct{}
	done chan struct{}
}

func watchMemory(pid int) *peakMemory {
	m := &peakMemory{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			if rss, _, err := loadgen.ProcessMemory(pid); err == nil && rss > m.max.Load() {
				m.max.Store(rss)
			}
			select {
			case <-m.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return m
}

func (m *peakMemory) finish(t *testing.T) (rss, hwm int64) {
	close(m.stop)
	<-m.done
	_, hwm, err := loadgen.ProcessMemory(m.pid)
	require.NoError(t, err)
	return m.max.Load(), hwm
}

// hugeReview is a crafted AdmissionReview for a Plan whose spec.upgrade.args
// pad it to size bytes. It names no record, so it is denied when decided.
func hugeReview(uid string, size int) []byte {
	return []byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"` + uid +
		`","kind":{"group":"upgrade.cattle.io","version":"v1","kind":"Plan"},"resource":{"group":"upgrade.cattle.io","version":"v1","resource":"plans"},` +
		`"operation":"CREATE","userInfo":{"username":"mallory"},"namespace":"system-upgrade","name":"x","object":{"apiVersion":"upgrade.cattle.io/v1","kind":"Plan",` +
		`"metadata":{"name":"x","namespace":"system-upgrade"},"spec":{"concurrency":1,"nodeSelector":{"matchLabels":{"kubernetes.io/hostname":"gpu-v100-01"}},` +
		`"upgrade":{"image":"rancher/rke2-upgrade","args":["` +
		strings.Repeat("x", max(0, size-600)) + `"]}}}}}`)
}

// TestMemoryBounded runs `serve` as its own process, as the chart does, and
// throws at it what killed it at the chart's 256 MiB limit: unauthenticated
// POSTs of 7 MiB straight at the port (with and without a length), many
// bodies just under the cap at once, and concurrent server-side dry runs of
// a 2.8 MB Plan through the API server. Its RSS stays under the chart's
// limit, it never restarts, and every review is answered, never allowed
// because the gate was busy.
func TestMemoryBounded(t *testing.T) {
	ctx := context.Background()
	limit := chartMemoryLimit(t)
	dir := t.TempDir()
	bin, err := testenv.BuildServe(ctx, dir)
	require.NoError(t, err)
	p, err := testenv.StartServe(ctx, testenv.ServeOptions{Binary: bin, Kubeconfig: env.CP.Kubeconfig(), Config: env.Config, Dir: filepath.Join(dir, "serve")})
	require.NoError(t, err)
	defer func() { assert.NoError(t, p.Stop()) }()
	idle, _, err := loadgen.ProcessMemory(p.PID())
	require.NoError(t, err)

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CA.PEM)
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	post := func(body io.Reader, length int64) (int, []byte, error) {
		req, err := http.NewRequest(http.MethodPost, p.URL()+webhook.PathPlans, body)
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.ContentLength = length
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		return resp.StatusCode, out, err
	}

	mem := watchMemory(p.PID())
	t.Run("unauthenticated large POSTs", func(t *testing.T) {
		const attackers = 12
		var wg sync.WaitGroup
		for i := range attackers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for round := range 3 {
					var (
						body   []byte
						length int64
					)
					switch i % 3 {
					case 0: // 7 MB with its length (under controller-runtime's 7 MiB): refused unread
						body = hugeReview(fmt.Sprintf("big-%d-%d", i, round), 7_000_000)
						length = int64(len(body))
					case 1: // 7 MiB of unknown length: cut at the cap
						body, length = hugeReview(fmt.Sprintf("chunked-%d-%d", i, round), 7<<20), -1
					default: // just under the cap: decoded, within the budget
						body = hugeReview(fmt.Sprintf("under-%d-%d", i, round), webhook.MaxReviewBytes-1024)
						length = int64(len(body))
					}
					code, out, err := post(bytes.NewReader(body), length)
					if err != nil {
						// The server may close the connection before the whole
						// body is sent: nothing was admitted.
						continue
					}
					if code != http.StatusOK {
						assert.GreaterOrEqual(t, code, 400, "status %d: %s", code, clip(out))
						continue
					}
					var ar struct {
						Response struct {
							Allowed bool `json:"allowed"`
						} `json:"response"`
					}
					if assert.NoError(t, json.Unmarshal(out, &ar), clip(out)) {
						assert.False(t, ar.Response.Allowed, "a crafted review is never allowed: %s", clip(out))
					}
				}
			}()
		}
		wg.Wait()
	})

	t.Run("concurrent dry runs of a 2.8 MB Plan through the API server", func(t *testing.T) {
		require.NoError(t, env.UnregisterWebhook(ctx))
		defer func() { require.NoError(t, env.RegisterWebhook(ctx)) }()
		vwc, err := p.WebhookConfiguration()
		require.NoError(t, err)
		require.NoError(t, env.Register(ctx, vwc))
		defer func() { require.NoError(t, env.Unregister(ctx, vwc)) }()

		c, _ := as(t, "alice")
		var answered, busy atomic.Int32
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for round := range 2 {
					pl := planFor(fmt.Sprintf("huge-%d-%d", i, round))
					for range 2800 {
						pl.Spec.Upgrade.Args = append(pl.Spec.Upgrade.Args, strings.Repeat("a", 1000))
					}
					err := c.Create(ctx, pl, client.DryRunAll)
					switch {
					case err == nil:
						answered.Add(1)
					case strings.Contains(err.Error(), "the gate is busy"):
						busy.Add(1)
					default:
						assert.NotContains(t, err.Error(), "failed calling webhook", "every review is answered")
						answered.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		t.Logf("2.8 MB Plan dry runs: %d decided, %d denied as busy", answered.Load(), busy.Load())
		assert.Positive(t, answered.Load(), "the budget lets reviews through")
	})
	peak, hwm := mem.finish(t)
	t.Logf("serve RSS: %.1f MiB idle, %.1f MiB sampled peak, VmHWM %.1f MiB; the chart's limit %d MiB", mib(idle), mib(peak), mib(hwm), limit>>20)
	require.False(t, p.Exited(), "serve did not die")
	assert.Less(t, hwm, limit, "the peak RSS stays under the chart's memory limit")

	// And it still decides.
	code, out, err := post(bytes.NewReader(hugeReview("after", 1000)), -1)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code, clip(out))
	assert.Contains(t, string(out), `"uid":"after"`)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + fmt.Sprintf("… (%d bytes)", len(b))
	}
	return string(b)
}
