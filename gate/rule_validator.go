package gate

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// A validator Pod proves a node only when the validator DaemonSet's UID
// controls it (proof.go, OwnValidators). A DaemonSet created under that
// name gets a new UID and owns whatever Pods it runs: anyone who may create
// DaemonSets in the operator's namespace could prove GPU nodes with Pods
// that validate nothing. Only the GPU Operator creates it, or changes what
// its Pods run; the validator webhook's match condition leaves the
// operator's own ServiceAccounts out, so every write reviewed here is
// someone else's.

// validatorForgedRule (review-level, writes of the validator DaemonSet): no
// one but the GPU Operator creates it or changes its Pods' spec or labels.
func validatorForgedRule(rv review, f *findings, _ *Decision) {
	r, ok := rv.(*daemonSetReview)
	if !ok {
		return
	}
	ds, v := r.req.DaemonSet, r.cfg.Proof.Validator
	if ds.Namespace != v.Namespace || ds.Name != v.DaemonSet || r.codeKept() {
		return
	}
	what, path := "creates", field.NewPath("metadata", "name")
	if r.req.Old != nil {
		what, path = "changes the Pod template of", field.NewPath("spec", "template")
	}
	f.add(validatorForged(path, what, ds.Namespace, ds.Name, r.req.User.Name))
}

// validatorForged builds every ValidatorForged blocker.
func validatorForged(path *field.Path, what, ns, name, user string) Blocker {
	return forbidden(CodeValidatorForged, "", path,
		"%q %s DaemonSet %s/%s, the GPU Operator's validator DaemonSet (config proof.validator): only the GPU Operator may (its ServiceAccounts, the chart's webhook.gpuOperatorServiceAccounts); a validator Pod proves a GPU node when this DaemonSet's UID controls it, so a DaemonSet written under its name by anyone else would prove nodes with Pods that validate nothing; leave it to the GPU Operator, which creates it again when it is gone (webhook/validatordaemonset.md)",
		qualification.Clip(user), what, ns, name)
}
