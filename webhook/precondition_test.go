package webhook

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// TestPreconditionUnmet: a built-in precondition's
// gpu_upgrade_gate_precondition_state is fails when the review that checked
// it found it unmet, as a blocker or as a warning, and holds when it held.
func TestPreconditionUnmet(t *testing.T) {
	value := func(name string) float64 {
		var m dto.Metric
		require.NoError(t, preconditionState.WithLabelValues(name, preconditionBuiltin, "fails").Write(&m))
		fails := m.GetGauge().GetValue()
		require.NoError(t, preconditionState.WithLabelValues(name, preconditionBuiltin, "holds").Write(&m))
		require.Equal(t, 1-fails, m.GetGauge().GetValue(), "exactly one state is 1")
		return fails
	}
	blocked := gate.Decision{Blockers: []gate.Blocker{{Code: gate.CodeDrainBlocked, Err: field.Forbidden(field.NewPath("spec", "drain"), "x")}}}
	warned := gate.Decision{Allowed: true, Warnings: []string{"[DrainBlocked] SUC's drain of a pending GPU node cannot finish"}}
	other := gate.Decision{Allowed: true, Warnings: []string{"node gpu-v100-01 moves from Kubernetes 1.35 to 1.36 and [DrainBlocked] is quoted here"}}
	for _, tc := range []struct {
		name string
		d    gate.Decision
		want float64
	}{
		{"refused", blocked, 1},
		{"held", gate.Decision{Allowed: true}, 0},
		{"warned", warned, 1},
		{"another warning", other, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notePreconditions(tc.d, false, true)
			assert.Equal(t, tc.want, value(preconditionDrain))
		})
	}
	notePrecondition(preconditionOperatorRollout, gate.Decision{Blockers: []gate.Blocker{{Code: gate.CodeOperatorRolloutUnfinished, Err: field.Forbidden(nil, "x")}}}, gate.CodeOperatorRolloutUnfinished)
	assert.Equal(t, 1.0, value(preconditionOperatorRollout))
}
