package webhook

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

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
