//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

var olmWorldOnce sync.Once

// olmWorld adds OLM's Subscription CRD (a reduced copy, testdata/olm) to the
// driver world's InstallPlan CRD, and lets people (platform-admins) and OLM's
// ServiceAccounts write Subscriptions (and OLM InstallPlans' status; their
// spec RBAC is the driver world's).
func olmWorld(t *testing.T) {
	t.Helper()
	olmWorldOnce.Do(func() {
		root, err := testenv.RepoRoot()
		require.NoError(t, err)
		_, err = envtest.InstallCRDs(env.CP.RESTConfig(), envtest.CRDInstallOptions{Paths: []string{filepath.Join(root, "testdata", "olm", "crd-subscriptions.yaml")}})
		require.NoError(t, err)
		createAll(t,
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "olm-subscribers"}, Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"operators.coreos.com"}, Resources: []string{"subscriptions", "subscriptions/status", "installplans/status"}, Verbs: []string{"*"}}}},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "olm-subscribers"},
				RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "olm-subscribers"},
				Subjects: []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "platform-admins"},
					{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "system:serviceaccounts:olm"}}},
		)
	})
}

func subscription(name, pkg string, approval any) *unstructured.Unstructured {
	spec := map[string]any{"name": pkg, "channel": "v26.3", "source": "certified-operators", "sourceNamespace": "olm"}
	if approval != nil {
		spec["installPlanApproval"] = approval
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
		"metadata": map[string]any{"name": name, "namespace": env.Config.GPUOperator.Namespace}, "spec": spec}}
}

func installPlan(name string, approved bool, csvs ...any) *unstructured.Unstructured {
	approval := "Manual"
	if approved {
		approval = "Automatic"
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
		"metadata": map[string]any{"name": name, "namespace": env.Config.GPUOperator.Namespace},
		"spec":     map[string]any{"approval": approval, "approved": approved, "clusterServiceVersionNames": csvs}}}
}

// TestOperatorUpgradeThroughOLM (issue 24, item 1): under a Subscription
// with automatic approval, OLM creates each new GPU Operator version's
// InstallPlan already approved, and the operator's Deployment write that
// follows is OLM's, which the gate exempts. So the gate refuses a
// Subscription of the GPU Operator's package that does not say
// installPlanApproval: Manual, and reviews an InstallPlan approved at its
// creation exactly like an approval. The test plays OLM's catalog operator
// (which cannot run here) by writing what it writes, as its ServiceAccount.
// It counts the reviews of its own writes (ownWrites).
func TestOperatorUpgradeThroughOLM(t *testing.T) {
	driverWorld(t)
	olmWorld(t)
	ctx := context.Background()
	alice, _ := as(t, "alice")
	const olmUser = "system:serviceaccount:olm:olm-operator-serviceaccount"
	olm, err := client.New(env.CP.ConfigFor(olmUser, "system:serviceaccounts", "system:serviceaccounts:olm", "system:authenticated"), client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	rec := testenv.Record("v100-op-26-6-olm", now.Add(-24*time.Hour), func(r *qualification.Record) {
		r.Target = testenv.Source
		r.Target.GPUOperator = "v26.6.0"
	})
	require.NoError(t, env.CreateRecords(ctx, map[string]*qualification.Record{"v100-op-olm": rec}))
	var created []*unstructured.Unstructured
	t.Cleanup(func() {
		for _, o := range created {
			_ = env.Admin.Delete(ctx, o)
		}
	})
	create := func(c client.Client, o *unstructured.Unstructured) error {
		err := c.Create(ctx, o)
		if err == nil {
			created = append(created, o)
		}
		return err
	}
	olmWrites := func() ownWrites {
		return ownWrites{since: time.Now(), users: []string{"alice", olmUser},
			resources: []string{"subscriptions", "subscriptions/status", "installplans", "installplans/status"},
			names:     []string{"gpu-operator-certified", "nfd", "install-auto", "install-annotated", "install-running", "install-manual", "install-nfd"}}
	}

	t.Run("Subscription", func(t *testing.T) {
		own := olmWrites()
		// Anything but exactly Manual is automatic to OLM: refused, naming
		// the field, the value and the fix.
		for _, tc := range []struct {
			name     string
			approval any
			seen     string
		}{
			{"absent (OLM's default)", nil, "absent (OLM's default, Automatic)"},
			{"Automatic", "Automatic", `"Automatic"`},
			{"manual (not OLM's spelling)", "manual", `"manual"`},
		} {
			err := create(alice, subscription("gpu-operator-certified", "gpu-operator-certified", tc.approval))
			requireDenied(t, err, gate.CodeOperatorAutoApproval)
			assert.Contains(t, err.Error(), "[OperatorAutoApproval] spec.installPlanApproval is "+tc.seen+" for OLM package gpu-operator-certified", tc.name)
			assert.Contains(t, err.Error(), "set spec.installPlanApproval: Manual", tc.name)
		}
		// The neighbouring safe case: Manual.
		sub := subscription("gpu-operator-certified", "gpu-operator-certified", "Manual")
		require.NoError(t, create(alice, sub), "Manual: each InstallPlan waits for a reviewed approval")
		requireDenied(t, edit(t, alice, sub, set("spec.installPlanApproval", "Automatic")), gate.CodeOperatorAutoApproval)
		require.NoError(t, edit(t, alice, sub, set("spec.channel", "v26.6")), "a spec edit that keeps Manual")
		assert.Equal(t, 6, own.reviews(t, webhook.WebhookOperator, 6))

		// Never sent: another package's Subscription, Automatic or not, and
		// a write of the metadata alone (OLM labels Subscriptions).
		require.NoError(t, create(alice, subscription("nfd", "nfd", "Automatic")), "another operator's Subscription is not the gate's")
		require.NoError(t, edit(t, olm, sub, func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{"operators.coreos.com/gpu-operator-certified.gpu-operator": ""})
		}))
		assert.Equal(t, 6, own.reviews(t, webhook.WebhookOperator, 8), "other packages' Subscriptions and metadata writes never reach the gate")
	})

	t.Run("InstallPlan", func(t *testing.T) {
		own := olmWrites()
		// OLM under an Automatic Subscription (one from before the gate):
		// the new version's InstallPlan, created approved, is an approval.
		err := create(olm, installPlan("install-auto", true, "gpu-operator-certified.v26.6.0"))
		requireDenied(t, err, gate.CodeRecordMissing)
		assert.Contains(t, err.Error(), `admission webhook "operator.gpu-upgrade-gate.io" denied the request`)
		// Created approved with a record: judged like the approval of
		// TestOperatorUpgrade (the H200 has no record for the new operator).
		annotated := installPlan("install-annotated", true, "gpu-operator-certified.v26.6.0")
		annotated.SetAnnotations(map[string]string{gate.AnnotationQualification: "v100-op-olm"})
		err = create(alice, annotated)
		requireDeniedWith(t, err, gate.CodeHardwareNotQualified)
		assert.Contains(t, err.Error(), "node gpu-h200-01")
		assert.Equal(t, 2, own.reviews(t, webhook.WebhookOperator, 2))

		// The neighbouring safe cases. Created approved at the version that
		// runs: nothing moves (reviewed, allowed).
		running := installPlan("install-running", true, "gpu-operator-certified."+testenv.Source.GPUOperator)
		require.NoError(t, create(olm, running), "an approved InstallPlan of the running version moves nothing")
		assert.Equal(t, 3, own.reviews(t, webhook.WebhookOperator, 3))
		// Not sent: created unapproved (Manual: it waits for a person),
		// another operator's approved InstallPlan, OLM's status write, and
		// an edit of an approved plan that keeps its operator CSV.
		pending := installPlan("install-manual", false, "gpu-operator-certified.v26.6.0")
		require.NoError(t, create(olm, pending), "an unapproved InstallPlan moves nothing")
		require.NoError(t, create(olm, installPlan("install-nfd", true, "nfd.v4.17.0")), "another operator's InstallPlan is not the gate's")
		st := getObj(t, running)
		require.NoError(t, unstructured.SetNestedField(st.Object, "Complete", "status", "phase"))
		require.NoError(t, olm.Status().Update(ctx, st), "OLM's status write")
		require.NoError(t, edit(t, olm, running, annotate("note", "an edit that keeps the CSV")))
		assert.Equal(t, 3, own.reviews(t, webhook.WebhookOperator, 7), "unapproved, other operators' and status writes never reach the gate")

		// An approved plan whose operator CSV changes is an approval of the
		// new version.
		requireDenied(t, edit(t, alice, running, set("spec.clusterServiceVersionNames", []any{"gpu-operator-certified.v26.6.0"})), gate.CodeRecordMissing)
		// And the approval of the pending one is reviewed as before.
		requireDenied(t, edit(t, alice, pending, set("spec.approved", true)), gate.CodeRecordMissing)
		assert.Equal(t, 5, own.reviews(t, webhook.WebhookOperator, 9))
	})
}
