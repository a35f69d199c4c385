package gate

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// DrainCheckConfig is the built-in check that SUC's drain of a pending GPU
// node can finish (issue 27): a drain that cannot evict a Pod fails (or
// waits until spec.drain.timeout) and SUC retries it with the node
// cordoned, for ever.
type DrainCheckConfig struct {
	// Deny refuses such a Plan write or Job start (DrainBlocked); by default
	// it is admitted with a warning naming each blocking Pod.
	Deny bool `json:"deny"`
}

// DrainFacts are what the drain check reads, live, for the pending nodes:
// the Pods on each node (by spec.nodeName) and every PodDisruptionBudget.
// Err says why a read failed: a warning says the check was not made, or,
// with drainCheck.deny, the write is refused (fail closed).
type DrainFacts struct {
	Pods map[string][]*corev1.Pod
	PDBs []*policyv1.PodDisruptionBudget
	Err  error
}

var pathDrain = field.NewPath("spec", "drain")

// drainChecked: a Plan write, or SUC's start of a node's Job, of a Plan
// that drains GPU nodes SUC would select.
func (r *PlanReview) drainChecked() bool {
	return (r.write || r.sucStep) && r.req.Plan != nil && r.req.Plan.Spec.Drain != nil && len(r.pending) > 0
}

// DrainNodes are the nodes whose Pods Decide reads (SetDrainFacts); none
// when the review does not check drains.
func (r *PlanReview) DrainNodes() []string {
	if !r.drainChecked() {
		return nil
	}
	return names(r.pending)
}

// SetDrainFacts gives the review what the adapter read for DrainNodes.
func (r *PlanReview) SetDrainFacts(f DrainFacts) { r.drainFacts = &f }

// DrainNodes are the nodes whose Pods the step's Decide reads.
func (s *SUCStep) DrainNodes() []string {
	if s.review == nil {
		return nil
	}
	return s.review.DrainNodes()
}

// SetDrainFacts gives the step what the adapter read for DrainNodes.
func (s *SUCStep) SetDrainFacts(f DrainFacts) {
	if s.review != nil {
		s.review.SetDrainFacts(f)
	}
}

// drainRule (Plans and SUC's Job start, review-level): each Pod on a
// pending node that SUC's `kubectl drain` (the flags SUC v0.20.1
// pkg/upgrade/job passes for spec.drain) could not remove is named.
// kubectl drain's semantics decide what blocks:
//   - a PodDisruptionBudget of the Pod with status.disruptionsAllowed 0
//     (unless spec.drain.disableEviction): every eviction is refused with
//     429 until the drain times out; an unready Pod the budget's
//     unhealthyPodEvictionPolicy lets go does not count;
//   - an emptyDir volume when the Plan turns deleteEmptydirData (or
//     deleteLocalData) off: kubectl drain refuses Pods with local storage
//     without --delete-emptydir-data, which SUC otherwise passes (emptyDir
//     data is scratch by definition: it is deleted with the Pod);
//   - a Pod no controller owns, without spec.drain.force;
//   - a DaemonSet's Pod when the Plan turns ignoreDaemonSets off.
//
// hostPath volumes and local PersistentVolumes do not stop a drain: their
// Pod is evicted and the data stays on the node, back with it after the
// upgrade (a local PV's Pod waits, unschedulable elsewhere, which is the
// workload's design, not a drain that cannot finish), so they are not
// named. Pods the drain skips (mirror, finished, being deleted, SUC's own,
// outside spec.drain.podSelector, DaemonSets' by default) never block.
func drainRule(rv review, f *findings, _ *Decision) {
	r, ok := rv.(*PlanReview)
	if !ok || !r.drainChecked() {
		return
	}
	drain := r.req.Plan.Spec.Drain
	facts := r.drainFacts
	if facts == nil {
		facts = &DrainFacts{Err: fmt.Errorf("not read for this review")}
	}
	var seen []string
	if facts.Err == nil {
		for _, n := range r.pending {
			for _, p := range facts.Pods[n.Name] {
				if why := drainBlockers(drain, p, facts.PDBs); len(why) > 0 {
					seen = append(seen, fmt.Sprintf("node %s: Pod %s/%s: %s", n.Name, p.Namespace, p.Name, strings.Join(why, ", ")))
				}
			}
		}
		if len(seen) == 0 {
			return
		}
	}
	b := drainBlocked(facts.Err, seen)
	if r.cfg.DrainCheck.Deny {
		f.add(b)
		return
	}
	f.warn("[%s] %s", b.Code, b.Err.Detail)
}

// drainBlocked builds every DrainBlocked blocker (and the warning made of
// it while drainCheck.deny is off).
func drainBlocked(err error, seen []string) Blocker {
	if err != nil {
		return forbidden(CodeDrainBlocked, "", pathDrain, "this Plan drains GPU nodes, and whether SUC's drain of them can finish cannot be checked: the Pods on them or the PodDisruptionBudgets cannot be read (%s); retry when the API server answers", qualification.Clip(err.Error()))
	}
	return forbidden(CodeDrainBlocked, "", pathDrain, "SUC's drain (kubectl drain) of a pending GPU node cannot finish, and SUC would retry it with the node cordoned: %s; let these Pods go first (raise or relax the PodDisruptionBudget, move the workload), or change spec.drain as named (drainCheck.deny makes this a refusal)",
		strings.Join(seen, "; "))
}

// drainBlockers says why kubectl drain, as SUC runs it for drain, cannot
// remove p; none when it can or skips it.
func drainBlockers(drain *upgradev1.DrainSpec, p *corev1.Pod, pdbs []*policyv1.PodDisruptionBudget) []string {
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return nil
	}
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return nil
	}
	if _, suc := p.Labels[upgradev1.LabelController]; suc {
		return nil // SUC's selector leaves its own Pods out
	}
	if drain.PodSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(drain.PodSelector)
		if err == nil && !sel.Matches(labels.Set(p.Labels)) {
			return nil // not drained (an invalid selector is the shape rule's)
		}
	}
	owner := metav1.GetControllerOf(p)
	if owner != nil && owner.Kind == "DaemonSet" {
		if drain.IgnoreDaemonSets == nil || *drain.IgnoreDaemonSets {
			return nil
		}
		return []string{"it is a DaemonSet's Pod and spec.drain.ignoreDaemonSets is false (kubectl drain refuses DaemonSet-managed Pods)"}
	}
	var why []string
	if owner == nil && !drain.Force {
		why = append(why, "no controller owns it and spec.drain.force is not set (kubectl drain refuses such Pods)")
	}
	if off := (drain.DeleteLocalData != nil && !*drain.DeleteLocalData) || (drain.DeleteEmptydirData != nil && !*drain.DeleteEmptydirData); off {
		for _, v := range p.Spec.Volumes {
			if v.EmptyDir != nil {
				why = append(why, fmt.Sprintf("it has emptyDir volume %s and spec.drain turns deleteEmptydirData off (kubectl drain refuses Pods with local storage without --delete-emptydir-data)", v.Name))
				break
			}
		}
	}
	// The eviction API ignores budgets for a Pod not running yet
	// (canIgnorePDB: Pending, as an unset phase reads).
	if running := p.Status.Phase != corev1.PodPending && p.Status.Phase != ""; running && !drain.DisableEviction {
		var matched []string
		for _, pdb := range pdbs {
			if pdb.Namespace != p.Namespace {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			matched = append(matched, pdb.Name)
			if pdb.Status.DisruptionsAllowed > 0 || evictableUnhealthy(p, pdb) {
				continue
			}
			why = append(why, fmt.Sprintf("PodDisruptionBudget %s/%s allows no disruption (status.disruptionsAllowed 0, currentHealthy %d, desiredHealthy %d), so its eviction is refused until the drain times out",
				pdb.Namespace, pdb.Name, pdb.Status.CurrentHealthy, pdb.Status.DesiredHealthy))
		}
		// The eviction API refuses any running Pod more than one budget
		// covers, whatever they allow (pkg/registry/core/pod/storage/eviction.go).
		if len(matched) > 1 {
			why = append(why, fmt.Sprintf("%d PodDisruptionBudgets cover it (%s), and the eviction API refuses a Pod more than one budget covers, so the drain never finishes",
				len(matched), strings.Join(matched, ", ")))
		}
	}
	return why
}

// evictableUnhealthy: the eviction API lets an unready Pod go under a
// budget that allows no disruption when the budget's
// unhealthyPodEvictionPolicy is AlwaysAllow, or (IfHealthyBudget, the
// default) while the budget is met (k8s.io/kubernetes
// pkg/registry/core/pod/storage/eviction.go).
func evictableUnhealthy(p *corev1.Pod, pdb *policyv1.PodDisruptionBudget) bool {
	if slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	}) {
		return false
	}
	if pol := pdb.Spec.UnhealthyPodEvictionPolicy; pol != nil && *pol == policyv1.AlwaysAllow {
		return true
	}
	return pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.ObservedGeneration >= pdb.Generation
}
