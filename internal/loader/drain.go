package loader

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// DrainTimeout bounds the drain check's live reads; a slower answer counts
// as unreadable (a warning, or with drainCheck.deny a refusal).
const DrainTimeout = 3 * time.Second

// ReadDrainFacts reads the Pods on each of nodes (podsOn: the webhook's
// listing its holder check shares) and lists, live, every
// PodDisruptionBudget: what the drain check (gate.DrainFacts) judges. Only
// a draining Plan's pending nodes are asked for (a wave).
func ReadDrainFacts(ctx context.Context, r client.Reader, nodes []string, podsOn func(context.Context, string) ([]corev1.Pod, error)) gate.DrainFacts {
	ctx, cancel := context.WithTimeout(ctx, DrainTimeout)
	defer cancel()
	out := gate.DrainFacts{Pods: make(map[string][]*corev1.Pod, len(nodes))}
	for _, n := range nodes {
		pods, err := podsOn(ctx, n)
		if err != nil {
			return gate.DrainFacts{Err: fmt.Errorf("list pods on node %s: %w", n, err)}
		}
		for i := range pods {
			out.Pods[n] = append(out.Pods[n], &pods[i])
		}
	}
	var pdbs policyv1.PodDisruptionBudgetList
	if err := r.List(ctx, &pdbs); err != nil {
		return gate.DrainFacts{Err: fmt.Errorf("list poddisruptionbudgets.policy: %w", err)}
	}
	for i := range pdbs.Items {
		out.PDBs = append(out.PDBs, &pdbs.Items[i])
	}
	return out
}
