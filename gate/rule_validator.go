package gate

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// A validator Pod proves a node only when the validator DaemonSet's UID
// controls it (fleet/nodeproof.go, OwnValidators). A DaemonSet created under that
// name gets a new UID and owns whatever Pods it runs: anyone who may create
// DaemonSets in the operator's namespace could prove GPU nodes with Pods
// that validate nothing. Only the GPU Operator creates it, or changes what
// its Pods run; the validator webhook's match condition leaves the
// operator's own ServiceAccounts out, so every write reviewed here is
// someone else's.

// validatorForgedRule (review-level, writes of the validator DaemonSet): no
// one but the GPU Operator creates it or changes its Pods' spec or labels;
// and the ClusterPolicy section it writes it from is judged
// (validatorSection).
func validatorForgedRule(rv review, f *findings, _ *Decision) {
	if r, ok := rv.(*DriverReview); ok {
		validatorSection(r, f)
		return
	}
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

// validatorSection (driver path: a ClusterPolicy write that creates or
// changes spec.validator): the GPU Operator, whose writes of the validator
// DaemonSet are not judged, writes it from this section. So the validator
// stays in its configured repository (a version there, the operator's own
// upgrade, is allowed) and its GPU workload is not switched off
// (WITH_WORKLOAD, which NVIDIA's validator reads as its --with-workload
// flag: validate by running a GPU workload).
func validatorSection(r *DriverReview, f *findings) {
	if r.req.Change.Validator == nil {
		return
	}
	v, want, user := r.req.Change.Validator, r.cfg.Proof.Validator.Repository, r.req.User.Name
	if v.Image != "" {
		img, err := fleet.ParseImage(v.Image)
		if err != nil || !fleet.MatchesRepository(img, want) {
			f.add(validatorForged(v.ImagePath, fmt.Sprintf("gives the GPU Operator's validator (%s) the image %s, not of the validator's repository %s (config proof.validator.repository)", r.req.Change.Object, qualification.Clip(v.Image), want), "", "", user))
		}
	}
	for _, p := range v.WorkloadOff {
		f.add(validatorForged(p, fmt.Sprintf("switches the GPU Operator's validator's GPU workload off (%s, WITH_WORKLOAD false)", r.req.Change.Object), "", "", user))
	}
}

// validatorForged builds every ValidatorForged blocker: a write of the
// validator DaemonSet (ns/name), or of the ClusterPolicy section it is
// written from (ns "").
func validatorForged(path *field.Path, what, ns, name, user string) Blocker {
	if ns == "" {
		return forbidden(CodeValidatorForged, "", path,
			"%q %s: the GPU Operator writes its validator DaemonSet from the ClusterPolicy's spec.validator without review, and a validator Pod of that DaemonSet proves a GPU node, so a validator that validates nothing would prove nodes; keep the validator image in its repository (a version change there is allowed) and its workload on (webhook/driver.md)",
			qualification.Clip(user), what)
	}
	return forbidden(CodeValidatorForged, "", path,
		"%q %s DaemonSet %s/%s, the GPU Operator's validator DaemonSet (config proof.validator): only the GPU Operator may (its ServiceAccounts, the chart's webhook.gpuOperatorServiceAccounts); a validator Pod proves a GPU node when this DaemonSet's UID controls it, so a DaemonSet written under its name by anyone else would prove nodes with Pods that validate nothing; leave it to the GPU Operator, which creates it again when it is gone (webhook/validatordaemonset.md)",
		qualification.Clip(user), what, ns, name)
}
