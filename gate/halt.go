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
// when only is nil): a decision looks at its own hardware. It looks at each
// hardware's GPU nodes once (from the node index, whose GPU class and facts
// are worked out once per node list) and keeps those that may halt
// (mayHalt); only those are matched against the hardware's Plans, so a
// quiet fleet costs one pass over the hardware's nodes, not Plans × nodes.
func detectHalts(cfg *Config, cl *Cluster, now time.Time, only map[string]bool) []Halt {
	out, plansOf := planHalts(cfg, cl, now, only)
	return append(out, strandedHalts(cfg, cl, now, only, plansOf, out)...)
}

// forward is a stored forward GPU Plan with its selector and record.
type forward struct {
	plan *upgradev1.Plan
	sel  *PlanSelector
	rec  *qualification.Record
}

// planHalts are the halts of the nodes the stored forward Plans move, and
// those Plans by hardware key.
func planHalts(cfg *Config, cl *Cluster, now time.Time, only map[string]bool) ([]Halt, map[string][]forward) {
	var keys []string
	hwOf, plansOf := map[string][]string{}, map[string][]forward{}
	for i, p := range cl.Plans {
		e, ok := cl.Records[p.Annotations[AnnotationQualification]]
		if !ok || e.Err != nil || e.Record == nil || p.Annotations[AnnotationRollback] == "true" {
			continue
		}
		hw := e.Record.NormalizedHardware()
		key := HardwareKey(hw)
		sel, err := cl.planSelector(i)
		if err != nil || (only != nil && !only[key]) {
			continue
		}
		if _, ok := hwOf[key]; !ok {
			keys = append(keys, key)
			hwOf[key] = hw
		}
		plansOf[key] = append(plansOf[key], forward{p, sel, e.Record})
	}
	if len(keys) == 0 {
		return nil, plansOf
	}
	idx, jobs := cl.nodeIndex(cfg), upgradeJobsByNode(cl)
	op, dcgm := clusterVersions(cl)
	var out []Halt
	for _, key := range keys {
		hw, plans := hwOf[key], plansOf[key]
		var recs []*qualification.Record
		for _, f := range plans {
			if !slices.Contains(recs, f.rec) {
				recs = append(recs, f.rec)
			}
		}
		var suspects []int32
		idx.WithTrue(identityLabels(hw), func(i int32) {
			if !idx.IsGPU(cfg, i) {
				return
			}
			facts := idx.FactsOf(cfg, i)
			if !slices.Equal(facts.Identities, hw) {
				return
			}
			// A suspect: its Jobs, its own signals (worked out once per node
			// object, the index keeps them: a label lookup and the health
			// conditions were most of a quiet fleet's cost), its tuple.
			cur := facts.Tuple(op, dcgm)
			if len(jobs[idx.Node(i).Name]) > 0 || idx.MayHalt(cfg, i) || slices.ContainsFunc(recs, func(rec *qualification.Record) bool { return tupleMayHalt(cur, rec) }) {
				suspects = append(suspects, i)
			}
		})
		slices.SortFunc(suspects, func(a, b int32) int { return strings.Compare(idx.Node(a).Name, idx.Node(b).Name) })
	plans:
		for _, f := range plans {
			for _, i := range suspects {
				n := idx.Node(i)
				// A node the Plan no longer selects (opted out, relabelled)
				// whose Job of the Plan ran is still the Plan's (issue 22).
				if !f.sel.Selects(n) && !slices.ContainsFunc(jobs[n.Name], func(j *batchv1.Job) bool {
					return j.Namespace == f.plan.Namespace && j.Labels[upgradev1.LabelPlan] == f.plan.Name && jobRan(j)
				}) {
					continue
				}
				signal, at := haltSignal(cfg, cl, f.plan, f.rec, n, jobs[n.Name], idx.FactsOf(cfg, i).Tuple(op, dcgm), now)
				if signal == "" {
					continue
				}
				out = append(out, Halt{Hardware: hw, Node: n.Name, Signal: signal, SeenAt: at, Plan: f.plan.Namespace + "/" + f.plan.Name, Record: f.rec.ID,
					RequestedBy: f.plan.Annotations[AnnotationRequestedBy], MovedBy: n.Annotations[AnnotationMovedBy]})
				break plans
			}
		}
	}
	return out, plansOf
}

// strandedHalts: a GPU node stopped half way (issue 22 item 2) that no
// stored forward Plan moves any more (its Plan deleted, or it opted out and
// its Job is gone) is a failure too: cordoned, no live SUC Job for it, on a
// tuple between a loaded record's source and target for its hardware, and
// the recovery timeout passed since its upgrade last moved (its last SUC
// Job, its cordon; undated counts as passed, as for a Plan's node). The
// halt names the Plan of its last SUC Job, if one is left, and the record;
// no requester is known, so only the break-glass group clears it. Hardware
// already halted (found) is skipped: one halt per hardware.
func strandedHalts(cfg *Config, cl *Cluster, now time.Time, only map[string]bool, plansOf map[string][]forward, found []Halt) []Halt {
	if len(cl.Records) == 0 {
		return nil
	}
	// Only cordoned GPU nodes can be stranded: the fleet view keeps them, so
	// a quiet fleet costs nothing more here.
	idx := cl.nodeIndex(cfg)
	cordoned := idx.CordonedGPU(cfg)
	if len(cordoned) == 0 {
		return nil
	}
	jobs := upgradeJobsByNode(cl)
	op, dcgm := clusterVersions(cl)
	halted := map[string]bool{}
	for _, h := range found {
		halted[h.HardwareKey()] = true
	}
	var out []Halt
	for _, name := range sortedKeys(cl.Records) {
		rec := cl.Records[name].Record
		if cl.Records[name].Err != nil || rec == nil || rec.Source == nil {
			continue
		}
		hw := rec.NormalizedHardware()
		key := HardwareKey(hw)
		if halted[key] || (only != nil && !only[key]) {
			continue
		}
		var stranded []*corev1.Node
		facts := map[*corev1.Node]NodeFacts{}
	nodes:
		for _, n := range cordoned {
			if slices.ContainsFunc(jobs[n.Name], jobLive) {
				continue
			}
			f, ok := idx.FactsByName(cfg, n)
			if !ok || !slices.Equal(f.Identities, hw) || !betweenTuples(f.Tuple(op, dcgm), *rec.Source, rec.Target) {
				continue
			}
			for _, p := range plansOf[key] {
				if p.sel.Selects(n) || slices.ContainsFunc(jobs[n.Name], func(j *batchv1.Job) bool {
					return j.Namespace == p.plan.Namespace && j.Labels[upgradev1.LabelPlan] == p.plan.Name && jobRan(j)
				}) {
					continue nodes // its Plan's halt detection judges it
				}
			}
			stranded, facts[n] = append(stranded, n), f
		}
		slices.SortFunc(stranded, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
		for _, n := range stranded {
			var last *batchv1.Job
			for _, j := range jobs[n.Name] {
				if last == nil || j.CreationTimestamp.After(last.CreationTimestamp.Time) {
					last = j
				}
			}
			start := upgradeStart(last, n)
			if !start.IsZero() && now.Sub(start) < cfg.Halts.RecoveryTimeout.Duration {
				continue
			}
			plan, at := "(none stored)", now
			if last != nil {
				plan = last.Namespace + "/" + last.Labels[upgradev1.LabelPlan]
			}
			if !start.IsZero() {
				at = start.Add(cfg.Halts.RecoveryTimeout.Duration)
			}
			signal := fmt.Sprintf("tuple half applied and no stored Plan moves it (its Plan deleted or opted out): neither record %s's source nor its target (%s), cordoned and not back within %s",
				rec.ID, strings.Join(tupleDiff(facts[n].Tuple(op, dcgm), rec.Target, false), ", "), cfg.Halts.RecoveryTimeout.Duration)
			out = append(out, Halt{Hardware: hw, Node: n.Name, Signal: signal, SeenAt: at, Plan: plan, Record: rec.ID, MovedBy: n.Annotations[AnnotationMovedBy]})
			halted[key] = true
			break
		}
	}
	return out
}

// nodeMayHalt: the node's own signals, whatever the record: its driver
// upgrade failed, or a GPU-health condition is unhealthy. A node is a
// suspect of detectHalts unless haltSignal surely finds nothing on it: no
// SUC Job, not nodeMayHalt, and on the record's source tuple
// (tupleMayHalt: neither half applied nor at the target, where Ready and
// the validator are awaited).
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

// tupleMayHalt: the node is not on rec's source tuple, or already at its
// target (or the record has no source).
func tupleMayHalt(cur qualification.Tuple, rec *qualification.Record) bool {
	if rec.Source == nil {
		return true
	}
	// Equal spellings first: SameTuple parses versions.
	atSource := cur == *rec.Source || SameTuple(cur, *rec.Source)
	return !atSource || SameTuple(cur, rec.Target)
}

// upgradeJobsByNode are SUC's Jobs by the node they upgrade (the fleet
// view's). Read only.
func upgradeJobsByNode(cl *Cluster) map[string][]*batchv1.Job {
	return cl.fleetView().UpgradeJobsByNode()
}

// haltSignal is the first failure the node shows, "" for none; nodeJobs
// are its SUC Jobs.
func haltSignal(cfg *Config, cl *Cluster, p *upgradev1.Plan, rec *qualification.Record, n *corev1.Node, nodeJobs []*batchv1.Job, cur qualification.Tuple, now time.Time) (string, time.Time) {
	var job *batchv1.Job
	for _, j := range nodeJobs {
		if j.Labels[upgradev1.LabelPlan] != p.Name || j.Namespace != p.Namespace {
			continue
		}
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

// complete: every component is known (a missing fact is FactsMissing's
// business, not a half-applied tuple).
func complete(t qualification.Tuple) bool {
	for i := range componentTable {
		if componentTable[i].required() && strings.TrimSpace(componentTable[i].get(t)) == "" {
			return false
		}
	}
	return true
}
