package gate

import (
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Node state is package fleet's (fleet/nodestate.go): the names gate reads
// it by, and what still reads gate's Cluster: the budget's out facts and
// the states spelled out for `check`, whose proofs and halts depend on the
// review's time.

// NodeState is a GPU node's derived rollout state (fleet.NodeState).
type NodeState = fleet.NodeState

// The node states (fleet's).
const (
	StateServing   = fleet.StateServing
	StateOut       = fleet.StateOut
	StateUpgrading = fleet.StateUpgrading
	StateUnproven  = fleet.StateUnproven
	StateProven    = fleet.StateProven
	StateFailed    = fleet.StateFailed
)

// NodeStatus is one GPU node's derived state and what put it there.
type NodeStatus = fleet.NodeStatus

// OutOfServiceConfig is the `outOfService` section of the config
// (fleet.OutOfServiceConfig): node state reads it.
type OutOfServiceConfig = fleet.OutOfServiceConfig

// DefaultOutOfServiceConfig is fleet.DefaultOutOfServiceConfig.
func DefaultOutOfServiceConfig() OutOfServiceConfig { return fleet.DefaultOutOfServiceConfig() }

// AnnotationCordonHandover hands a cordon over to the rollout
// (fleet.AnnotationCordonHandover).
const AnnotationCordonHandover = fleet.AnnotationCordonHandover

// nodeDown: what the node object alone says takes it out
// (fleet.OutOfServiceConfig.NodeDown).
func (c *Config) nodeDown(n *corev1.Node) bool { return c.OutOfService.NodeDown(n) }

// downReasons names why the node object says it is out.
func (c *Config) downReasons(cl *Cluster, n *corev1.Node) []string {
	return cl.fleetView().DownReasons(&c.OutOfService, n)
}

// sucJobsFor are SUC's Jobs for the node, by the Jobs' own labels
// (fleet.View.SUCJobsFor). Read only.
func sucJobsFor(cl *Cluster, node string) []*batchv1.Job {
	return cl.fleetView().SUCJobsFor(node)
}

// jobRan: the Job was started (fleet.JobRan).
func jobRan(j *batchv1.Job) bool { return fleet.JobRan(j) }

// jobLive: the Job was started and has neither completed nor failed: its
// node is being upgraded (the fleet view answers it once per Job:
// LiveJobs, LiveSUCJob).
func jobLive(j *batchv1.Job) bool {
	return jobRan(j) && fleet.JobCompletion(j).IsZero() && !jobFailed(j)
}

// cordonHolder is who cordoned a GPU node (fleet.CordonHolder).
type cordonHolder = fleet.CordonHolder

// cordonHolderOf says who cordoned n (fleet.View.CordonHolder).
func (c *Config) cordonHolderOf(cl *Cluster, n *corev1.Node) cordonHolder {
	return cl.fleetView().CordonHolder(&c.OutOfService, n)
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

// complete: every component is known (fleet.CompleteTuple).
func complete(t qualification.Tuple) bool { return fleet.CompleteTuple(t) }

// betweenTuples: cur is neither src nor dst, each of its components is
// src's or dst's, and it is complete (fleet.BetweenTuples).
func betweenTuples(cur, src, dst qualification.Tuple) bool { return fleet.BetweenTuples(cur, src, dst) }
