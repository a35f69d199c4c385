//go:build e2e

package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/controlplane"
)

// TestRecoveryPlanThroughAPIServer: recovery-plan --kubeconfig against a
// real kube-apiserver serving resource.k8s.io/v1 prints the candidate only
// when all four seed conditions hold, one variant per condition missing. No
// DaemonSet controller, kubelet or DRA driver runs: the test writes the
// DaemonSet's status, the plugin Pods (owned by the DaemonSet's real UID)
// and their Ready condition, the Nodes' Ready condition and the
// ResourceSlices as those components would.
func TestRecoveryPlanThroughAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{})
	require.NoError(t, err)
	defer func() { _ = cp.Stop() }()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	c, err := client.New(cp.RESTConfig(), client.Options{Scheme: scheme})
	require.NoError(t, err)
	now := time.Now().UTC().Truncate(time.Second)

	for i, v := range draVariants {
		t.Run(v.name, func(t *testing.T) {
			// Each variant in its own namespace and nodes: nothing deletes
			// here without a controller manager.
			ns, suffix := fmt.Sprintf("dra-%d", i), fmt.Sprintf("-v%d", i)
			s := newDRAState(now, "")
			v.mutate(s, now)
			require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
			for _, n := range s.nodes {
				n.Name += suffix
				status := n.Status
				require.NoError(t, c.Create(ctx, n))
				n.Status = status
				require.NoError(t, c.Status().Update(ctx, n), "node status, as the kubelet writes it")
			}
			s.ds.Namespace = ns
			dsStatus := s.ds.Status
			require.NoError(t, c.Create(ctx, s.ds))
			s.ds.Status = dsStatus
			s.ds.Status.ObservedGeneration = s.ds.Generation
			require.NoError(t, c.Status().Update(ctx, s.ds), "DaemonSet status, as its controller writes it")
			for _, p := range s.pods {
				p.Namespace, p.Spec.NodeName = ns, p.Spec.NodeName+suffix
				p.OwnerReferences[0].UID = s.ds.UID // the real one, as the DaemonSet controller sets it
				status := p.Status
				require.NoError(t, c.Create(ctx, p))
				p.Status = status
				require.NoError(t, c.Status().Update(ctx, p), "Pod status, as the kubelet writes it")
			}
			for _, rs := range s.slices {
				node := *rs.Spec.NodeName + suffix
				rs.Name, rs.Spec.NodeName, rs.Spec.Pool.Name = rs.Name+suffix, &node, node
				require.NoError(t, c.Create(ctx, rs), "ResourceSlice, as the DRA driver's kubelet plugin publishes it")
			}
			r := runCLI("recovery-plan", "--kubeconfig", cp.Kubeconfig(), "--namespace", ns, "--now", now.Add(time.Second).Format(time.RFC3339))
			requireRecoveryOutcome(t, v.failed, ns, "gpu-dra-01"+suffix, r)
		})
	}
}
