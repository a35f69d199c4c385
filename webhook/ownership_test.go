package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// TestOwnedFactsTakeTheOnePass (issue 22 item 1): a write of an owned fact
// is decoded by the one-pass Node path (nodescan.go keeps every label key,
// whatever its family) and answered there exactly as controller-runtime's
// handler answers it: a person's made-up PCI identity label and GFD
// driver label are refused, nfd-master's same write is exempt, a team label
// passes; nfd-master's mode labels on a schedulable node are a refused mode
// step.
func TestOwnedFactsTakeTheOnePass(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newWatchedFacts(t, ctx)
	w.facts.Live = liveObjects{} // no GPU holders: a mode step lists them
	s := &Server{Config: w.facts.Config, Facts: w.facts}
	h := s.handlers()[PathNodes]
	fast, slow := h.serve(), &webhook.Admission{Handler: h}
	require.IsType(t, &nodeEndpoint{}, fast)

	node := func(labels map[string]string) runtime.RawExtension {
		n := &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", UID: "u1", ResourceVersion: "7", Labels: map[string]string{
				"kubernetes.io/hostname": "gpu-1", "feature.node.kubernetes.io/pci-10de.present": "true",
				"nvidia.com/cuda.driver-version.full": "580.126.20", "nvidia.com/gpu.product": "Tesla-V100-PCIE-32GB"}}}
		for k, v := range labels {
			n.Labels[k] = v
		}
		b, err := json.Marshal(n)
		require.NoError(t, err)
		return runtime.RawExtension{Raw: b}
	}
	alice := authenticationv1.UserInfo{Username: "alice", Groups: []string{"platform-admins", "system:authenticated"}}
	nfd := authenticationv1.UserInfo{Username: "system:serviceaccount:node-feature-discovery:nfd-node-feature-discovery",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:node-feature-discovery", "system:authenticated"}}
	for _, tc := range []struct {
		name    string
		user    authenticationv1.UserInfo
		labels  map[string]string
		allowed bool
		inMsg   string
	}{
		{"a person's made-up PCI identity", alice, map[string]string{"feature.node.kubernetes.io/pci-10de_0000_10de_0000.present": "true"}, false, "[OwnedFactWritten] label feature.node.kubernetes.io/pci-10de_0000_10de_0000.present"},
		{"a person's GFD driver label", alice, map[string]string{"nvidia.com/cuda.driver-version.full": "999.1.2"}, false, "[OwnedFactWritten] label nvidia.com/cuda.driver-version.full changed from"},
		{"nfd-master's PCI identity", nfd, map[string]string{"feature.node.kubernetes.io/pci-10de_0000_10de_0000.present": "true"}, true, ""},
		{"a person's team label", alice, map[string]string{"team": "ml"}, true, ""},
		// Issue 24 item 3: nfd-master's mode label write is a mode step.
		{"nfd-master's mode labels on a schedulable node", nfd, map[string]string{gate.LabelWorkloadMode: "vm-passthrough", gate.LabelExpectedWorkloadMode: "vm-passthrough", gate.LabelWorkloadConfig: "vm-passthrough"},
			false, "[ModeChangeNotCordoned] label kube-dc.com/gpu.expected-workload-mode changes from \"\" to \"vm-passthrough\" on node gpu-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rv := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
				Request: &admissionv1.AdmissionRequest{UID: "1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
					Resource: metav1.GroupVersionResource{Version: "v1", Resource: "nodes"}, Name: "gpu-1", Operation: admissionv1.Update,
					UserInfo: tc.user, Object: node(tc.labels), OldObject: node(nil)}}
			body, err := json.Marshal(rv)
			require.NoError(t, err)
			_, ok := decodeNodeReview(body)
			require.True(t, ok, "the review takes the one pass")
			answer := func(hh http.Handler) string {
				rec := httptest.NewRecorder()
				req := httptest.NewRequest(http.MethodPost, PathNodes, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				hh.ServeHTTP(rec, req)
				return rec.Body.String()
			}
			out := answer(fast)
			assert.Equal(t, answer(slow), out, "the one pass answers as controller-runtime's handler")
			var got admissionv1.AdmissionReview
			require.NoError(t, json.Unmarshal([]byte(out), &got))
			require.NotNil(t, got.Response)
			assert.Equal(t, tc.allowed, got.Response.Allowed, out)
			if tc.inMsg != "" {
				assert.Contains(t, got.Response.Result.Message, tc.inMsg)
			}
		})
	}
}
