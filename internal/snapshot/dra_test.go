package snapshot

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/dra"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
)

// TestDRAProofFactsFromASnapshot: `check` reads a DRA node's proof facts
// from a saved List as the webhook reads them from its caches: the driver
// namespace's Pods, the slices and the check's claim (its name from the
// check Pod's status, which the snapshot keeps).
func TestDRAProofFactsFromASnapshot(t *testing.T) {
	list := `{"apiVersion":"v1","kind":"List","items":[
{"apiVersion":"v1","kind":"Pod","metadata":{"namespace":"nvidia-dra-driver-gpu","name":"plugin-x8k2d",
  "ownerReferences":[{"apiVersion":"apps/v1","kind":"DaemonSet","name":"nvidia-dra-driver-gpu-kubelet-plugin","uid":"u","controller":true}]},
 "spec":{"nodeName":"gpu-01","containers":[{"name":"gpus","image":"i"}]},
 "status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}},
{"apiVersion":"v1","kind":"Pod","metadata":{"namespace":"gpu-upgrade-gate","name":"check","labels":{"gpu-upgrade-gate.io/allocation-check":"true"}},
 "spec":{"nodeName":"gpu-01","containers":[{"name":"c","image":"i"}],"resourceClaims":[{"name":"gpu","resourceClaimTemplateName":"one-gpu"}]},
 "status":{"phase":"Succeeded","resourceClaimStatuses":[{"name":"gpu","resourceClaimName":"check-gpu-x7k2p"}]}},
{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"gpu-01-gpu.nvidia.com"},
 "spec":{"driver":"gpu.nvidia.com","nodeName":"gpu-01","pool":{"name":"gpu-01","generation":1,"resourceSliceCount":1},"devices":[{"name":"gpu-0"}]}},
{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"namespace":"gpu-upgrade-gate","name":"check-gpu-x7k2p"},
 "spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.nvidia.com"}}]}},
 "status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.nvidia.com","pool":"gpu-01","device":"gpu-0"}]}}}}]}`
	snap, err := Parse([]byte(list))
	require.NoError(t, err)
	assert.Empty(t, snap.Skipped)
	cfg := gate.DefaultConfig()
	cfg.DRADrivers = []dra.Driver{{Name: "gpu.nvidia.com", Namespace: "nvidia-dra-driver-gpu", DaemonSet: "nvidia-dra-driver-gpu-kubelet-plugin"}}
	facts, err := loader.New(cfg, snap.Source("v1.36.1+rke2r1")).Proof(context.Background())
	require.NoError(t, err)
	require.Len(t, facts.DRA.PluginPods, 1)
	require.Len(t, facts.DRA.Slices, 1)
	require.Len(t, facts.DRA.Claims, 1)
	assert.Equal(t, "gpu-01", facts.DRA.Claims[0].Status.Allocation.Devices.Results[0].Pool)
	require.Len(t, facts.AllocationChecks, 1)
	require.Len(t, facts.AllocationChecks[0].Status.ResourceClaimStatuses, 1, "the snapshot keeps the check's claim names")
}
