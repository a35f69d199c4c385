package gate

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// proofRule (review-level, Plans and per-node steps): a node of the
// record's hardware that already runs the destination tuple must be proven
// before another node of that hardware starts, at every wave size. The
// review's own pending nodes are not "previous": SUC is about to run them.
// A rollback Plan is the way out of a failed rollout: the nodes still on
// the source tuple were never moved, so they prove nothing and hold nothing.
func (r *PlanReview) proofRule(f *findings, d *Decision) {
	if r.dest == nil || r.rollback {
		return
	}
	previousProofs(r.cfg, r.cl, r.record, r.dest, names(r.pending), r.req.Now, f, d)
}

// proofRule (review-level, driver path): the same, for each usable record's
// hardware: the nodes of that hardware already at its target are proven
// before the operator reloads the next ones.
func (r *DriverReview) proofRule(usable []*qualification.Record, f *findings, d *Decision) {
	if r.rollback {
		return
	}
	for _, rec := range usable {
		previousProofs(r.cfg, r.cl, rec, &rec.Target, names(r.pending), r.req.Now, f, d)
	}
}

// previousProofs adds a PreviousNodeUnproven blocker for every node of the
// record's hardware at dest, other than skip, that is not proven.
func previousProofs(cfg *Config, cl *Cluster, rec *qualification.Record, dest *qualification.Tuple, skip []string, now time.Time, f *findings, d *Decision) {
	for _, n := range nodesAt(cfg, cl, rec, dest) {
		if slices.Contains(skip, n.Name) {
			continue
		}
		p := cfg.Prove(cl, n, now)
		d.noteProof(cfg, p)
		if !p.Proven() {
			f.add(previousNodeUnproven(n.Name, rec.ID, p.Missing))
		}
	}
}

// atDestination are the GPU nodes of the record's hardware that run the
// destination tuple now.
func (r *PlanReview) atDestination() []*corev1.Node { return nodesAt(r.cfg, r.cl, r.record, r.dest) }

// nodesAt are the GPU nodes of the record's hardware that run dest.
func nodesAt(cfg *Config, cl *Cluster, rec *qualification.Record, dest *qualification.Tuple) []*corev1.Node {
	want := rec.NormalizedHardware()
	keys := identityLabels(want)
	op, dcgm := clusterVersions(cl)
	var out []*corev1.Node
	// Only the nodes with one of the identity's labels (the index), the
	// cheap necessary condition (kernel) next, the node's full facts last.
	idx := cl.nodeIndex(cfg)
	idx.withTrue(keys, func(i int32) {
		n := idx.nodes[i]
		if !SameComponent(ComponentKernel, kernelOf(n), dest.Kernel) {
			return
		}
		cur := qualification.Tuple{Kernel: kernelOf(n), RKE2: n.Status.NodeInfo.KubeletVersion, Driver: driverOf(n.Labels), GPUOperator: op, DCGMExporter: dcgm}
		if !SameTuple(cur, *dest) || !idx.isGPU(cfg, i) {
			return
		}
		if slices.Equal(idx.factsOf(cfg, i).Identities, want) {
			out = append(out, n)
		}
	})
	return out
}

// completionRule (review-level, Nodes and SUC's completion write): a GPU
// node that runs the destination tuple of a Plan that selects it is not
// handed back to tenants (uncordoned) nor marked done for that Plan (its
// plan.upgrade.cattle.io/<plan> label set, which moves SUC to the next node)
// until it is proven.
func completionRule(cfg *Config, cl *Cluster, req NodeRequest, f *findings, d *Decision) {
	n, old := req.Node, req.OldNode
	uncordon := old.Spec.Unschedulable && !n.Spec.Unschedulable
	marked := markedDone(old, n)
	if (!uncordon && len(marked) == 0) || (!cfg.IsGPUNode(n) && !cfg.IsGPUNode(old)) {
		return
	}
	f2 := cfg.FactsOf(n)
	cur := f2.Current(cl)
	for i, p := range cl.Plans {
		sel, err := cl.planSelector(i)
		if err != nil || !sel.selects(n) && !sel.selects(old) {
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
		act, path := "uncordon", field.NewPath("spec", "unschedulable")
		if !uncordon {
			act, path = "mark done ("+strings.Join(marked, ",")+")", field.NewPath("metadata", "labels").Key(marked[0])
		}
		f.add(uncordonBeforeProof(n.Name, path, act, p.Namespace+"/"+p.Name, recID, proof.Missing))
		return
	}
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
	var f findings
	completionRule(cfg, cl, req, &f, &d)
	haltUncordonRule(cfg, cl, req, &f, &d)
	f.settle(&d)
	return d
}

// noteProof records a proof the decision relied on, for the audit
// annotations, once per node.
func (d *Decision) noteProof(cfg *Config, p NodeProof) {
	entry := p.Node + "=" + p.State()
	if !slices.Contains(d.Proofs, entry) {
		d.Proofs = append(d.Proofs, entry)
	}
	d.ProofOff = slices.Clone(cfg.Proof.Off)
}

// previousNodeUnproven builds every PreviousNodeUnproven blocker.
func previousNodeUnproven(node, record string, missing []string) Blocker {
	return forbidden(CodePreviousNodeUnproven, node, pathSelector, "node %s already runs the destination tuple of record %s but is not proven: %s; wait until it is (or fix it: see docs/proof.md), then retry", node, record, strings.Join(missing, "; "))
}

// uncordonBeforeProof builds every UncordonBeforeProof blocker.
func uncordonBeforeProof(node string, path *field.Path, act, plan, record string, missing []string) Blocker {
	return forbidden(CodeUncordonBeforeProof, node, path, "node %s runs the destination tuple of Plan %s (record %s) but is not proven, so it may not %s yet: %s; it stays cordoned until the proof holds (run the allocation check: docs/proof.md)", node, plan, record, act, strings.Join(missing, "; "))
}
