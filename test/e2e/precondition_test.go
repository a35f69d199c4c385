//go:build e2e

package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// TestOperatorRolloutUnfinished (issue 27): a driver change during an
// unfinished rollout of the GPU Operator itself is refused, naming what the
// gate saw; once the operator's Deployment reports the rollout finished the
// same change is admitted. No kube-controller-manager runs in this control
// plane, so the test writes the Deployment's status as the Deployment
// controller would (mid rollout: a new replica up, the old one not yet
// terminated). The cluster serves no OLM ClusterServiceVersion API here
// (a Helm install): the CSV is not checked.
func TestOperatorRolloutUnfinished(t *testing.T) {
	driverWorld(t)
	ctx := context.Background()
	alice, _ := as(t, "alice")
	defer func() { require.NoError(t, env.OperatorRollout(ctx, 1, 1, 1)) }()
	change := func(u *unstructured.Unstructured) {
		set("spec.version", "580.130.00")(u)
		annotate(gate.AnnotationQualification, "v100-driver")(u)
	}

	require.NoError(t, env.OperatorRollout(ctx, 2, 1, 1))
	err := edit(t, alice, ndRef("v100"), change)
	requireDenied(t, err, gate.CodeOperatorRolloutUnfinished)
	assert.Contains(t, err.Error(), "Deployment gpu-operator/gpu-operator: 1 old replica(s) pending termination (status.replicas 2, updatedReplicas 1)")

	require.NoError(t, env.OperatorRollout(ctx, 1, 1, 0))
	err = edit(t, alice, ndRef("v100"), change)
	requireDenied(t, err, gate.CodeOperatorRolloutUnfinished)
	assert.Contains(t, err.Error(), "0 of 1 updated replicas available")

	require.NoError(t, env.OperatorRollout(ctx, 1, 1, 1))
	require.NoError(t, edit(t, alice, ndRef("v100"), change), "the operator's rollout finished: the qualified change is admitted")
	preGate(t, func() { require.NoError(t, edit(t, env.Admin, ndRef("v100"), set("spec.version", "580.126.20"))) })
}
