package gate

import (
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// DetectHalts lists, per GPU node that a forward GPU Plan moves to its
// record's target, the failure signals it shows now: its SUC Job for that
// Plan failed; the GPU Operator marked its driver upgrade failed; a
// GPU-health condition is unhealthy; a check it must pass (proof.checks)
// failed against the record's baseline; it runs a tuple that is neither the
// record's source nor its target (half applied); its Ready condition or its
// validator Pod has not come back within halts.recoveryTimeout of its
// upgrade (dated by the objects' own timestamps). Rollback Plans are the way
// out and never halt. The first signal per hardware wins, in node order.
func DetectHalts(cfg *Config, cl *Cluster, now time.Time) []Halt {
	return detectHalts(cfg, cl, now, nil)
}

// detectHalts is DetectHalts for the hardware keys in only (every hardware
// when only is nil): a decision looks at its own hardware. Where a halt can
// show (the forward Plans, the nodes each may halt on, the stranded nodes)
// is the fleet view's, worked out once per view (fleet.HaltScope); here
// each is judged at now.
func detectHalts(cfg *Config, cl *Cluster, now time.Time, only map[string]bool) []Halt {
	scope := haltScope(cfg, cl)
	var out []Halt
	halted := map[string]bool{}
	for _, key := range scope.Keys() {
		if only != nil && !only[key] {
			continue
		}
		plans := scope.Plans(key)
		for _, w := range scope.Watched(key) {
			f := plans[w.Plan]
			signal, at := haltSignal(cfg, cl, f.Plan, f.Record, w.Node, w.Jobs, w.Tuple, now)
			if signal == "" {
				continue
			}
			out = append(out, Halt{Hardware: scope.Hardware(key), Node: w.Node.Name, Signal: signal, SeenAt: at, Plan: f.Plan.Namespace + "/" + f.Plan.Name, Record: f.Record.ID,
				RequestedBy: f.Plan.Annotations[AnnotationRequestedBy], MovedBy: w.Node.Annotations[AnnotationMovedBy]})
			halted[key] = true
			break
		}
	}
	return append(out, strandedHalts(cfg, scope, now, only, halted)...)
}

// haltScope is where halts can show in cl: its view's, shared by the
// reviews of the view when cl's index is the view's own.
func haltScope(cfg *Config, cl *Cluster) *fleet.HaltScope {
	op, dcgm := clusterVersions(cl)
	return cl.fleetView().HaltScope(cfg, cl.nodeIndex(cfg), op, dcgm)
}

// strandedHalts: a stranded node (fleet.HaltScope.Stranded: stopped half
// way, issue 22 item 2, and no stored forward Plan moves it) is a failure
// once the recovery timeout passed since its upgrade last moved (its last
// SUC Job, its cordon; undated counts as passed, as for a Plan's node). The
// halt names the Plan of its last SUC Job, if one is left, and the record;
// no requester is known, so only the break-glass group clears it. Hardware
// already halted is skipped: one halt per hardware.
func strandedHalts(cfg *Config, scope *fleet.HaltScope, now time.Time, only, halted map[string]bool) []Halt {
	var out []Halt
	for ri, r := range scope.StrandedRecords() {
		if halted[r.Key] || (only != nil && !only[r.Key]) {
			continue
		}
		for _, s := range scope.Stranded(r.Key) {
			if s.Record != ri {
				continue
			}
			start := upgradeStart(s.Last, s.Node)
			if !start.IsZero() && now.Sub(start) < cfg.Halts.RecoveryTimeout.Duration {
				continue
			}
			plan, at := "(none stored)", now
			if s.Last != nil {
				plan = s.Last.Namespace + "/" + s.Last.Labels[upgradev1.LabelPlan]
			}
			if !start.IsZero() {
				at = start.Add(cfg.Halts.RecoveryTimeout.Duration)
			}
			signal := fmt.Sprintf("tuple half applied and no stored Plan moves it (its Plan deleted or opted out): neither record %s's source nor its target (%s), cordoned and not back within %s",
				r.Record.ID, strings.Join(tupleDiff(s.Tuple, r.Record.Target, false), ", "), cfg.Halts.RecoveryTimeout.Duration)
			out = append(out, Halt{Hardware: r.Hardware, Node: s.Node.Name, Signal: signal, SeenAt: at, Plan: plan, Record: r.Record.ID, MovedBy: s.Node.Annotations[AnnotationMovedBy]})
			halted[r.Key] = true
			break
		}
	}
	return out
}

// nodeMayHalt: the node's own signals, whatever the record: its driver
// upgrade failed, or a GPU-health condition is unhealthy. A node is a
// suspect of halt detection unless haltSignal surely finds nothing on it:
// no SUC Job, not nodeMayHalt, and on the record's source tuple (neither
// half applied nor at the target, where Ready and the validator are
// awaited).
func (c *Config) nodeMayHalt(n *corev1.Node) bool {
	if n.Labels[LabelDriverUpgradeState] == "upgrade-failed" {
		return true
	}
	for _, h := range c.Proof.HealthConditions {
		if condition(n, corev1.NodeConditionType(h.Type)).Status == h.UnhealthyStatus {
			return true
		}
	}
	return false
}

// haltSignal is the first failure the node shows, "" for none; planJobs
// are its Jobs of p (fleet.Watched).
func haltSignal(cfg *Config, cl *Cluster, p *upgradev1.Plan, rec *qualification.Record, n *corev1.Node, planJobs []*batchv1.Job, cur qualification.Tuple, now time.Time) (string, time.Time) {
	var job *batchv1.Job
	for _, j := range planJobs {
		job = j
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
	// A check of the node at the target failed (proof.checks): its figure
	// is beyond the record's allowed deviation.
	if len(cfg.Proof.Checks) > 0 && SameTuple(cur, rec.Target) {
		if fails := cfg.Prove(cl, n, now).Failures; len(fails) > 0 {
			return fails[0].Signal, fails[0].At
		}
	}
	// Mid-upgrade (its Job running, or cordoned before its Job) a node
	// passes through tuples in between; only one its upgrade left there is
	// half applied.
	// Right after its Job completed, the kubelet's, NFD's and GFD's reports
	// lag (SUC's completion waits for them): a half-applied tuple counts
	// only once the recovery timeout has passed since the upgrade moved.
	upgrading := (job != nil && jobCompletion(job).IsZero()) || (job == nil && n.Spec.Unschedulable)
	start := upgradeStart(job, n)
	settling := !start.IsZero() && now.Sub(start) < cfg.Halts.RecoveryTimeout.Duration
	if rec.Source != nil && !SameTuple(cur, *rec.Source) && !SameTuple(cur, rec.Target) && complete(cur) && !upgrading && !settling {
		return fmt.Sprintf("tuple half applied: neither the record's source nor its target (%s)", strings.Join(tupleDiff(cur, rec.Target, false), ", ")), now
	}
	if job != nil || SameTuple(cur, rec.Target) {
		return cfg.notBack(cl, n, start, now)
	}
	return "", time.Time{}
}

// upgradeStart is when the node's upgrade last moved, by the objects' own
// timestamps: its Job's completion (else its creation) and its cordon.
func upgradeStart(job *batchv1.Job, n *corev1.Node) time.Time {
	var at time.Time
	if job != nil {
		at = jobCompletion(job)
		if at.IsZero() {
			at = job.CreationTimestamp.Time
		}
	}
	for _, t := range n.Spec.Taints {
		if t.Key == TaintUnschedulable && t.TimeAdded != nil {
			at = later(at, t.TimeAdded.Time)
		}
	}
	return at
}

// notBack: Ready, or the validator Pod's Ready, has not held for longer
// than the recovery timeout since the upgrade moved (or since it last
// dropped, whichever is later). A moment that cannot be dated is no signal;
// nor are validators whose owner cannot be checked.
func (c *Config) notBack(cl *Cluster, n *corev1.Node, start, now time.Time) (string, time.Time) {
	timeout := c.Halts.RecoveryTimeout.Duration
	if c.Proof.on(ProofReady) {
		if ready := condition(n, corev1.NodeReady); ready.Status != corev1.ConditionTrue {
			if since := later(start, ready.LastTransitionTime.Time); !since.IsZero() && now.Sub(since) >= timeout {
				return fmt.Sprintf("node Ready is %s since %s, not back within %s", orNone(string(ready.Status)), stamp(since), timeout), since.Add(timeout)
			}
		}
	}
	// Validators count only by the validator DaemonSet's UID: with the
	// DaemonSet unreadable, they say nothing (its proof stays unproven,
	// saying why), so a Pod that merely names it halts nothing.
	if !c.Proof.on(ProofValidator) || cl.Proof.ValidatorDaemonSetUnreadable != "" {
		return "", time.Time{}
	}
	validators := cl.ownValidatorsOn(n.Name)
	if len(validators) == 0 && !start.IsZero() && now.Sub(start) >= timeout {
		return fmt.Sprintf("no validator Pod (%s) on the node since %s, not back within %s", c.Proof.Validator.Selector, stamp(start), timeout), start.Add(timeout)
	}
	for _, v := range validators {
		if cond := podCondition(v, corev1.PodReady); cond.Status != corev1.ConditionTrue {
			if since := later(start, cond.LastTransitionTime.Time); !since.IsZero() && now.Sub(since) >= timeout {
				return fmt.Sprintf("validator Pod %s/%s not Ready since %s, not back within %s", v.Namespace, v.Name, stamp(since), timeout), since.Add(timeout)
			}
		}
	}
	return "", time.Time{}
}

// complete: every component is known (fleet.CompleteTuple).
func complete(t qualification.Tuple) bool { return fleet.CompleteTuple(t) }
