package webhook

import (
	"encoding/json"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
)

func TestStripNode(t *testing.T) {
	f := fleetgen.Generate(fleetgen.Options{Seed: 1, Nodes: 50, Kubelet: true, Now: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)})
	decode := func(n *corev1.Node) *corev1.Node { // as the informer does: each node its own strings
		data, err := json.Marshal(n)
		require.NoError(t, err)
		var out corev1.Node
		require.NoError(t, json.Unmarshal(data, &out))
		return &out
	}
	a, b := decode(f.Nodes[10]), decode(f.Nodes[11])
	sa, err := StripNode(a)
	require.NoError(t, err)
	sb, _ := StripNode(b)
	na, nb := sa.(*corev1.Node), sb.(*corev1.Node)

	assert.Equal(t, a.Labels, na.Labels)
	assert.Equal(t, a.Status.NodeInfo.KernelVersion, na.Status.NodeInfo.KernelVersion)
	assert.Equal(t, a.Status.NodeInfo.KubeletVersion, na.Status.NodeInfo.KubeletVersion)
	assert.Equal(t, []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}, na.Status.Conditions)
	assert.Empty(t, na.Status.Images)
	assert.Empty(t, na.Annotations)

	// The same key and value on two nodes share their bytes.
	const key = "feature.node.kubernetes.io/kernel-version.full"
	ka, kb := keyOf(na.Labels, key), keyOf(nb.Labels, key)
	assert.Equal(t, unsafe.StringData(ka), unsafe.StringData(kb), "label keys are interned")
	assert.Equal(t, unsafe.StringData(na.Labels[key]), unsafe.StringData(nb.Labels[key]), "label values are interned")

	// Other objects pass through.
	cm := &corev1.ConfigMap{}
	got, err := StripNode(cm)
	require.NoError(t, err)
	assert.Same(t, cm, got)
}

func keyOf(m map[string]string, k string) string {
	for key := range m {
		if key == k {
			return key
		}
	}
	return ""
}

// TestDecodeErrorsNameFields: a field of the wrong JSON type is named with
// the form expected, not the Go types behind it.
func TestDecodeErrorsNameFields(t *testing.T) {
	cases := []struct {
		name, body, want string
	}{
		{"Node labels not an object", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":"gpu"}}`, "metadata.labels: expected an object of strings, got a JSON string"},
		{"Node unschedulable not a boolean", `{"apiVersion":"v1","kind":"Node","spec":{"unschedulable":"yes"}}`, "spec.unschedulable: expected true or false, got a JSON string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeNode([]byte(tc.body))
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
			assert.NotContains(t, err.Error(), "Go ")
		})
	}
	var cm corev1.ConfigMap
	err := decodeObject([]byte(`{"apiVersion":"v1","kind":"ConfigMap","data":{"qualification.yaml":7}}`), &cm, "ConfigMap")
	require.Error(t, err)
	assert.Equal(t, "data: expected a string, got a JSON number", err.Error(), "a map value is named by its map")
}
