package gate

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// targetRule: what the request says the node will run must be what the
// record qualifies (typed values byte for byte, as the anchor compares).
func targetRule(t *Transition, f *findings) {
	if !t.factsOK || t.After == nil || t.Dest == nil {
		return
	}
	if !t.Typed {
		diff := fleet.TupleDiff(t.versions, *t.After, *t.Dest, false)
		diff = append(diff, unnamedMoves(t, *t.After, *t.Dest)...)
		if len(diff) > 0 {
			f.add(targetNotQualified(t.Node.Name, t.Path, nil, targetTuple, t.Record.ID, t.After.String(), strings.Join(diff, ", ")))
		}
		return
	}
	for i := range componentTable {
		s := &componentTable[i]
		if got, want := s.Value(*t.After), s.Value(*t.Dest); got != want {
			f.add(targetNotQualified("", t.AfterPath[s.Name], got, targetTyped, t.Record.ID, string(s.Name), got, want))
		}
	}
}

// unnamedMoves are the optional members the change moves (the DRA driver's
// new image) that the destination does not name: a record qualifies only
// what it names, so moving one needs a record that names the new value.
func unnamedMoves(t *Transition, after, dest qualification.Tuple) []string {
	var out []string
	for i := range componentTable {
		s := &componentTable[i]
		if have, will := s.Value(t.Current), s.Value(after); s.Optional && strings.TrimSpace(s.Value(dest)) == "" && strings.TrimSpace(will) != "" && !fleet.SameTrimmed(have, will) {
			out = append(out, fmt.Sprintf("%s %s (the record names no %s; the change moves it from %s%s)", s.Name, qualification.Clip(will), s.Label, qualification.Clip(fleet.QuoteOrNone(have)), t.currentFrom(s.Name)))
		}
	}
	return out
}

type targetProblem int

const (
	targetTuple      targetProblem = iota // the node's tuple after the change (driver path)
	targetTyped                           // one typed target value (upgrade-check)
	targetDRAInstall                      // a Node write installs a DRA driver (rule_drainstall.go)
	targetPlanRKE2                        // a Plan's spec.version
	targetImageTag                        // a tag on a Plan's upgrade image
)

// targetNotQualified builds every TargetNotQualified blocker; args are the
// values the kind's sentence names, in order.
// planTargetRule (Plans): an RKE2 Plan's spec.version is the record's
// RKE2 target, and its image tag is spec.version.
func planTargetRule(rv review, f *findings, _ *Decision) {
	r, ok := rv.(*PlanReview)
	if !ok {
		return
	}
	spec := r.req.Plan.Spec
	if spec.Version == "" || !r.rke2Plan {
		return
	}
	if r.dest != nil && !SameComponent(ComponentRKE2, spec.Version, r.dest.RKE2) {
		f.add(targetNotQualified("", pathVersion, spec.Version, targetPlanRKE2, spec.Version, r.record.ID, r.dest.RKE2))
	}
	if spec.Upgrade == nil {
		return
	}
	if tag, ok := ImageVersion(spec.Upgrade.Image); ok && !SameComponent(ComponentRKE2, tag, spec.Version) {
		f.add(targetNotQualified("", pathImage, spec.Upgrade.Image, targetImageTag, tag, spec.Version))
	}
}

func targetNotQualified(node string, path *field.Path, value any, p targetProblem, args ...any) Blocker {
	switch p {
	case targetTyped:
		return invalid(CodeTargetNotQualified, node, path, value, "record %s: %s target %q is not the qualified value %q; type the record's target value", args...)
	case targetPlanRKE2:
		return invalid(CodeTargetNotQualified, node, path, value, "the Plan installs RKE2 %s but record %s qualifies %s; set spec.version to the qualified version or qualify this one on a canary", args...)
	case targetDRAInstall:
		// args: DaemonSet, version, the tuple then, the records and how they differ.
		return forbidden(CodeTargetNotQualified, node, path, "this write makes DaemonSet %[1]s schedule its DRA kubelet plugin on node %[5]s, installing DRA driver %[2]s there, so the node would run %[3]s, which no record for its hardware qualifies: %[4]s; "+
			"qualify that tuple on a canary first (a record whose target names DRA driver %[2]s), or keep the node out of the DaemonSet's scheduling", append(args, node)...)
	case targetImageTag:
		return invalid(CodeTargetNotQualified, node, path, value, "the upgrade image is pinned to %s, which SUC runs instead of spec.version %s; drop the tag so SUC uses spec.version", args...)
	}
	// args: record id, the tuple after, the differences.
	return forbidden(CodeTargetNotQualified, node, path, "node %[4]s would run %[2]s, which record %[1]s does not qualify: %[3]s; set the versions to a record's target, or name a record that qualifies this tuple", append(args, node)...)
}
