package snapshot

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
)

// TestCreationGatesFromASnapshot: `check` reads the creation gates from a
// saved List as the webhook reads them from its caches (the one loader):
// the named Deployment only, not a same-named variable elsewhere.
func TestCreationGatesFromASnapshot(t *testing.T) {
	list := `{"apiVersion":"v1","kind":"List","items":[
{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"namespace":"kube-dc","name":"kube-dc-manager"},
 "spec":{"selector":{},"template":{"spec":{"containers":[{"name":"manager","image":"m","env":[{"name":"GPU_VM_CREATION_ENABLED","value":"true"},{"name":"GPU_SHARED_CREATION_ENABLED","value":"false"}]}]}}}},
{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"namespace":"tenant","name":"kube-dc-manager"},
 "spec":{"selector":{},"template":{"spec":{"containers":[{"name":"manager","image":"m","env":[{"name":"GPU_VM_CREATION_ENABLED","value":"false"}]}]}}}}]}`
	snap, err := Parse([]byte(list))
	require.NoError(t, err)
	cfg := gate.DefaultConfig()
	cfg.CreationGates = []gate.CreationGate{
		{Name: "gpu-shared-creation", Kind: gate.GateDeploymentEnv, Namespace: "kube-dc", Object: "kube-dc-manager", Key: "GPU_SHARED_CREATION_ENABLED", Closed: "false"},
		{Name: "gpu-vm-creation", Kind: gate.GateDeploymentEnv, Namespace: "kube-dc", Object: "kube-dc-manager", Key: "GPU_VM_CREATION_ENABLED", Closed: "false"},
		{Name: "switches", Kind: gate.GateConfigMapKey, Namespace: "kube-dc", Object: "switches", Key: "gpu", Closed: "off"},
	}
	r := loader.New(cfg, snap.Source("v1.36.1+rke2r1")).CreationGates(context.Background())
	require.Len(t, r, 3)
	assert.True(t, r[0].Closed())
	assert.Equal(t, "true", r[1].Value, "kube-dc's own Deployment, not the tenant's copy")
	assert.False(t, r[1].Closed())
	assert.ErrorContains(t, r[2].Err, "the ConfigMap does not exist")
}
