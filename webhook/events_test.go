package webhook

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/flowcontrol"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// told records the Events as the recorder receives them (the e2e test
// TestHeldJobEventOnPlan writes them to a real API server).
type told struct {
	mu  sync.Mutex
	got []string
}

func (r *told) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name := func(o runtime.Object) string {
		switch o := o.(type) {
		case *upgradev1.Plan:
			return "Plan " + o.Namespace + "/" + o.Name
		case *corev1.Node:
			return "Node " + o.Name
		}
		return "-"
	}
	r.got = append(r.got, fmt.Sprintf("%s %s %s %s (related %s): %s", name(regarding), eventtype, reason, action, name(related), fmt.Sprintf(note, args...)))
}

func (r *told) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

func heldDecision(codes ...gate.Code) gate.Decision {
	d := gate.Decision{Object: "Job system-upgrade/apply-gpu-on-gpu-1"}
	for _, c := range codes {
		d.Blockers = append(d.Blockers, gate.Blocker{Code: c, Node: "gpu-1", Plan: "system-upgrade/gpu",
			Err: field.Forbidden(field.NewPath("spec"), "node gpu-1 is held; do this")})
	}
	return d
}

func TestHoldEvents(t *testing.T) {
	plan := &upgradev1.Plan{ObjectMeta: metav1.ObjectMeta{Namespace: "system-upgrade", Name: "gpu"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}}
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-2"}}
	setup := func() (*holdEvents, *told, *time.Time) {
		rec, now := &told{}, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		return newHoldEvents(rec, func() time.Time { return now }), rec, &now
	}
	t.Run("SUC's retries are told once, on the Plan and on the Node", func(t *testing.T) {
		h, rec, _ := setup()
		for range 20 {
			h.held("StartUpgrade", plan, node, heldDecision(gate.CodeGPUHolders))
		}
		got := rec.events()
		require.Len(t, got, 2, "%v", got)
		assert.Equal(t, "Plan system-upgrade/gpu Warning GPUHolders StartUpgrade (related Node gpu-1): gpu-upgrade-gate holds node gpu-1: Plan system-upgrade/gpu: [GPUHolders] node gpu-1 is held; do this", got[0])
		assert.True(t, strings.HasPrefix(got[1], "Node gpu-1 Warning GPUHolders StartUpgrade (related Plan system-upgrade/gpu)"), got[1])
	})
	t.Run("told again after the window", func(t *testing.T) {
		h, rec, now := setup()
		h.held("StartUpgrade", plan, node, heldDecision(gate.CodeGPUHolders))
		*now = now.Add(holdEventEvery - time.Second)
		h.held("StartUpgrade", plan, node, heldDecision(gate.CodeGPUHolders))
		assert.Len(t, rec.events(), 2)
		*now = now.Add(time.Second)
		h.held("StartUpgrade", plan, node, heldDecision(gate.CodeGPUHolders))
		assert.Len(t, rec.events(), 4)
	})
	t.Run("each code and each node is its own Event; a code twice in one denial once", func(t *testing.T) {
		h, rec, _ := setup()
		h.held("StartUpgrade", plan, node, heldDecision(gate.CodeGPUHolders, gate.CodeGPUHolders, gate.CodePreviousNodeUnproven))
		h.held("StartUpgrade", plan, other, heldDecision(gate.CodeGPUHolders))
		assert.Len(t, rec.events(), 6, "%v", rec.events())
	})
	t.Run("an allowed decision tells nothing", func(t *testing.T) {
		h, rec, _ := setup()
		h.held("StartUpgrade", plan, node, gate.Decision{Allowed: true})
		var none *holdEvents
		none.held("StartUpgrade", plan, node, heldDecision(gate.CodeGPUHolders)) // no recorder: no panic
		assert.Empty(t, rec.events())
	})
	t.Run("without a Plan, the Node alone", func(t *testing.T) {
		h, rec, _ := setup()
		h.held("CompleteUpgrade", nil, node, heldDecision(gate.CodeUncordonBeforeProof))
		require.Len(t, rec.events(), 1)
		assert.Contains(t, rec.events()[0], "Node gpu-1 Warning UncordonBeforeProof CompleteUpgrade (related -)")
	})
	t.Run("rate-limited over all keys; a dropped key is told on a later retry", func(t *testing.T) {
		h, rec, _ := setup()
		h.limiter = flowcontrol.NewFakeNeverRateLimiter()
		h.held("StartUpgrade", plan, node, heldDecision(gate.CodeGPUHolders))
		assert.Empty(t, rec.events())
		h.limiter = flowcontrol.NewFakeAlwaysRateLimiter()
		h.held("StartUpgrade", plan, node, heldDecision(gate.CodeGPUHolders))
		assert.Len(t, rec.events(), 2)
	})
	t.Run("the memory of what was told is bounded", func(t *testing.T) {
		h, rec, now := setup()
		h.limiter = flowcontrol.NewFakeAlwaysRateLimiter()
		for i := range maxHoldKeys + 10 {
			h.held("StartUpgrade", nil, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gpu-%d", i)}}, heldDecision(gate.CodeGPUHolders))
		}
		assert.Len(t, h.told, maxHoldKeys)
		assert.Len(t, rec.events(), maxHoldKeys, "past the bound, new keys wait")
		*now = now.Add(holdEventEvery)
		h.held("StartUpgrade", nil, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-late"}}, heldDecision(gate.CodeGPUHolders))
		assert.Len(t, rec.events(), maxHoldKeys+1, "expired keys make room")
		assert.Len(t, h.told, 1)
	})
}

func TestClipNote(t *testing.T) {
	long := strings.Repeat("é", maxEventNote)
	got := clipNote(long)
	assert.LessOrEqual(t, len(got), maxEventNote)
	assert.True(t, strings.HasSuffix(got, "..."))
	assert.True(t, strings.HasPrefix(long, strings.TrimSuffix(got, "...")), "cut on a rune boundary")
	assert.Equal(t, "short", clipNote("short"))
}
