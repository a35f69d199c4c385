package gate

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
)

// DaemonSetWriteRequest is a CREATE or UPDATE of a DaemonSet whose Pods
// the gate reads as a GPU component's, or that could run one: another
// DaemonSet of a DRA driver's namespace (DecideDRADaemonSetWrite), or the
// GPU Operator's validator DaemonSet (DecideValidatorWrite).
type DaemonSetWriteRequest struct {
	// Operation is OpCreate or OpUpdate; Old is nil for a CREATE.
	Operation      string
	DaemonSet, Old *appsv1.DaemonSet
	User           UserInfo
	// Plugins are the configured kubelet-plugin DaemonSets of the
	// DaemonSet's namespace as the adapter read them (one that is not
	// there is left out): their images are the drivers'.
	Plugins []*appsv1.DaemonSet
}

// DecideDRADaemonSetWrite reviews a write of a DaemonSet in a DRA driver's
// namespace that is no configured kubelet plugin (DRAPluginForged).
func DecideDRADaemonSetWrite(cfg *Config, req DaemonSetWriteRequest) Decision {
	return decideDaemonSetWrite(cfg, req, kindsDRADaemonSet)
}

// DecideValidatorWrite reviews a write of the GPU Operator's validator
// DaemonSet by anyone but the operator (ValidatorForged): the webhook's
// match condition leaves the operator's own ServiceAccounts out, which
// the engine's configuration does not name.
func DecideValidatorWrite(cfg *Config, req DaemonSetWriteRequest) Decision {
	return decideDaemonSetWrite(cfg, req, kindsValidator)
}

func decideDaemonSetWrite(cfg *Config, req DaemonSetWriteRequest, kinds []Review) Decision {
	d := Decision{Object: "DaemonSet " + req.DaemonSet.Namespace + "/" + req.DaemonSet.Name}
	var f findings
	r := &daemonSetReview{req: req}
	r.kinds, r.cfg, r.user = kinds, cfg, req.User
	applyTable(r, &f, &d)
	f.settle(&d)
	return d
}

type daemonSetReview struct {
	reviewBase
	req DaemonSetWriteRequest
}

// templateKept: an UPDATE that leaves the Pod template as it was starts
// no Pod anew.
func (r *daemonSetReview) templateKept() bool {
	return r.req.Old != nil && equality.Semantic.DeepEqual(r.req.Old.Spec.Template, r.req.DaemonSet.Spec.Template)
}

// codeKept: an UPDATE that leaves what the Pods run and are selected by
// (the template's spec and labels) as it was; an annotation alone
// (kubectl rollout restart) restarts the same code.
func (r *daemonSetReview) codeKept() bool {
	o, n := r.req.Old, r.req.DaemonSet
	return o != nil && equality.Semantic.DeepEqual(o.Spec.Template.Spec, n.Spec.Template.Spec) &&
		labels.Equals(o.Spec.Template.Labels, n.Spec.Template.Labels)
}
