package gate

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// ownedFactRule (review-level, Nodes): on a GPU node, or a write that makes
// one, a label the ownership table gives an owner is written only by an
// identity whose exemption lists it (ownership.go). A made-up second PCI
// identity label changes the node's hardware set for proof, budget and halt
// detection; a person's driver-version label hides SourceMismatch until GFD
// rewrites it (issue 22 attacks 2 and 5). Inputs (mode labels, mig.config,
// gpu.deploy.*) stay people's and are judged by the rules that read them;
// SUC's documented opt-out (plan.upgrade.cattle.io/<plan>=disabled) stays a
// person's right, and so does removing a plan label: SUC then selects the
// node again, which pulls it into the Plan and its rules (webhook/nodes.md).
// A GPU identity label a person removes is GPUIdentityRemoved's (rule_identity.go), not reported twice.
func ownedFactRule(rv review, f *findings, _ *Decision) {
	r, ok := rv.(*NodeReview)
	if !ok || !r.gpu {
		return
	}
	n, old := r.req.Node, r.req.OldNode
	for _, k := range r.changed {
		fact := factOfLabel(k)
		if fact == nil || fact.Input || slices.Contains(r.own, fact.Name) {
			continue
		}
		v, set := n.Labels[k]
		was, wasSet := old.Labels[k]
		if fact.Name == FactPlanLabels && (!set || v == upgradev1.LabelPlanValueDisabled) {
			continue // an opt-out, or asking SUC to run the Plan again: the Plan's rules judge that
		}
		if wasSet && r.cfg.isGPULabel(k, was) && (!set || !r.cfg.isGPULabel(k, v)) {
			continue // GPUIdentityRemoved
		}
		f.add(ownedFactWritten(n.Name, r.req.User.Name, k, was, wasSet, v, set, fact, r.cfg.ownersOf(fact.Name)))
	}
}

// ownedFactWritten builds every OwnedFactWritten blocker.
func ownedFactWritten(node, user, key, was string, wasSet bool, now string, set bool, fact *Fact, owners string) Blocker {
	change := fmt.Sprintf("set to %q", qualification.Clip(now))
	switch {
	case !set:
		change = fmt.Sprintf("removed (was %q)", qualification.Clip(was))
	case wasSet:
		change = fmt.Sprintf("changed from %q to %q", qualification.Clip(was), qualification.Clip(now))
	}
	return forbidden(CodeOwnedFactWritten, node, field.NewPath("metadata", "labels").Key(key),
		"label %s %s on GPU node %s by %s: it is one of the %s, owned by %s; configured writers: %s. Instead %s, or break glass (docs/ownership.md)",
		key, change, node, user, fact.Name, fact.Owner, owners, fact.Instead)
}
