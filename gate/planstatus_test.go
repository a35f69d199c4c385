package gate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// TestJudgePlanStatus: only SUC changes a Plan's status (every field of it
// is something the gate relies on); a write that changes nothing is allowed.
func TestJudgePlanStatus(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SUCNamespaces = []string{"system-upgrade", "cattle-system"}
	suc := UserInfo{Name: "system:serviceaccount:system-upgrade:system-upgrade", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:system-upgrade", "system:authenticated"}}
	alice := UserInfo{Name: "alice", Groups: []string{"platform-admins", "system:authenticated"}}
	withStatus := func(applying []string, complete bool) *upgradev1.Plan {
		p := &upgradev1.Plan{}
		p.Status.Applying = applying
		p.Status.LatestVersion = "v1.36.1+rke2r1"
		p.Status.LatestHash = "3f2a"
		if complete {
			p.Status.Conditions = []upgradev1.GenericCondition{{Type: "Complete", Status: "True"}}
		}
		return p
	}
	rehashed := withStatus(nil, true)
	rehashed.Status.LatestHash = "9e1b"
	reversioned := withStatus(nil, false)
	reversioned.Status.LatestVersion = "v1.37.0+rke2r1"
	cases := []struct {
		name     string
		user     UserInfo
		old, new *upgradev1.Plan
		fields   []string // the status fields refused; none: allowed
		seen     string   // part of the message
	}{
		{"a person clears applying", alice, withStatus([]string{"gpu-v100-01"}, false), withStatus(nil, false), []string{"status.applying"}, "changes status.applying from [gpu-v100-01] to []"},
		{"a person adds a node to applying", alice, withStatus(nil, false), withStatus([]string{"gpu-v100-01"}, false), []string{"status.applying"}, "from [] to [gpu-v100-01]"},
		{"a person reorders applying", alice, withStatus([]string{"a", "b"}, false), withStatus([]string{"b", "a"}, false), []string{"status.applying"}, "from [a,b] to [b,a]"},
		{"a person forges Complete, hiding the Plan from RolloutInFlight", alice, withStatus(nil, false), withStatus(nil, true), []string{"status.conditions"}, "changes status.conditions from [] to [Complete=True]"},
		{"a person clears applying and forges Complete: both named", alice, withStatus([]string{"gpu-v100-01"}, false), withStatus(nil, true), []string{"status.applying", "status.conditions"}, "[Complete=True]"},
		{"a person rewrites latestHash", alice, withStatus(nil, true), rehashed, []string{"status.latestHash"}, `changes status.latestHash from "3f2a" to "9e1b"`},
		{"a person rewrites latestVersion", alice, withStatus(nil, false), reversioned, []string{"status.latestVersion"}, `to "v1.37.0+rke2r1"`},
		{"a name that looks like SUC without its group", UserInfo{Name: suc.Name}, withStatus([]string{"gpu-v100-01"}, false), withStatus(nil, false), []string{"status.applying"}, "is not SUC"},
		{"a ServiceAccount of another namespace", UserInfo{Name: "system:serviceaccount:ml:runner", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ml"}},
			withStatus([]string{"gpu-v100-01"}, false), withStatus(nil, false), []string{"status.applying"}, "is not SUC"},
		{"SUC clears applying and sets Complete", suc, withStatus([]string{"gpu-v100-01"}, false), withStatus(nil, true), nil, ""},
		{"SUC rehashes", suc, withStatus(nil, true), rehashed, nil, ""},
		{"SUC of the second SUC namespace", UserInfo{Name: "system:serviceaccount:cattle-system:suc", Groups: []string{"system:serviceaccounts:cattle-system"}},
			withStatus(nil, false), withStatus([]string{"gpu-v100-01"}, false), nil, ""},
		{"a person's status write that changes nothing", alice, withStatus([]string{"gpu-v100-01"}, true), withStatus([]string{"gpu-v100-01"}, true), nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := JudgePlanStatus(cfg, PlanStatusRequest{Object: "Plan system-upgrade/p", Old: tc.old, New: tc.new, User: tc.user})
			assert.Equal(t, len(tc.fields) == 0, d.Allowed, d.Message())
			if len(tc.fields) == 0 {
				assert.Empty(t, d.Blockers)
				return
			}
			var fields []string
			for _, b := range d.Blockers {
				require.Equal(t, CodePlanStatusForged, b.Code)
				fields = append(fields, b.Err.Field)
			}
			assert.Equal(t, tc.fields, fields)
			assert.Contains(t, d.Message(), "[PlanStatusForged] user \""+tc.user.Name+"\" changes "+tc.fields[0]+" from ")
			assert.Contains(t, d.Message(), tc.seen)
			assert.Contains(t, d.Message(), "system:serviceaccounts:system-upgrade or system:serviceaccounts:cattle-system")
			assert.Contains(t, d.Message(), "leave a Plan's status to SUC")
		})
	}
}
