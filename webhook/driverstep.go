package webhook

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// decideDriverStep reviews the move of a node's driver upgrade state into
// a reload state, the GPU Operator's per-node step (contract: driverstep.md).
// The match conditions send nothing else; every fact is read for this node,
// now: the rollout and the nodes mid reload live, its holders live.
func (s *Server) decideDriverStep(ctx context.Context, req admission.Request) (gate.Decision, error) {
	n, old, err := decodeNodePair(req)
	if err != nil {
		return gate.Decision{}, err
	}
	st := gate.DriverStep{Node: n, OldState: old.Labels[gate.LabelDriverUpgradeState], NewState: n.Labels[gate.LabelDriverUpgradeState], User: userOf(req), Now: s.now()}
	if !gate.StartsDriverReload(st.OldState, st.NewState) {
		return gate.Decision{Allowed: true, Object: "Node " + n.Name}, nil
	}
	cl, err := s.Facts.Cluster(ctx)
	if err != nil {
		return gate.FactsUnavailable("Node "+n.Name, err), nil
	}
	// The live reads go out in two rounds of concurrent reads instead of
	// one after another (each is a round trip; their freshness is each
	// read's own, unchanged): what the operator rolls out and the nodes mid
	// reload, which the step needs to know its nodes; then the operator's
	// own rollout and the holders (operatorAndHolders).
	var inFlightErr error
	if err := concurrently(
		func() { st.Rollout = s.rolloutFor(ctx, n) },
		func() { st.InFlight, inFlightErr = s.inFlight(ctx) },
	); err != nil {
		return gate.FactsUnavailable("Node "+n.Name, err), nil
	}
	if inFlightErr != nil && st.Rollout.Missing == "" {
		st.Rollout.Missing, st.Rollout.MissingErr = "the nodes mid driver reload", inFlightErr
	}
	r := gate.PrepareDriverStep(s.Config, cl, st)
	checked, holders, herr, err := s.operatorAndHolders(ctx, r, s.Facts.Holders)
	if err != nil {
		return gate.FactsUnavailable("Node "+n.Name, err), nil
	}
	d := r.Decide(holders, herr)
	if checked {
		notePrecondition(preconditionOperatorRollout, d, gate.CodeOperatorRolloutUnfinished)
	}
	return d, nil
}

// concurrently runs each read on its own goroutine and returns when all
// have: an error only when one panicked (goRead).
func concurrently(reads ...func()) error {
	var (
		wg       sync.WaitGroup
		panicked atomic.Pointer[error]
	)
	for _, read := range reads {
		goRead(&wg, &panicked, "", read)
	}
	wg.Wait()
	if p := panicked.Load(); p != nil {
		return *p
	}
	return nil
}

// goRead runs read on its own goroutine, counted in wg. Its panic is out
// of the handler's recover: kept in panicked (the first one, prefixed by
// what), so the review fails closed instead of the process.
func goRead(wg *sync.WaitGroup, panicked *atomic.Pointer[error], what string, read func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() {
			if p := recover(); p != nil {
				err := fmt.Errorf("%spanic: %v [recovered]", what, p)
				panicked.CompareAndSwap(nil, &err)
			}
		}()
		read()
	}()
}

// rolloutFor finds what the operator rolls out to node n: with
// spec.driver.useNvidiaDriverCRD the NVIDIADriver whose nodeSelector selects
// it (else the default one), otherwise the ClusterPolicy's driver.
func (s *Server) rolloutFor(ctx context.Context, n *corev1.Node) gate.DriverRollout {
	cp, err := s.liveClusterPolicy(ctx)
	switch {
	case err != nil:
		return gate.DriverRollout{Missing: "the ClusterPolicy", MissingErr: err}
	case cp == nil:
		return gate.DriverRollout{Missing: "the ClusterPolicy (none exists)"}
	}
	ro := gate.DriverRollout{Policy: upgradePolicy(cp), Object: "ClusterPolicy " + cp.GetName(), Annotations: cp.GetAnnotations()}
	ro.DCGM, ro.DCGMPath = imageVersion(cp, "spec", "dcgmExporter")
	ro.Driver, ro.DriverPath = driverVersion(cp, "spec", "driver")
	if useCRD, _, _ := unstructured.NestedBool(cp.Object, "spec", "driver", "useNvidiaDriverCRD"); useCRD {
		nd, missing, err := s.nvidiaDriverFor(ctx, n)
		if missing != "" {
			return gate.DriverRollout{Missing: missing, MissingErr: err}
		}
		ro.Object, ro.Annotations = "NVIDIADriver "+nd.GetName(), nd.GetAnnotations()
		ro.Driver, ro.DriverPath = driverVersion(nd, "spec")
	}
	if ro.Driver == "" {
		ro.Missing = fmt.Sprintf("the driver version %s rolls out (%s, or a tag on its image)", ro.Object, ro.DriverPath)
	}
	return ro
}

func (s *Server) nvidiaDriverFor(ctx context.Context, n *corev1.Node) (*unstructured.Unstructured, string, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(NVIDIADriverGVK.GroupVersion().WithKind("NVIDIADriverList"))
	if err := s.Facts.Live.List(ctx, list); err != nil {
		return nil, "the NVIDIADrivers", fmt.Errorf("list nvidiadrivers.nvidia.com: %w", err)
	}
	var selecting, defaults []string
	byName := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		nd := &list.Items[i]
		sel, err := nodeSelector(nd)
		if err != nil {
			return nil, fmt.Sprintf("the nodeSelector of NVIDIADriver %s (%v)", nd.GetName(), err), nil
		}
		if isDefault, _, _ := unstructured.NestedBool(nd.Object, "spec", "default"); isDefault {
			defaults = append(defaults, nd.GetName())
		} else if labels.SelectorFromSet(sel).Matches(labels.Set(n.Labels)) {
			selecting = append(selecting, nd.GetName())
		}
		byName[nd.GetName()] = nd
	}
	if len(selecting) == 0 {
		selecting = defaults
	}
	switch len(selecting) {
	case 1:
		return byName[selecting[0]], "", nil
	case 0:
		return nil, "the NVIDIADriver that drives node " + n.Name + " (none selects it)", nil
	}
	return nil, "the NVIDIADriver that drives node " + n.Name + " (" + strings.Join(selecting, " and ") + " all select it)", nil
}

// inFlight lists, live, the nodes out for their driver upgrade (a state
// label other than the queue and done): the operator waits for its own
// cache after each state write, so a live list sees the previous node's step.
func (s *Server) inFlight(ctx context.Context) ([]*corev1.Node, error) {
	has, err := labels.NewRequirement(gate.LabelDriverUpgradeState, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	notOut, err := labels.NewRequirement(gate.LabelDriverUpgradeState, selection.NotIn, gate.DriverStatesNotOut)
	if err != nil {
		return nil, err
	}
	var list corev1.NodeList
	if err := s.Facts.Live.List(ctx, &list, client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*has, *notOut)}); err != nil {
		return nil, fmt.Errorf("list Nodes: %w", err)
	}
	out := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}
