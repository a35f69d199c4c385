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
// Converting validates every key and value, which costs more than matching
// all nodes: adapters keep the selectors of stored Plans (Cluster.PlanSelectors).
func NewPlanSelector(p *upgradev1.Plan) (*PlanSelector, error) {
	s := &PlanSelector{selector: labels.Nothing(), optOut: upgradev1.LabelPlanPrefix + p.Name}
	if p.Spec.NodeSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.NodeSelector)
		if err != nil {
			return nil, fmt.Errorf("spec.nodeSelector is not a valid label selector: %w", err)
		}
		s.selector = sel
	}
	return s, nil
}

// Matches says whether SUC would run the Plan on the node.
func (s *PlanSelector) Matches(n *corev1.Node) bool {
	if !s.selector.Matches(labels.Set(n.Labels)) {
		return false
	}
	if _, ok := n.Labels[upgradev1.LabelHostname]; !ok {
		return false
	}
	return n.Labels[s.optOut] != "disabled"
}

// planSelector is the selector of the cluster's i-th stored Plan: the
// adapter's when it keeps them, else converted now.
func (cl *Cluster) planSelector(i int) (*PlanSelector, error) {
	if i < len(cl.PlanSelectors) && cl.PlanSelectors[i] != nil {
		return cl.PlanSelectors[i], nil
	}
	return NewPlanSelector(cl.Plans[i])
}
