package fleet

import (
	batchv1 "k8s.io/api/batch/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// View is what the loaded objects alone say about the fleet, worked out once
// per set of objects and never changed after: the webhook builds one per
// informer event of what it is built from, the CLI one per snapshot, and
// every review of that set reads it (package doc, step 4). It holds no
// answer that depends on the clock.
//
// It starts with SUC's Jobs by node; node state, proof, halts and the
// budget's counts join it as they move here.
type View struct {
	// upgradeJobs is the list it was built from (BuiltFrom).
	upgradeJobs []*batchv1.Job
	// jobsByNode: every Job by its upgrade.cattle.io/node label ("" for
	// none), in list order.
	jobsByNode map[string][]*batchv1.Job
	// sucJobs: those that also name their Plan (SUCJobsFor).
	sucJobs map[string][]*batchv1.Job
}

// NewView works the view out from SUC's Jobs (the Jobs labelled
// upgrade.cattle.io/node the loader reads).
func NewView(upgradeJobs []*batchv1.Job) *View {
	v := &View{upgradeJobs: upgradeJobs, jobsByNode: make(map[string][]*batchv1.Job, len(upgradeJobs)), sucJobs: map[string][]*batchv1.Job{}}
	for _, j := range upgradeJobs {
		node := j.Labels[upgradev1.LabelNode]
		v.jobsByNode[node] = append(v.jobsByNode[node], j)
		if j.Labels[upgradev1.LabelPlan] != "" {
			v.sucJobs[node] = append(v.sucJobs[node], j)
		}
	}
	return v
}

// BuiltFrom says whether the view was built from exactly these Jobs
// (pointer for pointer): a review whose objects differ builds its own.
func (v *View) BuiltFrom(upgradeJobs []*batchv1.Job) bool {
	if len(v.upgradeJobs) != len(upgradeJobs) {
		return false
	}
	if len(upgradeJobs) == 0 || &v.upgradeJobs[0] == &upgradeJobs[0] {
		return true
	}
	for i := range upgradeJobs {
		if v.upgradeJobs[i] != upgradeJobs[i] {
			return false
		}
	}
	return true
}

// UpgradeJobsByNode are the Jobs by the node they upgrade: read only.
func (v *View) UpgradeJobsByNode() map[string][]*batchv1.Job { return v.jobsByNode }

// SUCJobsFor are SUC's Jobs for the node, by the Jobs' own labels
// (upgrade.cattle.io/node, upgrade.cattle.io/plan: SUC v0.20.1
// pkg/upgrade/job/job.go; it sets no owner reference, handle_upgrade.go's
// NoOwnerReference), whatever the node's hostname label or Plan now say.
// Read only.
func (v *View) SUCJobsFor(node string) []*batchv1.Job { return v.sucJobs[node] }
