package gate

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// cordonedByOtherRule (review-level, Plans and SUC's per-node step): an
// upgrade does not start on a GPU node someone other than SUC cordoned (a
// health agent, the GPU Operator, a person after an incident): the node is
// out for that reason, and SUC would uncordon it when its Job ends. An
// explicit hand-over (AnnotationCordonHandover, written by someone other
// than the rollout's requester) lets it proceed.
func cordonedByOtherRule(rv review, f *findings, _ *Decision) {
	r, ok := rv.(*PlanReview)
	if !ok {
		return
	}
	requester := r.req.Plan.Annotations[AnnotationRequestedBy]
	if requester == "" {
		requester = r.req.User.Name
	}
	idx := r.cl.nodeIndex(r.cfg)
	for _, nf := range r.pending {
		n := idx.GPUByName(r.cfg, nf.Name)
		if n == nil || !n.Spec.Unschedulable {
			continue
		}
		h := r.cfg.cordonHolderOf(r.cl, n)
		if h.SUC || (h.HandedOver != "" && h.HandedOver != requester) {
			continue
		}
		act := "start the upgrade of Plan " + r.req.Plan.Namespace + "/" + r.req.Plan.Name + " on it"
		f.add(cordonedByOther(n.Name, pathSelector, act, h, requester))
	}
}

// cordonUncordonRule (review-level, Nodes and SUC's completion write): SUC
// does not uncordon a GPU node someone else cordoned (unless handed over),
// and a person does not uncordon one SUC's live Job is upgrading.
func cordonUncordonRule(rv review, f *findings, _ *Decision) {
	switch r := rv.(type) {
	case *NodeReview:
		uncordonCordoned(r.cfg, r.cl, r.req, isSUC(r.cfg, r.req.User), f)
	case *completionReview:
		uncordonCordoned(r.cfg, r.cl, r.req, true, f) // the completion webhook sees no one else
	}
}

// uncordonCordoned judges an uncordon of req's node; suc: the writer is SUC.
func uncordonCordoned(cfg *Config, cl *Cluster, req NodeRequest, suc bool, f *findings) {
	n, old := req.Node, req.OldNode
	if !old.Spec.Unschedulable || n.Spec.Unschedulable || (!cfg.IsGPUNode(n) && !cfg.IsGPUNode(old)) {
		return
	}
	h := cfg.cordonHolderOf(cl, old)
	switch {
	case suc && !h.SUC && h.HandedOver == "":
		f.add(cordonedByOther(n.Name, pathUnschedulable, "be uncordoned by SUC", h, ""))
	case !suc && h.SUC && liveJob(cl, n.Name) != "":
		f.add(cordonedByOther(n.Name, pathUnschedulable, "be uncordoned by "+req.User.Name, cordonHolder{Actor: liveJob(cl, n.Name), SUC: true}, ""))
	}
}

var pathUnschedulable = field.NewPath("spec", "unschedulable")

// liveJob names SUC's live Job for the node, "" for none.
func liveJob(cl *Cluster, node string) string {
	if j := cl.fleetView().LiveSUCJob(node); j != nil {
		return "SUC's Job " + j.Namespace + "/" + j.Name
	}
	return ""
}

// handoverRule (review-level, Node writes): the cordon-handover annotation
// names its writer, so the hand-over is audited and its writer is known
// not to be the rollout's requester.
func handoverRule(rv review, f *findings, _ *Decision) {
	if r, ok := rv.(*NodeReview); ok {
		nodeAttestation(r.req, AnnotationCordonHandover, f)
	}
}

// nodeAttestation refuses a write that sets or changes annotation key on a
// Node to anything but its writer's username (or removes it).
func nodeAttestation(req NodeRequest, key string, f *findings) {
	v, set := req.Node.Annotations[key]
	was, had := req.OldNode.Annotations[key]
	if v == was && set == had {
		return
	}
	if !set || v != req.User.Name {
		f.add(nodeAttestationForged(req.Node.Name, key, v, set, req.User.Name))
	}
}

// cordonedByOther builds every CordonedByOther blocker: h.suc when a
// person's uncordon meets SUC's running Job.
func cordonedByOther(node string, path *field.Path, act string, h cordonHolder, requester string) Blocker {
	if h.SUC {
		return forbidden(CodeCordonedByOther, node, path, "GPU node %s is cordoned by %s, which is upgrading it now, so it may not %s: wait until the Job ends and the node is proven (docs/rollout.md)", node, h, act)
	}
	not := ""
	if requester != "" {
		not = fmt.Sprintf(" other than the rollout's requester %s", requester)
	}
	handed := ""
	if h.HandedOver != "" {
		handed = fmt.Sprintf(" (annotation %s=%q is the requester's own, which does not count)", AnnotationCordonHandover, h.HandedOver)
	}
	return forbidden(CodeCordonedByOther, node, path, "GPU node %s was cordoned by %s, not by SUC for this upgrade, so it may not %s%s: it is out for that reason; wait until whoever cordoned it is done, or have someone%s hand it over: kubectl annotate node %s %s=<your username> (docs/rollout.md)",
		node, h, act, handed, not, node, AnnotationCordonHandover)
}

// nodeAttestationForged builds every NodeAttestationForged blocker.
func nodeAttestationForged(node, key, v string, set bool, user string) Blocker {
	seen := "is removed"
	if set {
		seen = fmt.Sprintf("is set to %q", v)
	}
	return forbidden(CodeNodeAttestationForged, node, field.NewPath("metadata", "annotations").Key(key), "annotation %s on GPU node %s %s by %q; it names who wrote it (the gate reads it as an audited fact), so set it to %q",
		key, node, seen, user, user)
}
