//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// TestGPUNodeDefinitionAgrees (issue 10 item 3): the real API server,
// evaluating the chart's gpu-node match condition, sends a person's label
// change to the webhook exactly for the nodes the engine calls GPU nodes.
// Each case is a node as NFD, GFD or a device plugin would leave it. Each
// counts the reviews of its own write (ownWrites).
func TestGPUNodeDefinitionAgrees(t *testing.T) {
	ctx := context.Background()
	alice, _ := as(t, "alice")
	pci := func(parts string) map[string]string {
		return map[string]string{"feature.node.kubernetes.io/pci-" + parts + ".present": "true"}
	}
	for i, tc := range []struct {
		name     string
		labels   map[string]string
		capacity corev1.ResourceList
	}{
		{"NFD default fields [class, vendor]", pci("0302_10de"), nil},
		{"GPU Operator fields [vendor]", pci("10de"), nil},
		{"vendor and device", pci("10de_2335"), nil},
		{"all five fields", pci("0302_10de_2335_10de_18bf"), nil},
		{"the chart's NodeFeatureRule label", pci("10de_2335_10de_18bf"), nil},
		{"BMC VGA of another vendor", pci("0300_1a03"), nil},
		{"GPU vendor in the device position", pci("8086_10de"), nil},
		{"PCI label not true", map[string]string{"feature.node.kubernetes.io/pci-10de.present": "false"}, nil},
		{"gpu.present true", map[string]string{"nvidia.com/gpu.present": "true"}, nil},
		{"gpu.present false", map[string]string{"nvidia.com/gpu.present": "false"}, nil},
		{"GFD product only", map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200"}, nil},
		{"operand opt-out on a CPU node", map[string]string{"nvidia.com/gpu.deploy.operands": "false"}, nil},
		{"GPU in capacity only", nil, corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}},
		{"MIG slices in capacity only", nil, corev1.ResourceList{"nvidia.com/mig-1g.18gb": resource.MustParse("7")}},
		{"CPU capacity only", nil, corev1.ResourceList{"cpu": resource.MustParse("64")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("def-%02d", i)
			require.NoError(t, env.CreateNodes(ctx, []testenv.NodeSpec{{Name: name, Tuple: testenv.Source, Mutate: func(n *corev1.Node) {
				for k, v := range tc.labels {
					n.Labels[k] = v
				}
				n.Status.Capacity = tc.capacity
			}}}))
			defer env.Admin.Delete(ctx, &corev1.Node{ObjectMeta: metaName(name)})
			var n corev1.Node
			require.NoError(t, env.Admin.Get(ctx, types.NamespacedName{Name: name}, &n))
			want := env.Config.IsGPUNode(&n)
			own := ownWrites{since: time.Now(), resources: []string{"nodes"}, users: []string{"alice"}, names: []string{name}}
			require.NoError(t, patchNode(alice, name, `{"metadata":{"labels":{"team":"ml"}}}`))
			assert.Equal(t, want, own.reviews(t, webhook.WebhookNodes, 1) == 1, "engine says GPU node=%v; the API server must send the change iff so", want)
		})
	}
}

// TestStrippedGPUNodeStaysReviewed (issue 10's first bypass): removing a
// GPU node's identity labels is reviewed and refused (GPUIdentityRemoved);
// stripped anyway (break glass), the node stays a GPU node (its capacity
// still holds the GPUs), so a later mode flip and an uncordon mid-transition
// are still refused. On the old configuration the strip was allowed and the
// API server stopped sending this node's changes once four label keys were
// gone.
func TestStrippedGPUNodeStaysReviewed(t *testing.T) {
	ctx := context.Background()
	alice, _ := as(t, "alice")
	const name = "gpu-v100-strip"
	require.NoError(t, env.CreateNodes(ctx, []testenv.NodeSpec{{Name: name, Fixture: "node-v100.json", Tuple: testenv.Source, Zone: "zone-a"}}))
	defer env.Admin.Delete(ctx, &corev1.Node{ObjectMeta: metaName(name)})
	var n corev1.Node
	require.NoError(t, env.Admin.Get(ctx, types.NamespacedName{Name: name}, &n))
	var strip []string
	for k := range n.Labels {
		if (strings.HasPrefix(k, "feature.node.kubernetes.io/pci-") || strings.HasPrefix(k, "nvidia.com/")) && !slices.Contains(gate.ModeLabels, k) {
			strip = append(strip, fmt.Sprintf("%q:null", k))
		}
	}
	require.NotEmpty(t, strip)
	own := ownWrites{since: time.Now(), resources: []string{"nodes"}, users: []string{"alice"}, names: []string{name}}
	stripPatch := `{"metadata":{"labels":{` + strings.Join(strip, ",") + `}}}`
	requireDenied(t, patchNode(alice, name, stripPatch), gate.CodeGPUIdentityRemoved, gate.CodeOwnedFactWritten)
	assert.Equal(t, 1, own.reviews(t, webhook.WebhookNodes, 1), "removing a GPU node's identity labels is reviewed")
	breakGlass, _ := as(t, "bob", env.Config.BreakGlassGroup)
	require.NoError(t, patchNode(breakGlass, name, `{"metadata":{"annotations":{"`+gate.AnnotationBreakGlass+`":"INC-42 relabel after NFD misconfiguration"},"labels":{`+strings.Join(strip, ",")+`}}}`))

	requireDenied(t, patchNode(alice, name, `{"metadata":{"labels":{"kube-dc.com/gpu.workload-mode":"pod-hami"}}}`), gate.CodeModeChangeNotCordoned)
	require.NoError(t, patchNode(alice, name, `{"spec":{"unschedulable":true}}`))
	require.NoError(t, patchNode(alice, name, `{"metadata":{"labels":{"kube-dc.com/gpu.expected-workload-mode":"vm-passthrough"}}}`), "cordoned, no holders: the mode change may start")
	requireDenied(t, patchNode(alice, name, `{"spec":{"unschedulable":false}}`), gate.CodeUncordonDuringTransition)
}

// TestNodeStatusLabelsReviewed (issue 10): a label changed through the
// nodes/status subresource is reviewed like one through the Node; a status
// write that changes no label is not sent.
func TestNodeStatusLabelsReviewed(t *testing.T) {
	ctx := context.Background()
	const name = "gpu-v100-status"
	require.NoError(t, env.CreateNodes(ctx, []testenv.NodeSpec{{Name: name, Fixture: "node-v100.json", Tuple: testenv.Source, Zone: "zone-a"}}))
	defer env.Admin.Delete(ctx, &corev1.Node{ObjectMeta: metaName(name)})
	statusPatch := func(patch string) error {
		n := &corev1.Node{ObjectMeta: metaName(name)}
		return env.Admin.Status().Patch(ctx, n, client.RawPatch(types.MergePatchType, []byte(patch)))
	}
	// The node is the test's own: any user's write to its status is.
	own := ownWrites{since: time.Now(), resources: []string{"nodes/status"}, names: []string{name}}
	require.NoError(t, statusPatch(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady"}]}}`))
	assert.Equal(t, 0, own.reviews(t, webhook.WebhookNodes, 1), "a status write that changes no label is not reviewed")
	requireDenied(t, statusPatch(`{"metadata":{"labels":{"kube-dc.com/gpu.workload-mode":"pod-hami"}}}`), gate.CodeModeChangeNotCordoned)
	var n corev1.Node
	require.NoError(t, env.Admin.Get(ctx, types.NamespacedName{Name: name}, &n))
	assert.NotContains(t, n.Labels, gate.LabelWorkloadMode, "the refused status write changed nothing")
}

func metaName(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }
