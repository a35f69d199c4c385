//go:build e2e

package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
)

// TestHoldersByRuntime: Pods that reach GPUs through the NVIDIA runtime,
// with no GPU resource, hold the node; a Pod that asks that runtime for no
// devices does not. The Pods are bound to their node by spec.nodeName, as
// the scheduler would bind them (no kubelet runs them here).
func TestHoldersByRuntime(t *testing.T) {
	ctx := context.Background()
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "nvidia"}, Handler: "nvidia"}
	require.NoError(t, client.IgnoreAlreadyExists(env.Admin.Create(ctx, rc)))
	nodes := []testenv.NodeSpec{
		{Name: "gpu-v100-rc", Fixture: "node-v100.json", Tuple: testenv.Source, Zone: "zone-a"},
		{Name: "gpu-v100-env", Fixture: "node-v100.json", Tuple: testenv.Source, Zone: "zone-a"},
		{Name: "gpu-v100-initenv", Fixture: "node-v100.json", Tuple: testenv.Source, Zone: "zone-a"},
		{Name: "gpu-v100-void", Fixture: "node-v100.json", Tuple: testenv.Source, Zone: "zone-a"},
	}
	require.NoError(t, env.CreateNodes(ctx, nodes))
	defer func() {
		for _, n := range nodes {
			require.NoError(t, env.Admin.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}))
		}
	}()
	nvidia := "nvidia"
	pod := func(name, node string, mod func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml"}, Spec: corev1.PodSpec{NodeName: node,
			Containers: []corev1.Container{{Name: "c", Image: "nvcr.io/nvidia/cuda:12.8.0-base-ubuntu24.04"}}}}
		mod(p)
		return p
	}
	devices := func(v string) []corev1.EnvVar { return []corev1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES", Value: v}} }
	pods := []*corev1.Pod{
		pod("by-runtime-class", "gpu-v100-rc", func(p *corev1.Pod) { p.Spec.RuntimeClassName = &nvidia }),
		pod("by-env", "gpu-v100-env", func(p *corev1.Pod) { p.Spec.Containers[0].Env = devices("all") }),
		pod("by-init-env", "gpu-v100-initenv", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i", Image: "busybox", Env: devices("0")}}
		}),
		pod("void", "gpu-v100-void", func(p *corev1.Pod) { p.Spec.Containers[0].Env = devices("void") }),
	}
	for _, p := range pods {
		require.NoError(t, env.Admin.Create(ctx, p))
		defer func() { require.NoError(t, env.Admin.Delete(ctx, p)) }()
	}
	// The gate lists holders from the API server's watch cache, which gets
	// a Pod a moment after its create returns (docs/performance.md, "GPU
	// holders: how fresh, and why"): this test is about what makes a Pod a
	// holder, so it waits until the cache has them.
	require.Eventually(t, func() bool {
		var list corev1.PodList
		if err := env.Admin.List(ctx, &list, client.InNamespace("ml"), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}); err != nil {
			return false
		}
		return !slices.ContainsFunc(pods, func(p *corev1.Pod) bool {
			return !slices.ContainsFunc(list.Items, func(q corev1.Pod) bool { return q.Name == p.Name })
		})
	}, 10*time.Second, 10*time.Millisecond)
	c, _ := as(t, "alice")
	for _, tc := range []struct {
		node string
		want []gate.Code
	}{
		{"gpu-v100-rc", []gate.Code{gate.CodeGPUHolders}},
		{"gpu-v100-env", []gate.Code{gate.CodeGPUHolders}},
		{"gpu-v100-initenv", []gate.Code{gate.CodeGPUHolders}},
		{"gpu-v100-void", nil},
	} {
		t.Run(tc.node, func(t *testing.T) {
			p := plan("holders-"+tc.node, "v100-r580", tc.node)
			err := c.Create(ctx, p, client.DryRunAll)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			requireDenied(t, err, tc.want...)
		})
	}
}
