//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
)

// removePlan deletes an admitted Plan and waits until the gate's caches no
// longer count it as a rollout in flight, so the next test's Plan is judged
// without it (the informer sees the deletion a moment after the API server).
func removePlan(t *testing.T, p *upgradev1.Plan) {
	t.Helper()
	require.NoError(t, client.IgnoreNotFound(env.Admin.Delete(context.Background(), p)))
	waitNotInFlight(t, "Plan "+p.Namespace+"/"+p.Name)
}

// waitNotInFlight waits until a probe Plan's review no longer names what
// as a rollout in flight.
func waitNotInFlight(t *testing.T, what string) {
	t.Helper()
	probe := plan("in-flight-probe", "v100-r580", "gpu-v100-01")
	eventually(t, 15*time.Second, "the gate forgets "+what, func() bool {
		err := env.Admin.Create(context.Background(), probe.DeepCopy(), client.DryRunAll)
		return err == nil || !strings.Contains(err.Error(), what+" is in flight")
	})
}

// TestRolloutInFlightThroughAPIServer: one GPU rollout at a time through
// every path that starts one: a second single-node Plan, a label change
// that pulls a GPU node into a second Plan, a driver change beside a Plan.
// The Plan's own edit is not held, and the second Plan passes once the
// first is gone.
func TestRolloutInFlightThroughAPIServer(t *testing.T) {
	driverWorld(t)
	ctx := context.Background()
	alice, _ := as(t, "alice")
	first := plan("budget-first", "v100-r580", "gpu-v100-01")
	require.NoError(t, alice.Create(ctx, first))
	defer removePlan(t, first)

	second := plan("budget-second", "v100-r580", "gpu-v100-02")
	eventuallyWrite(t, func() error { return alice.Create(ctx, second.DeepCopy(), client.DryRunAll) }, gate.CodeRolloutInFlight)
	err := alice.Create(ctx, second.DeepCopy())
	requireDenied(t, err, gate.CodeRolloutInFlight)
	assert.Contains(t, err.Error(), "[RolloutInFlight] Plan system-upgrade/budget-first is in flight on GPU node(s) gpu-v100-01 (pending)")

	t.Run("the Plan's own edit", func(t *testing.T) {
		require.NoError(t, env.Admin.Get(ctx, client.ObjectKeyFromObject(first), first))
		first.Labels = map[string]string{"note": "edited"}
		require.NoError(t, alice.Update(ctx, first))
	})
	t.Run("RolloutInFlight: a label change pulls a GPU node into a second Plan", func(t *testing.T) {
		wave := plan("budget-wave", "v100-r580")
		wave.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"budget-wave": "next"}}
		require.NoError(t, alice.Create(ctx, wave), "it selects no node yet: it starts nothing")
		defer removePlan(t, wave)
		// alice names herself as the mover (MovedByMissing is not what this case is about).
		label := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"budget-wave":"next"},"annotations":{"gpu-upgrade-gate.io/moved-by":"alice"}}}`))
		eventuallyWrite(t, func() error {
			return alice.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-v100-02"}}, label, client.DryRunAll)
		}, gate.CodeRolloutInFlight)
		err := patchNode(alice, "gpu-v100-02", `{"metadata":{"labels":{"budget-wave":"next"},"annotations":{"gpu-upgrade-gate.io/moved-by":"alice"}}}`)
		requireDenied(t, err, gate.CodeRolloutInFlight)
		assert.Contains(t, err.Error(), "Plan system-upgrade/budget-wave: [RolloutInFlight] Plan system-upgrade/budget-first is in flight")
	})
	t.Run("RolloutInFlight: a driver change beside the Plan", func(t *testing.T) {
		err := edit(t, alice, ndRef("v100"), func(u *unstructured.Unstructured) {
			set("spec.version", "580.130.00")(u)
			annotate(gate.AnnotationQualification, "v100-driver")(u)
		})
		requireDenied(t, err, gate.CodeRolloutInFlight)
		assert.Contains(t, err.Error(), "Plan system-upgrade/budget-first is in flight")
	})

	removePlan(t, first)
	eventuallyWrite(t, func() error { return alice.Create(ctx, second) })
	removePlan(t, second)
}

// TestDisruptionBudgetThroughAPIServer: a GPU node already out (cordoned
// and NotReady) spends the budget of one; once it is back the Plan passes.
func TestDisruptionBudgetThroughAPIServer(t *testing.T) {
	ctx := context.Background()
	const down = "gpu-v100-down"
	require.NoError(t, env.CreateNodes(ctx, []testenv.NodeSpec{{Name: down, Fixture: "node-v100.json", Tuple: testenv.Source, Zone: "zone-a", Cordoned: true,
		Mutate: func(n *corev1.Node) {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", LastTransitionTime: metav1.Now()}}
		}}}))
	defer func() {
		require.NoError(t, env.Admin.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: down}}))
	}()
	alice, _ := as(t, "alice")
	p := plan("budget-canary", "v100-r580", "gpu-v100-01")
	eventuallyWrite(t, func() error { return alice.Create(ctx, p.DeepCopy(), client.DryRunAll) }, gate.CodeDisruptionBudgetExceeded)
	err := alice.Create(ctx, p.DeepCopy(), client.DryRunAll)
	requireDenied(t, err, gate.CodeDisruptionBudgetExceeded)
	assert.Contains(t, err.Error(), "[DisruptionBudgetExceeded] taking GPU node gpu-v100-01 out now would make 2 GPU nodes unavailable at once across all GPU nodes, above the budget of 1 (budget.maxUnavailable); already out: gpu-v100-down (cordoned and NotReady)")

	// The node recovers (its kubelet reports Ready, played here): Ready but
	// still cordoned, it is still out (issue 22: cordoned for any reason).
	var n corev1.Node
	require.NoError(t, env.Admin.Get(ctx, client.ObjectKey{Name: down}, &n))
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastTransitionTime: metav1.Now()}}
	require.NoError(t, env.Admin.Status().Update(ctx, &n))
	eventuallyWrite(t, func() error { return alice.Create(ctx, p.DeepCopy(), client.DryRunAll) }, gate.CodeDisruptionBudgetExceeded)
	require.NoError(t, patchNode(env.Admin, down, `{"spec":{"unschedulable":false}}`))
	eventuallyWrite(t, func() error { return alice.Create(ctx, p.DeepCopy(), client.DryRunAll) })
}

// TestPlanWindowThroughAPIServer: a GPU Plan carries a window SUC accepts.
func TestPlanWindowThroughAPIServer(t *testing.T) {
	ctx := context.Background()
	alice, _ := as(t, "alice")
	cases := []struct {
		name, plan string
		window     *upgradev1.TimeWindowSpec
		want       []gate.Code
		contains   string
	}{
		{name: "a weekend night in Berlin", plan: "window-berlin", window: &upgradev1.TimeWindowSpec{Days: []upgradev1.Day{"sa", "su"}, StartTime: "02:00", EndTime: "06:00", TimeZone: "Europe/Berlin"}},
		{name: "WindowInvalid: none", plan: "window-none", want: []gate.Code{gate.CodeWindowInvalid}, contains: "a GPU Plan needs spec.window"},
		{name: "WindowInvalid: a time SUC does not parse", plan: "window-bad-time", window: &upgradev1.TimeWindowSpec{Days: []upgradev1.Day{"sa"}, StartTime: "2 am", EndTime: "06:00"},
			want: []gate.Code{gate.CodeWindowInvalid}, contains: `spec.window.startTime "2 am" does not parse as SUC reads it`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := plan(tc.plan, "v100-r580", "gpu-v100-01")
			p.Spec.Window = tc.window
			err := alice.Create(ctx, p, client.DryRunAll)
			if len(tc.want) == 0 {
				require.NoError(t, err)
				return
			}
			requireDenied(t, err, tc.want...)
			assert.Contains(t, err.Error(), tc.contains)
		})
	}
}

// TestOutsideWindowThroughAPIServer: with maintenance windows configured,
// the driver path and its per-node step start reloads only inside one.
// The webhook is restarted with each config.
func TestOutsideWindowThroughAPIServer(t *testing.T) {
	driverWorld(t)
	restart := func(ws []upgradev1.TimeWindowSpec) { restartWithWindows(t, ws) }
	defer restart(nil)
	closed := closedWindow()
	restart([]upgradev1.TimeWindowSpec{closed})
	alice, _ := as(t, "alice")
	change := func(u *unstructured.Unstructured) {
		set("spec.version", "580.130.00")(u)
		annotate(gate.AnnotationQualification, "v100-driver")(u)
	}
	err := edit(t, alice, ndRef("v100"), change)
	requireDenied(t, err, gate.CodeOutsideWindow)
	next := time.Date(now.UTC().Year(), now.UTC().Month(), now.UTC().Day()+3, 0, 0, 0, 0, time.UTC)
	assert.Contains(t, err.Error(), "the next opens at "+next.Format("Mon 2006-01-02 15:04 MST")+", time zone UTC (windows.maintenance[0]: ")

	t.Run("OutsideWindow: the per-node driver step", func(t *testing.T) {
		op, err := client.New(env.CP.ConfigFor(operatorSA, "system:serviceaccounts", "system:serviceaccounts:gpu-operator", "system:authenticated"), client.Options{Scheme: env.Scheme})
		require.NoError(t, err)
		defer func() {
			_ = patchNode(op, "gpu-v100-01", `{"metadata":{"labels":{"`+gate.LabelDriverUpgradeState+`":null}}}`) // the operator's own label (docs/ownership.md)
		}()
		require.NoError(t, operatorStep(t, op, "gpu-v100-01", "drain-required"))
		err = operatorStep(t, op, "gpu-v100-01", "pod-restart-required")
		requireDeniedWith(t, err, gate.CodeOutsideWindow)
		assert.Equal(t, "drain-required", stateOf(t, "gpu-v100-01"))
	})

	// Inside a window the same change passes.
	restart([]upgradev1.TimeWindowSpec{*openWindow()})
	require.NoError(t, edit(t, alice, ndRef("v100"), change))
	preGate(t, func() {
		require.NoError(t, edit(t, env.Admin, ndRef("v100"), func(u *unstructured.Unstructured) {
			set("spec.version", "580.126.20")(u)
			u.SetAnnotations(nil)
		}))
	})
}

// TestIncidentCordonThroughAPIServer: issue 22 attack 8. A Ready GPU node a
// person cordoned for an incident is out: it spends the budget of one (a
// Plan on another node is refused), and a canary Plan on it is refused as
// someone else's cordon until a second person hands it over; the
// requester's own hand-over does not count. On main both Plans were
// admitted (a cordoned Ready node was not counted, nor its cordon's owner
// known).
func TestIncidentCordonThroughAPIServer(t *testing.T) {
	ctx := context.Background()
	const incident = "gpu-v100-incident"
	require.NoError(t, env.CreateNodes(ctx, []testenv.NodeSpec{{Name: incident, Fixture: "node-v100.json", Tuple: testenv.Source, Zone: "zone-a"}}))
	defer func() {
		require.NoError(t, env.Admin.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: incident}}))
	}()
	alice, _ := as(t, "alice")
	bob, _ := as(t, "bob")
	// A person cordons it after an XID error; it stays Ready.
	require.NoError(t, patchNode(bob, incident, `{"spec":{"unschedulable":true}}`), "a cordon is not reviewed")

	other := plan("incident-other", "v100-r580", "gpu-v100-01")
	eventuallyWrite(t, func() error { return alice.Create(ctx, other.DeepCopy(), client.DryRunAll) }, gate.CodeDisruptionBudgetExceeded)
	err := alice.Create(ctx, other.DeepCopy(), client.DryRunAll)
	requireDenied(t, err, gate.CodeDisruptionBudgetExceeded)
	assert.Contains(t, err.Error(), "already out: "+incident+" (cordoned by ")

	canary := plan("incident-canary", "v100-r580", incident)
	err = alice.Create(ctx, canary.DeepCopy(), client.DryRunAll)
	requireDenied(t, err, gate.CodeCordonedByOther)
	assert.Contains(t, err.Error(), "GPU node "+incident+" was cordoned by ")

	t.Run("the requester's own hand-over does not count", func(t *testing.T) {
		requireDenied(t, patchNode(alice, incident, `{"metadata":{"annotations":{"gpu-upgrade-gate.io/cordon-handover":"bob"}}}`), gate.CodeNodeAttestationForged)
		require.NoError(t, patchNode(alice, incident, `{"metadata":{"annotations":{"gpu-upgrade-gate.io/cordon-handover":"alice"}}}`))
		eventuallyWrite(t, func() error { return alice.Create(ctx, canary.DeepCopy(), client.DryRunAll) }, gate.CodeCordonedByOther)
	})
	t.Run("a second person's hand-over lets the canary proceed", func(t *testing.T) {
		require.NoError(t, patchNode(bob, incident, `{"metadata":{"annotations":{"gpu-upgrade-gate.io/cordon-handover":"bob"}}}`))
		eventuallyWrite(t, func() error { return alice.Create(ctx, canary.DeepCopy(), client.DryRunAll) })
	})
}
