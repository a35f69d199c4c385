package webhook

import (
	"context"
	"fmt"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
)

// decidePlan reviews a Plan CREATE or UPDATE (contract: plans.md).
func (s *Server) decidePlan(ctx context.Context, req admission.Request) (gate.Decision, error) {
	plan, err := upgradev1.DecodePlan(req.Object.Raw)
	if err != nil {
		return gate.Decision{}, fmt.Errorf("object: %w", err)
	}
	var old *upgradev1.Plan
	if req.Operation == admissionv1.Update {
		if old, err = upgradev1.DecodePlan(req.OldObject.Raw); err != nil {
			return gate.Decision{}, fmt.Errorf("oldObject: %w", err)
		}
	}
	if !slices.Contains(s.Config.SUCNamespaces, plan.Namespace) {
		// The webhook configuration sends only SUC namespaces; SUC ignores
		// Plans anywhere else, so such a Plan is inert.
		return gate.Decision{Allowed: true, Object: "Plan " + plan.Namespace + "/" + plan.Name,
			Warnings: []string{fmt.Sprintf("namespace %s is not a SUC namespace (%v): SUC will not run this Plan", plan.Namespace, s.Config.SUCNamespaces)}}, nil
	}
	// The gate's own nudge (and anyone's write of it) is judged by the
	// nudge review alone: the gate writes that one annotation, nothing the
	// Plan's rules read (docs/rollout.md, "The wave's pace").
	if nr := (gate.PlanNudgeRequest{Operation: string(req.Operation), Old: old, New: plan, User: userOf(req), Self: s.Self}); gate.NudgeWrite(nr) {
		if d := gate.DecidePlanNudge(s.Config, nr); !d.Allowed || nr.User.Name == s.Self {
			return d, nil
		}
	}
	tr := traceOf(ctx)
	tr.mark("decode")
	cl, err := s.Facts.Cluster(ctx)
	if err != nil {
		return gate.FactsUnavailable("Plan "+plan.Namespace+"/"+plan.Name, err), nil
	}
	tr.mark("facts")
	r := gate.PreparePlan(s.Config, cl, gate.PlanRequest{Operation: string(req.Operation), Plan: plan, OldPlan: old, User: userOf(req), Now: s.now()})
	tr.mark("engine")
	// The holder listing is a round trip to the API server: the holder row
	// is the table's last, so every other rule runs while it is in flight.
	listed := s.listHolders(ctx, tr, r.HolderNodes())
	// Only a Plan that moves a GPU node's RKE2 minor reads the
	// ETCDSnapshotFiles, live: a handful of objects, and no informer for a
	// kind most clusters do not serve. A draining Plan's pending nodes: can
	// SUC's drain of them finish? Both are read while the holder listing is
	// in flight, and at the same time as each other (each was a round trip
	// after the last).
	etcd, drain := r.NeedsEtcdSnapshots(), r.DrainNodes()
	var (
		snaps      gate.EtcdSnapshots
		drainFacts gate.DrainFacts
	)
	if etcd || len(drain) > 0 {
		if err := concurrently(
			func() {
				if etcd {
					tr.timed("etcd", func() { snaps = s.Facts.requestEtcdSnapshots(ctx) })
				}
			},
			func() {
				if len(drain) > 0 {
					tr.timed("drain", func() { drainFacts = loader.ReadDrainFacts(ctx, s.Facts.Live, drain, s.Facts.SharedPods) })
				}
			},
		); err != nil {
			return gate.FactsUnavailable("Plan "+plan.Namespace+"/"+plan.Name, err), nil
		}
	}
	if etcd {
		r.SetEtcdSnapshots(snaps)
	}
	if len(drain) > 0 {
		r.SetDrainFacts(drainFacts)
	}
	d := r.DecideListing(func() (map[string][]gate.Holder, error) {
		tr.mark("rules")
		holders, herr := listed()
		tr.mark("wait")
		return holders, herr
	})
	tr.mark("decide")
	notePreconditions(d, etcd, len(drain) > 0)
	return d, nil
}

// listHolders starts the request check's listing of nodes' GPU holders
// (Facts.RequestHolders) and returns the wait for its answer; its own time
// is traced as holders.
func (s *Server) listHolders(ctx context.Context, tr *reviewTrace, nodes []string) func() (map[string][]gate.Holder, error) {
	if len(nodes) == 0 {
		return func() (map[string][]gate.Holder, error) { return nil, nil }
	}
	type listing struct {
		holders map[string][]gate.Holder
		err     error
	}
	done := make(chan listing, 1) // the goroutine never waits on the review
	go tr.timed("holders", func() {
		var l listing
		defer func() {
			// Out of the handler's recover: a panic fails the review closed.
			if p := recover(); p != nil {
				l = listing{err: fmt.Errorf("panic: %v [recovered]", p)}
			}
			done <- l
		}()
		l.holders, l.err = s.Facts.RequestHolders(ctx, nodes)
	})
	return func() (map[string][]gate.Holder, error) {
		l := <-done
		return l.holders, l.err
	}
}
