//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/controlplane"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// This file is named after the SUC tests on purpose: it starts the real
// SUC (needSUC), which then runs for the rest of the package, and the
// budget and rollout tests that sort before "events" assume no SUC acts on
// their Plans.

// TestSystemActorsNeverRefused: issue 22's Done-when. The system actors on
// their normal paths get no refusal from the gate, counted from the API
// server's audit log (every write to Nodes, nodes/status, Jobs, Plans,
// ConfigMaps and DaemonSets; a write the gate reviewed carries its
// <webhook>/decision annotation): the real SUC running a GPU node's upgrade
// to its proven end; a kubelet registering its GPU node (its own labels),
// its status and heartbeats and a later label write; nfd-master writing
// NFD's labels and GFD's on it; the GPU Operator writing its state labels
// and its driver DaemonSet. The kubelet, nfd-master (with GFD), the GPU
// Operator and the Job controller are played by writing what they write,
// under their own identities. Counts per identity are logged.
func TestSystemActorsNeverRefused(t *testing.T) {
	ctx := context.Background()
	since := time.Now()

	// SUC: a wave's first node, upgraded and proven (completeUpgrade plays
	// the Job's cordon, the kubelet's and nfd-master's reports, the Job
	// controller and the proof); SUC starts its Job, records it, and
	// uncordons it once proven. SUC's completion write is held until the
	// proof by design (the per-node step the completions webhook guards):
	// those refusals are counted apart.
	w := startSUCWave(t, "actors")
	first, _ := w.started(t)
	completeUpgrade(t, w.plan.Name, first)

	// A kubelet registers its GPU node: it creates its Node with the labels
	// it may set (NodeRestriction) and writes its status; nfd-master then
	// writes NFD's and GFD's labels; the kubelet heartbeats and sets a label.
	const node = "actors-v100-new"
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	full, err := testenv.NewNode(root, v100Spec(node, nil))
	require.NoError(t, err)
	// Deleted before the wave's cleanup (cleanups run last first), which
	// waits until the gate sees no V100 node of this test.
	t.Cleanup(func() { _ = env.Admin.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}) })
	kubelet, err := env.KubeletClient(node)
	require.NoError(t, err)
	own := map[string]string{}
	nfdLabels := map[string]any{}
	for k, v := range full.Labels {
		if k == "kubernetes.io/hostname" || strings.HasPrefix(k, "kubernetes.io/") || strings.HasPrefix(k, "beta.kubernetes.io/") ||
			k == "node.kubernetes.io/instance-type" || k == "topology.kubernetes.io/zone" {
			own[k] = v
			continue
		}
		if strings.HasPrefix(k, "feature.node.kubernetes.io/") || strings.HasPrefix(k, "nvidia.com/cuda.") || strings.HasPrefix(k, "nvidia.com/gpu.count") ||
			strings.HasPrefix(k, "nvidia.com/gpu.compute") || strings.HasPrefix(k, "nvidia.com/gfd") || k == "nvidia.com/gpu.product" || k == "nvidia.com/gpu.memory" {
			nfdLabels[k] = v
		}
	}
	reg := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: own}, Spec: corev1.NodeSpec{ProviderID: full.Spec.ProviderID}}
	require.NoError(t, kubelet.Create(ctx, reg), "the kubelet registers its Node")
	reg.Status = full.Status
	require.NoError(t, kubelet.Status().Update(ctx, reg), "the kubelet's first status")
	require.NoError(t, patchNode(nfdMaster(t), node, mergeLabels(nfdLabels)), "nfd-master: NFD's and GFD's labels")
	for range 3 {
		heartbeat(t, node)
	}
	require.NoError(t, patchNode(kubelet, node, `{"metadata":{"labels":{"node.kubernetes.io/instance-type":"dgx-1"}}}`), "the kubelet's own label")

	// The GPU Operator: its state labels on the node and its driver
	// DaemonSet (rights as its chart gives them).
	op := gpuOperator(t)
	require.NoError(t, client.IgnoreAlreadyExists(env.Admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-gpu-operator-daemonsets"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"*"}}}})))
	grant(t, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-gpu-operator-daemonsets"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "e2e-gpu-operator-daemonsets"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "gpu-operator", Namespace: "gpu-operator"}}})
	require.NoError(t, patchNode(op, node, `{"metadata":{"labels":{"nvidia.com/gpu.present":"true","nvidia.com/gpu.deploy.driver":"true","nvidia.com/mig.config.state":"success","`+gate.LabelDriverUpgradeState+`":"upgrade-done"}}}`))
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-operator", Name: "nvidia-driver-daemonset-actors"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nvidia-driver-daemonset"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "nvidia-driver-daemonset"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "nvidia-driver-ctr", Image: "nvcr.io/nvidia/driver:580.126.20-ubuntu22.04"}}}}}}
	require.NoError(t, op.Create(ctx, ds))
	t.Cleanup(func() { _ = env.Admin.Delete(ctx, ds) })
	ds.Spec.Template.Spec.Containers[0].Image = "nvcr.io/nvidia/driver:580.130.00-ubuntu22.04"
	require.NoError(t, op.Update(ctx, ds), "the operator rolls its driver DaemonSet")

	// Count, per identity, its writes, those the gate reviewed, and its refusals.
	time.Sleep(2 * time.Second) // the audit log's last lines
	events, err := env.CP.AuditEvents()
	require.NoError(t, err)
	type tally struct{ writes, reviewed, denied, held int }
	actor := func(e controlplane.AuditEvent) string {
		switch u := e.Username(); {
		case strings.HasPrefix(u, "system:node:"):
			return "kubelet"
		case u == testenv.NFDMasterUser:
			return "nfd-master (NFD and GFD)"
		case u == operatorSA:
			return "GPU Operator"
		case u == testenv.SUCUser:
			return "SUC"
		}
		return ""
	}
	counts := map[string]*tally{}
	var refusals []string
	for _, e := range events {
		a := actor(e)
		if a == "" || e.Stage != "ResponseComplete" || e.StageTimestamp.Before(since) || e.ObjectRef == nil {
			continue
		}
		if counts[a] == nil {
			counts[a] = &tally{}
		}
		c := counts[a]
		c.writes++
		if gateReviewed(e) {
			c.reviewed++
		}
		for k, v := range e.Annotations {
			if !strings.HasSuffix(k, ".gpu-upgrade-gate.io/decision") || v != "deny" {
				continue
			}
			if a == "SUC" && heldOnPurpose(strings.TrimSuffix(k, "/decision"), strings.Split(e.Annotations[strings.TrimSuffix(k, "/decision")+"/reasons"], ",")) {
				c.held++ // a guarded per-node step: SUC retries until it passes
				continue
			}
			c.denied++
			refusals = append(refusals, fmt.Sprintf("%s %s %s/%s by %s: %s", a, e.Verb, e.ObjectRef.Resource, e.ObjectRef.Name, e.Username(), e.ResponseStatus.Message))
		}
	}
	names := make([]string, 0, len(counts))
	for a := range counts {
		names = append(names, a)
	}
	slices.Sort(names)
	for _, a := range names {
		t.Logf("%-26s writes %3d, reviewed by the gate %3d, refused %d, held at the guarded per-node step %d", a, counts[a].writes, counts[a].reviewed, counts[a].denied, counts[a].held)
	}
	for _, a := range []string{"kubelet", "nfd-master (NFD and GFD)", "GPU Operator", "SUC"} {
		require.NotNil(t, counts[a], "no write of %s in the audit log", a)
		assert.Positive(t, counts[a].writes, a)
	}
	assert.Positive(t, counts["SUC"].reviewed, "SUC's Job start and completion are reviewed")
	assert.Empty(t, refusals, "system actors refused on their normal paths")
}

// heldOnPurpose: a refusal of SUC at the per-node steps the gate guards on
// purpose: its completion (uncordon) of a node not proven yet, and the
// start of the wave's next node while the previous one is not proven (and
// so still out: the budget).
func heldOnPurpose(hook string, reasons []string) bool {
	allowed := map[string][]gate.Code{
		webhook.WebhookCompletions: {gate.CodeUncordonBeforeProof},
		webhook.WebhookJobs:        {gate.CodePreviousNodeUnproven, gate.CodeDisruptionBudgetExceeded},
	}[hook]
	for _, r := range reasons {
		if !slices.Contains(allowed, gate.Code(r)) {
			return false
		}
	}
	return len(reasons) > 0
}

// mergeLabels is a merge patch setting labels.
func mergeLabels(labels map[string]any) string {
	var b strings.Builder
	b.WriteString(`{"metadata":{"labels":{`)
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%q:%q", k, labels[k])
	}
	b.WriteString(`}}}`)
	return b.String()
}
