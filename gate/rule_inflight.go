package gate

import "strings"

// inFlightRule (Plans): SUC deletes running upgrade Jobs when the version
// changes.
func inFlightRule(rv review, f *findings, _ *Decision) {
	r, ok := rv.(*PlanReview)
	if !ok {
		return
	}
	old := r.req.OldPlan
	if r.req.Operation != "UPDATE" || old == nil || len(old.Status.Applying) == 0 {
		return
	}
	if p := r.req.Plan; old.Spec.Version != p.Spec.Version || old.Spec.Channel != p.Spec.Channel {
		f.add(versionEditInFlight(old.Spec.Version, p.Spec.Version, old.Status.Applying))
	}
}

// versionEditInFlight builds every VersionEditInFlight blocker.
func versionEditInFlight(from, to string, applying []string) Blocker {
	return invalid(CodeVersionEditInFlight, "", pathVersion, to, "the version changes from %q to %q while SUC is upgrading %s; SUC would delete those running Jobs mid-upgrade: wait until status.applying is empty", from, to, strings.Join(applying, ","))
}
