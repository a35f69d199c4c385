package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

var (
	pathJobNode = field.NewPath("metadata", "labels").Key(upgradev1.LabelNode)
	pathJobPlan = field.NewPath("metadata", "labels").Key(upgradev1.LabelPlan)
)

// decideJob reviews the write that starts SUC's upgrade Job for one node
// (contract: jobs.md): the Plan's rules applied to that node, on the Plan
// and the Node read live.
func (s *Server) decideJob(ctx context.Context, req admission.Request) (gate.Decision, error) {
	job, err := decodeJob(req.Object.Raw)
	if err != nil {
		return gate.Decision{}, fmt.Errorf("object: %w", err)
	}
	var old *batchv1.Job
	if req.Operation == admissionv1.Update {
		if old, err = decodeJob(req.OldObject.Raw); err != nil {
			return gate.Decision{}, fmt.Errorf("oldObject: %w", err)
		}
	}
	tr := traceOf(ctx)
	tr.mark("decode")
	object := "Job " + job.Namespace + "/" + job.Name
	if !gate.JobStarts(old, job) {
		// The match conditions send only starts; anything else never waits.
		return gate.Decision{Allowed: true, Object: object}, nil
	}
	nodeName, planName := job.Labels[upgradev1.LabelNode], job.Labels[upgradev1.LabelPlan]
	if nodeName == "" {
		return gate.StepFactsMissing(object, "", "the Job's node (label "+upgradev1.LabelNode+")", pathJobNode, errors.New("the label is absent or empty")), nil
	}
	// The three live reads go out at once (a start waits for one round
	// trip, not three): the Node, the Plan, and the node's holders, which
	// the step needs whenever the node is a GPU node. The other Plans, whose
	// status.applying the disruption budget counts, come from the gate's
	// cache (withPlan).
	var (
		node          *corev1.Node
		plan          = &upgradev1.Plan{}
		nodeErr, pErr error
		holders       map[string][]gate.Holder
		herr          error
		wg            sync.WaitGroup
	)
	wg.Add(3)
	read := func(name string, f func()) { go func() { defer wg.Done(); tr.timed(name, f) }() }
	read("node", func() { node, nodeErr = s.liveNode(ctx, nodeName) })
	read("holders", func() { holders, herr = s.Facts.Holders(ctx, []string{nodeName}) })
	read("plan", func() {
		if planName == "" {
			pErr = errors.New("the label " + upgradev1.LabelPlan + " is absent or empty")
			return
		}
		pErr = s.Facts.Live.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: planName}, plan)
	})
	wg.Wait()
	tr.mark("reads")
	if nodeErr != nil {
		return gate.StepFactsMissing(object, nodeName, "the Job's node "+nodeName, pathJobNode, nodeErr), nil
	}
	if pErr != nil {
		return gate.StepFactsMissing(object, nodeName, fmt.Sprintf("the Job's Plan %s/%s (for node %s)", job.Namespace, planName, nodeName), pathJobPlan, pErr), nil
	}
	cl, err := s.Facts.Cluster(ctx)
	if err != nil {
		return gate.FactsUnavailable(object, err), nil
	}
	tr.mark("facts")
	s.withPlan(cl, plan)
	step := gate.PrepareSUCStep(s.Config, cl, gate.SUCStepRequest{Object: object, Plan: plan, Node: node, User: userOf(req), Now: s.now()})
	if want := step.HolderNodes(); !slices.Equal(want, []string{nodeName}) {
		holders, herr = s.Facts.Holders(ctx, want)
	}
	d := step.Decide(holders, herr)
	tr.mark("decide")
	if !dryRun(req) {
		s.events.held("StartUpgrade", plan, node, d)
	}
	return d, nil
}

// withPlan puts the Job's Plan, read from etcd a moment ago, in place of
// the cache's copy of it (added when the cache did not have it yet). The
// other Plans' status.applying, which the budget counts, is the cache's: a
// live list of the SUC namespaces' Plans cost each start ~40 ms at the
// median (a CRD list of 50 Plans, consistent or from the watch cache
// alike; docs/performance.md, "SUC's Job start") for a freshness of
// the informer's lag, a few ms, which the budget's other facts (the other
// Plans' Jobs and cordons, from the same caches) have anyway.
func (s *Server) withPlan(cl *gate.Cluster, p *upgradev1.Plan) {
	i := slices.IndexFunc(cl.Plans, func(q *upgradev1.Plan) bool { return q.Namespace == p.Namespace && q.Name == p.Name })
	switch {
	case i >= 0:
		cl.Plans[i] = p
		if i < len(cl.PlanSelectors) {
			cl.PlanSelectors[i] = nil // the engine converts this version's own
		}
	case slices.Contains(s.Config.SUCNamespaces, p.Namespace):
		cl.Plans = append(cl.Plans, p)
	}
}

func dryRun(req admission.Request) bool { return req.DryRun != nil && *req.DryRun }

// decodeJob decodes a review's Job and refuses a body of another kind.
func decodeJob(raw []byte) (*batchv1.Job, error) {
	job := &batchv1.Job{}
	if err := json.Unmarshal(raw, job); err != nil {
		return nil, err
	}
	if job.APIVersion != batchv1.SchemeGroupVersion.String() || job.Kind != "Job" {
		return nil, fmt.Errorf("body is apiVersion %q kind %q, expected batch/v1 Job", job.APIVersion, job.Kind)
	}
	return job, nil
}
