package gate

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// modeRule (Nodes): a GPU mode changes only on a cordoned node without GPU
// holders, to a supported mode, with consistent labels (modeRules); a node
// mid-transition stays cordoned (uncordonRule).
func modeRule(rv review, f *findings, _ *Decision) {
	r, ok := rv.(*NodeReview)
	if !ok {
		return
	}
	if len(r.modeDiff) > 0 {
		holders, err := r.awaitHolders()
		r.modeRules(f, holders, err)
	}
	r.uncordonRule(f)
}

func (r *NodeReview) modeRules(f *findings, holders map[string][]Holder, holdersErr error) {
	n, old := r.req.Node, r.req.OldNode
	for _, k := range r.modeDiff {
		path := field.NewPath("metadata", "labels").Key(k)
		v, set := n.Labels[k]
		if !old.Spec.Unschedulable || !n.Spec.Unschedulable {
			f.add(modeChangeNotCordoned(n.Name, path, k, old.Labels[k], v))
		}
		if !set {
			continue
		}
		if k == LabelWorkloadConfig {
			if !slices.Contains(supportedWorkloadConfigs, v) {
				f.add(modeUnsupported(n.Name, path, k, v, supportedWorkloadConfigs))
			}
		} else if _, ok := supportedModes[v]; !ok {
			f.add(modeUnsupported(n.Name, path, k, v, sortedKeys(supportedModes)))
		}
	}
	labelsPath := field.NewPath("metadata", "labels")
	if holdersErr != nil {
		f.add(factsMissing(n.Name, labelsPath, "the GPU holders on node "+n.Name, fromAPI, holdersErr))
	} else if hs := holders[n.Name]; len(hs) > 0 {
		f.add(gpuHolders(n.Name, labelsPath, hs, holdersMode, ""))
	}
	mode := n.Labels[LabelWorkloadMode]
	want, known := supportedModes[mode]
	if got := n.Labels[LabelWorkloadConfig]; known && want != "" && got != want && !(got == "" && want == "container") {
		f.add(modeLabelsInconsistent(n.Name, mode, want, got))
	}
}

// uncordonRule: a node mid-transition stays cordoned.
func (r *NodeReview) uncordonRule(f *findings) {
	n, old := r.req.Node, r.req.OldNode
	if old.Spec.Unschedulable && !n.Spec.Unschedulable && n.Labels[LabelWorkloadMode] != n.Labels[LabelExpectedWorkloadMode] {
		f.add(uncordonDuringTransition(n.Name, n.Labels[LabelWorkloadMode], n.Labels[LabelExpectedWorkloadMode]))
	}
}

// modeChangeNotCordoned builds every ModeChangeNotCordoned blocker.
func modeChangeNotCordoned(node string, path *field.Path, key, from, to string) Blocker {
	return invalid(CodeModeChangeNotCordoned, node, path, to, "label %s changes from %q to %q on node %s, which is not cordoned; cordon it first (kubectl cordon %s), check it has no GPU holders, then change the mode", key, from, to, node, node)
}

// modeUnsupported builds every ModeUnsupported blocker.
func modeUnsupported(node string, path *field.Path, key, value string, supported []string) Blocker {
	deferred := ""
	if key != LabelWorkloadConfig {
		deferred = " (vm-vgpu is deferred)"
	}
	return invalid(CodeModeUnsupported, node, path, value, "label %s=%q on node %s is not supported%s; use one of %s", key, value, node, deferred, strings.Join(supported, ", "))
}

// modeLabelsInconsistent builds every ModeLabelsInconsistent blocker.
func modeLabelsInconsistent(node, mode, want, got string) Blocker {
	return forbidden(CodeModeLabelsInconsistent, node, field.NewPath("metadata", "labels").Key(LabelWorkloadConfig), "workload-mode %s needs %s=%s but the node would have %q; change both labels together", mode, LabelWorkloadConfig, want, got)
}

// uncordonDuringTransition builds every UncordonDuringTransition blocker.
func uncordonDuringTransition(node, mode, expected string) Blocker {
	return forbidden(CodeUncordonDuringTransition, node, field.NewPath("spec", "unschedulable"), "node %s is mid-transition (workload-mode %q, expected %q); keep it cordoned until both labels agree", node, mode, expected)
}
