package webhook

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
)

// bigReview is an AdmissionReview as the API server writes it (uid first),
// padded to about size bytes.
func bigReview(uid string, size int) []byte {
	pad := max(0, size-300)
	return []byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"` + uid +
		`","kind":{"group":"upgrade.cattle.io","version":"v1","kind":"Plan"},"resource":{"group":"upgrade.cattle.io","version":"v1","resource":"plans"},` +
		`"operation":"CREATE","userInfo":{"username":"mallory"},"object":{"apiVersion":"upgrade.cattle.io/v1","kind":"Plan","metadata":{"name":"x"},"spec":{"upgrade":{"args":["` +
		strings.Repeat("x", pad) + `"]}}}}}`)
}

// postReview posts a review to url and decodes the answer.
func postReview(t *testing.T, url string, review []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader(review))
	require.NoError(t, err)
	return readResponse(t, resp)
}

// readResponse reads and decodes an answer.
func readResponse(t *testing.T, resp *http.Response) *admissionv1.AdmissionResponse {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return decodeResponse(t, body)
}

func decodeResponse(t *testing.T, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	var ar admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(body, &ar), string(body))
	require.NotNil(t, ar.Response, string(body))
	assert.Equal(t, "admission.k8s.io/v1", ar.APIVersion)
	return ar.Response
}

func TestReviewLimiter(t *testing.T) {
	var called atomic.Int32
	release := make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called.Add(1)
		_, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		<-release
		w.WriteHeader(http.StatusNoContent)
	})
	l := newReviewLimiter(1<<20, 2<<20, 200*time.Millisecond)
	srv := httptest.NewServer(l.wrap(slow))
	defer srv.Close()

	t.Run("a body above the cap is denied with its uid, unread", func(t *testing.T) {
		r := postReview(t, srv.URL, bigReview("uid-big", 2<<20))
		assert.False(t, r.Allowed)
		assert.Equal(t, types.UID("uid-big"), r.UID)
		assert.EqualValues(t, http.StatusRequestEntityTooLarge, r.Result.Code)
		assert.Contains(t, r.Result.Message, "above the gate's limit")
		assert.Zero(t, called.Load(), "the handler never saw it")
	})

	t.Run("a body of unknown length is cut at the cap", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodPost, srv.URL, io.MultiReader(bytes.NewReader(bigReview("uid-chunked", 2<<20))))
		require.NoError(t, err)
		req.ContentLength = -1
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		r := readResponse(t, resp)
		assert.False(t, r.Allowed)
		assert.Equal(t, types.UID("uid-chunked"), r.UID)
		assert.EqualValues(t, http.StatusRequestEntityTooLarge, r.Result.Code)
		assert.Zero(t, called.Load(), "the handler never saw it")
	})

	t.Run("reviews beyond the budget wait, then are denied", func(t *testing.T) {
		called.Store(0)
		// Two reviews of 900 KiB fill the 2 MiB budget; the third waits
		// 200ms and is denied with its uid.
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := http.Post(srv.URL, "application/json", bytes.NewReader(bigReview("uid-held-"+string(rune('a'+i)), 900<<10)))
				if assert.NoError(t, err) {
					resp.Body.Close()
					assert.Equal(t, http.StatusNoContent, resp.StatusCode)
				}
			}()
		}
		require.Eventually(t, func() bool { return called.Load() == 2 }, 10*time.Second, 5*time.Millisecond)
		r := postReview(t, srv.URL, bigReview("uid-third", 900<<10))
		assert.False(t, r.Allowed)
		assert.Equal(t, types.UID("uid-third"), r.UID)
		assert.Contains(t, r.Result.Message, "busy")
		assert.EqualValues(t, 2, called.Load())
		close(release)
		wg.Wait()
		// The budget is back: a review runs again.
		resp, err := http.Post(srv.URL, "application/json", bytes.NewReader(bigReview("uid-after", 900<<10)))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	})
}

// slowBody opens a connection that announces a body of announced bytes and
// sends the first bytes of a review, then one more byte every 100ms, until
// stop is closed; it returns what the server answered ("" if the connection
// was closed without an answer).
func slowBody(t *testing.T, addr, uid string, announced int, stop <-chan struct{}) string {
	conn, err := net.Dial("tcp", addr)
	if !assert.NoError(t, err) {
		return ""
	}
	defer conn.Close()
	review := bigReview(uid, announced)
	if _, err = fmt.Fprintf(conn, "POST /validate HTTP/1.1\r\nHost: gate\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(review)); !assert.NoError(t, err) {
		return ""
	}
	sent := 200
	_, _ = conn.Write(review[:sent])
	answer := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(conn)
		answer <- string(b)
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case a := <-answer:
			return a
		case <-stop:
			conn.Close()
			return <-answer
		case <-tick.C:
			if _, err := conn.Write(review[sent : sent+1]); err == nil {
				sent++
			}
		}
	}
}

// TestSlowBodies (issue 24): four connections that announce 6 MiB each and
// trickle their bytes hold only what they sent: a normal review beside them
// is decided at once, and each of them is denied (408, with its uid) once
// its read deadline passes. No durations are asserted: the deadline is
// short, the outcome is what is checked.
func TestSlowBodies(t *testing.T) {
	var decided atomic.Int32
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			t.Errorf("the handler got a body it could not read: %v", err)
		}
		decided.Add(1)
		w.WriteHeader(http.StatusNoContent)
	})
	// The default cap and budget (24 MiB: four bodies at 6 MiB, exactly what
	// the slow callers announce).
	l := newReviewLimiter(MaxReviewBytes, DefaultReviewBudget, 200*time.Millisecond)
	l.readTimeout = 2 * time.Second
	srv := httptest.NewServer(l.wrap(next))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	stop := make(chan struct{})
	answers := make(chan string, 4)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers <- slowBody(t, addr, fmt.Sprintf("uid-slow-%d", i), MaxReviewBytes-1024, stop)
		}()
	}
	// Each slow caller has sent its headers and first bytes, and trickles.
	require.Eventually(t, func() bool { return l.sourcesNow()["127.0.0.1"] == 4 }, 10*time.Second, 5*time.Millisecond)

	// A normal review (a person's GPU label write, SUC's completion: any
	// review the API server sends in one go) is decided meanwhile.
	for _, uid := range []string{"uid-label-write", "uid-suc-completion"} {
		resp, err := http.Post(srv.URL, "application/json", bytes.NewReader(bigReview(uid, 8<<10)))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusNoContent, resp.StatusCode, uid)
	}
	assert.EqualValues(t, 2, decided.Load())

	// Past their deadline the slow callers are denied with their uid, 408.
	for range 4 {
		a := <-answers
		i := strings.Index(a, "{")
		require.GreaterOrEqual(t, i, 0, "an answer, not a dropped connection: %q", a)
		r := decodeResponse(t, []byte(a[i:]))
		assert.False(t, r.Allowed)
		assert.Contains(t, string(r.UID), "uid-slow-")
		assert.EqualValues(t, http.StatusRequestTimeout, r.Result.Code)
		assert.Contains(t, r.Result.Message, "review body not received within 2s")
	}
	close(stop)
	wg.Wait()
	assert.EqualValues(t, 2, decided.Load(), "no slow body reached the handler")
}

// TestPerSourceCap: requests in flight from one address beyond the cap are
// denied (429, with the uid); below it they run.
func TestPerSourceCap(t *testing.T) {
	release := make(chan struct{})
	var in atomic.Int32
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in.Add(1)
		<-release
		w.WriteHeader(http.StatusNoContent)
	})
	l := newReviewLimiter(1<<20, 8<<20, 200*time.Millisecond)
	l.perSource = 2
	srv := httptest.NewServer(l.wrap(next))
	defer srv.Close()
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(srv.URL, "application/json", bytes.NewReader(bigReview(fmt.Sprintf("uid-in-%d", i), 1<<10)))
			if assert.NoError(t, err) {
				resp.Body.Close()
				assert.Equal(t, http.StatusNoContent, resp.StatusCode)
			}
		}()
	}
	require.Eventually(t, func() bool { return in.Load() == 2 }, 10*time.Second, 5*time.Millisecond)
	r := postReview(t, srv.URL, bigReview("uid-third", 1<<10))
	assert.False(t, r.Allowed)
	assert.Equal(t, types.UID("uid-third"), r.UID)
	assert.EqualValues(t, http.StatusTooManyRequests, r.Result.Code)
	assert.Contains(t, r.Result.Message, "more than 2 requests in flight from 127.0.0.1")
	close(release)
	wg.Wait()
	assert.Empty(t, l.sourcesNow(), "every request left")
}

// TestBusyBeforeTheFirstByte: a review that finds no budget even for its
// first bytes is still denied with its uid (an answer without it would be a
// failed call, which an Ignore policy turns into an allow).
func TestBusyBeforeTheFirstByte(t *testing.T) {
	l := newReviewLimiter(1<<20, 1<<20, 100*time.Millisecond)
	require.True(t, l.budget.TryAcquire(1<<20), "the whole budget held")
	srv := httptest.NewServer(l.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("the handler must not run")
	})))
	defer srv.Close()
	r := postReview(t, srv.URL, bigReview("uid-busy", 1<<10))
	assert.False(t, r.Allowed)
	assert.Equal(t, types.UID("uid-busy"), r.UID)
	assert.EqualValues(t, http.StatusTooManyRequests, r.Result.Code)
}

func TestReviewLimiterClientCert(t *testing.T) {
	l := newReviewLimiter(1<<20, 1<<20, time.Second)
	l.requireClientCert = true
	srv := httptest.NewTLSServer(l.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })))
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := c.Post(srv.URL, "application/json", bytes.NewReader(bigReview("uid", 1000)))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "no client certificate: refused unread")
}

func TestScanReview(t *testing.T) {
	cases := []struct {
		name, body, apiVersion string
		uid                    types.UID
	}{
		{"API server order", `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u1","object":{}}}`, "admission.k8s.io/v1", "u1"},
		{"uid after other fields", `{"request":{"kind":{"kind":"Plan"},"uid":"u2"},"apiVersion":"admission.k8s.io/v1"}`, "", "u2"},
		{"no request", `{"apiVersion":"admission.k8s.io/v1"}`, "admission.k8s.io/v1", ""},
		{"not JSON", `{{{`, "", ""},
		{"uid past the scan limit", `{"request":{"pad":"` + strings.Repeat("x", uidScanBytes) + `","uid":"u3"}}`, "", ""},
		{"uid not a string", `{"request":{"uid":7}}`, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, uid := scanReview(io.LimitReader(strings.NewReader(tc.body), uidScanBytes))
			assert.Equal(t, tc.apiVersion, v)
			assert.Equal(t, tc.uid, uid)
		})
	}
}
