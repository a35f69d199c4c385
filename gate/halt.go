package gate

import (
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Halt is a failure of a node moving to a destination tuple, for its
// hardware: what stops the line (issue 12 item 3). DetectHalts finds the
// signals; keeping them (so a halt outlives its signal) and clearing them
// belong to the leader-elected loop and the halt record, not to the engine.
type Halt struct {
	// Hardware is the record's hardware, sorted.
	Hardware []string `json:"hardware"`
	Node     string   `json:"node"`
	// Signal says what failed, with the value seen.
	Signal string `json:"signal"`
	// SeenAt is the signal's own timestamp when it has one (a Job's Failed
	// condition, a node condition's transition), else the time it was seen.
	SeenAt time.Time `json:"seenAt"`
	Plan   string    `json:"plan"`
	Record string    `json:"record"`
}

// HardwareKey is the halt's key: one halt per hardware, in a form a
// ConfigMap key accepts.
func (h Halt) HardwareKey() string { return HardwareKey(h.Hardware) }

// HardwareKey spells an identity set as a ConfigMap key.
func HardwareKey(hw []string) string {
	return strings.NewReplacer(":", "_", "/", "_").Replace(strings.Join(hw, "."))
}

// DetectHalts lists, per GPU node that a forward GPU Plan moves to its
// record's target, the failure signals it shows now: its SUC Job for that
// Plan failed; the GPU Operator marked its driver upgrade failed; a
// GPU-health condition is unhealthy; it runs a tuple that is neither the
// record's source nor its target (half applied). Rollback Plans are the way
// out and never halt. The first signal per hardware wins, in node order.
func DetectHalts(cfg *Config, cl *Cluster, now time.Time) []Halt {
	var out []Halt
	seen := map[string]bool{}
	op, dcgm := clusterVersions(cl)
	for i, p := range cl.Plans {
		sel, err := cl.planSelector(i)
		e, ok := cl.Records[p.Annotations[AnnotationQualification]]
		if err != nil || !ok || e.Err != nil || e.Record == nil || p.Annotations[AnnotationRollback] == "true" {
			continue
		}
		rec := e.Record
		hw := rec.NormalizedHardware()
		if seen[HardwareKey(hw)] {
			continue
		}
		var nodes []*corev1.Node
		for _, n := range cl.Nodes {
			if sel.selects(n) && cfg.IsGPUNode(n) && slices.Equal(cfg.FactsOf(n).Identities, hw) {
				nodes = append(nodes, n)
			}
		}
		slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
		for _, n := range nodes {
			signal, at := haltSignal(cfg, cl, p, rec, n, cfg.FactsOf(n).current(op, dcgm), now)
			if signal == "" {
				continue
			}
			out = append(out, Halt{Hardware: hw, Node: n.Name, Signal: signal, SeenAt: at, Plan: p.Namespace + "/" + p.Name, Record: rec.ID})
			seen[HardwareKey(hw)] = true
			break
		}
	}
	return out
}

// haltSignal is the first failure the node shows, "" for none.
func haltSignal(cfg *Config, cl *Cluster, p *upgradev1.Plan, rec *qualification.Record, n *corev1.Node, cur qualification.Tuple, now time.Time) (string, time.Time) {
	for _, j := range cl.Proof.UpgradeJobs {
		if j.Labels[upgradev1.LabelNode] != n.Name || j.Labels[upgradev1.LabelPlan] != p.Name || j.Namespace != p.Namespace {
			continue
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				return fmt.Sprintf("SUC Job %s/%s failed (%s)", j.Namespace, j.Name, orNone(c.Reason)), c.LastTransitionTime.Time
			}
		}
	}
	if s := n.Labels[LabelDriverUpgradeState]; s == "upgrade-failed" {
		return fmt.Sprintf("label %s=%s", LabelDriverUpgradeState, s), now
	}
	for _, h := range cfg.Proof.HealthConditions {
		if c := condition(n, corev1.NodeConditionType(h.Type)); c.Status == h.UnhealthyStatus {
			return fmt.Sprintf("condition %s %s", h.Type, c.Status), c.LastTransitionTime.Time
		}
	}
	if rec.Source != nil && !SameTuple(cur, *rec.Source) && !SameTuple(cur, rec.Target) && complete(cur) {
		return fmt.Sprintf("tuple half applied: neither the record's source nor its target (%s)", strings.Join(tupleDiff(cur, rec.Target, false), ", ")), now
	}
	return "", time.Time{}
}

// complete: every component is known (a missing fact is FactsMissing's
// business, not a half-applied tuple).
func complete(t qualification.Tuple) bool {
	for i := range componentTable {
		if strings.TrimSpace(componentTable[i].get(t)) == "" {
			return false
		}
	}
	return true
}
