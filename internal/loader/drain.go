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

// ReadDrainFacts lists, live, the Pods on each of nodes (by spec.nodeName)
// and every PodDisruptionBudget: what the drain check (gate.DrainFacts)
// judges. Only a draining Plan's pending nodes are asked for (a wave).
func ReadDrainFacts(ctx context.Context, r client.Reader, nodes []string) gate.DrainFacts {
	ctx, cancel := context.WithTimeout(ctx, DrainTimeout)
	defer cancel()
	out := gate.DrainFacts{Pods: make(map[string][]*corev1.Pod, len(nodes))}
	for _, n := range nodes {
		var pods corev1.PodList
		if err := r.List(ctx, &pods, client.MatchingFields{"spec.nodeName": n}); err != nil {
			return gate.DrainFacts{Err: fmt.Errorf("list pods on node %s: %w", n, err)}
		}
		for i := range pods.Items {
			out.Pods[n] = append(out.Pods[n], &pods.Items[i])
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
