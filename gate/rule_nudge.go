package gate

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// The Plan nudge (docs/rollout.md, "The wave's pace"): SUC v0.20.1 asks for
// a Plan again after a node's completion only through its rate-limited
// Enqueue, so after the gate held that completion the next node's Job waits
// for the Plan's backoff (up to 2 minutes). An update of the Plan object
// itself is queued at once. So when SUC's completion lands, the gate's
// leader sets one annotation of its own on the Plan; nothing else.

// AnnotationNudge is the gate's annotation on a Plan: the node whose
// completion it last answered, with the Plan's hash prefix. Its key holds
// "cattle.io/" on purpose: SUC v0.20.1 copies every other Plan label and
// annotation into its Jobs' pod template (pkg/upgrade/job/job.go), and
// wrangler's apply deletes and recreates a Job whose template changed
// (apply/reconcilers.go reconcileJob): any other key would make the nudge
// replace the Jobs of the Plan, a running upgrade's included.
const AnnotationNudge = "gpu-upgrade-gate.cattle.io/nudge"

var pathNudge = field.NewPath("metadata", "annotations").Key(AnnotationNudge)

// PlanNudge is one nudge to write: set AnnotationNudge on Plan to Value.
type PlanNudge struct {
	Plan  *upgradev1.Plan
	Value string
}

// CompletionNudges are the nudges a Node change calls for: each Plan of a
// SUC namespace whose plan label on the node became the Plan's
// status.latestHash (SUC's completion landed), not yet nudged for it. A
// Plan whose digest annotation hashes its annotations is left out: the
// nudge would change its hash and restart it (SUC's addToHashFromAnnotation).
func CompletionNudges(cfg *Config, plans []*upgradev1.Plan, old, cur *corev1.Node) []PlanNudge {
	if old == nil || cur == nil {
		return nil
	}
	var out []PlanNudge
	for _, p := range plans {
		key, hash := upgradev1.LabelPlanName(p.Name), p.Status.LatestHash
		if hash == "" || !slices.Contains(cfg.SUCNamespaces, p.Namespace) || cur.Labels[key] != hash || old.Labels[key] == hash || hashesAnnotations(p) {
			continue
		}
		v := nudgeValue(cur.Name, hash)
		if p.Annotations[AnnotationNudge] == v {
			continue
		}
		out = append(out, PlanNudge{Plan: p, Value: v})
	}
	return out
}

func nudgeValue(node, hash string) string {
	if len(hash) > 12 {
		hash = hash[:12]
	}
	return node + "/" + hash
}

// hashesAnnotations: an entry of the Plan's upgrade.cattle.io/digest
// annotation names its metadata or its annotations (SUC splits entries on
// dots, so it can name no annotation key of ours alone).
func hashesAnnotations(p *upgradev1.Plan) bool {
	for _, e := range strings.Split(p.Annotations[upgradev1.AnnotationDigest], ",") {
		e = strings.TrimSpace(e)
		if e == "metadata" || e == "metadata.annotations" {
			return true
		}
	}
	return false
}

// PlanNudgeRequest is a Plan write the nudge review judges (NudgeWrite).
type PlanNudgeRequest struct {
	// Operation is OpCreate or OpUpdate; Old is nil for a CREATE.
	Operation string
	Old, New  *upgradev1.Plan
	User      UserInfo
	// Self is the gate's own username (its ServiceAccount), "" when unknown.
	Self string
}

func (r PlanNudgeRequest) self() bool { return r.Self != "" && r.User.Name == r.Self }

// NudgeWrite says whether a Plan write is the nudge review's: the gate's
// own, or one that sets or changes AnnotationNudge. The gate's own write is
// judged by that review alone; anyone else's, when the review allows it,
// by the Plan's review as usual.
func NudgeWrite(req PlanNudgeRequest) bool {
	if req.self() {
		return true
	}
	v, ok := req.New.Annotations[AnnotationNudge]
	return ok && (req.Old == nil || req.Old.Annotations[AnnotationNudge] != v)
}

// DecidePlanNudge reviews a NudgeWrite: only the gate sets the nudge, and
// the gate changes nothing else of a Plan.
func DecidePlanNudge(cfg *Config, req PlanNudgeRequest) Decision {
	d := Decision{Object: "Plan " + req.New.Namespace + "/" + req.New.Name}
	var f findings
	r := &planNudgeReview{req: req}
	r.kinds, r.cfg, r.user = kindsPlanNudge, cfg, req.User
	applyTable(r, &f, &d)
	f.settle(&d)
	return d
}

type planNudgeReview struct {
	reviewBase
	req PlanNudgeRequest
}

// nudgeForgedRule (review-level, the nudge review).
func nudgeForgedRule(rv review, f *findings, _ *Decision) {
	r, ok := rv.(*planNudgeReview)
	if !ok {
		return
	}
	req := r.req
	if !req.self() {
		if NudgeWrite(req) {
			f.add(nudgeForged(fmt.Sprintf("%q sets it to %q", qualification.Clip(req.User.Name), qualification.Clip(req.New.Annotations[AnnotationNudge])), req.Self,
				"leave it out (removing it is allowed)"))
		}
		return
	}
	if changed := nudgeOthers(req); changed != "" {
		f.add(nudgeForged(fmt.Sprintf("the gate's own ServiceAccount %q writes %s", qualification.Clip(req.User.Name), changed), req.Self,
			"its spec, labels and other annotations are written by people"))
	}
}

// nudgeOthers names what a write changes besides the nudge, "" for nothing.
func nudgeOthers(req PlanNudgeRequest) string {
	if req.Operation == OpCreate || req.Old == nil {
		return "a new Plan"
	}
	old, cur := req.Old, req.New
	var out []string
	if !equality.Semantic.DeepEqual(old.Spec, cur.Spec) {
		out = append(out, "spec")
	}
	if keys := changedKeys(old.Labels, cur.Labels); len(keys) > 0 {
		out = append(out, "label "+qualification.Clip(strings.Join(keys, ",")))
	}
	keys := slices.DeleteFunc(changedKeys(old.Annotations, cur.Annotations), func(k string) bool { return k == AnnotationNudge })
	if len(keys) > 0 {
		out = append(out, "annotation "+qualification.Clip(strings.Join(keys, ",")))
	}
	if !slices.Equal(old.Finalizers, cur.Finalizers) {
		out = append(out, "finalizers")
	}
	if !equality.Semantic.DeepEqual(old.OwnerReferences, cur.OwnerReferences) {
		out = append(out, "ownerReferences")
	}
	return strings.Join(out, ", ")
}

// nudgeForged builds every NudgeForged blocker.
func nudgeForged(what, self, fix string) Blocker {
	if self == "" {
		self = "the gate's ServiceAccount"
	}
	return forbidden(CodeNudgeForged, "", pathNudge,
		"%s: annotation %s is the gate's alone (%s sets it on a Plan when SUC's completion of a node lands, so that SUC looks at the Plan again at once), and it writes nothing else of a Plan; %s",
		what, AnnotationNudge, qualification.Clip(self), fix)
}
