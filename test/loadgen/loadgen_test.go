package loadgen

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
)

func TestPercentiles(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	p50, p90, p99, maxD := Percentiles(ds)
	assert.Equal(t, []time.Duration{50 * time.Millisecond, 90 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond}, []time.Duration{p50, p90, p99, maxD})
	p50, _, _, _ = Percentiles(nil)
	assert.Zero(t, p50)
}

func TestLoopbackOnly(t *testing.T) {
	for _, u := range []string{"https://10.0.0.1:9443", "http://127.0.0.1:9443", "https://example.com:443"} {
		_, err := Run(context.Background(), Options{URL: u, Reviews: []fleetgen.Review{{}}, Duration: time.Second})
		assert.Error(t, err, u)
	}
	_, err := Run(context.Background(), Options{URL: "https://127.0.0.1:1", Reviews: []fleetgen.Review{{}}, Duration: time.Hour})
	assert.ErrorContains(t, err, "at most")
}

func TestProcessMemory(t *testing.T) {
	rss, peak, err := ProcessMemory(os.Getpid())
	require.NoError(t, err)
	assert.Positive(t, rss)
	assert.GreaterOrEqual(t, peak, rss)
	file, err := ProcessFileRSS(os.Getpid())
	require.NoError(t, err)
	assert.Positive(t, file, "a test binary's own pages")
	assert.Less(t, file, peak)
}

// TestRunAgainstStub checks the machinery with a TLS server that allows
// everything: UIDs are echoed, denials expected by the fleet count as wrong,
// both modes stop on time.
func TestRunAgainstStub(t *testing.T) {
	var seen atomic.Int64
	srv, ca := stubServer(t, func(uid string) map[string]any {
		if strings.HasPrefix(uid, "0000000") {
			t.Errorf("the placeholder UID was sent")
		}
		seen.Add(1)
		return map[string]any{"uid": uid, "allowed": true}
	})
	defer srv.Close()
	reviews := []fleetgen.Review{
		{Name: "a", Path: "/validate/plans", Body: []byte(`{"request":{"uid":"` + fleetgen.UIDPlaceholder + `"}}`), Allowed: true},
		{Name: "b", Path: "/validate/plans", Body: []byte(`{"request":{"uid":"` + fleetgen.UIDPlaceholder + `"}}`), Allowed: false},
	}
	s, err := Run(context.Background(), Options{URL: srv.URL, CA: ca, Reviews: reviews, Workers: 2, Duration: 300 * time.Millisecond})
	require.NoError(t, err)
	assert.Positive(t, s.Correct)
	assert.Positive(t, s.Wrong, "the denial the fleet expects was answered allow")
	assert.Zero(t, s.Failed)
	assert.Equal(t, int(seen.Load()), s.Answered)

	s, err = Run(context.Background(), Options{URL: srv.URL, CA: ca, Reviews: reviews[:1], Rate: 100, Duration: 300 * time.Millisecond})
	require.NoError(t, err)
	assert.Positive(t, s.Sent)
	assert.Zero(t, s.Errors(), s.String())
}

// TestShedIsItsOwnCount: the gate's overload answer (webhook/limits.go
// refuse: HTTP 200, allowed false, status 429 "the gate is busy") is counted
// as shed, neither correct nor wrong, whatever the review expects; an allow
// carrying the same status is judged as an allow (here: wrong, the review
// expects a denial), never as shed.
func TestShedIsItsOwnCount(t *testing.T) {
	busy := func(uid string) map[string]any {
		return map[string]any{"uid": uid, "allowed": false, "status": map[string]any{"code": 429,
			"message": "gpu-upgrade-gate: the gate is busy (more than 24 MiB of reviews in flight for 1s); denied, never allowed: retry"}}
	}
	for _, tc := range []struct {
		name          string
		answer        func(uid string) map[string]any
		expectAllowed bool
		shed, wrong   bool
	}{
		{name: "busy denial where an allow is expected", answer: busy, expectAllowed: true, shed: true},
		{name: "busy denial where a denial is expected", answer: busy, expectAllowed: false, shed: true},
		{name: "an allow with status 429 is not shed", expectAllowed: false, wrong: true, answer: func(uid string) map[string]any {
			a := busy(uid)
			a["allowed"] = true
			return a
		}},
		{name: "a denial with 429 but another message is judged as a denial", expectAllowed: true, wrong: true, answer: func(uid string) map[string]any {
			return map[string]any{"uid": uid, "allowed": false, "status": map[string]any{"code": 429, "message": "too many requests"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, ca := stubServer(t, tc.answer)
			defer srv.Close()
			reviews := []fleetgen.Review{{Name: "r", Path: "/validate/nodes", Body: []byte(`{"request":{"uid":"` + fleetgen.UIDPlaceholder + `"}}`), Allowed: tc.expectAllowed}}
			s, err := Run(context.Background(), Options{URL: srv.URL, CA: ca, Reviews: reviews, Workers: 1, Duration: 200 * time.Millisecond})
			require.NoError(t, err)
			require.Positive(t, s.Answered)
			if tc.shed {
				assert.Equal(t, s.Answered, s.Shed, s.String())
				assert.Zero(t, s.Errors(), s.String())
			}
			if tc.wrong {
				assert.Zero(t, s.Shed, s.String())
				assert.Equal(t, s.Answered, s.Wrong, s.String())
			}
		})
	}
}

// stubServer is a TLS server answering each review with answer(its uid) as
// the AdmissionReview's response, and its CA bundle.
func stubServer(t *testing.T, answer func(uid string) map[string]any) (*httptest.Server, []byte) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Request struct {
				UID string `json:"uid"`
			} `json:"request"`
		}
		require.NoError(t, json.NewDecoder(r.Body).Decode(&in))
		_ = json.NewEncoder(w).Encode(map[string]any{"response": answer(in.Request.UID)})
	}))
	return srv, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// TestAuditReasonsKey: the answer's reason codes are read from the audit
// annotation the gate writes them to.
func TestAuditReasonsKey(t *testing.T) {
	assert.Equal(t, "reasons", gate.AuditReasons, "update the json tag of AuditAnnotations in worker.send")
}

// TestConnectionsAndUIDs: every request carries its own UID; an answer
// with "Connection: close" and a connection the server closed while idle
// are followed by a new connection, not a failure; the codes of a denial
// are read from its audit annotation.
func TestConnectionsAndUIDs(t *testing.T) {
	var mu sync.Mutex
	uids := map[string]int{}
	n := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Request struct {
				UID string `json:"uid"`
			} `json:"request"`
		}
		require.NoError(t, json.NewDecoder(r.Body).Decode(&in))
		mu.Lock()
		uids[in.Request.UID]++
		n++
		if n%3 == 0 {
			w.Header().Set("Connection", "close")
		}
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"response": map[string]any{"uid": in.Request.UID, "allowed": false,
			"auditAnnotations": map[string]string{"decision": "deny", "reasons": "NodeModeChange,RecordMissing"}}})
	}))
	srv.Config.IdleTimeout = 50 * time.Millisecond
	srv.StartTLS()
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	reviews := []fleetgen.Review{{Name: "r", Path: "/validate/nodes", Body: []byte(`{"request":{"uid":"` + fleetgen.UIDPlaceholder + `"}}`),
		Codes: []gate.Code{"RecordMissing", "NodeModeChange"}}}

	s, err := Run(context.Background(), Options{URL: srv.URL, CA: ca, Reviews: reviews, Workers: 3, Duration: 300 * time.Millisecond})
	require.NoError(t, err)
	assert.Positive(t, s.Correct, s.String())
	assert.Zero(t, s.Errors(), s.String())

	c, err := newClient(Options{URL: srv.URL, CA: ca, Reviews: reviews, Timeout: time.Second})
	require.NoError(t, err)
	w := c.worker()
	defer w.close()
	for range 4 {
		res := w.send(context.Background(), 0, time.Now())
		require.NoError(t, res.Err)
		assert.Equal(t, Correct, Expected(res), Describe(res))
		time.Sleep(100 * time.Millisecond) // past the server's idle timeout
	}
	mu.Lock()
	defer mu.Unlock()
	for uid, k := range uids {
		assert.Equal(t, 1, k, "uid %s sent %d times", uid, k)
		assert.Len(t, uid, len(fleetgen.UIDPlaceholder))
		assert.NotEqual(t, fleetgen.UIDPlaceholder, uid)
	}
	assert.Equal(t, s.Answered+4, n)
}

// TestProcessCPU: the CPU time of a process that burns CPU grows.
func TestProcessCPU(t *testing.T) {
	before, err := ProcessCPU(os.Getpid())
	require.NoError(t, err)
	self := SelfCPU()
	x := 0
	for start := time.Now(); time.Since(start) < 200*time.Millisecond; x++ {
	}
	after, err := ProcessCPU(os.Getpid())
	require.NoError(t, err)
	assert.Greater(t, after, before, x)
	assert.Greater(t, SelfCPU(), self)
	_, err = ProcessCPU(1 << 30)
	assert.Error(t, err)
}
