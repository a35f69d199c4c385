package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
)

// TestNodeReviewOnePass (issue 14 item 3): the one-pass Node path answers
// every review as controller-runtime's handler and the usual decoding do,
// byte for byte: the fleet's recorded Node reviews (allowed and denied,
// against the synced 5,000-node fleet), which it decodes itself, and
// malformed ones, which it hands on, so each still gets its ReviewInvalid
// naming the field.
func TestNodeReviewOnePass(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the 5,000-node fleet")
	}
	e := benchSetup()
	fast, slow := e.handlers[PathNodes], e.slow[PathNodes]
	require.IsType(t, &nodeEndpoint{}, fast)
	answer := func(h http.Handler, body []byte) (int, string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, PathNodes, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	nodes := fleetgen.Select(e.reviews, []string{fleetgen.KindNode})
	require.NotEmpty(t, nodes)
	denied := 0
	for _, r := range nodes {
		t.Run(r.Name, func(t *testing.T) {
			_, ok := decodeNodeReview(r.Body)
			require.True(t, ok, "a well-formed Node review takes the one pass")
			code, out := answer(fast, r.Body)
			code2, out2 := answer(slow, r.Body)
			assert.Equal(t, code2, code)
			assert.Equal(t, out2, out)
			assert.Contains(t, out, `"allowed":`+map[bool]string{true: "true", false: "false"}[r.Allowed])
		})
		if !r.Allowed {
			denied++
		}
	}
	require.NotZero(t, denied, "the recorded reviews include denials")

	body := string(nodes[0].Body)
	for _, tc := range []struct {
		name, from, to string
		field          string // the answer names it
	}{
		{"labels-not-strings", `"labels":{`, `"labels":{"bad":7,`, "metadata.labels"},
		{"unschedulable-not-bool", `"spec":{`, `"spec":{"unschedulable":"yes",`, "spec.unschedulable"},
		{"quantity", `"capacity":{`, `"capacity":{"nvidia.com/mig-1g.10gb":"eight",`, "status.capacity"},
		{"request-kind", `"kind":"Node"`, `"kind":"Pod"`, "holds kind Node"},
		{"object-kind", `"kind":"Node","apiVersion":"v1"`, `"kind":"Pod","apiVersion":"v1"`, "expected v1 Node"},
		{"no-old-object", `"oldObject":{`, `"oldObjectX":{`, "carries no object"},
		{"v1beta1-review", `"apiVersion":"admission.k8s.io/v1"`, `"apiVersion":"admission.k8s.io/v1beta1"`, ""},
		{"upper-case-key", `"labels":{`, `"Labels":{`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Contains(t, body, tc.from)
			b := []byte(strings.Replace(body, tc.from, tc.to, 1))
			code, out := answer(fast, b)
			code2, out2 := answer(slow, b)
			assert.Equal(t, code2, code)
			assert.Equal(t, out2, out)
			if tc.field != "" {
				assert.Contains(t, out, tc.field)
				assert.Contains(t, out, "ReviewInvalid")
			}
		})
	}
}

// TestNodeReviewsConcurrently: the fleet's Node reviews, answered from
// several goroutines at once, each get their expected decision and codes:
// the pooled label maps (nodescan.go) of one review are never another's
// while it is answered (with -race, a map read after its review would
// show as a race with the next review filling it).
func TestNodeReviewsConcurrently(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the 5,000-node fleet")
	}
	e := benchSetup()
	nodes := fleetgen.Select(e.reviews, []string{fleetgen.KindNode})
	var g errgroup.Group
	for w := range 4 {
		g.Go(func() error {
			for pass := range 3 {
				for j := range nodes {
					r := nodes[(j+w*7+pass)%len(nodes)]
					rec := httptest.NewRecorder()
					req := httptest.NewRequest(http.MethodPost, PathNodes, bytes.NewReader(r.Body))
					req.Header.Set("Content-Type", "application/json")
					e.handlers[PathNodes].ServeHTTP(rec, req)
					var out struct {
						Response struct {
							Allowed          bool              `json:"allowed"`
							AuditAnnotations map[string]string `json:"auditAnnotations"`
						} `json:"response"`
					}
					if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
						return fmt.Errorf("%s: %w", r.Name, err)
					}
					want := make([]string, len(r.Codes))
					for i, c := range r.Codes {
						want[i] = string(c)
					}
					got := strings.Split(out.Response.AuditAnnotations[gate.AuditReasons], ",")
					slices.Sort(want)
					slices.Sort(got)
					if out.Response.Allowed != r.Allowed || (!r.Allowed && !slices.Equal(got, want)) {
						return fmt.Errorf("%s: allowed=%v codes=%v, want allowed=%v codes=%v", r.Name, out.Response.Allowed, got, r.Allowed, want)
					}
				}
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
}
