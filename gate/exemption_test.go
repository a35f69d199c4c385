package gate

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestExemptionsByIdentity (issue 10 item 4): an exemption lets its identity
// through and names itself in the audit annotations; the labels a Plan
// exemption narrows by never exempt anyone else, also when a node is
// labelled into such a Plan.
func TestExemptionsByIdentity(t *testing.T) {
	rancher := UserInfo{Name: "system:serviceaccount:cattle-system:rancher", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:cattle-system"}}
	operand := UserInfo{Name: "system:serviceaccount:gpu-operator:nvidia-driver", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:gpu-operator", "system:authenticated"}}
	for _, tc := range []struct {
		name      string
		user      func(s *scenario) UserInfo
		allowed   bool
		exemption string
	}{
		{"a person labels a node into a Plan carrying the exempt label: judged", func(s *scenario) UserInfo { return s.req.User }, false, ""},
		{"the Plan exemption's identity labelling a node: judged (a Plan exemption is not a Node one)", func(*scenario) UserInfo { return rancher }, false, ""},
		{"a GPU Operator operand: the Node exemption, named", func(*scenario) UserInfo { return operand }, true, "gpu-operator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, old, n := nodeScenario(t)
			s.cfg.Exemptions = append(s.cfg.Exemptions, Exemption{Name: "rancher-managed", Resources: []string{"plans"},
				Users: []string{rancher.Name}, Namespaces: []string{"system-upgrade"}, MatchLabels: map[string]string{"rancher-managed": "true"}})
			wave := s.cluster.Plans[0]
			wave.Labels = map[string]string{"rancher-managed": "true"}
			wave.Spec.Concurrency = 5 // unsafe: judged, it is denied
			n.Labels["gpu-wave"] = "next"
			s.req.User = tc.user(s)
			d := decideNode(s, old, n)
			assert.Equal(t, tc.allowed, d.Allowed, "codes %v", d.Codes())
			assert.Equal(t, tc.exemption, d.AuditAnnotations()[AuditExemption])
			if !tc.allowed {
				assert.Contains(t, d.Codes(), CodeConcurrencyNotSerial)
			}
		})
	}
}
