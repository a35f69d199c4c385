package webhook

import (
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// Holding a node's step (SUC's Job start, its completion write) is silent
// for whoever watches the Plan: SUC only logs the denial and retries. A
// Warning Event on the Plan and on the Node names the code and what to do,
// so `kubectl describe plan` shows why the rollout waits. SUC retries every
// few seconds, so each (Plan, node, code) is told once per holdEventEvery,
// and all Events together are rate-limited: the gate never floods the API
// server, whatever SUC does.
const (
	holdEventEvery = time.Hour
	// maxHoldKeys bounds the memory of what was told; past it a new key
	// waits until an old one is older than holdEventEvery.
	maxHoldKeys = 4096
	// Events per second, and burst, over every key.
	holdEventQPS, holdEventBurst = 1, 20
	// maxEventNote is the events.k8s.io/v1 limit on an Event's note.
	maxEventNote = 1024
)

var holdEventsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "gpu_upgrade_gate_events_total",
	Help: "Events about a held node step by code and outcome: emitted, repeat (told within the hour), dropped (rate limit or memory bound).",
}, []string{"code", "outcome"})

func init() { register(holdEventsTotal) }

// holdKey is what one Event is about.
type holdKey struct {
	namespace, plan, node string
	code                  gate.Code
}

// holdEvents writes the Events, deduplicated and rate-limited.
type holdEvents struct {
	rec     events.EventRecorder
	now     func() time.Time
	limiter flowcontrol.RateLimiter
	mu      sync.Mutex
	told    map[holdKey]time.Time
}

func newHoldEvents(rec events.EventRecorder, now func() time.Time) *holdEvents {
	return &holdEvents{rec: rec, now: now, told: map[holdKey]time.Time{},
		limiter: flowcontrol.NewTokenBucketRateLimiter(holdEventQPS, holdEventBurst)}
}

// held tells, for each code of a denial of node's step, the Plan (regarding
// it, the Node related) and the Node (regarding it, the Plan related).
// action says what was held, e.g. "StartUpgrade".
func (h *holdEvents) held(action string, plan *upgradev1.Plan, node *corev1.Node, d gate.Decision) {
	if h == nil || d.Allowed || node == nil {
		return
	}
	seen := map[gate.Code]bool{}
	for _, b := range d.Blockers {
		if seen[b.Code] {
			continue
		}
		seen[b.Code] = true
		key := holdKey{node: node.Name, code: b.Code}
		if plan != nil {
			key.namespace, key.plan = plan.Namespace, plan.Name
		}
		outcome := h.admit(key)
		holdEventsTotal.WithLabelValues(string(b.Code), outcome).Inc()
		if outcome != "emitted" {
			continue
		}
		note := clipNote("gpu-upgrade-gate holds node " + node.Name + ": " + b.Message())
		var related runtime.Object
		if plan != nil {
			h.rec.Eventf(plan, node, corev1.EventTypeWarning, string(b.Code), action, "%s", note)
			related = plan
		}
		h.rec.Eventf(node, related, corev1.EventTypeWarning, string(b.Code), action, "%s", note)
	}
}

// admit says whether key may be told now: "emitted", "repeat" or "dropped".
func (h *holdEvents) admit(key holdKey) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	if at, ok := h.told[key]; ok && now.Sub(at) < holdEventEvery {
		return "repeat"
	}
	if len(h.told) >= maxHoldKeys {
		for k, at := range h.told {
			if now.Sub(at) >= holdEventEvery {
				delete(h.told, k)
			}
		}
		if len(h.told) >= maxHoldKeys {
			return "dropped"
		}
	}
	if !h.limiter.TryAccept() {
		return "dropped"
	}
	h.told[key] = now
	return "emitted"
}

// clipNote keeps a note within the API's limit, on a rune boundary.
func clipNote(s string) string {
	if len(s) <= maxEventNote {
		return s
	}
	cut := maxEventNote - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
