package webhook

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"sync"
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
	// DefaultReviewReadTimeout bounds reading one review body. The API
	// server writes a review in one go; its webhook timeout is at most 30 s
	// (the chart's 5 s), so a body still arriving after this is no review
	// it sends.
	DefaultReviewReadTimeout = 5 * time.Second
	// DefaultPerSourceRequests caps the requests in flight from one source
	// address. Each API server instance is one source, and at the budget's
	// floor (minReviewCharge) 384 reviews fit the default budget at once;
	// one source may hold a third of that, so two other API servers (or
	// the API server besides one flooding Pod) still find room.
	DefaultPerSourceRequests = 128
)

// reviewLimiter admits a review only while the bytes in review stay within
// budget, charged as the body is read (never from the announced
// Content-Length: a caller that announces 6 MiB and sends a byte every few
// seconds holds only what it sent); one that does not fit within wait is
// denied with the request's uid; one larger than MaxReviewBytes is denied
// unread (413); one whose body is not read within readTimeout is denied
// (408): the API server sends a review at once. Requests in flight from one
// source address are capped (perSource).
type reviewLimiter struct {
	budget   *semaphore.Weighted
	total    int64
	maxBytes int64
	wait     time.Duration
	// readTimeout bounds reading one body (0: DefaultReviewReadTimeout).
	readTimeout time.Duration
	// perSource caps the requests in flight from one source address (0:
	// DefaultPerSourceRequests); sources counts them.
	perSource int
	mu        sync.Mutex
	sources   map[string]int
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
	return &reviewLimiter{budget: semaphore.NewWeighted(budget), total: budget, maxBytes: maxBytes, wait: wait,
		readTimeout: DefaultReviewReadTimeout, perSource: DefaultPerSourceRequests, sources: map[string]int{}}
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
		source := sourceOf(r)
		if !l.enter(source) {
			refused.WithLabelValues("source_busy").Inc()
			refuse(w, r.Body, http.StatusTooManyRequests, fmt.Sprintf("more than %d requests in flight from %s; denied, never allowed: retry", l.perSource, source))
			return
		}
		defer l.leave(source)
		if r.ContentLength > l.maxBytes {
			refused.WithLabelValues("too_large").Inc()
			refuse(w, r.Body, http.StatusRequestEntityTooLarge, fmt.Sprintf("review body of %d bytes is above the gate's limit of %d bytes (the API server sends at most ~4.5 MiB); denied", r.ContentLength, l.maxBytes))
			return
		}
		// The deadline covers this request's body only; the next request
		// on the connection gets its own.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(l.readTimeout))
		// A pooled buffer: nothing keeps a byte of it once the handler
		// returned (controller-runtime's handler reads its own copy; the
		// Node scan copies what it keeps: review.go).
		buf := bodyPool.Get().(*bytes.Buffer)
		defer putBody(buf)
		buf.Reset()
		charged, err := l.read(r, buf)
		defer l.budget.Release(charged)
		if err != nil {
			code, reason, msg := readRefusal(err, l)
			refused.WithLabelValues(reason).Inc()
			// The uid is in what was read, or (busy before the first byte)
			// in the next bytes, still under the read deadline.
			refuse(w, io.MultiReader(bytes.NewReader(buf.Bytes()), r.Body), code, msg)
			return
		}
		_ = rc.SetReadDeadline(time.Time{})
		traceOf(r.Context()).mark("admit")
		r.Body = &readBody{Reader: bytes.NewReader(buf.Bytes()), bytes: buf.Bytes()}
		next.ServeHTTP(w, r)
	})
}

// Why a body was not read.
var (
	errBusy     = errors.New("busy")
	errTooLarge = errors.New("too large")
)

// read reads the body into buf, charging the budget for the bytes read as
// they arrive (at least minReviewCharge, so the budget also bounds how many
// reviews run at once). charged is what it holds, to release, error or not.
// The bytes go straight into buf: a review within the first charge (most
// Node reviews, 40-80 KB) is read into room sized once from its announced
// length, in a pooled buffer. A fresh buffer grown by doubling beside a
// 32 KB chunk cost more than the review itself: 380-455 µs of CPU a Node
// review against 107-125 µs without the limiter, mostly zeroing fresh
// large allocations (`BenchmarkHandler/node-relabel-limited`). Beyond the
// first charge the room grows only as bytes arrive, so an announced length
// holds no memory.
func (l *reviewLimiter) read(r *http.Request, buf *bytes.Buffer) (charged int64, err error) {
	c := &chargedBody{body: r.Body, l: l, ctx: r.Context()}
	if err := c.charge(minReviewCharge); err != nil {
		return c.charged, err
	}
	if n := r.ContentLength; n > 0 {
		buf.Grow(int(min(n, c.charged)) + bytes.MinRead)
	}
	_, err = buf.ReadFrom(c)
	return c.charged, err
}

// chargedBody is a review body that charges the budget for what each read
// brings, and stops one byte past maxBytes (errTooLarge).
type chargedBody struct {
	body    io.Reader
	l       *reviewLimiter
	ctx     context.Context
	read    int64
	charged int64
}

func (c *chargedBody) Read(p []byte) (int, error) {
	if room := c.l.maxBytes + 1 - c.read; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := c.body.Read(p)
	c.read += int64(n)
	if c.read > c.l.maxBytes {
		return n, errTooLarge
	}
	if cerr := c.charge(c.read); cerr != nil {
		return n, cerr
	}
	return n, err
}

// charge grows the charge to upTo, in steps of at least minReviewCharge.
func (c *chargedBody) charge(upTo int64) error {
	if upTo <= c.charged {
		return nil
	}
	more := max(upTo-c.charged, minReviewCharge)
	ctx, cancel := context.WithTimeout(c.ctx, c.l.wait)
	defer cancel()
	if err := c.l.budget.Acquire(ctx, more); err != nil {
		return errBusy
	}
	c.charged += more
	return nil
}

// readBody is a body the limiter read whole: the Node endpoint decodes its
// bytes where they are instead of reading them into a buffer of its own.
type readBody struct {
	*bytes.Reader
	bytes []byte
}

func (*readBody) Close() error { return nil }

// readRefusal is the status, metric reason and message of a body not read.
func readRefusal(err error, l *reviewLimiter) (int32, string, string) {
	switch {
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("review body is above the gate's limit of %d bytes (the API server sends at most ~4.5 MiB); denied", l.maxBytes)
	case errors.Is(err, errBusy):
		return http.StatusTooManyRequests, "busy", fmt.Sprintf("the gate is busy (more than %d MiB of reviews in flight for %s); denied, never allowed: retry", l.total>>20, l.wait)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return http.StatusRequestTimeout, "read_timeout", fmt.Sprintf("review body not received within %s (the API server sends a review at once); denied", l.readTimeout)
	}
	return http.StatusBadRequest, "read_error", "review body could not be read: " + err.Error()
}

// sourceOf is the request's source address without its port.
func sourceOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (l *reviewLimiter) enter(source string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sources[source] >= l.perSource {
		return false
	}
	l.sources[source]++
	return true
}

// sourcesNow copies the requests in flight by source (tests, debugging).
func (l *reviewLimiter) sourcesNow() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.sources)
}

func (l *reviewLimiter) leave(source string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sources[source]--; l.sources[source] <= 0 {
		delete(l.sources, source)
	}
}

// refuse answers a review the gate will not read with a denial the API
// server accepts (it carries the request's uid, read from the start of
// body), so no failurePolicy turns it into an allow. A body whose uid cannot
// be found early gets the same denial without one; only a client that is
// not the API server sends such.
func refuse(w http.ResponseWriter, body io.Reader, code int32, msg string) {
	apiVersion, uid := scanReview(io.LimitReader(body, uidScanBytes))
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
