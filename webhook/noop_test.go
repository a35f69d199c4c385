package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestBenchNoopAllowsEveryReview: the hop's floor answers each review
// allowed, with its uid (the API server rejects an answer without it), and
// a body that is no review is an error, not an allow.
func TestBenchNoopAllowsEveryReview(t *testing.T) {
	h := benchNoop()
	for _, tc := range []struct {
		name    string
		body    string
		allowed bool
	}{
		{"a Plan create", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1","operation":"CREATE","object":{"kind":"Plan"}}}`, true},
		{"not a review", `{"kind":`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, PathBenchNoop, bytes.NewReader([]byte(tc.body)))
			req.Header.Set("Content-Type", "application/json")
			h.ServeHTTP(rec, req)
			var out admissionv1.AdmissionReview
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
			require.NotNil(t, out.Response)
			require.Equal(t, tc.allowed, out.Response.Allowed)
			if tc.allowed {
				require.Equal(t, types.UID("u-1"), out.Response.UID)
			}
		})
	}
}
