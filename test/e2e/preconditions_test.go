//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/precondition"
)

// The stub Alertmanager plays the cluster's Alertmanager on loopback
// (/api/v2/alerts as Alertmanager v0.28 answers it); alertsMode switches
// what it answers: healthy (no alert), firing (GPUXidErrors on a V100
// node) or down (it drops the connection, as an unreachable one would).
var (
	alertsMode atomic.Value
	alertStub  = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		switch alertsMode.Load() {
		case "firing":
			_, _ = w.Write([]byte(`[{"labels":{"alertname":"GPUXidErrors","node":"gpu-v100-02","severity":"critical"},"annotations":{},"startsAt":"2026-12-01T05:00:00Z","endsAt":"2026-12-01T06:00:00Z","fingerprint":"3f1c","receivers":[{"name":"default"}],"status":{"state":"active","silencedBy":[],"inhibitedBy":[],"mutedBy":[]},"updatedAt":"2026-12-01T05:00:00Z","generatorURL":"http://prometheus/graph"}]`))
		case "down":
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
				}
			}
		default:
			_, _ = w.Write([]byte(`[]`))
		}
	}))
	// stubMaxAge is the alerts precondition's maxAge: short, so the test
	// of an unreachable source waits it out.
	stubMaxAge = 8 * time.Second
)

// e2ePreconditions are the declared preconditions of the shared e2e
// config: a storage health object (a ConfigMap standing for a Ceph or
// Longhorn status, as its operator would publish it) and the stub
// Alertmanager's GPUXidErrors. Both hold for every test but
// TestPreconditions.
func e2ePreconditions() []precondition.Precondition {
	return []precondition.Precondition{{
		Name: "storage-health", Kind: precondition.KindCEL, Message: "the storage cluster must report HEALTH_OK",
		CEL: &precondition.CEL{Version: "v1", Resource: "configmaps", Namespace: "rook-ceph", LabelSelector: "app=storage-status",
			// all() alone, as the docs' example: the gate, not the
			// expression, refuses an empty set (no allowEmpty).
			Expression: "objects.all(o, o.data.health == 'HEALTH_OK')"},
	}, {
		Name: "gpu-alerts", Kind: precondition.KindAlerts,
		Alerts: &precondition.Alerts{URL: alertStub.URL + "/api/v2/alerts", AlertNames: []string{"GPUXidErrors"},
			PollInterval: metav1.Duration{Duration: time.Second}, MaxAge: metav1.Duration{Duration: stubMaxAge}},
	}}
}

// storageStatus is the storage health object, as the storage operator
// would write it.
func storageStatus(health string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "rook-ceph", Name: "storage-status", Labels: map[string]string{"app": "storage-status"}},
		Data: map[string]string{"health": health}}
}

func setStorageHealth(t *testing.T, health string) {
	t.Helper()
	ctx := context.Background()
	var cm corev1.ConfigMap
	require.NoError(t, env.Admin.Get(ctx, client.ObjectKey{Namespace: "rook-ceph", Name: "storage-status"}, &cm))
	cm.Data = storageStatus(health).Data
	require.NoError(t, env.Admin.Update(ctx, &cm))
}

// TestPreconditions (issue 27 item 1): the next GPU node's upgrade (a Plan
// that moves it) is held while the storage health object says otherwise
// than HEALTH_OK, and released once it does; held (unknown) while the
// object is gone, where all() would hold over none; held while the stub
// Alertmanager lists a firing GPUXidErrors; and held, fail-closed, once the
// Alertmanager has been unreachable for longer than maxAge, then released
// when it answers again. The gate reads the ConfigMap through its own
// watch (the chart's Role on configmaps in rook-ceph) and the alerts from
// its poller's memory: no review waits on either.
func TestPreconditions(t *testing.T) {
	ctx := context.Background()
	c, _ := as(t, "alice")
	write := func() error { return c.Create(ctx, plan("pre-canary", "v100-r580", "gpu-v100-01"), client.DryRunAll) }
	t.Cleanup(func() {
		if err := env.Admin.Create(ctx, storageStatus("HEALTH_OK")); client.IgnoreAlreadyExists(err) != nil {
			t.Errorf("write back the storage health object: %v", err)
		}
		setStorageHealth(t, "HEALTH_OK")
		alertsMode.Store("healthy")
	})
	eventuallyWrite(t, write)

	setStorageHealth(t, "HEALTH_WARN")
	eventuallyWrite(t, write, gate.CodePreconditionFailed)
	err := write()
	requireDenied(t, err, gate.CodePreconditionFailed)
	assert.Contains(t, err.Error(), "precondition storage-health (the storage cluster must report HEALTH_OK) does not hold before a GPU upgrade starts (applying this Plan): the expression returned false over 1 object(s)")
	setStorageHealth(t, "HEALTH_OK")
	eventuallyWrite(t, write)

	// The health object deleted: all() would hold over no object; the
	// precondition cannot be judged instead, and holds again once the
	// storage operator writes it back.
	require.NoError(t, env.Admin.Delete(ctx, storageStatus("HEALTH_OK")))
	eventuallyWrite(t, write, gate.CodePreconditionUnknown)
	err = write()
	requireDenied(t, err, gate.CodePreconditionUnknown)
	assert.Contains(t, err.Error(), "precondition storage-health (the storage cluster must report HEALTH_OK) cannot be judged (which counts as failed) before a GPU upgrade starts (applying this Plan): no objects matched configmaps/v1 in rook-ceph (app=storage-status)")
	require.NoError(t, env.Admin.Create(ctx, storageStatus("HEALTH_OK")))
	eventuallyWrite(t, write)

	alertsMode.Store("firing")
	eventuallyWrite(t, write, gate.CodePreconditionFailed)
	err = write()
	requireDenied(t, err, gate.CodePreconditionFailed)
	assert.Contains(t, err.Error(), "precondition gpu-alerts does not hold before a GPU upgrade starts (applying this Plan): 1 firing alert(s) match alertname in [GPUXidErrors]: GPUXidErrors (active since 2026-12-01T05:00:00Z)")
	alertsMode.Store("healthy")
	eventuallyWrite(t, write)

	// Unreachable: the last reading (healthy) counts until it is older
	// than maxAge, then the precondition fails closed.
	alertsMode.Store("down")
	down := time.Now()
	require.NoError(t, write(), "a failed poll within maxAge keeps the last reading")
	for deadline := time.Now().Add(stubMaxAge + 15*time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if err = write(); err != nil {
			break
		}
	}
	requireDenied(t, err, gate.CodePreconditionStale)
	assert.GreaterOrEqual(t, time.Since(down), stubMaxAge-time.Second, "held only after maxAge: %v", err)
	assert.Contains(t, err.Error(), "precondition gpu-alerts has no fresh reading (which counts as failed) before a GPU upgrade starts (applying this Plan): "+alertStub.URL+"/api/v2/alerts was last read successfully at")
	assert.Contains(t, err.Error(), "beyond maxAge 8s; the latest read failed:")
	alertsMode.Store("healthy")
	eventuallyWrite(t, write)
}
