package fleet

import (
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// Every GPU node's rollout state (issue 22 item 2), worked out by the fleet
// view from facts alone: the node object, SUC's Jobs for it (matched by the
// Jobs' own labels), the stored Plans' records and the proof. Never from
// whether a Plan still selects the node, its kubernetes.io/hostname label,
// or whether its Plan still exists: a person may rewrite or delete each of
// those, and the node is no less out for it. The budget, RolloutInFlight,
// the proof rules and halt detection read this one view (docs/rollout.md).

// NodeState is a GPU node's derived rollout state.
type NodeState string

const (
	// StateServing: schedulable, Ready, no SUC Job, no driver upgrade in
	// progress, on a tuple no stored Plan leaves half applied.
	StateServing NodeState = "serving"
	// StateOut: taken out of service for any reason (cordoned, NotReady, a
	// configured out-of-service taint, a driver upgrade in progress, a tuple
	// half applied) with no upgrade of its own running.
	StateOut NodeState = "out"
	// StateUpgrading: an SUC Job for the node runs.
	StateUpgrading NodeState = "upgrading"
	// StateUnproven: runs a stored Plan's destination tuple, cordoned, not
	// proven yet.
	StateUnproven NodeState = "at-destination-unproven"
	// StateProven: runs a stored Plan's destination tuple and is proven.
	StateProven NodeState = "proven"
	// StateFailed: its SUC Job failed, its driver upgrade failed, a
	// GPU-health condition is unhealthy, or it was stopped half way and the
	// recovery timeout has passed.
	StateFailed NodeState = "failed"
)

// NodeStatus is one GPU node's derived state and what put it there.
type NodeStatus struct {
	Node  string
	State NodeState
	// Why lists each fact that took it out, with the value seen.
	Why []string
}

// AnnotationCordonHandover on a GPU Node hands a cordon someone else made
// over to the rollout: its value is the username of whoever writes it (the
// Node webhook refuses any other, CordonHandoverForged), and it counts only
// when that is not the rollout's requester.
const AnnotationCordonHandover = "gpu-upgrade-gate.io/cordon-handover"

// DriverUpgradeRequired is the driver upgrade state of a node the
// operator has queued but not yet touched: it still runs its workloads, so
// it is in flight (a rollout waits for it) but not out.
const DriverUpgradeRequired = "upgrade-required"

// DriverStatesNotOut are the driver upgrade states of a node that is not
// out for its upgrade: done, or queued by the operator and still serving.
// Every other state counts against the disruption budget.
var DriverStatesNotOut = []string{DriverUpgradeDone, DriverUpgradeRequired}

// OutTaint is the first configured out-of-service taint on n, "" for none.
func (o *OutOfServiceConfig) OutTaint(n *corev1.Node) string {
	for _, t := range n.Spec.Taints {
		if slices.Contains(o.Taints, t.Key) {
			return t.Key
		}
	}
	return ""
}

// NodeDown: what the node object alone says takes it out (cordoned,
// NotReady, a configured out-of-service taint): worked out once per node
// object by the node index.
func (o *OutOfServiceConfig) NodeDown(n *corev1.Node) bool {
	return n.Spec.Unschedulable || !IsReady(n) || o.OutTaint(n) != ""
}

// DownReasons names why the node object says it is out, o the configured
// out-of-service marks.
func (v *View) DownReasons(o *OutOfServiceConfig, n *corev1.Node) []string {
	var why []string
	if n.Spec.Unschedulable {
		why = append(why, "cordoned by "+v.CordonHolder(o, n).String())
	}
	if !IsReady(n) {
		why = append(why, "NotReady")
	}
	if t := o.OutTaint(n); t != "" {
		why = append(why, "taint "+t)
	}
	return why
}

// JobRuns says whether a Job's spec lets the Job controller start pods: SUC
// creates its Jobs with parallelism 0 and raises it to 1 once the node is in
// the Plan's status.applying. An unset parallelism defaults to 1.
func JobRuns(spec batchv1.JobSpec) bool {
	if spec.Suspend != nil && *spec.Suspend {
		return false
	}
	return spec.Parallelism == nil || *spec.Parallelism > 0
}

// JobRan: the Job was started (running, or it ran).
func JobRan(j *batchv1.Job) bool {
	return JobRuns(j.Spec) || j.Status.Active > 0 || j.Status.Succeeded > 0 || j.Status.Failed > 0
}

// CordonHolder is who cordoned a GPU node, as far as the facts say.
type CordonHolder struct {
	// Actor names it for messages.
	Actor string
	// SUC: SUC's Job for the node (it cordons from the Job's Pod).
	SUC bool
	// HandedOver is the username that handed the cordon over
	// (AnnotationCordonHandover), "" for none.
	HandedOver string
}

func (h CordonHolder) String() string { return h.Actor }

// CordonHolder says who cordoned n: a health agent (o's annotation or
// taint), the GPU Operator (a driver upgrade state in progress), SUC (a Job
// of a Plan for this node that ran, created no later than the cordon when
// the cordon is dated; or a halt of the view's halt record naming the
// node, whose failed upgrade SUC cordoned it for), the field manager of
// spec.unschedulable when the object carries managedFields, else someone
// other than SUC. The halts are the view's own (ViewInputs), so they are
// the ones it is keyed on.
func (v *View) CordonHolder(o *OutOfServiceConfig, n *corev1.Node) CordonHolder {
	halts := v.in.Halts
	h := CordonHolder{HandedOver: n.Annotations[AnnotationCordonHandover]}
	for _, a := range o.Annotations {
		if _, ok := n.Annotations[a]; ok {
			h.Actor = "a health agent (annotation " + a + ")"
			return h
		}
	}
	if t := o.OutTaint(n); t != "" {
		h.Actor = "a health agent or operator (taint " + t + ")"
		return h
	}
	if HasDriverState(n) && !slices.Contains(DriverStatesNotOut, n.Labels[LabelDriverUpgradeState]) {
		h.Actor = "the GPU Operator's driver upgrade (" + LabelDriverUpgradeState + "=" + n.Labels[LabelDriverUpgradeState] + ")"
		return h
	}
	cordoned := cordonTime(n)
	for _, j := range v.SUCJobsFor(n.Name) {
		if JobRan(j) && (cordoned.IsZero() || !j.CreationTimestamp.Time.After(cordoned)) {
			h.Actor, h.SUC = "SUC's Job "+j.Namespace+"/"+j.Name, true
			return h
		}
	}
	// A halt that names the node: its upgrade failed and the gate keeps it
	// cordoned until proven; the cordon is the failed rollout's even once
	// its Job is gone (a TTL deletes it), so its rollback may start.
	// The first by hardware key, when several do.
	first, named := "", false
	for key, hl := range halts {
		if hl.Node == n.Name && (!named || key < first) {
			first, named = key, true
		}
	}
	if hl := halts[first]; named {
		h.Actor, h.SUC = "SUC's failed upgrade of it (halt: "+hl.Signal+")", true
		return h
	}
	if m := unschedulableManager(n); m != "" {
		h.Actor = "field manager " + m + " (no SUC Job for the node ran before the cordon)"
		return h
	}
	h.Actor = "someone other than SUC (no SUC Job for the node ran before the cordon)"
	return h
}

// cordonTime is when the node lifecycle controller saw the cordon (its
// unschedulable taint's timeAdded), zero when undated.
func cordonTime(n *corev1.Node) time.Time {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeUnschedulable && t.TimeAdded != nil {
			return t.TimeAdded.Time
		}
	}
	return time.Time{}
}

// unschedulableManager is the field manager that owns spec.unschedulable,
// from the managedFields the object carries (the webhook's cache keeps
// only that entry, without its field set: StripNode).
func unschedulableManager(n *corev1.Node) string {
	for _, m := range n.ManagedFields {
		if m.FieldsV1 == nil || strings.Contains(m.FieldsV1.GetRawString(), `"f:unschedulable"`) {
			return m.Manager
		}
	}
	return ""
}
