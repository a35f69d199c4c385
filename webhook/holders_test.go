package webhook

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// podsByNode answers Pod listings by node name; nodes in fail fail, after a
// delay so the listings overlap.
type podsByNode struct {
	client.Reader
	pods     map[string][]corev1.Pod
	fail     map[string]bool
	inFlight atomic.Int32
	peak     atomic.Int32
	// raw are the last listing's resourceVersion options.
	mu  sync.Mutex
	raw metav1.ListOptions
}

func (p *podsByNode) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	n := p.inFlight.Add(1)
	defer p.inFlight.Add(-1)
	for {
		if old := p.peak.Load(); n <= old || p.peak.CompareAndSwap(old, n) {
			break
		}
	}
	time.Sleep(10 * time.Millisecond)
	lo := &client.ListOptions{}
	lo.ApplyOptions(opts)
	node, _ := lo.FieldSelector.RequiresExactMatch("spec.nodeName")
	p.mu.Lock()
	if lo.Raw != nil {
		p.raw = *lo.Raw
	} else {
		p.raw = metav1.ListOptions{}
	}
	p.mu.Unlock()
	if p.fail[node] {
		return errors.New("connection refused")
	}
	list.(*corev1.PodList).Items = p.pods[node]
	return nil
}

func gpuPod(name, node string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml"}, Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}}}
}

func TestHolders(t *testing.T) {
	var nodes []string
	live := &podsByNode{pods: map[string][]corev1.Pod{}, fail: map[string]bool{}}
	for i := range 20 {
		n := fmt.Sprintf("gpu-%02d", i)
		nodes = append(nodes, n)
		if i%3 == 0 {
			live.pods[n] = []corev1.Pod{gpuPod("train-"+n, n)}
		}
	}
	f := &Facts{Config: gate.DefaultConfig(), Live: live}
	got, err := f.Holders(context.Background(), nodes)
	require.NoError(t, err)
	require.Len(t, got, len(nodes))
	for i, n := range nodes {
		if i%3 == 0 {
			require.Len(t, got[n], 1, n)
			assert.Equal(t, "train-"+n, got[n][0].Pod)
		} else {
			assert.Empty(t, got[n], n)
		}
	}
	assert.Greater(t, live.peak.Load(), int32(1), "the nodes are listed concurrently")
	assert.LessOrEqual(t, live.peak.Load(), int32(maxHolderLists))

	// Any failure fails the whole listing (the engine then fails closed),
	// naming the first failing node in the given order.
	live.fail["gpu-17"], live.fail["gpu-05"] = true, true
	_, err = f.Holders(context.Background(), nodes)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "gpu-05")

	one, err := f.Holders(context.Background(), []string{"gpu-03"})
	require.NoError(t, err)
	assert.Len(t, one["gpu-03"], 1)
	none, err := f.Holders(context.Background(), nil)
	require.NoError(t, err)
	assert.Empty(t, none)
}

// TestHolderFreshness: holders are listed from the API server's watch cache
// no older than the Pods the gate's informer has seen, never at any
// resourceVersion ("0") and never waiting for etcd (a consistent list) once
// the informer has one.
func TestHolderFreshness(t *testing.T) {
	for _, tc := range []struct {
		name      string
		seen      func() string
		wantRV    string
		wantMatch metav1.ResourceVersionMatch
	}{
		{"informer has a resourceVersion", func() string { return "4242" }, "4242", metav1.ResourceVersionMatchNotOlderThan},
		{"informer not synced yet: consistent", func() string { return "" }, "", ""},
		{"no informer: consistent", nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := &podsByNode{pods: map[string][]corev1.Pod{"gpu-01": {gpuPod("train", "gpu-01")}}}
			f := &Facts{Config: gate.DefaultConfig(), Live: live, PodsSeen: tc.seen}
			got, err := f.Holders(context.Background(), []string{"gpu-01"})
			require.NoError(t, err)
			assert.Len(t, got["gpu-01"], 1)
			assert.Equal(t, tc.wantRV, live.raw.ResourceVersion)
			assert.Equal(t, tc.wantMatch, live.raw.ResourceVersionMatch)
		})
	}
}
