package gate

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// TestJudgePlanStatus: only SUC changes status.applying; every other status
// write, and every write that leaves applying alone, is allowed.
func TestJudgePlanStatus(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SUCNamespaces = []string{"system-upgrade", "cattle-system"}
	suc := UserInfo{Name: "system:serviceaccount:system-upgrade:system-upgrade", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:system-upgrade", "system:authenticated"}}
	alice := UserInfo{Name: "alice", Groups: []string{"platform-admins", "system:authenticated"}}
	withStatus := func(applying []string, complete bool) *upgradev1.Plan {
		p := &upgradev1.Plan{}
		p.Status.Applying = applying
		p.Status.LatestVersion = "v1.36.1+rke2r1"
		if complete {
			p.Status.Conditions = []upgradev1.GenericCondition{{Type: "Complete", Status: "True"}}
		}
		return p
	}
	cases := []struct {
		name     string
		user     UserInfo
		old, new *upgradev1.Plan
		denied   bool
	}{
		{"a person clears applying", alice, withStatus([]string{"gpu-v100-01"}, false), withStatus(nil, false), true},
		{"a person adds a node to applying", alice, withStatus(nil, false), withStatus([]string{"gpu-v100-01"}, false), true},
		{"a person reorders applying", alice, withStatus([]string{"a", "b"}, false), withStatus([]string{"b", "a"}, false), true},
		{"a name that looks like SUC without its group", UserInfo{Name: suc.Name}, withStatus([]string{"gpu-v100-01"}, false), withStatus(nil, false), true},
		{"a ServiceAccount of another namespace", UserInfo{Name: "system:serviceaccount:ml:runner", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ml"}},
			withStatus([]string{"gpu-v100-01"}, false), withStatus(nil, false), true},
		{"SUC clears applying", suc, withStatus([]string{"gpu-v100-01"}, false), withStatus(nil, true), false},
		{"SUC of the second SUC namespace", UserInfo{Name: "system:serviceaccount:cattle-system:suc", Groups: []string{"system:serviceaccounts:cattle-system"}},
			withStatus(nil, false), withStatus([]string{"gpu-v100-01"}, false), false},
		{"a person's status write that leaves applying alone", alice, withStatus([]string{"gpu-v100-01"}, false), withStatus([]string{"gpu-v100-01"}, true), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := JudgePlanStatus(cfg, PlanStatusRequest{Object: "Plan system-upgrade/p", Old: tc.old, New: tc.new, User: tc.user})
			assert.Equal(t, !tc.denied, d.Allowed, d.Message())
			if !tc.denied {
				assert.Empty(t, d.Blockers)
				return
			}
			require.Equal(t, []Code{CodePlanStatusForged}, d.Codes())
			assert.Equal(t, "status.applying", d.Blockers[0].Err.Field)
			assert.Contains(t, d.Message(), "[PlanStatusForged] user \""+tc.user.Name+"\" changes status.applying from ["+strings.Join(tc.old.Status.Applying, ",")+"] to ["+strings.Join(tc.new.Status.Applying, ",")+"]")
			assert.Contains(t, d.Message(), "system:serviceaccounts:system-upgrade or system:serviceaccounts:cattle-system")
			assert.Contains(t, d.Message(), "leave status.applying to SUC")
		})
	}
}
