//go:build e2e

package neighbours

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
)

// pciDevice is one pci.device element as nfd-worker reports it: the sysfs
// attributes, lower-case hex, class cut to four digits.
type pciDevice struct{ class, vendor, device, subVendor, subDevice string }

var (
	// The H200 identity of a real H200 host read by real nfd-worker
	// (issue 11), the V100 PCIe of the fixtures, and devices that are not
	// GPUs: the ASPEED BMC VGA (NFD's own testdata IDs) and a Mellanox NIC.
	h200    = pciDevice{"0302", "10de", "2335", "10de", "18bf"}
	v100    = pciDevice{"0302", "10de", "1db6", "10de", "124a"}
	bmc     = pciDevice{"0300", "1a03", "2000", "1a03", "2000"}
	connect = pciDevice{"0207", "15b3", "1021", "15b3", "0041"}
)

// nodeFeature is the NodeFeature object nfd-worker v0.19.0 writes for a node
// with its default configuration: deviceLabelFields [class, vendor] and
// deviceClassWhitelist ["03", "0b40", "12"], so its own labels are
// pci-<class>_<vendor>.present for display devices only.
func nodeFeature(node string, devs ...pciDevice) *unstructured.Unstructured {
	labels := map[string]any{}
	var elems []any
	for _, d := range devs {
		elems = append(elems, map[string]any{"attributes": map[string]any{
			"class": d.class, "vendor": d.vendor, "device": d.device, "subsystem_vendor": d.subVendor, "subsystem_device": d.subDevice}})
		if strings.HasPrefix(d.class, "03") {
			labels["feature.node.kubernetes.io/pci-"+d.class+"_"+d.vendor+".present"] = "true"
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
		"metadata": map[string]any{"name": node, "namespace": nfdNS, "labels": map[string]any{"nfd.node.kubernetes.io/node-name": node}},
		"spec":     map[string]any{"labels": labels, "features": map[string]any{"instances": map[string]any{"pci.device": map[string]any{"elements": elems}}}},
	}}
	return u
}

// gpuOperatorServiceAccounts are the ServiceAccounts a GPU Operator install
// creates in its namespace: the operator's own (chart
// deployments/gpu-operator/templates/serviceaccount.yaml), its bundled NFD's
// (observed in issue 11 with v26.3.3), and each operand's (the operator's
// assets/<state>/0100_service_account.yaml). Read in NVIDIA/gpu-operator at
// commit 206adb696b5332957d829928f535bd7af96a858c.
var gpuOperatorServiceAccounts = []string{
	"gpu-operator", "node-feature-discovery",
	"nvidia-driver", "nvidia-mig-manager", "nvidia-device-plugin", "nvidia-gpu-feature-discovery",
	"nvidia-operator-validator", "nvidia-dcgm-exporter", "nvidia-container-toolkit",
}

// TestNFDAndSystemControllers (issue 11 items 1 and 2, issue 13 item 3): the
// real nfd-master, run as the ServiceAccount NFD's own chart creates for
// `helm install nfd` (nfd-node-feature-discovery), applies the chart's
// NodeFeatureRule to NodeFeature objects with real PCI attributes, and none
// of its writes, nor any write of the other NFD and GPU Operator
// ServiceAccounts, reaches the Node webhook, while the same write by a
// person does.
func TestNFDAndSystemControllers(t *testing.T) {
	need(t)
	ctx := context.Background()
	installNFD(t, ctx)
	var sas corev1.ServiceAccountList
	require.NoError(t, admin.List(ctx, &sas, client.InNamespace(nfdNS)))
	var nfdSAs []string
	for _, sa := range sas.Items {
		if sa.Name != "default" {
			nfdSAs = append(nfdSAs, sa.Name)
		}
	}
	require.Contains(t, nfdSAs, "nfd-node-feature-discovery", "NFD's chart names nfd-master after the release")

	// nfd-control-plane is the node nfd-master's pod would run on: it
	// annotates its own node with its version (NODE_NAME, from the chart's
	// Deployment).
	// Registered by their kubelets: no NFD labels yet, and the annotation a
	// kubelet always sets (nfd-master's JSON patches add to annotations).
	kubelet := func(n *corev1.Node) {
		n.Annotations = map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"}
	}
	var nodes []testenv.NodeSpec
	for _, name := range []string{"nfd-h200", "nfd-v100", "nfd-cpu", "nfd-control-plane"} {
		nodes = append(nodes, testenv.NodeSpec{Name: name, Mutate: kubelet})
	}
	createNodes(t, ctx, nodes)
	for _, nf := range []*unstructured.Unstructured{
		nodeFeature("nfd-h200", h200, h200, bmc, connect),
		nodeFeature("nfd-v100", v100, bmc),
		nodeFeature("nfd-cpu", bmc, connect),
	} {
		require.NoError(t, admin.Create(ctx, nf), "nfd-worker's NodeFeature for %s", nf.GetName())
	}

	before := reviews(t, "/validate/nodes")
	kc, err := kubeconfigFor(ctx, nfdNS, "nfd-node-feature-discovery")
	require.NoError(t, err)
	conf := filepath.Join(work, "nfd-master.conf")
	require.NoError(t, os.WriteFile(conf, []byte("{}\n"), 0o644))
	port, err := testenv.FreePort()
	require.NoError(t, err)
	stop, err := startProcess("nfd-master", filepath.Join(nfdDir, "nfd-master"), []string{"KUBERNETES_NAMESPACE=" + nfdNS, "NODE_NAME=nfd-control-plane"},
		"-kubeconfig="+kc, "-config="+conf, fmt.Sprintf("-port=%d", port))
	require.NoError(t, err)
	defer stop()

	identity := func(d pciDevice) string {
		return "feature.node.kubernetes.io/pci-" + d.vendor + "_" + d.device + "_" + d.subVendor + "_" + d.subDevice + ".present"
	}
	want := map[string][]string{
		"nfd-h200": {identity(h200), "feature.node.kubernetes.io/pci-0302_10de.present"},
		"nfd-v100": {identity(v100), "feature.node.kubernetes.io/pci-0302_10de.present"},
		"nfd-cpu":  {"feature.node.kubernetes.io/pci-0300_1a03.present"},
	}
	for node, keys := range want {
		require.NoError(t, poll(ctx, 2*time.Minute, func() (bool, error) {
			var n corev1.Node
			if err := admin.Get(ctx, types.NamespacedName{Name: node}, &n); err != nil {
				return false, err
			}
			for _, k := range keys {
				if n.Labels[k] != "true" {
					return false, nil
				}
			}
			return true, nil
		}), "nfd-master publishes %v on %s", keys, node)
	}
	var cpu corev1.Node
	require.NoError(t, admin.Get(ctx, types.NamespacedName{Name: "nfd-cpu"}, &cpu))
	for k := range cpu.Labels {
		assert.NotContains(t, k, "10de", "the non-GPU devices get no GPU label")
		assert.False(t, strings.HasPrefix(k, "feature.node.kubernetes.io/pci-1a03_") || strings.HasPrefix(k, "feature.node.kubernetes.io/pci-15b3_"),
			"the NodeFeatureRule labels GPU vendors only, got %s", k)
	}
	assert.True(t, cfg.IsGPUNode(mustNode(t, ctx, "nfd-h200")))
	assert.False(t, cfg.IsGPUNode(&cpu))
	assert.Equal(t, before, reviews(t, "/validate/nodes"), "nfd-master's label writes on new GPU nodes never reach the webhook")

	// Every ServiceAccount NFD's chart and the GPU Operator create may write
	// GPU-node labels (the test grants it; in a real cluster some cannot):
	// none of those writes is reviewed. The same write by a person is.
	require.NoError(t, admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-node-labeller"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch"}}}}))
	require.NoError(t, admin.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "test-node-labeller"},
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "test-node-labeller"},
		Subjects: []rbacv1.Subject{
			{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "system:serviceaccounts:" + nfdNS},
			{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "system:serviceaccounts:gpu-operator"}}}))
	for _, name := range gpuOperatorServiceAccounts {
		require.NoError(t, admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-operator", Name: name}}))
	}
	identities := map[string][]string{nfdNS: nfdSAs, "gpu-operator": gpuOperatorServiceAccounts}
	// Each writes a label of a fact its default exemption lists
	// (docs/ownership.md): NFD's namespace GFD's labels, the GPU
	// Operator's its operands' deploy labels.
	owned := map[string][2]string{nfdNS: {"nvidia.com/gfd.timestamp", "1764633600"}, "gpu-operator": {"nvidia.com/gpu.deploy.driver", "paused-for-driver-upgrade"}}
	before = reviews(t, "/validate/nodes")
	writes := 0
	for ns, names := range identities {
		for _, name := range names {
			c, err := clientFor(ctx, ns, name)
			require.NoError(t, err)
			patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q,"test-writer":%q}}}`, owned[ns][0], owned[ns][1], ns+"."+name)
			err = c.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "nfd-h200"}}, client.RawPatch(types.MergePatchType, []byte(patch)))
			require.NoError(t, err, "system:serviceaccount:%s:%s writes a GPU-node label without the gate", ns, name)
			writes++
		}
	}
	assert.Equal(t, len(nfdSAs)+len(gpuOperatorServiceAccounts), writes)
	assert.Equal(t, before, reviews(t, "/validate/nodes"), "no write of the NFD or GPU Operator ServiceAccounts of a fact they own reaches the webhook")
	// A fact NFD's exemption does not list (the GPU Operator's input) is
	// reviewed as anyone's write: here allowed, as a person's would be.
	c, err := clientFor(ctx, nfdNS, "nfd-node-feature-discovery")
	require.NoError(t, err)
	require.NoError(t, c.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "nfd-h200"}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"nvidia.com/gpu.deploy.driver":"true"}}}`))))
	assert.Equal(t, before+1, reviews(t, "/validate/nodes"), "nfd-master's write of a fact it does not own is reviewed")
	before++
	// Issue 22: nfd-master on its normal path was never refused (the audit
	// log holds every Node write; a refusal answers 403).
	events, err := cp.AuditEvents()
	require.NoError(t, err)
	nfdWrites, refused := 0, 0
	for _, ev := range events {
		if ev.Stage != "ResponseComplete" || ev.ObjectRef == nil || ev.ObjectRef.Resource != "nodes" || ev.Username() != "system:serviceaccount:"+nfdNS+":nfd-node-feature-discovery" {
			continue
		}
		nfdWrites++
		if ev.ResponseStatus != nil && ev.ResponseStatus.Code >= 400 {
			refused++
		}
	}
	t.Logf("nfd-master and the NFD ServiceAccount: %d Node writes in the audit log, %d refused", nfdWrites, refused)
	assert.NotZero(t, nfdWrites)
	assert.Zero(t, refused, "nfd-master on its normal path is never refused")
	require.NoError(t, admin.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "nfd-h200"}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"test-writer":"a-person"}}}`))))
	assert.Equal(t, before+1, reviews(t, "/validate/nodes"), "the same write by a person is reviewed")
}

// nfdInstalled: NFD's chart is installed (once per run, whichever test
// needs it first).
var nfdInstalled bool

// installNFD installs NFD's own chart (its ServiceAccounts and RBAC;
// nfd-master itself runs as a process here, see startNFDMaster).
func installNFD(t *testing.T, ctx context.Context) {
	t.Helper()
	if nfdInstalled {
		return
	}
	require.NoError(t, helmCmd(ctx, "install", "nfd", filepath.Join(nfdDir, "chart"), "--namespace", nfdNS, "--skip-crds"))
	nfdInstalled = true
}

func mustNode(t *testing.T, ctx context.Context, name string) *corev1.Node {
	t.Helper()
	var n corev1.Node
	require.NoError(t, admin.Get(ctx, types.NamespacedName{Name: name}, &n))
	return &n
}
