package webhook

import (
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

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

// webhookAt names the webhook the chart sends to each path: a handler's
// enforcement mode is its webhook's (Register).
var webhookAt = map[string]string{
	PathPlans: WebhookPlans, PathNodes: WebhookNodes, PathRecords: WebhookRecords,
	PathDriver: WebhookDriver, PathJobs: WebhookJobs, PathDriverStep: WebhookDriverStep,
	PathOperator: WebhookOperator, PathPlanStatus: WebhookPlanStatus,
	PathCompletions: WebhookCompletions, PathHalts: WebhookHalts,
}

// CheckEnforcement refuses a per-webhook mode for a name that is none of
// the gate's webhooks: a misspelt name would leave its webhook in the
// gate-wide mode, perhaps not enforcing where enforcement was meant.
func CheckEnforcement(cfg *gate.Config) field.ErrorList {
	known := slices.Sorted(maps.Values(webhookAt))
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(cfg.Enforcement.Webhooks)) {
		if !slices.Contains(known, name) {
			errs = append(errs, field.NotSupported(field.NewPath("enforcement", "webhooks").Key(name), name, known))
		}
	}
	return errs
}
