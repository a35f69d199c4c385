package gate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOperatorAutoApproval: a Subscription of the GPU Operator's package is
// admitted only with installPlanApproval exactly Manual (OLM approves at
// creation under anything else); other packages, metadata-only writes and
// the configured opt-out are admitted.
func TestOperatorAutoApproval(t *testing.T) {
	sub := func(pkg, approval string, set bool) SubscriptionRequest {
		return SubscriptionRequest{Object: "Subscription gpu-operator/" + pkg, Package: pkg, Approval: approval, ApprovalSet: set, Changed: true, User: UserInfo{Name: "alice"}}
	}
	metadataOnly := sub("gpu-operator-certified", "Automatic", true)
	metadataOnly.Changed = false
	cases := []struct {
		name    string
		req     SubscriptionRequest
		allow   bool // allowAutomaticOperatorApproval
		refused bool
		seen    string
	}{
		{"absent: OLM's default is Automatic", sub("gpu-operator-certified", "", false), false, true, "absent (OLM's default, Automatic)"},
		{"Automatic", sub("gpu-operator-certified", "Automatic", true), false, true, `"Automatic"`},
		{"manual: not OLM's spelling, so automatic", sub("gpu-operator-certified", "manual", true), false, true, `"manual"`},
		{"empty string", sub("gpu-operator-certified", "", true), false, true, `""`},
		{"Manual", sub("gpu-operator-certified", "Manual", true), false, false, ""},
		{"another package, Automatic", sub("nfd", "Automatic", true), false, false, ""},
		{"metadata only", metadataOnly, false, false, ""},
		{"Automatic, allowed by configuration", sub("gpu-operator-certified", "Automatic", true), true, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.AllowAutomaticOperatorApproval = tc.allow
			d := DecideSubscription(cfg, tc.req)
			if !tc.refused {
				require.True(t, d.Allowed, d.Message())
				if tc.allow {
					require.Len(t, d.Warnings, 1, "the opt-out is visible")
					assert.Contains(t, d.Warnings[0], "unreviewed")
				}
				return
			}
			require.False(t, d.Allowed)
			require.Equal(t, []Code{CodeOperatorAutoApproval}, d.Codes())
			msg := d.Message()
			assert.Contains(t, d.Message(), "[OperatorAutoApproval] spec.installPlanApproval is "+tc.seen+" for OLM package gpu-operator-certified", "the denial names the field and the value")
			assert.Contains(t, msg, "set spec.installPlanApproval: Manual")
			assert.Contains(t, msg, AnnotationQualification)
		})
	}
}

// TestConfigGPUOperatorPackage: the package name is validated like the CSV's.
func TestConfigGPUOperatorPackage(t *testing.T) {
	cfg, err := LoadConfig([]byte("gpuOperatorPackage: gpu-operator\n"))
	require.NoError(t, err)
	assert.Equal(t, "gpu-operator", cfg.GPUOperatorPackage)
	assert.False(t, cfg.AllowAutomaticOperatorApproval, "refused unless configured")
	_, err = LoadConfig([]byte("gpuOperatorPackage: Not_A_Package\n"))
	assert.ErrorContains(t, err, `gpuOperatorPackage: Invalid value: "Not_A_Package"`)
}
