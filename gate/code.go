package gate

// Code is a stable reason code. Codes are a documented interface: dashboards,
// audit queries and runbooks key on them, so a code is never renamed.
type Code string

// Plan codes (design section 4). Node reviews reuse them, prefixed by the Plan.
const (
	CodeMixedPlan            Code = "MixedPlan"
	CodeUnpinnedVersion      Code = "UnpinnedVersion"
	CodeConcurrencyNotSerial Code = "ConcurrencyNotSerial"
	CodeCordonRequired       Code = "CordonRequired"
	CodeSelectorInvalid      Code = "SelectorInvalid"
	CodeRecordMissing        Code = "RecordMissing"
	CodeRecordInvalid        Code = "RecordInvalid"
	CodeRecordNotQualified   Code = "RecordNotQualified"
	CodeCanaryIncomplete     Code = "CanaryIncomplete"
	CodeEvidenceStale        Code = "EvidenceStale"
	CodeEvidenceFromFuture   Code = "EvidenceFromFuture"
	CodeSelfApproved         Code = "SelfApproved"
	// CodeRecordNotApproved: no attested approval of the record's data.
	CodeRecordNotApproved Code = "RecordNotApproved"
	// CodeAttestationForged: a record write's author or approval
	// annotations are not the requester's own.
	CodeAttestationForged    Code = "AttestationForged"
	CodeHardwareUnknown      Code = "HardwareUnknown"
	CodeHardwareNotQualified Code = "HardwareNotQualified"
	CodeFactsMissing         Code = "FactsMissing"
	CodeTargetNotQualified   Code = "TargetNotQualified"
	CodeSourceMismatch       Code = "SourceMismatch"
	CodeRKE2Downgrade        Code = "RKE2Downgrade"
	CodeMinorSkip            Code = "MinorSkip"
	CodeVersionSkew          Code = "VersionSkew"
	CodeComponentDowngrade   Code = "ComponentDowngrade"
	CodeMultipleCanaries     Code = "MultipleCanaries"
	CodeCanaryNotProven      Code = "CanaryNotProven"
	CodeCrossFailureDomain   Code = "CrossFailureDomain"
	CodeGPUHolders           Code = "GPUHolders"
	CodeVersionEditInFlight  Code = "VersionEditInFlight"
	CodeVersionInvalid       Code = "VersionInvalid"
	CodeNoChange             Code = "NoChange"
	CodeImageInvalid         Code = "ImageInvalid"
	// CodePlanStatusForged: status.applying written by someone but SUC.
	CodePlanStatusForged     Code = "PlanStatusForged"
	CodePreviousNodeUnproven Code = "PreviousNodeUnproven"
	// One GPU rollout at a time, within the disruption budget, in a window.
	CodeDisruptionBudgetExceeded Code = "DisruptionBudgetExceeded"
	CodeRolloutInFlight          Code = "RolloutInFlight"
	CodeWindowInvalid            Code = "WindowInvalid"
	CodeOutsideWindow            Code = "OutsideWindow"
	// CodeRolloutHalted: a failure halted the hardware's rollout (rule_halt.go).
	CodeRolloutHalted     Code = "RolloutHalted"
	CodeRequesterMismatch Code = "RequesterMismatch"
	// CodeRequesterMissing: a GPU Plan CREATE, or an UPDATE that changes its
	// spec (a new rollout) or drops the annotation, without
	// gpu-upgrade-gate.io/requested-by (config requireRequester).
	CodeRequesterMissing Code = "RequesterMissing"
	// CodeCordonedByOther: an upgrade would start on, or SUC would
	// uncordon, a GPU node someone other than SUC cordoned (nodestate.go).
	CodeCordonedByOther Code = "CordonedByOther"
	// CodeOperatorAutoApproval: a Subscription of the GPU Operator's OLM
	// package that lets OLM approve its InstallPlans itself (anything but
	// installPlanApproval: Manual), unless allowAutomaticOperatorApproval.
	CodeOperatorAutoApproval Code = "OperatorAutoApproval"
	// CodeEtcdSnapshotStale: a Plan that moves a GPU node's RKE2 minor
	// while no ready ETCDSnapshotFile is younger than etcdSnapshot.maxAge.
	CodeEtcdSnapshotStale Code = "EtcdSnapshotStale"
	// CodeOperatorRolloutUnfinished: a driver change, or the per-node
	// driver step, while the GPU Operator's own Deployment is not rolled out
	// or its ClusterServiceVersion is not Succeeded.
	CodeOperatorRolloutUnfinished Code = "OperatorRolloutUnfinished"
	// CodeDrainBlocked: SUC's drain of a pending GPU node cannot finish (a
	// PodDisruptionBudget allowing no disruption, local storage the drain
	// may not delete, ...): a warning, a refusal with drainCheck.deny.
	CodeDrainBlocked Code = "DrainBlocked"
	// CodePreconditionFailed: a declared precondition (preconditions) was
	// read and does not hold (its CEL expression returned false, or a
	// matching alert fires) when a GPU node's upgrade would start or an
	// upgraded node complete.
	CodePreconditionFailed Code = "PreconditionFailed"
	// CodePreconditionUnknown: a declared precondition cannot be judged
	// (its objects cannot be read, its expression failed or ran out of
	// budget, its alert source answered what the gate does not read).
	CodePreconditionUnknown Code = "PreconditionUnknown"
	// CodePreconditionStale: an alerts precondition whose source has not
	// been read successfully within its maxAge.
	CodePreconditionStale Code = "PreconditionStale"
)

// Node codes.
const (
	CodeModeChangeNotCordoned Code = "ModeChangeNotCordoned"
	// CodeCreationGateOpen: a configured creation gate (kube-dc's
	// GPU_SHARED_CREATION_ENABLED, ...) is not at its closed value, or
	// cannot be read, when a mode transition or a GPU upgrade would start.
	CodeCreationGateOpen         Code = "CreationGateOpen"
	CodeModeUnsupported          Code = "ModeUnsupported"
	CodeModeLabelsInconsistent   Code = "ModeLabelsInconsistent"
	CodeUncordonDuringTransition Code = "UncordonDuringTransition"
	CodeGPUIdentityRemoved       Code = "GPUIdentityRemoved"
	CodeUncordonBeforeProof      Code = "UncordonBeforeProof"
	// CodeNodeAttestationForged: a node's moved-by or cordon-handover
	// annotation names someone other than its writer.
	CodeNodeAttestationForged Code = "NodeAttestationForged"
	// CodeMovedByMissing: a person's write pulls a GPU node into a GPU Plan
	// without naming themselves in gpu-upgrade-gate.io/moved-by.
	CodeMovedByMissing Code = "MovedByMissing"
	// CodeOwnedFactWritten: a Node write changes a fact the ownership table
	// gives another owner (gate/ownership.go).
	CodeOwnedFactWritten Code = "OwnedFactWritten"
)

// CodeSUCJobForged: a Job carrying SUC's labels in a SUC namespace is
// written by someone other than SUC (rule_sucjob.go).
const CodeSUCJobForged Code = "SUCJobForged"

// CodeDRAPluginForged: a DaemonSet of a DRA driver's namespace that is no
// configured kubelet plugin, or another workload there whose Pods reach
// the node, runs the driver's image (rule_draplugin.go).
const CodeDRAPluginForged Code = "DRAPluginForged"

// CodeValidatorForged: the GPU Operator's validator DaemonSet is created,
// or its Pods' spec changed, by someone but the operator
// (rule_validator.go).
const CodeValidatorForged Code = "ValidatorForged"

// CodeNudgeForged: the gate's nudge annotation on a Plan is written by
// someone else, or the gate's own write of a Plan changes more than it
// (rule_nudge.go).
const CodeNudgeForged Code = "NudgeForged"

// CodeReviewInvalid is what an adapter answers when the request itself cannot
// be read (malformed object, kind that does not match the resource). The
// engine never produces it; it is here so every code lives in one list.
const CodeReviewInvalid Code = "ReviewInvalid"
