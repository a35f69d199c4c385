package gate

import (
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
	// PolicyErr is the adapter's failure to read the policy (a live read of
	// the ClusterPolicy for an NVIDIADriver): FactsMissing, not "no policy".
	PolicyErr error
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

// Decide builds one Transition per reached node that would change, under
// the named record that covers its hardware, and applies the rule table
// and the upgrade policy rule.
func (r *DriverReview) Decide(holders map[string][]Holder, holdersErr error) Decision {
	ch := r.req.Change
	d := Decision{Object: ch.Object, Nodes: r.HolderNodes()}
	if !r.changed || len(r.pending) == 0 {
		// Nothing reloads: no reached node would change.
		d.Allowed = true
		return d
	}
	var f findings
	if ch.PolicyErr != nil {
		f.add(factsMissing("", ch.PolicyPath, "the ClusterPolicy's driver upgradePolicy", fromAPI, ch.PolicyErr))
	} else {
		policyRules(&f, ch.Policy, ch.PolicyPath)
	}
	usable := r.recordRules(&f, &d)
	if len(r.names) > 0 { // else RecordMissing says it all
		var ts []*Transition
		for _, nf := range r.pending {
			cur := r.current[nf.Name]
			after := r.after(cur)
			t := newTransition(r.cfg, nf, cur, coveringRecord(usable, nf.Identities), r.rollback)
			t.After, t.ByHardware = &after, true
			t.Path, t.RecordPath, t.HoldersPath = pathDriverRecords, pathDriverRecords, ch.PolicyPath
			t.AfterPath = map[Component]*field.Path{ComponentDriver: ch.DriverPath, ComponentDCGMExporter: ch.DCGMPath}
			t.CheckHolders, t.Holders, t.HoldersErr, t.Drains = true, holders[nf.Name], holdersErr, ch.Policy.DrainEnabled
			ts = append(ts, t)
		}
		judge(ReviewDriver, ts, &f)
	}
	return r.cfg.finish(d, f, r.req.User, ch.Annotations)
}

// recordRules checks every named record and returns the usable ones.
func (r *DriverReview) recordRules(f *findings, d *Decision) []*qualification.Record {
	if len(r.names) == 0 {
		f.add(recordMissing(r.cfg, pathDriverRecords, "", missingDriverAnnotation))
		return nil
	}
	var usable []*qualification.Record
	var refs []string
	for _, name := range r.names {
		e, ok := r.cl.Records[name]
		rec := r.cfg.useRecord(f, recordUse{name: name, entry: e, found: ok, user: r.req.User, now: r.req.Now,
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
