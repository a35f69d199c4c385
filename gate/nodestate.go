package gate

import (
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
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

// OutOfServiceConfig is the `outOfService` section of the config
// (fleet.OutOfServiceConfig): node state reads it.
type OutOfServiceConfig = fleet.OutOfServiceConfig

// DefaultOutOfServiceConfig is fleet.DefaultOutOfServiceConfig.
func DefaultOutOfServiceConfig() OutOfServiceConfig { return fleet.DefaultOutOfServiceConfig() }

// AnnotationCordonHandover on a GPU Node hands a cordon someone else made
// over to the rollout: its value is the username of whoever writes it (the
// Node webhook refuses any other, CordonHandoverForged), and it counts only
// when that is not the rollout's requester.
const AnnotationCordonHandover = "gpu-upgrade-gate.io/cordon-handover"

// outTaint is the first configured out-of-service taint on n, "" for none.
func (c *Config) outTaint(n *corev1.Node) string {
	for _, t := range n.Spec.Taints {
		if slices.Contains(c.OutOfService.Taints, t.Key) {
			return t.Key
		}
	}
	return ""
}

// nodeDown: what the node object alone says takes it out (cordoned,
// NotReady, a configured out-of-service taint): worked out once per node
// object by the node index.
func (c *Config) nodeDown(n *corev1.Node) bool {
	return n.Spec.Unschedulable || !isReady(n) || c.outTaint(n) != ""
}

// downReasons names why the node object says it is out.
func (c *Config) downReasons(cl *Cluster, n *corev1.Node) []string {
	var why []string
	if n.Spec.Unschedulable {
		why = append(why, "cordoned by "+c.cordonHolderOf(cl, n).String())
	}
	if !isReady(n) {
		why = append(why, "NotReady")
	}
	if t := c.outTaint(n); t != "" {
		why = append(why, "taint "+t)
	}
	return why
}

// sucJobsFor are SUC's Jobs for the node, by the Jobs' own labels
// (fleet.View.SUCJobsFor). Read only.
func sucJobsFor(cl *Cluster, node string) []*batchv1.Job {
	return cl.fleetView().SUCJobsFor(node)
}

// jobRan: the Job was started (running, or it ran).
func jobRan(j *batchv1.Job) bool {
	return JobRuns(j.Spec) || j.Status.Active > 0 || j.Status.Succeeded > 0 || j.Status.Failed > 0
}

// jobLive: the Job was started and has neither completed nor failed: its
// node is being upgraded (the fleet view answers it once per Job:
// LiveJobs, LiveSUCJob).
func jobLive(j *batchv1.Job) bool {
	return jobRan(j) && jobCompletion(j).IsZero() && !jobFailed(j)
}

// cordonHolder is who cordoned a GPU node, as far as the facts say.
type cordonHolder struct {
	// actor names it for messages.
	actor string
	// suc: SUC's Job for the node (it cordons from the Job's Pod).
	suc bool
	// handedOver is the username that handed the cordon over
	// (AnnotationCordonHandover), "" for none.
	handedOver string
}

func (h cordonHolder) String() string { return h.actor }

// cordonHolderOf says who cordoned n: a health agent (its configured
// annotation or taint), the GPU Operator (a driver upgrade state in
// progress), SUC (a Job of a Plan for this node that ran, created no later
// than the cordon when the cordon is dated; or a recorded halt naming the
// node, whose failed upgrade SUC cordoned it for), the field manager of
// spec.unschedulable when the object carries managedFields, else someone
// other than SUC.
func (c *Config) cordonHolderOf(cl *Cluster, n *corev1.Node) cordonHolder {
	h := cordonHolder{handedOver: n.Annotations[AnnotationCordonHandover]}
	for _, a := range c.OutOfService.Annotations {
		if _, ok := n.Annotations[a]; ok {
			h.actor = "a health agent (annotation " + a + ")"
			return h
		}
	}
	if t := c.outTaint(n); t != "" {
		h.actor = "a health agent or operator (taint " + t + ")"
		return h
	}
	if fleet.HasDriverState(n) && !slices.Contains(DriverStatesNotOut, n.Labels[LabelDriverUpgradeState]) {
		h.actor = "the GPU Operator's driver upgrade (" + LabelDriverUpgradeState + "=" + n.Labels[LabelDriverUpgradeState] + ")"
		return h
	}
	cordoned := cordonTime(n)
	for _, j := range sucJobsFor(cl, n.Name) {
		if jobRan(j) && (cordoned.IsZero() || !j.CreationTimestamp.Time.After(cordoned)) {
			h.actor, h.suc = "SUC's Job "+j.Namespace+"/"+j.Name, true
			return h
		}
	}
	// A halt that names the node: its upgrade failed and the gate keeps it
	// cordoned until proven; the cordon is the failed rollout's even once
	// its Job is gone (a TTL deletes it), so its rollback may start.
	for _, key := range sortedKeys(cl.Halts.Halts) {
		if hl := cl.Halts.Halts[key]; hl.Node == n.Name {
			h.actor, h.suc = "SUC's failed upgrade of it (halt: "+hl.Signal+")", true
			return h
		}
	}
	if m := unschedulableManager(n); m != "" {
		h.actor = "field manager " + m + " (no SUC Job for the node ran before the cordon)"
		return h
	}
	h.actor = "someone other than SUC (no SUC Job for the node ran before the cordon)"
	return h
}

// cordonTime is when the node lifecycle controller saw the cordon (its
// unschedulable taint's timeAdded), zero when undated.
func cordonTime(n *corev1.Node) time.Time {
	for _, t := range n.Spec.Taints {
		if t.Key == TaintUnschedulable && t.TimeAdded != nil {
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

// NodeStatus is one GPU node's derived state and what put it there.
type NodeStatus struct {
	Node  string
	State NodeState
	// Why lists each fact that took it out, with the value seen.
	Why []string
}

// NodeStates derives the state of every GPU node (issue 22): the fleet
// view the rules read, spelled out for `check` and the docs.
func NodeStates(cfg *Config, cl *Cluster, now time.Time) []NodeStatus {
	idx, view := cl.nodeIndex(cfg), cl.fleetView()
	out := cfg.outNodes(cl, &outView{}, now, &Decision{})
	halted := map[string]string{}
	for _, h := range DetectHalts(cfg, cl, now) {
		halted[h.Node] = h.Signal
	}
	dests := map[string]bool{} // nodes at a stored Plan's destination
	for _, p := range cl.Plans {
		if dest, _ := planDestination(cl, p); dest != nil {
			rec := cl.Records[p.Annotations[AnnotationQualification]].Record
			for _, n := range nodesAt(cfg, cl, rec, dest) {
				dests[n.Name] = true
			}
		}
	}
	var states []NodeStatus
	for _, i := range idx.GPUNodes(cfg) {
		n := idx.Node(i)
		s := NodeStatus{Node: n.Name, State: StateServing}
		if o := out[n.Name]; o != nil {
			s.Why = o.why
			if o.later != nil {
				s.Why = append(slices.Clone(s.Why), o.later()...)
			}
		}
		switch {
		case halted[n.Name] != "":
			s.State, s.Why = StateFailed, append(s.Why, halted[n.Name])
		case view.LiveSUCJob(n.Name) != nil:
			s.State = StateUpgrading
		case dests[n.Name]:
			if pr := cfg.Prove(cl, n, now); pr.Proven() {
				s.State = StateProven
			} else if n.Spec.Unschedulable {
				s.State, s.Why = StateUnproven, append(s.Why, pr.Missing...)
			}
			if s.State == StateProven && len(s.Why) > 0 {
				s.State = StateOut
			}
		case len(s.Why) > 0:
			s.State = StateOut
		}
		states = append(states, s)
	}
	return states
}

// outNodes are the GPU nodes out now, each with why (unavailableIn's
// answer; the budget reads it).
func (c *Config) outNodes(cl *Cluster, v *outView, now time.Time, d *Decision) map[string]*outNode {
	return c.unavailableIn(cl, c.scanFleet(cl), now, d, *v)
}

// addOutFacts adds, to the budget's count, every GPU node out that the
// Plans' own facts did not name: down by its own object (cordoned for any
// reason, NotReady, an out-of-service taint), a live SUC Job for it
// (matched by the Job's labels, Plan or no Plan), or a tuple a stored
// forward Plan's record leaves half applied, or another requestor's
// NodeMaintenance for it.
func (c *Config) addOutFacts(cl *Cluster, fs *fleetScan, v outView, add func(n *corev1.Node, why string), down func(n *corev1.Node), has func(name string) bool) {
	idx := cl.nodeIndex(c)
	for _, n := range fs.down {
		if has(n.Name) {
			continue
		}
		if v.driverStep && fleet.HasDriverState(n) {
			continue // the driver states decide (a node waiting at this step does not count)
		}
		down(n)
	}
	for _, j := range cl.fleetView().LiveJobs() {
		node := j.Labels[upgradev1.LabelNode]
		if has(node) {
			continue
		}
		if n := idx.GPUByName(c, node); n != nil {
			add(n, "SUC Job "+j.Namespace+"/"+j.Name+" runs for it")
		}
	}
	for _, n := range c.halfApplied(cl) {
		if !has(n.Name) {
			add(n, "runs a tuple half way between a stored Plan's record's source and target")
		}
	}
	// Named even when another fact already counts the node: the cordon
	// the maintenance operator made reads as someone else's.
	for _, nm := range cl.NodeMaintenances {
		if !c.NodeMaintenance.counted(nm) {
			continue
		}
		if n := idx.GPUByName(c, nm.Node); n != nil {
			add(n, nm.Why())
		}
	}
}

// halfApplied are the GPU nodes of a stored forward Plan's record's
// hardware whose tuple is neither the record's source nor its target, with
// every component at one of the two (an upgrade stopped half way).
func (c *Config) halfApplied(cl *Cluster) []*corev1.Node {
	op, dcgm := clusterVersions(cl)
	idx := cl.nodeIndex(c)
	var out []*corev1.Node
	seen := map[*qualification.Record]bool{}
	for _, p := range cl.Plans {
		e := cl.Records[p.Annotations[AnnotationQualification]]
		if e.Err != nil || e.Record == nil || e.Record.Source == nil || seen[e.Record] || p.Annotations[AnnotationRollback] == "true" {
			continue
		}
		rec := e.Record
		seen[rec] = true
		hw := rec.NormalizedHardware()
		out = append(out, idx.GPUOfHardware(c, hw, func(f NodeFacts) bool {
			return betweenTuples(f.Tuple(op, dcgm), *rec.Source, rec.Target)
		})...)
	}
	return out
}

// betweenTuples: cur is neither src nor dst, each of its components is
// src's or dst's, and it is complete.
func betweenTuples(cur, src, dst qualification.Tuple) bool {
	if !complete(cur) || SameTuple(cur, src) || SameTuple(cur, dst) {
		return false
	}
	for i := range componentTable {
		s := &componentTable[i]
		if have := s.get(cur); !s.same(nil, have, s.get(src)) && !s.same(nil, have, s.get(dst)) {
			return false
		}
	}
	return true
}
