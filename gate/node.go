package gate

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// GPU mode labels (kube-dc's ownership triple and the GPU Operator's own).
const (
	LabelWorkloadMode         = "kube-dc.com/gpu.workload-mode"
	LabelExpectedWorkloadMode = "kube-dc.com/gpu.expected-workload-mode"
	LabelWorkloadConfig       = "nvidia.com/gpu.workload.config"
)

// ModeLabels are the labels whose change flips a node's GPU mode.
var ModeLabels = []string{LabelWorkloadMode, LabelExpectedWorkloadMode, LabelWorkloadConfig}

// supportedModes maps each supported workload mode to the GPU Operator
// workload.config it needs; vm-vgpu is deferred.
var supportedModes = map[string]string{
	"disabled":       "",
	"pod-hami":       "container",
	"pod-hami-dra":   "container",
	"vm-passthrough": "vm-passthrough",
}

var supportedWorkloadConfigs = []string{"container", "vm-passthrough"}

// NodeRequest is one Node UPDATE as the API server sent it.
type NodeRequest struct {
	Node    *corev1.Node
	OldNode *corev1.Node
	User    UserInfo
	Now     time.Time
}

// NodeReview decides a Node update in the same two steps as a Plan.
type NodeReview struct {
	reviewBase
	req       NodeRequest
	exemption string
	// step names the exemption whose identity wrote a GPU mode label as a
	// per-node mode step (nfd-master applying a NodeFeatureRule): judged by
	// the mode rules alone (ReviewModeStep).
	step string
	// own are the facts the writer's exemptions let it write (ownership.go).
	own []string
	// gpu: the node is a GPU node before or after the change.
	gpu      bool
	modeDiff []string
	plans    []*PlanReview // GPU Plans the change pulls the node into
	holders  []string
	// installs are the DRA drivers the write installs on the node
	// (draInstalls).
	installs []draInstall
	// changed are the label keys the write sets, changes or removes, sorted
	// (changedLabels), worked out once for the rules that read them.
	changed []string
}

// PrepareNode finds what the change does: the mode labels it changes and the
// Plans it pulls the node into.
func PrepareNode(cfg *Config, cl *Cluster, req NodeRequest) *NodeReview {
	r := &NodeReview{req: req}
	r.kinds, r.cfg, r.cl, r.user, r.now = kindsNode, cfg, cl, req.User, req.Now
	n, old := req.Node, req.OldNode
	if r.exemption, r.own, r.step = cfg.nodeExemption(req.User, n, old); r.exemption != "" {
		return r
	}
	if r.gpu = cfg.IsGPUNode(n) || cfg.IsGPUNode(old); !r.gpu {
		return r
	}
	r.changed = changedLabels(n, old)
	for _, k := range ModeLabels {
		if keyChanged(n.Labels, old.Labels, k) {
			r.modeDiff = append(r.modeDiff, k)
		}
	}
	if r.draInstalls(); len(r.modeDiff) > 0 || len(r.unloads) > 0 {
		r.holders = append(r.holders, n.Name)
	}
	var changed *NodeIndex // the fleet with the node as written
	for i, p := range cl.Plans {
		sel, err := cl.planSelector(i)
		if err != nil || !sel.Matches(n) || sel.Matches(old) {
			continue
		}
		if changed == nil {
			changed = cl.nodeIndex(cfg).WithNode(n)
		}
		view := *cl
		view.Nodes, view.Index = changed.Nodes(), changed
		pr := preparePlan(cfg, &view, PlanRequest{Operation: "CREATE", Plan: p, Now: req.Now}, sel, "")
		pr.kinds = r.kinds // the Plan's rows, applied for the Node's change
		if len(pr.gpu) == 0 {
			continue
		}
		r.plans = append(r.plans, pr)
		r.holders = append(r.holders, pr.HolderNodes()...)
	}
	slices.Sort(r.holders)
	r.holders = slices.Compact(r.holders)
	// An exempt identity's mode label write is a per-node mode step; one
	// that also pulls the node into a GPU Plan is judged as anyone's, so the
	// Plan's rules (and the mover's attestation) still judge the move.
	if r.step != "" && len(r.plans) == 0 {
		r.kinds = kindsModeStep
	}
	if r.taintsAlone() {
		r.kinds = kindsNodeTaints
	}
	return r
}

// taintsAlone: the write changes none of what the Node rules other than
// the DRA plugin's install and unload read (labels, an uncordon, the
// moved-by and cordon-handover annotations): it reached the gate for its
// taints (webhook/nodes.md), which those rules alone read. A taint write
// that never reached the gate before must not meet rules it never met.
func (r *NodeReview) taintsAlone() bool {
	n, old := r.req.Node, r.req.OldNode
	if len(r.changed) > 0 || old.Spec.Unschedulable && !n.Spec.Unschedulable {
		return false
	}
	for _, k := range []string{AnnotationMovedBy, AnnotationCordonHandover} {
		if keyChanged(n.Annotations, old.Annotations, k) {
			return false
		}
	}
	return true
}

// HolderNodes are the nodes whose GPU holders Decide needs.
func (r *NodeReview) HolderNodes() []string { return r.holders }

// Decide applies the Node rules and the rules of every Plan the change pulls
// the node into.
func (r *NodeReview) Decide(holders map[string][]Holder, holdersErr error) Decision {
	n := r.req.Node
	d := Decision{Object: "Node " + n.Name, Nodes: []string{n.Name}}
	if r.exemption != "" {
		d.Allowed, d.Exemption = true, r.exemption
		return d
	}
	r.beginListed(holders, holdersErr)
	r.finds, r.dec = findings{}, d
	f := &r.finds
	applyTable(r, f, &r.dec)
	d = r.dec
	for _, pr := range r.plans {
		pd := pr.Decide(holders, holdersErr)
		for _, b := range pd.Blockers {
			b.Plan = pr.req.Plan.Namespace + "/" + pr.req.Plan.Name
			b.Err = field.Forbidden(field.NewPath("metadata", "labels"), b.Err.Detail)
			f.add(b)
		}
	}
	return r.cfg.finish(d, *f, r.req.User, n.Annotations, r.req.OldNode.Annotations)
}
