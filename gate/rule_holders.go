package gate

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// holdersRow (the reviews that reload drivers; the table's last row): waits
// for the adapter's listing of the holders (in flight while every other row
// applied), then judges each node the review moves or unloads.
func holdersRow(rv review, f *findings, _ *Decision) {
	b := rv.base()
	b.awaitHolders()
	judgeEach(holdersRule, b.ts, f)
	judgeEach(holdersRule, b.unloads, f)
}

// holdersRule: a node whose upgrade step would take its GPUs away must hold
// none, unless the request's own policy drains them first.
func holdersRule(t *Transition, f *findings) {
	if !t.CheckHolders || t.unjudgeable() {
		return
	}
	path := t.Path
	if t.HoldersPath != nil {
		path = t.HoldersPath
	}
	switch {
	case t.HoldersErr != nil:
		f.add(factsMissing(t.Node.Name, path, "the GPU holders on node "+t.Node.Name, fromAPI, t.HoldersErr))
	case len(t.Holders) > 0 && t.Unload && t.Unscheduled != "":
		f.add(gpuHolders(t.Node.Name, path, t.Holders, holdersUnschedule, t.Unscheduled))
	case len(t.Holders) > 0 && t.Unload:
		f.add(gpuHolders(t.Node.Name, path, t.Holders, holdersUnload, ""))
	case len(t.Holders) > 0 && t.DrainOver:
		f.add(gpuHolders(t.Node.Name, path, t.Holders, holdersStepReload, ""))
	case len(t.Holders) > 0 && t.Drains:
		f.warn("node %s runs %d GPU holder(s); the upgrade policy drains them before the reload", t.Node.Name, len(t.Holders))
	case len(t.Holders) > 0 && t.After != nil:
		f.add(gpuHolders(t.Node.Name, path.Child("drain", "enable"), t.Holders, holdersReload, ""))
	case len(t.Holders) > 0:
		f.add(gpuHolders(t.Node.Name, path, t.Holders, holdersUpgrade, ""))
	}
}

type holdersStep int

const (
	holdersUpgrade    holdersStep = iota // a SUC upgrade of the node
	holdersReload                        // the GPU Operator's driver reload
	holdersMode                          // a GPU mode change
	holdersUnload                        // a driver object deleted
	holdersStepReload                    // the GPU Operator's per-node reload step
	holdersUnschedule                    // a driver's scheduling narrowed off the node (unscheduled names it)
)

// gpuHolders builds every GPUHolders blocker; unscheduled names the
// scheduling a holdersUnschedule step narrowed.
func gpuHolders(node string, path *field.Path, hs []Holder, step holdersStep, unscheduled string) Blocker {
	switch step {
	case holdersReload:
		return forbidden(CodeGPUHolders, node, path, "node %s runs %d GPU holder(s): %s, and the upgrade policy does not drain; they would lose their GPUs during the module reload: enable upgradePolicy.drain or stop them first", node, len(hs), holderList(hs))
	case holdersUnload:
		return forbidden(CodeGPUHolders, node, path, "node %s runs %d GPU holder(s): %s; deleting this object removes the driver from the node and nothing drains them first: stop or move them before deleting it", node, len(hs), holderList(hs))
	case holdersUnschedule:
		return forbidden(CodeGPUHolders, node, path, "node %s runs %d GPU holder(s): %s; this change of %s no longer selects the node, so the driver's Pod there is deleted and the driver removed from the node, and nothing drains them first: stop or move them first, or keep the node selected", node, len(hs), holderList(hs), unscheduled)
	case holdersStepReload:
		return forbidden(CodeGPUHolders, node, path, "node %s runs %d GPU holder(s): %s; its driver reloads now (the drain left them, or did not run) and they would lose their GPUs: stop or move them, and the operator's retry passes", node, len(hs), holderList(hs))
	case holdersMode:
		return forbidden(CodeGPUHolders, node, path, "node %s runs %d GPU holder(s): %s; stop or migrate them before changing its GPU mode", node, len(hs), holderList(hs))
	}
	return forbidden(CodeGPUHolders, node, path, "node %s runs %d GPU holder(s): %s; stop or migrate them (or drain the node) before upgrading it", node, len(hs), holderList(hs))
}
