package gate

import (
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// The gate reads a Job in a SUC namespace labelled upgrade.cattle.io/plan
// and upgrade.cattle.io/node as SUC's upgrade of that node (nodestate.go:
// its cordon is SUC's, the node is upgrading, its failure halts the
// rollout). SUC sets no owner reference on its Jobs, so those labels are
// all that names them, and whoever may create Jobs in SUC's namespace could
// write them. Who wrote a Job is known only at admission: the Job webhook
// refuses such a Job written by anyone but SUC (issue 22).

// SUCJobWriteRequest is a Job CREATE or UPDATE in a SUC namespace that
// carries SUC's labels (the webhook sends only those).
type SUCJobWriteRequest struct {
	// Operation is OpCreate or OpUpdate; Old is nil for a CREATE.
	Operation string
	Job, Old  *batchv1.Job
	User      UserInfo
}

// IsSUC says whether user is SUC: a ServiceAccount of a SUC namespace.
func IsSUC(cfg *Config, user UserInfo) bool { return isSUC(cfg, user) }

// DecideSUCJobWrite reviews a write of a Job carrying SUC's labels.
func DecideSUCJobWrite(cfg *Config, req SUCJobWriteRequest) Decision {
	d := Decision{Object: "Job " + req.Job.Namespace + "/" + req.Job.Name}
	var f findings
	r := &sucJobReview{req: req}
	r.kinds, r.cfg, r.user = kindsSUCJob, cfg, req.User
	applyTable(r, &f, &d)
	f.settle(&d)
	return d
}

type sucJobReview struct {
	reviewBase
	req SUCJobWriteRequest
}

// sucJobForgedRule (review-level, Job writes): a Job in a SUC namespace
// with SUC's plan or node label is created, relabelled or started by SUC
// only. A write that changes neither its labels nor its start (the garbage
// collector's finalizers, an annotation) is not this rule's business.
func sucJobForgedRule(rv review, f *findings, _ *Decision) {
	r, ok := rv.(*sucJobReview)
	if !ok {
		return
	}
	j, old := r.req.Job, r.req.Old
	// The labels before the write count too: stripping them from SUC's Job
	// would hide it (a failed one's halt with it).
	shown := j
	if !hasSUCLabels(j) {
		shown = old
	}
	if !slices.Contains(r.cfg.SUCNamespaces, j.Namespace) || !hasSUCLabels(shown) || isSUC(r.cfg, r.req.User) {
		return
	}
	if old != nil && maps.Equal(old.Labels, j.Labels) && !JobStarts(old, j) {
		return
	}
	f.add(sucJobForged(shown, r.req.User.Name))
}

// hasSUCLabels: j carries SUC's plan or node label.
func hasSUCLabels(j *batchv1.Job) bool {
	return j != nil && (j.Labels[upgradev1.LabelPlan] != "" || j.Labels[upgradev1.LabelNode] != "")
}

// sucJobForged builds every SUCJobForged blocker.
func sucJobForged(j *batchv1.Job, user string) Blocker {
	return forbidden(CodeSUCJobForged, "", field.NewPath("metadata", "labels"),
		"Job %s/%s carries SUC's labels (%s=%q, %s=%q) but is written by %q, not by SUC (a ServiceAccount of a SUC namespace): the gate reads such a Job as SUC's upgrade of that node (who cordoned it, whether it is upgrading, whether it failed), so only SUC creates, relabels or starts one; to upgrade a node write a Plan and let SUC create its Job, and name Jobs of your own without SUC's labels (webhook/jobs.md)",
		j.Namespace, qualification.Clip(j.Name), upgradev1.LabelPlan, qualification.Clip(j.Labels[upgradev1.LabelPlan]), upgradev1.LabelNode, qualification.Clip(j.Labels[upgradev1.LabelNode]), qualification.Clip(user))
}
