//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/controlplane"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// TestSUCCompletionWaitsForTheFacts: SUC completes a node the moment its
// Job completes, whatever the node reports. With the real SUC: the Job
// completes while the node's facts still say the source (nfd-master, GFD
// and the kubelet have not caught up); SUC's completion write is refused
// (UncordonBeforeProof, naming what is not there yet), the node stays
// cordoned and not marked done, and the next node's Job is refused. The
// test then moves the facts as the kubelet and nfd-master would; the proof
// path takes over (refused while unproven), and once the proof arrives SUC
// uncordons the node and moves on, untouched.
func TestSUCCompletionWaitsForTheFacts(t *testing.T) {
	ctx := context.Background()
	w := startSUCWave(t, "lag")
	first, job := w.started(t)
	second := w.other(first)

	// The Job's pod cordons the node (played: no kubelet runs it); the Job
	// controller marks the Job complete (played). Nothing reports the
	// target yet.
	require.NoError(t, env.CordonAsSUCJob(ctx, first))
	require.NoError(t, env.FinishJob(ctx, job, true))

	short := "the node has not reached the target (facts from the kubelet, NFD or GFD may lag; SUC retries on its own)"
	eventually(t, sucRetryDeadline, "SUC's completion write of "+first+" refused twice, short of the target", func() bool {
		writes := w.completionWrites(t, first)
		return len(writes) >= 2 && refused(writes[0]) && refused(writes[1])
	})
	den := w.completionWrites(t, first)[0]
	assert.Equal(t, testenv.SUCUser, den.Username())
	assert.Contains(t, strings.Split(den.Annotations[webhook.WebhookCompletions+"/reasons"], ","), string(gate.CodeUncordonBeforeProof))
	msg := den.ResponseStatus.Message
	assert.Contains(t, msg, "[UncordonBeforeProof] SUC completes Plan system-upgrade/"+w.plan.Name+" on node "+first+", but the node does not run the destination tuple of record v100-r580-canary-1")
	assert.Contains(t, msg, "driver "+testenv.Source.Driver+" (label nvidia.com/cuda.driver-version.full from GPU Feature Discovery), the record's target is "+testenv.Target.Driver)
	assert.Contains(t, msg, "kernel "+testenv.Source.Kernel+" (status.nodeInfo.kernelVersion), the record's target is "+testenv.Target.Kernel)
	assert.Contains(t, msg, short)
	n := getNode(t, first)
	assert.True(t, n.Spec.Unschedulable, "%s stays cordoned", first)
	assert.Empty(t, n.Labels[upgradev1.LabelPlanName(w.plan.Name)], "%s is not marked done", first)

	// SUC's cache says the node done (it edits its cached Node before the
	// write), so it tries the next node: refused while the first is short.
	eventually(t, sucRetryDeadline, "SUC tries to start "+second+"'s Job and the Job guard refuses it", func() bool {
		return len(w.jobDenials(t, second)) > 0
	})
	assert.Contains(t, w.jobDenials(t, second)[0].ResponseStatus.Message,
		"[PreviousNodeUnproven] node "+first+" finished its upgrade Job of Plan system-upgrade/"+w.plan.Name+" but does not run the destination tuple of record v100-r580-canary-1 yet")
	assert.False(t, running(jobFor(t, w.plan.Name, second)), "no pod of %s's Job can run", second)

	// The kubelet reports its new kernel and version (played, through
	// nodes/status as that kubelet); GFD's driver label still lags: the
	// refusal now names the driver alone.
	kubelet, err := env.KubeletClient(first)
	require.NoError(t, err)
	kn := getNode(t, first)
	kn.Status.NodeInfo.KernelVersion, kn.Status.NodeInfo.KubeletVersion = testenv.Target.Kernel, testenv.Target.RKE2
	require.NoError(t, kubelet.Status().Update(ctx, kn))
	kubeletMoved := time.Now()
	var driverOnly controlplane.AuditEvent
	eventually(t, sucRetryDeadline, "SUC's next completion write of "+first+" refused for the driver alone", func() bool {
		for _, e := range w.completionWrites(t, first) {
			if refused(e) && !e.StageTimestamp.Before(kubeletMoved) && !strings.Contains(e.ResponseStatus.Message, "kernel ") {
				driverOnly = e
				return true
			}
		}
		return false
	})
	assert.Contains(t, driverOnly.ResponseStatus.Message, "so it may not uncordon yet: driver "+testenv.Source.Driver+" (label nvidia.com/cuda.driver-version.full from GPU Feature Discovery), the record's target is "+testenv.Target.Driver+": the node has not reached the target")

	// The rest of the facts move, as nfd-master (NFD's kernel label, GFD's
	// driver label) would write them: from now on the proof decides, and it
	// is missing.
	moved := time.Now()
	require.NoError(t, env.MoveNodeTo(ctx, first, testenv.Target))
	var proofDenial controlplane.AuditEvent
	eventually(t, sucRetryDeadline, "SUC's next completion write of "+first+" refused for its proof", func() bool {
		for _, e := range w.completionWrites(t, first) {
			if refused(e) && !e.StageTimestamp.Before(moved) && strings.Contains(e.ResponseStatus.Message, "but is not proven") {
				proofDenial = e
				return true
			}
		}
		return false
	})
	assert.Contains(t, proofDenial.ResponseStatus.Message, "[UncordonBeforeProof] node "+first+" runs the destination tuple of Plan system-upgrade/"+w.plan.Name)
	assert.NotContains(t, proofDenial.ResponseStatus.Message, short)
	assert.True(t, getNode(t, first).Spec.Unschedulable, "%s stays cordoned", first)

	// The proof arrives (validator Ready, allocation check Succeeded, as the
	// kubelet writes them): SUC's own retry uncordons the node and marks it
	// done, and SUC moves on to the second node by itself.
	require.NoError(t, env.ProveUpgradedNode(ctx, first, time.Now()))
	eventually(t, sucRetryDeadline, "SUC uncordons "+first+" and labels it done", func() bool {
		n := getNode(t, first)
		return !n.Spec.Unschedulable && n.Labels[upgradev1.LabelPlanName(w.plan.Name)] == job.Labels[upgradev1.LabelPlanName(w.plan.Name)]
	})
	next, _ := w.started(t)
	assert.Equal(t, second, next)
}

// TestSUCJobHeldToMaintenanceWindows: with windows.maintenance configured,
// SUC's start of a GPU node's Job is held to them, whatever the Plan's own
// window (24/7 here) lets SUC do; a CPU node's Job is not touched; once a
// configured window is open, SUC's own retry starts the GPU node. The
// gate's webhook is restarted with each config.
func TestSUCJobHeldToMaintenanceWindows(t *testing.T) {
	needSUC(t)
	ctx := context.Background()
	restart := func(ws []upgradev1.TimeWindowSpec) { restartWithWindows(t, ws) }
	defer restart(nil)
	closed := closedWindow()
	restart([]upgradev1.TimeWindowSpec{closed})

	require.NoError(t, env.CreateNodes(ctx, []testenv.NodeSpec{v100Spec("win-v100-a", nil), {Name: "win-cpu-1", Tuple: testenv.Source, Zone: "zone-a"}}))
	alice, warnings := as(t, "alice")
	pa := sucPlan("win-a", "v100-r580", "win-v100-a") // spec.window: all week
	pc := sucPlan("win-cpu", "", "win-cpu-1")
	// A GPU Plan whose window lies within the configured ones: no warning.
	inside := sucPlan("win-inside", "v100-r580", "win-v100-a")
	inside.Spec.Window = &closed
	warnings.Take()
	require.NoError(t, alice.Create(ctx, inside, client.DryRunAll))
	assert.NotContains(t, strings.Join(warnings.Take(), "\n"), "outside every maintenance window")
	require.NoError(t, alice.Create(ctx, pa), "admitted: the window is SUC's to enforce, the gate's windows are held at the Job")
	assert.Contains(t, strings.Join(warnings.Take(), "\n"), "outside every maintenance window in the gate's config (windows.maintenance): SUC may start this Plan's nodes then",
		"the early, friendly answer at admission")
	require.NoError(t, alice.Create(ctx, pc))
	warnings.Take()
	for _, p := range []*upgradev1.Plan{pa, pc} {
		release(t, p)
	}

	stoppedAtTheJob(t, "win-a", "win-v100-a", gate.CodeOutsideWindow)
	msg := jobDenials(t, "win-a", "win-v100-a")[0].ResponseStatus.Message
	assert.Contains(t, msg, "Plan system-upgrade/win-a: [OutsideWindow] node win-v100-a's upgrade (SUC's Job) would start at ")
	next := time.Date(now.UTC().Year(), now.UTC().Month(), now.UTC().Day()+3, 0, 0, 0, 0, time.UTC)
	assert.Contains(t, msg, "the next opens at "+next.Format("Mon 2006-01-02 15:04 MST")+", time zone UTC (windows.maintenance[0]: ")

	// A CPU node's Job is not held to the windows.
	completeJob(t, "win-cpu", "win-cpu-1")
	assert.False(t, running(jobFor(t, "win-a", "win-v100-a")), "the GPU node is still held")

	// A configured window opens: SUC's own retry starts the GPU node.
	restart([]upgradev1.TimeWindowSpec{closed, *openWindow()})
	eventually(t, sucRetryDeadline, "SUC starts win-a's Job on win-v100-a once a window is open", func() bool {
		return running(jobFor(t, "win-a", "win-v100-a"))
	})
	var p upgradev1.Plan
	require.NoError(t, env.Admin.Get(ctx, client.ObjectKeyFromObject(pa), &p))
	assert.Equal(t, []string{"win-v100-a"}, p.Status.Applying)
}

// restartWithWindows restarts the gate's webhook with ws as its configured
// maintenance windows.
func restartWithWindows(t *testing.T, ws []upgradev1.TimeWindowSpec) {
	t.Helper()
	require.NoError(t, env.StopWebhook())
	env.Config.Windows.Maintenance = ws
	require.NoError(t, env.StartWebhook(context.Background()))
}

// closedWindow is a whole day three days from now: closed now, whatever the
// hour (the run is far shorter than a day).
func closedWindow() upgradev1.TimeWindowSpec {
	return upgradev1.TimeWindowSpec{Days: []upgradev1.Day{upgradev1.Days[(now.UTC().Weekday()+3)%7][2]}, StartTime: "00:00", EndTime: "23:59:59", TimeZone: "UTC"}
}
