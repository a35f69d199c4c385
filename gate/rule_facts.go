package gate

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// factsRule: every component of the node's current tuple (and of a typed
// destination) must be known; the tuple rules after it skip a transition
// that lacks one rather than guess.
func factsRule(t *Transition, f *findings) {
	if t.unjudgeable() {
		return
	}
	if t.CurrentUnknown != "" {
		f.add(factsMissing(t.Node.Name, t.Path, t.CurrentUnknown, fromNode, nil))
		return
	}
	var missing []string
	var first *field.Path
	for i := range componentTable {
		s := &componentTable[i]
		if !s.Required() {
			continue // an optional member left out is "not run here", not unknown
		}
		if strings.TrimSpace(s.Value(t.Current)) == "" {
			if t.Typed {
				missing = append(missing, t.CurrentPath[s.Name].String())
				first = firstPath(first, t.CurrentPath[s.Name])
			} else {
				missing = append(missing, fmt.Sprintf("%s (%s)", s.Label, s.fact(t.cfg)))
			}
		}
		if t.Typed && t.After != nil && strings.TrimSpace(s.Value(*t.After)) == "" {
			missing = append(missing, t.AfterPath[s.Name].String())
			first = firstPath(first, t.AfterPath[s.Name])
		}
	}
	switch {
	case len(missing) == 0:
		t.factsOK = true
	case t.Typed:
		f.add(factsMissing(t.Node.Name, first, strings.Join(missing, ", "), fromFlags, nil))
	default:
		f.add(factsMissing(t.Node.Name, t.Path, strings.Join(missing, ", "), fromNode, nil))
	}
}

func firstPath(have, p *field.Path) *field.Path {
	if have != nil {
		return have
	}
	return p
}

// factSource says where a fact the gate could not read comes from, which
// decides what the message tells a person to do.
type factSource int

const (
	fromNode  factSource = iota // labels and status the node and its operators publish
	fromFlags                   // values typed on the command line
	fromAPI                     // a live read of the API server, or the informer caches
	// fromMaintenance: the maintenance operator's NodeMaintenances, which
	// the budget counts (what: the GPU nodes the move takes out).
	fromMaintenance
	// fromConfig: a driver the gate is not configured to read (what: the
	// DRA driver a GPUCluster deploys with no config.draDrivers entry).
	fromConfig
)

// factsMissing builds every FactsMissing blocker.
func factsMissing(node string, path *field.Path, what string, src factSource, cause error) Blocker {
	switch src {
	case fromFlags:
		return required(CodeFactsMissing, node, path, "no value for %s; type every current and target version", what)
	case fromAPI:
		return forbidden(CodeFactsMissing, node, path, "%s cannot be read (%v); the gate never allows what it cannot check: retry when the API server answers", what, cause)
	case fromConfig:
		return forbidden(CodeFactsMissing, node, path, "this write makes the GPU Operator deploy the DRA driver %[1]s, but config.draDrivers has no entry named %[1]s, so what is left of that driver on each GPU node (kubelet-plugin Pods, ResourceSlices) and, after the rollout, the nodes' DRA proof cannot be read; "+
			"add to config.draDrivers {name: %[1]s, namespace: <the GPU Operator's namespace>, daemonSet: <the kubelet-plugin DaemonSet the operator creates>} and retry", what)
	case fromMaintenance:
		return forbidden(CodeFactsMissing, node, path, "the disruption budget cannot count the GPU nodes out before taking GPU node(s) %s out: the maintenance operator's NodeMaintenances (maintenance.nvidia.com) cannot be read (%s), and another requestor's maintenance may have GPU nodes out; fix what the error names (the gate's watch of nodemaintenances, its RBAC, or the malformed object), then retry (writes that take no GPU node out, SUC's completions among them, are not held by it)",
			what, qualification.Clip(fmt.Sprint(cause)))
	}
	return forbidden(CodeFactsMissing, node, path, "node %s: cannot read %s; the gate decides only on facts it can read: make sure those sources publish them", node, what)
}

// draConfigRule (driver path, review-level): a GPUCluster write that
// deploys a DRA driver the gate has no config.draDrivers entry for reads
// nothing of that driver on the nodes; fail closed.
func draConfigRule(rv review, f *findings, _ *Decision) {
	if r, ok := rv.(*DriverReview); ok && r.req.Change.DRAUnconfigured != "" {
		f.add(factsMissing("", r.req.Change.DRAPath, r.req.Change.DRAUnconfigured, fromConfig, nil))
	}
}

// FactsUnavailable is the decision when the cluster facts cannot be read at
// all (caches not synced, a watch broken): denied, never allowed.
func FactsUnavailable(object string, err error) Decision {
	d := Decision{Object: object}
	b := factsMissing("", field.NewPath("metadata"), "the cluster facts (Nodes, Plans, records, workloads)", fromAPI, err)
	b.Err.Type = field.ErrorTypeInternal
	d.Blockers = []Blocker{b}
	return d
}

// stepFactsRule (the per-node driver step): the rollout must be readable,
// or the step is judged no further. The budget (rule_budget.go) stands in
// for the policy rule there: the controller honours maxParallelUpgrades by
// the states it writes, which is what the gate counts, so a policy of 0
// (unlimited) is held to the budget too.
func stepFactsRule(rv review, f *findings, _ *Decision) {
	r, ok := rv.(*DriverReview)
	if !ok || r.step == nil {
		return
	}
	if st := r.step; st.Rollout.Missing != "" {
		src, what := fromNode, st.Rollout.Missing
		if st.Rollout.MissingErr != nil {
			src, what = fromAPI, what+" (for node "+st.Node.Name+"'s driver reload)"
		}
		f.add(factsMissing(st.Node.Name, pathDriverState, what, src, st.Rollout.MissingErr))
		r.stop()
	}
}
