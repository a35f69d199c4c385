//go:build e2e

package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/controlplane"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// label is the value of a metric's label.
func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// patchNode applies a merge patch as the given client.
func patchNode(c client.Client, name, patch string) error {
	n := &corev1.Node{}
	n.Name = name
	return c.Patch(context.Background(), n, client.RawPatch(types.MergePatchType, []byte(patch)))
}

func TestNodeReasonCodes(t *testing.T) {
	alice, _ := as(t, "alice")
	// gpu-v100-mode runs pod-hami, uncordoned.
	requireDenied(t, patchNode(alice, "gpu-v100-mode", `{"metadata":{"labels":{"kube-dc.com/gpu.expected-workload-mode":"vm-passthrough"}}}`), gate.CodeModeChangeNotCordoned)

	require.NoError(t, patchNode(env.Admin, "gpu-v100-mode", `{"spec":{"unschedulable":true}}`))
	requireDenied(t, patchNode(alice, "gpu-v100-mode", `{"metadata":{"labels":{"kube-dc.com/gpu.expected-workload-mode":"vm-vgpu"}}}`), gate.CodeModeUnsupported)
	requireDenied(t, patchNode(alice, "gpu-v100-mode", `{"metadata":{"labels":{"kube-dc.com/gpu.workload-mode":"vm-passthrough","kube-dc.com/gpu.expected-workload-mode":"vm-passthrough"}}}`), gate.CodeModeLabelsInconsistent)
	// The safe neighbour: cordoned, no holders, a consistent triple.
	require.NoError(t, patchNode(alice, "gpu-v100-mode", `{"metadata":{"labels":{"kube-dc.com/gpu.expected-workload-mode":"vm-passthrough"}}}`))
	// Mid-transition (active pod-hami, expected vm-passthrough): no uncordon.
	requireDenied(t, patchNode(alice, "gpu-v100-mode", `{"spec":{"unschedulable":false}}`), gate.CodeUncordonDuringTransition)
	require.NoError(t, patchNode(alice, "gpu-v100-mode", `{"metadata":{"labels":{"kube-dc.com/gpu.workload-mode":"vm-passthrough","nvidia.com/gpu.workload.config":"vm-passthrough"}}}`))
	require.NoError(t, patchNode(alice, "gpu-v100-mode", `{"spec":{"unschedulable":false}}`), "transition done: uncordon is fine")

	// A mode change on a node with a GPU holder.
	require.NoError(t, patchNode(env.Admin, "gpu-v100-holder", `{"spec":{"unschedulable":true}}`))
	defer patchNode(env.Admin, "gpu-v100-holder", `{"spec":{"unschedulable":false}}`)
	requireDenied(t, patchNode(alice, "gpu-v100-holder", `{"metadata":{"labels":{"kube-dc.com/gpu.workload-mode":"pod-hami"}}}`), gate.CodeGPUHolders)
}

func TestNodeLabelPullsNodeIntoPlan(t *testing.T) {
	ctx := context.Background()
	alice, _ := as(t, "alice")
	wave := plan("label-wave", "v100-r580")
	wave.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"gpu-wave": "next"}}
	require.NoError(t, alice.Create(ctx, wave))
	defer removePlan(t, wave)

	// The gate's Plan cache sees the new Plan a moment after its create:
	// until then the label is no pull into a Plan (a dry run, so nothing
	// is written meanwhile).
	eventuallyWrite(t, func() error {
		n := &corev1.Node{}
		n.Name = "gpu-v100-01"
		return alice.Patch(ctx, n, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"gpu-wave":"next"}}}`)), client.DryRunAll)
	}, gate.CodeMovedByMissing)
	// Who pulls a node into a Plan names themselves (MovedByMissing).
	requireDenied(t, patchNode(alice, "gpu-v100-01", `{"metadata":{"labels":{"gpu-wave":"next"}}}`), gate.CodeMovedByMissing)
	requireDenied(t, patchNode(alice, "gpu-v100-01", `{"metadata":{"labels":{"gpu-wave":"next"},"annotations":{"gpu-upgrade-gate.io/moved-by":"bob"}}}`), gate.CodeNodeAttestationForged)
	require.NoError(t, patchNode(alice, "gpu-v100-01", `{"metadata":{"labels":{"gpu-wave":"next"},"annotations":{"gpu-upgrade-gate.io/moved-by":"alice"}}}`), "one canary is fine")
	defer patchNode(env.Admin, "gpu-v100-01", `{"metadata":{"labels":{"gpu-wave":null}}}`)
	err := patchNode(alice, "gpu-h200-01", `{"metadata":{"labels":{"gpu-wave":"next"},"annotations":{"gpu-upgrade-gate.io/moved-by":"alice"}}}`)
	requireDenied(t, err, gate.CodeHardwareNotQualified)
	assert.Contains(t, err.Error(), "Plan system-upgrade/label-wave: [HardwareNotQualified]")
	// Opting a node out of the Plan is always allowed.
	require.NoError(t, patchNode(alice, "gpu-h200-01", `{"metadata":{"labels":{"gpu-wave":"next","plan.upgrade.cattle.io/label-wave":"disabled"}}}`))
	var p upgradev1.Plan
	require.NoError(t, env.Admin.Get(ctx, client.ObjectKeyFromObject(wave), &p))
}

// TestMatchConditions: kubelet writes and cordons never reach the webhook.
// It counts only its own writes' reviews, from the API server's audit log
// (ownWrites), not the webhook's request counter: a real SUC still working
// on an earlier test's Plan writes Nodes too, and once moved the count by
// one in CI.
func TestMatchConditions(t *testing.T) {
	const kubeletUser = "system:node:gpu-v100-02"
	kubelet, err := client.New(env.CP.ConfigFor(kubeletUser, "system:nodes", "system:authenticated"), client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	alice, _ := as(t, "alice")
	own := ownWrites{since: time.Now(), resources: []string{"nodes"}, users: []string{kubeletUser, "alice"}, names: []string{"gpu-v100-02", "cpu-01"}}
	reviewed := func(writes int) int { return own.reviews(t, webhook.WebhookNodes, writes) }
	require.NoError(t, patchNode(kubelet, "gpu-v100-02", `{"metadata":{"labels":{"nvidia.com/gpu.workload.config":"vm-vgpu"}}}`), "the kubelet's own label write is not reviewed, even one the gate would deny")
	require.NoError(t, patchNode(alice, "gpu-v100-02", `{"spec":{"unschedulable":true}}`), "a cordon is not reviewed")
	require.NoError(t, patchNode(alice, "gpu-v100-02", `{"metadata":{"annotations":{"note":"annotations are not reviewed"}}}`))
	require.NoError(t, patchNode(alice, "cpu-01", `{"metadata":{"labels":{"team":"ml"}}}`), "non-GPU nodes are not reviewed")
	assert.Equal(t, 0, reviewed(4), "none of these may reach the webhook")

	require.NoError(t, patchNode(alice, "gpu-v100-02", `{"metadata":{"labels":{"team":"ml"}}}`))
	assert.Equal(t, 1, reviewed(5), "a label change on a GPU node by a person is reviewed")
	require.NoError(t, patchNode(alice, "gpu-v100-02", `{"spec":{"unschedulable":false}}`))
	assert.Equal(t, 2, reviewed(6), "an uncordon is reviewed")
}

// ownWrites are a test's own writes (create, update, patch) as the API
// server's audit log holds them: received since `since`, by one of users
// (none: any), to an object named one of names of one of resources
// ("nodes", "nodes/status", "installplans/status": a subresource only where
// named). Tests count the reviews of their own writes, not the webhook's
// request counter, which every writer in the API server moves (a real SUC
// still working on an earlier test's Plan writes Nodes too).
type ownWrites struct {
	since                   time.Time
	resources, users, names []string
}

func (w ownWrites) match(e controlplane.AuditEvent) bool {
	if e.Stage != "ResponseComplete" || e.ObjectRef == nil || !slices.Contains([]string{"create", "update", "patch"}, e.Verb) ||
		// The audit log's timestamps are in microseconds.
		e.RequestReceivedTimestamp.Before(w.since.Truncate(time.Microsecond)) {
		return false
	}
	resource := e.ObjectRef.Resource
	if e.ObjectRef.Subresource != "" {
		resource += "/" + e.ObjectRef.Subresource
	}
	return slices.Contains(w.resources, resource) && slices.Contains(w.names, e.ObjectRef.Name) && (w.users == nil || slices.Contains(w.users, e.Username()))
}

// reviews waits until the audit log holds the test's writes, exactly
// `writes` of them (the API server writes an event after it answered), and
// counts those the webhook named reviewed: its audit annotation, on the
// writes it allowed and those it denied alike.
func (w ownWrites) reviews(t *testing.T, webhookName string, writes int) int {
	t.Helper()
	var seen, reviewed int
	require.Eventually(t, func() bool {
		events, err := env.CP.AuditEvents()
		require.NoError(t, err)
		seen, reviewed = 0, 0
		for _, e := range events {
			if !w.match(e) {
				continue
			}
			seen++
			if reviewedBy(e, webhookName) {
				reviewed++
			}
		}
		return seen >= writes
	}, 15*time.Second, 50*time.Millisecond, "the audit log never held the test's %d writes", writes)
	assert.Equal(t, writes, seen, "the test's own writes")
	return reviewed
}
