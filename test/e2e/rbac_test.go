//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// The webhook in this suite runs as the chart's ServiceAccount with exactly
// the chart's RBAC (internal/testenv installs both from `helm template`), so
// every other e2e test passing proves that RBAC is enough. These tests prove
// it is no broader.

func webhookIdentity(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(env.WebhookRESTConfig(), client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	return c
}

func TestWebhookRunsAsTheChartsServiceAccount(t *testing.T) {
	ssr := &authenticationv1.SelfSubjectReview{}
	require.NoError(t, webhookIdentity(t).Create(context.Background(), ssr))
	want := fmt.Sprintf("system:serviceaccount:%s:%s", env.ServiceAccount.Namespace, env.ServiceAccount.Name)
	assert.Equal(t, want, ssr.Status.UserInfo.Username)
	assert.Equal(t, env.Config.Namespace, env.ServiceAccount.Namespace, "the chart's release namespace is the gate's namespace")
}

// access asks the API server's authorizer what the webhook's identity may do.
func access(t *testing.T, attrs authorizationv1.ResourceAttributes) bool {
	t.Helper()
	sa := env.ServiceAccount
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               fmt.Sprintf("system:serviceaccount:%s:%s", sa.Namespace, sa.Name),
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.Namespace, "system:authenticated"},
		ResourceAttributes: &attrs,
	}}
	require.NoError(t, env.Admin.Create(context.Background(), sar))
	return sar.Status.Allowed
}

func nonResourceAccess(t *testing.T, path string) bool {
	t.Helper()
	sa := env.ServiceAccount
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:                  fmt.Sprintf("system:serviceaccount:%s:%s", sa.Namespace, sa.Name),
		Groups:                []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.Namespace, "system:authenticated"},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: "get"},
	}}
	require.NoError(t, env.Admin.Create(context.Background(), sar))
	return sar.Status.Allowed
}

func TestChartRBACIsLeastPrivilege(t *testing.T) {
	gate, op, dcgm := env.Config.Namespace, env.Config.GPUOperator, env.Config.DCGMExporter
	suc := env.Config.SUCNamespaces[0]
	allowed := []authorizationv1.ResourceAttributes{
		{Verb: "list", Resource: "nodes"},
		{Verb: "watch", Resource: "nodes"},
		{Verb: "list", Group: "upgrade.cattle.io", Resource: "plans", Namespace: suc},
		{Verb: "watch", Group: "upgrade.cattle.io", Resource: "plans", Namespace: suc},
		{Verb: "list", Resource: "pods"},
		{Verb: "watch", Resource: "pods"}, // the proof's label-selected informers
		{Verb: "watch", Group: "batch", Resource: "jobs", Namespace: suc},
		{Verb: "list", Resource: "configmaps", Namespace: gate},
		{Verb: "watch", Resource: "configmaps", Namespace: gate},
		{Verb: "list", Group: "apps", Resource: "deployments", Namespace: op.Namespace, Name: op.Name},
		{Verb: "watch", Group: "apps", Resource: "daemonsets", Namespace: dcgm.Namespace, Name: dcgm.Name},
		// The one write, and the Lease that elects its writer.
		{Verb: "update", Resource: "configmaps", Namespace: gate, Name: env.Config.Halts.ConfigMap},
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: gate, Name: "gpu-upgrade-gate-halts"},
		{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: gate},
		// Proofs of DRA nodes (config draDrivers, set for the e2e suite).
		{Verb: "watch", Group: "resource.k8s.io", Resource: "resourceslices"},
		{Verb: "watch", Group: "resource.k8s.io", Resource: "resourceclaims"},
		// The drivers' kubelet-plugin DaemonSets (which nodes are DRA nodes).
		{Verb: "watch", Group: "apps", Resource: "daemonsets", Namespace: nvidiaDRA.Namespace},
		// The storage-health precondition's resource, where it is configured.
		{Verb: "list", Resource: "configmaps", Namespace: "rook-ceph"},
		{Verb: "watch", Resource: "configmaps", Namespace: "rook-ceph"},
		// The Plan nudge (docs/rollout.md): patch only, in the SUC namespaces.
		{Verb: "patch", Group: "upgrade.cattle.io", Resource: "plans", Namespace: suc, Name: "x"},
	}
	for _, a := range allowed {
		assert.True(t, access(t, a), "the webhook needs %s %s/%s %s/%s", a.Verb, a.Group, a.Resource, a.Namespace, a.Name)
	}
	denied := []authorizationv1.ResourceAttributes{
		// No Secrets, anywhere: the kubelet mounts the TLS Secret.
		{Verb: "get", Resource: "secrets", Namespace: gate, Name: "gpu-upgrade-gate-tls"},
		{Verb: "list", Resource: "secrets", Namespace: gate},
		{Verb: "watch", Resource: "secrets", Namespace: gate},
		{Verb: "list", Resource: "secrets"},
		{Verb: "get", Resource: "secrets", Namespace: "kube-system", Name: "anything"},
		// ConfigMaps only in its own namespace.
		{Verb: "list", Resource: "configmaps"},
		{Verb: "list", Resource: "configmaps", Namespace: "kube-system"},
		{Verb: "list", Resource: "configmaps", Namespace: "default"},
		// A precondition's resource is read, never written or got by name
		// beyond the watch.
		{Verb: "update", Resource: "configmaps", Namespace: "rook-ceph", Name: "storage-status"},
		{Verb: "list", Group: "apps", Resource: "deployments", Namespace: "rook-ceph"},
		{Verb: "get", Resource: "configmaps", Namespace: op.Namespace, Name: "x"},
		// Read-only.
		{Verb: "update", Group: "resource.k8s.io", Resource: "resourceclaims", Subresource: "status", Namespace: gate, Name: "x"},
		{Verb: "create", Group: "resource.k8s.io", Resource: "resourceslices"},
		{Verb: "update", Resource: "nodes", Name: "gpu-v100-01"},
		{Verb: "patch", Resource: "nodes", Name: "gpu-v100-01"},
		{Verb: "create", Group: "upgrade.cattle.io", Resource: "plans", Namespace: suc},
		{Verb: "update", Group: "upgrade.cattle.io", Resource: "plans", Namespace: suc, Name: "x"},
		{Verb: "patch", Group: "upgrade.cattle.io", Resource: "plans", Namespace: "ml", Name: "x"},
		{Verb: "delete", Group: "upgrade.cattle.io", Resource: "plans", Namespace: suc, Name: "x"},
		{Verb: "update", Resource: "configmaps", Namespace: gate, Name: "v100-r580"},
		{Verb: "create", Resource: "configmaps", Namespace: gate},
		{Verb: "delete", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations", Name: "gpu-upgrade-gate"},
		{Verb: "update", Resource: "plans", Group: "upgrade.cattle.io", Subresource: "status", Namespace: suc, Name: "x"},
		// Pods: list and watch only (holders, the proof's informers); no get or exec.
		{Verb: "get", Resource: "pods", Namespace: "ml", Name: "train-0"},
		{Verb: "list", Group: "batch", Resource: "jobs", Namespace: "ml"},
		{Verb: "create", Resource: "pods", Subresource: "exec", Namespace: "ml", Name: "train-0"},
		// The GPU Operator's workloads by name only.
		{Verb: "list", Group: "apps", Resource: "deployments", Namespace: op.Namespace},
		{Verb: "get", Group: "apps", Resource: "deployments", Namespace: op.Namespace, Name: "other"},
		{Verb: "list", Group: "apps", Resource: "daemonsets", Namespace: dcgm.Namespace},
		{Verb: "delete", Group: "apps", Resource: "daemonsets", Namespace: nvidiaDRA.Namespace, Name: nvidiaDRA.DaemonSet},
		{Verb: "list", Group: "apps", Resource: "daemonsets", Namespace: "ml"},
		{Verb: "list", Group: "apps", Resource: "deployments"},
		// Nothing it does not read.
		{Verb: "get", Group: "coordination.k8s.io", Resource: "leases", Namespace: gate, Name: "x"},
		{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-system"},
		{Verb: "delete", Resource: "configmaps", Namespace: gate, Name: env.Config.Halts.ConfigMap},
		{Verb: "create", Resource: "events", Namespace: gate},
		{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: gate, Name: env.ServiceAccount.Name},
	}
	for _, a := range denied {
		assert.False(t, access(t, a), "the chart's RBAC must not allow %s %s/%s/%s in %q (name %q)", a.Verb, a.Group, a.Resource, a.Subresource, a.Namespace, a.Name)
	}
	// Discovery and /version need no rule of the chart: the default
	// system:discovery and system:public-info-viewer bindings cover them.
	for _, p := range []string{"/version", "/api", "/apis", "/apis/upgrade.cattle.io/v1"} {
		assert.True(t, nonResourceAccess(t, p), "GET %s", p)
	}
}

// TestChartRBACDirectly tries as the webhook's identity, not through the
// authorizer's review API.
func TestChartRBACDirectly(t *testing.T) {
	ctx := context.Background()
	c := webhookIdentity(t)
	forbidden := func(err error, what string) {
		t.Helper()
		assert.True(t, apierrors.IsForbidden(err), "%s: want Forbidden, got %v", what, err)
	}
	forbidden(c.List(ctx, &corev1.SecretList{}, client.InNamespace(env.Config.Namespace)), "list Secrets in the gate's namespace")
	forbidden(c.Get(ctx, client.ObjectKey{Namespace: env.Config.Namespace, Name: "gpu-upgrade-gate-tls"}, &corev1.Secret{}), "get a Secret")
	forbidden(c.List(ctx, &corev1.SecretList{}), "list Secrets cluster-wide")
	forbidden(c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("kube-system")), "list ConfigMaps in kube-system")
	forbidden(c.List(ctx, &corev1.ConfigMapList{}), "list ConfigMaps cluster-wide")
	forbidden(c.List(ctx, &appsv1.DeploymentList{}, client.InNamespace(env.Config.GPUOperator.Namespace)), "list every Deployment of the GPU Operator's namespace")
	forbidden(c.Create(ctx, planFor("as-the-webhook")), "create a Plan")

	assert.NoError(t, c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(env.Config.Namespace)), "list ConfigMaps in its namespace")
	var deps appsv1.DeploymentList
	require.NoError(t, c.List(ctx, &deps, client.InNamespace(env.Config.GPUOperator.Namespace),
		client.MatchingFields{"metadata.name": env.Config.GPUOperator.Name}), "list the GPU Operator Deployment by name")
	assert.Len(t, deps.Items, 1)
	assert.NoError(t, c.List(ctx, &upgradev1.PlanList{}, client.InNamespace(env.Config.SUCNamespaces[0])))
	assert.NoError(t, c.List(ctx, &corev1.PodList{}, client.MatchingFields{"spec.nodeName": "gpu-v100-holder"}))
}
