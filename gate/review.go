package gate

import (
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// review is what the rule table's rules apply to: every review type
// (PlanReview, DriverReview, NodeReview and the single-object reviews)
// embeds a reviewBase, and a rule reads what is common there, or the
// review's own type where it judges what only that review has (a Plan's
// spec, a Node's labels).
type review interface {
	base() *reviewBase
}

// HolderListing yields the GPU holders of a review's HolderNodes (and the
// adapter's failure to list them, which fails the review closed). The
// review calls it once, when the table reaches the holder row, its last:
// an adapter that lists them meanwhile overlaps the listing with every
// other rule.
type HolderListing func() (map[string][]Holder, error)

// The kinds of the reviews (reviewBase.kinds), shared.
var (
	kindsPlan           = []Review{ReviewPlan}
	kindsSUCStep        = []Review{ReviewPlan, ReviewSUCStep}
	kindsNode           = []Review{ReviewNode}
	kindsModeStep       = []Review{ReviewModeStep}
	kindsNodeTaints     = []Review{ReviewNodeTaints}
	kindsDriver         = []Review{ReviewDriver}
	kindsDriverStep     = []Review{ReviewDriverStep}
	kindsOperator       = []Review{ReviewOperator}
	kindsCompletion     = []Review{ReviewCompletion}
	kindsPlanStatus     = []Review{ReviewPlanStatus}
	kindsRecord         = []Review{ReviewRecord}
	kindsHaltRecord     = []Review{ReviewHaltRecord}
	kindsSubscription   = []Review{ReviewSubscription}
	kindsSUCJob         = []Review{ReviewSUCJob}
	kindsPlanNudge      = []Review{ReviewPlanNudge}
	kindsDRADaemonSet   = []Review{ReviewDRADaemonSet}
	kindsDRAWorkload    = []Review{ReviewDRAWorkload}
	kindsValidator      = []Review{ReviewValidator}
	kindsUpgradeCheck   = []Review{ReviewUpgradeCheck}
	kindsValidateRecord = []Review{ReviewValidateRecord}
	kindsAdmission      = []Review{ReviewAdmission}
	// allKinds are the kinds the table's steps are worked out for once
	// (stepsByKinds): every review alone (allReviews), and SUC's step, which
	// runs as a Plan too. A new review needs no entry here.
	allKinds = func() [][]Review {
		out := [][]Review{kindsSUCStep}
		for _, v := range allReviews {
			out = append(out, []Review{v})
		}
		return out
	}()
)

// reviewBase is what every review gives its rules.
type reviewBase struct {
	// kinds are the reviews this one runs as: the rows whose Reviews name
	// one of them apply.
	kinds []Review
	cfg   *Config
	cl    *Cluster
	user  UserInfo
	now   time.Time
	// pending are the GPU nodes the review moves or reloads.
	pending []NodeFacts
	// ts are the review's transitions, one per node it moves, built before
	// the table runs; unloads are nodes whose driver goes away (a driver
	// deletion), which only the holder rule judges.
	ts, unloads []*Transition
	rollback    bool
	// perNode: a per-node step (SUC's Job start, the driver's reload of one
	// node); unloading: the review removes the driver (nothing moves).
	perNode, unloading bool
	// names are the records the object names (in order), recordPath the
	// field that names them; uses are those that loaded, with the tuple each
	// moves nodes to; records says the review uses records at all.
	records    bool
	names      []string
	recordPath *field.Path
	uses       []recordDest
	// subject and act word record messages ("Plan", "applying this Plan").
	subject, act string
	missing      missingProblem
	// list yields the holders (HolderListing); holders are what it yielded.
	list       HolderListing
	listed     bool
	holders    map[string][]Holder
	holdersErr error
	// fleetCl is the cluster the rollout and budget rows count on (the
	// review's own unless a per-node step reads the fleet live), fs its scan.
	fleetCl *Cluster
	fs      *fleetScan
	// vs is the memo of parsed versions its rules share (versions).
	vs      *fleet.Versions
	stopped bool
	// finds and dec hold a run's findings and decision: in the review,
	// which is on the heap already, rather than each escaping on its own
	// (the table calls its rules indirectly).
	finds findings
	dec   Decision
}

// recordDest is a loaded record and the tuple it moves nodes to.
type recordDest struct {
	rec  *qualification.Record
	dest *qualification.Tuple
}

func (b *reviewBase) base() *reviewBase { return b }

// versions is the memo of parsed versions the review's rules share: the
// fleet view's, so every review of one set of objects parses a version
// once (a review without a cluster keeps its own).
func (b *reviewBase) versions() *fleet.Versions {
	if b.vs == nil {
		if b.cl != nil {
			b.vs = b.cl.fleetView().Versions()
		} else {
			b.vs = fleet.NewVersions()
		}
	}
	return b.vs
}

// stop ends the review after the current row: nothing further can be
// judged.
func (b *reviewBase) stop() { b.stopped = true }

// awaitHolders waits for the listing once and gives each transition its
// node's holders.
func (b *reviewBase) awaitHolders() (map[string][]Holder, error) {
	if !b.listed {
		b.listed = true
		if b.list != nil { // else beginListed gave them
			b.holders, b.holdersErr = b.list()
		}
		for _, ts := range [][]*Transition{b.ts, b.unloads} {
			for _, t := range ts {
				t.Holders, t.HoldersErr = b.holders[t.Node.Name], b.holdersErr
			}
		}
	}
	return b.holders, b.holdersErr
}

// fleet is the cluster the rollout and budget rows count on, and its scan,
// built once per review.
func (b *reviewBase) fleet() (*Cluster, *fleetScan) {
	if b.fs == nil {
		if b.fleetCl == nil {
			b.fleetCl = b.cl
		}
		b.fs = b.cfg.scanFleet(b.fleetCl)
	}
	return b.fleetCl, b.fs
}

// begin readies the review for a run of the table, the holders still to
// list.
func (b *reviewBase) begin(list HolderListing) {
	b.list, b.listed, b.holders, b.holdersErr, b.stopped = list, false, nil, nil, false
}

// beginListed readies the review with the holders at hand.
func (b *reviewBase) beginListed(holders map[string][]Holder, err error) {
	b.list, b.listed, b.holders, b.holdersErr, b.stopped = nil, false, holders, err, false
}
