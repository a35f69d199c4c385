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

// countingPods answers every Pod listing with pods after a delay and counts
// the listings.
type countingPods struct {
	client.Reader
	pods  []corev1.Pod
	lists atomic.Int32
	delay time.Duration
}

func (p *countingPods) List(ctx context.Context, list client.ObjectList, _ ...client.ListOption) error {
	p.lists.Add(1)
	select {
	case <-time.After(p.delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	list.(*corev1.PodList).Items = p.pods
	return nil
}

// TestRequestHoldersJoinListings: request checks reviewed at once share one
// listing of a node (each gets its holders), while the per-node guards'
// Holders always list for themselves; a review that gives up does not fail
// the others waiting on the same listing.
func TestRequestHoldersJoinListings(t *testing.T) {
	const reviews = 8
	for _, tc := range []struct {
		name   string
		shared bool
	}{{"request checks join", true}, {"guards list alone", false}} {
		t.Run(tc.name, func(t *testing.T) {
			live := &countingPods{pods: []corev1.Pod{gpuPod("train", "gpu-01")}, delay: 100 * time.Millisecond}
			f := &Facts{Config: gate.DefaultConfig(), Live: live}
			var wg sync.WaitGroup
			errs := make([]error, reviews)
			got := make([]map[string][]gate.Holder, reviews)
			for i := range reviews {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx := context.Background()
					if i == 0 { // the first gives up early
						c, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
						defer cancel()
						ctx = c
					}
					if tc.shared {
						got[i], errs[i] = f.RequestHolders(ctx, []string{"gpu-01"})
					} else {
						got[i], errs[i] = f.Holders(ctx, []string{"gpu-01"})
					}
				}()
				time.Sleep(time.Millisecond)
			}
			wg.Wait()
			assert.ErrorIs(t, errs[0], context.DeadlineExceeded, "the review that gave up fails closed")
			for i := 1; i < reviews; i++ {
				require.NoError(t, errs[i], i)
				assert.Len(t, got[i]["gpu-01"], 1, i)
			}
			if tc.shared {
				assert.Less(t, int(live.lists.Load()), reviews, "concurrent request checks share listings")
			} else {
				assert.Equal(t, reviews, int(live.lists.Load()), "each guard lists for itself")
			}
		})
	}
}
