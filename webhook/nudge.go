package webhook

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// planNudger makes SUC look at a Plan again the moment its completion of a
// node lands (gate.CompletionNudges): SUC v0.20.1 asks for the Plan after a
// completion only through its rate-limited Enqueue, so the next node's Job
// would wait for the Plan's backoff (up to 2 minutes) after the gate held
// that completion; an update of the Plan itself is queued at once
// (docs/rollout.md, "The wave's pace"). It writes one annotation of the
// gate's, by merge patch; a nudge lost (a failed patch, a full queue, no
// leader) costs only the wait it would have saved.
type planNudger struct {
	nodes  cache.Informer
	plans  client.Reader
	writer client.Writer
	cfg    *gate.Config
	log    logr.Logger
}

// nodeChange is one Node update the nudger looks at.
type nodeChange struct{ old, cur *corev1.Node }

// NeedLeaderElection: one writer; every replica would write the same.
func (n *planNudger) NeedLeaderElection() bool { return true }

func (n *planNudger) Start(ctx context.Context) error {
	changes := make(chan nodeChange, 256)
	reg, err := n.nodes.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(o, c any) {
		old, ok1 := o.(*corev1.Node)
		cur, ok2 := c.(*corev1.Node)
		if !ok1 || !ok2 || !planLabelChanged(old, cur) {
			return
		}
		select {
		case changes <- nodeChange{old, cur}:
		default: // never hold the informer: SUC's own retry still comes
			n.log.Info("nudge queue full: SUC's own retry will move the wave", "node", cur.Name)
		}
	}})
	if err != nil {
		return err
	}
	defer func() { _ = n.nodes.RemoveEventHandler(reg) }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case c := <-changes:
			n.nudge(ctx, c)
		}
	}
}

var planLabelPrefix = upgradev1.LabelPlanName("")

// planLabelChanged: some plan.upgrade.cattle.io/ label differs (the only
// change a nudge follows), so the nudger reads the Plans only then.
func planLabelChanged(old, cur *corev1.Node) bool {
	for k, v := range cur.Labels {
		if strings.HasPrefix(k, planLabelPrefix) && old.Labels[k] != v {
			return true
		}
	}
	return false
}

func (n *planNudger) nudge(ctx context.Context, c nodeChange) {
	var list upgradev1.PlanList
	if err := n.plans.List(ctx, &list); err != nil {
		n.log.Error(err, "list Plans", "node", c.cur.Name)
		return
	}
	plans := make([]*upgradev1.Plan, len(list.Items))
	for i := range list.Items {
		plans[i] = &list.Items[i]
	}
	for _, nd := range gate.CompletionNudges(n.cfg, plans, c.old, c.cur) {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{gate.AnnotationNudge: nd.Value}}})
		if err == nil {
			p := &upgradev1.Plan{}
			p.Namespace, p.Name = nd.Plan.Namespace, nd.Plan.Name
			err = n.writer.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch))
		}
		if err != nil {
			n.log.Error(err, "nudge not written: SUC's own retry will move the wave", "plan", nd.Plan.Namespace+"/"+nd.Plan.Name, "node", c.cur.Name)
			continue
		}
		n.log.V(1).Info("nudged", "plan", nd.Plan.Namespace+"/"+nd.Plan.Name, "node", c.cur.Name, "value", nd.Value)
	}
}
