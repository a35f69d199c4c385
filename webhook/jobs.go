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
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
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
	if user := userOf(req); !gate.IsSUC(s.Config, user) {
		// Anyone but SUC: a Job with SUC's labels is SUC's to write
		// (SUCJobForged); the match conditions send no other.
		return gate.DecideSUCJobWrite(s.Config, gate.SUCJobWriteRequest{Operation: string(req.Operation), Job: job, Old: old, User: user}), nil
	}
	if !gate.JobStarts(old, job) {
		// The match conditions send only starts; anything else never waits.
		return gate.Decision{Allowed: true, Object: object}, nil
	}
	nodeName, planName := job.Labels[upgradev1.LabelNode], job.Labels[upgradev1.LabelPlan]
	if nodeName == "" {
		return gate.StepFactsMissing(object, "", "the Job's node (label "+upgradev1.LabelNode+")", pathJobNode, errors.New("the label is absent or empty")), nil
	}
	// The live reads go out at once (a start waits for one round trip, not
	// three): the Node and the Plan, from the API server's watch cache no
	// older than the gate's cached copy of each (Facts.liveGet: an etcd
	// read cost 5-8 ms), and the node's holders, which the step needs only
	// for a GPU node: listed with them when the gate's copy of the node is
	// a GPU node or missing, else only if the live Node turns out to be
	// one (the CPU nodes of an RKE2 Plan never wait for a listing). The
	// other Plans, whose status.applying the disruption budget counts,
	// come from the gate's cache (withPlan).
	var (
		cachedNode    corev1.Node
		cachedPlan    upgradev1.Plan
		node          *corev1.Node
		plan          = &upgradev1.Plan{}
		nodeErr, pErr error
		holders       map[string][]gate.Holder
		listed        []string
		herr          error
		wg            sync.WaitGroup
	)
	nodeRV, planRV := "", ""
	if s.Facts.cachedCopy(ctx, client.ObjectKey{Name: nodeName}, &cachedNode) {
		nodeRV = cachedNode.ResourceVersion
	}
	if planName != "" && s.Facts.cachedCopy(ctx, client.ObjectKey{Namespace: job.Namespace, Name: planName}, &cachedPlan) {
		planRV = cachedPlan.ResourceVersion
	}
	read := func(name string, f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); tr.timed(name, f) }()
	}
	read("node", func() { node, nodeErr = s.liveNode(ctx, nodeName, nodeRV) })
	if nodeRV == "" || s.Config.IsGPUNode(&cachedNode) {
		listed = []string{nodeName}
		read("holders", func() { holders, herr = s.Facts.Holders(ctx, listed) })
	}
	read("plan", func() {
		if planName == "" {
			pErr = errors.New("the label " + upgradev1.LabelPlan + " is absent or empty")
			return
		}
		pErr = s.Facts.liveGet(ctx, client.ObjectKey{Namespace: job.Namespace, Name: planName}, plan, planRV)
	})
	wg.Wait()
	tr.mark("reads")
	if nodeErr != nil {
		return gate.StepFactsMissing(object, nodeName, "the Job's node "+nodeName, pathJobNode, nodeErr), nil
	}
	if pErr != nil {
		return gate.StepFactsMissing(object, nodeName, fmt.Sprintf("the Job's Plan %s/%s (for node %s)", job.Namespace, planName, nodeName), pathJobPlan, pErr), nil
	}
	// The engine judges a GPU node's start on the cluster's facts; a CPU
	// node's is not its business (gate.PrepareSUCStep reads no facts for
	// it), so it waits only for the caches to be ready.
	var cl *gate.Cluster
	if s.Config.IsGPUNode(node) {
		if cl, err = s.Facts.Cluster(ctx); err != nil {
			return gate.FactsUnavailable(object, err), nil
		}
		s.withPlan(cl, plan)
	} else if err := s.Facts.ready(); err != nil {
		return gate.FactsUnavailable(object, err), nil
	}
	tr.mark("facts")
	step := gate.PrepareSUCStep(s.Config, cl, gate.SUCStepRequest{Object: object, Plan: plan, Node: node, User: userOf(req), Now: s.now()})
	etcd := step.NeedsEtcdSnapshots()
	if etcd {
		step.SetEtcdSnapshots(loader.ReadEtcdSnapshots(ctx, s.Facts.Live))
	}
	drain := step.DrainNodes()
	if len(drain) > 0 {
		step.SetDrainFacts(loader.ReadDrainFacts(ctx, s.Facts.Live, drain, s.Facts.SharedPods))
	}
	if want := step.HolderNodes(); len(want) > 0 && !slices.Equal(want, listed) {
		// The live Node is a GPU node the cache did not know as one (or the
		// step wants other nodes): list its holders now.
		tr.timed("holders-after", func() { holders, herr = s.Facts.Holders(ctx, want) })
	}
	d := step.Decide(holders, herr)
	tr.mark("decide")
	notePreconditions(d, etcd, len(drain) > 0)
	if !dryRun(req) && s.holds(WebhookJobs) {
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
// Plans' Jobs and cordons, from the same caches) have anyway. The Plans and
// selectors are copied first: the cluster's slices are every review's
// (Facts.Cluster).
func (s *Server) withPlan(cl *gate.Cluster, p *upgradev1.Plan) {
	i := slices.IndexFunc(cl.Plans, func(q *upgradev1.Plan) bool { return q.Namespace == p.Namespace && q.Name == p.Name })
	switch {
	case i >= 0:
		cl.Plans, cl.PlanSelectors = slices.Clone(cl.Plans), slices.Clone(cl.PlanSelectors)
		cl.Plans[i] = p
		if i < len(cl.PlanSelectors) {
			cl.PlanSelectors[i] = nil // the engine converts this version's own
		}
	case slices.Contains(s.Config.SUCNamespaces, p.Namespace):
		cl.Plans = append(slices.Clip(cl.Plans), p)
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
