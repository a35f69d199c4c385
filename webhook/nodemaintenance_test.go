package webhook

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
)

// TestNodeMaintenanceServed: the gate watches NodeMaintenances only where
// the API server serves them.
func TestNodeMaintenanceServed(t *testing.T) {
	for _, tc := range []struct {
		name      string
		resources []*metav1.APIResourceList
		want      bool
	}{
		{name: "served", want: true, resources: []*metav1.APIResourceList{{GroupVersion: "maintenance.nvidia.com/v1alpha1",
			APIResources: []metav1.APIResource{{Name: "maintenanceoperatorconfigs"}, {Name: "nodemaintenances", Namespaced: true, Kind: "NodeMaintenance"}}}}},
		{name: "the group without the resource", resources: []*metav1.APIResourceList{{GroupVersion: "maintenance.nvidia.com/v1alpha1",
			APIResources: []metav1.APIResource{{Name: "maintenanceoperatorconfigs"}}}}},
		{name: "no maintenance operator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := nodeMaintenanceServed(&fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tc.resources}})
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestStripNodeMaintenance: the cached object keeps its node, requestors
// and deletion mark, and reads as the loader reads a live one.
func TestStripNodeMaintenance(t *testing.T) {
	in := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "maintenance.nvidia.com/v1alpha1", "kind": "NodeMaintenance",
		"metadata": map[string]any{"namespace": "nvidia-network-operator", "name": "ofed-gpu-01", "resourceVersion": "7",
			"deletionTimestamp": "2026-12-02T00:00:00Z", "labels": map[string]any{"x": "y"}, "finalizers": []any{"maintenance.nvidia.com/finalizer"}},
		"spec": map[string]any{"requestorID": "network.operator", "additionalRequestors": []any{"sriov.operator"}, "nodeName": "gpu-01",
			"cordon": true, "drainSpec": map[string]any{"force": true, "podSelector": "app=x"}},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready"}}},
	}}
	out, err := StripNodeMaintenance(in)
	require.NoError(t, err)
	got := out.(*unstructured.Unstructured)
	assert.Equal(t, map[string]any{"requestorID": "network.operator", "additionalRequestors": []any{"sriov.operator"}, "nodeName": "gpu-01"}, got.Object["spec"])
	assert.NotContains(t, got.Object, "status")
	assert.Nil(t, got.GetLabels())
	assert.Equal(t, "7", got.GetResourceVersion())
	read, err := loader.NodeMaintenancesOf([]unstructured.Unstructured{*got})
	require.NoError(t, err)
	assert.Equal(t, []gate.NodeMaintenance{{Namespace: "nvidia-network-operator", Name: "ofed-gpu-01", Node: "gpu-01", Requestors: []string{"network.operator", "sriov.operator"}, Deleting: true}}, read)
}
