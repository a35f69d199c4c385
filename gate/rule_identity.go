package gate

import (
	"fmt"

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
	// A node that had a GPU label is a GPU node before the write (IsGPUNode
	// reads the same labels), so r.changed holds every key that could go.
	if !ok || !r.gpu {
		return
	}
	n, old := r.req.Node, r.req.OldNode
	for _, k := range r.changed { // sorted
		was, wasSet := old.Labels[k]
		if !wasSet || !r.cfg.isGPULabel(k, was) {
			continue
		}
		if v, set := n.Labels[k]; !set || !r.cfg.isGPULabel(k, v) {
			f.add(gpuIdentityRemoved(n.Name, k, was, v, set))
		}
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
