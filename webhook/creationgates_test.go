package webhook

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// TestCreationGatesFromTheirCaches (issue 24 item 3): the webhook reads each
// creation gate from its own cache through the loader, per review: a
// Deployment's env as it changes, and a gate whose object is not there is
// open, naming why.
func TestCreationGatesFromTheirCaches(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newWatchedFacts(t, ctx)
	shared := gate.CreationGate{Name: "gpu-shared-creation", Kind: gate.GateDeploymentEnv, Namespace: "kube-dc", Object: "kube-dc-manager", Key: "GPU_SHARED_CREATION_ENABLED", Closed: "false"}
	switches := gate.CreationGate{Name: "switches", Kind: gate.GateConfigMapKey, Namespace: "kube-dc", Object: "switches", Key: "gpu", Closed: "off"}
	cfg := *w.facts.Config
	cfg.CreationGates = []gate.CreationGate{shared, switches}
	w.facts.Config = &cfg
	deployments := &storeCache{infs: map[reflect.Type]*fedInformer{reflect.TypeOf(&appsv1.Deployment{}): newFedInformer(t, ctx, &appsv1.Deployment{}, &appsv1.DeploymentList{})}}
	configMaps := &storeCache{infs: map[reflect.Type]*fedInformer{reflect.TypeOf(&corev1.ConfigMap{}): newFedInformer(t, ctx, &corev1.ConfigMap{}, &corev1.ConfigMapList{})}}
	w.facts.Gates = map[string]cache.Cache{"creation gate gpu-shared-creation": deployments, "creation gate switches": configMaps}

	manager := func(v string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-dc", Name: "kube-dc-manager", ResourceVersion: "2"},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager",
				Env: []corev1.EnvVar{{Name: "GPU_SHARED_CREATION_ENABLED", Value: v}}}}}}}}
	}
	readings := func() []gate.GateReading {
		cl, err := w.facts.Cluster(ctx)
		require.NoError(t, err)
		require.Len(t, cl.CreationGates, 2)
		return cl.CreationGates
	}
	r := readings()
	assert.ErrorContains(t, r[0].Err, "the Deployment does not exist")
	assert.ErrorContains(t, r[1].Err, "the ConfigMap does not exist")

	deployments.infs[reflect.TypeOf(&appsv1.Deployment{})].w.Add(manager("false"))
	configMaps.infs[reflect.TypeOf(&corev1.ConfigMap{})].w.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-dc", Name: "switches", ResourceVersion: "2"}, Data: map[string]string{"gpu": "off"}})
	require.Eventually(t, func() bool { r := readings(); return r[0].Closed() && r[1].Closed() }, 5*time.Second, 20*time.Millisecond, "both closed once cached")

	open := manager("true")
	open.ResourceVersion = "3"
	deployments.infs[reflect.TypeOf(&appsv1.Deployment{})].w.Modify(open)
	require.Eventually(t, func() bool { return readings()[0].Value == "true" }, 5*time.Second, 20*time.Millisecond, "the next review reads the change")
	assert.False(t, readings()[0].Closed())

	// The gate's object lives in another team's namespace: a failed watch
	// of it (its RoleBinding deleted there) makes that gate unreadable,
	// so open for what reads it, and nothing else: the other gate still
	// reads, and every review still gets its facts.
	deployments.infs[reflect.TypeOf(&appsv1.Deployment{})].w.Modify(manager("false"))
	require.Eventually(t, func() bool { return readings()[0].Closed() }, 5*time.Second, 20*time.Millisecond)
	w.facts.gateWatches.fail("creation gate gpu-shared-creation", errors.New("deployments.apps is forbidden"))
	r = readings()
	assert.ErrorContains(t, r[0].Err, "deployments.apps is forbidden")
	assert.False(t, r[0].Closed())
	assert.True(t, r[1].Closed(), "the other gate still reads")
	assert.NoError(t, w.facts.ready(), "no other review waits on a gate's cache")
}
