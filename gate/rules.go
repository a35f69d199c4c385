package gate

import (
	"reflect"
	"slices"
	"strings"
)

// Review names one review path of the engine. A webhook or command runs one
// or more of them; its contract documents the codes they can emit
// (CodesOf), generated from this table (TestCodeDocsAreGenerated).
type Review string

const (
	// ReviewPlan: a Plan write (plans webhook, check), and one node's step
	// of a Plan (PrepareNodeStep).
	ReviewPlan Review = "plan"
	// ReviewNode: a Node update; it also runs ReviewPlan for every Plan the
	// change pulls the node into.
	ReviewNode Review = "node"
	// ReviewNodeTaints: a Node update whose only change the Node rules
	// could read is its taints (its labels, cordon and the moved-by and
	// cordon-handover annotations as they were): the Node webhook sends one
	// that adds a NoExecute taint or lifts a NoSchedule or NoExecute one
	// (webhook/nodes.md). Judged by the rules that read taints alone: the
	// DRA kubelet plugin's install (drainstall) and unload (holders).
	ReviewNodeTaints Review = "node-taints"
	// ReviewModeStep: a Node write by an exempt identity (nfd-master
	// applying a NodeFeatureRule) that changes a GPU mode label, a per-node
	// step of a mode transition: the mode rules and the creation gates
	// alone (ownership.go, Step).
	ReviewModeStep Review = "mode-step"
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
	// ReviewSubscription: a write of an OLM Subscription of the GPU
	// Operator's package (DecideSubscription).
	ReviewSubscription Review = "subscription"
	// ReviewSUCJob: a write of a Job carrying SUC's labels by anyone but
	// SUC (DecideSUCJobWrite).
	ReviewSUCJob Review = "suc-job"
	// ReviewDRADaemonSet: a write of a DaemonSet in a DRA driver's
	// namespace that is no configured kubelet plugin
	// (DecideDRADaemonSetWrite).
	ReviewDRADaemonSet Review = "dra-daemonset"
	// ReviewDRAWorkload: a write of a Pod, or of another workload's Pod
	// template, in a DRA driver's namespace (DecideDRAWorkloadWrite).
	ReviewDRAWorkload Review = "dra-workload"
	// ReviewValidator: a write of the GPU Operator's validator DaemonSet by
	// anyone but the operator (DecideValidatorWrite).
	ReviewValidator Review = "validator"
	// ReviewPlanNudge: the gate's own write of a Plan (its nudge), or
	// anyone's that sets the nudge annotation (DecidePlanNudge).
	ReviewPlanNudge Review = "plan-nudge"
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
	// Docs documents each of Codes for this row: its one-line meaning, an
	// example message and what to do (CodeDoc). The README's code table,
	// the contracts' code lists and docs/codes.md are generated from them.
	Docs map[Code]CodeDoc
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
// blockers should be reported, with its Docs; then regenerate the README's
// code table, the contracts' code lists and docs/codes.md:
// go test ./webhook -run TestCodeDocsAreGenerated -update.
// TestCodeDocs, TestCodeDocsAreGenerated, TestEveryCodeIsInTheTable and
// TestRowsAppliedPerReview fail until they agree. No review calls a rule
// itself.
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
var allReviews = []Review{ReviewPlan, ReviewNode, ReviewNodeTaints, ReviewModeStep, ReviewDriver, ReviewDriverStep, ReviewOperator, ReviewPlanStatus, ReviewRecord,
	ReviewUpgradeCheck, ReviewValidateRecord, ReviewCompletion, ReviewSUCStep, ReviewHaltRecord, ReviewSubscription, ReviewSUCJob, ReviewPlanNudge, ReviewAdmission,
	ReviewDRADaemonSet, ReviewValidator, ReviewDRAWorkload}

func reviewBit(v Review) uint64 { return 1 << slices.Index(allReviews, v) }

// rules builds the table (in a function: its rules' reviews run the table).
func rules() []Rule {
	return []Rule{
		// A per-node driver step whose rollout cannot be read is judged no further.
		{Name: "facts", Codes: []Code{CodeFactsMissing}, Reviews: []Review{ReviewDriverStep}, Apply: stepFactsRule,
			Docs: map[Code]CodeDoc{
				CodeFactsMissing: {Meaning: "the per-node driver step's rollout (the operator's upgrade policy, the node's driver object) cannot be read; the step is judged no further"},
			}},
		// The object itself (review-level). An invalid selector ends the review.
		{Name: "shape", Codes: []Code{CodeSelectorInvalid, CodeMixedPlan, CodeUnpinnedVersion}, Reviews: planPaths, Apply: shapeRule,
			Docs: map[Code]CodeDoc{
				CodeSelectorInvalid: {Meaning: "`spec.nodeSelector` does not convert to a label selector (SUC would fail on it too); the review stops there",
					Example: "[SelectorInvalid] spec.nodeSelector is not a valid label selector: \"Near\" is not a valid label selector operator; fix the selector (SUC would fail on it too)"},
				CodeMixedPlan: {Meaning: "the Plan selects GPU and non-GPU nodes",
					Example: "[MixedPlan] the Plan selects 1 GPU node(s) (gpu-v100-01) and 1 non-GPU node(s) (cpu-01); give GPU nodes their own serialized Plan and exclude them from this one (e.g. nvidia.com/gpu.present DoesNotExist)"},
				CodeUnpinnedVersion: {Meaning: "`spec.version` is empty (a channel moves under a record)",
					Example: "[UnpinnedVersion] spec.version is empty and spec.channel \"https://update.rke2.io/v1-release/channels/stable\" moves under a qualified record; pin spec.version to the record's qualified version"},
			}},
		// The per-node driver step is held by the budget instead (rule_budget.go).
		{Name: "concurrency", Codes: []Code{CodeConcurrencyNotSerial}, Reviews: []Review{ReviewPlan, ReviewNode, ReviewDriver, ReviewOperator}, Apply: concurrencyRule,
			Docs: map[Code]CodeDoc{
				CodeConcurrencyNotSerial: {Meaning: "a Plan's `spec.concurrency` is not 1, or the GPU Operator's driver upgrade policy does not take one node at a time (`autoUpgrade: true`, `maxParallelUpgrades: 1`); at the per-node driver step the budget holds instead (`DisruptionBudgetExceeded`)",
					Example: "[ConcurrencyNotSerial] concurrency is 3; GPU Plans must upgrade one node at a time: set spec.concurrency: 1",
					Fix:     "set `spec.concurrency: 1` on the Plan; on the driver path `upgradePolicy.autoUpgrade: true` and `maxParallelUpgrades: 1`"},
			}},
		{Name: "shape", Codes: []Code{CodeCordonRequired}, Reviews: planPaths, Apply: cordonRule,
			Docs: map[Code]CodeDoc{
				CodeCordonRequired: {Meaning: "a GPU Plan sets neither `cordon: true` nor `drain`",
					Example: "[CordonRequired] neither spec.cordon: true nor spec.drain is set, so new GPU work could land on a node mid-upgrade; set spec.cordon: true (or a drain)"},
			}},
		{Name: "window", Codes: []Code{CodeWindowInvalid}, Reviews: planPaths, Apply: windowRule,
			Docs: map[Code]CodeDoc{
				CodeWindowInvalid: {Meaning: "a GPU Plan has no `spec.window` (unless `windows.requirePlanWindow: false`), or one SUC would not parse (value and expected form named)",
					Example: "[WindowInvalid] spec.window.days[0] \"Saturday\" does not parse as SUC reads it: expected a day: 0-6 (0 is Sunday) or su, sun, sunday, mo, ... in lower case; fix it (SUC would refuse the Plan and run nothing)",
					Fix:     "add a `spec.window` in SUC's form, e.g. `{days: [sa, su], startTime: \"02:00\", endTime: \"06:00\", timeZone: Europe/Berlin}`, or fix the field the message names"},
			}},
		// Who may write a record's author and approval annotations
		// (a forged write is refused first, whatever its data).
		{Name: "attestation", Codes: []Code{CodeAttestationForged}, Reviews: []Review{ReviewRecord}, Apply: attestationRule,
			Docs: map[Code]CodeDoc{
				CodeAttestationForged: {Meaning: "a record write whose author or approval annotations are not the requester's own: data written under another author, an approval by someone other than the user it names, by the author, of other data, or in the write that changes the data",
					Example: "[AttestationForged] \"carol\" wrote the data of record ConfigMap gpu-upgrade-gate/v100-r580 (gpu-upgrade-gate.io/author), so cannot approve it; a second person must (two-person rule)",
					Fix:     "each person writes only their own annotation: the author writes the data with `gpu-upgrade-gate.io/author: <their username>`; a second person, named in `approvedBy`, then sets `approved-by` and `approved-sha256` in a write of their own (docs/install.md#approving-a-record)"},
			}},
		// The record (review-level: once per named record, one function for
		// the record, evidence, approval and selfapproved rows).
		{Name: "record", Codes: []Code{CodeRecordMissing}, Reviews: changePaths, Apply: recordRule,
			Docs: map[Code]CodeDoc{
				CodeRecordMissing: {Meaning: "the object names no record (annotation `gpu-upgrade-gate.io/qualification`), or no record ConfigMap of that name is in the gate's namespace",
					Example: "[RecordMissing] no ConfigMap gpu-upgrade-gate/v100-r999 labelled gpu-upgrade-gate.io/qualification=true holds a record; create it, or fix the annotation",
					Fix:     "annotate the object with `gpu-upgrade-gate.io/qualification: <record ConfigMap>` (one per hardware identity on the driver path), or create that record"},
			}},
		{Name: "record", Codes: []Code{CodeRecordInvalid, CodeRecordNotQualified, CodeCanaryIncomplete}, Reviews: recordUsers, Apply: recordRule,
			Docs: map[Code]CodeDoc{
				CodeRecordInvalid: {Meaning: "the record does not load or validate, including a target or source version that does not parse, or a rollback asked of a record without `source` (every problem listed)",
					Example: "[RecordInvalid] driver version \"580-beta\" is not valid: expected 2 to 4 dot-separated numbers, e.g. 580.126.20; fix the record and have it reviewed again"},
				CodeRecordNotQualified: {Meaning: "the record's `state` is not `qualified`",
					Example: "[RecordNotQualified] record v100-r580-canary-1: state: Unsupported value: \"draft\": supported values: \"qualified\"",
					Fix:     "qualify the record only when its canary passed: set `state: qualified`, then have the changed data approved again"},
				CodeCanaryIncomplete: {Meaning: "a canary check of the record is not `true` (e.g. `allocationPassed`, `monitoringPassed`, `rollbackPassed`), or a typed `canary.checks` entry failed or lies beyond its baseline's allowed deviation without an `explanation` (docs/install.md#typed-canary-checks-canarychecks)",
					Example: "[CanaryIncomplete] record v100-r580-canary-1: canary.monitoringPassed: Invalid value: false: expected true: the record does not prove GPU monitoring (DCGM metrics and alerts) on the canary; run the canary until it passes"},
			}},
		// A stale record ConfigMap is history: its webhook only warns.
		{Name: "evidence", Codes: []Code{CodeEvidenceStale}, Reviews: []Review{ReviewPlan, ReviewNode, ReviewDriver, ReviewDriverStep, ReviewOperator, ReviewUpgradeCheck, ReviewValidateRecord}, Apply: recordRule,
			Docs: map[Code]CodeDoc{
				CodeEvidenceStale: {Meaning: "the record's canary completed longer ago than `maxCanaryAge` (720h by default, ceiling 2160h); a record ConfigMap write only warns",
					Example: "[EvidenceStale] record v100-driver-580-130: canary.completedAt: Invalid value: \"2026-11-20T12:00:00Z\": canary completed 2026-11-20T12:00:00Z, 721h0m0s before now; at most 720h0m0s is allowed: run the canary again and renew the record"},
			}},
		{Name: "evidence", Codes: []Code{CodeEvidenceFromFuture}, Reviews: recordUsers, Apply: recordRule,
			Docs: map[Code]CodeDoc{
				CodeEvidenceFromFuture: {Meaning: "the record's `canary.completedAt` lies further ahead of the gate's clock than `clockSkew` (5m by default)",
					Example: "[EvidenceFromFuture] record v100-r580-canary-1: canary.completedAt: Invalid value: \"2026-11-20T12:00:00Z\": canary completed 2026-11-20T12:00:00Z, 1h0m0s after now (2026-11-20T11:00:00Z); at most 5m0s of clock skew is allowed: fix the clock or the record",
					Fix:     "fix the clock that wrote `completedAt`, or the record"},
			}},
		{Name: "approval", Codes: []Code{CodeRecordNotApproved}, Reviews: changePaths, Apply: recordRule,
			Docs: map[Code]CodeDoc{
				CodeRecordNotApproved: {Meaning: "the record's ConfigMap carries no attested approval of its data: no `gpu-upgrade-gate.io/author`, no approval, approved by its author, `approved-sha256` not the data's (the data changed), or `approvedBy` not the attested approver (nor mapped by `approverAliases`); the message gives the `kubectl annotate` that approves it",
					Example: "[RecordNotApproved] record v100-r580-canary-1 (ConfigMap gpu-upgrade-gate/v100-r580) is not approved: nobody has approved its data yet; a second person, named in the record's approvedBy, approves exactly this data with `kubectl annotate configmap -n gpu-upgrade-gate v100-r580 gpu-upgrade-gate.io/approved-by=bob gpu-upgrade-gate.io/approved-sha256=a1b8ae48670dd4cbf9c1ec36a18164a41eb97e890c3748b3d5301585594db34b --overwrite` (docs/install.md#approving-a-record)",
					Fix:     "a second person, named in the record's `approvedBy`, runs the `kubectl annotate` the message spells (it approves exactly the data stored; docs/install.md#approving-a-record)"},
			}},
		{Name: "selfapproved", Codes: []Code{CodeSelfApproved}, Reviews: changePaths, Apply: recordRule,
			Docs: map[Code]CodeDoc{
				CodeSelfApproved: {Meaning: "the requester is the record's attested approver, or with `separation: three-person` its attested author, usernames compared exactly (two-person rule: the author may apply what a second person approved)",
					Example: "[SelfApproved] \"alice\" approved record v100-r580-canary-1 and is also applying this Plan; someone other than its approver (its author may) must apply it (two-person rule)",
					Fix:     "someone other than the approver applies it (the record's author may, unless `separation: three-person`)"},
			}},
		// The RKE2 version the Plan installs: its image, spec.version against
		// the record, and against the API server's.
		{Name: "image", Codes: []Code{CodeImageInvalid}, Reviews: planPaths, Apply: imageRule,
			Docs: map[Code]CodeDoc{
				CodeImageInvalid: {Meaning: "a GPU Plan's `spec.upgrade.image` is not a valid image reference",
					Example: "[ImageInvalid] image \"rancher/RKE2-upgrade\" is not a valid image reference (invalid reference format: repository name (rancher/RKE2-upgrade) must be lowercase); expected [registry[:port]/]repository[:tag][@sha256:<64 hex>] in lower case, e.g. rancher/rke2-upgrade:v1.36.1-rke2r1; fix spec.upgrade.image",
					Fix:     "fix `spec.upgrade.image`: `[registry[:port]/]repository[:tag][@sha256:<64 hex>]`, lower case"},
			}},
		{Name: "target", Codes: []Code{CodeTargetNotQualified}, Reviews: planPaths, Apply: planTargetRule,
			Docs: map[Code]CodeDoc{
				CodeTargetNotQualified: {Meaning: "an RKE2 Plan's `spec.version`, or a tag on its upgrade image, differs from the record's RKE2 target"},
			}},
		{Name: "skew", Codes: []Code{CodeVersionSkew}, Reviews: planPaths, Apply: skewRule,
			Docs: map[Code]CodeDoc{
				CodeVersionSkew: {Meaning: "the Plan's RKE2 version is newer than the API server's (a kubelet never runs ahead of the control plane)",
					Example: "[VersionSkew] RKE2 v1.36.1+rke2r1 is newer than the API server v1.35; a kubelet may never be newer than the control plane: upgrade the servers first"},
			}},
		{Name: "etcdsnapshot", Codes: []Code{CodeEtcdSnapshotStale}, Reviews: []Review{ReviewPlan, ReviewSUCStep}, Apply: etcdSnapshotRule,
			Docs: map[Code]CodeDoc{
				CodeEtcdSnapshotStale: {Meaning: "a Plan write, or SUC's start of a GPU node's Job, that moves a GPU node's RKE2 (Kubernetes) minor while no `ETCDSnapshotFile` (k3s.cattle.io/v1, which RKE2 writes for each etcd snapshot) has `status.readyToUse: true`, a `status.creationTime` within `etcdSnapshot.maxAge` (24h by default) and no `status.error`; one that cannot be read counts as none. A patch-level move needs none",
					Example: "[EtcdSnapshotStale] this Plan moves node gpu-v100-01 from Kubernetes 1.35 to 1.36 (RKE2 v1.36.1+rke2r1), and an RKE2 minor upgrade cannot be undone except by an etcd restore: it needs a ready etcd snapshot taken within 24h0m0s, but the newest ready ETCDSnapshotFile, local-etcd-snapshot-server-1-1764633600-4b1e2f (snapshot etcd-snapshot-server-1-1764633600 on node server-1), was taken at 2026-11-20T06:00:00Z, 30h0m0s ago; take one first (`rke2 etcd-snapshot save` on a server node), or turn the precondition off (etcdSnapshot.required: false)",
					Fix:     "take a snapshot (`rke2 etcd-snapshot save` on a server node) and apply the Plan again once its ETCDSnapshotFile reads `readyToUse: true`; or set `etcdSnapshot.required: false` (chart value `config.etcdSnapshot`), or use break glass"},
			}},
		{Name: "drain", Codes: []Code{CodeDrainBlocked}, Reviews: []Review{ReviewPlan, ReviewSUCStep}, Apply: drainRule,
			Docs: map[Code]CodeDoc{
				CodeDrainBlocked: {Meaning: "a Plan write, or SUC's start of a GPU node's Job, of a Plan with `spec.drain` whose pending GPU nodes run a Pod SUC's `kubectl drain` cannot remove: a PodDisruptionBudget selecting a running Pod with `status.disruptionsAllowed: 0` (unless `disableEviction`), an `emptyDir` while the Plan turns `deleteEmptydirData` off, a Pod no controller owns without `force`, a DaemonSet's Pod with `ignoreDaemonSets: false`; each named with its node. hostPath and local volumes do not stop a drain and are not named. A warning; a refusal with `drainCheck.deny` (then Pods or budgets that cannot be read refuse too)",
					Example: "[DrainBlocked] SUC's drain (kubectl drain) of a pending GPU node cannot finish, and SUC would retry it with the node cordoned: node gpu-v100-01: Pod ml/db-0: PodDisruptionBudget ml/db allows no disruption (status.disruptionsAllowed 0, currentHealthy 1, desiredHealthy 1), so its eviction is refused until the drain times out; let these Pods go first (raise or relax the PodDisruptionBudget, move the workload), or change spec.drain as named (drainCheck.deny makes this a refusal)",
					Fix:     "let the named Pods go before the upgrade (relax or raise the PodDisruptionBudget, move the workload, give the Pod a controller), or change `spec.drain` as the message names; `drainCheck.deny: false` (the default) only warns"},
			}},
		{Name: "operatorrollout", Codes: []Code{CodeOperatorRolloutUnfinished}, Reviews: []Review{ReviewDriver, ReviewDriverStep}, Apply: operatorRolloutRule,
			Docs: map[Code]CodeDoc{
				CodeOperatorRolloutUnfinished: {Meaning: "a driver change that reloads or moves GPU nodes, or the GPU Operator's per-node driver step, while the operator's own Deployment (`gpuOperator`) is not rolled out as `kubectl rollout status` reads it (spec not yet observed, replicas not all updated, ready and available, old replicas left, progress deadline exceeded) or, where OLM installed it, a ClusterServiceVersion of `gpuOperatorCSV` in its namespace is not `Succeeded`; a Deployment that cannot be read counts as unfinished, a cluster without OLM (a Helm install) skips the CSV",
					Example: "[OperatorRolloutUnfinished] the GPU Operator's own rollout has not finished, so it may not roll out a driver change (ClusterPolicy cluster-policy) yet: Deployment gpu-operator/gpu-operator: 1 old replica(s) pending termination (status.replicas 2, updatedReplicas 1); ClusterServiceVersion gpu-operator-certified.v26.3.4 is in phase Installing, not Succeeded (reason InstallWaiting); wait until its Deployment is rolled out (`kubectl rollout status`: every replica updated, ready and available, no old replica left) and, where OLM installed it, its ClusterServiceVersion reads Succeeded, then retry (the operator retries its per-node step on its own), or turn the precondition off (operatorRollout.required: false)",
					Fix:     "wait until `kubectl rollout status -n <gpuOperator.namespace> deployment/<gpuOperator.name>` reports it rolled out and (with OLM) its CSV reads `Succeeded`, then retry; or set `operatorRollout.required: false` (chart value `config.operatorRollout`), or use break glass"},
			}},
		// One transition per node the review moves.
		{Name: "hardware", Codes: []Code{CodeHardwareUnknown, CodeHardwareNotQualified}, Reviews: movePaths, Judge: hardwareRule, Apply: typedHardwareRule,
			Docs: map[Code]CodeDoc{
				CodeHardwareUnknown: {Meaning: "a GPU node has no subsystem-qualified identity label (NFD PCI), or an `upgrade-check --pci-id` is missing, malformed or given twice",
					Example: "[HardwareUnknown] GPU node gpu-v100-01 has no subsystem-qualified GPU identity label, so its hardware cannot be matched to a record; install the chart's NodeFeatureRule (nodeFeatureRule.enabled=true), which publishes feature.node.kubernetes.io/pci-<vendor>_<device>_<subvendor>_<subdevice>.present labels without changing NFD's deviceLabelFields"},
				CodeHardwareNotQualified: {Meaning: "a node's GPU identity set differs from the record's, or no record the object names covers its hardware",
					Example: "[HardwareNotQualified] node gpu-h200-01 has GPU hardware 10de:2335/10de:18bf but record v100-r580-canary-1 qualifies 10de:1db6/10de:124a; select only nodes of the qualified hardware, or qualify this hardware on its own canary"},
			}},
		{Name: "facts", Codes: []Code{CodeFactsMissing}, Reviews: append(slices.Clone(movePaths), ReviewCompletion), Judge: factsRule, Apply: draConfigRule,
			Docs: map[Code]CodeDoc{
				CodeFactsMissing: {Meaning: "a fact the rules need cannot be read (names the node and the fact, or the failed read), including while the caches are not ready; in `upgrade-check`, a version not typed; a GPUCluster write that deploys the NVIDIA DRA driver (`gpu.nvidia.com`) while `config.draDrivers` has no entry of that name, naming the entry to add",
					Example: "[FactsMissing] node gpu-v100-01: cannot read driver (label nvidia.com/cuda.driver-version.full from GPU Feature Discovery); the gate decides only on facts it can read: make sure those sources publish them",
					Fix:     "make the source the message names publish the fact (NFD, GFD, the GPU Operator's workloads, the node's status), or retry when the API server answers; the gate never allows what it cannot check"},
			}},
		{Name: "version", Codes: []Code{CodeVersionInvalid}, Reviews: movePaths, Judge: versionRule,
			Docs: map[Code]CodeDoc{
				CodeVersionInvalid: {Meaning: "a version in the request or in a node's facts does not parse (value and expected form named); a record's own versions are `RecordInvalid`",
					Example: "[VersionInvalid] driver version \"580-beta\" is not valid: expected 2 to 4 dot-separated numbers, e.g. 580.126.20; write it in that form"},
			}},
		{Name: "target", Codes: []Code{CodeTargetNotQualified}, Reviews: movePaths, Judge: targetRule,
			Docs: map[Code]CodeDoc{
				CodeTargetNotQualified: {Meaning: "a node's tuple after the change is not the record's target (on the driver path: none of the named records')",
					Example: "[TargetNotQualified] node gpu-h200-01 would run kernel=6.8.0-134-generic rke2=v1.35.3+rke2r3 driver=580-beta gpuOperator=v26.3.3 dcgmExporter=4.5.3-4.8.2-distroless, which record h200-driver-580-130 does not qualify: driver 580-beta (want 580.130.00); set the versions to a record's target, or name a record that qualifies this tuple"},
			}},
		{Name: "source", Codes: []Code{CodeSourceMismatch}, Reviews: movePaths, Judge: sourceRule,
			Docs: map[Code]CodeDoc{
				CodeSourceMismatch: {Meaning: "the record has a `source` tuple and a node that would move does not run it",
					Example: "[SourceMismatch] node gpu-v100-01 does not run record v100-driver-580-130's source tuple: driver 580.126.20 (want 580.130.00); upgrade it to the source tuple first, or use a record whose source it runs"},
			}},
		{Name: "rke2", Codes: []Code{CodeRKE2Downgrade, CodeMinorSkip}, Reviews: []Review{ReviewPlan, ReviewNode, ReviewUpgradeCheck}, Judge: rke2Rule,
			Docs: map[Code]CodeDoc{
				CodeRKE2Downgrade: {Meaning: "the RKE2 version is lower than a node's kubelet",
					Example: "[RKE2Downgrade] node gpu-v100-01 runs RKE2 v1.37.2+rke2r1 and would move to v1.36.1+rke2r1; RKE2 cannot be downgraded: restore from an etcd snapshot instead"},
				CodeMinorSkip: {Meaning: "the RKE2 version is more than one minor above a node's",
					Example: "[MinorSkip] node gpu-v100-01 runs Kubernetes 1.34 and v1.36.1+rke2r1 is 1.36; upgrade one minor at a time (next: 1.35)"},
			}},
		{Name: "downgrade", Codes: []Code{CodeComponentDowngrade}, Reviews: movePaths, Judge: downgradeRule,
			Docs: map[Code]CodeDoc{
				CodeComponentDowngrade: {Meaning: "kernel, driver, GPU Operator or DCGM exporter would go back without a proven rollback",
					Example: "[ComponentDowngrade] node gpu-h200-01 runs driver 580.126.20 and the change moves it back to 570.86.15; a rollback is allowed only as a proven rollback (a gpu-upgrade-gate.io/v1alpha1 record with source, rollbackPassed: true, and the object annotated gpu-upgrade-gate.io/rollback=true)",
					Fix:     "roll back only as a proven rollback: a record with `source` (the older tuple) and `canary.rollbackPassed: true`, and the object annotated `gpu-upgrade-gate.io/rollback: \"true\"`"},
			}},
		{Name: "nochange", Codes: []Code{CodeNoChange}, Reviews: []Review{ReviewUpgradeCheck}, Judge: noChangeRule,
			Docs: map[Code]CodeDoc{
				CodeNoChange: {Meaning: "CLI `upgrade-check` only: the current tuple equals the target",
					Example: "[NoChange] the current tuple already equals the target: at least one kernel, RKE2, driver, GPU Operator, or DCGM exporter target must change",
					Fix:     "type a target that changes at least one component"},
			}},
		// Across the review's transitions and the cluster (review-level).
		{Name: "wave", Codes: []Code{CodeMultipleCanaries, CodeCanaryNotProven, CodeCrossFailureDomain}, Reviews: planPaths, Apply: waveRule,
			Docs: map[Code]CodeDoc{
				CodeMultipleCanaries: {Meaning: "a Plan holds more pending GPU nodes than the wave size (`waveSize`, default 1)",
					Example: "[MultipleCanaries] the Plan would upgrade 2 GPU nodes (gpu-v100-01,gpu-v100-02) but the wave size is 1; narrow spec.nodeSelector (e.g. kubernetes.io/hostname In [one node]) or label nodes plan.upgrade.cattle.io/gpu-v100-canary=disabled"},
				CodeCanaryNotProven: {Meaning: "a wave wider than one node before a canary of the same hardware runs the target and is proven (docs/proof.md)",
					Example: "[CanaryNotProven] a wave of 2 GPU nodes needs a proven canary first, but no Ready, schedulable node of hardware 10de:1db6/10de:124a runs the target tuple and is proven (docs/proof.md) yet; upgrade one canary node, prove it, then widen the wave"},
				CodeCrossFailureDomain: {Meaning: "a wave's pending nodes span more than one zone (`topology.kubernetes.io/zone`)",
					Example: "[CrossFailureDomain] the wave spans zones zone-a,zone-b,zone-c; keep one wave within one topology.kubernetes.io/zone so a bad tuple cannot take out every zone"},
			}},
		{Name: "inflight", Codes: []Code{CodeVersionEditInFlight}, Reviews: planPaths, Apply: inFlightRule,
			Docs: map[Code]CodeDoc{
				CodeVersionEditInFlight: {Meaning: "a Plan's version changes while its `status.applying` is non-empty",
					Example: "[VersionEditInFlight] the version changes from \"v1.36.0+rke2r1\" to \"v1.36.1+rke2r1\" while SUC is upgrading gpu-v100-01; SUC would delete those running Jobs mid-upgrade: wait until status.applying is empty",
					Fix:     "wait until `status.applying` is empty, then change the version"},
			}},
		// What SUC alone writes in a Plan's status (review-level).
		{Name: "planstatus", Codes: []Code{CodePlanStatusForged}, Reviews: []Review{ReviewPlanStatus}, Apply: planStatusRule,
			Docs: map[Code]CodeDoc{
				CodePlanStatusForged: {Meaning: "someone but SUC changes a Plan's status (`plans/status`: `applying`, `conditions`, `latestHash`, `latestVersion`), which the budget, `RolloutInFlight` and `VersionEditInFlight` rely on",
					Example: "[PlanStatusForged] user \"alice\" changes status.applying from [] to [gpu-v100-01] but is not SUC (a ServiceAccount of group system:serviceaccounts:system-upgrade); the gate relies on SUC's own record of its rollout (it holds version edits while nodes are applying and a second rollout while one is in flight): leave a Plan's status to SUC (to stop an upgrade, edit or delete the Plan)",
					Fix:     "leave a Plan's status to SUC; to stop an upgrade, edit or delete the Plan"},
			}},
		// GPU mode and identity of a Node (review-level).
		{Name: "mode", Codes: []Code{CodeModeChangeNotCordoned, CodeModeUnsupported, CodeModeLabelsInconsistent, CodeUncordonDuringTransition}, Reviews: []Review{ReviewNode, ReviewModeStep}, Apply: modeRule,
			Docs: map[Code]CodeDoc{
				CodeModeChangeNotCordoned: {Meaning: "a node's GPU mode label changes while the node is not cordoned",
					Example: "[ModeChangeNotCordoned] label nvidia.com/gpu.workload.config changes from \"container\" to \"vm-passthrough\" on node gpu-v100-01, which is not cordoned; cordon it first (kubectl cordon gpu-v100-01), check it has no GPU holders, then change the mode"},
				CodeModeUnsupported: {Meaning: "a GPU mode label is set to a mode the gate does not support",
					Example: "[ModeUnsupported] label nvidia.com/gpu.workload.config=\"vm-vgpu\" on node gpu-v100-01 is not supported; use one of container, vm-passthrough"},
				CodeModeLabelsInconsistent: {Meaning: "the node's two mode labels (`kube-dc.com/gpu.expected-workload-mode`, `nvidia.com/gpu.workload.config`) would disagree",
					Example: "[ModeLabelsInconsistent] workload-mode vm-passthrough needs nvidia.com/gpu.workload.config=vm-passthrough but the node would have \"container\"; change both labels together"},
				CodeUncordonDuringTransition: {Meaning: "a node is uncordoned while its mode labels still disagree (mid mode transition)",
					Example: "[UncordonDuringTransition] node gpu-v100-01 is mid-transition (workload-mode \"pod-hami\", expected \"vm-passthrough\"); keep it cordoned until both labels agree"},
			}},
		// Creation gates closed before a mode transition or an upgrade starts.
		{Name: "creationgate", Codes: []Code{CodeCreationGateOpen}, Reviews: []Review{ReviewPlan, ReviewNode, ReviewModeStep, ReviewSUCStep, ReviewDriver, ReviewDriverStep}, Apply: creationGateRule,
			Docs: map[Code]CodeDoc{
				CodeCreationGateOpen: {Meaning: "a configured creation gate (`creationGates`: a Deployment's environment variable or a ConfigMap key, e.g. kube-dc's `GPU_SHARED_CREATION_ENABLED`, `GPU_VM_CREATION_ENABLED`) is not at its closed value, or cannot be read, when a GPU mode transition or an upgrade (Plan, SUC's Job start, driver change or step) would start",
					Example: "[CreationGateOpen] creation gate gpu-vm-creation (Deployment kube-dc/kube-dc-manager its first container env GPU_VM_CREATION_ENABLED) reads \"true\", expected \"false\" (closed) before a GPU upgrade starts (applying this Plan): new GPU workloads could land meanwhile; close it first: kubectl -n kube-dc set env deployment/kube-dc-manager GPU_VM_CREATION_ENABLED=false (or through the Git overlay that owns it)",
					Fix:     "close the gate (set the Deployment variable or ConfigMap key to its closed value, through whatever owns it), then retry"},
			}},
		// Declared preconditions hold before a GPU upgrade starts and before
		// an upgraded node completes.
		{Name: "precondition", Codes: []Code{CodePreconditionFailed, CodePreconditionUnknown, CodePreconditionStale}, Reviews: []Review{ReviewPlan, ReviewSUCStep, ReviewDriver, ReviewDriverStep, ReviewCompletion}, Apply: preconditionRule,
			Docs: map[Code]CodeDoc{
				CodePreconditionFailed: {Meaning: "a declared precondition (`preconditions`: a CEL expression over objects the gate watches, or Prometheus/Alertmanager alerts) was read and does not hold (the expression returned false, or a matching alert fires) when a GPU node's upgrade would start (Plan, SUC's Job start, driver change or step) or SUC would complete an upgraded GPU node",
					Example: "[PreconditionFailed] precondition ceph-health (Ceph must report HEALTH_OK) does not hold before a GPU upgrade starts (applying this Plan): the expression returned false over 1 object(s); resolve it, then retry (the upgrade resumes once it holds)"},
				CodePreconditionUnknown: {Meaning: "a declared precondition cannot be judged: its objects cannot be read (RBAC, a resource the cluster does not serve, a watch not synced), none matched (a CEL precondition over no objects, unless it sets `cel.allowEmpty`: `objects.all(...)` would hold over none), its expression failed over what they hold or ran out of its cost budget, or the alert source answered what the gate does not read; it counts as failed",
					Example: "[PreconditionUnknown] precondition ceph-health cannot be judged (which counts as failed) before a GPU upgrade starts (applying this Plan): the expression failed over 1 object(s): no such key: health; make it readable (the objects, RBAC, the expression over what the objects hold), then retry"},
				CodePreconditionStale: {Meaning: "an alerts precondition's source (Prometheus or Alertmanager) has not answered the gate's poll in full within the precondition's `maxAge` (or not yet since the gate started); it counts as failed",
					Example: "[PreconditionStale] precondition gpu-alerts has no fresh reading (which counts as failed) before a GPU upgrade starts (applying this Plan): http://prometheus.monitoring:9090/api/v1/alerts was last read successfully at 2026-12-01T06:00:00Z, 10m0s ago, beyond maxAge 5m0s; the latest read failed: connection refused; make the alert source reachable from the gate (its URL, NetworkPolicy), then retry"},
			}},
		// A Node write that makes a configured DRA plugin DaemonSet schedule on
		// the node installs the DRA driver there (rule_drainstall.go).
		{Name: "drainstall", Codes: []Code{CodeRecordMissing, CodeTargetNotQualified, CodeFactsMissing}, Reviews: []Review{ReviewNode, ReviewNodeTaints}, Apply: draInstallRule,
			Docs: map[Code]CodeDoc{
				CodeRecordMissing:      {Meaning: "a Node write (a label added, a taint removed) makes a configured DRA driver's kubelet-plugin DaemonSet schedule on the GPU node, installing the DRA driver there, and no approved, qualified, fresh record for the node's hardware qualifies the tuple it would run"},
				CodeTargetNotQualified: {Meaning: "a Node write makes a configured DRA driver's kubelet-plugin DaemonSet schedule on the GPU node, and the records for its hardware do not name that DRA driver version for the tuple it runs"},
				CodeFactsMissing:       {Meaning: "a Node write of a GPU node while the DRA drivers' kubelet-plugin DaemonSets cannot be read: whether it installs one is unknown"},
			}},
		{Name: "identity", Codes: []Code{CodeGPUIdentityRemoved}, Reviews: []Review{ReviewNode}, Apply: identityRule,
			Docs: map[Code]CodeDoc{
				CodeGPUIdentityRemoved: {Meaning: "a person removes or changes a label that makes a node a GPU node (NFD PCI, `nvidia.com/gpu.present`, GFD's); NFD, GFD and the GPU Operator own them",
					Example: "[GPUIdentityRemoved] label feature.node.kubernetes.io/pci-10de_1db6_10de_124a.present=\"true\" is removed on GPU node gpu-v100-01; it marks the node's GPUs for the gate and the GPU Operator, and NFD, GFD or the GPU Operator own it: change NFD's configuration or NodeFeatureRule instead, or break glass",
					Fix:     "change NFD's configuration or the NodeFeatureRule instead, or break glass"},
			}},
		// Who moved a node into a Plan, who handed a cordon over: attested by
		// the Node write itself, as requested-by is by the Plan's.
		{Name: "movedby", Codes: []Code{CodeMovedByMissing}, Reviews: []Review{ReviewNode}, Apply: movedByRule,
			Docs: map[Code]CodeDoc{
				CodeMovedByMissing: {Meaning: "a person's write pulls a GPU node into a GPU Plan without `gpu-upgrade-gate.io/moved-by: <their username>` in the same write (`requireMover`, default true): a halt of the node names who moved it, who may not clear it",
					Example: "[MovedByMissing] this write pulls GPU node gpu-v100-01 into GPU Plan(s) system-upgrade/gpu-v100-canary without naming who moves it (a halt of the node names them, and they may not clear it); add your username in the same write: metadata.annotations: {gpu-upgrade-gate.io/moved-by: \"alice\"}"},
			}},
		{Name: "cordon", Codes: []Code{CodeNodeAttestationForged}, Reviews: []Review{ReviewNode}, Apply: handoverRule,
			Docs: map[Code]CodeDoc{
				CodeNodeAttestationForged: {Meaning: "a Node's `gpu-upgrade-gate.io/moved-by` or `gpu-upgrade-gate.io/cordon-handover` annotation is set, changed or removed to anything but the writer's username",
					Example: "[NodeAttestationForged] annotation gpu-upgrade-gate.io/cordon-handover on GPU node gpu-v100-02 is set to \"dave\" by \"carol\"; it names who wrote it (the gate reads it as an audited fact), so set it to \"carol\"",
					Fix:     "set the annotation to your own username (the gate reads it as an audited fact)"},
			}},
		// Who cordoned a GPU node (nodestate.go): SUC does not uncordon a node
		// someone else took out, nor a person one SUC is upgrading.
		{Name: "cordon", Codes: []Code{CodeCordonedByOther}, Reviews: []Review{ReviewNode, ReviewCompletion}, Apply: cordonUncordonRule,
			Docs: map[Code]CodeDoc{
				CodeCordonedByOther: {Meaning: "SUC would uncordon a GPU node someone else cordoned, or a person would uncordon a node SUC's Job is upgrading"},
			}},
		// Who may write each fact of a GPU node (ownership.go, review-level).
		{Name: "ownedfact", Codes: []Code{CodeOwnedFactWritten}, Reviews: []Review{ReviewNode}, Apply: ownedFactRule,
			Docs: map[Code]CodeDoc{
				CodeOwnedFactWritten: {Meaning: "on a GPU node (or a write that makes one) a label the ownership table (docs/ownership.md) gives an owner (NFD, GFD, the GPU Operator's state labels, SUC's plan labels but `disabled`, `kubernetes.io/hostname`) is written by an identity no exemption lets write it (a removed plan label or `disabled` stays yours)",
					Example: "[OwnedFactWritten] label kubernetes.io/hostname changed from \"gpu-v100-01\" to \"elsewhere\" on GPU node gpu-v100-01 by alice: it is one of the hostname, owned by the kubelet (system:node:<name>), at registration; SUC maps status.applying back to nodes through it; configured writers: no configured exemption lists hostname. Instead re-register the node (the kubelet's --hostname-override); never relabel it, or break glass (docs/ownership.md)",
					Fix:     "do what the message's \"Instead\" says (ask the owner through its own configuration), or break glass (docs/ownership.md)"},
			}},
		// Proof of the nodes already upgraded (review-level).
		{Name: "proof", Codes: []Code{CodePreviousNodeUnproven}, Reviews: changePaths, Apply: proofRule,
			Docs: map[Code]CodeDoc{
				CodePreviousNodeUnproven: {Meaning: "a GPU node of the same hardware already runs the destination tuple but is not proven (each missing proof named with the value seen, e.g. `allocatable nvidia.com/gpu 6 of 8`, `soak 12m of 30m`); at every wave size, at the per-node step, and on the driver path",
					Example: "[PreviousNodeUnproven] node gpu-v100-02 already runs the destination tuple of record v100-r580-canary-1 but is not proven: allocatable nvidia.com/gpu 6 of 8; wait until it is (or fix it: see docs/proof.md), then retry"},
			}},
		{Name: "proof", Codes: []Code{CodeUncordonBeforeProof}, Reviews: []Review{ReviewNode, ReviewCompletion}, Apply: uncordonProofRule,
			Docs: map[Code]CodeDoc{
				CodeUncordonBeforeProof: {Meaning: "a GPU node at the destination tuple of a Plan that selects it is uncordoned, or marked done, before it is proven (by SUC's completion or a person); or SUC completes a node that does not run the Plan's destination yet (facts that lag, a Plan that moved part of the tuple), naming each component with the value seen and the value expected",
					Example: "[UncordonBeforeProof] node gpu-v100-01 runs the destination tuple of Plan system-upgrade/gpu-v100-canary (record v100-r580-canary-1) but is not proven, so it may not uncordon yet: no validator Pod (namespace gpu-operator, app=nvidia-operator-validator) on the node; no allocation check (gpu-upgrade-gate.io/allocation-check=true) Succeeded after 2025-11-04T09:12:33Z: none on the node; it stays cordoned until the proof holds (run the allocation check: docs/proof.md)",
					Fix:     "leave the node cordoned until each missing proof the message names holds (run the allocation check: docs/proof.md); SUC's next retry then completes it"},
			}},
		// One GPU rollout at a time, within the disruption budget, in a
		// maintenance window (review-level).
		{Name: "rollout", Codes: []Code{CodeRolloutInFlight}, Reviews: []Review{ReviewPlan, ReviewNode, ReviewDriver, ReviewOperator}, Apply: rolloutRule,
			Docs: map[Code]CodeDoc{
				CodeRolloutInFlight: {Meaning: "another GPU rollout is in flight: a Plan with GPU nodes pending or in `status.applying`, or GPU nodes in a driver upgrade state other than `upgrade-done` (names it and its nodes; not the Plan's own edit, SUC's steps within it, or a rollback)",
					Example: "[RolloutInFlight] Plan system-upgrade/gpu-h200 is in flight on GPU node(s) gpu-h200-01 (applying); GPU nodes take one rollout at a time: wait until it has finished (every node it selects done, status.applying empty, driver states upgrade-done), or delete or opt out what should not run, then retry; a rollback (annotation gpu-upgrade-gate.io/rollback: \"true\") is not held",
					Fix:     "wait until the named rollout has finished (every node it selects done, `status.applying` empty, driver states `upgrade-done`), or delete or opt out what should not run, then retry (docs/rollout.md)"},
			}},
		{Name: "window", Codes: []Code{CodeOutsideWindow}, Reviews: []Review{ReviewDriver, ReviewDriverStep, ReviewSUCStep}, Apply: outsideWindowRule,
			Docs: map[Code]CodeDoc{
				CodeOutsideWindow: {Meaning: "a driver-path change, the per-node driver step or SUC's start of a GPU node's Job falls outside every configured maintenance window (`windows.maintenance`), naming the next one with its time zone",
					Example: "[OutsideWindow] node gpu-v100-01's upgrade (SUC's Job) would start at 2026-11-21T12:00:00Z, outside every maintenance window in the gate's config (windows.maintenance); the next opens at Sun 2026-11-22 02:00 CET, time zone Europe/Berlin (windows.maintenance[0]: su 02:00-06:00 Europe/Berlin); retry then (SUC retries on its own; the Plan's spec.window alone does not open the gate's windows)",
					Fix:     "wait for the next window the message names; SUC and the GPU Operator retry a refused step on their own"},
			}},
		{Name: "budget", Codes: []Code{CodeDisruptionBudgetExceeded, CodeFactsMissing}, Reviews: reloadPaths, Apply: budgetRule,
			Docs: map[Code]CodeDoc{
				CodeFactsMissing: {Meaning: "a move that takes a GPU node out (Plan, SUC's Job start, driver path and step) while the maintenance operator's NodeMaintenances cannot be read (their watch failed, their cache has not synced, or one is malformed): the budget cannot count another requestor's maintenance; writes that take no node out are not held by it"},
				CodeDisruptionBudgetExceeded: {Meaning: "taking one more GPU node out would exceed `budget.maxUnavailable` (default 1; tighter per hardware or zone), counting every GPU node out for any reason (applying, mid driver upgrade, cordoned, NotReady, out-of-service, running a SUC Job matched by the Job's labels, half way between a stored Plan's record's source and target; each named with why); on Plans, SUC's Job start and the driver path and step",
					Example: "[DisruptionBudgetExceeded] taking GPU node gpu-v100-01 out now would make 2 GPU nodes unavailable at once across all GPU nodes, above the budget of 1 (budget.maxUnavailable); already out: gpu-h200-01 (NotReady); wait until they are back (Ready, uncordoned, proven, driver upgrade-done) and retry",
					Fix:     "wait until the nodes the message names are back (Ready, uncordoned, proven, driver `upgrade-done`) and retry (docs/rollout.md#out)"},
			}},
		// Who cordoned a GPU node (nodestate.go): an upgrade does not start on
		// a node someone else took out.
		{Name: "cordon", Codes: []Code{CodeCordonedByOther}, Reviews: []Review{ReviewPlan}, Apply: cordonedByOtherRule,
			Docs: map[Code]CodeDoc{
				CodeCordonedByOther: {Meaning: "an upgrade would start (a Plan, a label change, SUC's Job start) on a GPU node someone other than SUC cordoned (a health agent, the GPU Operator, a person: named) and nobody handed it over (a hand-over, `gpu-upgrade-gate.io/cordon-handover: <username>` by someone other than the requester, lets it proceed)",
					Example: "[CordonedByOther] GPU node gpu-v100-01 was cordoned by a health agent (annotation quarantineHealthEventIsCordoned), not by SUC for this upgrade, so it may not start the upgrade of Plan system-upgrade/gpu-v100-canary on it: it is out for that reason; wait until whoever cordoned it is done, or have someone other than the rollout's requester alice hand it over: kubectl annotate node gpu-v100-01 gpu-upgrade-gate.io/cordon-handover=<your username> (docs/rollout.md)",
					Fix:     "wait until whoever cordoned the node is done, or have someone other than the requester hand it over: `kubectl annotate node <node> gpu-upgrade-gate.io/cordon-handover=<their username>` (docs/rollout.md#out)"},
			}},
		// A halted rollout (review-level): forward moves, the failed node's
		// uncordon, and the halt record's own writes.
		// A halt ends only by its audited clear, and the requester it names is
		// who may not clear it: break glass overrides neither.
		{Name: "halt", Codes: []Code{CodeRolloutHalted}, Reviews: []Review{ReviewPlan, ReviewNode, ReviewDriver, ReviewDriverStep, ReviewOperator, ReviewCompletion, ReviewHaltRecord}, NoBreakGlass: true, Apply: haltRule,
			Docs: map[Code]CodeDoc{
				CodeRolloutHalted: {Meaning: "a failure of a node moving to a destination tuple (SUC Job failed, `upgrade-failed`, a GPU-health condition, a half-applied tuple, Ready or the validator not back within `halts.recoveryTimeout`) halted its hardware's rollout, counted from the moment the gate sees the signal: every forward Plan, driver change and per-node step of that hardware, and the failed node's uncordon before it is back on the source and proven, are refused (naming the node, the signal and when it was seen) until someone other than the requester clears it; also a write of the halt record that adds, rewrites or removes a halt other than by the gate after a clear, and a halt record that does not parse (fail closed)",
					Example: "[RolloutHalted] the rollout of hardware 10de:1db6/10de:124a is halted: node gpu-v100-01: SUC Job system-upgrade/apply-gpu-v100-canary-on-gpu-v100-01 failed (BackoffLimitExceeded) (seen 2026-11-21T11:59:00Z, Plan system-upgrade/gpu-v100-canary, record v100-r580-canary-1); no node of this hardware moves forward until the halt is cleared (break glass does not override a halt): roll node gpu-v100-01 back (the record's rollback Plan stays allowed) and prove it; then someone other than alice clears the halt: kubectl annotate configmap -n gpu-upgrade-gate gpu-upgrade-gate-halts gpu-upgrade-gate.io/clear-10de_1db6_10de_124a=\"<reason>\" (docs/proof.md)",
					Fix:     "roll the failed node back (the record's rollback Plan stays allowed) and prove it; then someone other than the rollout's requester clears the halt with the `kubectl annotate` the message spells (docs/proof.md#halts); break glass does not override it"},
			}},
		{Name: "requester", Codes: []Code{CodeRequesterMismatch, CodeRequesterMissing}, Reviews: []Review{ReviewPlan}, NoBreakGlass: true, Apply: requesterRule,
			Docs: map[Code]CodeDoc{
				CodeRequesterMismatch: {Meaning: "a GPU Plan's `gpu-upgrade-gate.io/requested-by` annotation is not the user writing it (the halt names the requester from it)",
					Example: "[RequesterMismatch] annotation gpu-upgrade-gate.io/requested-by is \"bob\" but this write is from \"alice\"; set it to \"alice\" (a halt of this rollout names its requester, who may not clear it)",
					Fix:     "set `gpu-upgrade-gate.io/requested-by` to your own username in the write"},
				CodeRequesterMissing: {Meaning: "a GPU Plan CREATE, or an UPDATE that changes its spec (a new rollout) or removes the annotation, lacks `gpu-upgrade-gate.io/requested-by: <your username>` (`requireRequester`, default true)",
					Example: "[RequesterMissing] a GPU Plan is created without annotation gpu-upgrade-gate.io/requested-by, which names who asked for the rollout (a halt of it may not be cleared by them); add it with your username: metadata.annotations: {gpu-upgrade-gate.io/requested-by: \"alice\"}"},
			}},
		// How OLM may approve the GPU Operator's upgrades: a standing
		// setting, not one write, so no break glass (the config switch is
		// the documented way out).
		{Name: "subscription", Codes: []Code{CodeOperatorAutoApproval}, Reviews: []Review{ReviewSubscription}, NoBreakGlass: true, Apply: subscriptionRule,
			Docs: map[Code]CodeDoc{
				CodeOperatorAutoApproval: {Meaning: "a Subscription of the GPU Operator's OLM package (`gpuOperatorPackage`) does not say `installPlanApproval: Manual`, so OLM would create each new operator version's InstallPlan already approved and move every GPU node to it unreviewed (`allowAutomaticOperatorApproval` admits it, giving that review up)",
					Example: "[OperatorAutoApproval] spec.installPlanApproval is \"Automatic\" for OLM package gpu-operator-certified (the GPU Operator), expected exactly \"Manual\": under any other value OLM creates each new operator version's InstallPlan already approved, and every GPU node moves to it with no record; set spec.installPlanApproval: Manual, then approve each InstallPlan with the gpu-upgrade-gate.io/qualification annotation naming the records that qualify the new version (webhook/operator.md); to accept unreviewed operator upgrades instead, set allowAutomaticOperatorApproval: true in the gate's configuration",
					Fix:     "set `spec.installPlanApproval: Manual`, then approve each InstallPlan with the `gpu-upgrade-gate.io/qualification` annotation naming the records that qualify the new version"},
			}},
		// Only SUC writes a Job the gate reads as SUC's upgrade of a node.
		{Name: "sucjob", Codes: []Code{CodeSUCJobForged}, Reviews: []Review{ReviewSUCJob}, Apply: sucJobForgedRule,
			Docs: map[Code]CodeDoc{
				CodeSUCJobForged: {Meaning: "someone other than SUC creates, relabels or starts a Job carrying SUC's labels in a SUC namespace: the gate reads such a Job as SUC's upgrade of a node (whose cordon is then SUC's, whose start is a per-node step)",
					Example: "[SUCJobForged] Job system-upgrade/apply-gpu-v100-canary-on-gpu-v100-01 carries SUC's labels (upgrade.cattle.io/plan=\"gpu-v100-canary\", upgrade.cattle.io/node=\"gpu-v100-01\") but is written by \"alice\", not by SUC (a ServiceAccount of a SUC namespace): the gate reads such a Job as SUC's upgrade of that node (who cordoned it, whether it is upgrading, whether it failed), so only SUC creates, relabels or starts one; to upgrade a node write a Plan and let SUC create its Job, and name Jobs of your own without SUC's labels (webhook/jobs.md)",
					Fix:     "write a Plan and let SUC create its Job; name Jobs of your own without SUC's labels"},
			}},
		// Only the configured kubelet plugin runs a DRA driver's image in its
		// namespace, and only the GPU Operator writes its validator DaemonSet.
		{Name: "draplugin", Codes: []Code{CodeDRAPluginForged}, Reviews: []Review{ReviewDRADaemonSet, ReviewDRAWorkload}, Apply: draPluginForgedRule,
			Docs: map[Code]CodeDoc{
				CodeDRAPluginForged: {Meaning: "in a DRA driver's namespace, a DaemonSet that is not its configured kubelet plugin (`draDrivers`), or a bare Pod, Deployment, ReplicaSet, ReplicationController, StatefulSet, Job or CronJob whose Pods reach the node's filesystem (a hostPath or any other volume but emptyDir, configMap, secret, projected and downwardAPI; a privileged container; the node's PID namespace), is created, or its Pod template changed, to run the image of that plugin (the same repository on any registry or below a mirror's prefix, any tag or digest, or the same digest under another name): a second kubelet plugin of the driver on GPU nodes that the gate neither judges nor reads; the driver's configured controllers (`draDrivers[].controllers`), the GPU Operator, and for Pods and templates the kube-controller-manager's controllers and kubelets are not judged",
					Example: "[DRAPluginForged] DaemonSet nvidia-dra-driver-gpu/dra-driver-copy, written by \"alice\", runs nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1, the image of the DRA kubelet plugin DaemonSet nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin (config draDrivers), under another name: a second kubelet plugin of the driver on GPU nodes, which the gate neither judges nor reads, at a version no record names; run the driver only in its configured DaemonSet (or name this one in draDrivers), or run another image here (webhook/dradaemonsets.md)",
					Fix:     "run the driver only in its configured kubelet-plugin DaemonSet (or name a new DaemonSet in `draDrivers`); run other workloads of its image without the node's filesystem, as its controller does; or run another image; name the driver's own controllers in `draDrivers[].controllers`"},
			}},
		{Name: "validator", Codes: []Code{CodeValidatorForged}, Reviews: []Review{ReviewValidator, ReviewDriver}, Apply: validatorForgedRule,
			Docs: map[Code]CodeDoc{
				CodeValidatorForged: {Meaning: "someone other than the GPU Operator creates its validator DaemonSet (`proof.validator`), or changes its Pods' spec or labels: a validator Pod proves a node when that DaemonSet's UID controls it, so a DaemonSet created under its name would own Pods that validate nothing. Also a ClusterPolicy write whose `spec.validator` gives the validator an image outside `proof.validator.repository`, or sets `WITH_WORKLOAD` false in its env: the GPU Operator writes the DaemonSet from it, unjudged",
					Example: "[ValidatorForged] \"alice\" creates DaemonSet gpu-operator/nvidia-operator-validator, the GPU Operator's validator DaemonSet (config proof.validator): only the GPU Operator may (its ServiceAccounts, the chart's webhook.gpuOperatorServiceAccounts); a validator Pod proves a GPU node when this DaemonSet's UID controls it, so a DaemonSet written under its name by anyone else would prove nodes with Pods that validate nothing; leave it to the GPU Operator, which creates it again when it is gone (webhook/validatordaemonset.md)",
					Fix:     "leave the validator DaemonSet to the GPU Operator, which creates it again when it is gone"},
			}},
		// Only the gate nudges SUC, and its nudge is all it writes of a Plan.
		{Name: "nudge", Codes: []Code{CodeNudgeForged}, Reviews: []Review{ReviewPlanNudge}, Apply: nudgeForgedRule,
			Docs: map[Code]CodeDoc{
				CodeNudgeForged: {Meaning: "someone other than the gate sets or changes its nudge annotation `gpu-upgrade-gate.cattle.io/nudge` on a Plan, or the gate's own ServiceAccount writes anything else of a Plan: the gate's write of a Plan is that one annotation, which makes SUC look at the Plan again at once when a node's completion lands (docs/rollout.md)",
					Example: "[NudgeForged] \"alice\" sets it to \"gpu-v100-01/9e1b5f0c2d7a\": annotation gpu-upgrade-gate.cattle.io/nudge is the gate's alone (system:serviceaccount:gpu-upgrade-gate:gpu-upgrade-gate sets it on a Plan when SUC's completion of a node lands, so that SUC looks at the Plan again at once), and it writes nothing else of a Plan; leave it out (removing it is allowed)",
					Fix:     "leave the annotation to the gate (removing it is allowed); the gate's ServiceAccount writes nothing else of a Plan"},
			}},
		// The adapter's answer to a review it cannot read.
		{Name: "reviewinvalid", Codes: []Code{CodeReviewInvalid}, Reviews: []Review{ReviewAdmission}, Apply: reviewInvalidRule,
			Docs: map[Code]CodeDoc{
				CodeReviewInvalid: {Meaning: "the AdmissionReview itself is malformed, or its resource, kind or operation is not what the webhook reviews",
					Example: "[ReviewInvalid] resource plans.upgrade.cattle.io holds kind Plan.upgrade.cattle.io, got \"/v1, Kind=ConfigMap\"; send a well-formed AdmissionReview of the resource this endpoint reviews"},
			}},
		// Last, so the adapter's listing of the holders is in flight while
		// every other row applies: the one row that waits for it.
		{Name: "holders", Codes: []Code{CodeGPUHolders}, Reviews: append(slices.Clone(reloadPaths), ReviewModeStep, ReviewNodeTaints), Apply: holdersRow,
			Docs: map[Code]CodeDoc{
				CodeGPUHolders: {Meaning: "a node the change takes GPUs from (an upgrade, a GPU mode change, a driver reload or removal) runs GPU workloads",
					Example: "[GPUHolders] node gpu-v100-02 runs 1 GPU holder(s): Job ml/train [nvidia.com/gpu]; stop or migrate them (or drain the node) before upgrading it"},
			}},
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
	if len(b.ts) > 0 {
		vs := b.versions()
		for _, t := range b.ts {
			if t.versions == nil {
				t.versions = vs
			}
		}
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
