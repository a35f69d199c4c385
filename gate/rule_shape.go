package gate

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// The Plan's shape (review-level): rules that read only the Plan and its
// selection. One builder per code: SelectorInvalid, MixedPlan,
// UnpinnedVersion, CordonRequired (ConcurrencyNotSerial: rule_concurrency.go).

func planShapeRules(f *findings, p *upgradev1.Plan, gpu, nonGPU []string) {
	if len(nonGPU) > 0 {
		f.add(mixedPlan(gpu, nonGPU))
	}
	if p.Spec.Version == "" {
		f.add(unpinnedVersion(p.Spec.Channel))
	}
	if p.Spec.Concurrency != 1 {
		f.add(concurrencyNotSerial("", pathConcurrency, p.Spec.Concurrency, concurrencyPlan))
	}
	if !p.Spec.Cordon && p.Spec.Drain == nil {
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
