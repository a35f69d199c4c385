package gate

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The Plan's shape (review-level): rules that read only the Plan and its
// selection. One builder per code: SelectorInvalid, MixedPlan,
// UnpinnedVersion, CordonRequired (ConcurrencyNotSerial: rule_concurrency.go).

// shapeRule (Plans): a selector SUC can read (else the review ends here),
// GPU nodes only, a pinned version.
func shapeRule(rv review, f *findings, _ *Decision) {
	r, ok := rv.(*PlanReview)
	if !ok {
		return
	}
	p := r.req.Plan
	if r.selErr != nil {
		f.add(selectorInvalid(p.Spec.NodeSelector, r.selErr))
		r.stop()
		return
	}
	if len(r.nonGPU) > 0 {
		f.add(mixedPlan(r.gpu, r.nonGPUNames()))
	}
	if p.Spec.Version == "" {
		f.add(unpinnedVersion(p.Spec.Channel))
	}
}

// cordonRule (Plans): SUC cordons (or drains) each node it upgrades.
func cordonRule(rv review, f *findings, _ *Decision) {
	if r, ok := rv.(*PlanReview); ok && !r.req.Plan.Spec.Cordon && r.req.Plan.Spec.Drain == nil {
		f.add(cordonRequired())
	}
}

// selectorInvalid builds every SelectorInvalid blocker.
func selectorInvalid(sel any, err error) Blocker {
	return invalid(CodeSelectorInvalid, "", pathSelector, sel, "%v; fix the selector (SUC would fail on it too)", err)
}

// mixedPlan builds every MixedPlan blocker.
func mixedPlan(gpu, nonGPU []string) Blocker {
	return forbidden(CodeMixedPlan, "", pathSelector, "the Plan selects %d GPU node(s) (%s) and %d non-GPU node(s) (%s); give GPU nodes their own serialized Plan and exclude them from this one (e.g. nvidia.com/gpu.present DoesNotExist)",
		len(gpu), nodeList(gpu), len(nonGPU), nodeList(nonGPU))
}

// unpinnedVersion builds every UnpinnedVersion blocker.
func unpinnedVersion(channel string) Blocker {
	what := "spec.version is empty"
	if channel != "" {
		what = fmt.Sprintf("spec.version is empty and spec.channel %q moves under a qualified record", channel)
	}
	return required(CodeUnpinnedVersion, "", pathVersion, "%s; pin spec.version to the record's qualified version", what)
}

// cordonRequired builds every CordonRequired blocker.
func cordonRequired() Blocker {
	return Blocker{Code: CodeCordonRequired, Err: field.Required(pathCordon, "neither spec.cordon: true nor spec.drain is set, so new GPU work could land on a node mid-upgrade; set spec.cordon: true (or a drain)")}
}
