//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
)

// eventsAbout lists the Events about obj the way `kubectl describe` finds
// them: core/v1 Events whose involvedObject is obj, by uid.
func eventsAbout(t *testing.T, namespace string, uid types.UID, reason string) []corev1.Event {
	t.Helper()
	var list corev1.EventList
	require.NoError(t, env.Admin.List(context.Background(), &list, client.InNamespace(namespace),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("involvedObject.uid", string(uid))}))
	var out []corev1.Event
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// TestHeldJobEventOnPlan: when the per-node guard pauses a node's Job, the
// Plan and the Node get one Warning Event naming the code and what to do,
// written by the gate as the chart's ServiceAccount (its events-only RBAC),
// and SUC's retries add none.
func TestHeldJobEventOnPlan(t *testing.T) {
	needSUC(t)
	ctx := context.Background()
	require.NoError(t, env.CreateNodes(ctx, []testenv.NodeSpec{v100Spec("ev-v100-a", nil)}))
	alice, _ := as(t, "alice")
	p := sucPlan("ev-a", "v100-r580", "ev-v100-a")
	require.NoError(t, alice.Create(ctx, p))
	holder := testenv.Holder("ev-train", "ev-v100-a")
	require.NoError(t, env.Admin.Create(ctx, holder))
	release(t, p)

	stoppedAtTheJob(t, "ev-a", "ev-v100-a", gate.CodeGPUHolders)
	var plan upgradev1.Plan
	require.NoError(t, env.Admin.Get(ctx, client.ObjectKeyFromObject(p), &plan))
	var node corev1.Node
	require.NoError(t, env.Admin.Get(ctx, types.NamespacedName{Name: "ev-v100-a"}, &node))
	eventually(t, 30*time.Second, "the gate's Event on the Plan and on the Node", func() bool {
		return len(eventsAbout(t, plan.Namespace, plan.UID, string(gate.CodeGPUHolders))) > 0 &&
			len(eventsAbout(t, metav1.NamespaceDefault, node.UID, string(gate.CodeGPUHolders))) > 0
	})
	// SUC keeps retrying; each retry is denied again.
	seen := len(jobDenials(t, "ev-a", "ev-v100-a"))
	eventually(t, 90*time.Second, "SUC retries twice more", func() bool { return len(jobDenials(t, "ev-a", "ev-v100-a")) >= seen+2 })
	time.Sleep(2 * time.Second) // any Event of those retries would be written by now

	for _, c := range []struct {
		what      string
		namespace string
		uid       types.UID
		related   string
	}{{"Plan " + plan.Name, plan.Namespace, plan.UID, "ev-v100-a"}, {"Node " + node.Name, metav1.NamespaceDefault, node.UID, plan.Name}} {
		evs := eventsAbout(t, c.namespace, c.uid, string(gate.CodeGPUHolders))
		require.Len(t, evs, 1, "%s: one Event, not one per retry (%d denials so far)", c.what, len(jobDenials(t, "ev-a", "ev-v100-a")))
		e := evs[0]
		assert.Equal(t, corev1.EventTypeWarning, e.Type, c.what)
		assert.LessOrEqual(t, e.Count, int32(1), "%s: never counted up", c.what)
		assert.Nil(t, e.Series, "%s: no series of repeats", c.what)
		assert.Equal(t, "gpu-upgrade-gate", e.ReportingController, c.what)
		assert.Equal(t, "StartUpgrade", e.Action, c.what)
		assert.Contains(t, e.Message, "[GPUHolders] node ev-v100-a runs 1 GPU holder(s): Pod ml/ev-train", c.what)
		assert.Contains(t, e.Message, "stop or migrate them", c.what, "says what to do")
		require.NotNil(t, e.Related, c.what)
		assert.Equal(t, c.related, e.Related.Name, c.what)
	}

	// The cause goes; the node starts, and nothing more is told.
	require.NoError(t, env.Admin.Delete(ctx, holder, client.GracePeriodSeconds(0)))
	completeUpgrade(t, "ev-a", "ev-v100-a")
	assert.Len(t, eventsAbout(t, plan.Namespace, plan.UID, string(gate.CodeGPUHolders)), 1)
}
