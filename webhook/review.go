package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// serve is the handler's HTTP endpoint. Node reviews take the one-pass path
// (nodeEndpoint); the others controller-runtime's admission handler.
func (h *handler) serve() http.Handler {
	// controller-runtime's own logger for the request, without the values
	// its default adds to each one (a zap logger cloned per review, ~12% of
	// a Plan review's CPU in process): the gate's decision log line names
	// the object, the requester and the request's UID already.
	slow := &webhook.Admission{Handler: h, LogConstructor: func(base logr.Logger, _ *admission.Request) logr.Logger { return base }}
	for _, r := range h.Resources {
		if r.Kind != nodeGVK {
			return slow
		}
	}
	return &nodeEndpoint{h: h, slow: slow}
}

// nodeEndpoint serves Node reviews in one pass (issue 14 item 3): the body
// is read once and decoded once, the envelope and both Nodes together,
// straight into the fields the rules read (nodeFields). controller-runtime's
// handler reads the body twice to find its kind, copies object and
// oldObject out, and each is then decoded again: about half of a Node
// review's CPU. Anything the one pass does not take as a plain, well-formed
// Node UPDATE review (another kind or version, a missing or malformed
// object, a quantity that does not parse) goes, from the bytes already read,
// through controller-runtime's handler and the usual decoding, so every
// error, and each ReviewInvalid that names its field, is what it always was.
type nodeEndpoint struct {
	h    *handler
	slow http.Handler
}

func (e *nodeEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.Header.Get("Content-Type") != "application/json" {
		e.slow.ServeHTTP(w, r)
		return
	}
	// The decoded review holds no byte of body (nodescan.go copies what it
	// keeps), so the buffer goes back to its pool when this returns.
	var body []byte
	if rb, ok := r.Body.(*readBody); ok {
		body = rb.bytes // serve's limiter read it, into its pooled buffer
	} else {
		buf := bodyPool.Get().(*bytes.Buffer)
		defer putBody(buf)
		buf.Reset()
		if r.ContentLength > 0 && r.ContentLength <= MaxReviewBytes {
			buf.Grow(int(r.ContentLength) + bytes.MinRead)
		}
		_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, MaxReviewBytes))
		_ = r.Body.Close()
		if err != nil {
			writeReview(w, admissionv1.SchemeGroupVersion.String(), admission.Errored(http.StatusBadRequest, fmt.Errorf("read the review: %w", err)))
			return
		}
		body = buf.Bytes()
	}
	req, ok := decodeNodeReview(body)
	if !ok {
		r.Body = io.NopCloser(bytes.NewReader(body))
		e.slow.ServeHTTP(w, r)
		return
	}
	writeReview(w, req.apiVersion, e.handle(r, req.Request))
	req.maps.release() // answered: the Nodes are not read again
}

// handle is controller-runtime's Webhook.Handle: a panic is a 500 denial,
// never a crash, and the response carries the request's uid.
func (e *nodeEndpoint) handle(r *http.Request, req admission.Request) (resp admission.Response) {
	defer func() {
		if p := recover(); p != nil {
			resp = admission.Errored(http.StatusInternalServerError, fmt.Errorf("panic: %v [recovered]", p))
			resp.UID = req.UID
		}
	}()
	resp = e.h.Handle(r.Context(), req)
	if err := resp.Complete(req); err != nil {
		resp = admission.Errored(http.StatusInternalServerError, err)
		resp.UID = req.UID
	}
	return resp
}

// bodyPool holds read buffers of reviews (the limiter's, and the Node
// endpoint's when no limiter read the body): a Node review's body is
// 40-80 KB, read into a fresh growing buffer about ten allocations.
var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putBody returns a buffer, unless one outsized review grew it (kept, it
// would pin the memory).
func putBody(b *bytes.Buffer) {
	if b.Cap() <= 1<<20 {
		bodyPool.Put(b)
	}
}

type decodedReview struct {
	admission.Request
	apiVersion string
	// maps hold the Nodes' labels and annotations, pooled (nodescan.go).
	maps pooledMaps
}

// writeReview writes the response as controller-runtime does, in the
// review's own version.
func writeReview(w http.ResponseWriter, apiVersion string, resp admission.Response) {
	review := admissionv1.AdmissionReview{Response: &resp.AdmissionResponse}
	review.APIVersion, review.Kind = apiVersion, "AdmissionReview"
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}
