package gate

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// The change record of one rollout (issue 26 item 3): what the seed asks
// each change to keep (objective, version diff, compatibility source,
// canary scope, validation results, observation window, rollback trigger,
// failures), derived from what the gate already reads: the Plan, the
// record, the nodes and their proof, and the halt record. The gate keeps no
// new state for it; docs/rollout.md#change-record says what that costs
// (the record of a deleted Plan) and what keeps it (the audit log).

// ChangeSubject names the rollout: a stored Plan, or (the GPU Operator's
// driver path, whose ClusterPolicy or NVIDIADriver the cluster view does
// not hold) the record a driver change was made under.
type ChangeSubject struct {
	Plan *upgradev1.Plan
	// Record is the record ConfigMap's name, for a driver change.
	Record string
}

// Node tuple states in a change record: where a node of the rollout stands
// between the record's source and target.
const (
	ChangeAtSource  = "source"
	ChangeAtTarget  = "target"
	ChangeHalfway   = "between"
	ChangeElsewhere = "other"
)

// ProofNotThere is the proof state of a node of the rollout that does not
// run the rollout's destination tuple yet (not judged); a node that does
// has NodeProof.State.
const ProofNotThere = "not-at-destination"

// Failure states of a change record.
const (
	FailureHalted         = "halted"          // the halt record holds it
	FailureClearRequested = "clear-requested" // a clear annotation is on the halt record; the halt loop removes it next
	FailureCleared        = "cleared"         // a person cleared it; its signal is still visible
	FailureDetected       = "detected"        // seen now; the halt loop records it on its next turn
	FailureUnreadable     = "unreadable"      // the halt record cannot be read: every rollout is halted
)

// ChangeRecord is the change record of one rollout. Keys are a stable
// interface (-o json): every one is always present.
type ChangeRecord struct {
	// Rollout names it: "Plan <ns>/<name>" or "driver change under record <name>".
	Rollout string `json:"rollout"`
	// Objective says what the rollout moves where, and the change's
	// reference (the record's canary.evidence).
	Objective string `json:"objective"`
	// Requester is the Plan's requester as the Plan webhook attested it
	// (gpu-upgrade-gate.io/requested-by); "" when none is kept.
	Requester   string            `json:"requester"`
	VersionDiff ChangeVersionDiff `json:"versionDiff"`
	// Record is the compatibility source.
	Record ChangeSource `json:"record"`
	Canary ChangeCanary `json:"canary"`
	// Nodes are the rollout's GPU nodes, by name: each one's proof.
	Nodes             []ChangeNode    `json:"nodes"`
	ObservationWindow ChangeWindow    `json:"observationWindow"`
	RollbackTrigger   ChangeRollback  `json:"rollbackTrigger"`
	Failures          []ChangeFailure `json:"failures"`
	// Notes say what the cluster state does not keep for this rollout.
	Notes []string `json:"notes"`
	// At is when it was read.
	At      time.Time         `json:"at"`
	subject changeSubjectKind `json:"-"`
}

type changeSubjectKind int

const (
	subjectPlan changeSubjectKind = iota
	subjectDriver
)

// ChangeVersionDiff is the move from one tuple to another.
type ChangeVersionDiff struct {
	// From is the record's source tuple (the target for a rollback); null
	// when the record names none.
	From *qualification.Tuple `json:"from"`
	To   qualification.Tuple  `json:"to"`
	// Changes are the components that differ, "kernel a -> b".
	Changes []string `json:"changes"`
}

// ChangeSource is the record the rollout runs under.
type ChangeSource struct {
	// ConfigMap is "namespace/name" (the gate's namespace).
	ConfigMap string `json:"configMap"`
	ID        string `json:"id"`
	// Ref is id@sourceRevision, as audit annotations name it.
	Ref         string `json:"ref"`
	State       string `json:"state"`
	Approval    string `json:"approval"`
	CompletedAt string `json:"completedAt"`
	Evidence    string `json:"evidence"`
	// Canary are its three pass/fail proofs, as written.
	Canary []string `json:"canary"`
	// Problems are why it would not qualify a Plan now (stale, ...).
	Problems []string `json:"problems"`
}

// ChangeCanary is the canary scope: the hardware, the nodes that proved the
// tuple before the wave, and the figures the record's canary measured.
type ChangeCanary struct {
	Hardware []string `json:"hardware"`
	// Products are the GPU products GFD reports on the hardware's nodes.
	Products []string `json:"products"`
	// Nodes are the hardware's nodes at the destination outside the rollout
	// (the canary the wave followed); when there are none, the rollout's node
	// that reached it first.
	Nodes []string `json:"nodes"`
	// Figures are the record's typed canary checks.
	Figures []ChangeFigure `json:"figures"`
}

// ChangeFigure is one measured or pass/fail result.
type ChangeFigure struct {
	Check   string `json:"check"`
	Summary string `json:"summary"`
	// Outside: beyond its threshold (or failed).
	Outside     bool                      `json:"outside"`
	Explanation string                    `json:"explanation"`
	Result      qualification.CanaryCheck `json:"result"`
}

// ChangeNode is one node of the rollout.
type ChangeNode struct {
	Node    string              `json:"node"`
	Tuple   string              `json:"tuple"`
	Current qualification.Tuple `json:"current"`
	// Job is its last SUC Job of the Plan and that Job's state, "" if none.
	Job      string `json:"job"`
	Cordoned bool   `json:"cordoned"`
	// Proof is proven, unproven or not-at-destination; ProofMissing what is
	// missing, with the value seen.
	Proof        string   `json:"proof"`
	ProofMissing []string `json:"proofMissing"`
	ReachedAt    string   `json:"reachedAt"`
	// MovedBy is who pulled the node into the Plan (attested), if anyone.
	MovedBy string `json:"movedBy"`
	// Checks are the node's own check results (proof.checks) against the
	// record's baseline: the passes and the failures its proof reported.
	Checks []ChangeNodeCheck `json:"checks"`
}

// ChangeNodeCheck is one check result of an upgraded node: its summary
// (kind, figure, baseline) and whether it failed, which halts the rollout.
type ChangeNodeCheck struct {
	Summary string `json:"summary"`
	Failed  bool   `json:"failed"`
}

// ChangeWindow is the observation window: how long each upgraded node must
// hold its proof, and how long it may take to come back.
type ChangeWindow struct {
	Soak            string             `json:"soak"`
	RecoveryTimeout string             `json:"recoveryTimeout"`
	Requirements    []ProofRequirement `json:"requirements"`
	Disabled        []ProofRequirement `json:"disabled"`
}

// ChangeRollback is the rollback trigger: the signals that halt the
// rollout, and the way back.
type ChangeRollback struct {
	Signals  []string `json:"signals"`
	Rollback string   `json:"rollback"`
}

// ChangeFailure is one halt of the rollout and its clear.
type ChangeFailure struct {
	State       string `json:"state"`
	Node        string `json:"node"`
	Signal      string `json:"signal"`
	SeenAt      string `json:"seenAt"`
	Plan        string `json:"plan"`
	RequestedBy string `json:"requestedBy"`
	MovedBy     string `json:"movedBy"`
	ClearReason string `json:"clearReason"`
	ClearedAt   string `json:"clearedAt"`
}

// ChangeRecordOf builds the change record of a rollout at now. It fails
// only when the rollout cannot be tied to a loaded record.
func (c *Config) ChangeRecordOf(cl *Cluster, s ChangeSubject, now time.Time) (*ChangeRecord, error) {
	if s.Plan == nil && s.Record == "" {
		return nil, ErrNoRollout
	}
	cr := &ChangeRecord{At: now.UTC(), Nodes: []ChangeNode{}, Failures: []ChangeFailure{}, Notes: []string{}}
	name := s.Record
	rollback := false
	if p := s.Plan; p != nil {
		cr.Rollout = "Plan " + p.Namespace + "/" + p.Name
		name = p.Annotations[AnnotationQualification]
		if name == "" {
			return nil, fmt.Errorf("%s names no record (annotation %s): it is no GPU rollout the gate admitted", cr.Rollout, AnnotationQualification)
		}
		cr.Requester = p.Annotations[AnnotationRequestedBy]
		rollback = p.Annotations[AnnotationRollback] == "true"
	} else {
		cr.subject = subjectDriver
		cr.Rollout = "driver change under record " + name
		cr.Notes = append(cr.Notes, "a driver change's requester and object are not part of the cluster state: the API server's audit log of the ClusterPolicy or NVIDIADriver write names them")
	}
	e, ok := cl.Records[name]
	switch {
	case !ok:
		return nil, fmt.Errorf("%s: record ConfigMap %s/%s (labelled %s) is not loaded", cr.Rollout, c.Namespace, name, qualification.ConfigMapLabel)
	case e.Err != nil || e.Record == nil:
		return nil, fmt.Errorf("%s: record ConfigMap %s/%s does not load: %v", cr.Rollout, c.Namespace, name, e.Err)
	}
	rec := e.Record
	cr.Record = c.changeSource(name, e, now)
	hw := rec.NormalizedHardware()

	from, to := rec.Source, rec.Target
	if rollback && rec.Source != nil {
		t := rec.Target
		from, to = &t, *rec.Source
	}
	cr.VersionDiff = ChangeVersionDiff{From: from, To: to, Changes: versionChanges(from, to)}

	nodes, jobs := c.rolloutNodes(cl, s, hw)
	op, dcgm := clusterVersions(cl)
	type reached struct {
		node string
		at   time.Time
	}
	var first *reached
	for _, n := range nodes {
		f := c.FactsOf(n)
		cur := f.Tuple(op, dcgm)
		cn := ChangeNode{Node: n.Name, Current: cur, Cordoned: n.Spec.Unschedulable, Proof: ProofNotThere,
			ProofMissing: []string{}, MovedBy: n.Annotations[AnnotationMovedBy], Checks: []ChangeNodeCheck{}}
		cn.Tuple = tupleState(cur, rec)
		if j := lastJob(jobs[n.Name]); j != nil {
			cn.Job = j.Namespace + "/" + j.Name + ": " + jobState(j)
		}
		if SameTuple(cur, to) {
			p := c.Prove(cl, n, now)
			cn.Proof, cn.ReachedAt = p.State(), stampOrEmpty(p.ReachedAt)
			cn.ProofMissing = append(cn.ProofMissing, p.Missing...)
			for _, pass := range p.Checks {
				cn.Checks = append(cn.Checks, ChangeNodeCheck{Summary: pass})
			}
			for _, f := range p.Failures {
				cn.Checks = append(cn.Checks, ChangeNodeCheck{Summary: f.Signal, Failed: true})
			}
			// The earliest node there; one with no reached time only until
			// one with a time is seen.
			if first == nil || (!p.ReachedAt.IsZero() && (first.at.IsZero() || p.ReachedAt.Before(first.at))) {
				first = &reached{n.Name, p.ReachedAt}
			}
		}
		cr.Nodes = append(cr.Nodes, cn)
	}

	cr.Canary = ChangeCanary{Hardware: hw, Products: []string{}, Nodes: []string{}, Figures: []ChangeFigure{}}
	inRollout := func(name string) bool {
		return slices.ContainsFunc(cr.Nodes, func(cn ChangeNode) bool { return cn.Node == name })
	}
	for _, n := range cl.Nodes {
		if !c.IsGPUNode(n) {
			continue
		}
		f := c.FactsOf(n)
		if !slices.Equal(f.Identities, hw) {
			continue
		}
		if p := n.Labels[labelGPUProduct]; p != "" && !slices.Contains(cr.Canary.Products, p) {
			cr.Canary.Products = append(cr.Canary.Products, p)
		}
		if !inRollout(n.Name) && SameTuple(f.Tuple(op, dcgm), to) {
			cr.Canary.Nodes = append(cr.Canary.Nodes, n.Name)
		}
	}
	slices.Sort(cr.Canary.Products)
	slices.Sort(cr.Canary.Nodes)
	if len(cr.Canary.Nodes) == 0 && first != nil {
		cr.Canary.Nodes = append(cr.Canary.Nodes, first.node)
	}
	for _, ch := range rec.Canary.Checks {
		cr.Canary.Figures = append(cr.Canary.Figures, figureOf(ch))
	}

	cr.Objective = objective(cr, rec, rollback)
	cr.ObservationWindow = ChangeWindow{Soak: c.Proof.Soak.Duration.String(), RecoveryTimeout: c.Halts.RecoveryTimeout.Duration.String(),
		Requirements: []ProofRequirement{}, Disabled: []ProofRequirement{}}
	for _, r := range ProofRequirements {
		if c.Proof.On(r) {
			cr.ObservationWindow.Requirements = append(cr.ObservationWindow.Requirements, r)
		} else {
			cr.ObservationWindow.Disabled = append(cr.ObservationWindow.Disabled, r)
		}
	}
	cr.RollbackTrigger = c.rollbackTrigger(rec, cr.subject, rollback)
	cr.Failures = c.changeFailures(cl, s, rec, hw, now)
	return cr, nil
}

// labelGPUProduct is GFD's product name of a node's GPUs.
const labelGPUProduct = "nvidia.com/gpu.product"

func (c *Config) changeSource(name string, e RecordEntry, now time.Time) ChangeSource {
	rec := e.Record
	src := ChangeSource{ConfigMap: c.Namespace + "/" + name, ID: rec.ID, Ref: rec.Ref(), State: rec.State,
		Approval: c.approvalState(rec, e.Attestation), CompletedAt: rec.Canary.CompletedAt, Evidence: rec.Canary.Evidence, Problems: []string{}}
	for _, p := range []struct {
		name string
		ok   bool
	}{{"allocation", rec.Canary.AllocationPassed}, {"monitoring", rec.Canary.MonitoringPassed}, {"rollback", rec.Canary.RollbackPassed}} {
		verdict := "passed"
		if !p.ok {
			verdict = "not passed"
		}
		src.Canary = append(src.Canary, p.name+" "+verdict)
	}
	fresh := qualification.Freshness{Now: now, MaxAge: c.MaxCanaryAge.Duration, ClockSkew: c.ClockSkew.Duration}
	for _, err := range qualification.Check(rec, fresh).ErrorList() {
		src.Problems = append(src.Problems, err.Error())
	}
	return src
}

// rolloutNodes are the rollout's GPU nodes by name, and SUC's Jobs by node:
// for a Plan, the GPU nodes it selects or that ran its Job (an opted-out
// node is still the Plan's, issue 22); for a driver change, every GPU node
// of the record's hardware.
func (c *Config) rolloutNodes(cl *Cluster, s ChangeSubject, hw []string) ([]*corev1.Node, map[string][]*batchv1.Job) {
	jobs := map[string][]*batchv1.Job{}
	var sel *PlanSelector
	if p := s.Plan; p != nil {
		for _, j := range cl.Proof.UpgradeJobs {
			if j.Namespace == p.Namespace && j.Labels[upgradev1.LabelPlan] == p.Name {
				jobs[j.Labels[upgradev1.LabelNode]] = append(jobs[j.Labels[upgradev1.LabelNode]], j)
			}
		}
		sel, _ = NewPlanSelector(p) // a selector that does not parse selects no node; its Jobs still count
	}
	var out []*corev1.Node
	for _, n := range cl.Nodes {
		if !c.IsGPUNode(n) {
			continue
		}
		switch {
		case s.Plan == nil && slices.Equal(c.FactsOf(n).Identities, hw):
		case s.Plan != nil && ((sel != nil && sel.Selects(n)) || slices.ContainsFunc(jobs[n.Name], jobRan)):
		default:
			continue
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return out, jobs
}

func tupleState(cur qualification.Tuple, rec *qualification.Record) string {
	switch {
	case SameTuple(cur, rec.Target):
		return ChangeAtTarget
	case rec.Source != nil && SameTuple(cur, *rec.Source):
		return ChangeAtSource
	case rec.Source != nil && betweenTuples(cur, *rec.Source, rec.Target):
		return ChangeHalfway
	}
	return ChangeElsewhere
}

func lastJob(jobs []*batchv1.Job) *batchv1.Job {
	var last *batchv1.Job
	for _, j := range jobs {
		if last == nil || j.CreationTimestamp.After(last.CreationTimestamp.Time) {
			last = j
		}
	}
	return last
}

func jobState(j *batchv1.Job) string {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return "Failed (" + fleet.QuoteOrNone(c.Reason) + ")"
		}
	}
	switch {
	case !fleet.JobCompletion(j).IsZero():
		return "Complete"
	case !JobRuns(j.Spec):
		return "Paused"
	}
	return "Running"
}

func versionChanges(from *qualification.Tuple, to qualification.Tuple) []string {
	out := []string{}
	for i := range componentTable {
		s := &componentTable[i]
		w := s.Value(to)
		switch {
		case from == nil:
			out = append(out, string(s.Name)+" -> "+w)
		case !s.Same(nil, s.Value(*from), w):
			out = append(out, string(s.Name)+" "+s.Value(*from)+" -> "+w)
		}
	}
	return out
}

func figureOf(ch qualification.CanaryCheck) ChangeFigure {
	_, outside := ch.Deviation()
	return ChangeFigure{Check: ch.CheckName(), Summary: ch.Summary(), Outside: outside, Explanation: ch.Explanation, Result: ch}
}

func objective(cr *ChangeRecord, rec *qualification.Record, rollback bool) string {
	verb, where := "move", "record "+rec.ID+"'s target tuple"
	if rollback {
		verb, where = "roll back", "record "+rec.ID+"'s source tuple"
	}
	var names []string
	for _, n := range cr.Nodes {
		names = append(names, n.Node)
	}
	scope := fmt.Sprintf("%d GPU nodes (%s)", len(names), strings.Join(names, ", "))
	if len(names) == 0 {
		scope = "no GPU node yet"
	}
	changed := "no component"
	if len(cr.VersionDiff.Changes) > 0 {
		var comps []string
		for _, ch := range cr.VersionDiff.Changes {
			comps = append(comps, strings.Fields(ch)[0])
		}
		changed = strings.Join(comps, ", ")
	}
	ref := ""
	if ev := strings.TrimSpace(rec.Canary.Evidence); ev != "" {
		ref = "; change reference (the record's canary.evidence): " + qualification.Clip(ev)
	}
	return fmt.Sprintf("%s %s of hardware %s to %s (%s change)%s", verb, scope, strings.Join(rec.NormalizedHardware(), ","), where, changed, ref)
}

// rollbackTrigger lists the halt signals DetectHalts looks for, as this
// config sets them, and the way back.
func (c *Config) rollbackTrigger(rec *qualification.Record, subject changeSubjectKind, rollback bool) ChangeRollback {
	out := ChangeRollback{Signals: []string{}}
	switch {
	case rec.Source != nil && rec.Canary.RollbackPassed:
		out.Rollback = fmt.Sprintf("a Plan annotated %s=true back to record %s's source tuple, which its canary rolled back to (rollbackPassed)", AnnotationRollback, rec.ID)
	case rec.Source != nil:
		out.Rollback = fmt.Sprintf("a Plan annotated %s=true back to record %s's source tuple; not proven: the canary did not pass its rollback", AnnotationRollback, rec.ID)
	default:
		out.Rollback = fmt.Sprintf("not proven: record %s names no source tuple to roll back to", rec.ID)
	}
	if rollback {
		out.Signals = append(out.Signals, "none: a rollback Plan is the way out of a failed rollout and never halts")
		return out
	}
	timeout := c.Halts.RecoveryTimeout.Duration
	if subject == subjectDriver {
		// DetectHalts reads failure signals through stored forward Plans;
		// on the driver path only a stranded node, and any halt of the
		// hardware, hold it (the GPU Operator keeps its own upgrade-failed).
		out.Signals = append(out.Signals,
			fmt.Sprintf("a cordoned node of the hardware on neither the record's source nor its target tuple (half applied), with no live SUC Job, %s after it last moved", timeout),
			"any halt of the hardware: the signals below, seen on a node a stored forward GPU Plan under one of its records moves")
	} else {
		out.Signals = append(out.Signals, "the Plan's SUC Job for a node failed")
	}
	out.Signals = append(out.Signals, fmt.Sprintf("label %s=upgrade-failed on a node", LabelDriverUpgradeState))
	for _, h := range c.Proof.HealthConditions {
		out.Signals = append(out.Signals, fmt.Sprintf("node condition %s=%s", h.Type, h.UnhealthyStatus))
	}
	out.Signals = append(out.Signals, fmt.Sprintf("a node on neither the record's source nor its target tuple (half applied) %s after its upgrade moved", timeout))
	if c.Proof.On(ProofReady) {
		out.Signals = append(out.Signals, fmt.Sprintf("node Ready not back within %s of its upgrade", timeout))
	}
	if c.Proof.On(ProofValidator) {
		out.Signals = append(out.Signals, fmt.Sprintf("validator Pod (%s) not Ready within %s of the upgrade", c.Proof.Validator.Selector, timeout))
	}
	for _, nc := range c.Proof.Checks {
		out.Signals = append(out.Signals, fmt.Sprintf("a node's %s check beyond the record's allowed deviation from its baseline, or failed", nc))
	}
	return out
}

// changeFailures are the rollout's halts: kept, being cleared, cleared (the
// halt record keeps a cleared halt while its signal is visible), and seen
// now but not yet recorded.
func (c *Config) changeFailures(cl *Cluster, s ChangeSubject, rec *qualification.Record, hw []string, now time.Time) []ChangeFailure {
	out := []ChangeFailure{}
	if err := cl.Halts.Err; err != nil {
		return append(out, ChangeFailure{State: FailureUnreadable, Signal: fmt.Sprintf("halt record %s cannot be read: %v", cl.Halts.Name, err)})
	}
	key := HardwareKey(hw)
	ours := func(h Halt) bool {
		if s.Plan != nil {
			return h.Plan == s.Plan.Namespace+"/"+s.Plan.Name
		}
		return h.Record == rec.ID && h.HardwareKey() == key
	}
	failure := func(state string, h Halt) ChangeFailure {
		return ChangeFailure{State: state, Node: h.Node, Signal: h.Signal, SeenAt: stampOrEmpty(h.SeenAt), Plan: h.Plan, RequestedBy: h.RequestedBy, MovedBy: h.MovedBy}
	}
	if ch, ok := cl.Halts.Cleared[key]; ok && ours(ch.Halt) {
		f := failure(FailureCleared, ch.Halt)
		f.ClearReason, f.ClearedAt = ch.Reason, stampOrEmpty(ch.ClearedAt)
		out = append(out, f)
	}
	if h, ok := cl.Halts.Halts[key]; ok && ours(h) {
		f := failure(FailureHalted, h)
		if reason, ok := cl.Halts.Clears[key]; ok {
			f.State, f.ClearReason = FailureClearRequested, reason
		}
		out = append(out, f)
	}
	for _, h := range cl.Halts.Unrecorded(detectHalts(c, cl, now, map[string]bool{key: true})) {
		if ours(h) {
			out = append(out, failure(FailureDetected, h))
		}
	}
	return out
}

func stampOrEmpty(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// EmptyFields names each field of the change record that holds nothing: a
// rollout can have no failure yet, so this is a completeness report (the
// demo asserts its wave's record is complete), not a validation.
func (r *ChangeRecord) EmptyFields() []string {
	var out []string
	empty := func(name string, isEmpty bool) {
		if isEmpty {
			out = append(out, name)
		}
	}
	empty("rollout", r.Rollout == "")
	empty("objective", r.Objective == "")
	empty("requester", r.Requester == "")
	empty("versionDiff.from", r.VersionDiff.From == nil)
	empty("versionDiff.changes", len(r.VersionDiff.Changes) == 0)
	empty("record.configMap", r.Record.ConfigMap == "")
	empty("record.approval", r.Record.Approval == "")
	empty("canary.hardware", len(r.Canary.Hardware) == 0)
	empty("canary.nodes", len(r.Canary.Nodes) == 0)
	empty("canary.figures", len(r.Canary.Figures) == 0)
	empty("nodes", len(r.Nodes) == 0)
	for _, n := range r.Nodes {
		empty("nodes["+n.Node+"].proof", n.Proof == "")
	}
	empty("observationWindow.soak", r.ObservationWindow.Soak == "")
	empty("rollbackTrigger.signals", len(r.RollbackTrigger.Signals) == 0)
	empty("rollbackTrigger.rollback", r.RollbackTrigger.Rollback == "")
	empty("failures", len(r.Failures) == 0)
	cleared := slices.ContainsFunc(r.Failures, func(f ChangeFailure) bool { return f.ClearedAt != "" || f.ClearReason != "" })
	empty("failures[].clear", !cleared)
	return out
}

// ErrNoRollout: the subject names neither a Plan nor a record.
var ErrNoRollout = errors.New("name a Plan or, for a driver change, a record")

// Text is the change record as the CLI and the demo print it.
func (r *ChangeRecord) Text() string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	list := func(items []string) string {
		if len(items) == 0 {
			return "none"
		}
		return strings.Join(items, ", ")
	}
	line("Change record of %s, as of %s", r.Rollout, fleet.Stamp(r.At))
	line("objective:    %s", r.Objective)
	requester := r.Requester
	if requester == "" {
		requester = "not kept (no " + AnnotationRequestedBy + " annotation)"
	}
	line("requester:    %s", requester)
	from := "(the record names no source tuple)"
	if r.VersionDiff.From != nil {
		from = r.VersionDiff.From.String()
	}
	line("version diff: %s", list(r.VersionDiff.Changes))
	line("  from:       %s", from)
	line("  to:         %s", r.VersionDiff.To.String())
	line("record:       %s (ConfigMap %s), state %s, canary completed %s", r.Record.Ref, r.Record.ConfigMap, r.Record.State, r.Record.CompletedAt)
	line("  approval:   %s", r.Record.Approval)
	line("  evidence:   %s", r.Record.Evidence)
	line("  canary:     %s", list(r.Record.Canary))
	for _, p := range r.Record.Problems {
		line("  problem now: %s", p)
	}
	hw := strings.Join(r.Canary.Hardware, ",")
	if len(r.Canary.Products) > 0 {
		hw += " (" + strings.Join(r.Canary.Products, ", ") + ")"
	}
	line("canary scope: hardware %s; canary nodes: %s", hw, list(r.Canary.Nodes))
	if len(r.Canary.Figures) == 0 {
		line("  figures:    none recorded (the record has no typed canary checks)")
	}
	for _, f := range r.Canary.Figures {
		line("  figure:     %s%s", f.Summary, explained(f))
	}
	line("nodes:")
	if len(r.Nodes) == 0 {
		line("  none")
	}
	for _, n := range r.Nodes {
		state := n.Proof
		if len(n.ProofMissing) > 0 {
			state += ": missing " + strings.Join(n.ProofMissing, "; ")
		}
		line("  %s: tuple %s, cordoned %t, proof %s", n.Node, n.Tuple, n.Cordoned, state)
		if n.Job != "" {
			line("    SUC Job %s", n.Job)
		}
		if n.ReachedAt != "" {
			line("    reached the tuple %s", n.ReachedAt)
		}
		if n.MovedBy != "" {
			line("    moved into the Plan by %s", n.MovedBy)
		}
		for _, ch := range n.Checks {
			verdict := "passed"
			if ch.Failed {
				verdict = "FAILED (halts the rollout)"
			}
			line("    check %s: %s", verdict, ch.Summary)
		}
	}
	line("observation window: soak %s (requirements: %s; disabled: %s), recovery timeout %s",
		r.ObservationWindow.Soak, list(requirementNames(r.ObservationWindow.Requirements)), list(requirementNames(r.ObservationWindow.Disabled)), r.ObservationWindow.RecoveryTimeout)
	line("rollback trigger: halts on")
	for _, s := range r.RollbackTrigger.Signals {
		line("  - %s", s)
	}
	line("  rollback: %s", r.RollbackTrigger.Rollback)
	line("failures:")
	if len(r.Failures) == 0 {
		line("  none")
	}
	for _, f := range r.Failures {
		line("  %s: node %s: %s (seen %s, Plan %s)", f.State, orDash(f.Node), f.Signal, orDash(f.SeenAt), orDash(f.Plan))
		var who []string
		if f.RequestedBy != "" {
			who = append(who, "requested by "+f.RequestedBy)
		}
		if f.MovedBy != "" {
			who = append(who, "node moved into the Plan by "+f.MovedBy)
		}
		if len(who) > 0 {
			line("    %s: may not clear it", strings.Join(who, ", "))
		}
		if f.ClearReason != "" {
			line("    clear: %q at %s (who cleared it: the audit log of the halt record's clear annotation)", f.ClearReason, orDash(f.ClearedAt))
		}
	}
	for _, n := range r.Notes {
		line("note: %s", n)
	}
	return b.String()
}

func explained(f ChangeFigure) string {
	if f.Explanation == "" {
		return ""
	}
	return "; explained: " + qualification.ClipTo(f.Explanation, 512)
}

func requirementNames(rs []ProofRequirement) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
