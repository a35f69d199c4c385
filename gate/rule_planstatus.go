package gate

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

var pathApplying = field.NewPath("status", "applying")

// PlanStatusRequest is one write of a Plan's status subresource.
type PlanStatusRequest struct {
	// Object names the Plan, e.g. "Plan system-upgrade/gpu-canary".
	Object   string
	Old, New *upgradev1.Plan
	User     UserInfo
}

// JudgePlanStatus (review plan-status): status.applying is SUC's record of
// the nodes it is upgrading, and VersionEditInFlight relies on it, so only
// a ServiceAccount of a SUC namespace (SUC itself) may change it. Every
// other status write is allowed: the gate relies on nothing else there.
func JudgePlanStatus(cfg *Config, req PlanStatusRequest) Decision {
	d := Decision{Allowed: true, Object: req.Object}
	old, cur := req.Old.Status.Applying, req.New.Status.Applying
	if slices.Equal(old, cur) || isSUC(cfg, req.User) {
		return d
	}
	d.Allowed = false
	d.Blockers = []Blocker{planStatusForged(req.User.Name, old, cur, sucGroups(cfg))}
	return d
}

// isSUC: the requester is a ServiceAccount of a SUC namespace, as the API
// server authenticated it (its group, not a name it chose).
func isSUC(cfg *Config, u UserInfo) bool {
	return slices.ContainsFunc(sucGroups(cfg), func(g string) bool { return slices.Contains(u.Groups, g) })
}

func sucGroups(cfg *Config) []string {
	gs := make([]string, len(cfg.SUCNamespaces))
	for i, ns := range cfg.SUCNamespaces {
		gs[i] = "system:serviceaccounts:" + ns
	}
	return gs
}

// planStatusForged builds every PlanStatusForged blocker.
func planStatusForged(user string, from, to []string, groups []string) Blocker {
	return forbidden(CodePlanStatusForged, "", pathApplying,
		"user %q changes status.applying from [%s] to [%s] but is not SUC (a ServiceAccount of group %s); the gate holds version edits while SUC upgrades the nodes listed there: leave status.applying to SUC (to stop an upgrade, edit or delete the Plan)",
		user, strings.Join(from, ","), strings.Join(to, ","), strings.Join(groups, " or "))
}
