package fleet

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// PlanSelector is SUC's node selection for a Plan (v0.20.1,
// pkg/upgrade/plan SelectConcurrentNodes before its concurrency cut): the
// nodeSelector (absent selects nothing, {} selects all), and
// kubernetes.io/hostname present, and the label plan.upgrade.cattle.io/<plan>
// NotIn {disabled, status.latestHash} (NotIn also holds when the label is
// absent). A node it matches is pending: SUC will cordon, drain and run its
// upgrade Job there, whatever tuple the node runs now.
type PlanSelector struct {
	selector labels.Selector
	label    string
	hash     string
	// unknownHash: the hash SUC will hold is not known, so every selected node
	// that is not opted out counts as pending (fail closed).
	unknownHash bool
}

// NewPlanSelector is SUC's selection for a stored Plan, with its
// status.latestHash; an error names the bad selector. Converting validates
// every key and value, which costs more than matching all nodes: adapters
// keep the selectors of stored Plans (Cluster.PlanSelectors).
func NewPlanSelector(p *upgradev1.Plan) (*PlanSelector, error) {
	s := &PlanSelector{selector: labels.Nothing(), label: upgradev1.LabelPlanName(p.Name), hash: p.Status.LatestHash}
	if p.Spec.NodeSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.NodeSelector)
		if err != nil {
			return nil, fmt.Errorf("spec.nodeSelector is not a valid label selector: %w", err)
		}
		s.selector = sel
	}
	return s, nil
}

// Matches says whether SUC would select the node for the Plan now.
func (s *PlanSelector) Matches(n *corev1.Node) bool { return s.Selects(n) && s.Pending(n) }

// Selects: the nodeSelector and hostname match and the node is not opted out.
func (s *PlanSelector) Selects(n *corev1.Node) bool {
	if !s.selector.Matches(labels.Set(n.Labels)) {
		return false
	}
	if _, ok := n.Labels[upgradev1.LabelHostname]; !ok {
		return false
	}
	return n.Labels[s.label] != "disabled"
}

// Pending: SUC has not applied the Plan's current hash to the node.
func (s *PlanSelector) Pending(n *corev1.Node) bool {
	v, ok := n.Labels[s.label]
	return s.unknownHash || !ok || v != s.hash
}

// AnyHash is the selection when the hash is unknown.
func (s *PlanSelector) AnyHash() *PlanSelector {
	c := *s
	c.unknownHash = true
	return &c
}

// WithHash is the selection once SUC holds status.latestHash h.
func (s *PlanSelector) WithHash(h string) *PlanSelector {
	c := *s
	c.hash = h
	return &c
}

// Label is the Plan's plan.upgrade.cattle.io/<plan> label, Hash the
// status.latestHash the selection compares it with.
func (s *PlanSelector) Label() string { return s.label }

// Hash: see Label.
func (s *PlanSelector) Hash() string { return s.hash }

// UnknownHash: every selected node that is not opted out is pending.
func (s *PlanSelector) UnknownHash() bool { return s.unknownHash }
