package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// Server holds what the handlers share.
type Server struct {
	Config *gate.Config
	Facts  *Facts
	Log    logr.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// ReviewBudget bounds the body bytes in review at once (0: the default,
	// DefaultReviewBudget); see reviewLimiter.
	ReviewBudget int64
	// ReviewReadTimeout bounds reading one body, PerSourceRequests the
	// requests in flight from one source address (0: the defaults).
	ReviewReadTimeout time.Duration
	PerSourceRequests int
	// requireClientCert: only requests with a verified client certificate
	// are read (Options.ClientCA).
	requireClientCert bool
	// events tells Plans and Nodes why a node's step is held (nil: none).
	events *holdEvents
	// Self is the gate's own username (its ServiceAccount, as the API
	// server authenticates it): the only writer of halts.
	Self string
}

// holds says whether the named webhook refuses what its rules deny: in
// warn and audit mode a node's step is not held, so no Event says it is.
func (s *Server) holds(webhook string) bool {
	return s.Config.Enforcement.For(webhook) == gate.EnforcementEnforce
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Register serves every handler on the webhook server. Every path shares
// one memory budget (limits.go).
func (s *Server) Register(srv webhook.Server) {
	budget := s.ReviewBudget
	if budget <= 0 {
		budget = DefaultReviewBudget
	}
	l := newReviewLimiter(MaxReviewBytes, budget, DefaultReviewWait)
	l.requireClientCert = s.requireClientCert
	if s.ReviewReadTimeout > 0 {
		l.readTimeout = s.ReviewReadTimeout
	}
	if s.PerSourceRequests > 0 {
		l.perSource = s.PerSourceRequests
	}
	for path, h := range s.handlers() {
		h.identify = s.Config.SystemIdentity
		if s.Config != nil { // nil: a Server that only lists its paths
			h.mode = s.Config.Enforcement.For(h.Name)
		}
		srv.Register(path, l.wrap(h.serve()))
	}
}

// handlers are the webhooks by path: one a row of the webhook table
// (table.go), which is all that is served.
func (s *Server) handlers() map[string]*handler {
	hs := make(map[string]*handler, len(Webhooks))
	for i := range Webhooks {
		hs[Webhooks[i].Path] = s.handler(&Webhooks[i])
	}
	return hs
}

// handler serves one row of the webhook table.
func (s *Server) handler(w *Webhook) *handler {
	decide := w.decide
	return &handler{Webhook: w, log: s.Log.WithName(strings.TrimSuffix(w.Name, ".gpu-upgrade-gate.io")),
		decide: func(ctx context.Context, req admission.Request) (gate.Decision, error) { return decide(s, ctx, req) }}
}

// handlerAt is the handler of a path of the table (nil: none).
func (s *Server) handlerAt(path string) *handler {
	for i := range Webhooks {
		if Webhooks[i].Path == path {
			return s.handler(&Webhooks[i])
		}
	}
	return nil
}

// decodeObject decodes a core object, tolerating fields a newer API server
// adds, and refuses a body whose kind is not the expected one.
func decodeObject(raw []byte, obj interface{ GetObjectKind() schema.ObjectKind }, kind string) error {
	// Unmarshal, not a Decoder: a Decoder first copies raw into its buffer.
	if err := json.Unmarshal(raw, obj); err != nil {
		return jsonProblem(err)
	}
	if k := obj.GetObjectKind().GroupVersionKind(); k.Kind != kind || k.Group != "" {
		return fmt.Errorf("body is apiVersion %q kind %q, expected v1 %s", k.GroupVersion(), k.Kind, kind)
	}
	return nil
}

// jsonProblem says which field did not decode and the form expected, in the
// API's terms, not the Go types behind them.
func jsonProblem(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("%s: expected %s, got a JSON %s", te.Field, jsonForm(te.Type), te.Value)
	}
	return err
}

func jsonForm(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map:
		if t.Elem().Kind() == reflect.String {
			return "an object of strings"
		}
		return "an object"
	}
	return "an object"
}
