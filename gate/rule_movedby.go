package gate

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// AnnotationMovedBy on a GPU Node names who pulled it into a GPU Plan: the
// Node webhook admits it only when it equals that write's user, so a halt
// of the node names them beside the Plan's requester, and neither clears
// it (issue 22 item 4).
const AnnotationMovedBy = "gpu-upgrade-gate.io/moved-by"

// movedByRule (review-level, Node writes): a write that pulls the node
// into a GPU Plan names its writer in moved-by (with requireMover, the
// default); a write of moved-by names its writer.
func movedByRule(rv review, f *findings, _ *Decision) {
	r, ok := rv.(*NodeReview)
	if !ok {
		return
	}
	n, old := r.req.Node, r.req.OldNode
	if keyChanged(n.Annotations, old.Annotations, AnnotationMovedBy) {
		nodeAttestation(r.req, AnnotationMovedBy, f)
		return
	}
	v, set := n.Annotations[AnnotationMovedBy]
	switch {
	case len(r.plans) == 0:
	case set && v != r.req.User.Name: // a moved-by left from an earlier move
		f.add(nodeAttestationForged(n.Name, AnnotationMovedBy, v, set, r.req.User.Name))
	case !set && r.cfg.RequireMover:
		plans := make([]string, len(r.plans))
		for i, pr := range r.plans {
			plans[i] = pr.req.Plan.Namespace + "/" + pr.req.Plan.Name
		}
		slices.Sort(plans)
		f.add(movedByMissing(n.Name, plans, r.req.User.Name))
	}
}

// movedByMissing builds every MovedByMissing blocker.
func movedByMissing(node string, plans []string, user string) Blocker {
	return Blocker{Code: CodeMovedByMissing, Err: field.Required(field.NewPath("metadata", "annotations").Key(AnnotationMovedBy), fmt.Sprintf(
		"this write pulls GPU node %s into GPU Plan(s) %s without naming who moves it (a halt of the node names them, and they may not clear it); add your username in the same write: metadata.annotations: {%s: %q}",
		node, nodeList(plans), AnnotationMovedBy, qualification.Clip(user)))}
}
