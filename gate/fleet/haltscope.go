package fleet

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// The Plan annotations halt detection reads (gate names them too).
const (
	// AnnotationQualification names the record ConfigMap a GPU Plan
	// applies.
	AnnotationQualification = "gpu-upgrade-gate.io/qualification"
	// AnnotationRollback marks a rollback Plan, the way out of a halt.
	AnnotationRollback = "gpu-upgrade-gate.io/rollback"
)

// HaltScope is where a halt can show, as the view's objects alone say it:
// per hardware, the stored forward GPU Plans and the nodes each may halt
// on, and the stranded nodes no forward Plan moves. gate's halt rule judges
// them at the review's time (the recovery timeout, Ready, the validators,
// the checks); nothing here reads the clock. A quiet fleet's scope is a few
// nodes: worked out once per view (View.HaltScope), it is what made
// detection cost a pass over the hardware's nodes per review.
type HaltScope struct {
	c          Classifier
	idx        *NodeIndex
	op, dcgm   string
	jobs       map[string][]*batchv1.Job
	liveOn     map[string]bool
	keys       []string
	hardware   map[string][]string
	plans      map[string][]ForwardPlan
	records    []StrandedRecord
	mu         sync.Mutex
	byHardware map[string]*hardwareScope
}

// ForwardPlan is a stored forward GPU Plan with its selector and record.
type ForwardPlan struct {
	Plan     *upgradev1.Plan
	Selector *PlanSelector
	Record   *qualification.Record
}

// Watched is a node a forward Plan may halt on: the Plan selects it, or
// its Job of the Plan ran (a node opted out or relabelled is still the
// Plan's: issue 22), and it is a suspect (it has a SUC Job, shows a signal
// of its own, or is off the record's source tuple or at its target).
type Watched struct {
	// Plan is the index of the Plan in Plans(key).
	Plan int
	Node *corev1.Node
	// Jobs are the node's Jobs of the Plan, in list order; Job is the last
	// of them (nil for none).
	Jobs  []*batchv1.Job
	Job   *batchv1.Job
	Tuple qualification.Tuple
	// Start is when its upgrade last moved (UpgradeStart of Job).
	Start time.Time
	// Upgrading: mid-upgrade, it passes through tuples in between: its Job
	// has not completed, or it is cordoned before its Job.
	Upgrading bool
}

// StrandedRecord is a loaded record with a source tuple, which a node
// stopped half way can be stranded on.
type StrandedRecord struct {
	Record   *qualification.Record
	Hardware []string
	Key      string
}

// Stranded is a cordoned GPU node with no live Job, between a record's
// source and target, that no forward Plan of its hardware moves.
type Stranded struct {
	// Record is the index of its record in StrandedRecords.
	Record int
	Node   *corev1.Node
	// Last is its last SUC Job by creation (nil for none).
	Last  *batchv1.Job
	Tuple qualification.Tuple
	// Start is when its upgrade last moved (UpgradeStart of Last).
	Start time.Time
}

// hardwareScope is one hardware's nodes, worked out on first use: a
// review looks at its own hardware only.
type hardwareScope struct {
	once     sync.Once
	watched  []Watched
	stranded []Stranded
}

// HaltScope is the scope of halt detection over idx, whose answers are c's
// (the caller checked idx.BuiltFor(c)), with the cluster-wide versions op
// and dcgm (read from the view's images). Over the view's own index it is
// worked out once and shared by the view's reviews; over another (a
// review's nodes swapped in) it is the review's.
func (v *View) HaltScope(c Classifier, idx *NodeIndex, op, dcgm string) *HaltScope {
	if idx != v.in.Index || idx == nil {
		return v.newHaltScope(c, idx, op, dcgm)
	}
	v.haltOnce.Do(func() { v.halts = v.newHaltScope(c, idx, op, dcgm) })
	return v.halts
}

func (v *View) newHaltScope(c Classifier, idx *NodeIndex, op, dcgm string) *HaltScope {
	s := &HaltScope{c: c, idx: idx, op: op, dcgm: dcgm, jobs: v.jobsByNode, liveOn: v.liveOn,
		hardware: map[string][]string{}, plans: map[string][]ForwardPlan{}, byHardware: map[string]*hardwareScope{}}
	for i, p := range v.in.Plans {
		e, ok := v.in.Records[p.Annotations[AnnotationQualification]]
		if !ok || e.Err != nil || e.Record == nil || p.Annotations[AnnotationRollback] == "true" {
			continue
		}
		sel, err := v.planSelector(i)
		if err != nil {
			continue
		}
		hw := e.Record.NormalizedHardware()
		key := HardwareKey(hw)
		if _, ok := s.hardware[key]; !ok {
			s.keys = append(s.keys, key)
			s.hardware[key] = hw
		}
		s.plans[key] = append(s.plans[key], ForwardPlan{p, sel, e.Record})
	}
	names := make([]string, 0, len(v.in.Records))
	for name := range v.in.Records {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		e := v.in.Records[name]
		if e.Err != nil || e.Record == nil || e.Record.Source == nil {
			continue
		}
		hw := e.Record.NormalizedHardware()
		s.records = append(s.records, StrandedRecord{e.Record, hw, HardwareKey(hw)})
	}
	return s
}

// planSelector is the selector of the i-th Plan: the adapter's when it
// keeps them, else converted now.
func (v *View) planSelector(i int) (*PlanSelector, error) {
	if i < len(v.in.PlanSelectors) && v.in.PlanSelectors[i] != nil {
		return v.in.PlanSelectors[i], nil
	}
	return NewPlanSelector(v.in.Plans[i])
}

// Keys are the hardware keys of the forward Plans, in the Plans' order.
func (s *HaltScope) Keys() []string { return s.keys }

// Hardware is the identity set of the key (the scope's: read only).
func (s *HaltScope) Hardware(key string) []string { return s.hardware[key] }

// Plans are the forward Plans of the hardware key, in list order.
func (s *HaltScope) Plans(key string) []ForwardPlan { return s.plans[key] }

// StrandedRecords are the loaded records with a source tuple, by ConfigMap
// name.
func (s *HaltScope) StrandedRecords() []StrandedRecord { return s.records }

// Watched are the nodes the hardware's forward Plans may halt on, by Plan
// (in Plans order) and then by node name: the first that shows a signal
// halts the hardware.
func (s *HaltScope) Watched(key string) []Watched { return s.of(key).watched }

// Stranded are the hardware's stranded nodes, by record (in
// StrandedRecords order) and then by node name.
func (s *HaltScope) Stranded(key string) []Stranded { return s.of(key).stranded }

func (s *HaltScope) of(key string) *hardwareScope {
	s.mu.Lock()
	h, ok := s.byHardware[key]
	if !ok {
		h = &hardwareScope{}
		s.byHardware[key] = h
	}
	s.mu.Unlock()
	h.once.Do(func() { h.watched, h.stranded = s.watched(key), s.stranded(key) })
	return h
}

// watched looks at the hardware's GPU nodes once (from the index, whose
// GPU class and facts are worked out once per node) and keeps the
// suspects; only those are matched against the hardware's Plans, so a
// quiet fleet costs one pass over the hardware's nodes, not Plans × nodes.
func (s *HaltScope) watched(key string) []Watched {
	hw, plans := s.hardware[key], s.plans[key]
	if len(plans) == 0 {
		return nil
	}
	var recs []*qualification.Record
	for _, f := range plans {
		if !slices.Contains(recs, f.Record) {
			recs = append(recs, f.Record)
		}
	}
	type suspect struct {
		i   int32
		cur qualification.Tuple
	}
	var suspects []suspect
	s.idx.WithTrue(IdentityLabels(hw), func(i int32) {
		if !s.idx.IsGPU(s.c, i) {
			return
		}
		facts := s.idx.FactsOf(s.c, i)
		if !slices.Equal(facts.Identities, hw) {
			return
		}
		// A suspect: its Jobs, its own signals (worked out once per node
		// object, the index keeps them), its tuple.
		cur := facts.Tuple(s.op, s.dcgm)
		if len(s.jobs[s.idx.Node(i).Name]) > 0 || s.idx.MayHalt(s.c, i) || slices.ContainsFunc(recs, func(rec *qualification.Record) bool { return tupleMayHalt(cur, rec) }) {
			suspects = append(suspects, suspect{i, cur})
		}
	})
	slices.SortFunc(suspects, func(a, b suspect) int { return strings.Compare(s.idx.Node(a.i).Name, s.idx.Node(b.i).Name) })
	var out []Watched
	for pi, f := range plans {
		for _, sp := range suspects {
			n := s.idx.Node(sp.i)
			var jobs []*batchv1.Job
			ran := false
			for _, j := range s.jobs[n.Name] {
				if j.Namespace == f.Plan.Namespace && j.Labels[upgradev1.LabelPlan] == f.Plan.Name {
					jobs, ran = append(jobs, j), ran || JobRan(j)
				}
			}
			if !f.Selector.Selects(n) && !ran {
				continue
			}
			w := Watched{Plan: pi, Node: n, Jobs: jobs, Tuple: sp.cur}
			if len(jobs) > 0 {
				w.Job = jobs[len(jobs)-1]
			}
			w.Start = UpgradeStart(w.Job, n)
			w.Upgrading = (w.Job != nil && JobCompletion(w.Job).IsZero()) || (w.Job == nil && n.Spec.Unschedulable)
			out = append(out, w)
		}
	}
	return out
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

// stranded: a GPU node stopped half way (issue 22 item 2) that no stored
// forward Plan moves any more (its Plan deleted, or it opted out and its
// Job is gone): cordoned, no live Job, on a tuple between a loaded record's
// source and target for its hardware. Only cordoned GPU nodes can be
// stranded: the index keeps them, so a quiet fleet costs nothing more.
func (s *HaltScope) stranded(key string) []Stranded {
	var out []Stranded
	for ri, r := range s.records {
		if r.Key != key {
			continue
		}
		var found []Stranded
	nodes:
		for _, n := range s.idx.CordonedGPU(s.c) {
			if s.liveOn[n.Name] {
				continue
			}
			f, ok := s.idx.FactsByName(s.c, n)
			if !ok || !slices.Equal(f.Identities, r.Hardware) {
				continue
			}
			cur := f.Tuple(s.op, s.dcgm)
			if !BetweenTuples(cur, *r.Record.Source, r.Record.Target) {
				continue
			}
			for _, p := range s.plans[key] {
				if p.Selector.Selects(n) || slices.ContainsFunc(s.jobs[n.Name], func(j *batchv1.Job) bool {
					return j.Namespace == p.Plan.Namespace && j.Labels[upgradev1.LabelPlan] == p.Plan.Name && JobRan(j)
				}) {
					continue nodes // its Plan's halt detection judges it
				}
			}
			var last *batchv1.Job
			for _, j := range s.jobs[n.Name] {
				if last == nil || j.CreationTimestamp.After(last.CreationTimestamp.Time) {
					last = j
				}
			}
			found = append(found, Stranded{Record: ri, Node: n, Last: last, Tuple: cur, Start: UpgradeStart(last, n)})
		}
		slices.SortFunc(found, func(a, b Stranded) int { return strings.Compare(a.Node.Name, b.Node.Name) })
		out = append(out, found...)
	}
	return out
}

// UpgradeStart is when the node's upgrade last moved, by the objects' own
// timestamps: its Job's completion (else its creation) and its cordon (the
// unschedulable taint's timeAdded).
func UpgradeStart(job *batchv1.Job, n *corev1.Node) time.Time {
	var at time.Time
	if job != nil {
		at = JobCompletion(job)
		if at.IsZero() {
			at = job.CreationTimestamp.Time
		}
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeUnschedulable && t.TimeAdded != nil && t.TimeAdded.After(at) {
			at = t.TimeAdded.Time
		}
	}
	return at
}

// JobCompletion is when the Job completed (its Complete condition, else
// status.completionTime), zero when it has not.
func JobCompletion(j *batchv1.Job) time.Time {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	if j.Status.CompletionTime != nil {
		return j.Status.CompletionTime.Time
	}
	return time.Time{}
}

// BetweenTuples: cur is neither src nor dst, each of its components is
// src's or dst's, and it is complete.
func BetweenTuples(cur, src, dst qualification.Tuple) bool {
	if !CompleteTuple(cur) || SameTuple(cur, src) || SameTuple(cur, dst) {
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

// CompleteTuple: every required component is known (a missing fact is
// FactsMissing's business, not a half-applied tuple).
func CompleteTuple(t qualification.Tuple) bool {
	for i := range componentTable {
		if componentTable[i].required() && strings.TrimSpace(componentTable[i].get(t)) == "" {
			return false
		}
	}
	return true
}
