package gate

import (
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// haltRule: while a failure halts a hardware's rollout, no forward move
// (a Plan, SUC's per-node step, the driver path and its per-node step)
// takes a node of it, for the hardware of each node the review moves and
// of a Plan's record; a rollback is the way out and stays allowed. The
// failed node stays cordoned (a Node's uncordon, SUC's completion write:
// haltUncordonRule), and the halt record's own writes are judged by
// DecideHaltRecordWrite's rules.
func haltRule(rv review, f *findings, d *Decision) {
	switch r := rv.(type) {
	case *NodeReview:
		haltUncordonRule(r.cfg, r.cl, r.req, f, d)
		return
	case *completionReview:
		haltUncordonRule(r.cfg, r.cl, r.req, f, d)
		return
	case *haltWriteReview:
		r.haltWriteRules(f, d)
		return
	}
	b := rv.base()
	if b.rollback || len(b.ts) == 0 {
		return
	}
	var hws [][]string
	if r, ok := rv.(*PlanReview); ok && r.record != nil {
		hws = append(hws, r.record.NormalizedHardware())
	}
	for _, nf := range b.pending {
		hws = appendIdentitySet(hws, nf.Identities)
	}
	b.cfg.haltsHold(b.cl, hws, b.now, b.recordPath, f, d)
}

// appendIdentitySet appends hw unless hws holds it already: the pending
// nodes of a wide Plan share a few identity sets, and each set's halt key
// is built once.
func appendIdentitySet(hws [][]string, hw []string) [][]string {
	if slices.ContainsFunc(hws, func(h []string) bool { return slices.Equal(h, hw) }) {
		return hws
	}
	return append(hws, hw)
}

// haltsHold adds a RolloutHalted blocker per halted hardware among hws
// (kept, or seen now: haltsNow), or one for the whole review when the halt
// record fails closed.
func (c *Config) haltsHold(cl *Cluster, hws [][]string, now time.Time, path *field.Path, f *findings, d *Decision) {
	if len(hws) == 0 {
		return
	}
	if cl.Halts.Err != nil {
		f.add(haltRecordBroken(c, "", path, &cl.Halts))
		return
	}
	var keys []string
	for _, hw := range hws {
		if key := HardwareKey(hw); !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	halts := c.haltsNow(cl, keys, now)
	for _, key := range keys {
		h, ok := halts[key]
		if !ok {
			continue
		}
		d.noteHalt(h)
		f.add(rolloutHalted(h.Node, path, fmt.Sprintf("the rollout of hardware %s is halted: %s", strings.Join(h.Hardware, ","), h),
			"no node of this hardware moves forward until the halt is cleared (break glass does not override a halt): "+c.clearHint(h)))
	}
}

// haltsNow are the halts that hold the hardware keys now: the record's
// kept halts, and each failure signal the review's own facts show that the
// record does not hold yet (Pending). A signal so counts from the moment
// the gate sees it, not from the halt loop's next turn; the loop stays the
// one writer that latches it.
func (c *Config) haltsNow(cl *Cluster, keys []string, now time.Time) map[string]Halt {
	out := map[string]Halt{}
	var look map[string]bool
	for _, key := range keys {
		if h, ok := cl.Halts.Halts[key]; ok {
			out[key] = h
			continue
		}
		if look == nil {
			look = map[string]bool{}
		}
		look[key] = true
	}
	if look == nil {
		return out
	}
	for _, h := range cl.Halts.Unrecorded(detectHalts(c, cl, now, look)) {
		h.Pending = true
		out[h.HardwareKey()] = h
	}
	return out
}

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
			signal, at := haltSignal(cfg, cl, f.Plan, f.Record, w, now)
			if signal == "" {
				continue
			}
			out = append(out, Halt{Hardware: slices.Clone(scope.Hardware(key)), Node: w.Node.Name, Signal: signal, SeenAt: at, Plan: f.Plan.Namespace + "/" + f.Plan.Name, Record: f.Record.ID,
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
			start := s.Start
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
				r.Record.ID, strings.Join(fleet.TupleDiff(nil, s.Tuple, r.Record.Target, false), ", "), cfg.Halts.RecoveryTimeout.Duration)
			out = append(out, Halt{Hardware: slices.Clone(r.Hardware), Node: s.Node.Name, Signal: signal, SeenAt: at, Plan: plan, Record: r.Record.ID, MovedBy: s.Node.Annotations[AnnotationMovedBy]})
			halted[r.Key] = true
			break
		}
	}
	return out
}

// haltSignal is the first failure node w shows under Plan p of record
// rec, "" for none.
func haltSignal(cfg *Config, cl *Cluster, p *upgradev1.Plan, rec *qualification.Record, w fleet.Watched, now time.Time) (string, time.Time) {
	n, cur := w.Node, w.Tuple
	for _, j := range w.Jobs {
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				return fmt.Sprintf("SUC Job %s/%s failed (%s)", j.Namespace, j.Name, fleet.QuoteOrNone(c.Reason)), c.LastTransitionTime.Time
			}
		}
	}
	if s := n.Labels[LabelDriverUpgradeState]; s == "upgrade-failed" {
		return fmt.Sprintf("label %s=%s", LabelDriverUpgradeState, s), now
	}
	for _, h := range cfg.Proof.HealthConditions {
		if c := fleet.NodeCondition(n, corev1.NodeConditionType(h.Type)); c.Status == h.UnhealthyStatus {
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
	// (w.Upgrading, the view's.)
	settling := !w.Start.IsZero() && now.Sub(w.Start) < cfg.Halts.RecoveryTimeout.Duration
	if rec.Source != nil && !SameTuple(cur, *rec.Source) && !SameTuple(cur, rec.Target) && complete(cur) && !w.Upgrading && !settling {
		return fmt.Sprintf("tuple half applied: neither the record's source nor its target (%s)", strings.Join(fleet.TupleDiff(nil, cur, rec.Target, false), ", ")), now
	}
	if w.Job != nil || SameTuple(cur, rec.Target) {
		return cfg.notBack(cl, n, w.Start, now)
	}
	return "", time.Time{}
}

// notBack: Ready, or the validator Pod's Ready, has not held for longer
// than the recovery timeout since the upgrade moved (or since it last
// dropped, whichever is later). A moment that cannot be dated is no signal;
// nor are validators whose owner cannot be checked.
func (c *Config) notBack(cl *Cluster, n *corev1.Node, start, now time.Time) (string, time.Time) {
	timeout := c.Halts.RecoveryTimeout.Duration
	if c.Proof.On(ProofReady) {
		if ready := fleet.NodeCondition(n, corev1.NodeReady); ready.Status != corev1.ConditionTrue {
			if since := fleet.Later(start, ready.LastTransitionTime.Time); !since.IsZero() && now.Sub(since) >= timeout {
				return fmt.Sprintf("node Ready is %s since %s, not back within %s", fleet.QuoteOrNone(string(ready.Status)), fleet.Stamp(since), timeout), since.Add(timeout)
			}
		}
	}
	// Validators count only by the validator DaemonSet's UID: with the
	// DaemonSet unreadable, they say nothing (its proof stays unproven,
	// saying why), so a Pod that merely names it halts nothing.
	if !c.Proof.On(ProofValidator) || cl.Proof.ValidatorDaemonSetUnreadable != "" {
		return "", time.Time{}
	}
	validators := cl.ownValidatorsOn(n.Name)
	if len(validators) == 0 && !start.IsZero() && now.Sub(start) >= timeout {
		return fmt.Sprintf("no validator Pod (%s) on the node since %s, not back within %s", c.Proof.Validator.Selector, fleet.Stamp(start), timeout), start.Add(timeout)
	}
	for _, v := range validators {
		if cond := fleet.PodCondition(v, corev1.PodReady); cond.Status != corev1.ConditionTrue {
			if since := fleet.Later(start, cond.LastTransitionTime.Time); !since.IsZero() && now.Sub(since) >= timeout {
				return fmt.Sprintf("validator Pod %s/%s not Ready since %s, not back within %s", v.Namespace, v.Name, fleet.Stamp(since), timeout), since.Add(timeout)
			}
		}
	}
	return "", time.Time{}
}

// haltUncordonRule (review-level, Nodes and SUC's completion write): the
// failed node stays cordoned until it is back on its record's source tuple
// and proven; then its uncordon (a person's, or SUC's completion of the
// rollback Plan) is allowed.
func haltUncordonRule(cfg *Config, cl *Cluster, req NodeRequest, f *findings, d *Decision) {
	n, old := req.Node, req.OldNode
	path := field.NewPath("spec", "unschedulable")
	if !old.Spec.Unschedulable || n.Spec.Unschedulable || (!cfg.IsGPUNode(n) && !cfg.IsGPUNode(old)) {
		return
	}
	if cl.Halts.Err != nil {
		f.add(haltRecordBroken(cfg, n.Name, path, &cl.Halts))
		return
	}
	h, ok := nodeHalt(cfg, cl, req)
	if !ok {
		return
	}
	d.noteHalt(h)
	var rec *qualification.Record
	for _, e := range cl.Records {
		if e.Record != nil && e.Err == nil && e.Record.ID == h.Record {
			rec = e.Record
		}
	}
	cur := cl.Current(cfg.FactsOf(n))
	switch {
	case rec == nil || rec.Source == nil:
		f.add(rolloutHalted(n.Name, path, fmt.Sprintf("node %s failed its upgrade (%s) and record %s (with a source tuple to go back to) is not loaded", n.Name, h.Signal, h.Record),
			"it stays cordoned: restore the record, roll the node back to its source and prove it (docs/proof.md)"))
	case !SameTuple(cur, *rec.Source):
		f.add(rolloutHalted(n.Name, path, fmt.Sprintf("node %s failed its upgrade (%s) and is not back on record %s's source tuple (%s)", n.Name, h.Signal, rec.ID, strings.Join(fleet.TupleDiff(nil, cur, *rec.Source, false), ", ")),
			"it stays cordoned: roll it back with the record's rollback Plan (gpu-upgrade-gate.io/rollback: \"true\"), then uncordon it once proven"))
	default:
		p := cfg.Prove(cl, n, req.Now)
		d.noteProof(cfg, p)
		if !p.Proven() {
			f.add(rolloutHalted(n.Name, path, fmt.Sprintf("node %s failed its upgrade (%s); it is back on the source tuple but not proven: %s", n.Name, h.Signal, strings.Join(p.Missing, "; ")),
				"it stays cordoned until the proof holds (run the allocation check: docs/proof.md)"))
		}
	}
}

// nodeHalt is the halt of the node itself: kept or seen now, under the
// identity set it had before the write or has after it, or any kept one
// that names it (a label the write adds to the node changes its identity
// set, and so its halt's key: issue 22 attack 3).
func nodeHalt(cfg *Config, cl *Cluster, req NodeRequest) (Halt, bool) {
	n := req.Node
	for _, key := range sortedKeys(cl.Halts.Halts) {
		if h := cl.Halts.Halts[key]; h.Node == n.Name {
			return h, true
		}
	}
	var keys []string
	for _, m := range []*corev1.Node{req.OldNode, n} {
		if key := HardwareKey(cfg.FactsOf(m).Identities); !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	now := cfg.haltsNow(cl, keys, req.Now)
	for _, key := range keys {
		if h, ok := now[key]; ok && h.Node == n.Name {
			return h, true
		}
	}
	return Halt{}, false
}

// HaltWriteRequest is a write of the halt record ConfigMap.
type HaltWriteRequest struct {
	// Operation is OpCreate, OpUpdate or OpDelete; Old is nil for a
	// CREATE, New for a DELETE.
	Operation string
	Old, New  *corev1.ConfigMap
	User      UserInfo
	// Self is the gate's own username (its ServiceAccount), "" when unknown.
	Self string
}

// DecideHaltRecordWrite reviews a write of the halt record: only the gate
// adds halts and never rewrites one; a halt leaves only by the gate, after
// a clear annotation that someone other than the failed rollout's requester
// set with a reason; a person may remove an entry that is not a halt (a
// repair); the record is deleted only while it holds no halt.
func DecideHaltRecordWrite(cfg *Config, req HaltWriteRequest) Decision {
	obj := req.New
	if obj == nil {
		obj = req.Old
	}
	d := Decision{Object: "ConfigMap " + obj.Namespace + "/" + obj.Name}
	if obj.Namespace != cfg.Namespace || obj.Name != cfg.Halts.ConfigMap {
		d.Allowed = true
		return d
	}
	old, next := &corev1.ConfigMap{}, &corev1.ConfigMap{}
	if req.Old != nil {
		old = req.Old
	}
	if req.New != nil {
		next = req.New
	}
	oldRec := cfg.ParseHaltRecord(old)
	var f findings
	r := &haltWriteReview{req: req, old: old, next: next, oldRec: &oldRec}
	r.kinds, r.cfg, r.user = kindsHaltRecord, cfg, req.User
	applyTable(r, &f, &d)
	f.settle(&d)
	return d
}

// haltWriteReview is a write of the halt record.
type haltWriteReview struct {
	reviewBase
	req       HaltWriteRequest
	old, next *corev1.ConfigMap
	oldRec    *HaltRecord
}

// haltWriteRules judge the entries and clear annotations the write changes.
func (r *haltWriteReview) haltWriteRules(f *findings, d *Decision) {
	if r.req.Operation == OpDelete {
		// An immutable record can never be written again: deleting it (and
		// so failing closed until it is recreated) is the way out; a failure
		// still visible halts again at the gate's next turn.
		if immutable := r.old.Immutable != nil && *r.old.Immutable; !immutable && (r.oldRec.Err != nil || len(r.oldRec.Halts) > 0) {
			f.add(rolloutHalted("", field.NewPath("metadata", "name"), fmt.Sprintf("halt record %s holds %d halt(s) or entries that do not parse", r.cfg.HaltRecordName(), len(r.oldRec.Halts)),
				"it is deleted only when empty: clear each halt first (docs/proof.md)"))
		}
		return
	}
	self := r.req.Self != "" && r.req.User.Name == r.req.Self
	haltDataRules(r.cfg, r.old, r.next, r.oldRec, self, f)
	clearRules(r.cfg, r.old, r.next, r.oldRec, r.req.User, self, f, d)
	haltMetaRules(r.req.Operation == OpCreate, r.old, r.next, f)
}

// haltMetaRules: besides its data (the halt loop's) and its clear
// annotations (a person's), nothing of the record changes. Each of these
// would stop the loop writing it, or let something else remove it:
// immutable (every later write is refused by the API server, so a kept halt
// could never be cleared and a new failure never recorded), binary data (the
// record does not parse), an owner reference (the garbage collector deletes
// it with its owner), a finalizer, and, after its creation, a label or
// another annotation (the record is the gate's; the chart creates it once).
func haltMetaRules(create bool, old, next *corev1.ConfigMap, f *findings) {
	if next.Immutable != nil && *next.Immutable {
		f.add(rolloutHalted("", field.NewPath("immutable"), "immutable: true would stop the gate writing the halt record (no new halt recorded, no clear applied)", "leave immutable unset"))
	}
	if len(next.BinaryData) > 0 {
		f.add(rolloutHalted("", field.NewPath("binaryData"), fmt.Sprintf("binaryData holds %s: the halt record holds no binary data", strings.Join(sortedKeys(next.BinaryData), ",")), "remove binaryData"))
	}
	if !slices.EqualFunc(old.OwnerReferences, next.OwnerReferences, func(a, b metav1.OwnerReference) bool { return a.UID == b.UID && a.Kind == b.Kind && a.Name == b.Name }) {
		f.add(rolloutHalted("", field.NewPath("metadata", "ownerReferences"), fmt.Sprintf("ownerReferences %s: an owner's deletion would delete the halt record", ownerRefs(next.OwnerReferences)), "the halt record has no owner; leave ownerReferences unset"))
	}
	if !slices.Equal(old.Finalizers, next.Finalizers) {
		f.add(rolloutHalted("", field.NewPath("metadata", "finalizers"), fmt.Sprintf("finalizers [%s]: the halt record keeps none", qualification.Clip(strings.Join(next.Finalizers, ","))), "leave finalizers as they were"))
	}
	if create {
		return
	}
	for _, k := range changedKeys(old.Labels, next.Labels) {
		f.add(rolloutHalted("", field.NewPath("metadata", "labels").Key(k), fmt.Sprintf("label %s changes from %q to %q: the halt record's labels are the chart's, set once", qualification.Clip(k), qualification.Clip(old.Labels[k]), qualification.Clip(next.Labels[k])), "leave its labels as they are"))
	}
	for _, k := range changedKeys(old.Annotations, next.Annotations) {
		if strings.HasPrefix(k, ClearAnnotationPrefix) {
			continue // clearRules
		}
		f.add(rolloutHalted("", field.NewPath("metadata", "annotations").Key(k), fmt.Sprintf("annotation %s changes from %q to %q: only clear annotations (%s<hardware key>) change on the halt record", qualification.Clip(k), qualification.Clip(old.Annotations[k]), qualification.Clip(next.Annotations[k]), ClearAnnotationPrefix), "leave the other annotations as they are"))
	}
}

// changedKeys are the keys added, removed or changed from a to b, sorted.
func changedKeys(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func ownerRefs(refs []metav1.OwnerReference) string {
	if len(refs) == 0 {
		return "removed"
	}
	var out []string
	for _, r := range refs {
		out = append(out, r.Kind+" "+qualification.Clip(r.Name))
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// haltDataRules judges each data key the write adds, changes or removes.
func haltDataRules(cfg *Config, old, next *corev1.ConfigMap, oldRec *HaltRecord, self bool, f *findings) {
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range old.Data {
			if !yield(k) {
				return
			}
		}
		for k := range next.Data {
			if _, dup := old.Data[k]; !dup && !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		ov, inOld := old.Data[k]
		nv, inNew := next.Data[k]
		if inOld && inNew && ov == nv {
			continue
		}
		path := field.NewPath("data").Key(k)
		isHalt, isCleared := strings.HasPrefix(k, HaltKeyPrefix), strings.HasPrefix(k, ClearedKeyPrefix)
		hwKey := strings.TrimPrefix(strings.TrimPrefix(k, HaltKeyPrefix), ClearedKeyPrefix)
		_, validOld := oldRec.Halts[hwKey]
		switch {
		case !inNew && isHalt && validOld && !(self && oldRec.Clears[hwKey] != ""):
			f.add(rolloutHalted("", path, fmt.Sprintf("this write removes the halt of hardware %s (%s)", hwKey, oldRec.Halts[hwKey]),
				"a halt is cleared only by annotation: "+cfg.clearHint(oldRec.Halts[hwKey])))
		case !inNew:
			// A cleared entry, or an entry that is not a halt: removing it
			// can only halt more.
		case !isHalt && !isCleared:
			f.add(rolloutHalted("", path, fmt.Sprintf("key %q is neither %s<hardware key> nor %s<hardware key>", qualification.Clip(k), HaltKeyPrefix, ClearedKeyPrefix), "remove it"))
		case !self:
			f.add(rolloutHalted("", path, "only the gate's own ServiceAccount adds or changes halt entries",
				"halts are set by the gate when a node fails (docs/proof.md); to stop a rollout yourself, delete its Plan"))
		case inOld && isHalt:
			f.add(rolloutHalted("", path, fmt.Sprintf("the kept halt of hardware %s is rewritten", hwKey), "a halt is kept as first seen until it is cleared"))
		default:
			probe := &corev1.ConfigMap{Data: map[string]string{k: nv}}
			if rec := cfg.ParseHaltRecord(probe); rec.Err != nil {
				f.add(rolloutHalted("", path, "the entry does not parse: "+rec.Err.Error(), "write a valid entry"))
			}
		}
	}
}

// clearRules judges each clear annotation the write sets or changes.
func clearRules(cfg *Config, old, next *corev1.ConfigMap, oldRec *HaltRecord, user UserInfo, self bool, f *findings, d *Decision) {
	for _, ann := range sortedKeys(next.Annotations) {
		reason := next.Annotations[ann]
		if !strings.HasPrefix(ann, ClearAnnotationPrefix) || old.Annotations[ann] == reason {
			continue
		}
		path := field.NewPath("metadata", "annotations").Key(ann)
		var h Halt
		found := false
		for key, kept := range oldRec.Halts {
			if ClearAnnotation(key) == ann {
				h, found = kept, true
			}
		}
		switch {
		case self:
			f.add(rolloutHalted("", path, "the gate's own ServiceAccount sets a clear annotation", "only a person clears a halt"))
		case !found:
			f.add(rolloutHalted("", path, fmt.Sprintf("annotation %s names no kept halt (halts: %s)", qualification.Clip(ann), haltKeys(oldRec)), "annotate the halt you mean (docs/proof.md)"))
		case nonSpace(reason) < MinBreakGlassReason:
			f.add(rolloutHalted(h.Node, path, fmt.Sprintf("the reason %q has %d non-space characters, expected at least %d", qualification.Clip(reason), nonSpace(reason), MinBreakGlassReason),
				"say why the rollout may go on (e.g. an incident number and the fix)"))
		case h.RequestedBy == "" && (cfg.BreakGlassGroup == "" || !slices.Contains(user.Groups, cfg.BreakGlassGroup)):
			f.add(rolloutHalted(h.Node, path, fmt.Sprintf("the requester of the failed rollout (Plan %s) is not attested: it carried no %s annotation", h.Plan, AnnotationRequestedBy),
				fmt.Sprintf("only a member of the break-glass group %q clears this halt", cfg.BreakGlassGroup)))
		case user.Name == h.RequestedBy:
			f.add(rolloutHalted(h.Node, path, fmt.Sprintf("%s requested the failed rollout (Plan %s) and may not clear its halt", user.Name, h.Plan),
				"someone else reviews the failure and clears it (two-person rule)"))
		case h.MovedBy != "" && user.Name == h.MovedBy:
			f.add(rolloutHalted(h.Node, path, fmt.Sprintf("%s moved node %s into the failed rollout (Plan %s) and may not clear its halt", user.Name, h.Node, h.Plan),
				"someone else reviews the failure and clears it (two-person rule)"))
		default:
			d.noteHalt(h)
			d.Warnings = append(d.Warnings, fmt.Sprintf("gpu-upgrade-gate: %s clears the halt of hardware %s (%s): %q; the gate removes it within its next turn", user.Name, h.HardwareKey(), h, qualification.Clip(reason)))
		}
	}
}

func haltKeys(r *HaltRecord) string {
	if len(r.Halts) == 0 {
		return "none"
	}
	return strings.Join(sortedKeys(r.Halts), ",")
}

// clearHint says how a halt is cleared.
func (c *Config) clearHint(h Halt) string {
	var who string
	if h.RequestedBy != "" {
		who = "someone other than " + h.RequestedBy
	} else {
		who = fmt.Sprintf("a member of %q (the requester is not attested)", c.BreakGlassGroup)
	}
	if h.MovedBy != "" && h.MovedBy != h.RequestedBy {
		who += " and " + h.MovedBy + " (who moved the node into the Plan)"
	}
	if h.Pending {
		who = "once the gate has recorded the halt (within its --halt-interval), " + who
	}
	return fmt.Sprintf("roll node %s back (the record's rollback Plan stays allowed) and prove it; then %s clears the halt: kubectl annotate configmap -n %s %s %s=\"<reason>\" (docs/proof.md)",
		h.Node, who, c.Namespace, c.Halts.ConfigMap, ClearAnnotation(h.HardwareKey()))
}

// noteHalt records a halt the decision relied on, for the audit annotations.
func (d *Decision) noteHalt(h Halt) {
	entry := h.HardwareKey() + "@" + h.Node
	if !slices.Contains(d.Halts, entry) {
		d.Halts = append(d.Halts, entry)
	}
}

// haltRecordBroken builds the RolloutHalted blocker of a halt record that
// fails closed.
func haltRecordBroken(c *Config, node string, path *field.Path, rec *HaltRecord) Blocker {
	return rolloutHalted(node, path, fmt.Sprintf("halt record %s cannot be read: %v; until it can, every forward move of GPU hardware is refused", c.HaltRecordName(), rec.Err),
		fmt.Sprintf("if it is missing, create it empty (helm upgrade recreates it, or kubectl create configmap -n %s %s); if it is immutable, delete it and recreate it empty; if an entry does not parse, restore it from the audit log or remove it if it is not a halt; if the gate's writes are refused, its log names why (docs/proof.md#halts)", c.Namespace, c.Halts.ConfigMap))
}

// rolloutHalted builds every RolloutHalted blocker. Its sentences are the
// engine's own, over values from the halt record (which only the gate
// writes) and clipped request values; settle bounds the whole.
func rolloutHalted(node string, path *field.Path, wrong, todo string) Blocker {
	return Blocker{Code: CodeRolloutHalted, Node: node, Err: field.Forbidden(path, wrong+"; "+todo)}
}
