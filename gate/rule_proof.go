package gate

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// proofRule (Plans, per-node steps and the driver path): for each record
// the review uses, a node of the record's hardware that already runs the
// record's destination tuple must be proven before another node of that
// hardware starts, at every wave size. The review's own pending nodes are
// not "previous": they are about to move. A rollback is the way out of a
// failed rollout: the nodes still on the source tuple were never moved, so
// they prove nothing and hold nothing.
func proofRule(rv review, f *findings, d *Decision) {
	b := rv.base()
	if b.rollback {
		return
	}
	for _, u := range b.uses {
		previousProofs(b.cfg, b.cl, u.rec, u.dest, names(b.pending), b.now, f, d)
	}
}

// uncordonProofRule (Nodes, SUC's completion write): a GPU node is handed
// back or marked done only on its destination and proven (completionRule);
// SUC's completion also only once the node runs the destination
// (notReachedRule).
func uncordonProofRule(rv review, f *findings, d *Decision) {
	switch r := rv.(type) {
	case *NodeReview:
		completionRule(r.cfg, r.cl, r.req, markedAmong(r.changed, r.req.Node), f, d)
	case *completionReview:
		notReachedRule(r.cfg, r.cl, r.req, f)
		completionRule(r.cfg, r.cl, r.req, markedDone(r.req.OldNode, r.req.Node), f, d)
	}
}

// previousProofs adds a PreviousNodeUnproven blocker for every node of the
// record's hardware at dest, other than skip, that is not proven, and for
// every node whose SUC Job towards dest completed while the node does not
// run dest yet: SUC's completion of it is refused (notReachedRule), but SUC
// believes it done and moves on (it edits its cached Node before writing).
func previousProofs(cfg *Config, cl *Cluster, rec *qualification.Record, dest *qualification.Tuple, skip []string, now time.Time, f *findings, d *Decision) {
	for _, n := range nodesAt(cfg, cl, rec, dest) {
		if slices.Contains(skip, n.Name) {
			continue
		}
		p := cfg.Prove(cl, n, now)
		d.noteProof(cfg, p)
		if !p.Proven() {
			f.add(previousNodeUnproven(n.Name, rec.ID, "", p.Missing))
		}
	}
	for _, c := range completedShort(cfg, cl, rec, dest) {
		if !slices.Contains(skip, c.node) {
			f.add(previousNodeUnproven(c.node, rec.ID, c.plan, c.short))
		}
	}
}

// shortCompletion is a node whose SUC Job of plan completed, not yet marked
// done for it, that does not run the destination: short lists what differs.
type shortCompletion struct {
	node, plan string
	short      []string
}

// completedShort lists the GPU nodes of the record's hardware whose SUC Job
// of a Plan moving them to dest under rec completed, that are not marked
// done with that Job's hash and do not run dest.
func completedShort(cfg *Config, cl *Cluster, rec *qualification.Record, dest *qualification.Tuple) []shortCompletion {
	jobs := map[string]*upgradev1.Plan{} // node -> the Plan whose Job completed
	hash := map[string]string{}
	for _, j := range cl.Proof.UpgradeJobs {
		p := cl.plan(j.Namespace, j.Labels[upgradev1.LabelPlan])
		if p == nil || fleet.JobCompletion(j).IsZero() || jobFailed(j) {
			continue
		}
		if pd, id := planDestination(cl, p); pd == nil || id != rec.ID || !SameTuple(*pd, *dest) {
			continue
		}
		node := j.Labels[upgradev1.LabelNode]
		jobs[node], hash[node] = p, j.Labels[upgradev1.LabelPlanName(p.Name)]
	}
	if len(jobs) == 0 {
		return nil
	}
	want := rec.NormalizedHardware()
	op, dcgm := clusterVersions(cl)
	idx := cl.nodeIndex(cfg)
	var out []shortCompletion
	idx.WithTrue(identityLabels(want), func(i int32) {
		n := idx.Node(i)
		p, ok := jobs[n.Name]
		if !ok || (hash[n.Name] != "" && n.Labels[upgradev1.LabelPlanName(p.Name)] == hash[n.Name]) || !idx.IsGPU(cfg, i) {
			return
		}
		fs := idx.FactsOf(cfg, i)
		if short := shortOf(cfg, fs.Tuple(op, dcgm), *dest, destWord(cl, p)); len(short) > 0 && slices.Equal(fs.Identities, want) {
			out = append(out, shortCompletion{node: n.Name, plan: p.Namespace + "/" + p.Name, short: short})
		}
	})
	slices.SortFunc(out, func(a, b shortCompletion) int { return strings.Compare(a.node, b.node) })
	return out
}

// shortOf names each component of cur that is not dest's, with the value
// seen, the value expected and where the gate reads it:
// "driver 550.90.07 (label ...), the record's target is 570.124.06".
func shortOf(cfg *Config, cur, dest qualification.Tuple, which string) []string {
	var out []string
	for i := range componentTable {
		s := &componentTable[i]
		if have, want := s.Value(cur), s.Value(dest); !s.Same(nil, have, want) {
			out = append(out, fmt.Sprintf("%s %s (%s), the record's %s is %s", s.Name, qualification.Clip(fleet.QuoteOrNone(have)), s.fact(cfg), which, qualification.Clip(fleet.QuoteOrNone(want))))
		}
	}
	return out
}

// destWord says which of the record's tuples a Plan moves nodes to.
func destWord(cl *Cluster, p *upgradev1.Plan) string {
	if e := cl.Records[p.Annotations[AnnotationQualification]]; p.Annotations[AnnotationRollback] == "true" && e.Record != nil && e.Record.Source != nil {
		return "source"
	}
	return "target"
}

func jobFailed(j *batchv1.Job) bool {
	return slices.ContainsFunc(j.Status.Conditions, func(c batchv1.JobCondition) bool {
		return c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue
	})
}

// atDestination are the GPU nodes of the record's hardware that run the
// destination tuple now.
func (r *PlanReview) atDestination() []*corev1.Node { return nodesAt(r.cfg, r.cl, r.record, r.dest) }

// nodesAt are the GPU nodes of the record's hardware that run dest, in the
// cluster's node order (the node index's fleet facts).
func nodesAt(cfg *Config, cl *Cluster, rec *qualification.Record, dest *qualification.Tuple) []*corev1.Node {
	op, dcgm := clusterVersions(cl)
	return cl.nodeIndex(cfg).GPUOfHardware(cfg, rec.NormalizedHardware(), func(nf NodeFacts) bool { return SameTuple(nf.Tuple(op, dcgm), *dest) })
}

// completionRule (review-level, Nodes and SUC's completion write): a GPU
// node that runs the destination tuple of a stored Plan is not handed back
// to tenants (uncordoned) nor marked done for that Plan (its
// plan.upgrade.cattle.io/<plan> label set, which moves SUC to the next node)
// until it is proven: whether the Plan still selects it or not (opted out,
// relabelled: issue 22 attack 4), when the Plan's record is of the node's
// hardware or an SUC Job of the Plan ran for it.
func completionRule(cfg *Config, cl *Cluster, req NodeRequest, marked []string, f *findings, d *Decision) {
	n, old := req.Node, req.OldNode
	uncordon := old.Spec.Unschedulable && !n.Spec.Unschedulable
	if (!uncordon && len(marked) == 0) || (!cfg.IsGPUNode(n) && !cfg.IsGPUNode(old)) {
		return
	}
	f2 := cfg.FactsOf(n)
	cur := cl.Current(f2)
	for i, p := range cl.Plans {
		if !planMoves(cfg, cl, i, n, old, f2.Identities) {
			continue
		}
		dest, recID := planDestination(cl, p)
		if dest == nil || !SameTuple(cur, *dest) {
			continue
		}
		proof := cfg.Prove(cl, n, req.Now)
		d.noteProof(cfg, proof)
		if proof.Proven() {
			return
		}
		act, path := completionAct(uncordon, marked)
		f.add(uncordonBeforeProof(n.Name, path, act, p.Namespace+"/"+p.Name, recID, shortProof, "", proof.Missing))
		return
	}
}

// planMoves: the i-th stored Plan moves the node, whatever its selection
// says now: it selects the node before or after the write, its record is
// of the node's hardware, or an SUC Job of it ran for the node.
func planMoves(cfg *Config, cl *Cluster, i int, n, old *corev1.Node, ids []string) bool {
	p := cl.Plans[i]
	if sel, err := cl.planSelector(i); err == nil && (sel.Selects(n) || sel.Selects(old)) {
		return true
	}
	if e := cl.Records[p.Annotations[AnnotationQualification]]; e.Err == nil && e.Record != nil && slices.Equal(e.Record.NormalizedHardware(), ids) {
		return true
	}
	return slices.ContainsFunc(sucJobsFor(cl, n.Name), func(j *batchv1.Job) bool {
		return j.Namespace == p.Namespace && j.Labels[upgradev1.LabelPlan] == p.Name && jobRan(j)
	})
}

// notReachedRule (review-level, SUC's completion write): SUC completes a
// Plan on a node the moment the node's Job completes, whatever the node
// reports. A GPU node that does not run the destination of the Plan being
// completed yet (facts from the kubelet, NFD or GFD that lag; a Plan that
// moves only part of the record's tuple) is neither handed back nor marked
// done: once the facts move, completionRule's proof decides. The Plans
// completed are the ones whose label the write sets, and, for an uncordon
// (alone during postCompleteDelay), those with a Job for the node that did
// not fail: SUC writes nothing else to a Node, and a Job the gate's cache
// saw only running still counts (fail closed on a cache that lags).
func notReachedRule(cfg *Config, cl *Cluster, req NodeRequest, f *findings) {
	n, old := req.Node, req.OldNode
	uncordon := old.Spec.Unschedulable && !n.Spec.Unschedulable
	marked := markedDone(old, n)
	if (!uncordon && len(marked) == 0) || (!cfg.IsGPUNode(n) && !cfg.IsGPUNode(old)) {
		return
	}
	cur := cl.Current(cfg.FactsOf(n))
	for _, p := range cl.Plans {
		label := upgradev1.LabelPlanName(p.Name)
		if !slices.Contains(marked, label) && !(uncordon && hasLiveJob(cl, p, n.Name)) {
			continue
		}
		act, path := completionAct(uncordon, marked)
		dest, recID := planDestination(cl, p)
		if dest == nil {
			f.add(uncordonBeforeProof(n.Name, path, act, p.Namespace+"/"+p.Name, "", shortRecord, "", []string{fmt.Sprintf(
				"the Plan names no record the gate can load (annotation %s=%q), so the destination of its upgrade is unknown", AnnotationQualification, qualification.Clip(p.Annotations[AnnotationQualification]))}))
			continue
		}
		which := destWord(cl, p)
		if short := shortOf(cfg, cur, *dest, which); len(short) > 0 {
			f.add(uncordonBeforeProof(n.Name, path, act, p.Namespace+"/"+p.Name, recID, shortTuple, which, short))
		}
	}
}

// hasLiveJob: SUC has a Job of p for the node that did not fail.
func hasLiveJob(cl *Cluster, p *upgradev1.Plan, node string) bool {
	return slices.ContainsFunc(cl.Proof.UpgradeJobs, func(j *batchv1.Job) bool {
		return j.Namespace == p.Namespace && j.Labels[upgradev1.LabelPlan] == p.Name && j.Labels[upgradev1.LabelNode] == node && !jobFailed(j)
	})
}

// completionAct names what the write does, for messages, and its field.
func completionAct(uncordon bool, marked []string) (string, *field.Path) {
	if uncordon {
		return "uncordon", field.NewPath("spec", "unschedulable")
	}
	return "mark done (" + strings.Join(marked, ",") + ")", field.NewPath("metadata", "labels").Key(marked[0])
}

// markedDone lists the plan.upgrade.cattle.io/<plan> labels the change sets
// to a hash (a new value other than "disabled"): what SUC writes when a
// node's Job completed.
func markedDone(old, n *corev1.Node) []string {
	var out []string
	for k, v := range n.Labels {
		if strings.HasPrefix(k, upgradev1.LabelPlanPrefix) && v != upgradev1.LabelPlanValueDisabled && v != "" && old.Labels[k] != v {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// markedAmong is markedDone over the label keys a write changes (sorted,
// NodeReview.changed): a Node review walks the node's labels once.
func markedAmong(changed []string, n *corev1.Node) []string {
	var out []string
	for _, k := range changed {
		if v := n.Labels[k]; strings.HasPrefix(k, upgradev1.LabelPlanPrefix) && v != upgradev1.LabelPlanValueDisabled && v != "" {
			out = append(out, k)
		}
	}
	return out
}

// planDestination is the tuple a stored Plan's usable record moves nodes
// to (its source for a rollback Plan), nil when the Plan names none.
func planDestination(cl *Cluster, p *upgradev1.Plan) (*qualification.Tuple, string) {
	e, ok := cl.Records[p.Annotations[AnnotationQualification]]
	if !ok || e.Err != nil || e.Record == nil {
		return nil, ""
	}
	if p.Annotations[AnnotationRollback] == "true" && e.Record.Source != nil {
		return e.Record.Source, e.Record.ID
	}
	return &e.Record.Target, e.Record.ID
}

// DecideCompletion reviews SUC's completion write of a node (the Node UPDATE
// that uncordons it and sets plan.upgrade.cattle.io/<plan> when its Job
// completed). It is a per-node step: no exemption applies. SUC retries on
// its own; its next node's Job is held by PrepareNodeStep meanwhile
// (PreviousNodeUnproven), so the wave waits for the proof and then
// continues untouched.
func DecideCompletion(cfg *Config, cl *Cluster, req NodeRequest) Decision {
	d := Decision{Object: "Node " + req.Node.Name, Nodes: []string{req.Node.Name}}
	r := &completionReview{req: req}
	r.kinds, r.cfg, r.cl, r.user, r.now = kindsCompletion, cfg, cl, req.User, req.Now
	var f findings
	applyTable(r, &f, &d)
	f.settle(&d)
	return d
}

// completionReview is SUC's completion write of a node.
type completionReview struct {
	reviewBase
	req NodeRequest
}

// noteProof records a proof the decision relied on, for the audit
// annotations, once per node.
func (d *Decision) noteProof(cfg *Config, p NodeProof) {
	entry := p.Node + "=" + p.State()
	if !slices.Contains(d.Proofs, entry) {
		d.Proofs = append(d.Proofs, entry)
	}
	d.ProofOff = slices.Clone(cfg.Proof.Off)
	for _, ig := range p.Ignored {
		if w := "gpu-upgrade-gate: node " + p.Node + ": " + ig; !slices.Contains(d.Warnings, w) {
			d.Warnings = append(d.Warnings, w)
		}
	}
}

// previousNodeUnproven builds every PreviousNodeUnproven blocker: a node at
// the destination that is not proven (missing), or one whose Job of plan
// completed short of the destination (plan set; missing says what differs).
func previousNodeUnproven(node, record, plan string, missing []string) Blocker {
	if plan != "" {
		return forbidden(CodePreviousNodeUnproven, node, pathSelector, "node %s finished its upgrade Job of Plan %s but does not run the destination tuple of record %s yet, so it is not proven: %s; wait until its facts move and it is proven (or roll it back: see docs/proof.md), then retry", node, plan, record, strings.Join(missing, "; "))
	}
	return forbidden(CodePreviousNodeUnproven, node, pathSelector, "node %s already runs the destination tuple of record %s but is not proven: %s; wait until it is (or fix it: see docs/proof.md), then retry", node, record, strings.Join(missing, "; "))
}

// What an UncordonBeforeProof blocker says is missing.
type uncordonShort int

const (
	shortProof  uncordonShort = iota // at the destination, not proven
	shortTuple                       // SUC completes it short of the destination
	shortRecord                      // the Plan's destination is unknown
)

// uncordonBeforeProof builds every UncordonBeforeProof blocker. details
// are the missing proofs (shortProof), or what differs from the record's
// target or source (shortTuple, which names it), or why the record does
// not load (shortRecord).
func uncordonBeforeProof(node string, path *field.Path, act, plan, record string, short uncordonShort, which string, details []string) Blocker {
	// Each detail's values were clipped where it was written; the list
	// stays whole (maxDetail bounds the message).
	d := errors.New(strings.Join(details, "; "))
	switch short {
	case shortTuple:
		return forbidden(CodeUncordonBeforeProof, node, path, "SUC completes Plan %s on node %s, but the node does not run the destination tuple of record %s, so it may not %s yet: %s: the node has not reached the %s (facts from the kubelet, NFD or GFD may lag; SUC retries on its own); it stays cordoned until it reports the %s and is proven (docs/proof.md); a Plan that moves only part of the tuple leaves the node half applied, which halts the rollout: roll it back", plan, node, record, act, d, which, which)
	case shortRecord:
		return forbidden(CodeUncordonBeforeProof, node, path, "SUC completes Plan %s on GPU node %s, but %s, so it may not %s: restore the record, or delete the Plan (SUC then deletes its Jobs) and prove the node before a person uncordons it (docs/proof.md)", plan, node, d, act)
	}
	return forbidden(CodeUncordonBeforeProof, node, path, "node %s runs the destination tuple of Plan %s (record %s) but is not proven, so it may not %s yet: %s; it stays cordoned until the proof holds (run the allocation check: docs/proof.md)", node, plan, record, act, d)
}
