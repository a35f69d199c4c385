package webhook

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"golang.org/x/sync/semaphore"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Review bounds: what one review, and all reviews in flight, may hold in
// memory (contract: the "Limits" section of plans.md).
const (
	// MaxReviewBytes caps a review body. The API server refuses request
	// bodies above 3 MiB and etcd (--max-request-bytes, 1.5 MiB by default)
	// objects above 1.5 MiB, so its largest review is an UPDATE (a dry run)
	// of a 3 MiB object over a stored 1.5 MiB one plus a small envelope:
	// about 4.5 MiB. 6 MiB leaves room for the JSON escaping the API server
	// adds when it re-encodes; a larger body is not one it sends.
	MaxReviewBytes = 6 << 20
	// DefaultReviewBudget is how many body bytes may be in review at once:
	// four maximal reviews. Each costs about 4-5 times its body while it is
	// decoded (controller-runtime's read and review decode, the object's
	// decode, the garbage left behind), so four fit the chart's 256 MiB
	// limit beside the caches of a 5,000-node fleet (~160 MiB peak under load).
	DefaultReviewBudget = 4 * MaxReviewBytes
	// minReviewCharge is what a review of unknown or tiny size is charged, so
	// the budget also bounds how many reviews run at once.
	minReviewCharge = 64 << 10
	// DefaultReviewWait is how long a review waits for budget before it is
	// denied: well inside the webhook's timeout (5 s in the chart), so the
	// API server gets a denial, never a timeout its failurePolicy could turn
	// into an allow.
	DefaultReviewWait = time.Second
	// uidScanBytes bounds how much of a refused body is read to find the
	// request's uid (the API server writes it in the first ~100 bytes).
	uidScanBytes = 16 << 10
)

// reviewLimiter admits a review only while the bytes in review stay within
// budget; one that does not fit within wait, or is larger than
// MaxReviewBytes, is denied with the request's uid, without reading its
// body past the uid.
type reviewLimiter struct {
	budget   *semaphore.Weighted
	total    int64
	maxBytes int64
	wait     time.Duration
	// requireClientCert refuses, unread, a request without a verified
	// client certificate.
	requireClientCert bool
}

// loadClientCA reads the PEM bundle --client-ca names.
func loadClientCA(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--client-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("--client-ca %s: no PEM certificate in the file", path)
	}
	return pool, nil
}

func newReviewLimiter(maxBytes, budget int64, wait time.Duration) *reviewLimiter {
	if maxBytes <= 0 {
		maxBytes = MaxReviewBytes
	}
	if budget < maxBytes {
		budget = maxBytes
	}
	if wait <= 0 {
		wait = DefaultReviewWait
	}
	return &reviewLimiter{budget: semaphore.NewWeighted(budget), total: budget, maxBytes: maxBytes, wait: wait}
}

func (l *reviewLimiter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(withTrace(r.Context(), time.Now()))
		if l.requireClientCert && (r.TLS == nil || len(r.TLS.VerifiedChains) == 0) {
			refused.WithLabelValues("no_client_cert").Inc()
			w.Header().Set("Connection", "close")
			http.Error(w, "gpu-upgrade-gate: a client certificate signed by --client-ca is required", http.StatusUnauthorized)
			return
		}
		if r.ContentLength > l.maxBytes {
			refused.WithLabelValues("too_large").Inc()
			refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("review body of %d bytes is above the gate's limit of %d bytes (the API server sends at most ~4.5 MiB); denied", r.ContentLength, l.maxBytes))
			return
		}
		// A body of unknown length (chunked) is charged the whole cap.
		charge := l.maxBytes
		if r.ContentLength >= 0 {
			charge = max(r.ContentLength, minReviewCharge)
		}
		ctx, cancel := context.WithTimeout(r.Context(), l.wait)
		err := l.budget.Acquire(ctx, charge)
		cancel()
		if err != nil {
			refused.WithLabelValues("busy").Inc()
			refuse(w, r, http.StatusTooManyRequests, fmt.Sprintf("the gate is busy (more than %d MiB of reviews in flight for %s); denied, never allowed: retry", l.total>>20, l.wait))
			return
		}
		defer l.budget.Release(charge)
		traceOf(r.Context()).mark("admit")
		r.Body = http.MaxBytesReader(w, r.Body, l.maxBytes)
		next.ServeHTTP(w, r)
	})
}

// refuse answers a review the gate will not read with a denial the API
// server accepts (it carries the request's uid), so no failurePolicy turns
// it into an allow. A body whose uid cannot be found early gets the same
// denial without one; only a client that is not the API server sends such.
func refuse(w http.ResponseWriter, r *http.Request, code int32, msg string) {
	apiVersion, uid := scanReview(io.LimitReader(r.Body, uidScanBytes))
	if apiVersion == "" {
		apiVersion = admissionv1.SchemeGroupVersion.String()
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "AdmissionReview"},
		Response: &admissionv1.AdmissionResponse{UID: uid, Allowed: false,
			Result: &metav1.Status{Status: metav1.StatusFailure, Code: code, Message: "gpu-upgrade-gate: " + msg}},
	}
	w.Header().Set("Content-Type", "application/json")
	// Close the connection: the rest of the body is never read.
	w.Header().Set("Connection", "close")
	_ = json.NewEncoder(w).Encode(review)
}

// scanReview reads an AdmissionReview's apiVersion and request.uid token by
// token, stopping at the uid: the object that follows is never decoded.
func scanReview(r io.Reader) (apiVersion string, uid types.UID) {
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", ""
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return apiVersion, ""
		}
		switch key {
		case "apiVersion":
			if t, err := dec.Token(); err == nil {
				apiVersion, _ = t.(string)
			}
		case "request":
			if t, err := dec.Token(); err != nil || t != json.Delim('{') {
				return apiVersion, ""
			}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return apiVersion, ""
				}
				if k == "uid" {
					t, _ := dec.Token()
					s, _ := t.(string)
					return apiVersion, types.UID(s)
				}
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					return apiVersion, ""
				}
			}
			return apiVersion, ""
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return apiVersion, ""
			}
		}
	}
	return apiVersion, ""
}
