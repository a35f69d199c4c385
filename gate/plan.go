package gate

import (
	"errors"
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
// works out which GPU nodes the Plan would upgrade; the adapter lists the GPU
// holders of just those nodes (HolderNodes); Decide answers.
type PlanReview struct {
	cfg    *Config
	cl     *Cluster
	req    PlanRequest
	object string

	exemption string
	selErr    error
	targets   int // nodes selected
	nonGPU    []string
	gpu       []NodeFacts
	current   map[string]qualification.Tuple

	recordName string
	record     *qualification.Record
	recordErr  error
	found      bool
	rollback   bool
	from       *qualification.Tuple // the tuple pending nodes must run now, when the record says
	dest       *qualification.Tuple // the tuple the Plan moves nodes to
	pending    []NodeFacts
	done       []string
}

// PreparePlan selects the Plan's nodes and splits its GPU nodes into done
// (already at the destination tuple) and pending.
func PreparePlan(cfg *Config, cl *Cluster, req PlanRequest) *PlanReview {
	return preparePlan(cfg, cl, req, nil)
}

// preparePlan is PreparePlan with the Plan's selector when the caller has it.
func preparePlan(cfg *Config, cl *Cluster, req PlanRequest, sel *PlanSelector) *PlanReview {
	p := req.Plan
	r := &PlanReview{cfg: cfg, cl: cl, req: req, object: "Plan " + p.Namespace + "/" + p.Name, current: map[string]qualification.Tuple{}}
	if r.exemption = cfg.exemption("plans", req.User, p.Namespace, p.Labels); r.exemption != "" {
		return r
	}
	if sel == nil {
		var err error
		if sel, err = NewPlanSelector(p); err != nil {
			r.selErr = err
			return r
		}
	}
	op, dcgm := clusterVersions(cl)
	for _, n := range cl.Nodes {
		if !sel.Matches(n) {
			continue
		}
		r.targets++
		if !cfg.IsGPUNode(n) {
			r.nonGPU = append(r.nonGPU, n.Name)
			continue
		}
		f := cfg.FactsOf(n)
		r.gpu = append(r.gpu, f)
		r.current[f.Name] = f.current(op, dcgm)
	}
	slices.SortFunc(r.gpu, func(a, b NodeFacts) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(r.nonGPU)

	r.recordName = p.Annotations[AnnotationQualification]
	var entry RecordEntry
	entry, r.found = cl.Records[r.recordName]
	r.record, r.recordErr = entry.Record, entry.Err
	r.rollback = p.Annotations[AnnotationRollback] == "true"
	if r.record != nil {
		r.dest, r.from = &r.record.Target, r.record.Source
		if r.rollback && r.record.Source != nil {
			r.dest, r.from = r.record.Source, &r.record.Target
		}
	}
	for _, f := range r.gpu {
		if r.dest != nil && SameTuple(r.current[f.Name], *r.dest) {
			r.done = append(r.done, f.Name)
			continue
		}
		r.pending = append(r.pending, f)
	}
	return r
}

// HolderNodes are the nodes whose GPU holders Decide needs.
func (r *PlanReview) HolderNodes() []string {
	names := make([]string, len(r.pending))
	for i, f := range r.pending {
		names[i] = f.Name
	}
	return names
}

// Decide applies every Plan rule and reports all violations together.
// holders maps node name to its GPU holders; holdersErr is the adapter's
// failure to list them, which fails the review closed.
func (r *PlanReview) Decide(holders map[string][]Holder, holdersErr error) Decision {
	d := Decision{Object: r.object, Nodes: r.HolderNodes()}
	if r.exemption != "" {
		d.Allowed, d.Exemption = true, r.exemption
		d.Warnings = append(d.Warnings, fmt.Sprintf("gpu-upgrade-gate: exempt by %q; no rule was applied", r.exemption))
		return d
	}
	var bs blockers
	p := r.req.Plan
	if r.selErr != nil {
		bs.invalid(CodeSelectorInvalid, "", pathSelector, p.Spec.NodeSelector, "%v; fix the selector (SUC would fail on it too)", r.selErr)
		return r.finish(d, bs)
	}
	if p.Spec.NodeSelector == nil {
		d.Warnings = append(d.Warnings, "spec.nodeSelector is absent: SUC selects no node for this Plan")
	}
	if len(r.gpu) == 0 {
		return r.finish(d, bs)
	}
	r.planShape(&bs)
	r.recordRules(&bs, &d)
	r.nodeRules(&bs, holders, holdersErr)
	r.waveRules(&bs)
	r.inFlight(&bs)
	if len(r.pending) == 0 && r.dest != nil {
		d.Warnings = append(d.Warnings, "every GPU node this Plan selects already runs the record's target tuple")
	}
	return r.finish(d, bs)
}

func (r *PlanReview) finish(d Decision, bs blockers) Decision {
	return r.cfg.finish(d, bs, r.req.User, r.req.Plan.Annotations)
}

// planShape: rules that read only the Plan and its selection.
func (r *PlanReview) planShape(bs *blockers) {
	spec := r.req.Plan.Spec
	if len(r.nonGPU) > 0 {
		bs.forbid(CodeMixedPlan, "", pathSelector, "the Plan selects %d GPU node(s) (%s) and %d non-GPU node(s) (%s); give GPU nodes their own serialized Plan and exclude them from this one (e.g. nvidia.com/gpu.present DoesNotExist)",
			len(r.gpu), nodeList(names(r.gpu)), len(r.nonGPU), nodeList(r.nonGPU))
	}
	if spec.Version == "" {
		what := "spec.version is empty"
		if spec.Channel != "" {
			what = fmt.Sprintf("spec.version is empty and spec.channel %q moves under a qualified record", spec.Channel)
		}
		bs.add(CodeUnpinnedVersion, "", field.Required(pathVersion, what+"; pin spec.version to the record's qualified version"))
	}
	if spec.Concurrency != 1 {
		bs.invalid(CodeConcurrencyNotSerial, "", pathConcurrency, spec.Concurrency, "concurrency is %d; GPU Plans must upgrade one node at a time: set spec.concurrency: 1", spec.Concurrency)
	}
	if !spec.Cordon && spec.Drain == nil {
		bs.add(CodeCordonRequired, "", field.Required(pathCordon, "neither spec.cordon: true nor spec.drain is set, so new GPU work could land on a node mid-upgrade; set spec.cordon: true (or a drain)"))
	}
}

// recordRules: the record named by the Plan must exist, load, be qualified,
// fresh, complete, and approved by someone other than the requester.
func (r *PlanReview) recordRules(bs *blockers, d *Decision) {
	if r.recordName == "" {
		bs.add(CodeRecordMissing, "", field.Required(pathRecord, fmt.Sprintf("the Plan names no qualification record; annotate it with %s=<ConfigMap in namespace %s labelled %s=true>", AnnotationQualification, r.cfg.Namespace, qualification.ConfigMapLabel)))
		return
	}
	rec := r.cfg.checkRecord(bs, recordCheck{name: r.recordName, entry: RecordEntry{Record: r.record, Err: r.recordErr}, found: r.found,
		user: r.req.User, now: r.req.Now, path: pathRecord, rollback: r.rollback, subject: "Plan", act: "applying this Plan"})
	if rec == nil {
		return
	}
	d.Record = r.recordInfo()
	if exp, err := rec.Expiry(r.cfg.MaxCanaryAge.Duration); err == nil && r.req.Now.Before(exp) && exp.Sub(r.req.Now) <= r.cfg.ExpiryWarning.Duration {
		d.Warnings = append(d.Warnings, fmt.Sprintf("record %s expires at %s (in %s); renew the canary evidence soon", rec.ID, exp.UTC().Format(time.RFC3339), exp.Sub(r.req.Now).Round(time.Minute)))
	}
}

// recordCheck is one named record and who asks to use it.
type recordCheck struct {
	name     string
	entry    RecordEntry
	found    bool
	user     UserInfo
	now      time.Time
	path     *field.Path
	rollback bool
	// subject and act word the messages: "Plan", "applying this Plan".
	subject, act string
}

// checkRecord applies what every named record must pass, for Plans and the
// driver path alike: it exists and loads, is qualified, complete and fresh,
// its versions parse, it was approved by someone other than the requester,
// and a rollback has a source to go back to. It returns the record when it
// loaded, for the rules that compare tuples.
func (c *Config) checkRecord(bs *blockers, rc recordCheck) *qualification.Record {
	ns := c.Namespace
	switch {
	case !rc.found:
		bs.add(CodeRecordMissing, "", &field.Error{Type: field.ErrorTypeNotFound, Field: rc.path.String(), BadValue: rc.name,
			Detail: fmt.Sprintf("no ConfigMap %s/%s labelled %s=true holds a record; create it, or fix the annotation", ns, rc.name, qualification.ConfigMapLabel)})
		return nil
	case rc.entry.Err != nil || rc.entry.Record == nil:
		bs.invalid(CodeRecordInvalid, "", rc.path, rc.name, "record ConfigMap %s/%s does not load: %v; fix the record and have it reviewed again", ns, rc.name, rc.entry.Err)
		return nil
	}
	rec := rc.entry.Record
	recordProblems(bs, rec, rc.name, qualification.Freshness{Now: rc.now, MaxAge: c.MaxCanaryAge.Duration, ClockSkew: c.ClockSkew.Duration})
	if approver := strings.TrimSpace(rec.ApprovedBy); approver != "" && strings.EqualFold(approver, rc.user.Name) {
		bs.forbid(CodeSelfApproved, "", rc.path, "record %s was approved by %q, who is also %s; a second person must apply it (two-person rule)", rec.ID, approver, rc.act)
	}
	if rc.rollback && rec.Source == nil {
		bs.invalid(CodeRecordInvalid, "", pathRollback, "true", "the %s asks for a rollback but record %s has no source tuple to roll back to; use a %s record with source", rc.subject, rec.ID, qualification.APIVersionGate)
	}
	for _, e := range recordVersionErrors(rec) {
		bs.invalid(CodeVersionInvalid, "", rc.path, e.value, "record %s %s: %v", rec.ID, e.field, e.err)
	}
	return rec
}

// recordProblems maps the record's problems to reason codes.
func recordProblems(bs *blockers, rec *qualification.Record, name string, f qualification.Freshness) {
	for _, p := range qualification.Check(rec, f) {
		bs.invalid(problemCodes[p.Kind], "", pathRecord, name, "record %s: %s", rec.ID, p.Err.Error())
	}
}

func (r *PlanReview) recordInfo() *RecordInfo {
	rec := r.record
	info := &RecordInfo{ConfigMap: r.recordName, ID: rec.ID, SourceRevision: strings.ToLower(rec.SourceRevision), ApprovedBy: rec.ApprovedBy, CompletedAt: rec.Canary.CompletedAt}
	if exp, err := rec.Expiry(r.cfg.MaxCanaryAge.Duration); err == nil {
		info.Expires = exp.UTC().Format(time.RFC3339)
	}
	return info
}

// nodeRules: per GPU node, hardware; per pending node, facts, source,
// versions, downgrades and holders. Without a usable record the rules that
// need one are skipped (the record blocker already denies).
func (r *PlanReview) nodeRules(bs *blockers, holders map[string][]Holder, holdersErr error) {
	rec := r.record
	var want []string
	if rec != nil {
		want = rec.NormalizedHardware()
	}
	for _, f := range r.gpu {
		switch {
		case len(f.Identities) == 0:
			bs.forbid(CodeHardwareUnknown, f.Name, pathSelector, "GPU node %s has no subsystem-qualified GPU identity label, so its hardware cannot be matched to a record; %s", f.Name, nodeFeatureRuleDoc)
		case rec != nil && !slices.Equal(f.Identities, want):
			bs.forbid(CodeHardwareNotQualified, f.Name, pathSelector, "node %s has GPU hardware %s but record %s qualifies %s; select only nodes of the qualified hardware, or qualify this hardware on its own canary", f.Name, strings.Join(f.Identities, ","), rec.ID, strings.Join(want, ","))
		}
	}
	version, versionPath := r.rke2Target(bs)
	target, targetErr := ParseRKE2(version)
	if targetErr != nil && version != "" && versionPath == pathVersion {
		bs.invalid(CodeVersionInvalid, "", pathVersion, version, "%v", targetErr)
	}
	if targetErr == nil {
		r.skewRule(bs, target, versionPath)
	}
	for _, f := range r.pending {
		cur := r.current[f.Name]
		if r.cfg.factsPresent(bs, f, cur, pathSelector) {
			if r.from != nil && !SameTuple(cur, *r.from) {
				bs.forbid(CodeSourceMismatch, f.Name, pathSelector, "node %s does not run record %s's source tuple: %s; upgrade it to the source tuple first, or use a record whose source it runs", f.Name, rec.ID, strings.Join(tupleDiff(cur, *r.from), ", "))
			}
			if targetErr == nil {
				r.rke2Rules(bs, f, target, version, versionPath)
			}
			if r.dest != nil {
				r.downgradeRules(bs, f, cur)
			}
		}
		if holdersErr != nil {
			bs.forbid(CodeFactsMissing, f.Name, pathSelector, "the GPU holders on node %s could not be listed (%v); retry when the API server answers", f.Name, holdersErr)
		} else if hs := holders[f.Name]; len(hs) > 0 {
			bs.forbid(CodeGPUHolders, f.Name, pathSelector, "node %s runs %d GPU holder(s): %s; stop or migrate them (or drain the node) before upgrading it", f.Name, len(hs), holderList(hs))
		}
	}
}

// rke2Target is the RKE2 version the Plan installs: spec.version for an RKE2
// Plan (which must match the record), else the record's target.
func (r *PlanReview) rke2Target(bs *blockers) (string, *field.Path) {
	spec := r.req.Plan.Spec
	if !r.isRKE2Plan() || spec.Version == "" {
		if r.dest == nil {
			return "", pathRecord
		}
		return r.dest.RKE2, pathRecord
	}
	if r.dest != nil && !SameComponent(ComponentRKE2, spec.Version, r.dest.RKE2) {
		bs.invalid(CodeTargetNotQualified, "", pathVersion, spec.Version, "the Plan installs RKE2 %s but record %s qualifies %s; set spec.version to the qualified version or qualify this one on a canary", spec.Version, r.record.ID, r.dest.RKE2)
	}
	if tag, ok := ImageVersion(spec.Upgrade.Image); ok && !SameComponent(ComponentRKE2, tag, spec.Version) {
		bs.invalid(CodeTargetNotQualified, "", pathImage, spec.Upgrade.Image, "the upgrade image is pinned to %s, which SUC runs instead of spec.version %s; drop the tag so SUC uses spec.version", tag, spec.Version)
	}
	return spec.Version, pathVersion
}

func (r *PlanReview) isRKE2Plan() bool {
	up := r.req.Plan.Spec.Upgrade
	return up != nil && slices.Contains(r.cfg.RKE2Images, ImageRepository(up.Image))
}

// factsPresent reports every fact a pending node lacks, naming where each
// comes from; the rules that need them are skipped for that node rather than
// guessed. Plans and the driver path share it.
func (c *Config) factsPresent(bs *blockers, f NodeFacts, cur qualification.Tuple, path *field.Path) bool {
	var missing []string
	if cur.Kernel == "" {
		missing = append(missing, "kernel (status.nodeInfo.kernelVersion)")
	}
	if cur.RKE2 == "" {
		missing = append(missing, "RKE2 (status.nodeInfo.kubeletVersion)")
	}
	if cur.Driver == "" {
		missing = append(missing, "driver (label nvidia.com/cuda.driver-version.full from GPU Feature Discovery)")
	}
	if cur.GPUOperator == "" {
		missing = append(missing, fmt.Sprintf("GPU Operator version (image tag of Deployment %s/%s)", c.GPUOperator.Namespace, c.GPUOperator.Name))
	}
	if cur.DCGMExporter == "" {
		missing = append(missing, fmt.Sprintf("DCGM exporter version (image of DaemonSet %s/%s)", c.DCGMExporter.Namespace, c.DCGMExporter.Name))
	}
	if len(missing) > 0 {
		bs.forbid(CodeFactsMissing, f.Name, path, "node %s: cannot read %s; the gate decides only on facts it can read", f.Name, strings.Join(missing, ", "))
	}
	return len(missing) == 0
}

func (r *PlanReview) skewRule(bs *blockers, target RKE2Version, path *field.Path) {
	server, err := ParseKube(r.cl.ServerVersion)
	if err != nil {
		bs.forbid(CodeFactsMissing, "", path, "the API server version %q cannot be read (%v), so Kubernetes version skew cannot be checked", r.cl.ServerVersion, err)
		return
	}
	if target.Major > server.Major || (target.Major == server.Major && target.Minor > server.Minor) {
		bs.invalid(CodeVersionSkew, "", path, target.String(), "RKE2 %s is newer than the API server v%d.%d; a kubelet may never be newer than the control plane: upgrade the servers first", target, server.Major, server.Minor)
	}
}

func (r *PlanReview) rke2Rules(bs *blockers, f NodeFacts, target RKE2Version, version string, path *field.Path) {
	cur, err := ParseRKE2(f.RKE2)
	if err != nil {
		bs.invalid(CodeVersionInvalid, f.Name, pathSelector, f.RKE2, "node %s kubelet version: %v", f.Name, err)
		return
	}
	if target.Compare(cur) < 0 {
		bs.invalid(CodeRKE2Downgrade, f.Name, path, version, "node %s runs RKE2 %s and the Plan would install %s; RKE2 cannot be downgraded: restore from an etcd snapshot instead", f.Name, f.RKE2, version)
	}
	if target.Major == cur.Major && target.Minor > cur.Minor+1 {
		bs.invalid(CodeMinorSkip, f.Name, path, version, "node %s runs Kubernetes 1.%d and %s is 1.%d; upgrade one minor at a time (next: 1.%d)", f.Name, cur.Minor, version, target.Minor, cur.Minor+1)
	}
}

// downgradeRules: a kernel, driver, GPU Operator or DCGM exporter older
// than the node's is a rollback, allowed only when the record proves it.
func (r *PlanReview) downgradeRules(bs *blockers, f NodeFacts, cur qualification.Tuple) {
	proven := r.rollback && r.record.Source != nil && r.record.Canary.RollbackPassed
	for _, c := range []Component{ComponentKernel, ComponentDriver, ComponentGPUOperator, ComponentDCGMExporter} {
		have, want := TupleValue(cur, c), TupleValue(*r.dest, c)
		cmp, err := CompareComponent(c, want, have)
		if err != nil {
			var verr *VersionError
			if errors.As(err, &verr) && verr.Value == have {
				bs.invalid(CodeVersionInvalid, f.Name, pathSelector, have, "node %s %s: %v", f.Name, c, err)
			}
			continue
		}
		if cmp < 0 && !proven {
			bs.forbid(CodeComponentDowngrade, f.Name, pathRecord, "node %s runs %s %s and record %s targets the older %s; a rollback is allowed only as a proven rollback (a %s record with source, rollbackPassed: true, and the Plan annotated %s=true)", f.Name, c, have, r.record.ID, want, qualification.APIVersionGate, AnnotationRollback)
		}
	}
}

// waveRules: one canary at a time; a wider wave only after a proven canary,
// and within one failure domain.
func (r *PlanReview) waveRules(bs *blockers) {
	n := len(r.pending)
	if n > r.cfg.WaveSize {
		bs.forbid(CodeMultipleCanaries, "", pathSelector, "the Plan would upgrade %d GPU nodes (%s) but the wave size is %d; narrow spec.nodeSelector (e.g. kubernetes.io/hostname In [one node]) or label nodes %s%s=disabled", n, nodeList(r.HolderNodes()), r.cfg.WaveSize, "plan.upgrade.cattle.io/", r.req.Plan.Name)
	}
	if r.cfg.WaveSize <= 1 || n <= 1 {
		return
	}
	if r.record != nil && !r.canaryProven() {
		bs.forbid(CodeCanaryNotProven, "", pathSelector, "a wave of %d GPU nodes needs a canary first, but no Ready, schedulable node of hardware %s runs the target tuple yet; upgrade one canary node, then widen the wave", n, strings.Join(r.record.NormalizedHardware(), ","))
	}
	zones := map[string]bool{}
	for _, f := range r.pending {
		zones[f.Zone] = true
	}
	if len(zones) > 1 {
		bs.forbid(CodeCrossFailureDomain, "", pathSelector, "the wave spans zones %s; keep one wave within one %s so a bad tuple cannot take out every zone", strings.Join(sortedKeys(zones), ","), LabelZone)
	}
}

func (r *PlanReview) canaryProven() bool {
	want := r.record.NormalizedHardware()
	keys := identityLabels(want)
	op, dcgm := clusterVersions(r.cl)
	for _, n := range r.cl.Nodes {
		// The cheap necessary conditions first (cordon, kernel, Ready, the
		// identity's label), the node's full facts last: a scan of every node
		// must not read every node's labels.
		if n.Spec.Unschedulable || !SameComponent(ComponentKernel, kernelOf(n), r.dest.Kernel) || !isReady(n) || !anyTrue(n.Labels, keys) {
			continue
		}
		cur := qualification.Tuple{Kernel: kernelOf(n), RKE2: n.Status.NodeInfo.KubeletVersion, Driver: driverOf(n.Labels), GPUOperator: op, DCGMExporter: dcgm}
		if !SameTuple(cur, *r.dest) || !r.cfg.IsGPUNode(n) {
			continue
		}
		if slices.Equal(r.cfg.FactsOf(n).Identities, want) {
			return true
		}
	}
	return false
}

// inFlight: SUC deletes running upgrade Jobs when the version changes.
func (r *PlanReview) inFlight(bs *blockers) {
	old := r.req.OldPlan
	if r.req.Operation != "UPDATE" || old == nil || len(old.Status.Applying) == 0 {
		return
	}
	p := r.req.Plan
	if old.Spec.Version != p.Spec.Version || old.Spec.Channel != p.Spec.Channel {
		bs.invalid(CodeVersionEditInFlight, "", pathVersion, p.Spec.Version, "the version changes from %q to %q while SUC is upgrading %s; SUC would delete those running Jobs mid-upgrade: wait until status.applying is empty", old.Spec.Version, p.Spec.Version, strings.Join(old.Status.Applying, ","))
	}
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
