package webhook

// Webhook names, as charts/gpu-upgrade-gate/templates/webhook.yaml renders
// them in the ValidatingWebhookConfiguration: the API server keys our audit
// annotations as "<name>/<key>" and prefixes denials with
// `admission webhook "<name>" denied the request`. The chart is the only
// source of the webhook configuration (rules, selectors, match conditions,
// failure policies); test/chart checks that its names and paths are these
// and the Path* constants the server registers.
const (
	WebhookPlans   = "plans.gpu-upgrade-gate.io"
	WebhookNodes   = "nodes.gpu-upgrade-gate.io"
	WebhookRecords = "records.gpu-upgrade-gate.io"
	WebhookDriver  = "driver.gpu-upgrade-gate.io"
	WebhookJobs    = "jobs.gpu-upgrade-gate.io"
	// WebhookDriverStep reviews the GPU Operator's per-node driver step.
	WebhookDriverStep = "driverstep.gpu-upgrade-gate.io"
	// WebhookOperator reviews upgrades of the GPU Operator itself.
	WebhookOperator = "operator.gpu-upgrade-gate.io"
	// WebhookPlanStatus reviews writes of status.applying by anyone but SUC.
	WebhookPlanStatus = "planstatus.gpu-upgrade-gate.io"
	// WebhookCompletions reviews SUC's completion write of a node.
	WebhookCompletions = "completions.gpu-upgrade-gate.io"
	// WebhookHalts reviews writes of the halt record.
	WebhookHalts = "halts.gpu-upgrade-gate.io"
)
