//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/controlplane"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// sucStatusClient acts as SUC's ServiceAccount (impersonating its username
// gives the groups of its namespace, as its token would) with the right to
// write Plan status; alice gets that right too, so the webhook is what
// stops her.
func sucStatusClient(t *testing.T) client.Client {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, client.IgnoreAlreadyExists(env.Admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-plan-status"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"upgrade.cattle.io"}, Resources: []string{"plans/status"}, Verbs: []string{"get", "update", "patch"}}}})))
	grant(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.SUCNamespace, Name: "e2e-plan-status"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "e2e-plan-status"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts:" + testenv.SUCNamespace},
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}})
	c, err := client.New(env.CP.ConfigFor(testenv.SUCUser), client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	return c
}

// TestPlanStatusGuard (issue 13 item 6, issue 12): a person who may write
// plans/status cannot clear status.applying to slip a version edit past
// VersionEditInFlight, nor forge Complete to slip a second rollout past
// RolloutInFlight; SUC's own status writes, and a person's that change
// nothing, never reach the gate (counted in the audit log).
func TestPlanStatusGuard(t *testing.T) {
	ctx := context.Background()
	suc := sucStatusClient(t)
	alice, _ := as(t, "alice")
	p := plan("status-guard", "v100-r580", "gpu-v100-01")
	require.NoError(t, alice.Create(ctx, p))
	defer removePlan(t, p)

	// SUC selects the node.
	p.Status.Applying = []string{"gpu-v100-01"}
	require.NoError(t, suc.Status().Update(ctx, p), "SUC writes status.applying")

	// alice clears it, as the attack of issue 13 did; the edit stays held.
	forged := p.DeepCopy()
	forged.Status.Applying = nil
	err := alice.Status().Update(ctx, forged)
	requireDenied(t, err, gate.CodePlanStatusForged)
	assert.Contains(t, err.Error(), `[PlanStatusForged] user "alice" changes status.applying from [gpu-v100-01] to []`)
	require.NoError(t, env.Admin.Get(ctx, client.ObjectKeyFromObject(p), p))
	assert.Equal(t, []string{"gpu-v100-01"}, p.Status.Applying, "the denied write stored nothing")
	edit := p.DeepCopy()
	edit.Spec.Version = "v1.36.1+rke2r2"
	requireDenied(t, alice.Update(ctx, edit), gate.CodeVersionEditInFlight, gate.CodeTargetNotQualified)

	// Nor can she forge Complete, which would hide the Plan from
	// RolloutInFlight (a second rollout would be admitted beside it).
	complete := p.DeepCopy()
	complete.Status.Conditions = append(complete.Status.Conditions, upgradev1.GenericCondition{Type: "Complete", Status: "True"})
	err = alice.Status().Update(ctx, complete)
	requireDenied(t, err, gate.CodePlanStatusForged)
	assert.Contains(t, err.Error(), `[PlanStatusForged] user "alice" changes status.conditions from [] to [Complete=True]`)

	// A status write of hers that changes nothing never reaches the gate.
	require.NoError(t, env.Admin.Get(ctx, client.ObjectKeyFromObject(p), p))
	require.NoError(t, alice.Status().Update(ctx, p))

	// SUC finishes: it clears the list itself.
	p.Status.Applying = nil
	require.NoError(t, suc.Status().Update(ctx, p), "SUC clears status.applying")

	statusWrite := func(e controlplane.AuditEvent) bool {
		return e.Stage == "ResponseComplete" && e.ObjectRef != nil && e.ObjectRef.Name == p.Name && e.ObjectRef.Namespace == p.Namespace &&
			e.ObjectRef.Resource == "plans" && e.ObjectRef.Subresource == "status" && (e.Verb == "update" || e.Verb == "patch")
	}
	// The audit log is written as requests complete; wait for all five.
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		events, err := env.CP.AuditEvents()
		require.NoError(c, err)
		counts := map[string]int{}
		for _, e := range events {
			if !statusWrite(e) {
				continue
			}
			what := e.Username()
			if gateReviewed(e) {
				what += " reviewed: " + e.Annotations[webhook.WebhookPlanStatus+"/"+gate.AuditDecision] + " " +
					e.Annotations[webhook.WebhookPlanStatus+"/"+gate.AuditReasons]
			}
			counts[what]++
		}
		assert.Equal(c, map[string]int{
			testenv.SUCUser:                         2, // both of SUC's writes, never reviewed
			"alice reviewed: deny PlanStatusForged": 2,
			"alice":                                 1, // the write that changed nothing
		}, counts)
	}, 30*time.Second, 250*time.Millisecond)
}
