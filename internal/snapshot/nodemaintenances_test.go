package snapshot

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
)

// TestNodeMaintenancesFromASnapshot: `check` reads the maintenance
// operator's NodeMaintenances from a List saved with
// nodemaintenances.maintenance.nvidia.com, as the webhook watches them.
func TestNodeMaintenancesFromASnapshot(t *testing.T) {
	for _, tc := range []struct {
		name  string
		items string
		want  []gate.NodeMaintenance
		err   string
	}{
		{name: "one being deleted, shared by two requestors", items: `{"apiVersion":"maintenance.nvidia.com/v1alpha1","kind":"NodeMaintenance",
 "metadata":{"namespace":"nvidia-network-operator","name":"ofed-gpu-01","deletionTimestamp":"2026-12-02T00:00:00Z","finalizers":["maintenance.nvidia.com/finalizer"]},
 "spec":{"requestorID":"network.operator","additionalRequestors":["sriov.operator"],"nodeName":"gpu-01","cordon":true},
 "status":{"conditions":[{"type":"Ready","status":"True","reason":"Ready","lastTransitionTime":"2026-12-02T00:00:00Z","message":""}]}}`,
			want: []gate.NodeMaintenance{{Namespace: "nvidia-network-operator", Name: "ofed-gpu-01", Node: "gpu-01", Requestors: []string{"network.operator", "sriov.operator"}, Deleting: true}}},
		{name: "one without a node fails the read, not the view", err: "NodeMaintenance ns/odd: spec.nodeName", items: `{"apiVersion":"maintenance.nvidia.com/v1alpha1","kind":"NodeMaintenance","metadata":{"namespace":"ns","name":"odd"},"spec":{"requestorID":"network.operator"}}`},
		{name: "a requestor of the wrong type fails the read, not the view", err: "spec.requestorID", items: `{"apiVersion":"maintenance.nvidia.com/v1alpha1","kind":"NodeMaintenance","metadata":{"namespace":"ns","name":"odd"},"spec":{"requestorID":7,"nodeName":"gpu-01"}}`},
		{name: "none", want: []gate.NodeMaintenance{}, items: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"x","name":"y"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap, err := Parse([]byte(`{"apiVersion":"v1","kind":"List","items":[` + tc.items + `]}`))
			require.NoError(t, err)
			cl, err := loader.New(gate.DefaultConfig(), snap.Source("v1.36.1+rke2r1")).Cluster(context.Background())
			require.NoError(t, err, "only the moves that consume the budget fail closed on it")
			if tc.err != "" {
				assert.ErrorContains(t, cl.NodeMaintenancesErr, tc.err)
				return
			}
			require.NoError(t, cl.NodeMaintenancesErr)
			assert.Equal(t, tc.want, cl.NodeMaintenances)
		})
	}
}
