package webhook

import (
	"encoding/json"
	"fmt"
	"hash/maphash"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
)

// decodedNodes returns the fleet's Nodes as an informer receives them: each
// decoded from its own JSON, so no two share a string.
func decodedNodes(t testing.TB, nodes []*corev1.Node) []*corev1.Node {
	out := make([]*corev1.Node, len(nodes))
	for i, n := range nodes {
		data, err := json.Marshal(n)
		require.NoError(t, err)
		out[i] = &corev1.Node{}
		require.NoError(t, json.Unmarshal(data, out[i]))
	}
	return out
}

// TestFleetStringsOutliveCollections: two Nodes stripped with a collection
// between them (a kubelet's update arriving after the sync) share their
// label keys and values. unique.Make(s).Value(), which stripNode used
// before, shares only while a Handle is alive: after a collection each
// update brought its own copies, and the cache grew back toward unshared.
func TestFleetStringsOutliveCollections(t *testing.T) {
	f := fleetgen.Generate(fleetgen.Options{Seed: 1, Nodes: 10, Kubelet: true})
	nodes := decodedNodes(t, append(f.Nodes[:1:1], f.Nodes[0]))
	first, err := StripNode(nodes[0])
	require.NoError(t, err)
	runtime.GC()
	runtime.GC()
	second, err := StripNode(nodes[1])
	require.NoError(t, err)

	a, b := first.(*corev1.Node), second.(*corev1.Node)
	require.Equal(t, a.Labels, b.Labels)
	require.NotEmpty(t, a.Labels)
	keys := func(n *corev1.Node) map[string]string {
		out := map[string]string{}
		for k, v := range n.Labels {
			out[k] = fmt.Sprintf("%p %p", unsafe.StringData(k), unsafe.StringData(v))
		}
		return out
	}
	assert.Equal(t, keys(a), keys(b), "each label's key and value is one copy")
	assert.Same(t, unsafe.StringData(a.Status.NodeInfo.KernelVersion), unsafe.StringData(b.Status.NodeInfo.KernelVersion))
}

// TestFleetStringsBounded: a flood of distinct strings (label values a
// writer makes up) keeps at most one string per slot, and long strings are
// never kept.
func TestFleetStringsBounded(t *testing.T) {
	table := &internTable{seed: maphash.MakeSeed()}
	for i := range 4 * len(table.slots) {
		table.intern(fmt.Sprintf("made-up-value-%d", i))
	}
	long := strings.Repeat("x", maxIntern+1)
	assert.Same(t, unsafe.StringData(long), unsafe.StringData(table.intern(long)), "returned as is, not kept")
	kept := 0
	for i := range table.slots {
		if p := table.slots[i].Load(); p != nil {
			kept++
			assert.LessOrEqual(t, len(*p), maxIntern)
		}
	}
	assert.LessOrEqual(t, kept, len(table.slots))
	assert.Equal(t, "made-up-value-7", table.intern("made-up-value-7"), "a replaced slot still returns the value")
}

// BenchmarkCachedNodes measures the live heap a cached, stripped Node
// takes (live-B/node), with the fleet's Nodes arriving all at once (the
// informer's sync) or one per collection (updates spread over the day, as
// kubelets, NFD and GFD write them). Run old and new binaries side by side.
func BenchmarkCachedNodes(b *testing.B) {
	f := fleetgen.Generate(fleetgen.Options{Seed: 1, Nodes: 500, Kubelet: true, Validators: true})
	strip := StripNodeFor(f.Config)
	for _, arrival := range []string{"sync", "spread"} {
		b.Run(arrival, func(b *testing.B) {
			var live float64
			for range b.N {
				cache := make([]any, len(f.Nodes))
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				nodes := decodedNodes(b, f.Nodes)
				for i, n := range nodes {
					nodes[i] = nil
					out, err := strip(n)
					require.NoError(b, err)
					cache[i] = out
					if arrival == "spread" {
						runtime.GC()
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				live += float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(len(cache))
				runtime.KeepAlive(cache)
			}
			b.ReportMetric(live/float64(b.N), "live-B/node")
		})
	}
}
