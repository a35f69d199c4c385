//go:build e2e

package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// TestGPUOperatorDaemonSetDeletion (issue 25 follow-up): a person's DELETE
// of one of the GPU Operator's DaemonSets (here its DCGM exporter, as the
// suite's fleet holds it) takes that operand from every GPU node at once:
// the chart's operatordaemonsets webhook sends it and the gate refuses it
// while a GPU node runs a holder (the suite's gpu-v100-holder), as it
// refuses the namespace's deletion. The GPU Operator's own deletion (played
// by its ServiceAccount) never reaches the gate. The deletions are
// server-side dry runs: the API server calls the webhooks and stores
// nothing.
func TestGPUOperatorDaemonSetDeletion(t *testing.T) {
	ctx := context.Background()
	dc := env.Config.DCGMExporter
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: dc.Namespace, Name: "daemonset-deleter"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"get", "delete"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: dc.Namespace, Name: "daemonset-deleters"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "platform-admins"},
			{Kind: rbacv1.ServiceAccountKind, Name: "gpu-operator", Namespace: dc.Namespace}}}
	createAll(t, role, binding)
	t.Cleanup(func() {
		for _, o := range []client.Object{binding, role} {
			require.NoError(t, client.IgnoreNotFound(env.Admin.Delete(ctx, o)))
		}
	})
	exporter := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: dc.Namespace, Name: dc.Name}}
	alice, _ := as(t, "alice")

	t.Run("a person's deletion while a GPU node runs a holder is refused", func(t *testing.T) {
		before := webhookRequests(t, webhook.PathOperatorDaemonSets)
		err := alice.Delete(ctx, exporter, client.DryRunAll)
		requireDenied(t, err, gate.CodeGPUHolders)
		assert.Contains(t, err.Error(), "DaemonSet "+dc.Namespace+"/"+dc.Name+" is denied")
		assert.Contains(t, err.Error(), "node gpu-v100-holder runs 1 GPU holder(s)")
		assert.Greater(t, webhookRequests(t, webhook.PathOperatorDaemonSets), before, "the chart's webhook sent it")
	})
	t.Run("the GPU Operator's own deletion never reaches the gate", func(t *testing.T) {
		op, err := client.New(env.CP.ConfigFor(operatorSA, "system:serviceaccounts", "system:serviceaccounts:"+dc.Namespace, "system:authenticated"), client.Options{Scheme: env.Scheme})
		require.NoError(t, err)
		before := webhookRequests(t, webhook.PathOperatorDaemonSets)
		require.NoError(t, op.Delete(ctx, exporter, client.DryRunAll))
		assert.Equal(t, before, webhookRequests(t, webhook.PathOperatorDaemonSets), "the operator's deletion reached the gate")
	})
}
