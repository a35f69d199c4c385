package webhook

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"
)

// checkNodeScan: whatever the one-pass scan accepts, the usual decoding
// (the AdmissionReview as controller-runtime decodes it, then decodeNode
// on object and oldObject) accepts too, to the same request and Nodes
// (FuzzAdmissionReview runs it on every input).
func checkNodeScan(t *testing.T, body []byte) {
	t.Helper()
	got, ok := decodeNodeReview(body)
	if !ok {
		return
	}
	var rv admissionv1.AdmissionReview
	require.NoError(t, sigsjson.UnmarshalCaseSensitivePreserveInts(body, &rv), "the scan accepted a body the usual decoding refuses")
	require.NotNil(t, rv.Request)
	assert.Equal(t, rv.APIVersion, got.apiVersion)
	n, old, err := decodeNodePair(admission.Request{AdmissionRequest: *rv.Request})
	require.NoError(t, err, "the scan accepted Nodes decodeNode refuses")
	want := *rv.Request
	want.Object, want.OldObject = got.Object, got.OldObject
	assert.Equal(t, want, got.AdmissionRequest)
	assert.Equal(t, n, got.Object.Object, "object")
	assert.Equal(t, old, got.OldObject.Object, "oldObject")
}

// nodeScanSeeds are bodies at the scan's edges (FuzzAdmissionReview's
// seeds too): each either decodes to what the usual path decodes, or
// falls back to it.
var nodeScanSeeds = func() []string {
	node := `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","uid":"u1","resourceVersion":"7","labels":{"nvidia.com/gpu.present":"true","zone":"a"},` +
		`"annotations":{"a":"{\"x\":[1,2.5e3,-0,true,null]}"},"managedFields":[{"manager":"kubelet","fieldsV1":{"f:status":{"f:images":{}}}}]},` +
		`"spec":{"unschedulable":true,"taints":[{"key":"node.kubernetes.io/unschedulable","effect":"NoSchedule","timeAdded":"2026-11-29T10:00:00Z"}]},` +
		`"status":{"capacity":{"cpu":"64","nvidia.com/gpu":"8","nvidia.com/mig-1g.10gb":null},"allocatable":{"cpu":"63","nvidia.com/gpu":"6"},` +
		`"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-11-29T09:00:00Z","message":"ok"},null,{"type":"X","lastTransitionTime":null}],` +
		`"nodeInfo":{"kernelVersion":"6.8.0","kubeletVersion":"v1.36.1+rke2r1","osImage":"Ubuntu"},"images":[{"names":["a","b"],"sizeBytes":123}]}}`
	review := func(req, obj, old string) string {
		return `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","kind":{"group":"","version":"v1","kind":"Node"},` +
			`"resource":{"group":"","version":"v1","resource":"nodes"},"requestKind":{"group":"","version":"v1","kind":"Node"},"name":"n","operation":"UPDATE",` +
			`"userInfo":{"username":"alice","uid":"x","groups":["a",null],"extra":{"k":["v"],"e":null}},"dryRun":false,"options":{"kind":"UpdateOptions"}` + req +
			`,"object":` + obj + `,"oldObject":` + old + `}}`
	}
	plain := review("", node, node)
	out := []string{plain}
	for _, r := range [][2]string{
		{`"zone":"a"`, `"zone":"\u00e9\ud83d\ude00"`},                         // escapes in a value
		{`"zone":"a"`, `"zone":"é"`},                                          // UTF-8
		{`"zone":"a"`, "\"zone\":\"\xff\""},                                   // invalid UTF-8 (replaced)
		{`"zone":"a"`, `"zone":null`},                                         // null value: ""
		{`"zone":"a"`, `"zone":"a","zone":"b"`},                               // repeated map key: the last
		{`"zone":"a"`, `"z\u006fne":"a"`},                                     // escaped key
		{`"zone":"a"`, `"zone":7`},                                            // wrong type
		{`"labels":{`, `"labels":null,"x":{`},                                 // null map
		{`"name":"n",`, `"name":"n","name":"m",`},                             // repeated struct field
		{`"kind":"Node"`, `"Kind":"Node","kind":"Node"`},                      // case differs: ignored
		{`"kind":"AdmissionReview"`, `"KIND":"Pod","kind":"AdmissionReview"`}, // top-level: the kind is found ignoring case
		{`"unschedulable":true`, `"unschedulable":null`},
		{`"unschedulable":true`, `"unschedulable":"yes"`},
		{`"nvidia.com/gpu":"8"`, `"nvidia.com/gpu":"eight"`},
		{`"nvidia.com/gpu":"8"`, `"nvidia.com/gpu":8`},
		{`"sizeBytes":123`, `"sizeBytes":0123`}, // not a JSON number
		{`"sizeBytes":123`, `"sizeBytes":-1.5E+07`},
		{`"sizeBytes":123`, `"sizeBytes":1.}`},
		{`"message":"ok"`, "\"message\":\"o\tk\""}, // control byte in a string
		{`"message":"ok"`, `"message":"\x"`},       // bad escape
		{`"lastTransitionTime":"2026-11-29T09:00:00Z"`, `"lastTransitionTime":"2026-11-29T09:00:00+01:00"`},
		{`"lastTransitionTime":"2026-11-29T09:00:00Z"`, `"lastTransitionTime":"yesterday"`},
		{`"lastTransitionTime":"2026-11-29T09:00:00Z"`, `"lastTransitionTime":"2026-11-29T09:00:00\u005a"`},
		{`"conditions":[`, `"conditions":[7,`},
		{`"taints":[`, `"taints":[{"timeAdded":5},`},
		{`"dryRun":false`, `"dryRun":null`},
		{`"dryRun":false`, `"dryRun":"no"`},
		{`"groups":["a",null]`, `"groups":[]`},
		{`"requestKind":{"group":"","version":"v1","kind":"Node"}`, `"requestKind":null`},
		{`"requestKind":{"group":"","version":"v1","kind":"Node"}`, `"requestKind":5`},
		{`"options":{"kind":"UpdateOptions"}`, `"options":null`},
		{`"images":[`, `"images":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `,"x":[`},
	} {
		out = append(out, strings.Replace(plain, r[0], r[1], 1))
	}
	// The same in the oldObject only, the Node whose values equal to the
	// object's are taken from it (an escape or a repeated key on one side
	// only must not be taken for the other's value).
	for _, r := range [][2]string{
		{`"zone":"a"`, `"zone":"\u00e9\ud83d\ude00"`},
		{`"zone":"a"`, `"zone":"\u0061"`},
		{`"zone":"a"`, `"zone":null`},
		{`"zone":"a"`, `"zone":"b","zone":"a"`},
		{`"name":"n"`, `"name":"m"`},
		{`"uid":"u1"`, `"uid":"u2"`},
		{`"annotations":{"a":"{\"x\":[1,2.5e3,-0,true,null]}"}`, `"annotations":{"a":"{\"x\":[1,2.5e3,-0,true]}"}`},
	} {
		i := strings.LastIndex(plain, r[0])
		out = append(out, plain[:i]+r[1]+plain[i+len(r[0]):])
	}
	return append(out, plain+" ", plain+"x", plain[:len(plain)-1], review("", "null", node), review("", `"x"`, node),
		strings.Replace(plain, `"kind":"AdmissionReview"`, `"kind":"AdmissionReview","response":{}`, 1),
		strings.Replace(plain, "admission.k8s.io/v1", "admission.k8s.io/v1beta1", 1))
}()

// TestNodeScan: each edge case decodes as the usual decoding does, or
// falls back; the plain review, a UTF-8 and an escaped value, and a null
// map take the one pass.
func TestNodeScan(t *testing.T) {
	for i, body := range nodeScanSeeds {
		t.Run(fmt.Sprintf("%02d", i), func(t *testing.T) { checkNodeScan(t, []byte(body)) })
	}
	for _, i := range []int{0, 1, 2, 4, 5, 6, 8} {
		got, ok := decodeNodeReview([]byte(nodeScanSeeds[i]))
		require.True(t, ok, "seed %d takes the one pass", i)
		n := got.Object.Object.(*corev1.Node)
		assert.Equal(t, "n", n.Name)
		assert.Equal(t, "8", n.Status.Capacity.Name("nvidia.com/gpu", "").String())
	}
	for _, i := range []int{7, 9, 11, 13} {
		_, ok := decodeNodeReview([]byte(nodeScanSeeds[i]))
		assert.False(t, ok, "seed %d falls back", i)
	}
}

// TestNodeScanSharesEqualValues: the oldObject's label values equal to the
// object's are the object's strings; a value that differs is its own; the
// maps go back to the pool cleared.
func TestNodeScanSharesEqualValues(t *testing.T) {
	plain := nodeScanSeeds[0]
	i := strings.LastIndex(plain, `"zone":"a"`)
	body := plain[:i] + `"zone":"b"` + plain[i+len(`"zone":"a"`):]
	got, ok := decodeNodeReview([]byte(body))
	require.True(t, ok)
	n, old := got.Object.Object.(*corev1.Node), got.OldObject.Object.(*corev1.Node)
	assert.Equal(t, "a", n.Labels["zone"])
	assert.Equal(t, "b", old.Labels["zone"])
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	assert.True(t, same(n.Labels["nvidia.com/gpu.present"], old.Labels["nvidia.com/gpu.present"]))
	assert.True(t, same(n.Annotations["a"], old.Annotations["a"]), "an escaped value equal on both sides is decoded once")
	assert.True(t, same(n.Name, old.Name))
	for k := range n.Labels {
		for k2 := range old.Labels {
			if k == k2 {
				assert.True(t, same(k, k2), "key %s", k)
			}
		}
	}
	labels := n.Labels
	got.maps.release()
	assert.Empty(t, labels, "released maps are cleared")
	assert.Zero(t, got.maps.n)
}
