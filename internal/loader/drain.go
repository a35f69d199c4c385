package loader

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// DrainTimeout bounds the drain check's live reads; a slower answer counts
// as unreadable (a warning, or with drainCheck.deny a refusal).
const DrainTimeout = 3 * time.Second

// maxDrainLists bounds the drain check's Pod listings in flight at once.
const maxDrainLists = 8

// ReadDrainFacts reads the Pods on each of nodes (podsOn: the webhook's
// listing its holder check shares) and lists, live, every
// PodDisruptionBudget: what the drain check (gate.DrainFacts) judges. Only
// a draining Plan's pending nodes are asked for (a wave): listed
// concurrently, with the PDBs, so the check waits for one round trip, not
// one per node (and joins the holder listings of the same nodes while they
// are in flight); an error names the first failing node in the given order.
func ReadDrainFacts(ctx context.Context, r client.Reader, nodes []string, podsOn func(context.Context, string) ([]corev1.Pod, error)) gate.DrainFacts {
	ctx, cancel := context.WithTimeout(ctx, DrainTimeout)
	defer cancel()
	pods := make([][]corev1.Pod, len(nodes))
	errs := make([]error, len(nodes))
	var (
		pdbs    policyv1.PodDisruptionBudgetList
		pdbsErr error
		wg      sync.WaitGroup
	)
	wg.Add(1)
	go func() { defer wg.Done(); pdbsErr = r.List(ctx, &pdbs) }()
	sem := make(chan struct{}, maxDrainLists)
	for i, n := range nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			pods[i], errs[i] = podsOn(ctx, n)
		}()
	}
	wg.Wait()
	out := gate.DrainFacts{Pods: make(map[string][]*corev1.Pod, len(nodes))}
	for i, n := range nodes {
		if errs[i] != nil {
			return gate.DrainFacts{Err: fmt.Errorf("list pods on node %s: %w", n, errs[i])}
		}
		for j := range pods[i] {
			out.Pods[n] = append(out.Pods[n], &pods[i][j])
		}
	}
	if pdbsErr != nil {
		return gate.DrainFacts{Err: fmt.Errorf("list poddisruptionbudgets.policy: %w", pdbsErr)}
	}
	for i := range pdbs.Items {
		out.PDBs = append(out.PDBs, &pdbs.Items[i])
	}
	return out
}
