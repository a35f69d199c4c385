package chart

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// TestAutomaticOperatorApprovalSwitch: the operator webhook's not-olm match
// condition keeps OLM's creation of an InstallPlan away from the gate only
// when config.allowAutomaticOperatorApproval gives that review up; by
// default only OLM's Deployment write stays away, and the Subscription
// branch names the configured package.
func TestAutomaticOperatorApprovalSwitch(t *testing.T) {
	const olmCreate = "!(request.resource.resource == 'installplans' && request.operation == 'CREATE')"
	for _, tc := range []struct {
		name   string
		config map[string]any
		exempt bool
	}{
		{"default: OLM's approved InstallPlan is reviewed", nil, false},
		{"allowAutomaticOperatorApproval: it is not", map[string]any{"allowAutomaticOperatorApproval": true, "gpuOperatorPackage": "gpu-operator"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			values := map[string]any{}
			if tc.config != nil {
				values["config"] = tc.config
			}
			objs, err := Render(Options{Values: values})
			require.NoError(t, err)
			vwcs := Find[*admissionregistrationv1.ValidatingWebhookConfiguration](objs)
			require.Len(t, vwcs, 1)
			w := hook(vwcs[0], "operator.gpu-upgrade-gate.io")
			require.NotNil(t, w)
			conds := map[string]string{}
			for _, c := range w.MatchConditions {
				conds[c.Name] = c.Expression
			}
			require.Contains(t, conds, "not-olm")
			assert.Equal(t, tc.exempt, strings.Contains(conds["not-olm"], olmCreate), conds["not-olm"])
			assert.Contains(t, conds["not-olm"], "'system:serviceaccounts:olm'", "only OLM's own identities")
			pkg := "gpu-operator-certified"
			if tc.config != nil {
				pkg = tc.config["gpuOperatorPackage"].(string)
			}
			assert.Contains(t, conds["operator-version-changes"], "object.?spec.?name.orValue('') == '"+pkg+"'")
		})
	}
}
