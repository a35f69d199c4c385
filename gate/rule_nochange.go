package gate

import "k8s.io/apimachinery/pkg/util/validation/field"

// noChangeRule (typed values only): a check of a move that moves nothing is
// a mistake in the flags.
func noChangeRule(t *Transition, f *findings) {
	if t.Typed && t.After != nil && *t.After == t.Current {
		f.add(noChange(t.AfterPath[ComponentKernel]))
	}
}

// noChange builds every NoChange blocker.
func noChange(path *field.Path) Blocker {
	return forbidden(CodeNoChange, "", path, "the current tuple already equals the target: at least one kernel, RKE2, driver, GPU Operator, or DCGM exporter target must change")
}
