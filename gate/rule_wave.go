package gate

import (
	"strings"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// waveRule (Plans): one canary at a time; a wider wave only
// after a proven canary, and within one failure domain. Every pending node
// counts, including one already at the destination: SUC still cordons,
// drains and runs its Job.
func waveRule(rv review, f *findings, d *Decision) {
	r, ok := rv.(*PlanReview)
	if !ok {
		return
	}
	n := len(r.pending)
	if n > r.cfg.WaveSize {
		f.add(multipleCanaries(r.HolderNodes(), r.cfg.WaveSize, r.req.Plan.Name))
	}
	if r.cfg.WaveSize <= 1 || n <= 1 {
		return
	}
	if r.record != nil && !r.canaryProven(d) {
		f.add(canaryNotProven(n, r.record.NormalizedHardware()))
	}
	zones := map[string]bool{}
	for _, nf := range r.pending {
		zones[nf.Zone] = true
	}
	if len(zones) > 1 {
		f.add(crossFailureDomain(sortedKeys(zones)))
	}
}

// multipleCanaries builds every MultipleCanaries blocker.
func multipleCanaries(nodes []string, wave int, plan string) Blocker {
	return forbidden(CodeMultipleCanaries, "", pathSelector, "the Plan would upgrade %d GPU nodes (%s) but the wave size is %d; narrow spec.nodeSelector (e.g. kubernetes.io/hostname In [one node]) or label nodes %s=disabled", len(nodes), nodeList(nodes), wave, upgradev1.LabelPlanName(plan))
}

// canaryNotProven builds every CanaryNotProven blocker.
func canaryNotProven(n int, hardware []string) Blocker {
	return forbidden(CodeCanaryNotProven, "", pathSelector, "a wave of %d GPU nodes needs a proven canary first, but no Ready, schedulable node of hardware %s runs the target tuple and is proven (docs/proof.md) yet; upgrade one canary node, prove it, then widen the wave", n, strings.Join(hardware, ","))
}

// crossFailureDomain builds every CrossFailureDomain blocker.
func crossFailureDomain(zones []string) Blocker {
	return forbidden(CodeCrossFailureDomain, "", pathSelector, "the wave spans zones %s; keep one wave within one %s so a bad tuple cannot take out every zone", strings.Join(zones, ","), LabelZone)
}
