package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
)

// TestCacheTransformsKeepDecisions: the informers' transforms (cacheOptions:
// StripNodeFor the config, StripPod) drop what no rule reads, so every review
// of the generated fleet gets the same answer (allowed, code, message,
// warnings) from caches holding the stripped objects as from caches holding
// the objects as the API server sends them. The fleet carries what a kubelet
// and the node's agents publish (images, addresses, annotations, taints,
// condition texts, managed fields) and, on a few GPU nodes, the marks the
// rules read (the out-of-service taint and a health agent's annotations, the
// gate's moved-by and cordon-handover annotations, the cordon's field
// manager). A rule that starts reading a field the transforms drop makes
// this test fail; the lossy transforms below show that it can.
func TestCacheTransformsKeepDecisions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 1,000-node fleet three times")
	}
	f := markedFleet(t)
	reviews := f.Reviews(benchNow)
	for _, role := range []fleetgen.Role{fleetgen.RoleCanaryPlan, fleetgen.RoleCanary, fleetgen.RoleWave1} {
		for _, n := range f.ByRole("v100", "zone-a", role) {
			reviews = append(reviews, jobStart("gpu-v100-canary-zone-a", n.Name, latestHash(f, "gpu-v100-canary-zone-a")))
		}
	}
	reviews = append(reviews, jobStart("rke2-agent-cpu-pool-1", "cpu-0001", latestHash(f, "rke2-agent-cpu-pool-1")))
	require.Greater(t, len(reviews), 50)

	served := func(n any) (any, error) { return n, nil }
	original := newBenchEnv(f, newFleetCacheWith(f, served, served)).answers(t, reviews)
	stripped := newBenchEnv(f, newFleetCacheWith(f, StripNodeFor(f.Config), StripPod)).answers(t, reviews)
	allowed := 0
	for i, r := range reviews {
		assert.Equal(t, original[i], stripped[i], "%s: the stripped caches change the answer", r.Name)
		if bytes.Contains([]byte(original[i]), []byte(`"allowed":true`)) {
			allowed++
		}
	}
	assert.Positive(t, allowed, "some reviews are allowed")
	assert.Less(t, allowed, len(reviews), "some reviews are denied")

	// The comparison notices a transform that drops what a rule reads.
	for _, tc := range []struct {
		name string
		drop func(*corev1.Node)
	}{
		{"conditions", func(n *corev1.Node) { n.Status.Conditions = nil }},
		{"health conditions", func(n *corev1.Node) {
			n.Status.Conditions = slices.DeleteFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type != corev1.NodeReady })
		}},
		{"taints and annotations", func(n *corev1.Node) { n.Spec.Taints, n.Annotations = nil, nil }},
		{"kubelet version", func(n *corev1.Node) { n.Status.NodeInfo.KubeletVersion = "" }},
		{"GPU resources", func(n *corev1.Node) { n.Status.Capacity, n.Status.Allocatable = nil, nil }},
	} {
		t.Run("lossy "+tc.name, func(t *testing.T) {
			lossy := func(obj any) (any, error) {
				out, err := StripNodeFor(f.Config)(obj)
				if n, ok := out.(*corev1.Node); ok {
					n = n.DeepCopy()
					tc.drop(n)
					out = n
				}
				return out, err
			}
			got := newBenchEnv(f, newFleetCacheWith(f, lossy, StripPod)).answers(t, reviews)
			differ := 0
			for i := range reviews {
				if original[i] != got[i] {
					differ++
				}
			}
			assert.Positive(t, differ, "dropping the nodes' %s changes some answer", tc.name)
		})
	}
}

// markedFleet is a 1,000-node fleet with the kubelet's details, a validator
// Pod per GPU node, and on a few GPU nodes the marks the rules read beside
// ones they do not.
func markedFleet(t *testing.T) *fleetgen.Fleet {
	f := fleetgen.Generate(fleetgen.Options{Seed: 1, Nodes: 1000, Now: benchNow.Truncate(24 * time.Hour), Kubelet: true, Validators: true})
	cfg := f.Config
	require.NotEmpty(t, cfg.OutOfService.Taints)
	require.NotEmpty(t, cfg.OutOfService.Annotations)
	mark := func(hw string, role fleetgen.Role, zone string, how func(*corev1.Node)) {
		ns := f.ByRole(hw, zone, role)
		require.NotEmpty(t, ns, "%s %s %s", hw, role, zone)
		how(ns[0])
	}
	cordon := func(n *corev1.Node, manager string) {
		n.Spec.Unschedulable = true
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: gate.TaintUnschedulable, Effect: corev1.TaintEffectNoSchedule})
		n.ManagedFields = append(n.ManagedFields, metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:unschedulable":{}}}`)})
	}
	// Out of service by taint; a health agent's cordon with its marks; a
	// person's cordon handed over; a node moved into a wave by a person.
	mark("a100", fleetgen.RoleCanary, "zone-a", func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: cfg.OutOfService.Taints[0], Effect: corev1.TaintEffectNoExecute})
	})
	mark("v100", fleetgen.RoleWave1, "zone-a", func(n *corev1.Node) {
		cordon(n, "nvsentinel")
		for _, k := range cfg.OutOfService.Annotations {
			metav1.SetMetaDataAnnotation(&n.ObjectMeta, k, "true")
		}
	})
	mark("v100", fleetgen.RoleWave1, "zone-b", func(n *corev1.Node) {
		cordon(n, "kubectl-cordon")
		metav1.SetMetaDataAnnotation(&n.ObjectMeta, gate.AnnotationCordonHandover, "alice")
	})
	mark("v100", fleetgen.RoleWave2, "zone-a", func(n *corev1.Node) {
		metav1.SetMetaDataAnnotation(&n.ObjectMeta, gate.AnnotationMovedBy, "alice")
	})
	// A GPU-health agent's condition, unhealthy, on a canary (the strip
	// keeps Ready and the configured health conditions, no other).
	require.NotEmpty(t, cfg.Proof.HealthConditions)
	mark("v100", fleetgen.RoleCanary, "zone-a", func(n *corev1.Node) {
		h := cfg.Proof.HealthConditions[0]
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeConditionType(h.Type), Status: h.UnhealthyStatus, Reason: "XidError"})
	})
	// And what no rule reads: another taint and annotation on every GPU node.
	for _, n := range f.Nodes {
		if cfg.IsGPUNode(n) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "example.com/dedicated", Value: "gpu", Effect: corev1.TaintEffectPreferNoSchedule})
			metav1.SetMetaDataAnnotation(&n.ObjectMeta, "example.com/owner", "ml-platform")
		}
	}
	return f
}

// answers serves each review and returns its response without the UID,
// as JSON with sorted keys.
func (e *benchEnv) answers(t *testing.T, reviews []fleetgen.Review) []string {
	t.Helper()
	out := make([]string, len(reviews))
	for i, r := range reviews {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, r.Path, bytes.NewReader(r.Body))
		req.Header.Set("Content-Type", "application/json")
		e.handlers[r.Path].ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, r.Name)
		var review struct {
			Response map[string]any `json:"response"`
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &review), r.Name)
		delete(review.Response, "uid")
		data, err := json.Marshal(review.Response)
		require.NoError(t, err)
		out[i] = string(data)
	}
	return out
}
