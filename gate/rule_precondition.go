package gate

import (
	"fmt"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/precondition"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// preconditionRule (review-level): a GPU node's upgrade starts (a Plan or
// a Node write that moves GPU nodes, SUC's Job start on a GPU node, a
// driver change and its per-node step), and SUC completes an upgraded GPU
// node (uncordons it or marks it done), only while every declared
// precondition holds. One that cannot be judged, or an alerts source not
// read within its maxAge, fails closed. The readings are the adapter's
// (Cluster.Preconditions): admission never waits on a source.
func preconditionRule(rv review, f *findings, _ *Decision) {
	b := rv.base()
	if len(b.cfg.Preconditions) == 0 {
		return
	}
	var step string
	switch r := rv.(type) {
	case *NodeReview:
		return // a Plan it pulls the node into is judged as that Plan
	case *completionReview:
		n, old := r.req.Node, r.req.OldNode
		uncordon := old.Spec.Unschedulable && !n.Spec.Unschedulable
		if (!uncordon && len(markedDone(old, n)) == 0) || (!b.cfg.IsGPUNode(n) && !b.cfg.IsGPUNode(old)) {
			return
		}
		step = "upgraded GPU node " + n.Name + " completes"
	default:
		if len(b.ts) == 0 {
			return // moves no GPU node
		}
		step = "a GPU upgrade starts"
		if b.act != "" {
			step += " (" + b.act + ")"
		}
	}
	for _, p := range b.cfg.Preconditions {
		r := b.cl.precondition(p.Name)
		if state, seen := r.At(b.now); state != precondition.Holds {
			f.add(preconditionBlocker(p, state, seen, step))
		}
	}
}

// precondition is the named precondition's reading in the cluster; one the
// adapter did not read is unknown.
func (cl *Cluster) precondition(name string) precondition.Reading {
	for _, r := range cl.Preconditions {
		if r.Precondition.Name == name {
			return r
		}
	}
	return precondition.Reading{State: precondition.Unknown, Seen: "the gate has not read it"}
}

// preconditionBlocker builds every PreconditionFailed, PreconditionUnknown
// and PreconditionStale blocker.
func preconditionBlocker(p precondition.Precondition, state precondition.State, seen, step string) Blocker {
	code, verdict, then := CodePreconditionFailed, "does not hold", "resolve it, then retry (the upgrade resumes once it holds)"
	switch state {
	case precondition.Unknown:
		code, verdict, then = CodePreconditionUnknown, "cannot be judged (which counts as failed)", "make it readable (the objects, RBAC, the expression over what the objects hold), then retry"
	case precondition.Stale:
		code, verdict, then = CodePreconditionStale, "has no fresh reading (which counts as failed)", "make the alert source reachable from the gate (its URL, NetworkPolicy), then retry"
	}
	msg := ""
	if p.Message != "" {
		msg = " (" + qualification.Clip(p.Message) + ")"
	}
	return forbidden(code, "", nil, "precondition %s%s %s before %s: %s; %s", p.Name, msg, verdict, step, qualification.Clip(seen), then)
}

// PreconditionReads names what a precondition reads, for inventory.
func PreconditionReads(p precondition.Precondition) string {
	switch {
	case p.CEL != nil:
		return fmt.Sprintf("cel over %s: %s", p.CEL.Where(), p.CEL.Expression)
	case p.Alerts != nil:
		return fmt.Sprintf("alerts at %s: %s", p.Alerts.URL, p.Alerts.Matcher())
	}
	return p.Kind
}
