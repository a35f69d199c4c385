package gate

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/precondition"
)

var (
	cephHealth = precondition.Precondition{Name: "ceph-health", Kind: precondition.KindCEL, Message: "Ceph must report HEALTH_OK",
		CEL: &precondition.CEL{Version: "v1", Resource: "configmaps", Namespace: "rook-ceph", Expression: "size(objects) > 0 && objects.all(o, o.data.health == 'HEALTH_OK')"}}
	gpuAlerts = precondition.Precondition{Name: "gpu-alerts", Kind: precondition.KindAlerts,
		Alerts: &precondition.Alerts{URL: "http://alertmanager.monitoring:9093/api/v2/alerts", AlertNames: []string{"GPUXidErrors"}, MaxAge: metav1.Duration{Duration: 5 * time.Minute}}}
)

// withPreconditions configures ceph-health and gpu-alerts on s, ceph
// reporting health and the alert source answering body a minute ago.
func withPreconditions(t *testing.T, s *scenario, health, body string) {
	s.cfg.Preconditions = []precondition.Precondition{cephHealth, gpuAlerts}
	prog, err := precondition.Compile(cephHealth.CEL.Expression)
	require.NoError(t, err)
	cel, _ := precondition.ReadCEL(cephHealth, prog, []any{map[string]any{"data": map[string]any{"health": health}}}, nil, precondition.RuntimeBudget)
	alerts := precondition.ReadAlerts(gpuAlerts, precondition.Reading{}, []byte(body), nil, testNow.Add(-time.Minute))
	s.cluster.Preconditions = []precondition.Reading{cel, alerts}
}

const xidFiring = `[{"labels":{"alertname":"GPUXidErrors","node":"gpu-v100-02"},"startsAt":"2026-11-30T05:00:00Z","status":{"state":"active"}}]`

// TestPreconditions (issue 27 item 1): every start of a GPU node's upgrade
// and SUC's completion of an upgraded GPU node are refused while a
// declared precondition fails, cannot be judged, or (alerts) has no fresh
// reading; they are allowed while every one holds.
func TestPreconditions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		decide func(t *testing.T, pre func(*scenario)) Decision
		step   string
	}{
		{"a Plan that moves GPU nodes", func(t *testing.T, pre func(*scenario)) Decision {
			s := safeScenario(t)
			pre(s)
			return s.decide()
		}, "before a GPU upgrade starts (applying this Plan)"},
		{"SUC's Job start on a GPU node", func(t *testing.T, pre func(*scenario)) Decision {
			s := safeStep(t)
			pre(s.scenario)
			return s.decide(nil)
		}, "before a GPU upgrade starts"},
		{"a driver change", func(t *testing.T, pre func(*scenario)) Decision {
			s := safeDriverScenario(t)
			pre(s.scenario)
			return s.decide()
		}, "before a GPU upgrade starts"},
		{"the driver's per-node step", func(t *testing.T, pre func(*scenario)) Decision {
			s := safeDriverStepScenario(t)
			pre(s.scenario)
			return s.prepareDriverStep(s.step).Decide(nil, nil)
		}, "before a GPU upgrade starts"},
		{"SUC's completion of an upgraded GPU node", func(t *testing.T, pre func(*scenario)) Decision {
			s, old, n := completionScenario(t)
			prove(s, "gpu-v100-01")
			pre(s)
			return DecideCompletion(s.cfg, s.cluster, NodeRequest{Node: n, OldNode: old, User: UserInfo{Name: sucUserName}, Now: testNow})
		}, "before upgraded GPU node gpu-v100-01 completes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			holds := tc.decide(t, func(s *scenario) { withPreconditions(t, s, "HEALTH_OK", `[]`) })
			require.True(t, holds.Allowed, "every precondition holds: %s", holds.Message())
			none := tc.decide(t, func(*scenario) {})
			require.True(t, none.Allowed, "none configured (the default): %s", none.Message())

			failed := tc.decide(t, func(s *scenario) { withPreconditions(t, s, "HEALTH_WARN", `[]`) })
			assert.Equal(t, []Code{CodePreconditionFailed}, failed.Codes(), failed.Message())
			assert.Contains(t, failed.Message(), "[PreconditionFailed] precondition ceph-health (Ceph must report HEALTH_OK) does not hold "+tc.step)
			assert.Contains(t, failed.Message(), ": the expression returned false over 1 object(s); resolve it")
			assert.NotContains(t, failed.Message(), "gpu-alerts", "a precondition that holds is not named")

			firing := tc.decide(t, func(s *scenario) { withPreconditions(t, s, "HEALTH_OK", xidFiring) })
			assert.Equal(t, []Code{CodePreconditionFailed}, firing.Codes(), firing.Message())
			assert.Contains(t, firing.Message(), "precondition gpu-alerts does not hold "+tc.step)
			assert.Contains(t, firing.Message(), ": 1 firing alert(s) match alertname in [GPUXidErrors]: GPUXidErrors (active since 2026-11-30T05:00:00Z)")

			unknown := tc.decide(t, func(s *scenario) {
				withPreconditions(t, s, "HEALTH_OK", `[]`)
				s.cluster.Preconditions[0], _ = precondition.ReadCEL(cephHealth, nil, nil, errors.New("configmaps is forbidden"), precondition.RuntimeBudget)
			})
			assert.Equal(t, []Code{CodePreconditionUnknown}, unknown.Codes(), unknown.Message())
			assert.Contains(t, unknown.Message(), "precondition ceph-health (Ceph must report HEALTH_OK) cannot be judged (which counts as failed) "+tc.step)
			assert.Contains(t, unknown.Message(), ": its objects cannot be read (configmaps is forbidden)")

			// The watched objects deleted: all() would hold over none.
			allOverNone := precondition.Precondition{Name: "ceph-health", Kind: precondition.KindCEL,
				CEL: &precondition.CEL{Version: "v1", Resource: "configmaps", Namespace: "rook-ceph", Expression: "objects.all(o, o.data.health == 'HEALTH_OK')"}}
			prog, err := precondition.Compile(allOverNone.CEL.Expression)
			require.NoError(t, err)
			empty := tc.decide(t, func(s *scenario) {
				withPreconditions(t, s, "HEALTH_OK", `[]`)
				s.cfg.Preconditions[0] = allOverNone
				s.cluster.Preconditions[0], _ = precondition.ReadCEL(allOverNone, prog, nil, nil, precondition.RuntimeBudget)
			})
			assert.Equal(t, []Code{CodePreconditionUnknown}, empty.Codes(), empty.Message())
			assert.Contains(t, empty.Message(), "precondition ceph-health cannot be judged (which counts as failed) "+tc.step)
			assert.Contains(t, empty.Message(), ": no objects matched configmaps/v1 in rook-ceph (set cel.allowEmpty: true if none is healthy)")
			mayBeEmpty := tc.decide(t, func(s *scenario) {
				withPreconditions(t, s, "HEALTH_OK", `[]`)
				p := allOverNone
				p.CEL = &precondition.CEL{Version: "v1", Resource: "configmaps", Namespace: "rook-ceph", Expression: allOverNone.CEL.Expression, AllowEmpty: true}
				s.cfg.Preconditions[0] = p
				s.cluster.Preconditions[0], _ = precondition.ReadCEL(p, prog, nil, nil, precondition.RuntimeBudget)
			})
			assert.True(t, mayBeEmpty.Allowed, "allowEmpty: the expression judges no objects: %s", mayBeEmpty.Message())

			notRead := tc.decide(t, func(s *scenario) {
				withPreconditions(t, s, "HEALTH_OK", `[]`)
				s.cluster.Preconditions = s.cluster.Preconditions[1:]
			})
			assert.Equal(t, []Code{CodePreconditionUnknown}, notRead.Codes(), "a precondition the adapter did not read is unknown: %s", notRead.Message())

			stale := tc.decide(t, func(s *scenario) {
				withPreconditions(t, s, "HEALTH_OK", `[]`)
				s.cluster.Preconditions[1] = precondition.ReadAlerts(gpuAlerts, s.cluster.Preconditions[1], nil, errors.New("connection refused"), testNow)
				s.cluster.Preconditions[1].ReadAt = testNow.Add(-10 * time.Minute)
			})
			assert.Equal(t, []Code{CodePreconditionStale}, stale.Codes(), stale.Message())
			assert.Contains(t, stale.Message(), "precondition gpu-alerts has no fresh reading (which counts as failed) "+tc.step)
			assert.Contains(t, stale.Message(), ": http://alertmanager.monitoring:9093/api/v2/alerts was last read successfully at 2026-11-21T11:50:00Z, 10m0s ago, beyond maxAge 5m0s; the latest read failed: connection refused")

			fresh := tc.decide(t, func(s *scenario) {
				withPreconditions(t, s, "HEALTH_OK", `[]`)
				s.cluster.Preconditions[1] = precondition.ReadAlerts(gpuAlerts, s.cluster.Preconditions[1], nil, errors.New("connection refused"), testNow)
			})
			assert.True(t, fresh.Allowed, "a failed poll within maxAge keeps the last reading: %s", fresh.Message())
		})
	}
	t.Run("a Node write that starts nothing is allowed while one fails", func(t *testing.T) {
		s, old, n := nodeScenario(t)
		withPreconditions(t, s, "HEALTH_WARN", xidFiring)
		n.Labels["team"] = "ml"
		d := decideNode(s, old, n)
		assert.True(t, d.Allowed, d.Message())
	})
	t.Run("a CPU node's completion is allowed while one fails", func(t *testing.T) {
		s := safeScenario(t)
		withPreconditions(t, s, "HEALTH_WARN", xidFiring)
		c := cpuNode("cpu-01")
		old := c.DeepCopy()
		old.Spec.Unschedulable = true
		d := DecideCompletion(s.cfg, s.cluster, NodeRequest{Node: c, OldNode: old, User: UserInfo{Name: sucUserName}, Now: testNow})
		assert.True(t, d.Allowed, d.Message())
	})
}

func TestPreconditionsConfig(t *testing.T) {
	cfg, err := LoadConfig([]byte(`preconditions:
- name: ceph-health
  kind: cel
  message: Ceph must report HEALTH_OK
  cel: {version: v1, resource: configmaps, namespace: rook-ceph, expression: "size(objects) > 0 && objects.all(o, o.data.health == 'HEALTH_OK')"}
- name: gpu-alerts
  kind: alerts
  alerts: {url: "http://alertmanager.monitoring:9093/api/v2/alerts", alertNames: [GPUXidErrors], maxAge: 5m}
`))
	require.NoError(t, err)
	assert.Equal(t, []precondition.Precondition{cephHealth, gpuAlerts}, cfg.Preconditions)
	assert.Empty(t, DefaultConfig().Preconditions, "none by default: existing installs do not change")
	cfg, err = LoadConfig([]byte("preconditions:\n- {name: no-drain-holds, kind: cel, cel: {version: v1, resource: configmaps, namespace: ops, labelSelector: hold=drain, expression: \"size(objects) == 0\", allowEmpty: true}}\n"))
	require.NoError(t, err)
	assert.True(t, cfg.Preconditions[0].CEL.AllowEmpty, "a precondition may declare that no object is healthy")
	for _, tc := range []struct{ name, yaml, err string }{
		{"a compile error is a config error naming the field", "preconditions:\n- {name: x, kind: cel, cel: {version: v1, resource: configmaps, expression: \"objects.all(o,\"}}\n",
			`preconditions[0].cel.expression: Invalid value: "objects.all(o,": compilation failed`},
		{"a cost over the limit is a config error", "preconditions:\n- {name: x, kind: cel, cel: {version: v1, resource: configmaps, expression: \"objects.all(o, objects.all(p, p == o))\"}}\n",
			"preconditions[0].cel.expression: Invalid value: \"objects.all(o, objects.all(p, p == o))\": estimated cost"},
		{"duplicate names", "preconditions:\n- {name: x, kind: alerts, alerts: {url: \"http://am:9093/api/v2/alerts\"}}\n- {name: x, kind: alerts, alerts: {url: \"http://am:9093/api/v2/alerts\"}}\n",
			`preconditions[1].name: Duplicate value: "x"`},
		{"allowEmpty is a bool", "preconditions:\n- {name: x, kind: cel, cel: {version: v1, resource: configmaps, expression: \"size(objects) == 0\", allowEmpty: maybe}}\n",
			"preconditions.cel.allowEmpty of type bool"},
		{"allowEmpty belongs to cel", "preconditions:\n- {name: x, kind: alerts, allowEmpty: true, alerts: {url: \"http://am:9093/api/v2/alerts\"}}\n",
			`unknown field "preconditions[0].allowEmpty"`},
		{"an unknown key", "preconditions:\n- {name: x, kind: alerts, alerts: {url: \"http://am:9093/api/v2/alerts\", matchers: [a]}}\n", `unknown field "preconditions[0].alerts.matchers"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig([]byte(tc.yaml))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}
