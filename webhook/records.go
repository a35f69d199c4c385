package webhook

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// decideRecord reviews a record ConfigMap CREATE or UPDATE (contract:
// records.md). Unlabelled ConfigMaps and other namespaces are not records.
func (s *Server) decideRecord(_ context.Context, req admission.Request) (gate.Decision, error) {
	var cm corev1.ConfigMap
	if err := decodeObject(req.Object.Raw, &cm, "ConfigMap"); err != nil {
		return gate.Decision{}, fmt.Errorf("object: %w", err)
	}
	if cm.Namespace != s.Config.Namespace || cm.Labels[qualification.ConfigMapLabel] != "true" {
		return gate.Decision{Allowed: true, Object: "ConfigMap " + cm.Namespace + "/" + cm.Name}, nil
	}
	var old *corev1.ConfigMap
	if req.Operation == admissionv1.Update {
		old = &corev1.ConfigMap{}
		if err := decodeObject(req.OldObject.Raw, old, "ConfigMap"); err != nil {
			return gate.Decision{}, fmt.Errorf("oldObject: %w", err)
		}
	}
	return gate.DecideRecord(s.Config, gate.RecordRequest{ConfigMap: &cm, Old: old, Update: req.Operation == admissionv1.Update, User: userOf(req), Now: s.now()}), nil
}
