package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

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
	// The reads go out at once (a start waits for one round trip, not
	// three). The node's holders are always live (the read that closes the
	// race the guard is for: docs/performance.md, "GPU holders: how fresh,
	// and why"). The Node and the Plan come from the gate's informers when
	// the cached copy is provably fresh enough for this start (jobStepFacts),
	// else from the API server's watch cache no older than the gate's copy
	// (Facts.liveGet). The holders are listed for a GPU node only: with the
	// other reads when the gate's copy of the node is a GPU node or missing,
	// else only if the live Node turns out to be one (the CPU nodes of an
	// RKE2 Plan never wait for a listing). The other Plans, whose
	// status.applying the disruption budget counts, come from the gate's
	// cache (withPlan).
	var (
		cachedNode    corev1.Node
		cachedPlan    upgradev1.Plan
		node          *corev1.Node
		plan          = &upgradev1.Plan{}
		nodeErr, pErr error
		// pods are the live listings of the node's Pods: one feeds both
		// its holders and the drain check (nodePods).
		pods   = nodePods{}
		listed []string
		// gets are the Node and Plan reads the step waits for before it is
		// prepared; rest the reads it waits for before it decides (the
		// holder listing stays in flight while the step is prepared).
		gets, rest sync.WaitGroup
	)
	nodeRV, planRV := "", ""
	if s.Facts.cachedCopy(ctx, client.ObjectKey{Name: nodeName}, &cachedNode) {
		nodeRV = cachedNode.ResourceVersion
	}
	if planName != "" && s.Facts.cachedCopy(ctx, client.ObjectKey{Namespace: job.Namespace, Name: planName}, &cachedPlan) {
		planRV = cachedPlan.ResourceVersion
	}
	nodeCached, planCached := s.jobStepFacts(job, planName, nodeRV, &cachedNode, planRV, &cachedPlan)
	var panicked atomic.Pointer[error]
	read := func(wg *sync.WaitGroup, name string, f func()) {
		goRead(wg, &panicked, "reading "+name+": ", func() { tr.timed(name, f) })
	}
	listNode := func(name, node string) {
		if l := pods.add(node); l != nil {
			read(&rest, name, func() { s.Facts.listInto(ctx, node, l) })
		}
	}
	if nodeCached {
		node = &cachedNode
	} else {
		read(&gets, "node", func() { node, nodeErr = s.liveNode(ctx, nodeName, nodeRV) })
	}
	if nodeRV == "" || s.Config.IsGPUNode(&cachedNode) {
		listed = []string{nodeName}
		listNode("holders", nodeName)
	}
	switch {
	case planName == "":
		pErr = errors.New("the label " + upgradev1.LabelPlan + " is absent or empty")
	case planCached:
		plan = &cachedPlan
	default:
		read(&gets, "plan", func() {
			pErr = s.Facts.liveGet(ctx, client.ObjectKey{Namespace: job.Namespace, Name: planName}, plan, planRV)
		})
	}
	gets.Wait()
	tr.mark("reads")
	if p := panicked.Load(); p != nil {
		return gate.FactsUnavailable(object, *p), nil
	}
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
	// What the step reads once it knows the node go out at once too, while
	// the holder listing is still in flight (each was a round trip after
	// the last): the holders of a node only the live read showed to be a
	// GPU node, the etcd snapshots (a Plan moving the node's RKE2 minor),
	// and the drain check's PDBs (a draining Plan). The drain check reads
	// the node's Pods from the same listing as its holders (nodePods),
	// which is why any listing the step adds goes out before it. The etcd
	// snapshots and the PDBs keep their own freshness (loader); the step
	// takes every answer after all are in.
	holderNodes := listed
	if want := step.HolderNodes(); len(want) > 0 && !slices.Equal(want, listed) {
		// The live Node is a GPU node the cache did not know as one (or the
		// step wants other nodes): list its Pods now.
		holderNodes = want
		for _, n := range want {
			listNode("holders-after", n)
		}
	}
	etcd, drain := step.NeedsEtcdSnapshots(), step.DrainNodes()
	var (
		snaps      gate.EtcdSnapshots
		drainFacts gate.DrainFacts
	)
	if etcd {
		read(&rest, "etcd", func() { snaps = s.Facts.etcdSnapshots(ctx) })
	}
	if len(drain) > 0 {
		read(&rest, "drain", func() { drainFacts = loader.ReadDrainFacts(ctx, s.Facts.Live, drain, pods.podsOn(s.Facts)) })
	}
	rest.Wait()
	holders, herr := pods.holders(s.Config, holderNodes)
	if p := panicked.Load(); p != nil {
		return gate.FactsUnavailable(object, *p), nil
	}
	if etcd {
		step.SetEtcdSnapshots(snaps)
	}
	if len(drain) > 0 {
		step.SetDrainFacts(drainFacts)
	}
	d := step.Decide(holders, herr)
	tr.mark("decide")
	notePreconditions(d, etcd, len(drain) > 0)
	if !dryRun(req) && s.holds(WebhookJobs) {
		s.events.held("StartUpgrade", plan, node, d)
	}
	return d, nil
}

// jobStepFacts says whether the start may be judged on the gate's cached
// copies of its Node and its Plan (read only: shared with the cache)
// instead of GETs from the API server's watch cache. Each GET cost the
// start a round trip on the cores the API server shares (the Node and Plan
// GETs made the `reads` phase 3.7-4.9 ms against ~2.9 ms for the holder
// listing alone: docs/performance.md, "SUC's Job start"). A copy is used
// only where its lag behind the watch cache cannot let the start through
// on facts older than SUC's own:
//
//   - The Plan, when its status.latestHash is the hash SUC labelled this Job
//     with (upgradev1.LabelPlanName): SUC writes that status after reading
//     the spec it digested, so a cache holding that status holds that spec
//     or a newer one, the one this Job runs. Any other hash (the cache has
//     not seen SUC's status write yet, or a forged or missing label) reads
//     the Plan from the API server as before. Its status.applying may then
//     be an earlier write than the watch cache's, so only a serial Plan's
//     copy is used (spec.concurrency 1; ConcurrencyNotSerial refuses any
//     other at the Plan's write, but one written before the gate or in
//     audit mode reads live): its applying names this node, or, older, the
//     node SUC finished before it, which the budget can count as out
//     (refuse), never a node it misses (allow).
//   - The Node, when the copy is a GPU node: the start is then judged with
//     every rule and its holders are listed live (the race the guard is for
//     is the holders', closed there); every other fact the rules read about
//     this node (labels, cordon, conditions) they read about every other
//     node of the fleet from the same informer already (budget, halts,
//     wave), and a write of it within the informer's lag is concurrent with
//     the start and has its own review (webhook/jobs.md, "Freshness"). A
//     copy that is not a GPU node would let the start skip the rules, so it
//     is confirmed by the GET; and a missing copy is read, as before.
//
// Both need caches that are synced and watching (Facts.ready); otherwise
// the GETs are made and the review fails closed on the caches anyway.
func (s *Server) jobStepFacts(job *batchv1.Job, planName, nodeRV string, node *corev1.Node, planRV string, plan *upgradev1.Plan) (nodeCached, planCached bool) {
	if s.Facts.ready() != nil {
		return false, false
	}
	nodeCached = nodeRV != "" && s.Config.IsGPUNode(node)
	hash := job.Labels[upgradev1.LabelPlanName(planName)]
	planCached = planRV != "" && planName != "" && hash != "" && plan.Status.LatestHash == hash && plan.Spec.Concurrency <= 1
	return nodeCached, planCached
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
// (Facts.Cluster). When the cache holds this very version (the start was
// judged on the cached copy: jobStepFacts), the Cluster stays as built, so
// the fleet view built for it (halt detection's scope, the parsed
// selectors) serves the start too: swapping in an equal copy made every
// start build a view of its own.
func (s *Server) withPlan(cl *gate.Cluster, p *upgradev1.Plan) {
	i := slices.IndexFunc(cl.Plans, func(q *upgradev1.Plan) bool { return q.Namespace == p.Namespace && q.Name == p.Name })
	switch {
	case i >= 0 && p.ResourceVersion != "" && cl.Plans[i].ResourceVersion == p.ResourceVersion && cl.Plans[i].UID == p.UID:
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
