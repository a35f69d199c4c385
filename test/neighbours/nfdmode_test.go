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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// startNFDMaster runs the real nfd-master as NFD's chart's ServiceAccount
// (installNFD), with NFD's default configuration; the returned func stops it.
func startNFDMaster(t *testing.T, ctx context.Context, name string) func() {
	t.Helper()
	// nfd-master annotates the node its pod would run on (NODE_NAME) and
	// will not start without it; TestNFDAndSystemControllers may have
	// registered it already.
	err := admin.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "nfd-control-plane"}})
	require.NoError(t, client.IgnoreAlreadyExists(err))
	kc, err := kubeconfigFor(ctx, nfdNS, "nfd-node-feature-discovery")
	require.NoError(t, err)
	conf := filepath.Join(work, name+".conf")
	require.NoError(t, os.WriteFile(conf, []byte("{}\n"), 0o644))
	port, err := testenv.FreePort()
	require.NoError(t, err)
	stop, err := startProcess(name, filepath.Join(nfdDir, "nfd-master"), []string{"KUBERNETES_NAMESPACE=" + nfdNS, "NODE_NAME=nfd-control-plane"},
		"-kubeconfig="+kc, "-config="+conf, fmt.Sprintf("-port=%d", port))
	require.NoError(t, err)
	return stop
}

// kubeDCModeRule is the NodeFeatureRule kube-dc's scaffold generates for one
// node (reference anchor-cli-gate.md section 3): matched on the node's name
// and an NVIDIA display device, it writes the mode triple.
func kubeDCModeRule(node, mode, config string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeatureRule",
		"metadata": map[string]any{"name": node + "-gpu-mode"},
		"spec": map[string]any{"rules": []any{map[string]any{
			"name": node + "-" + mode,
			"labels": map[string]any{
				gate.LabelWorkloadMode: mode, gate.LabelExpectedWorkloadMode: mode, gate.LabelWorkloadConfig: config,
			},
			"matchFeatures": []any{
				map[string]any{"feature": "system.name", "matchExpressions": map[string]any{
					"nodename": map[string]any{"op": "In", "value": []any{node}}}},
				map[string]any{"feature": "pci.device", "matchExpressions": map[string]any{
					"vendor": map[string]any{"op": "In", "value": []any{"10de"}},
					"class":  map[string]any{"op": "In", "value": []any{"0300", "0302"}}}},
			},
		}}},
	}}
}

// nfdWrites are nfd-master's Node writes in the audit log, each with the
// API server's answer.
type nfdWrite struct {
	at      time.Time
	code    int32
	message string
	// reviewed: the gate answered it (its decision audit annotation).
	reviewed bool
}

func nfdWrites(t *testing.T, node string) []nfdWrite {
	t.Helper()
	events, err := cp.AuditEvents()
	require.NoError(t, err)
	var out []nfdWrite
	for _, ev := range events {
		if ev.Stage != "ResponseComplete" || ev.ObjectRef == nil || ev.ObjectRef.Resource != "nodes" || ev.ObjectRef.Name != node ||
			ev.Username() != "system:serviceaccount:"+nfdNS+":nfd-node-feature-discovery" || ev.Verb != "patch" {
			continue
		}
		w := nfdWrite{at: ev.StageTimestamp, reviewed: ev.Annotations[webhook.WebhookNodes+"/decision"] != ""}
		if ev.ResponseStatus != nil {
			w.code, w.message = ev.ResponseStatus.Code, ev.ResponseStatus.Message
		}
		out = append(out, w)
	}
	return out
}

func refusedSince(ws []nfdWrite, since time.Time) []nfdWrite {
	var out []nfdWrite
	for _, w := range ws {
		if w.code >= 400 && !w.at.Before(since) {
			out = append(out, w)
		}
	}
	return out
}

// TestNFDModeTransitionIsAStep (issue 24 item 3): kube-dc switches a GPU
// node's mode by editing its NodeFeatureRule, and the real nfd-master writes
// the mode labels. That write is judged where it lands, as a per-node step
// of the transition: refused while the node is schedulable and runs a GPU
// holder (nfd-master retries it from its rate-limited node queue), it lands
// once the node is cordoned and free. nfd-master's other writes stay
// unreviewed. On main the flip landed at once (NFD's exemption listed the
// mode labels and the match condition let its write through).
//
// Played by the test: nfd-worker (the NodeFeature object, with the
// system.name feature kube-dc's rule matches), the kubelet (the Node), the
// scheduler (the holder Pod, bound by nodeName, which stays Pending).
func TestNFDModeTransitionIsAStep(t *testing.T) {
	need(t)
	ctx := context.Background()
	installNFD(t, ctx)
	const node = "nfd-mode-gpu"
	// The node joins cordoned: its first mode lands as a step too.
	require.NoError(t, admin.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node,
		Labels:      map[string]string{"kubernetes.io/hostname": node},
		Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
		Spec: corev1.NodeSpec{Unschedulable: true}}))
	nf := nodeFeature(node, h200, bmc)
	require.NoError(t, unstructured.SetNestedField(nf.Object, map[string]any{"elements": map[string]any{"nodename": node}}, "spec", "features", "attributes", "system.name"))
	require.NoError(t, admin.Create(ctx, nf))
	rule := kubeDCModeRule(node, "pod-hami", "container")
	require.NoError(t, admin.Create(ctx, rule))

	stop := startNFDMaster(t, ctx, "nfd-master-mode")
	defer stop()
	mode := func() (string, string, string) {
		n := mustNode(t, ctx, node)
		return n.Labels[gate.LabelWorkloadMode], n.Labels[gate.LabelExpectedWorkloadMode], n.Labels[gate.LabelWorkloadConfig]
	}
	landed := func(want string) func() (bool, error) {
		return func() (bool, error) { a, e, _ := mode(); return a == want && e == want, nil }
	}
	before := reviews(t, "/validate/nodes")
	require.NoError(t, poll(ctx, 2*time.Minute, landed("pod-hami")), "the first mode lands on the cordoned node without holders")
	assert.True(t, cfg.IsGPUNode(mustNode(t, ctx, node)))
	assert.Greater(t, reviews(t, "/validate/nodes"), before, "nfd-master's mode write reached the webhook")
	assert.Empty(t, refusedSince(nfdWrites(t, node), time.Time{}), "the safe step was never refused")

	// In service: uncordoned, a VM holds its GPU.
	patchNodeAsAdmin(t, ctx, `{"spec":{"unschedulable":false}}`, node)
	require.NoError(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-mode"}}))
	holder := testenv.Holder("virt-launcher-vm-1", node)
	holder.Namespace = "tenant-mode"
	require.NoError(t, admin.Create(ctx, holder))

	// kube-dc's transition edits the rule to vm-passthrough without cordoning.
	flipped := time.Now().Add(-time.Second) // the audit log's clock is this machine's, in seconds
	require.NoError(t, admin.Get(ctx, types.NamespacedName{Name: rule.GetName()}, rule))
	require.NoError(t, unstructured.SetNestedSlice(rule.Object, kubeDCModeRule(node, "vm-passthrough", "vm-passthrough").Object["spec"].(map[string]any)["rules"].([]any), "spec", "rules"))
	require.NoError(t, admin.Update(ctx, rule))
	require.NoError(t, poll(ctx, 2*time.Minute, func() (bool, error) { return len(refusedSince(nfdWrites(t, node), flipped)) >= 3, nil }),
		"nfd-master's flip is refused, and it retries")
	refused := refusedSince(nfdWrites(t, node), flipped)
	t.Logf("nfd-master's flip of a schedulable busy node: %d refused writes so far, first: %s", len(refused), refused[0].message)
	for _, w := range refused {
		assert.Contains(t, w.message, `admission webhook "nodes.gpu-upgrade-gate.io" denied the request`)
		assert.Contains(t, w.message, string(gate.CodeModeChangeNotCordoned))
		assert.Contains(t, w.message, string(gate.CodeGPUHolders))
		assert.Contains(t, w.message, "virt-launcher-vm-1")
	}
	a, e, c := mode()
	assert.Equal(t, []string{"pod-hami", "pod-hami", "container"}, []string{a, e, c}, "the mode did not move")

	// The transition's precondition met: cordoned, the VM gone. nfd-master's
	// next retry lands the flip: no one edits the rule or the NodeFeature
	// again, and nfd-master watches no Nodes (only NodeFeatures,
	// NodeFeatureRules and NodeFeatureGroups: nfd-api-controller.go), so the
	// cordon itself queues nothing.
	patchNodeAsAdmin(t, ctx, `{"spec":{"unschedulable":true}}`, node)
	require.NoError(t, admin.Delete(ctx, holder))
	ready := time.Now()
	require.NoError(t, poll(ctx, 3*time.Minute, landed("vm-passthrough")), "the flip lands when the node is cordoned and free")
	_, _, c = mode()
	assert.Equal(t, "vm-passthrough", c)
	t.Logf("the flip landed %s after the node was ready, by nfd-master's retry", time.Since(ready).Round(time.Second))

	// nfd-master's ordinary writes (a new feature label from nfd-worker)
	// stay unreviewed and are never refused.
	refusedBefore := len(refusedSince(nfdWrites(t, node), time.Time{}))
	featureWrite := time.Now()
	require.NoError(t, admin.Get(ctx, types.NamespacedName{Namespace: nfdNS, Name: node}, nf))
	require.NoError(t, unstructured.SetNestedField(nf.Object, "6", "spec", "labels", "kernel-version.major"))
	require.NoError(t, admin.Update(ctx, nf))
	require.NoError(t, poll(ctx, 2*time.Minute, func() (bool, error) {
		return mustNode(t, ctx, node).Labels["feature.node.kubernetes.io/kernel-version.major"] == "6", nil
	}))
	// Counted from the audit log, per write of nfd-master's: the webhook's
	// request counter also counts a late retry of the flip still queued.
	var after int
	for _, w := range nfdWrites(t, node) {
		if !w.at.Before(featureWrite) {
			after++
			assert.False(t, w.reviewed, "a feature label write of nfd-master never reaches the webhook (write at %s)", w.at)
		}
	}
	assert.Positive(t, after, "nfd-master wrote the feature label")
	assert.Equal(t, refusedBefore, len(refusedSince(nfdWrites(t, node), time.Time{})))
	for _, w := range refusedSince(nfdWrites(t, node), time.Time{}) {
		assert.True(t, strings.Contains(w.message, string(gate.CodeModeChangeNotCordoned)) || strings.Contains(w.message, string(gate.CodeGPUHolders)),
			"nfd-master was refused only for the flip: %s", w.message)
	}
}

// patchNodeAsAdmin merge-patches a Node as the cluster admin (a person).
func patchNodeAsAdmin(t *testing.T, ctx context.Context, patch, node string) {
	t.Helper()
	require.NoError(t, admin.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, []byte(patch))))
}
