//go:build goexperiment.jsonv2

package webhook

// BenchmarkJSONv2NodeReview is the decode of the same recorded Node review
// as BenchmarkNodeReviewDecode, with encoding/json/v2 (Go's experiment
// until it is out: GOEXPERIMENT=jsonv2, hence the build tag, so the default
// build is unaffected) into plain typed structs: the figures to choose by
// between the hand-written scanner (nodescan.go) and a plain decode once v2
// is out of its experiment (issue 21). Run:
//
//	GOEXPERIMENT=jsonv2 go test ./webhook/ -run '^$' -bench 'NodeReviewDecode|JSONv2' -benchmem

import (
	jsonv2 "encoding/json/v2"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/benchcpu"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
)

// v2Review is an AdmissionReview whose request carries its objects as T.
type v2Review[T any] struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Request    *struct {
		UID       types.UID                    `json:"uid"`
		Kind      metav1.GroupVersionKind      `json:"kind"`
		Resource  metav1.GroupVersionResource  `json:"resource"`
		Name      string                       `json:"name"`
		Operation admissionv1.Operation        `json:"operation"`
		UserInfo  authenticationv1.UserInfo    `json:"userInfo"`
		DryRun    *bool                        `json:"dryRun"`
		Object    *T                           `json:"object"`
		OldObject *T                           `json:"oldObject"`
		SubRes    string                       `json:"subResource"`
		ReqKind   *metav1.GroupVersionKind     `json:"requestKind"`
		ReqRes    *metav1.GroupVersionResource `json:"requestResource"`
	} `json:"request"`
}

func BenchmarkJSONv2NodeReview(b *testing.B) {
	e := benchSetup()
	rs := fleetgen.Select(e.reviews, []string{fleetgen.KindNode}, "relabel")
	body := rs[0].Body
	// The whole Node as the API types spell it.
	b.Run("corev1-node", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		cpu := benchcpu.Start(b)
		defer cpu.Stop()
		for b.Loop() {
			var rv v2Review[corev1.Node]
			if err := jsonv2.Unmarshal(body, &rv); err != nil {
				b.Fatal(err)
			}
			if rv.Request == nil || rv.Request.Object == nil || rv.Request.OldObject == nil || rv.Request.Object.Name == "" {
				b.Fatal("no Node")
			}
		}
	})
	// Only the fields the gate reads (nodeFields, as encoding-json-fields
	// in BenchmarkNodeReviewDecode), the rest skipped by the decoder.
	b.Run("node-fields", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		cpu := benchcpu.Start(b)
		defer cpu.Stop()
		for b.Loop() {
			var rv v2Review[nodeFields]
			if err := jsonv2.Unmarshal(body, &rv); err != nil {
				b.Fatal(err)
			}
			if _, err := rv.Request.Object.node(); err != nil {
				b.Fatal(err)
			}
			if _, err := rv.Request.OldObject.node(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
