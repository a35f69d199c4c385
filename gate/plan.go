package gate

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

var (
	pathSelector    = field.NewPath("spec", "nodeSelector")
	pathVersion     = field.NewPath("spec", "version")
	pathConcurrency = field.NewPath("spec", "concurrency")
	pathCordon      = field.NewPath("spec", "cordon")
	pathImage       = field.NewPath("spec", "upgrade", "image")
	pathRecord      = field.NewPath("metadata", "annotations").Key(AnnotationQualification)
	pathRollback    = field.NewPath("metadata", "annotations").Key(AnnotationRollback)
)

// PlanRequest is one Plan write as the API server sent it.
type PlanRequest struct {
	// Operation is "CREATE" or "UPDATE".
	Operation string
	Plan      *upgradev1.Plan
	// OldPlan is the stored Plan on UPDATE.
	OldPlan *upgradev1.Plan
	User    UserInfo
	Now     time.Time
}

// PlanReview decides a Plan in two steps so the engine stays pure: Prepare
// works out which GPU nodes SUC would upgrade; the adapter lists the GPU
// holders of just those nodes (HolderNodes); Decide builds one Transition
// per pending node and runs the rule table.
type PlanReview struct {
	reviewBase
	req    PlanRequest
	object string

	exemption string
	selErr    error
	// only is the node of a per-node step (PrepareNodeStep), "" for a Plan.
	only string
	gpu  []string // selected GPU nodes, pending or not
	// nonGPU are the selected non-GPU nodes' positions in the review's
	// node index (nonGPUNames).
	nonGPU []int32
	// pending (reviewBase) are the GPU nodes SUC would select
	// (PlanSelector), whatever their tuple: SUC cordons, drains and runs its
	// Job on each of them.
	// op and dcgm are the cluster's GPU Operator and DCGM exporter versions.
	op, dcgm string

	recordName string
	entry      RecordEntry
	found      bool

	record *qualification.Record // as loaded; nil when it did not
	dest   *qualification.Tuple  // the tuple the record moves nodes to
	// rke2 is the RKE2 version the Plan installs, rke2Path where it is set;
	// rke2Plan: the Plan installs RKE2 (isRKE2Plan); imageErr: its upgrade
	// image does not parse.
	rke2     string
	rke2Path *field.Path
	rke2Plan bool
	imageErr error
	// write: the review is of the Plan write itself (PreparePlan), not of a
	// stored Plan for a node step or a Node change.
	write bool
	// nameBuf and useBuf back names and uses (one record).
	nameBuf [1]string
	useBuf  [1]recordDest
	// sucStep: the review is of SUC's start of the node's Job
	// (PrepareSUCStep), which the maintenance windows hold too.
	sucStep bool
	// etcdSnapshots, when set, are the ETCDSnapshotFiles the adapter read
	// for this review (SetEtcdSnapshots).
	etcdSnapshots *EtcdSnapshots
	// drainFacts, when set, are the Pods and budgets the adapter read for
	// the drain check (SetDrainFacts).
	drainFacts *DrainFacts
}

// PreparePlan selects the Plan's nodes as SUC would for the Plan as written.
func PreparePlan(cfg *Config, cl *Cluster, req PlanRequest) *PlanReview {
	r := preparePlan(cfg, cl, req, nil, "")
	r.write = true
	return r
}

// PrepareNodeStep is PreparePlan restricted to one node: the review a
// per-node guard runs before SUC's step for that node (its upgrade Job).
// The Plan-level rules are applied to the Plan as it is; the transition
// rules to exactly one transition, for the named node, when it is a GPU node
// the Plan's selector, hostname and opt-out select (SUC created the step, so
// the hash is not consulted); the wave rules count that one node. Use it
// like PlanReview: HolderNodes, list them, Decide.
func PrepareNodeStep(cfg *Config, cl *Cluster, req PlanRequest, node string) *PlanReview {
	sel, err := NewPlanSelector(req.Plan)
	if err == nil {
		sel = sel.AnyHash()
	}
	r := preparePlan(cfg, cl, req, sel, node)
	r.perNode = true
	if err != nil {
		r.selErr = err
	}
	return r
}

// preparePlan is PreparePlan with the Plan's selector when the caller has it,
// and restricted to node only when only is set.
func preparePlan(cfg *Config, cl *Cluster, req PlanRequest, sel *PlanSelector, only string) *PlanReview {
	p := req.Plan
	r := &PlanReview{req: req, object: "Plan " + p.Namespace + "/" + p.Name, only: only}
	r.kinds, r.cfg, r.cl, r.user, r.now = kindsPlan, cfg, cl, req.User, req.Now
	r.records, r.recordPath, r.subject, r.act, r.missing = true, pathRecord, "Plan", "applying this Plan", missingPlanAnnotation
	if r.exemption = cfg.exemption("plans", req.User, p.Namespace, p.Labels); r.exemption != "" {
		return r
	}
	cl = cl.indexedCluster(cfg)
	r.cl = cl
	if sel == nil {
		var err error
		if sel, err = reviewSelector(req); err != nil {
			r.selErr = err
			return r
		}
	}
	op, dcgm := clusterVersions(cl)
	// Positions first, then each list at its size: selecting all 5,000
	// nodes otherwise spends more on growing the lists than on the rules.
	idx := cl.nodeIndex(cfg)
	var gpu, nonGPU []int32
	idx.Selecting(sel, func(i int32) {
		switch n := idx.Node(i); {
		case !idx.IsGPU(cfg, i):
			nonGPU = append(nonGPU, i)
		case only == "" || n.Name == only:
			gpu = append(gpu, i)
		}
	})
	r.nonGPU = nonGPU
	// By name, before the facts are read: sorting positions moves less.
	slices.SortFunc(gpu, func(a, b int32) int { return strings.Compare(idx.Node(a).Name, idx.Node(b).Name) })
	r.gpu = make([]string, len(gpu))
	r.pending = make([]NodeFacts, 0, len(gpu))
	r.op, r.dcgm = op, dcgm
	// The nodes SUC has applied the hash to, from the index's list of the
	// Plan's label (a view's own nodes are read as written).
	var done []int32
	if !idx.IsView() && !sel.UnknownHash() {
		done = idx.WithValue(sel.Label(), sel.Hash())
	}
	for j, i := range gpu {
		n := idx.Node(i)
		r.gpu[j] = n.Name
		if !idx.IsView() {
			if _, applied := slices.BinarySearch(done, i); applied {
				continue
			}
		} else if !sel.Pending(n) {
			continue
		}
		r.pending = append(r.pending, idx.FactsOf(cfg, i))
	}

	r.recordName = p.Annotations[AnnotationQualification]
	r.entry, r.found = cl.Records[r.recordName]
	r.rollback = p.Annotations[AnnotationRollback] == "true"
	if r.recordName != "" {
		r.nameBuf[0] = r.recordName
		r.names = r.nameBuf[:]
	}
	if rec := r.entry.Record; r.recordName != "" && r.found && r.entry.Err == nil && rec != nil {
		r.record, r.dest = rec, &rec.Target
		if r.rollback && rec.Source != nil {
			r.dest = rec.Source
		}
		r.useBuf[0] = recordDest{rec, r.dest}
		r.uses = r.useBuf[:]
	}
	return r
}

// HolderNodes are the nodes whose GPU holders Decide needs.
func (r *PlanReview) HolderNodes() []string { return names(r.pending) }

// nonGPUNames are the selected non-GPU nodes' names, sorted. Only a
// MixedPlan blocker names them: an RKE2 agent Plan selects thousands of
// CPU nodes, whose names every create used to gather and sort for
// nothing.
func (r *PlanReview) nonGPUNames() []string {
	idx := r.cl.nodeIndex(r.cfg) // the index preparePlan selected from (indexedCluster)
	out := make([]string, len(r.nonGPU))
	for j, i := range r.nonGPU {
		out[j] = idx.Node(i).Name
	}
	slices.Sort(out)
	return out
}

// Decide applies the rule table to the Plan and reports all violations
// together. holders maps node name to its GPU holders; holdersErr is the
// adapter's failure to list them, which fails the review closed.
func (r *PlanReview) Decide(holders map[string][]Holder, holdersErr error) Decision {
	r.beginListed(holders, holdersErr)
	return r.decide()
}

// DecideListing is Decide while the adapter lists the holders of
// HolderNodes: list is called once, when the table reaches its last row, the
// holder rule, so the listing is in flight while every other rule applies.
func (r *PlanReview) DecideListing(list HolderListing) Decision {
	r.begin(list)
	return r.decide()
}

func (r *PlanReview) decide() Decision {
	d := Decision{Object: r.object, Nodes: r.HolderNodes()}
	if r.exemption != "" {
		d.Allowed, d.Exemption = true, r.exemption
		d.Warnings = append(d.Warnings, fmt.Sprintf("gpu-upgrade-gate: exempt by %q; no rule was applied", r.exemption))
		return d
	}
	r.finds, r.dec = findings{}, d
	f := &r.finds
	p := r.req.Plan
	if r.selErr == nil {
		if p.Spec.NodeSelector == nil {
			f.warn("spec.nodeSelector is absent: SUC selects no node for this Plan")
		}
		if len(r.gpu) == 0 {
			return r.finish(d, *f)
		}
		r.transitions()
	}
	applyTable(r, f, &r.dec)
	switch {
	case r.stopped:
	case len(r.pending) == 0:
		f.warn("SUC has already applied this Plan to every GPU node it selects (label %s=%s)", upgradev1.LabelPlanName(p.Name), p.Status.LatestHash)
	case r.dest != nil && allAtDestination(r.ts):
		f.warn("every GPU node this Plan selects already runs the record's target tuple; SUC still cordons and upgrades each of them")
	}
	return r.finish(r.dec, *f)
}

// transitions builds one Transition per pending node.
func (r *PlanReview) transitions() {
	r.rke2Plan = r.isRKE2Plan()
	r.rke2, r.rke2Path = r.rke2Target()
	var hw []string
	if r.record != nil {
		hw = r.record.NormalizedHardware()
	}
	ts := make([]Transition, len(r.pending)) // one allocation for all
	r.ts = make([]*Transition, 0, len(r.pending))
	for i, nf := range r.pending {
		t := &ts[i]
		*t = *newTransition(r.cfg, nf, nf.Tuple(r.op, r.dcgm), r.record, r.rollback)
		t.recordHardware = hw
		t.Path, t.RecordPath, t.RKE2, t.RKE2Path = pathSelector, pathRecord, r.rke2, r.rke2Path
		t.CheckHolders = true
		r.ts = append(r.ts, t)
	}
}

func allAtDestination(ts []*Transition) bool {
	for _, t := range ts {
		if !t.atDestination() {
			return false
		}
	}
	return true
}

func (r *PlanReview) finish(d Decision, f findings) Decision {
	var old map[string]string
	if r.req.OldPlan != nil {
		old = r.req.OldPlan.Annotations
	}
	return r.cfg.finish(d, f, r.req.User, r.req.Plan.Annotations, old)
}

// rke2Target is the RKE2 version the Plan installs: spec.version for an RKE2
// Plan (the target rule holds it to the record), else the record's target.
func (r *PlanReview) rke2Target() (string, *field.Path) {
	spec := r.req.Plan.Spec
	if !r.rke2Plan || spec.Version == "" {
		if r.dest == nil {
			return "", pathRecord
		}
		return r.dest.RKE2, pathRecord
	}
	return spec.Version, pathVersion
}

// isRKE2Plan: the upgrade image is a configured RKE2 repository (on any
// registry, so mirrors count), or spec.version parses as an RKE2 version
// whatever the image, so an unknown spelling fails closed, never open. An
// image that does not parse is the image rule's (imageErr).
func (r *PlanReview) isRKE2Plan() bool {
	spec := r.req.Plan.Spec
	rke2 := false
	if _, err := ParseRKE2(spec.Version); err == nil {
		rke2 = true
	}
	if spec.Upgrade == nil {
		return rke2
	}
	img, err := ParseImage(spec.Upgrade.Image)
	if r.imageErr = err; err != nil {
		return rke2
	}
	return rke2 || r.cfg.isRKE2Image(img)
}

// canaryProven: some Ready, schedulable node of the record's hardware runs
// the destination tuple already, and is proven.
func (r *PlanReview) canaryProven(d *Decision) bool {
	if r.dest == nil {
		return false
	}
	for _, n := range r.atDestination() {
		if n.Spec.Unschedulable || !isReady(n) {
			continue
		}
		p := r.cfg.Prove(r.cl, n, r.req.Now)
		d.noteProof(r.cfg, p)
		if p.Proven() {
			return true
		}
	}
	return false
}

func names(fs []NodeFacts) []string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = f.Name
	}
	return s
}

// nodeList keeps messages short on large selections.
func nodeList(ns []string) string {
	const show = 5
	if len(ns) <= show {
		return strings.Join(ns, ",")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ns[:show], ","), len(ns)-show)
}

func codeList(cs []Code) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = string(c)
	}
	return strings.Join(s, ",")
}
