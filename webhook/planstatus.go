package webhook

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// PlanStatusHandler guards a Plan's status, which SUC alone may change
// (contract: planstatus.md).
func (s *Server) PlanStatusHandler() *handler {
	return &handler{resource: "plans/status", decide: s.decidePlanStatus, log: s.Log.WithName("planstatus"),
		contract: "planstatus.md", reviews: []gate.Review{gate.ReviewPlanStatus, gate.ReviewAdmission},
		gvrs: []schema.GroupVersionResource{upgradev1.SchemeGroupVersion.WithResource("plans")}, kinds: []schema.GroupVersionKind{upgradev1.SchemeGroupVersion.WithKind("Plan")},
		ops: []admissionv1.Operation{admissionv1.Update}, subresources: []string{"status"}}
}

// decidePlanStatus reviews a write of a Plan's status; it reads no facts.
func (s *Server) decidePlanStatus(_ context.Context, req admission.Request) (gate.Decision, error) {
	plan, err := upgradev1.DecodePlan(req.Object.Raw)
	if err != nil {
		return gate.Decision{}, fmt.Errorf("object: %w", err)
	}
	old, err := upgradev1.DecodePlan(req.OldObject.Raw)
	if err != nil {
		return gate.Decision{}, fmt.Errorf("oldObject: %w", err)
	}
	return gate.JudgePlanStatus(s.Config, gate.PlanStatusRequest{Object: "Plan " + plan.Namespace + "/" + plan.Name, Old: old, New: plan, User: userOf(req)}), nil
}
