package webhook

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/precondition"
)

// TestAlertPoll: each poll keeps the source's reading in memory; a failed
// poll (an error status, an answer it cannot read, a refused connection)
// keeps the last full reading and says why the latest failed.
func TestAlertPoll(t *testing.T) {
	var answer atomic.Value
	answer.Store("[]")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		switch a := answer.Load().(string); {
		case strings.HasPrefix(a, "HTTP "):
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
		default:
			_, _ = w.Write([]byte(a))
		}
	}))
	defer srv.Close()
	cfg := gate.DefaultConfig()
	cfg.Preconditions = []precondition.Precondition{{Name: "gpu-alerts", Kind: precondition.KindAlerts,
		Alerts: &precondition.Alerts{URL: srv.URL + "/api/v2/alerts", AlertNames: []string{"GPUXidErrors"}, MaxAge: metav1.Duration{Duration: time.Minute}}}}
	p, err := NewPreconditions(nil, cfg)
	require.NoError(t, err)
	state := func() (precondition.State, string) { return p.Readings()[0].At(time.Now()) }

	st, seen := state()
	assert.Equal(t, precondition.Stale, st, "never polled: %s", seen)

	ctx := context.Background()
	p.alerts[0].poll(ctx)
	st, seen = state()
	assert.Equal(t, precondition.Holds, st, seen)

	answer.Store(`[{"labels":{"alertname":"GPUXidErrors"},"startsAt":"2026-12-01T05:00:00Z","status":{"state":"active"}}]`)
	p.alerts[0].poll(ctx)
	st, seen = state()
	assert.Equal(t, precondition.Fails, st, seen)

	for _, tc := range []struct{ answer, err string }{
		{"HTTP 503", "HTTP 503"},
		{`{"not":"a list"}`, "not an Alertmanager /api/v2/alerts answer"},
	} {
		answer.Store(tc.answer)
		p.alerts[0].poll(ctx)
		r := p.Readings()[0]
		st, _ = r.At(time.Now())
		assert.Equal(t, precondition.Fails, st, "the last full reading counts within maxAge")
		require.Error(t, r.LastErr)
		assert.Contains(t, r.LastErr.Error(), tc.err)
	}
	srv.Close()
	p.alerts[0].poll(ctx)
	r := p.Readings()[0]
	require.Error(t, r.LastErr)
	assert.Contains(t, r.LastErr.Error(), "connect")
	st, seen = r.At(time.Now().Add(2 * time.Minute))
	assert.Equal(t, precondition.Stale, st, seen)
}

// TestAlertPollRefusesRedirects: a source answering a redirect is a failed
// poll naming the URL, the status and where it pointed, and the target is
// never asked: it could be an endpoint that says "no alerts" while the
// source's alert fires. Never read, the precondition stays Stale; read
// before, the last full reading counts (until maxAge), as for any failed
// poll.
func TestAlertPollRefusesRedirects(t *testing.T) {
	var elsewhereAsked atomic.Int64
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		elsewhereAsked.Add(1)
		_, _ = w.Write([]byte("[]"))
	}))
	defer elsewhere.Close()
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			var redirect atomic.Bool
			src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if redirect.Load() {
					http.Redirect(w, r, elsewhere.URL+"/api/v2/alerts", status)
					return
				}
				_, _ = w.Write([]byte(`[{"labels":{"alertname":"GPUXidErrors"},"startsAt":"2026-12-01T05:00:00Z","status":{"state":"active"}}]`))
			}))
			defer src.Close()
			url := src.URL + "/api/v2/alerts"
			cfg := gate.DefaultConfig()
			cfg.Preconditions = []precondition.Precondition{{Name: "gpu-alerts", Kind: precondition.KindAlerts,
				Alerts: &precondition.Alerts{URL: url, AlertNames: []string{"GPUXidErrors"}, MaxAge: metav1.Duration{Duration: time.Minute}}}}
			p, err := NewPreconditions(nil, cfg)
			require.NoError(t, err)
			ctx := context.Background()
			wantErr := func(r precondition.Reading) {
				t.Helper()
				require.Error(t, r.LastErr)
				assert.Contains(t, r.LastErr.Error(), fmt.Sprintf("GET %s answered HTTP %d redirecting to %q, which the gate does not follow", url, status, elsewhere.URL+"/api/v2/alerts"))
			}

			redirect.Store(true)
			p.alerts[0].poll(ctx)
			r := p.Readings()[0]
			st, seen := r.At(time.Now())
			assert.Equal(t, precondition.Stale, st, "a redirect on the first poll is no reading: %s", seen)
			wantErr(r)

			redirect.Store(false)
			p.alerts[0].poll(ctx)
			st, seen = p.Readings()[0].At(time.Now())
			require.Equal(t, precondition.Fails, st, seen)
			redirect.Store(true)
			p.alerts[0].poll(ctx)
			r = p.Readings()[0]
			st, seen = r.At(time.Now())
			assert.Equal(t, precondition.Fails, st, "the redirect's target says no alerts; the source's last reading stands: %s", seen)
			wantErr(r)
			st, seen = r.At(time.Now().Add(2 * time.Minute))
			assert.Equal(t, precondition.Stale, st, seen)
			assert.Contains(t, seen, "HTTP "+strconv.Itoa(status)+" redirecting")
			assert.Zero(t, elsewhereAsked.Load(), "the redirect was followed")
		})
	}
}
