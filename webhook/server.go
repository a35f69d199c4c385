package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
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
	for path, h := range s.handlers() {
		h.identify = s.Config.SystemIdentity
		h.webhook = webhookAt[path]
		if s.Config != nil { // nil: a Server that only lists its paths
			h.mode = s.Config.Enforcement.For(h.webhook)
		}
		srv.Register(path, l.wrap(h.serve()))
	}
}

// handlers are the webhooks by path. Each names its contract (a file next
// to this one) and the engine reviews it runs, whose codes the contract
// must list (TestDocumentedCodes).
func (s *Server) handlers() map[string]*handler {
	return map[string]*handler{
		PathPlans:      s.PlanHandler(),
		PathNodes:      s.NodeHandler(),
		PathRecords:    s.RecordHandler(),
		PathDriver:     s.DriverHandler(),
		PathJobs:       s.JobHandler(),
		PathDriverStep: s.DriverStepHandler(),
		PathOperator:   s.OperatorHandler(),
		PathPlanStatus: s.PlanStatusHandler(),
		// SUC's completion write: its own webhook entry, so every other SUC
		// write keeps the Node webhook's exemption and never waits.
		PathCompletions: s.CompletionHandler(),
		PathHalts:       s.HaltRecordHandler(),
	}
}

// JobHandler guards the write that starts SUC's upgrade Job on a node.
func (s *Server) JobHandler() *handler {
	return &handler{resource: "jobs", decide: s.decideJob, log: s.Log.WithName("jobs"),
		contract: "jobs.md", reviews: []gate.Review{gate.ReviewPlan, gate.ReviewSUCStep, gate.ReviewAdmission},
		gvrs: []schema.GroupVersionResource{batchv1.SchemeGroupVersion.WithResource("jobs")}, kinds: []schema.GroupVersionKind{batchv1.SchemeGroupVersion.WithKind("Job")},
		ops: []admissionv1.Operation{admissionv1.Create, admissionv1.Update}}
}

// CompletionHandler guards SUC's completion write of a node.
func (s *Server) CompletionHandler() *handler {
	return &handler{resource: "completions", decide: s.decideCompletion, log: s.Log.WithName("completions"),
		contract: "completions.md", reviews: []gate.Review{gate.ReviewCompletion, gate.ReviewAdmission},
		gvrs: []schema.GroupVersionResource{corev1.SchemeGroupVersion.WithResource("nodes")}, kinds: []schema.GroupVersionKind{corev1.SchemeGroupVersion.WithKind("Node")},
		ops: []admissionv1.Operation{admissionv1.Update}}
}

func (s *Server) PlanHandler() *handler {
	return &handler{resource: "plans", decide: s.decidePlan, log: s.Log.WithName("plans"),
		contract: "plans.md", reviews: []gate.Review{gate.ReviewPlan, gate.ReviewAdmission},
		gvrs: []schema.GroupVersionResource{upgradev1.SchemeGroupVersion.WithResource("plans")}, kinds: []schema.GroupVersionKind{upgradev1.SchemeGroupVersion.WithKind("Plan")},
		ops: []admissionv1.Operation{admissionv1.Create, admissionv1.Update}}
}

func (s *Server) NodeHandler() *handler {
	return &handler{resource: "nodes", decide: s.decideNode, log: s.Log.WithName("nodes"),
		contract: "nodes.md", reviews: []gate.Review{gate.ReviewNode, gate.ReviewPlan, gate.ReviewAdmission},
		gvrs: []schema.GroupVersionResource{corev1.SchemeGroupVersion.WithResource("nodes")}, kinds: []schema.GroupVersionKind{corev1.SchemeGroupVersion.WithKind("Node")},
		ops: []admissionv1.Operation{admissionv1.Update}, subresources: []string{"status"}}
}

func (s *Server) RecordHandler() *handler {
	return &handler{resource: "configmaps", decide: s.decideRecord, log: s.Log.WithName("records"),
		contract: "records.md", reviews: []gate.Review{gate.ReviewRecord, gate.ReviewAdmission},
		gvrs: []schema.GroupVersionResource{corev1.SchemeGroupVersion.WithResource("configmaps")}, kinds: []schema.GroupVersionKind{corev1.SchemeGroupVersion.WithKind("ConfigMap")},
		ops: []admissionv1.Operation{admissionv1.Create, admissionv1.Update}}
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
