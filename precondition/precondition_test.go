package precondition

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func cephCM(health string) any {
	return map[string]any{"metadata": map[string]any{"name": "ceph-status"}, "data": map[string]any{"health": health}}
}

func TestCompile(t *testing.T) {
	for _, tc := range []struct {
		name, expr, err string
	}{
		{name: "bool over objects", expr: "objects.all(o, o.data.health == 'HEALTH_OK')"},
		{name: "size and exists", expr: "size(objects) > 0 && objects.exists(o, o.metadata.name == 'ceph-status')"},
		{name: "the API server's libraries (quantity)", expr: "quantity('10Gi').isGreaterThan(quantity('1Gi')) && objects.all(o, has(o.data.health))"},
		{name: "syntax error", expr: "objects.all(o, o.data.health ==", err: "compilation failed: ERROR: <input>:1:32: Syntax error"},
		{name: "undeclared variable", expr: "object.data.health == 'HEALTH_OK'", err: "undeclared reference to 'object'"},
		{name: "not a bool", expr: "size(objects)", err: "must evaluate to bool but got int"},
		{name: "dyn is not a bool", expr: "objects[0].data.ok", err: "must evaluate to bool but got dyn"},
		{name: "estimated cost over the per-call limit", expr: "objects.all(o, objects.all(p, p.metadata.name != o.metadata.name || p == o))", err: "exceeds the per-expression limit 1000000"},
		{name: "unbounded regex over unknown strings", expr: "objects.exists(o, o.metadata.name.matches('^ceph-.*$'))", err: "exceeds the per-expression limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(tc.expr)
			if tc.err == "" {
				require.NoError(t, err)
				assert.LessOrEqual(t, p.EstimatedCost, uint64(PerCallLimit))
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

func TestReadCEL(t *testing.T) {
	for _, tc := range []struct {
		name       string
		expr       string // "": size(objects) > 0 && objects.all(...)
		allowEmpty bool
		objects    []any
		listErr    error
		budget     int64
		state      State
		seen       string
	}{
		{name: "holds", objects: []any{cephCM("HEALTH_OK")}, budget: RuntimeBudget, state: Holds, seen: "returned true over 1 object(s)"},
		{name: "fails", objects: []any{cephCM("HEALTH_OK"), cephCM("HEALTH_WARN")}, budget: RuntimeBudget, state: Fails, seen: "returned false over 2 object(s)"},
		{name: "no objects is unknown: all() would hold over none", budget: RuntimeBudget, state: Unknown,
			seen: "no objects matched configmaps/v1 in rook-ceph (app=ceph) (set cel.allowEmpty: true if none is healthy)"},
		{name: "no objects, allowed empty: the expression judges (it asks for one)", allowEmpty: true, budget: RuntimeBudget, state: Fails, seen: "returned false over 0 object(s)"},
		{name: "no objects, allowed empty, all() alone holds", expr: "objects.all(o, o.data.health == 'HEALTH_OK')", allowEmpty: true, budget: RuntimeBudget, state: Holds, seen: "returned true over 0 object(s)"},
		{name: "all() alone over one object still judges it", expr: "objects.all(o, o.data.health == 'HEALTH_OK')", objects: []any{cephCM("HEALTH_WARN")}, budget: RuntimeBudget, state: Fails, seen: "returned false over 1 object(s)"},
		{name: "a missing field is unknown", objects: []any{map[string]any{"data": map[string]any{}}}, budget: RuntimeBudget, state: Unknown, seen: "no such key: health"},
		{name: "objects that cannot be read are unknown", listErr: errors.New("forbidden"), budget: RuntimeBudget, state: Unknown, seen: "cannot be read (forbidden)"},
		{name: "out of the shared budget is unknown", objects: []any{cephCM("HEALTH_OK")}, budget: 3, state: Unknown, seen: "cost budget exceeded"},
		{name: "no budget left is unknown", objects: []any{cephCM("HEALTH_OK")}, budget: 0, state: Unknown, seen: "cost budget exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Precondition{Name: "ceph-health", Kind: KindCEL, CEL: &CEL{Version: "v1", Resource: "configmaps", Namespace: "rook-ceph", LabelSelector: "app=ceph",
				Expression: "size(objects) > 0 && objects.all(o, o.data.health == 'HEALTH_OK')", AllowEmpty: tc.allowEmpty}}
			if tc.expr != "" {
				p.CEL.Expression = tc.expr
			}
			prog, err := Compile(p.CEL.Expression)
			require.NoError(t, err)
			r, left := ReadCEL(p, prog, tc.objects, tc.listErr, tc.budget)
			assert.Equal(t, tc.state, r.State)
			assert.Contains(t, r.Seen, tc.seen)
			assert.LessOrEqual(t, left, tc.budget)
			st, _ := r.At(time.Now())
			assert.Equal(t, tc.state, st, "a CEL reading does not age")
		})
	}
}

// TestReadCELs: every cel precondition is read at its index, through the
// caller's source of its expression and objects; the others are not read
// (nil), and a source's error makes that one unknown only.
func TestReadCELs(t *testing.T) {
	cel := func(name string) Precondition {
		return Precondition{Name: name, Kind: KindCEL, CEL: &CEL{Version: "v1", Resource: "configmaps", Namespace: "rook-ceph",
			Expression: "size(objects) > 0 && objects.all(o, o.data.health == 'HEALTH_OK')"}}
	}
	list := []Precondition{cel("ok"), {Name: "alerts", Kind: KindAlerts, Alerts: &Alerts{URL: "http://am:9093/api/v2/alerts"}}, cel("unlisted"), cel("warn")}
	var asked []int
	got := ReadCELs(list, func(i int) (*Program, []any, error) {
		asked = append(asked, i)
		prog, err := Compile(list[i].CEL.Expression)
		require.NoError(t, err)
		switch list[i].Name {
		case "unlisted":
			return prog, nil, errors.New("forbidden")
		case "warn":
			return prog, []any{cephCM("HEALTH_WARN")}, nil
		}
		return prog, []any{cephCM("HEALTH_OK")}, nil
	})
	assert.Equal(t, []int{0, 2, 3}, asked, "only the cel ones, in order")
	require.Len(t, got, len(list))
	assert.Nil(t, got[1], "an alerts precondition is not read here")
	for i, want := range map[int]State{0: Holds, 2: Unknown, 3: Fails} {
		require.NotNil(t, got[i])
		assert.Equal(t, list[i].Name, got[i].Precondition.Name)
		assert.Equal(t, want, got[i].State, got[i].Seen)
	}
	assert.Contains(t, got[2].Seen, "cannot be read (forbidden)")
}

// TestPerCallLimit: at runtime the base environment's per-call limit
// stops an evaluation whatever the static estimate said (here: none, the
// program is built without it).
func TestPerCallLimit(t *testing.T) {
	e, err := env()
	require.NoError(t, err)
	ast, iss := e.Compile("objects.all(o, objects.all(p, p.data.health == o.data.health))")
	require.NoError(t, iss.Err())
	prog, err := e.Program(ast)
	require.NoError(t, err)
	objs := make([]any, 2000)
	for i := range objs {
		objs[i] = cephCM("HEALTH_OK")
	}
	ok, left, err := (&Program{prog: prog}).Eval(objs, RuntimeBudget)
	require.Error(t, err)
	assert.False(t, ok)
	assert.Contains(t, err.Error(), "cost limit exceeded")
	assert.Less(t, left, int64(RuntimeBudget))
}

const amAnswer = `[
 {"labels":{"alertname":"CephHealthError","severity":"critical","namespace":"rook-ceph"},"startsAt":"2026-12-01T05:00:00Z","status":{"state":"active"}},
 {"labels":{"alertname":"GPUXidErrors","severity":"warning","node":"gpu-1"},"startsAt":"2026-12-01T05:10:00Z","status":{"state":"suppressed"}}
]`

const promAnswer = `{"status":"success","data":{"alerts":[
 {"labels":{"alertname":"CephHealthError","severity":"critical"},"state":"firing","activeAt":"2026-12-01T05:00:00Z"},
 {"labels":{"alertname":"GPUXidErrors","severity":"warning"},"state":"pending","activeAt":"2026-12-01T05:10:00Z"}
]}}`

func TestAlerts(t *testing.T) {
	at := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	am, prom := "http://am.monitoring:9093/api/v2/alerts", "http://prom.monitoring:9090/api/v1/alerts"
	for _, tc := range []struct {
		name       string
		url        string
		names      []string
		labels     map[string]string
		body       string
		err        error
		state      State
		seen       string
		keptReadAt bool
	}{
		{name: "alertmanager: a matching active alert fails", url: am, names: []string{"CephHealthError"}, body: amAnswer, state: Fails, seen: "1 firing alert(s) match alertname in [CephHealthError]: CephHealthError (active since 2026-12-01T05:00:00Z)"},
		{name: "alertmanager: a silenced one still fires", url: am, names: []string{"GPUXidErrors"}, body: amAnswer, state: Fails, seen: "GPUXidErrors (suppressed"},
		{name: "alertmanager: labels narrow", url: am, labels: map[string]string{"severity": "critical", "namespace": "other"}, body: amAnswer, state: Holds, seen: "no firing alert matches namespace=\"other\", severity=\"critical\""},
		{name: "alertmanager: no match holds", url: am, names: []string{"NodeDown"}, body: amAnswer, state: Holds},
		{name: "alertmanager: empty list holds", url: am, body: `[]`, state: Holds, seen: "no firing alert matches any alert"},
		{name: "prometheus: a firing alert fails", url: prom, labels: map[string]string{"severity": "critical"}, body: promAnswer, state: Fails, seen: "CephHealthError (firing"},
		{name: "prometheus: a pending alert does not fire yet", url: prom, names: []string{"GPUXidErrors"}, body: promAnswer, state: Holds},
		{name: "prometheus: an error answer keeps the last reading", url: prom, body: `{"status":"error","error":"bad"}`, state: Stale, keptReadAt: true},
		{name: "alertmanager: null is not read as no alerts", url: am, body: `null`, state: Stale, keptReadAt: true},
		{name: "prometheus: success without data.alerts is not read as no alerts", url: prom, body: `{"status":"success","data":{}}`, state: Stale, keptReadAt: true},
		{name: "prometheus: null data.alerts is not read as no alerts", url: prom, body: `{"status":"success","data":{"alerts":null}}`, state: Stale, keptReadAt: true},
		{name: "prometheus: an empty data.alerts holds", url: prom, body: `{"status":"success","data":{"alerts":[]}}`, state: Holds},
		{name: "alertmanager: a Prometheus answer is not read", url: am, body: promAnswer, state: Stale, keptReadAt: true},
		{name: "unreachable keeps the last reading", url: am, err: errors.New("connection refused"), state: Stale, keptReadAt: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Precondition{Name: "alerts", Kind: KindAlerts, Alerts: &Alerts{URL: tc.url, AlertNames: tc.names, Labels: tc.labels}}
			r := ReadAlerts(p, Reading{}, []byte(tc.body), tc.err, at)
			state, seen := r.At(at)
			assert.Equal(t, tc.state, state, seen)
			assert.Contains(t, seen, tc.seen)
			if tc.keptReadAt {
				assert.True(t, r.ReadAt.IsZero())
				require.Error(t, r.LastErr)
				assert.Contains(t, seen, "has not been read successfully yet; the latest read failed")
			}
		})
	}
}

// TestAlertsStaleness: a failed poll keeps the last full reading until it
// is older than maxAge, then the precondition is stale whatever it said.
func TestAlertsStaleness(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	p := Precondition{Name: "gpu-alerts", Kind: KindAlerts, Alerts: &Alerts{URL: "http://am:9093/api/v2/alerts", MaxAge: metav1.Duration{Duration: 5 * time.Minute}}}
	ok := ReadAlerts(p, Reading{}, []byte(`[]`), nil, t0)
	failed := ReadAlerts(p, ok, nil, errors.New("dial tcp 127.0.0.1:1: connection refused"), t0.Add(4*time.Minute))
	for _, tc := range []struct {
		name  string
		r     Reading
		at    time.Time
		state State
		seen  string
	}{
		{name: "fresh", r: ok, at: t0.Add(time.Minute), state: Holds},
		{name: "a failed poll within maxAge keeps the last reading", r: failed, at: t0.Add(5 * time.Minute), state: Holds},
		{name: "beyond maxAge it is stale", r: failed, at: t0.Add(5*time.Minute + time.Second), state: Stale,
			seen: "was last read successfully at 2026-12-01T06:00:00Z, 5m1s ago, beyond maxAge 5m0s; the latest read failed: dial tcp 127.0.0.1:1: connection refused"},
		{name: "never read is stale", r: Reading{Precondition: p}, at: t0, state: Stale, seen: "has not been read successfully yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, seen := tc.r.At(tc.at)
			assert.Equal(t, tc.state, state, seen)
			assert.Contains(t, seen, tc.seen)
		})
	}
}

func TestValidate(t *testing.T) {
	okCEL := &CEL{Version: "v1", Resource: "configmaps", Namespace: "rook-ceph", Expression: "objects.all(o, o.data.health == 'HEALTH_OK')"}
	okAlerts := &Alerts{URL: "http://am:9093/api/v2/alerts"}
	for _, tc := range []struct {
		name string
		p    Precondition
		errs []string
	}{
		{name: "cel", p: Precondition{Name: "ceph-health", Kind: KindCEL, CEL: okCEL}},
		{name: "alerts", p: Precondition{Name: "gpu-alerts", Kind: KindAlerts, Alerts: okAlerts}},
		{name: "bad kind", p: Precondition{Name: "x", Kind: "rego"}, errs: []string{`p.kind: Unsupported value: "rego": supported values: "cel", "alerts"`}},
		{name: "cel without cel", p: Precondition{Name: "x", Kind: KindCEL}, errs: []string{"p.cel: Required value"}},
		{name: "cel with alerts", p: Precondition{Name: "x", Kind: KindCEL, CEL: okCEL, Alerts: okAlerts}, errs: []string{"p.alerts: Invalid value"}},
		{name: "compile error names the field", p: Precondition{Name: "x", Kind: KindCEL, CEL: &CEL{Version: "v1", Resource: "configmaps", Expression: "objects.all(o,"}},
			errs: []string{`p.cel.expression: Invalid value: "objects.all(o,": compilation failed`}},
		{name: "cost over the limit names the field", p: Precondition{Name: "x", Kind: KindCEL, CEL: &CEL{Version: "v1", Resource: "configmaps", Expression: "objects.all(o, objects.all(p, p == o))"}},
			errs: []string{"p.cel.expression: Invalid value", "exceeds the per-expression limit"}},
		{name: "bad resource and selector", p: Precondition{Name: "x", Kind: KindCEL, CEL: &CEL{Version: "v1", Resource: "ConfigMap", LabelSelector: "a in (", Expression: "true"}},
			errs: []string{"p.cel.resource: Invalid value: \"ConfigMap\"", "p.cel.labelSelector: Invalid value"}},
		{name: "alerts url path", p: Precondition{Name: "x", Kind: KindAlerts, Alerts: &Alerts{URL: "http://am:9093/"}}, errs: []string{"p.alerts.url: Invalid value", "must end in /api/v2/alerts"}},
		{name: "alerts url credentials", p: Precondition{Name: "x", Kind: KindAlerts, Alerts: &Alerts{URL: "http://u:secret@am:9093/api/v2/alerts"}}, errs: []string{`p.alerts.url: Invalid value: "(redacted)"`}},
		{name: "maxAge within the interval", p: Precondition{Name: "x", Kind: KindAlerts, Alerts: &Alerts{URL: "http://am:9093/api/v2/alerts", PollInterval: metav1.Duration{Duration: time.Minute}, MaxAge: metav1.Duration{Duration: time.Minute}}},
			errs: []string{"p.alerts.maxAge: Invalid value: \"1m0s\": must be longer than pollInterval (1m0s)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := tc.p.Validate(field.NewPath("p"))
			if len(tc.errs) == 0 {
				assert.Empty(t, errs)
				return
			}
			require.NotEmpty(t, errs)
			all := errs.ToAggregate().Error()
			for _, want := range tc.errs {
				assert.True(t, strings.Contains(all, want), "%q not in %q", want, all)
			}
			assert.NotContains(t, all, "secret")
		})
	}
}
