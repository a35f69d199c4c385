package gate

import (
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
)

// The per-node guard: the one write that starts a node's upgrade, judged
// with the facts of exactly that node at that moment. Requests (a Plan
// written, a label changed) get the early check; this step is the guarantee,
// whatever path brought the node into the Plan (webhook/jobs.md).

// JobRuns says whether a Job's spec lets the Job controller start pods
// (fleet.JobRuns).
func JobRuns(spec batchv1.JobSpec) bool { return fleet.JobRuns(spec) }

// JobStarts says whether a Job write starts it: created running, or moved
// from not running to running. Every other Job write is none of the gate's
// business (the webhook configuration's match conditions send only these).
func JobStarts(old, job *batchv1.Job) bool {
	return JobRuns(job.Spec) && (old == nil || !JobRuns(old.Spec))
}

// SUCStepRequest is SUC about to start its upgrade Job for one node. The
// adapter reads the Plan and the Node live (not from caches), so the rules
// see what holds now; the rest of Cluster (records, versions) comes from the
// caches.
type SUCStepRequest struct {
	// Object names the write under review, e.g. "Job system-upgrade/apply-…".
	Object string
	Plan   *upgradev1.Plan
	Node   *corev1.Node
	User   UserInfo
	Now    time.Time
}

// SUCStep is the Plan's review restricted to the Job's node
// (PrepareNodeStep), on the live Node, with no exemption.
type SUCStep struct {
	object, node, plan string
	review             *PlanReview // nil: not a GPU node
}

// PrepareSUCStep judges req.Plan for req.Node. Exemptions never apply: the
// writer is SUC, and what exempts a request (who wrote the Plan, its
// labels) says nothing about the node now. cl is not read when req.Node is
// not a GPU node (nil then allowed: the gate does not judge that start).
func PrepareSUCStep(cfg *Config, cl *Cluster, req SUCStepRequest) *SUCStep {
	s := &SUCStep{object: req.Object, node: req.Node.Name, plan: req.Plan.Namespace + "/" + req.Plan.Name}
	if !cfg.IsGPUNode(req.Node) {
		return s
	}
	strict := *cfg
	strict.Exemptions = nil
	live := cl // the cache holds this very version of the Node (holdsVersion)
	if !cl.holdsVersion(cfg, req.Node) {
		live = cl.withNodes(cfg, req.Node)
	}
	s.review = PrepareNodeStep(&strict, live, PlanRequest{Plan: req.Plan, User: req.User, Now: req.Now}, req.Node.Name)
	s.review.object, s.review.sucStep = req.Object, true
	s.review.kinds = kindsSUCStep
	return s
}

// HolderNodes is the node, when its holders matter.
func (s *SUCStep) HolderNodes() []string {
	if s.review == nil {
		return nil
	}
	return s.review.HolderNodes()
}

// Decide applies the Plan's rules to the node; each blocker names the Plan.
func (s *SUCStep) Decide(holders map[string][]Holder, holdersErr error) Decision {
	switch {
	case s.review == nil:
		return Decision{Allowed: true, Object: s.object, Nodes: []string{s.node},
			Warnings: []string{fmt.Sprintf("node %s is not a GPU node; the gate does not judge its upgrade", s.node)}}
	case s.review.exemption == "" && s.review.selErr == nil && len(s.review.gpu) == 0:
		// SUC chose the node, but the Plan no longer selects it as the node
		// is now: never start what was not judged (SUC deletes such a Job
		// as out of turn on its own).
		d := StepFactsMissing(s.object, s.node, fmt.Sprintf("node %s in the Plan's selection", s.node), pathSelector,
			errors.New("its labels no longer match the nodeSelector, the kubernetes.io/hostname label or the opt-out SUC selected it by"))
		d.Blockers[0].Plan = s.plan
		return d
	}
	d := s.review.Decide(holders, holdersErr)
	for i := range d.Blockers {
		d.Blockers[i].Plan = s.plan
	}
	d.Nodes = []string{s.node}
	return d
}

// StepFactsMissing refuses a per-node step whose facts cannot be read: the
// node's upgrade waits (its controller retries) rather than start unjudged.
// node is empty when the write does not say which node it is for.
func StepFactsMissing(object, node, fact string, path *field.Path, err error) Decision {
	d := Decision{Object: object, Blockers: []Blocker{factsMissing(node, path, fact, fromAPI, err).formatted()}}
	if node != "" {
		d.Nodes = []string{node}
	}
	return d
}
