package gate

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

type concurrencyProblem int

const (
	concurrencyPlan        concurrencyProblem = iota // a Plan's spec.concurrency
	concurrencyNoPolicy                              // a ClusterPolicy without driver upgradePolicy
	concurrencyNoAuto                                // upgradePolicy.autoUpgrade off
	concurrencyMaxParallel                           // upgradePolicy.maxParallelUpgrades not 1
	concurrencyReloading                             // another GPU node mid driver reload (per-node step)
)

// concurrencyRule: one node at a time, by a Plan's spec.concurrency or the
// driver path's upgrade policy (a deletion, or a narrowing alone, reloads
// nothing: no policy).
func concurrencyRule(rv review, f *findings, _ *Decision) {
	switch r := rv.(type) {
	case *PlanReview:
		if c := r.req.Plan.Spec.Concurrency; c != 1 {
			f.add(concurrencyNotSerial("", pathConcurrency, c, concurrencyPlan))
		}
	case *DriverReview:
		switch ch := r.req.Change; {
		case ch.Operation == OpDelete, ch.NoPolicy, r.unloading:
		case ch.PolicyErr != nil:
			f.add(factsMissing("", ch.PolicyPath, "the ClusterPolicy's driver upgradePolicy", fromAPI, ch.PolicyErr))
		default:
			policyRules(f, ch.Policy, ch.PolicyPath)
		}
	}
}

// policyRules (driver path): the operator must upgrade one node at a time.
func policyRules(f *findings, p DriverUpgradePolicy, path *field.Path) {
	switch {
	case !p.Present:
		f.add(concurrencyNotSerial("", path, nil, concurrencyNoPolicy))
	case !p.AutoUpgrade:
		f.add(concurrencyNotSerial("", path.Child("autoUpgrade"), false, concurrencyNoAuto))
	case p.MaxParallelUpgrades != 1:
		f.add(concurrencyNotSerial("", path.Child("maxParallelUpgrades"), p.MaxParallelUpgrades, concurrencyMaxParallel))
	}
}

// concurrencyNotSerial builds every ConcurrencyNotSerial blocker.
func concurrencyNotSerial(node string, path *field.Path, value any, p concurrencyProblem) Blocker {
	switch p {
	case concurrencyReloading:
		// value: the other nodes mid reload, "name (state)".
		return forbidden(CodeConcurrencyNotSerial, node, path, "node %s would start a driver reload while other GPU node(s) are mid reload: %s; GPU nodes take a new driver one at a time, so it waits until they reach upgrade-done (the operator retries on its own)", node, value)
	case concurrencyNoPolicy:
		return required(CodeConcurrencyNotSerial, "", path, "the ClusterPolicy has no driver upgradePolicy, so the operator would reload the driver on every node at once; set upgradePolicy.autoUpgrade: true and maxParallelUpgrades: 1")
	case concurrencyNoAuto:
		return invalid(CodeConcurrencyNotSerial, "", path, value, "without autoUpgrade the operator does not serialize the driver rollout; set upgradePolicy.autoUpgrade: true and maxParallelUpgrades: 1")
	case concurrencyMaxParallel:
		return invalid(CodeConcurrencyNotSerial, "", path, value, "maxParallelUpgrades is %d (0 means all at once); GPU nodes take a new driver one at a time: set it to 1", value)
	}
	return invalid(CodeConcurrencyNotSerial, "", path, value, "concurrency is %d; GPU Plans must upgrade one node at a time: set spec.concurrency: 1", value)
}
