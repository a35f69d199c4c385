package gate

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// The GPU Operator's own path to a GPU node's tuple: changing the driver (or
// DCGM exporter) version in the ClusterPolicy or an NVIDIADriver makes the
// driver manager reload kernel modules on every selected node.

// DriverUpgradePolicy is ClusterPolicy spec.driver.upgradePolicy, which the
// operator's upgrade controller applies to ClusterPolicy and NVIDIADriver
// rollouts alike.
type DriverUpgradePolicy struct {
	// Present is false when the ClusterPolicy has no upgradePolicy (or there
	// is no ClusterPolicy).
	Present             bool
	AutoUpgrade         bool
	MaxParallelUpgrades int64
	DrainEnabled        bool
}

// DriverChange is an UPDATE of a ClusterPolicy (nvidia.com/v1) or an
// NVIDIADriver (nvidia.com/v1alpha1), reduced to what the rules read.
type DriverChange struct {
	// Object is "ClusterPolicy <name>" or "NVIDIADriver <name>".
	Object      string
	Annotations map[string]string
	// Driver and DCGMExporter versions before and after; DCGM only exists on
	// a ClusterPolicy. Empty means "not set".
	OldDriver, NewDriver string
	OldDCGM, NewDCGM     string
	DriverPath, DCGMPath *field.Path
	// NodeSelector selects the nodes an NVIDIADriver covers; nil means every
	// GPU node (ClusterPolicy).
	NodeSelector map[string]string
	Policy       DriverUpgradePolicy
	PolicyPath   *field.Path
}

// DriverRequest is one driver-path UPDATE.
type DriverRequest struct {
	Change DriverChange
	User   UserInfo
	Now    time.Time
}

// DriverReview decides a driver-path change in the Plan's two steps.
type DriverReview struct {
	cfg      *Config
	cl       *Cluster
	req      DriverRequest
	changed  bool
	rollback bool
	nodes    []NodeFacts
	current  map[string]qualification.Tuple
	pending  []NodeFacts
	records  map[string]RecordEntry // named by the annotation, in order
	names    []string
}

var pathDriverRecords = field.NewPath("metadata", "annotations").Key(AnnotationQualification)

// PrepareDriver finds the GPU nodes the change reaches and which of them
// would change.
func PrepareDriver(cfg *Config, cl *Cluster, req DriverRequest) *DriverReview {
	ch := req.Change
	r := &DriverReview{cfg: cfg, cl: cl, req: req, current: map[string]qualification.Tuple{}, records: map[string]RecordEntry{}}
	r.changed = ch.OldDriver != ch.NewDriver || ch.OldDCGM != ch.NewDCGM
	if !r.changed {
		return r
	}
	r.rollback = ch.Annotations[AnnotationRollback] == "true"
	for _, name := range strings.Split(ch.Annotations[AnnotationQualification], ",") {
		if name = strings.TrimSpace(name); name != "" && !slices.Contains(r.names, name) {
			r.names = append(r.names, name)
			r.records[name] = cl.Records[name]
		}
	}
	sel := labels.SelectorFromSet(ch.NodeSelector)
	for _, n := range cl.Nodes {
		if !cfg.IsGPUNode(n) || (ch.NodeSelector != nil && !sel.Matches(labels.Set(n.Labels))) {
			continue
		}
		f := cfg.FactsOf(n)
		r.nodes = append(r.nodes, f)
		r.current[f.Name] = f.Current(cl)
	}
	slices.SortFunc(r.nodes, func(a, b NodeFacts) int { return strings.Compare(a.Name, b.Name) })
	for _, f := range r.nodes {
		if !SameTuple(r.current[f.Name], r.after(r.current[f.Name])) {
			r.pending = append(r.pending, f)
		}
	}
	return r
}

// after is a node's tuple once the change has rolled out to it.
func (r *DriverReview) after(cur qualification.Tuple) qualification.Tuple {
	ch := r.req.Change
	if ch.NewDriver != ch.OldDriver {
		cur.Driver = ch.NewDriver
	}
	if ch.NewDCGM != ch.OldDCGM {
		cur.DCGMExporter = ch.NewDCGM
	}
	return cur
}

// HolderNodes are the nodes whose GPU holders Decide needs.
func (r *DriverReview) HolderNodes() []string { return names(r.pending) }

// Decide applies the Plan rules that carry over to the driver path: a record
// per hardware, the node's current kernel and RKE2 in it, serialized
// upgrades, holders drained or absent, and no unproven rollback.
func (r *DriverReview) Decide(holders map[string][]Holder, holdersErr error) Decision {
	ch := r.req.Change
	d := Decision{Object: ch.Object, Nodes: r.HolderNodes()}
	if !r.changed || len(r.pending) == 0 {
		// Nothing reloads: no reached node would change.
		d.Allowed = true
		return d
	}
	var bs blockers
	r.policyRules(&bs)
	usable := r.recordRules(&bs, &d)
	for _, f := range r.pending {
		if len(r.names) == 0 {
			break // RecordMissing says it all
		}
		cur := r.current[f.Name]
		if f.Identities == nil {
			bs.forbid(CodeHardwareUnknown, f.Name, pathDriverRecords, "GPU node %s has no subsystem-qualified GPU identity label, so no record can cover it; %s", f.Name, nodeFeatureRuleDoc)
			continue
		}
		rec := coveringRecord(usable, f.Identities)
		if rec == nil {
			bs.forbid(CodeHardwareNotQualified, f.Name, pathDriverRecords, "no record named in %s qualifies node %s's hardware %s; add a record for it (one per hardware identity)", AnnotationQualification, f.Name, strings.Join(f.Identities, ","))
			continue
		}
		if !r.cfg.factsPresent(&bs, f, cur, pathDriverRecords) {
			continue
		}
		dest, from := &rec.Target, rec.Source
		if r.rollback && rec.Source != nil {
			dest, from = rec.Source, &rec.Target
		}
		if want := r.after(cur); !SameTuple(want, *dest) {
			bs.forbid(CodeTargetNotQualified, f.Name, pathDriverRecords, "node %s would run %s, which record %s does not qualify: %s", f.Name, want, rec.ID, strings.Join(tupleDiff(want, *dest), ", "))
		}
		if from != nil && !SameTuple(cur, *from) {
			bs.forbid(CodeSourceMismatch, f.Name, pathDriverRecords, "node %s does not run record %s's source tuple: %s", f.Name, rec.ID, strings.Join(tupleDiff(cur, *from), ", "))
		}
		r.downgrade(&bs, f, cur, rec)
		switch hs := holders[f.Name]; {
		case holdersErr != nil:
			bs.forbid(CodeFactsMissing, f.Name, ch.PolicyPath, "the GPU holders on node %s could not be listed (%v); retry when the API server answers", f.Name, holdersErr)
		case len(hs) > 0 && !ch.Policy.DrainEnabled:
			bs.forbid(CodeGPUHolders, f.Name, ch.PolicyPath.Child("drain", "enable"), "node %s runs %d GPU holder(s): %s, and the upgrade policy does not drain; they would lose their GPUs during the module reload: enable upgradePolicy.drain or stop them first", f.Name, len(hs), holderList(hs))
		case len(hs) > 0:
			d.Warnings = append(d.Warnings, fmt.Sprintf("node %s runs %d GPU holder(s); the upgrade policy drains them before the reload", f.Name, len(hs)))
		}
	}
	for _, v := range []struct {
		c    Component
		v    string
		path *field.Path
	}{{ComponentDriver, ch.NewDriver, ch.DriverPath}, {ComponentDCGMExporter, ch.NewDCGM, ch.DCGMPath}} {
		if v.v != "" {
			if err := ParseComponent(v.c, v.v); err != nil {
				bs.invalid(CodeVersionInvalid, "", v.path, v.v, "%v", err)
			}
		}
	}
	return r.cfg.finish(d, bs, r.req.User, ch.Annotations)
}

// policyRules: the operator must upgrade one node at a time.
func (r *DriverReview) policyRules(bs *blockers) {
	p, path := r.req.Change.Policy, r.req.Change.PolicyPath
	switch {
	case !p.Present:
		bs.add(CodeConcurrencyNotSerial, "", field.Required(path, "the ClusterPolicy has no driver upgradePolicy, so the operator would reload the driver on every node at once; set upgradePolicy.autoUpgrade: true and maxParallelUpgrades: 1"))
	case !p.AutoUpgrade:
		bs.invalid(CodeConcurrencyNotSerial, "", path.Child("autoUpgrade"), false, "without autoUpgrade the operator does not serialize the driver rollout; set upgradePolicy.autoUpgrade: true and maxParallelUpgrades: 1")
	case p.MaxParallelUpgrades != 1:
		bs.invalid(CodeConcurrencyNotSerial, "", path.Child("maxParallelUpgrades"), p.MaxParallelUpgrades, "maxParallelUpgrades is %d (0 means all at once); GPU nodes take a new driver one at a time: set it to 1", p.MaxParallelUpgrades)
	}
}

// recordRules checks every named record and returns the usable ones.
func (r *DriverReview) recordRules(bs *blockers, d *Decision) []*qualification.Record {
	if len(r.names) == 0 {
		bs.add(CodeRecordMissing, "", field.Required(pathDriverRecords, fmt.Sprintf("the change names no qualification record; annotate it with %s=<record ConfigMap>[,<another, one per hardware identity>]", AnnotationQualification)))
		return nil
	}
	var usable []*qualification.Record
	var refs []string
	for _, name := range r.names {
		e, ok := r.cl.Records[name]
		rec := r.cfg.checkRecord(bs, recordCheck{name: name, entry: e, found: ok, user: r.req.User, now: r.req.Now,
			path: pathDriverRecords, rollback: r.rollback, subject: "change", act: "making this change"})
		if rec != nil {
			refs = append(refs, rec.Ref())
			usable = append(usable, rec)
		}
	}
	d.RecordRefs = refs
	return usable
}

func coveringRecord(recs []*qualification.Record, ids []string) *qualification.Record {
	for _, rec := range recs {
		if slices.Equal(rec.NormalizedHardware(), ids) {
			return rec
		}
	}
	return nil
}

func (r *DriverReview) downgrade(bs *blockers, f NodeFacts, cur qualification.Tuple, rec *qualification.Record) {
	ch := r.req.Change
	proven := r.rollback && rec.Source != nil && rec.Canary.RollbackPassed
	for _, v := range []struct {
		c        Component
		old, new string
		path     *field.Path
	}{{ComponentDriver, ch.OldDriver, ch.NewDriver, ch.DriverPath}, {ComponentDCGMExporter, ch.OldDCGM, ch.NewDCGM, ch.DCGMPath}} {
		if v.old == v.new || v.new == "" {
			continue
		}
		if cmp, err := CompareComponent(v.c, v.new, TupleValue(cur, v.c)); err == nil && cmp < 0 && !proven {
			bs.invalid(CodeComponentDowngrade, f.Name, v.path, v.new, "node %s runs %s %s and the change moves it back to %s; only a proven rollback may (a record with source and rollbackPassed, and the object annotated %s=true)", f.Name, v.c, TupleValue(cur, v.c), v.new, AnnotationRollback)
		}
	}
}
