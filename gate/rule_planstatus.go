package gate

import (
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

var (
	pathStatus        = field.NewPath("status")
	pathApplying      = pathStatus.Child("applying")
	pathConditions    = pathStatus.Child("conditions")
	pathLatestHash    = pathStatus.Child("latestHash")
	pathLatestVersion = pathStatus.Child("latestVersion")
)

// PlanStatusRequest is one write of a Plan's status subresource.
type PlanStatusRequest struct {
	// Object names the Plan, e.g. "Plan system-upgrade/gpu-canary".
	Object   string
	Old, New *upgradev1.Plan
	User     UserInfo
}

// JudgePlanStatus (review plan-status): a Plan's status is SUC's record of
// its rollout and the gate relies on every field of it: status.applying
// (VersionEditInFlight, the budget), the Complete condition (RolloutInFlight
// takes a Complete Plan as having nothing pending) and latestHash (the plan
// label SUC sets on done nodes). So only a ServiceAccount of a SUC namespace
// (SUC itself) may change any of it; the CRD's structural schema prunes
// fields outside these four, so nothing else can change.
func JudgePlanStatus(cfg *Config, req PlanStatusRequest) Decision {
	d := Decision{Allowed: true, Object: req.Object}
	if isSUC(cfg, req.User) {
		return d
	}
	r := &planStatusReview{req: req}
	r.kinds, r.cfg, r.user = kindsPlanStatus, cfg, req.User
	var f findings
	applyTable(r, &f, &d)
	if len(f.blockers) > 0 {
		d.Allowed, d.Blockers = false, f.blockers
	}
	return d
}

// planStatusReview is a write of a Plan's status by other than SUC.
type planStatusReview struct {
	reviewBase
	req PlanStatusRequest
}

// planStatusRule (Plan status writes): no field SUC writes changes.
func planStatusRule(rv review, f *findings, _ *Decision) {
	r, ok := rv.(*planStatusReview)
	if !ok {
		return
	}
	cfg, req := r.cfg, r.req
	old, cur := &req.Old.Status, &req.New.Status
	if !slices.Equal(old.Applying, cur.Applying) {
		f.add(planStatusForged(req.User.Name, pathApplying, "["+strings.Join(old.Applying, ",")+"]", "["+strings.Join(cur.Applying, ",")+"]", cfg))
	}
	if !equality.Semantic.DeepEqual(old.Conditions, cur.Conditions) {
		f.add(planStatusForged(req.User.Name, pathConditions, conditionsSeen(old.Conditions), conditionsSeen(cur.Conditions), cfg))
	}
	if old.LatestHash != cur.LatestHash {
		f.add(planStatusForged(req.User.Name, pathLatestHash, strconv.Quote(old.LatestHash), strconv.Quote(cur.LatestHash), cfg))
	}
	if old.LatestVersion != cur.LatestVersion {
		f.add(planStatusForged(req.User.Name, pathLatestVersion, strconv.Quote(old.LatestVersion), strconv.Quote(cur.LatestVersion), cfg))
	}
}

// conditionsSeen is a Plan's conditions as "Type=Status" pairs.
func conditionsSeen(cs []upgradev1.GenericCondition) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = string(c.Type) + "=" + string(c.Status)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// isSUC: the requester is a ServiceAccount of a SUC namespace, as the API
// server authenticated it (its group, not a name it chose).
func isSUC(cfg *Config, u UserInfo) bool {
	return slices.ContainsFunc(sucGroups(cfg), func(g string) bool { return slices.Contains(u.Groups, g) })
}

func sucGroups(cfg *Config) []string {
	gs := make([]string, len(cfg.SUCNamespaces))
	for i, ns := range cfg.SUCNamespaces {
		gs[i] = serviceaccount.MakeNamespaceGroupName(ns)
	}
	return gs
}

// planStatusForged builds every PlanStatusForged blocker.
func planStatusForged(user string, path *field.Path, from, to string, cfg *Config) Blocker {
	return forbidden(CodePlanStatusForged, "", path,
		"user %q changes %s from %s to %s but is not SUC (a ServiceAccount of group %s); the gate relies on SUC's own record of its rollout (it holds version edits while nodes are applying and a second rollout while one is in flight): leave a Plan's status to SUC (to stop an upgrade, edit or delete the Plan)",
		user, path.String(), qualification.Clip(from), qualification.Clip(to), strings.Join(sucGroups(cfg), " or "))
}
