package gate

import (
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
	// ReviewAdmission: what any webhook answers before the engine runs
	// (a malformed review, facts the caches cannot give).
	ReviewAdmission Review = "admission"
)

// Rule is one row of the rule table: the codes it emits and the reviews
// that apply it. A transition rule judges one Transition (node N moving
// from tuple A to tuple B under record R) and is applied by every review in
// the table's order; a review-level rule (Judge nil) reads the review's own
// object and is applied by that review at the step its comment names.
type Rule struct {
	// Name is the rule file's name without rule_ and .go.
	Name    string
	Codes   []Code
	Reviews []Review
	Judge   func(t *Transition, f *findings)
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

// ruleTable is the engine's rule table, in the order blockers are reported.
// To add a code: add its constant (code.go), a rule_<name>.go file with the
// one function that builds its blocker, a row here (with Judge for a
// transition rule), and a line in the README's code table and in the
// contract of every webhook that runs a review the row names;
// TestDocumentedCodes and TestEveryCodeIsInTheTable fail until they agree.
var ruleTable = []Rule{
	// The object itself (review-level).
	{Name: "shape", Codes: []Code{CodeSelectorInvalid, CodeMixedPlan, CodeUnpinnedVersion}, Reviews: planPaths},
	// The per-node driver step is held by the budget instead (rule_budget.go).
	{Name: "concurrency", Codes: []Code{CodeConcurrencyNotSerial}, Reviews: []Review{ReviewPlan, ReviewNode, ReviewDriver, ReviewOperator}},
	{Name: "shape", Codes: []Code{CodeCordonRequired}, Reviews: planPaths},
	{Name: "image", Codes: []Code{CodeImageInvalid}, Reviews: planPaths},
	// The record (review-level: once per named record).
	{Name: "record", Codes: []Code{CodeRecordMissing}, Reviews: changePaths},
	{Name: "record", Codes: []Code{CodeRecordInvalid, CodeRecordNotQualified, CodeCanaryIncomplete}, Reviews: recordUsers},
	// A stale record ConfigMap is history: its webhook only warns.
	{Name: "evidence", Codes: []Code{CodeEvidenceStale}, Reviews: []Review{ReviewPlan, ReviewNode, ReviewDriver, ReviewDriverStep, ReviewOperator, ReviewUpgradeCheck, ReviewValidateRecord}},
	{Name: "evidence", Codes: []Code{CodeEvidenceFromFuture}, Reviews: recordUsers},
	{Name: "approval", Codes: []Code{CodeRecordNotApproved}, Reviews: changePaths},
	{Name: "selfapproved", Codes: []Code{CodeSelfApproved}, Reviews: changePaths},
	// Who may write a record's author and approval annotations.
	{Name: "attestation", Codes: []Code{CodeAttestationForged}, Reviews: []Review{ReviewRecord}},
	// One transition per node the review moves.
	{Name: "hardware", Codes: []Code{CodeHardwareUnknown, CodeHardwareNotQualified}, Reviews: movePaths, Judge: hardwareRule},
	{Name: "facts", Codes: []Code{CodeFactsMissing}, Reviews: append(slices.Clone(movePaths), ReviewCompletion), Judge: factsRule},
	{Name: "version", Codes: []Code{CodeVersionInvalid}, Reviews: movePaths, Judge: versionRule},
	{Name: "target", Codes: []Code{CodeTargetNotQualified}, Reviews: movePaths, Judge: targetRule},
	{Name: "source", Codes: []Code{CodeSourceMismatch}, Reviews: movePaths, Judge: sourceRule},
	{Name: "rke2", Codes: []Code{CodeRKE2Downgrade, CodeMinorSkip}, Reviews: []Review{ReviewPlan, ReviewNode, ReviewUpgradeCheck}, Judge: rke2Rule},
	{Name: "downgrade", Codes: []Code{CodeComponentDowngrade}, Reviews: movePaths, Judge: downgradeRule},
	{Name: "nochange", Codes: []Code{CodeNoChange}, Reviews: []Review{ReviewUpgradeCheck}, Judge: noChangeRule},
	{Name: "holders", Codes: []Code{CodeGPUHolders}, Reviews: reloadPaths, Judge: holdersRule},
	// Across the review's transitions and the cluster (review-level).
	{Name: "skew", Codes: []Code{CodeVersionSkew}, Reviews: planPaths},
	{Name: "wave", Codes: []Code{CodeMultipleCanaries, CodeCanaryNotProven, CodeCrossFailureDomain}, Reviews: planPaths},
	{Name: "inflight", Codes: []Code{CodeVersionEditInFlight}, Reviews: planPaths},
	// What SUC alone writes in a Plan's status (review-level).
	{Name: "planstatus", Codes: []Code{CodePlanStatusForged}, Reviews: []Review{ReviewPlanStatus}},
	// Proof of the nodes already upgraded (review-level).
	{Name: "proof", Codes: []Code{CodePreviousNodeUnproven}, Reviews: changePaths},
	{Name: "proof", Codes: []Code{CodeUncordonBeforeProof}, Reviews: []Review{ReviewNode, ReviewCompletion}},
	// One GPU rollout at a time, within the disruption budget, in a
	// maintenance window (review-level).
	{Name: "window", Codes: []Code{CodeWindowInvalid}, Reviews: planPaths},
	{Name: "rollout", Codes: []Code{CodeRolloutInFlight}, Reviews: []Review{ReviewPlan, ReviewNode, ReviewDriver, ReviewOperator}},
	{Name: "window", Codes: []Code{CodeOutsideWindow}, Reviews: []Review{ReviewDriver, ReviewDriverStep, ReviewSUCStep}},
	{Name: "budget", Codes: []Code{CodeDisruptionBudgetExceeded}, Reviews: reloadPaths},
	// Who cordoned a GPU node (nodestate.go): an upgrade does not start on,
	// nor SUC uncordon, a node someone else took out.
	{Name: "cordon", Codes: []Code{CodeCordonedByOther}, Reviews: []Review{ReviewPlan, ReviewNode, ReviewCompletion}},
	// A halted rollout (review-level): forward moves, the failed node's
	// uncordon, and the halt record's own writes.
	// A halt ends only by its audited clear, and the requester it names is
	// who may not clear it: break glass overrides neither.
	{Name: "halt", Codes: []Code{CodeRolloutHalted}, Reviews: []Review{ReviewPlan, ReviewNode, ReviewDriver, ReviewDriverStep, ReviewOperator, ReviewCompletion, ReviewHaltRecord}, NoBreakGlass: true},
	{Name: "requester", Codes: []Code{CodeRequesterMismatch, CodeRequesterMissing}, Reviews: []Review{ReviewPlan}, NoBreakGlass: true},
	// GPU mode of a Node (review-level).
	{Name: "mode", Codes: []Code{CodeModeChangeNotCordoned, CodeModeUnsupported, CodeModeLabelsInconsistent, CodeUncordonDuringTransition}, Reviews: []Review{ReviewNode}},
	{Name: "identity", Codes: []Code{CodeGPUIdentityRemoved}, Reviews: []Review{ReviewNode}},
	// Who moved a node into a Plan, who handed a cordon over: attested by
	// the Node write itself, as requested-by is by the Plan's.
	{Name: "movedby", Codes: []Code{CodeMovedByMissing}, Reviews: []Review{ReviewNode}},
	{Name: "cordon", Codes: []Code{CodeNodeAttestationForged}, Reviews: []Review{ReviewNode}},
	// Who may write each fact of a GPU node (ownership.go, review-level).
	{Name: "ownedfact", Codes: []Code{CodeOwnedFactWritten}, Reviews: []Review{ReviewNode}},
	// The adapter's answer to a review it cannot read.
	{Name: "reviewinvalid", Codes: []Code{CodeReviewInvalid}, Reviews: []Review{ReviewAdmission}},
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

// judge applies every transition rule of the table, in order, to each
// transition of a review.
func judge(review Review, ts []*Transition, f *findings) { judgeAllBut(review, ts, f, -1) }

// holdersRow is the holder rule's row: the one transition rule that reads
// what the adapter lists live, so a review can apply the others while the
// listing is in flight (PlanReview.DecideBeforeHolders).
var holdersRow = slices.IndexFunc(ruleTable, func(r Rule) bool { return r.Name == "holders" })

// judgeAllBut is judge without the table's row skip (-1: none); it returns
// where that row's findings go.
func judgeAllBut(review Review, ts []*Transition, f *findings, skip int) (at findingsAt) {
	for i, r := range ruleTable {
		if i == skip {
			at = f.at()
			continue
		}
		judgeRow(review, r, ts, f)
	}
	return at
}

// judgeRow applies one row of the table to each transition of a review.
func judgeRow(review Review, r Rule, ts []*Transition, f *findings) {
	if r.Judge == nil || !slices.Contains(r.Reviews, review) {
		return
	}
	for _, t := range ts {
		n := len(f.blockers)
		r.Judge(t, f)
		for i := n; i < len(f.blockers); i++ {
			if b := f.blockers[i].perNode; b != nil && len(t.Node.Identities) > 0 {
				b.hardware = strings.Join(t.Node.Identities, ",")
			}
		}
	}
}
