package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// TestEnforcementModes: each mode, gate-wide and overridden for one
// webhook by name, on a write the rules allow, one they deny, and one the
// gate cannot read, served as the manager serves them (Register). The
// Plan status webhook stands for every webhook: the mode acts in the
// shared handler, after any webhook's decision.
func TestEnforcementModes(t *testing.T) {
	plan := func(applying ...string) runtime.RawExtension {
		p := &upgradev1.Plan{TypeMeta: metav1.TypeMeta{APIVersion: "upgrade.cattle.io/v1", Kind: "Plan"},
			ObjectMeta: metav1.ObjectMeta{Name: "gpu-canary", Namespace: "system-upgrade"},
			Spec:       upgradev1.PlanSpec{Concurrency: 1, Version: "v1.36.1+rke2r1"}}
		p.Status.Applying = applying
		b, err := json.Marshal(p)
		require.NoError(t, err)
		return runtime.RawExtension{Raw: b}
	}
	alice := authenticationv1.UserInfo{Username: "alice"}
	suc := authenticationv1.UserInfo{Username: "system:serviceaccount:system-upgrade:system-upgrade", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:system-upgrade"}}
	writes := []struct {
		name       string
		user       authenticationv1.UserInfo
		obj        runtime.RawExtension
		denied     bool // by the rules
		unreadable bool
	}{
		{name: "allowed", user: suc, obj: plan()},
		{name: "denied", user: alice, obj: plan(), denied: true},
		{name: "unreadable", user: alice, obj: runtime.RawExtension{Raw: []byte(`{"kind":"Status","apiVersion":"v1"}`)}, unreadable: true},
	}
	modes := []gate.EnforcementMode{gate.EnforcementEnforce, gate.EnforcementWarn, gate.EnforcementAudit}
	type setting struct {
		name string
		cfg  gate.EnforcementConfig
		want gate.EnforcementMode // the Plan status webhook's
	}
	var settings []setting
	for _, m := range modes {
		settings = append(settings, setting{name: "gate " + string(m), cfg: gate.EnforcementConfig{Mode: m}, want: m})
		// The override wins over the gate-wide mode, and overriding
		// another webhook leaves this one in the gate-wide mode.
		other := gate.EnforcementAudit
		if m == gate.EnforcementAudit {
			other = gate.EnforcementEnforce
		}
		settings = append(settings,
			setting{name: fmt.Sprintf("gate %s, this webhook %s", m, other), cfg: gate.EnforcementConfig{Mode: m, Webhooks: map[string]gate.EnforcementMode{WebhookPlanStatus: other}}, want: other},
			setting{name: fmt.Sprintf("gate %s, another webhook %s", m, other), cfg: gate.EnforcementConfig{Mode: m, Webhooks: map[string]gate.EnforcementMode{WebhookPlans: other}}, want: m})
	}
	for _, st := range settings {
		for _, w := range writes {
			t.Run(st.name+"/"+w.name, func(t *testing.T) {
				cfg := gate.DefaultConfig()
				cfg.Enforcement = st.cfg
				require.Empty(t, cfg.Validate())
				require.Empty(t, CheckEnforcement(cfg))
				var logged logLines
				s := &Server{Config: cfg, Log: funcr.NewJSON(logged.add, funcr.Options{})}
				srv := webhook.NewServer(webhook.Options{})
				s.Register(srv)
				before := wouldDenied(t, WebhookPlanStatus, gate.CodePlanStatusForged)

				resp := post(t, srv, PathPlanStatus, admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Update, UserInfo: w.user,
					Kind:     metav1.GroupVersionKind{Group: "upgrade.cattle.io", Version: "v1", Kind: "Plan"},
					Resource: metav1.GroupVersionResource{Group: "upgrade.cattle.io", Version: "v1", Resource: "plans"}, SubResource: "status",
					Namespace: "system-upgrade", Name: "gpu-canary", Object: w.obj, OldObject: plan("gpu-v100-01")})

				counted := wouldDenied(t, WebhookPlanStatus, gate.CodePlanStatusForged) - before
				a := resp.AuditAnnotations
				switch {
				case w.unreadable: // no rule judged it: denied in every mode
					assert.False(t, resp.Allowed)
					assert.Equal(t, int32(http.StatusBadRequest), resp.Result.Code)
					assert.Equal(t, "deny", a[gate.AuditDecision])
					assert.Empty(t, a[gate.AuditWouldDeny])
				case !w.denied:
					assert.True(t, resp.Allowed)
					assert.Equal(t, "allow", a[gate.AuditDecision])
					assert.NotContains(t, a, gate.AuditWouldDeny)
					assert.NotContains(t, a, gate.AuditEnforcement)
					assert.Empty(t, resp.Warnings)
					assert.Zero(t, counted)
				case st.want == gate.EnforcementEnforce:
					assert.False(t, resp.Allowed)
					assert.Contains(t, resp.Result.Message, "[PlanStatusForged]")
					assert.Equal(t, "deny", a[gate.AuditDecision])
					assert.Equal(t, "PlanStatusForged", a[gate.AuditReasons])
					assert.NotContains(t, a, gate.AuditWouldDeny)
					assert.Empty(t, resp.Warnings)
					assert.Zero(t, counted)
				default: // warn, audit: admitted, and said
					assert.True(t, resp.Allowed)
					assert.Equal(t, "allow", a[gate.AuditDecision])
					assert.Equal(t, "PlanStatusForged", a[gate.AuditWouldDeny])
					assert.Equal(t, "PlanStatusForged", a[gate.AuditReasons])
					assert.Equal(t, string(st.want), a[gate.AuditEnforcement])
					assert.Equal(t, float64(1), counted)
					if st.want == gate.EnforcementWarn {
						require.Len(t, resp.Warnings, 1)
						assert.True(t, strings.HasPrefix(resp.Warnings[0], "gpu-upgrade-gate would deny this write (enforcement: warn): [PlanStatusForged] "), resp.Warnings[0])
					} else {
						assert.Empty(t, resp.Warnings, "audit mode tells the client nothing")
					}
					line := logged.one(t)
					assert.Equal(t, string(st.want), line["enforcement"])
					assert.Equal(t, true, line["wouldDeny"])
					assert.Equal(t, "allow", line["decision"])
					assert.Equal(t, []any{"PlanStatusForged"}, line["codes"])
				}
			})
		}
	}
}

// TestCheckEnforcement: a per-webhook mode must name one of the gate's
// webhooks.
func TestCheckEnforcement(t *testing.T) {
	cfg := gate.DefaultConfig()
	cfg.Enforcement.Webhooks = map[string]gate.EnforcementMode{WebhookJobs: gate.EnforcementAudit}
	assert.Empty(t, CheckEnforcement(cfg))
	cfg.Enforcement.Webhooks["job.gpu-upgrade-gate.io"] = gate.EnforcementEnforce
	errs := CheckEnforcement(cfg)
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), `enforcement.webhooks[job.gpu-upgrade-gate.io]: Unsupported value: "job.gpu-upgrade-gate.io": supported values: "completions.gpu-upgrade-gate.io"`)
}

func wouldDenied(t *testing.T, webhook string, code gate.Code) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, wouldDenials.WithLabelValues(webhook, string(code)).Write(&m))
	return m.GetCounter().GetValue()
}

// post sends one review through the server's mux, as the API server does.
func post(t *testing.T, srv webhook.Server, path string, req admissionv1.AdmissionRequest) admissionv1.AdmissionResponse {
	t.Helper()
	body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: &req})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	hr := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	hr.Header.Set("Content-Type", "application/json")
	srv.WebhookMux().ServeHTTP(rec, hr)
	var review admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &review), rec.Body.String())
	require.NotNil(t, review.Response)
	return *review.Response
}

// logLines keeps the decision log's JSON lines.
type logLines struct {
	mu    sync.Mutex
	lines []map[string]any
}

func (l *logLines) add(obj string) {
	var m map[string]any
	if json.Unmarshal([]byte(obj), &m) == nil {
		l.mu.Lock()
		l.lines = append(l.lines, m)
		l.mu.Unlock()
	}
}

func (l *logLines) one(t *testing.T) map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Len(t, l.lines, 1)
	return l.lines[0]
}

// TestForgedAttestationRefusedInEveryMode: a record write with a forged
// author is refused even by a gate in audit mode, since the attestation
// would outlive the mode; the same record written by its author is
// admitted (and judged on its content).
func TestForgedAttestationRefusedInEveryMode(t *testing.T) {
	record := func(author string) runtime.RawExtension {
		cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "v100-r580", Namespace: "gpu-upgrade-gate",
				Labels:      map[string]string{qualification.ConfigMapLabel: "true"},
				Annotations: map[string]string{qualification.AnnotationAuthor: author}},
			Data: map[string]string{qualification.ConfigMapKey: "id: v100-r580-canary-1\n"}}
		b, err := json.Marshal(cm)
		require.NoError(t, err)
		return runtime.RawExtension{Raw: b}
	}
	for _, mode := range []gate.EnforcementMode{gate.EnforcementWarn, gate.EnforcementAudit} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := gate.DefaultConfig()
			cfg.Enforcement.Mode = mode
			s := &Server{Config: cfg, Log: logr.Discard()}
			srv := webhook.NewServer(webhook.Options{})
			s.Register(srv)
			review := func(author string) admissionv1.AdmissionResponse {
				return post(t, srv, PathRecords, admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Create, UserInfo: authenticationv1.UserInfo{Username: "bob"},
					Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
					Namespace: "gpu-upgrade-gate", Name: "v100-r580", Object: record(author)})
			}
			forged := review("alice")
			assert.False(t, forged.Allowed)
			assert.Equal(t, "deny", forged.AuditAnnotations[gate.AuditDecision])
			assert.Contains(t, forged.AuditAnnotations[gate.AuditReasons], string(gate.CodeAttestationForged))
			assert.NotContains(t, forged.AuditAnnotations, gate.AuditWouldDeny)

			own := review("bob") // an invalid record, but bob's own: the mode admits it
			assert.True(t, own.Allowed)
			assert.Contains(t, strings.Split(own.AuditAnnotations[gate.AuditWouldDeny], ","), string(gate.CodeRecordInvalid))
			assert.NotContains(t, own.AuditAnnotations[gate.AuditWouldDeny], string(gate.CodeAttestationForged))
		})
	}
}
