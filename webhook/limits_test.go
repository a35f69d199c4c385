package webhook

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
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
		resp, err := http.Post(srv.URL, "application/json", bytes.NewReader(bigReview("uid-big", 2<<20)))
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		r := decodeResponse(t, body)
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
		resp.Body.Close()
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
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
		resp, err := http.Post(srv.URL, "application/json", bytes.NewReader(bigReview("uid-third", 900<<10)))
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		r := decodeResponse(t, body)
		assert.False(t, r.Allowed)
		assert.Equal(t, types.UID("uid-third"), r.UID)
		assert.Contains(t, r.Result.Message, "busy")
		assert.EqualValues(t, 2, called.Load())
		close(release)
		wg.Wait()
		// The budget is back: a review runs again.
		resp, err = http.Post(srv.URL, "application/json", bytes.NewReader(bigReview("uid-after", 900<<10)))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	})
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
