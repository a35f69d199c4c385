package fleet

import (
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// OutOfServiceConfig is the `outOfService` section of the config: the
// marks a health agent or an operator leaves on a node it took out, beside
// the cordon itself.
type OutOfServiceConfig struct {
	// Taints: a GPU node with any of these keys is out, whatever its cordon.
	Taints []string `json:"taints"`
	// Annotations: a health agent's mark that it cordoned the node (the
	// cordon is then the agent's, not SUC's nor a person's).
	Annotations []string `json:"annotations"`
}

// DefaultOutOfServiceConfig: Kubernetes' own out-of-service taint
// (non-graceful node shutdown), and NVSentinel's fault-quarantine marks
// (the annotations quarantineHealthEvent and
// quarantineHealthEventIsCordoned it writes on a node it cordons:
// NVSentinel docs/cancelling-breakfix.md, fault-quarantine/pkg/common).
// NVSentinel's taints are rule-configured: add their keys here.
func DefaultOutOfServiceConfig() OutOfServiceConfig {
	return OutOfServiceConfig{
		Taints:      []string{"node.kubernetes.io/out-of-service"},
		Annotations: []string{"quarantineHealthEvent", "quarantineHealthEventIsCordoned"},
	}
}

// Validate checks the keys, each against the form of a qualified name.
func (o *OutOfServiceConfig) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for what, keys := range map[string][]string{"taints": o.Taints, "annotations": o.Annotations} {
		for i, k := range keys {
			if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
				errs = append(errs, field.Invalid(path.Child(what).Index(i), qualification.Clip(k), "expected a taint or annotation key, e.g. node.kubernetes.io/out-of-service: "+msgs[0]))
			}
		}
	}
	return errs
}
