package webhook

import (
	"context"
	"errors"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
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

// TestEtcdSnapshotsUnservedRemembered: a request check that found the
// cluster serving no ETCDSnapshotFile kind does not ask again for
// etcdUnservedFor (each ask made the client's REST mapper discover every
// API group); SUC's Job start always asks, and its answer is what the
// request checks then remember; a memo that aged is asked again, and a
// served kind is asked every time (its list is the rule's fact).
func TestEtcdSnapshotsUnservedRemembered(t *testing.T) {
	var lists int
	var answer error
	f := &Facts{Live: fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
		lists++
		return answer
	}}).Build()}
	ctx := context.Background()
	answer = &meta.NoKindMatchError{GroupKind: loader.ETCDSnapshotFileGVK.GroupKind(), SearchedVersions: []string{"v1"}}
	for range 3 {
		assert.False(t, f.requestEtcdSnapshots(ctx).Served)
	}
	assert.Equal(t, 1, lists, "not served: a request check asks once within etcdUnservedFor")

	answer = nil // the CRD was installed meanwhile
	assert.False(t, f.requestEtcdSnapshots(ctx).Served, "within etcdUnservedFor, a request check still takes it as not served")
	assert.True(t, f.etcdSnapshots(ctx).Served, "SUC's Job start asks")
	assert.Equal(t, 2, lists)
	assert.True(t, f.requestEtcdSnapshots(ctx).Served, "and the request checks take its answer")
	assert.Equal(t, 3, lists, "a served kind is read every time")

	answer = &meta.NoKindMatchError{GroupKind: loader.ETCDSnapshotFileGVK.GroupKind(), SearchedVersions: []string{"v1"}}
	assert.False(t, f.requestEtcdSnapshots(ctx).Served)
	long := time.Now().Add(-etcdUnservedFor - time.Second)
	f.etcdUnserved.Store(&long)
	answer = nil
	assert.True(t, f.requestEtcdSnapshots(ctx).Served, "a memo older than etcdUnservedFor is asked again")
	assert.Equal(t, 5, lists)

	answer = errors.New("connection refused")
	got := f.requestEtcdSnapshots(ctx)
	assert.True(t, got.Served, "a failed read is not 'not served'")
	require.Error(t, got.Err)
	assert.Nil(t, f.etcdUnserved.Load(), "a failed read is not remembered as not served")
}
