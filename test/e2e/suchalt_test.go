//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/controlplane"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// haltRecord reads the halt record as the gate parses it.
func haltRecord(t *testing.T) gate.HaltRecord {
	t.Helper()
	var cm corev1.ConfigMap
	require.NoError(t, env.Admin.Get(context.Background(), types.NamespacedName{Namespace: env.Config.Namespace, Name: env.Config.Halts.ConfigMap}, &cm))
	return env.Config.ParseHaltRecord(&cm)
}

// clearHalt annotates the halt record, as c, with the documented clear of
// the halt of hardware key: the write the halt webhook judges.
func clearHalt(ctx context.Context, c client.Client, key, reason string) error {
	var cm corev1.ConfigMap
	if err := env.Admin.Get(ctx, types.NamespacedName{Namespace: env.Config.Namespace, Name: env.Config.Halts.ConfigMap}, &cm); err != nil {
		return err
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[gate.ClearAnnotation(key)] = reason
	return c.Update(ctx, &cm)
}

// startHaltKeeper runs `serve` as the gate's ServiceAccount with its
// leader-elected halt loop (the shared in-process webhook runs none), not
// registered as a webhook: the shared webhook enforces what it records.
func startHaltKeeper(t *testing.T, bin, dir string) *testenv.ServeProcess {
	t.Helper()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, env.ServiceAccountKubeconfig(context.Background(), kubeconfig))
	p, err := testenv.StartServe(context.Background(), testenv.ServeOptions{Binary: bin, Kubeconfig: kubeconfig, Config: env.Config, Dir: dir, HaltInterval: time.Second})
	require.NoError(t, err)
	return p
}

// TestSUCFailureHaltsTheRollout (issue 12 item 7, the failure): with the
// real SUC, a GPU node's upgrade Job fails (the test plays the Job
// controller and marks it Failed, as it would after backoffLimit); the
// halt loop records the halt; the next Plan of that hardware is refused
// (RolloutHalted), naming the node, the signal and when; the halt
// survives the Job's deletion (as its TTL would delete it) and a restart of
// every gate process; the failed node stays cordoned until it is back on the
// source and proven; the rollback Plan is allowed; the requester cannot
// clear the halt, a second person can, and the next Plan is then admitted.
func TestSUCFailureHaltsTheRollout(t *testing.T) {
	needSUC(t)
	ctx := context.Background()
	// The halt loop reads every stored Plan: only this test's from here on.
	require.NoError(t, env.Admin.DeleteAllOf(ctx, &upgradev1.Plan{}, client.InNamespace(testenv.SUCNamespace)))
	require.NoError(t, env.CreateNodes(ctx, []testenv.NodeSpec{v100Spec("halt-v100-a", nil), v100Spec("halt-v100-b", nil)}))
	dir := filepath.Join(env.CP.WorkDir(), "halts")
	bin, err := testenv.BuildServe(ctx, dir)
	require.NoError(t, err)
	keeper := startHaltKeeper(t, bin, filepath.Join(dir, "serve-1"))
	t.Cleanup(func() { _ = keeper.Stop() })
	alice, _ := as(t, "alice")
	bob, _ := as(t, "bob")   // approved the record; clears the halt
	dave, _ := as(t, "dave") // writes the next Plan (carol writes records, bob approves)
	key := gate.HardwareKey([]string{"10de:1db6/10de:124a"})

	// alice's rollout: admitted, attested as hers.
	fwd := sucPlan("halt-fwd", "v100-r580", "halt-v100-a")
	fwd.Annotations[gate.AnnotationRequestedBy] = "bob"
	err = alice.Create(ctx, fwd.DeepCopy())
	require.Error(t, err, "requested-by must be the writer")
	assert.Contains(t, err.Error(), "[RequesterMismatch]")
	fwd.Annotations[gate.AnnotationRequestedBy] = "alice"
	require.NoError(t, alice.Create(ctx, fwd))
	release(t, fwd)

	// The Job fails (played: no Job controller runs here).
	eventually(t, 60*time.Second, "SUC starts halt-fwd's Job on halt-v100-a", func() bool { return running(jobFor(t, "halt-fwd", "halt-v100-a")) })
	failed := jobFor(t, "halt-fwd", "halt-v100-a")
	// The Job's pod cordons the node first (played: no kubelet runs it), so
	// the cordon is SUC's, not another's (CordonedByOther).
	require.NoError(t, env.CordonAsSUCJob(ctx, "halt-v100-a"), "the cordon of SUC's Job")
	next := sucPlan("halt-next", "v100-r580", "halt-v100-b")
	next.Annotations[gate.AnnotationRequestedBy] = "dave"
	require.NoError(t, env.FinishJob(ctx, failed, false))
	haltLatency(t, time.Now(), time.Second, func() bool {
		err := dave.Create(ctx, next.DeepCopy(), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "[RolloutHalted]")
	}, func() bool { _, ok := haltRecord(t).Halts[key]; return ok })
	eventually(t, 30*time.Second, "the halt loop records the halt", func() bool { _, ok := haltRecord(t).Halts[key]; return ok })
	h := haltRecord(t).Halts[key]
	assert.Equal(t, "halt-v100-a", h.Node)
	assert.Equal(t, "alice", h.RequestedBy)
	assert.Contains(t, h.Signal, "SUC Job system-upgrade/"+failed.Name+" failed (BackoffLimitExceeded)")

	refused := func(t *testing.T, what string) {
		t.Helper()
		err := dave.Create(ctx, next.DeepCopy(), client.DryRunAll)
		require.Error(t, err, what)
		assert.Contains(t, err.Error(), "[RolloutHalted] the rollout of hardware 10de:1db6/10de:124a is halted: node halt-v100-a: SUC Job system-upgrade/"+failed.Name+" failed (BackoffLimitExceeded) (seen ")
		assert.Contains(t, err.Error(), "someone other than alice clears the halt")
		// The failed rollout is still in flight (RolloutInFlight and the
		// budget hold it too); the halt outlives it, below.
	}
	refused(t, "the next Plan of the halted hardware")
	// Break glass does not override the halt (docs/install.md).
	erin, _ := as(t, "erin", env.Config.BreakGlassGroup)
	bg := next.DeepCopy()
	bg.Annotations[gate.AnnotationRequestedBy] = "erin"
	bg.Annotations[gate.AnnotationBreakGlass] = "INC-4712 push the driver fix through"
	err = erin.Create(ctx, bg, client.DryRunAll)
	require.Error(t, err, "break glass on the halted hardware")
	assert.Contains(t, err.Error(), "[RolloutHalted] the rollout of hardware 10de:1db6/10de:124a is halted")
	assert.Contains(t, err.Error(), "(break glass does not override a halt)")
	ev, err := env.CP.WaitAuditEvent(ctx, func(e controlplane.AuditEvent) bool {
		// The latency probe's first dry runs may be denied before the halt is seen.
		return e.ObjectRef != nil && e.ObjectRef.Name == "halt-next" && e.Stage == "ResponseComplete" && e.Annotations[webhook.WebhookPlans+"/decision"] == "deny" &&
			e.Annotations[webhook.WebhookPlans+"/halts"] != ""
	})
	require.NoError(t, err)
	assert.Equal(t, key+"@halt-v100-a", ev.Annotations[webhook.WebhookPlans+"/halts"], "the audit annotation names the halt")

	// The Job goes as its TTL would take it.
	require.NoError(t, env.Admin.Delete(ctx, failed, client.PropagationPolicy("Background")))
	eventually(t, 30*time.Second, "the failed Job is gone", func() bool { return jobFor(t, "halt-fwd", "halt-v100-a") == nil })
	// Every gate process restarts: the halt is read back from the record.
	require.NoError(t, keeper.Stop())
	require.NoError(t, env.StopWebhook())
	require.NoError(t, env.StartWebhook(ctx))
	keeper = startHaltKeeper(t, bin, filepath.Join(dir, "serve-2"))
	time.Sleep(3 * time.Second) // a few turns of the new loop
	assert.Equal(t, h, haltRecord(t).Halts[key], "the halt outlives its Job and the restart")
	refused(t, "after the Job's deletion and the restart")

	// The failed node (back on its source: the Job changed nothing) stays
	// cordoned until proven; the rollback Plan is allowed.
	var n corev1.Node
	require.NoError(t, env.Admin.Get(ctx, types.NamespacedName{Name: "halt-v100-a"}, &n))
	require.True(t, n.Spec.Unschedulable, "SUC's Job cordoned it")
	uncordon := n.DeepCopy()
	uncordon.Spec.Unschedulable = false
	err = alice.Update(ctx, uncordon.DeepCopy(), client.DryRunAll)
	require.Error(t, err, "the failed node's uncordon before its proof")
	assert.Contains(t, err.Error(), "[RolloutHalted] node halt-v100-a failed its upgrade")
	back := plan("halt-back", "v100-r580", "halt-v100-a")
	back.Annotations[gate.AnnotationRollback] = "true"
	back.Spec.Version = testenv.Source.RKE2
	// With SUC's Job gone (its TTL), the halt record, which only the gate
	// writes, still names the node: the cordon is SUC's failed upgrade, not
	// another's, so the rollback needs no hand-over (docs/rollout.md).
	eventuallyWrite(t, func() error { return alice.Create(ctx, back.DeepCopy(), client.DryRunAll) })
	require.NoError(t, env.Admin.Get(ctx, types.NamespacedName{Name: "halt-v100-a"}, &n))
	uncordon = n.DeepCopy()
	uncordon.Spec.Unschedulable = false
	require.NoError(t, proveNode(ctx, "halt-v100-a", time.Now().Add(-time.Hour)))
	eventually(t, 30*time.Second, "the proven node's uncordon is allowed", func() bool {
		return alice.Update(ctx, uncordon.DeepCopy(), client.DryRunAll) == nil
	})
	// Back in service: a node still cordoned would count against the budget
	// of the next Plan.
	require.NoError(t, patchNode(alice, "halt-v100-a", `{"spec":{"unschedulable":false}}`), "the proven node's uncordon")

	// The failed rollout is withdrawn; the requester cannot clear, bob can.
	require.NoError(t, env.Admin.Delete(ctx, fwd))
	clear := func(c client.Client) error { return clearHalt(ctx, c, key, "rolled back, driver fixed (INC-4711)") }
	var cm corev1.ConfigMap
	require.NoError(t, env.Admin.Get(ctx, types.NamespacedName{Namespace: env.Config.Namespace, Name: env.Config.Halts.ConfigMap}, &cm))
	cm.Data = map[string]string{"halt." + key: "nonsense"}
	err = dave.Update(ctx, &cm)
	require.Error(t, err, "a person rewrites the halt by hand")
	assert.Contains(t, err.Error(), "[RolloutHalted] only the gate's own ServiceAccount adds or changes halt entries")
	err = clear(alice)
	require.Error(t, err, "the requester clears her own halt")
	assert.Contains(t, err.Error(), "alice requested the failed rollout (Plan system-upgrade/halt-fwd) and may not clear its halt")
	require.NoError(t, clear(bob))
	eventually(t, 30*time.Second, "the gate removes the cleared halt", func() bool { return len(haltRecord(t).Halts) == 0 })
	var lastErr error
	eventually(t, 30*time.Second, "the next Plan is admitted", func() bool {
		lastErr = dave.Create(ctx, next.DeepCopy(), client.DryRunAll)
		if lastErr != nil {
			t.Logf("not yet: %v", lastErr)
		}
		return lastErr == nil
	})
	events, err := env.CP.AuditEvents()
	require.NoError(t, err)
	cleared := false
	for _, e := range events {
		if e.ObjectRef != nil && e.ObjectRef.Name == env.Config.Halts.ConfigMap && e.Verb == "update" && e.Username() == "bob" && e.Annotations[webhook.WebhookHalts+"/decision"] == "allow" {
			cleared = strings.Contains(e.Annotations[webhook.WebhookHalts+"/halts"], key)
		}
	}
	assert.True(t, cleared, "the audit log holds bob's clear, naming the halt")
}

// TestHaltRecordStaysWritableThroughAPIServer (issue 24): through the real
// API server and the chart's halts webhook, nobody (a person here; the
// gate's own ServiceAccount is held to the same in gate's tests) may make the
// halt record immutable, add binary data, an owner reference or a
// finalizer, or change its labels; each write is refused naming the field
// and the value. Dry runs: the API server calls the webhook (sideEffects
// None) and stores nothing, so on a gate that admitted them the record
// stays as it was. The neighbouring safe case: the same record written back
// unchanged (the gate's own probe of writability) is admitted.
func TestHaltRecordStaysWritableThroughAPIServer(t *testing.T) {
	ctx := context.Background()
	bob, _ := as(t, "bob")
	get := func() *corev1.ConfigMap {
		var cm corev1.ConfigMap
		require.NoError(t, env.Admin.Get(ctx, types.NamespacedName{Namespace: env.Config.Namespace, Name: env.Config.Halts.ConfigMap}, &cm))
		return &cm
	}
	cases := []struct {
		name   string
		mutate func(cm *corev1.ConfigMap)
		want   string // "" = allowed
	}{
		{name: "written back unchanged", mutate: func(*corev1.ConfigMap) {}},
		{name: "immutable", mutate: func(cm *corev1.ConfigMap) { cm.Immutable = new(true) },
			want: "immutable: true would stop the gate writing the halt record"},
		{name: "binaryData", mutate: func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"blob": []byte("x")} },
			want: "binaryData holds blob"},
		{name: "a label", mutate: func(cm *corev1.ConfigMap) {
			if cm.Labels == nil {
				cm.Labels = map[string]string{}
			}
			cm.Labels["team"] = "mallory"
		}, want: `label team changes from "" to "mallory"`},
		{name: "an owner reference", mutate: func(cm *corev1.ConfigMap) {
			cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "short-lived", UID: "0b5e2a1c-0000-4000-8000-000000000001"}}
		}, want: "ownerReferences [ConfigMap short-lived]: an owner's deletion would delete the halt record"},
		{name: "a finalizer", mutate: func(cm *corev1.ConfigMap) { cm.Finalizers = []string{"example.com/hold"} },
			want: "finalizers [example.com/hold]: the halt record keeps none"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cm := get()
			tc.mutate(cm)
			err := bob.Update(ctx, cm, client.DryRunAll)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			requireDenied(t, err, gate.CodeRolloutHalted)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
