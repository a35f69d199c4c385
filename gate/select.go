package gate

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// PlanSelector is the set of nodes SUC would consider for a Plan: its
// nodeSelector (absent selects nothing, {} selects all), nodes that carry
// kubernetes.io/hostname, and not opted out with plan.upgrade.cattle.io/<plan>=disabled.
type PlanSelector struct {
	selector labels.Selector
	optOut   string
}

// NewPlanSelector converts the Plan's selector; an error names the bad value.
func NewPlanSelector(p *upgradev1.Plan) (*PlanSelector, error) {
	var sel labels.Selector
	if p.Spec.NodeSelector == nil {
		sel = labels.Nothing()
	} else {
		s, err := metav1.LabelSelectorAsSelector(p.Spec.NodeSelector)
		if err != nil {
			return nil, fmt.Errorf("spec.nodeSelector is not a valid label selector: %w", err)
		}
		sel = s
	}
	return &PlanSelector{selector: sel, optOut: upgradev1.LabelPlanPrefix + p.Name}, nil
}

// Matches says whether SUC would run the Plan on the node.
func (s *PlanSelector) Matches(n *corev1.Node) bool {
	if _, ok := n.Labels[upgradev1.LabelHostname]; !ok {
		return false
	}
	if n.Labels[s.optOut] == "disabled" {
		return false
	}
	return s.selector.Matches(labels.Set(n.Labels))
}
