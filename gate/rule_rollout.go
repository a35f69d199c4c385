package gate

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// One GPU rollout at a time (issue 12 item 4). A rollout is in flight
// while it still has GPU nodes to move:
//   - a Plan (in the SUC namespaces) with a GPU node in its status.applying,
//     or with a GPU node SUC would still select (pending: selected, not
//     opted out, its plan label not the Plan's hash), or with a live SUC Job
//     for a GPU node (by the Job's labels: an opted-out node's Job still
//     runs), and the live Jobs of a deleted Plan;
//   - the GPU Operator's driver rollout while any GPU node carries a driver
//     upgrade state other than upgrade-done (upgrade-required included: the
//     operator has queued it).
//
// What is not held by it: the review of the Plan itself (its own re-apply
// or edit), SUC's per-node steps within an admitted rollout (they are held
// by the budget instead, so two rollouts admitted in the same instant cannot
// deadlock each other), a rollback (annotation gpu-upgrade-gate.io/rollback,
// the way out of a failed rollout), and a review that moves no node.

var pathObjectName = field.NewPath("metadata", "name")

// rolloutInFlight is one rollout in flight: what it is and its nodes.
type rolloutInFlight struct {
	what  string
	nodes []string
}

// rolloutsInFlight lists the GPU rollouts in flight other than the Plan
// self (nil on the driver path). A Plan SUC reports
// Complete with nothing applying has no pending node (SUC sets Complete
// only when it selects none), so only the others are scanned: a review then
// matches the fleet against the few Plans in progress, not against all.
func (c *Config) rolloutsInFlight(cl *Cluster, fs *fleetScan, self *upgradev1.Plan) []rolloutInFlight {
	var out []rolloutInFlight
	var driver []string
	for _, n := range fs.stated {
		driver = append(driver, n.Name+" ("+n.Labels[LabelDriverUpgradeState]+")")
	}
	for i, p := range cl.Plans {
		if self != nil && p.Namespace == self.Namespace && p.Name == self.Name {
			continue
		}
		var nodes []string
		for _, h := range p.Status.Applying {
			if n := fs.byHost(h); n != nil {
				nodes = append(nodes, n.Name+" (applying)")
			}
		}
		if sel, err := cl.planSelector(i); err == nil && !planComplete(p) {
			idx := cl.nodeIndex(c)
			idx.selectingGPU(c, sel, func(i int32) {
				if n := idx.nodes[i]; sel.pending(n) && !slices.Contains(p.Status.Applying, hostname(n)) {
					nodes = append(nodes, n.Name+" (pending)")
				}
			})
		}
		nodes = append(nodes, liveJobNodes(c, cl, p.Namespace, p.Name, nodes)...)
		if len(nodes) > 0 {
			slices.Sort(nodes)
			out = append(out, rolloutInFlight{what: "Plan " + p.Namespace + "/" + p.Name, nodes: nodes})
		}
	}
	// SUC's Jobs whose Plan is gone: deleting a Plan mid-upgrade leaves its
	// node upgrading (its Job still runs) until the Job ends.
	orphans := map[string][]string{}
	for _, j := range cl.Proof.UpgradeJobs {
		plan := j.Labels[upgradev1.LabelPlan]
		if self != nil && j.Namespace == self.Namespace && plan == self.Name {
			continue // the Plan under review, created again
		}
		if plan != "" && cl.plan(j.Namespace, plan) == nil && jobLive(j) {
			if n := cl.nodeIndex(c).gpuByName(c, j.Labels[upgradev1.LabelNode]); n != nil {
				what := "SUC Job(s) of deleted Plan " + j.Namespace + "/" + plan
				orphans[what] = append(orphans[what], n.Name+" (SUC Job "+j.Name+" runs)")
			}
		}
	}
	for _, what := range slices.Sorted(maps.Keys(orphans)) {
		nodes := orphans[what]
		slices.Sort(nodes)
		out = append(out, rolloutInFlight{what: what, nodes: nodes})
	}
	if len(driver) > 0 {
		slices.Sort(driver)
		out = append(out, rolloutInFlight{what: "the GPU Operator's driver rollout", nodes: driver})
	}
	return out
}

// liveJobNodes are the GPU nodes a live SUC Job of Plan ns/name runs for
// (matched by the Job's own labels: opting the node out or rewriting its
// hostname label does not stop the Job), other than those listed already.
func liveJobNodes(c *Config, cl *Cluster, ns, name string, listed []string) []string {
	var out []string
	for _, j := range cl.Proof.UpgradeJobs {
		if j.Namespace != ns || j.Labels[upgradev1.LabelPlan] != name || !jobLive(j) {
			continue
		}
		n := cl.nodeIndex(c).gpuByName(c, j.Labels[upgradev1.LabelNode])
		if n == nil || slices.ContainsFunc(listed, func(s string) bool { return strings.HasPrefix(s, n.Name+" (") }) {
			continue
		}
		out = append(out, n.Name+" (SUC Job "+j.Name+" runs)")
	}
	return out
}

// planComplete: SUC reports the Plan Complete for its current hash, with
// no node applying.
func planComplete(p *upgradev1.Plan) bool {
	if len(p.Status.Applying) > 0 || p.Status.LatestHash == "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == upgradev1.PlanComplete {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// rolloutRule (review-level, Plans and the driver path): a review that
// moves GPU nodes is denied while another GPU rollout is in flight.
func (c *Config) rolloutRule(f *findings, cl *Cluster, fs *fleetScan, self *upgradev1.Plan) {
	for _, r := range c.rolloutsInFlight(cl, fs, self) {
		f.add(rolloutInFlightBlocker(r))
	}
}

// rolloutInFlightBlocker builds every RolloutInFlight blocker.
func rolloutInFlightBlocker(r rolloutInFlight) Blocker {
	return forbidden(CodeRolloutInFlight, "", pathObjectName, "%s is in flight on GPU node(s) %s; GPU nodes take one rollout at a time: wait until it has finished (every node it selects done, status.applying empty, driver states upgrade-done), or delete or opt out what should not run, then retry; a rollback (annotation gpu-upgrade-gate.io/rollback: \"true\") is not held",
		r.what, nodeList(r.nodes))
}

// rolloutRules (Plans and SUC's per-node step): RolloutInFlight on the
// request, the budget on both. A Plan that starts nothing is held by
// neither, a rollback Plan's request by neither.
func (r *PlanReview) rolloutRules(f *findings, d *Decision) {
	if len(r.pending) == 0 {
		return
	}
	p := r.req.Plan
	fs := r.cfg.scanFleet(r.cl)
	if r.only == "" && !r.rollback {
		r.cfg.rolloutRule(f, r.cl, fs, p)
	}
	if r.rollback && r.only == "" {
		// The way out of a failed rollout: the failed node is out already,
		// and SUC's Job start of each node still holds the budget.
		return
	}
	bc := budgetCheck{candidates: r.pending, path: pathSelector}
	if r.only != "" {
		bc.own, bc.node, bc.view.sucStep = []string{r.only}, r.only, p
	} else if stored := r.cl.plan(p.Namespace, p.Name); stored != nil {
		// The stored status, never the request's: SUC alone writes it.
		bc.own = stored.Status.Applying
	}
	r.cfg.budgetRule(f, r.cl, fs, r.req.Now, d, bc)
}

// rolloutRules (driver path and its per-node step): RolloutInFlight on the
// request, the maintenance windows and the budget on both (a rollback's
// request: none of them). An upgrade of
// the operator itself reloads no driver: it is held by RolloutInFlight only.
func (r *DriverReview) rolloutRules(f *findings, d *Decision) {
	if len(r.pending) == 0 || r.req.Change.Operation == OpDelete {
		return
	}
	// The step is judged on the fleet as its live reads see it (the
	// in-flight nodes and the node itself written over the cache); the
	// request on the cache.
	cl := r.cl
	if st := r.step; st != nil {
		cl = r.cl.withNodes(r.cfg, append(slices.Clone(st.InFlight), st.Node)...)
	}
	fs := r.cfg.scanFleet(cl)
	if r.step == nil && !r.rollback {
		r.cfg.rolloutRule(f, cl, fs, nil)
	}
	if r.operatorUpgrade() || r.rollback && r.step == nil {
		// A rollback is the way out of a failed rollout; its per-node
		// steps still hold the window and the budget.
		return
	}
	path, node := r.req.Change.DriverPath, ""
	if path == nil {
		path = pathObjectName
	}
	bc := budgetCheck{candidates: r.pending}
	if st := r.step; st != nil {
		path, node = pathDriverState, st.Node.Name
		bc.own, bc.view.driverStep = []string{node}, true
	}
	bc.node, bc.path = node, path
	r.cfg.outsideWindowRule(f, windowDriver, r.req.Now, node, path)
	r.cfg.budgetRule(f, cl, fs, r.req.Now, d, bc)
}

// plan is the stored Plan namespace/name, nil when there is none.
func (cl *Cluster) plan(namespace, name string) *upgradev1.Plan {
	for _, p := range cl.Plans {
		if p.Namespace == namespace && p.Name == name {
			return p
		}
	}
	return nil
}
