package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Register serves the three handlers on the webhook server.
func (s *Server) Register(srv webhook.Server) {
	srv.Register(PathPlans, &webhook.Admission{Handler: s.PlanHandler()})
	srv.Register(PathNodes, &webhook.Admission{Handler: s.NodeHandler()})
	srv.Register(PathRecords, &webhook.Admission{Handler: s.RecordHandler()})
	srv.Register(PathDriver, &webhook.Admission{Handler: s.DriverHandler()})
}

func (s *Server) PlanHandler() *handler {
	return &handler{resource: "plans", decide: s.decidePlan, log: s.Log.WithName("plans"),
		gvrs: []schema.GroupVersionResource{upgradev1.SchemeGroupVersion.WithResource("plans")}, kinds: []schema.GroupVersionKind{upgradev1.SchemeGroupVersion.WithKind("Plan")},
		ops: []admissionv1.Operation{admissionv1.Create, admissionv1.Update}}
}

func (s *Server) NodeHandler() *handler {
	return &handler{resource: "nodes", decide: s.decideNode, log: s.Log.WithName("nodes"),
		gvrs: []schema.GroupVersionResource{corev1.SchemeGroupVersion.WithResource("nodes")}, kinds: []schema.GroupVersionKind{corev1.SchemeGroupVersion.WithKind("Node")},
		ops: []admissionv1.Operation{admissionv1.Update}}
}

func (s *Server) RecordHandler() *handler {
	return &handler{resource: "configmaps", decide: s.decideRecord, log: s.Log.WithName("records"),
		gvrs: []schema.GroupVersionResource{corev1.SchemeGroupVersion.WithResource("configmaps")}, kinds: []schema.GroupVersionKind{corev1.SchemeGroupVersion.WithKind("ConfigMap")},
		ops: []admissionv1.Operation{admissionv1.Create, admissionv1.Update}}
}

// decodeObject decodes a core object, tolerating fields a newer API server
// adds, and refuses a body whose kind is not the expected one.
func decodeObject(raw []byte, obj interface{ GetObjectKind() schema.ObjectKind }, kind string) error {
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(obj); err != nil {
		return err
	}
	if k := obj.GetObjectKind().GroupVersionKind(); k.Kind != kind || k.Group != "" {
		return fmt.Errorf("body is apiVersion %q kind %q, expected v1 %s", k.GroupVersion(), k.Kind, kind)
	}
	return nil
}

// factsUnavailable fails closed when the caches cannot answer.
func factsUnavailable(object string, err error) gate.Decision {
	return gate.Decision{Object: object, Blockers: []gate.Blocker{{Code: gate.CodeFactsMissing,
		Err: field.InternalError(field.NewPath("metadata"), fmt.Errorf("cluster facts cannot be read (%v); the gate never allows what it cannot check: retry shortly", err))}}}
}

func fieldError(err error) *field.Error {
	var fe *field.Error
	if errors.As(err, &fe) {
		return fe
	}
	return field.Invalid(field.NewPath("request"), nil, err.Error())
}
