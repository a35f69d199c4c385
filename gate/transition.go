package gate

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Transition is one node moving from its current tuple to a destination
// tuple under a record: what every per-node rule judges. Plans build one per
// pending node, the driver path one per reached node that would change,
// upgrade-check one from its flags, and a per-node step (PrepareNodeStep)
// one for exactly the node it reviews.
type Transition struct {
	// recordHardware is Record.NormalizedHardware() when the review worked
	// it out once for all its transitions.
	recordHardware []string
	Node           NodeFacts
	Current        qualification.Tuple
	// After is the tuple the request itself says the node will run (the
	// driver path: current with the new versions; upgrade-check: the typed
	// target). Nil when the request leaves it to the record: a Plan's
	// upgrade image does not say which tuple it installs.
	After *qualification.Tuple
	// Record is the usable record that governs the move; nil when none is
	// (the record rules have already denied).
	Record   *qualification.Record
	Rollback bool
	// Dest is the tuple the record qualifies the node to run (its target,
	// or its source for a rollback); From is the tuple the node must run
	// now, when the record says (its source, or its target for a rollback).
	Dest, From *qualification.Tuple

	// RKE2 is the RKE2 version the node will run and RKE2Path where the
	// request (or the record) writes it; "" when it does not parse.
	RKE2     string
	RKE2Path *field.Path
	// Path is the field node-level blockers point at; RecordPath the field
	// that names the record; AfterPath, when set, where the request writes
	// each destination component, and CurrentPath where it writes each
	// current one (typed values).
	Path, RecordPath *field.Path
	AfterPath        map[Component]*field.Path
	CurrentPath      map[Component]*field.Path
	// Typed marks values a person typed (upgrade-check): compared byte for
	// byte and held to the anchor's forms, and a rollback is never proven.
	Typed bool
	// CurrentUnknown says why a member of the current tuple the request
	// moves cannot be read ("" : it can); FactsMissing then, and the tuple
	// rules skip the transition.
	CurrentUnknown string
	// CurrentFrom says, per member of Current not read from the node
	// itself, where it came from (a DRA driver version the records name
	// for the tuple a node runs nothing of the driver on); the blockers
	// that cite the current value say it.
	CurrentFrom map[Component]string

	// Holders are the node's GPU holders, HoldersErr the failure to list
	// them; CheckHolders false when the review has no cluster (upgrade-check).
	// Drains: the request's own policy drains holders first (driver path).
	Holders      []Holder
	HoldersErr   error
	HoldersPath  *field.Path
	CheckHolders bool
	Drains       bool
	// Unload: the driver is removed with its object (a DELETE), DrainOver:
	// the reload starts now (the per-node step), so the drain is over or
	// never ran; either way any holder left loses its GPUs.
	Unload, DrainOver bool
	// Unscheduled: the unload is an UPDATE whose scheduling no longer
	// selects the node; it names that scheduling (a DRA driver's plugin
	// DaemonSet's, an NVIDIADriver's nodeSelector). "" for a DELETE.
	Unscheduled string
	// ByHardware: the review picks the record by the node's hardware among
	// several (driver path); Record nil then means none covers the node.
	ByHardware bool

	cfg *Config
	// versions is the review's memo of parsed versions (reviewBase.versions;
	// nil parses every time).
	versions *fleet.Versions
	// factsOK is set by the facts rule: the tuple rules need every fact.
	factsOK bool
}

// newTransition fills Dest and From from the record and the rollback flag.
func newTransition(cfg *Config, f NodeFacts, cur qualification.Tuple, rec *qualification.Record, rollback bool) *Transition {
	t := &Transition{cfg: cfg, Node: f, Current: cur, Record: rec, Rollback: rollback}
	if rec != nil {
		t.Dest, t.From = &rec.Target, rec.Source
		if rollback && rec.Source != nil {
			t.Dest, t.From = rec.Source, &rec.Target
		}
	}
	return t
}

// destination is what the node will run: the request's tuple when it says,
// else the record's.
func (t *Transition) destination() *qualification.Tuple {
	if t.After != nil {
		return t.After
	}
	return t.Dest
}

// atDestination: the node already runs the tuple it would move to, so only
// the rules about the upgrade step itself (holders, wave) still matter.
func (t *Transition) atDestination() bool {
	d := t.destination()
	return d != nil && !t.Typed && fleet.SameTupleIn(t.versions, t.Current, *d)
}

// currentFrom says where the current value of the components came from
// when not from the node itself (CurrentFrom): " (...)", or "".
func (t *Transition) currentFrom(cs ...Component) string {
	var out []string
	for _, c := range cs {
		if from := t.CurrentFrom[c]; from != "" {
			out = append(out, from)
		}
	}
	if len(out) == 0 {
		return ""
	}
	return " (" + strings.Join(out, "; ") + ")"
}

// unjudgeable: no record covers the node's hardware, so nothing but the
// hardware can be judged.
func (t *Transition) unjudgeable() bool { return t.ByHardware && t.Record == nil }

// proven says whether a move backwards is a proven rollback.
func (t *Transition) proven() bool {
	return !t.Typed && t.Rollback && t.Record != nil && t.Record.Source != nil && t.Record.Canary.RollbackPassed
}

func (t *Transition) pathOf(paths map[Component]*field.Path, c Component, def *field.Path) *field.Path {
	if p := paths[c]; p != nil {
		return p
	}
	return def
}
