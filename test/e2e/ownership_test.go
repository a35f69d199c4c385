//go:build e2e

package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// Identities that cannot run here, played by writing what they write under
// their own names (impersonated), so the API server's match conditions treat
// them as the real writers. Their rights come from the platform-admins
// binding, standing in for their charts' ClusterRoles.
func nfdMaster(t *testing.T) client.Client {
	c, _ := as(t, testenv.NFDMasterUser, "system:serviceaccounts", "system:serviceaccounts:node-feature-discovery", "system:authenticated")
	return c
}

// sucServiceAccount is SUC's ServiceAccount: SUC's controller, and the Job
// pod of any Plan that names it (serviceAccountName: system-upgrade).
func sucServiceAccount(t *testing.T) client.Client {
	c, _ := as(t, testenv.SUCUser, "system:serviceaccounts", "system:serviceaccounts:"+testenv.SUCNamespace, "system:authenticated")
	return c
}

// TestOwnedFactsAttack2: a person adds a made-up second NVIDIA PCI identity
// to a GPU node, or GPU identity to a CPU node: refused, naming NFD; the
// same label written by nfd-master is not even sent to the gate.
func TestOwnedFactsAttack2(t *testing.T) {
	const madeUp = "feature.node.kubernetes.io/pci-10de_0000_10de_0000.present"
	alice, _ := as(t, "alice")
	err := patchNode(alice, "gpu-v100-02", `{"metadata":{"labels":{"`+madeUp+`":"true"}}}`)
	requireDenied(t, err, gate.CodeOwnedFactWritten)
	assert.Contains(t, err.Error(), madeUp)
	assert.Contains(t, err.Error(), "NodeFeatureRule")
	requireDenied(t, patchNode(alice, "cpu-01", `{"metadata":{"labels":{"feature.node.kubernetes.io/pci-10de.present":"true"}}}`), gate.CodeOwnedFactWritten)

	own := ownWrites{since: time.Now(), resources: []string{"nodes"}, users: []string{testenv.NFDMasterUser}, names: []string{"gpu-v100-02"}}
	require.NoError(t, patchNode(nfdMaster(t), "gpu-v100-02", `{"metadata":{"labels":{"`+madeUp+`":"true"}}}`), "nfd-master writes its own labels")
	// The label's owner removes it: a person's removal of an NFD label is
	// itself refused, and a made-up identity left behind would make
	// gpu-v100-02 unqualified hardware for every later test.
	defer func() {
		require.NoError(t, patchNode(nfdMaster(t), "gpu-v100-02", `{"metadata":{"labels":{"`+madeUp+`":null}}}`), "nfd-master removes its own label")
	}()
	assert.Equal(t, 0, own.reviews(t, webhook.WebhookNodes, 1), "nfd-master's write of an NFD label never reaches the webhook")
}

// TestOwnedFactsAttack5: a person overwrites GFD's driver-version label
// with the target driver (which would hide SourceMismatch until GFD
// relabels): refused; GFD's write (through nfd-master, the identity that
// applies GFD's labels) passes. The forged value must differ from the node's:
// an unchanged label is no write, and the API server rightly sends no review.
func TestOwnedFactsAttack5(t *testing.T) {
	alice, _ := as(t, "alice")
	var n = getNode(t, "gpu-v100-04")
	driver := n.Labels["nvidia.com/cuda.driver-version.full"]
	require.NotEmpty(t, driver)
	forged := testenv.Target.Driver
	require.NotEqual(t, driver, forged, "the forged driver must change the label")
	own := ownWrites{since: time.Now(), resources: []string{"nodes"}, users: []string{"alice"}, names: []string{"gpu-v100-04"}}
	err := patchNode(alice, "gpu-v100-04", `{"metadata":{"labels":{"nvidia.com/cuda.driver-version.full":"`+forged+`"}}}`)
	requireDenied(t, err, gate.CodeOwnedFactWritten)
	assert.Contains(t, err.Error(), "let GFD rewrite it")
	assert.Equal(t, 1, own.reviews(t, webhook.WebhookNodes, 1), "a person's write of a GFD label reaches the webhook")
	assert.Equal(t, driver, getNode(t, "gpu-v100-04").Labels["nvidia.com/cuda.driver-version.full"], "the refused write left the label")

	own = ownWrites{since: time.Now(), resources: []string{"nodes"}, users: []string{testenv.NFDMasterUser}, names: []string{"gpu-v100-04"}}
	require.NoError(t, patchNode(nfdMaster(t), "gpu-v100-04", `{"metadata":{"labels":{"nvidia.com/cuda.driver-version.full":"`+forged+`"}}}`), "GFD's label as nfd-master writes it")
	require.NoError(t, patchNode(nfdMaster(t), "gpu-v100-04", `{"metadata":{"labels":{"nvidia.com/cuda.driver-version.full":"`+driver+`"}}}`))
	assert.Equal(t, 0, own.reviews(t, webhook.WebhookNodes, 2), "nfd-master's write of a GFD label never reaches the webhook")
}

// TestOwnedFactsAttack7: SUC's ServiceAccount (what a CPU-only Plan's Job
// may run as) switches the mode of a busy, schedulable GPU node: the write
// reaches the gate and the mode rules refuse it, as they refuse a person's.
// The same identity's plan label and cordon pass unreviewed.
func TestOwnedFactsAttack7(t *testing.T) {
	needSUC(t) // SUC's own RBAC gives its ServiceAccount the cordon (installSUCRBAC)
	suc := sucServiceAccount(t)
	err := patchNode(suc, "gpu-v100-holder", `{"metadata":{"labels":{"nvidia.com/gpu.workload.config":"vm-passthrough"}}}`)
	requireDenied(t, err, gate.CodeModeChangeNotCordoned, gate.CodeGPUHolders)

	own := ownWrites{since: time.Now(), resources: []string{"nodes"}, users: []string{testenv.SUCUser}, names: []string{"gpu-v100-holder", "gpu-v100-02"}}
	require.NoError(t, patchNode(suc, "gpu-v100-holder", `{"metadata":{"labels":{"plan.upgrade.cattle.io/cpu-only":"0123abcd"}}}`), "SUC's plan label")
	defer patchNode(env.Admin, "gpu-v100-holder", `{"metadata":{"labels":{"plan.upgrade.cattle.io/cpu-only":null}}}`)
	require.NoError(t, env.CordonAsSUCJob(t.Context(), "gpu-v100-02"), "the cordon of SUC's Job")
	defer patchNode(env.Admin, "gpu-v100-02", `{"spec":{"unschedulable":false}}`)
	assert.Equal(t, 0, own.reviews(t, webhook.WebhookNodes, 2), "SUC's own facts never reach the webhook")
}
