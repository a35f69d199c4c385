package gate

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// identityRule (Nodes): a person may not remove what makes a
// node a GPU node (gpunode.go: a configured vendor's NFD PCI label,
// nvidia.com/gpu.present=true, a GFD label). NFD, GFD and the GPU Operator
// own those labels, and their writes of them never reach the gate (their
// exemptions list those facts, ownership.go); a node stripped of them
// would drop out of the gate's view and the GPU Operator's, and its next
// label change or uncordon would go unjudged.
func identityRule(rv review, f *findings, _ *Decision) {
	r, ok := rv.(*NodeReview)
	if !ok {
		return
	}
	n, old := r.req.Node, r.req.OldNode
	var gone []string // sorted only when there are some: a node has ~60 labels
	for k, was := range old.Labels {
		if !r.cfg.isGPULabel(k, was) {
			continue
		}
		if v, set := n.Labels[k]; !set || !r.cfg.isGPULabel(k, v) {
			gone = append(gone, k)
		}
	}
	slices.Sort(gone)
	for _, k := range gone {
		v, set := n.Labels[k]
		f.add(gpuIdentityRemoved(n.Name, k, old.Labels[k], v, set))
	}
}

// gpuIdentityRemoved builds every GPUIdentityRemoved blocker. Label values
// are at most 63 characters (API validation), so they are quoted whole.
func gpuIdentityRemoved(node, key, was, now string, set bool) Blocker {
	change := "is removed"
	if set {
		change = fmt.Sprintf("changes to %q", now)
	}
	return forbidden(CodeGPUIdentityRemoved, node, field.NewPath("metadata", "labels").Key(key),
		"label %s=%q %s on GPU node %s; it marks the node's GPUs for the gate and the GPU Operator, and NFD, GFD or the GPU Operator own it: change NFD's configuration or NodeFeatureRule instead, or break glass",
		key, was, change, node)
}
