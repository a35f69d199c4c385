package gate

import (
	"reflect"
	"slices"
	"strings"
)

// Review names one review path of the engine. A webhook or command runs one
// or more of them; its contract documents the codes they can emit
// (CodesOf), and TestDocumentedCodes holds the docs to this table.
type Review string

const (
	// ReviewPlan: a Plan write (plans webhook, check), and one node's step
	// of a Plan (PrepareNodeStep).
	ReviewPlan Review = "plan"
	// ReviewNode: a Node update; it also runs ReviewPlan for every Plan the
	// change pulls the node into.
	ReviewNode Review = "node"
	// ReviewDriver: a ClusterPolicy or NVIDIADriver write that changes what
	// runs on GPU nodes.
	ReviewDriver Review = "driver"
	// ReviewDriverStep: the GPU Operator's per-node driver step, one node
	// moving into pod-restart-required (PrepareDriverStep).
	ReviewDriverStep Review = "driver-step"
	// ReviewOperator: an upgrade of the GPU Operator itself.
	ReviewOperator Review = "operator"
	// ReviewPlanStatus: a write of a Plan's status (JudgePlanStatus).
	ReviewPlanStatus Review = "plan-status"
	// ReviewRecord: a record ConfigMap write.
	ReviewRecord Review = "record"
	// ReviewUpgradeCheck: the CLI's upgrade-check, every value typed.
	ReviewUpgradeCheck Review = "upgrade-check"
	// ReviewValidateRecord: the CLI's validate-record lint.
	ReviewValidateRecord Review = "validate-record"
	// ReviewCompletion: SUC's completion write of a node (uncordon and
	// plan label when its Job completed), a per-node step.
	ReviewCompletion Review = "completion"
	// ReviewSUCStep: SUC's start of a GPU node's upgrade Job
	// (PrepareSUCStep): the Plan's review on that node (ReviewPlan) and the
	// configured maintenance windows.
	ReviewSUCStep Review = "suc-step"
	// ReviewHaltRecord: a write of the halt record (DecideHaltRecordWrite).
	ReviewHaltRecord Review = "halt-record"
	// ReviewSUCJob: a write of a Job carrying SUC's labels by anyone but
	// SUC (DecideSUCJobWrite).
	ReviewSUCJob Review = "suc-job"
	// ReviewAdmission: what any webhook answers before the engine runs
	// (a malformed review, facts the caches cannot give).
	ReviewAdmission Review = "admission"
)

// Rule is one row of the rule table: the codes it emits, the reviews that
// apply it and the function that applies it. Every review runs the table
// once, row by row in the table's order (applyTable), which is the order
// its blockers are reported in: a row applies when its Reviews name one of
// the review's kinds.
type Rule struct {
	// Name is the rule file's name without rule_ and .go.
	Name    string
	Codes   []Code
	Reviews []Review
	// Judge is a transition rule: it judges one Transition (node N moving
	// from tuple A to tuple B under record R), each of the review's in turn.
	Judge func(t *Transition, f *findings)
	// Apply is a review-level rule: it reads the review itself (its object,
	// the cluster, its transitions taken together). Rows one function serves
	// name the same Apply; it runs once per review, at the first of them.
	// A row may have both: Apply runs first.
	Apply func(rv review, f *findings, d *Decision)
	// NoBreakGlass: the break-glass annotation does not override these
	// codes (a write they deny stays denied whatever else break glass
	// overrides); docs/install.md lists them (TestBreakGlassCodesDocumented).
	NoBreakGlass bool
}

var (
	planPaths   = []Review{ReviewPlan, ReviewNode}
	changePaths = []Review{ReviewPlan, ReviewNode, ReviewDriver, ReviewDriverStep, ReviewOperator}
	movePaths   = []Review{ReviewPlan, ReviewNode, ReviewDriver, ReviewDriverStep, ReviewOperator, ReviewUpgradeCheck}
	recordUsers = []Review{ReviewPlan, ReviewNode, ReviewDriver, ReviewDriverStep, ReviewOperator, ReviewUpgradeCheck, ReviewRecord, ReviewValidateRecord}
	// reloadPaths take GPUs from their holders (an operator upgrade does not).
	reloadPaths = []Review{ReviewPlan, ReviewNode, ReviewDriver, ReviewDriverStep}
)

// ruleTable is the engine's rule table and its dispatcher: each review
// applies the rows that name it, in this order, which is the order its
// blockers are reported in.
//
// To add a code: its constant (code.go); a rule_<name>.go file with the one
// function that builds its blocker and the rule that adds it (a Judge over
// one *Transition, or an Apply over the review, reading what it needs from
// rv.base() or the review's own type); a row here, at the place its
// blockers should be reported; and a line in the README's code table and in
// the contract of every webhook that runs a review the row names.
// TestDocumentedCodes, TestEveryCodeIsInTheTable and TestRowsAppliedPerReview
// fail until they agree. No review calls a rule itself.
var ruleTable []Rule

// rowKinds is each row's Reviews as a set of bits (reviewBit); stepsByKinds
// the steps of each review's kinds (reviewBase.kinds as bits), so that a
// review walks only its own rows (a Node review 34 of the table's 42, SUC's
// completion 4, a halt record write 1), its Apply-once choice made, and
// applyTable allocates nothing.
var (
	rowKinds     []uint64
	stepsByKinds map[uint64][]step
)

// step is one row a review applies; apply: the row's Apply runs here, the
// first of the review's rows to name it (it runs once per review).
type step struct {
	row   int
	apply bool
}

func init() {
	ruleTable = rules()
	rowKinds = make([]uint64, len(ruleTable))
	for i, r := range ruleTable {
		for _, v := range r.Reviews {
			rowKinds[i] |= reviewBit(v)
		}
	}
	stepsByKinds = map[uint64][]step{}
	for _, kinds := range allKinds {
		mask := kindsBits(kinds)
		stepsByKinds[mask] = stepsOf(mask)
	}
}

// stepsOf lists, in table order, the rows that name one of the kinds.
func stepsOf(kinds uint64) []step {
	var out []step
	var applied []uintptr // the Apply functions already placed
	for i, r := range ruleTable {
		if rowKinds[i]&kinds == 0 {
			continue
		}
		s := step{row: i}
		if r.Apply != nil {
			fn := reflect.ValueOf(r.Apply).Pointer()
			if s.apply = !slices.Contains(applied, fn); s.apply {
				applied = append(applied, fn)
			}
		}
		out = append(out, s)
	}
	return out
}

func kindsBits(kinds []Review) uint64 {
	var bits uint64
	for _, v := range kinds {
		bits |= reviewBit(v)
	}
	return bits
}

// allReviews lists every review, its index its bit in rowKinds.
var allReviews = []Review{ReviewPlan, ReviewNode, ReviewDriver, ReviewDriverStep, ReviewOperator, ReviewPlanStatus, ReviewRecord,
	ReviewUpgradeCheck, ReviewValidateRecord, ReviewCompletion, ReviewSUCStep, ReviewHaltRecord, ReviewSUCJob, ReviewAdmission}

func reviewBit(v Review) uint64 { return 1 << slices.Index(allReviews, v) }

// rules builds the table (in a function: its rules' reviews run the table).
func rules() []Rule {
	return []Rule{
		// A per-node driver step whose rollout cannot be read is judged no further.
		{Name: "facts", Codes: []Code{CodeFactsMissing}, Reviews: []Review{ReviewDriverStep}, Apply: stepFactsRule},
		// The object itself (review-level). An invalid selector ends the review.
		{Name: "shape", Codes: []Code{CodeSelectorInvalid, CodeMixedPlan, CodeUnpinnedVersion}, Reviews: planPaths, Apply: shapeRule},
		// The per-node driver step is held by the budget instead (rule_budget.go).
		{Name: "concurrency", Codes: []Code{CodeConcurrencyNotSerial}, Reviews: []Review{ReviewPlan, ReviewNode, ReviewDriver, ReviewOperator}, Apply: concurrencyRule},
		{Name: "shape", Codes: []Code{CodeCordonRequired}, Reviews: planPaths, Apply: cordonRule},
		{Name: "window", Codes: []Code{CodeWindowInvalid}, Reviews: planPaths, Apply: windowRule},
		// Who may write a record's author and approval annotations
		// (a forged write is refused first, whatever its data).
		{Name: "attestation", Codes: []Code{CodeAttestationForged}, Reviews: []Review{ReviewRecord}, Apply: attestationRule},
		// The record (review-level: once per named record, one function for
		// the record, evidence, approval and selfapproved rows).
		{Name: "record", Codes: []Code{CodeRecordMissing}, Reviews: changePaths, Apply: recordRule},
		{Name: "record", Codes: []Code{CodeRecordInvalid, CodeRecordNotQualified, CodeCanaryIncomplete}, Reviews: recordUsers, Apply: recordRule},
		// A stale record ConfigMap is history: its webhook only warns.
		{Name: "evidence", Codes: []Code{CodeEvidenceStale}, Reviews: []Review{ReviewPlan, ReviewNode, ReviewDriver, ReviewDriverStep, ReviewOperator, ReviewUpgradeCheck, ReviewValidateRecord}, Apply: recordRule},
		{Name: "evidence", Codes: []Code{CodeEvidenceFromFuture}, Reviews: recordUsers, Apply: recordRule},
		{Name: "approval", Codes: []Code{CodeRecordNotApproved}, Reviews: changePaths, Apply: recordRule},
		{Name: "selfapproved", Codes: []Code{CodeSelfApproved}, Reviews: changePaths, Apply: recordRule},
		// The RKE2 version the Plan installs: its image, spec.version against
		// the record, and against the API server's.
		{Name: "image", Codes: []Code{CodeImageInvalid}, Reviews: planPaths, Apply: imageRule},
		{Name: "target", Codes: []Code{CodeTargetNotQualified}, Reviews: planPaths, Apply: planTargetRule},
		{Name: "skew", Codes: []Code{CodeVersionSkew}, Reviews: planPaths, Apply: skewRule},
		// One transition per node the review moves.
		{Name: "hardware", Codes: []Code{CodeHardwareUnknown, CodeHardwareNotQualified}, Reviews: movePaths, Judge: hardwareRule, Apply: typedHardwareRule},
		{Name: "facts", Codes: []Code{CodeFactsMissing}, Reviews: append(slices.Clone(movePaths), ReviewCompletion), Judge: factsRule},
		{Name: "version", Codes: []Code{CodeVersionInvalid}, Reviews: movePaths, Judge: versionRule},
		{Name: "target", Codes: []Code{CodeTargetNotQualified}, Reviews: movePaths, Judge: targetRule},
		{Name: "source", Codes: []Code{CodeSourceMismatch}, Reviews: movePaths, Judge: sourceRule},
		{Name: "rke2", Codes: []Code{CodeRKE2Downgrade, CodeMinorSkip}, Reviews: []Review{ReviewPlan, ReviewNode, ReviewUpgradeCheck}, Judge: rke2Rule},
		{Name: "downgrade", Codes: []Code{CodeComponentDowngrade}, Reviews: movePaths, Judge: downgradeRule},
		{Name: "nochange", Codes: []Code{CodeNoChange}, Reviews: []Review{ReviewUpgradeCheck}, Judge: noChangeRule},
		// Across the review's transitions and the cluster (review-level).
		{Name: "wave", Codes: []Code{CodeMultipleCanaries, CodeCanaryNotProven, CodeCrossFailureDomain}, Reviews: planPaths, Apply: waveRule},
		{Name: "inflight", Codes: []Code{CodeVersionEditInFlight}, Reviews: planPaths, Apply: inFlightRule},
		// What SUC alone writes in a Plan's status (review-level).
		{Name: "planstatus", Codes: []Code{CodePlanStatusForged}, Reviews: []Review{ReviewPlanStatus}, Apply: planStatusRule},
		// GPU mode and identity of a Node (review-level).
		{Name: "mode", Codes: []Code{CodeModeChangeNotCordoned, CodeModeUnsupported, CodeModeLabelsInconsistent, CodeUncordonDuringTransition}, Reviews: []Review{ReviewNode}, Apply: modeRule},
		{Name: "identity", Codes: []Code{CodeGPUIdentityRemoved}, Reviews: []Review{ReviewNode}, Apply: identityRule},
		// Who moved a node into a Plan, who handed a cordon over: attested by
		// the Node write itself, as requested-by is by the Plan's.
		{Name: "movedby", Codes: []Code{CodeMovedByMissing}, Reviews: []Review{ReviewNode}, Apply: movedByRule},
		{Name: "cordon", Codes: []Code{CodeNodeAttestationForged}, Reviews: []Review{ReviewNode}, Apply: handoverRule},
		// Who cordoned a GPU node (nodestate.go): SUC does not uncordon a node
		// someone else took out, nor a person one SUC is upgrading.
		{Name: "cordon", Codes: []Code{CodeCordonedByOther}, Reviews: []Review{ReviewNode, ReviewCompletion}, Apply: cordonUncordonRule},
		// Who may write each fact of a GPU node (ownership.go, review-level).
		{Name: "ownedfact", Codes: []Code{CodeOwnedFactWritten}, Reviews: []Review{ReviewNode}, Apply: ownedFactRule},
		// Proof of the nodes already upgraded (review-level).
		{Name: "proof", Codes: []Code{CodePreviousNodeUnproven}, Reviews: changePaths, Apply: proofRule},
		{Name: "proof", Codes: []Code{CodeUncordonBeforeProof}, Reviews: []Review{ReviewNode, ReviewCompletion}, Apply: uncordonProofRule},
		// One GPU rollout at a time, within the disruption budget, in a
		// maintenance window (review-level).
		{Name: "rollout", Codes: []Code{CodeRolloutInFlight}, Reviews: []Review{ReviewPlan, ReviewNode, ReviewDriver, ReviewOperator}, Apply: rolloutRule},
		{Name: "window", Codes: []Code{CodeOutsideWindow}, Reviews: []Review{ReviewDriver, ReviewDriverStep, ReviewSUCStep}, Apply: outsideWindowRule},
		{Name: "budget", Codes: []Code{CodeDisruptionBudgetExceeded}, Reviews: reloadPaths, Apply: budgetRule},
		// Who cordoned a GPU node (nodestate.go): an upgrade does not start on
		// a node someone else took out.
		{Name: "cordon", Codes: []Code{CodeCordonedByOther}, Reviews: []Review{ReviewPlan}, Apply: cordonedByOtherRule},
		// A halted rollout (review-level): forward moves, the failed node's
		// uncordon, and the halt record's own writes.
		// A halt ends only by its audited clear, and the requester it names is
		// who may not clear it: break glass overrides neither.
		{Name: "halt", Codes: []Code{CodeRolloutHalted}, Reviews: []Review{ReviewPlan, ReviewNode, ReviewDriver, ReviewDriverStep, ReviewOperator, ReviewCompletion, ReviewHaltRecord}, NoBreakGlass: true, Apply: haltRule},
		{Name: "requester", Codes: []Code{CodeRequesterMismatch, CodeRequesterMissing}, Reviews: []Review{ReviewPlan}, NoBreakGlass: true, Apply: requesterRule},
		// Only SUC writes a Job the gate reads as SUC's upgrade of a node.
		{Name: "sucjob", Codes: []Code{CodeSUCJobForged}, Reviews: []Review{ReviewSUCJob}, Apply: sucJobForgedRule},
		// The adapter's answer to a review it cannot read.
		{Name: "reviewinvalid", Codes: []Code{CodeReviewInvalid}, Reviews: []Review{ReviewAdmission}, Apply: reviewInvalidRule},
		// Last, so the adapter's listing of the holders is in flight while
		// every other row applies: the one row that waits for it.
		{Name: "holders", Codes: []Code{CodeGPUHolders}, Reviews: reloadPaths, Apply: holdersRow},
	}
}

// Rules returns the rule table (a copy), in order.
func Rules() []Rule { return append([]Rule(nil), ruleTable...) }

// NoBreakGlassCodes lists, in table order, the codes break glass does not
// override.
func NoBreakGlassCodes() []Code {
	var out []Code
	for _, r := range ruleTable {
		if r.NoBreakGlass {
			out = append(out, r.Codes...)
		}
	}
	return out
}

// CodesOf lists, in table order and once each, the codes the given reviews
// can emit.
func CodesOf(reviews ...Review) []Code {
	var out []Code
	for _, r := range ruleTable {
		if !slices.ContainsFunc(r.Reviews, func(v Review) bool { return slices.Contains(reviews, v) }) {
			continue
		}
		for _, c := range r.Codes {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// applyTable runs the rule table once for a review: every row that names
// one of its kinds, in the table's order. A row's Apply runs once per
// review however many rows name it; its Judge runs on each transition.
// A rule that leaves nothing further to judge (an invalid selector) stops
// the review (reviewBase.stop).
func applyTable(rv review, f *findings, d *Decision) {
	b := rv.base()
	kinds := kindsBits(b.kinds)
	steps, ok := stepsByKinds[kinds]
	if !ok {
		steps = stepsOf(kinds) // kinds that no shared kinds* slice holds
	}
	for _, s := range steps {
		r := &ruleTable[s.row]
		if rowApplied != nil {
			rowApplied(b.kinds, s.row)
		}
		if s.apply {
			r.Apply(rv, f, d)
		}
		if r.Judge != nil {
			judgeEach(r.Judge, b.ts, f)
		}
		if b.stopped {
			return
		}
	}
}

// rowApplied, set by tests, hears of each row a review applies
// (TestRowsAppliedPerReview).
var rowApplied func(kinds []Review, row int)

// judgeEach applies one transition rule to each transition; a per-node
// blocker keeps the node's hardware, so that only nodes of one hardware
// share a blocker (settle).
func judgeEach(judge func(t *Transition, f *findings), ts []*Transition, f *findings) {
	for _, t := range ts {
		n := len(f.blockers)
		judge(t, f)
		for i := n; i < len(f.blockers); i++ {
			if b := f.blockers[i].perNode; b != nil && len(t.Node.Identities) > 0 {
				b.hardware = strings.Join(t.Node.Identities, ",")
			}
		}
	}
}
