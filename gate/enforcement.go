package gate

import (
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// EnforcementMode is what a webhook does with a write the rules would deny,
// after ValidatingAdmissionPolicy's validationActions: enforce refuses it
// (Deny); warn admits it, tells the client the would-be blockers in
// warnings and records them (Warn and Audit); audit admits it and only
// records them (Audit; Gatekeeper's dryrun, Kyverno's Audit). Records are
// the audit annotations (would-deny), the decision log and the metric
// gpu_upgrade_gate_would_deny_total. The webhook applies the mode where
// the decision leaves for the API server (webhook/handler.go); the engine
// decides the same in every mode.
type EnforcementMode string

const (
	EnforcementEnforce EnforcementMode = "enforce"
	EnforcementWarn    EnforcementMode = "warn"
	EnforcementAudit   EnforcementMode = "audit"
)

var enforcementModes = []EnforcementMode{EnforcementEnforce, EnforcementWarn, EnforcementAudit}

// EnforcementConfig is the gate's mode and the webhooks that differ from
// it, by webhook name (e.g. jobs.gpu-upgrade-gate.io: enforce).
type EnforcementConfig struct {
	Mode     EnforcementMode            `json:"mode"`
	Webhooks map[string]EnforcementMode `json:"webhooks,omitempty"`
}

// DefaultEnforcementConfig enforces everywhere.
func DefaultEnforcementConfig() EnforcementConfig {
	return EnforcementConfig{Mode: EnforcementEnforce}
}

// For is the mode of the named webhook.
func (e EnforcementConfig) For(webhook string) EnforcementMode {
	if m, ok := e.Webhooks[webhook]; ok {
		return m
	}
	return e.Mode
}

// Enforcing says whether every webhook enforces.
func (e EnforcementConfig) Enforcing() bool {
	for _, m := range e.Webhooks {
		if m != EnforcementEnforce {
			return false
		}
	}
	return e.Mode == EnforcementEnforce
}

// validate checks the modes and the shape of the webhook names; that each
// name is one of the gate's webhooks is checked where they are known
// (webhook.CheckEnforcement, at start-up), so a misspelt name never leaves
// a webhook in another mode than the one meant.
func (e EnforcementConfig) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !slices.Contains(enforcementModes, e.Mode) {
		errs = append(errs, field.NotSupported(path.Child("mode"), qualification.Clip(string(e.Mode)), enforcementModes))
	}
	for _, name := range slices.Sorted(maps.Keys(e.Webhooks)) {
		p := path.Child("webhooks").Key(name)
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 || !strings.HasSuffix(name, ".gpu-upgrade-gate.io") {
			errs = append(errs, field.Invalid(p, qualification.Clip(name), "expected a webhook name of the gate, e.g. jobs.gpu-upgrade-gate.io"))
		}
		if m := e.Webhooks[name]; !slices.Contains(enforcementModes, m) {
			errs = append(errs, field.NotSupported(p, qualification.Clip(string(m)), enforcementModes))
		}
	}
	return errs
}
