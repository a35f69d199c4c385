package gate

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
)

// PlanSelector is SUC's node selection for a Plan (fleet.PlanSelector).
type PlanSelector = fleet.PlanSelector

// NewPlanSelector is SUC's selection for a stored Plan (fleet.NewPlanSelector).
func NewPlanSelector(p *upgradev1.Plan) (*PlanSelector, error) { return fleet.NewPlanSelector(p) }

// reviewSelector is the selection SUC will make once it has processed the
// Plan as written: with the status.latestHash SUC will compute for it when
// the gate can compute it (PredictHash), the stored one while nothing SUC
// hashes changes, and otherwise any hash (every selected node is pending).
// The stored hash alone would fail open: a new version gets a new hash,
// and SUC then selects every node labelled with the old one.
func reviewSelector(req PlanRequest) (*PlanSelector, error) {
	s, err := NewPlanSelector(req.Plan)
	if err != nil {
		return nil, err
	}
	if h, ok := PredictHash(req.Plan); ok {
		return s.WithHash(h), nil
	}
	if old := req.OldPlan; old != nil && old.Status.LatestHash != "" && sameHashInputs(old, req.Plan) {
		return s.WithHash(old.Status.LatestHash), nil
	}
	return s.AnyHash(), nil
}

// PredictHash is the status.latestHash SUC v0.20.1 computes for the Plan
// (DigestStatus: hex SHA-224 over the resolved version, with + turned into
// -, and spec.serviceAccountName), when it depends on nothing else: a
// pinned spec.version, no upgrade.cattle.io/digest annotation and no Secret
// whose updates are hashed. ok=false otherwise.
func PredictHash(p *upgradev1.Plan) (hash string, ok bool) {
	if p.Spec.Version == "" || p.Annotations[upgradev1.AnnotationDigest] != "" {
		return "", false
	}
	if slices.ContainsFunc(p.Spec.Secrets, func(s upgradev1.SecretSpec) bool { return !s.IgnoreUpdates }) {
		return "", false
	}
	h := sha256.New224()
	h.Write([]byte(strings.ReplaceAll(p.Spec.Version, "+", "-")))
	h.Write([]byte(p.Spec.ServiceAccountName))
	return fmt.Sprintf("%x", h.Sum(nil)), true
}

// sameHashInputs: nothing SUC folds into the hash differs between the two.
func sameHashInputs(a, b *upgradev1.Plan) bool {
	return a.Spec.Version == b.Spec.Version && a.Spec.Channel == b.Spec.Channel &&
		a.Spec.ServiceAccountName == b.Spec.ServiceAccountName &&
		a.Annotations[upgradev1.AnnotationDigest] == "" && b.Annotations[upgradev1.AnnotationDigest] == "" &&
		slices.EqualFunc(a.Spec.Secrets, b.Spec.Secrets, func(x, y upgradev1.SecretSpec) bool {
			return x.Name == y.Name && x.IgnoreUpdates == y.IgnoreUpdates
		})
}

// PendingNodes are the nodes SUC would select for a stored Plan, by name:
// the set the real SUC is compared with.
func PendingNodes(p *upgradev1.Plan, nodes []*corev1.Node) ([]string, error) {
	s, err := NewPlanSelector(p)
	if err != nil {
		return nil, err
	}
	// Through the index, so the comparison with the real SUC covers it.
	var out []string
	x := NewNodeIndex(&Config{}, nodes, nil)
	x.Selecting(s, func(i int32) {
		if n := x.Node(i); s.Pending(n) {
			out = append(out, n.Name)
		}
	})
	slices.Sort(out)
	return out, nil
}

// planSelector is the selector of the cluster's i-th stored Plan: the
// adapter's when it keeps them, else converted now.
func (cl *Cluster) planSelector(i int) (*PlanSelector, error) {
	if i < len(cl.PlanSelectors) && cl.PlanSelectors[i] != nil {
		return cl.PlanSelectors[i], nil
	}
	return NewPlanSelector(cl.Plans[i])
}
