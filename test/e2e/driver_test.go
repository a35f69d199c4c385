//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// The GPU Operator's ServiceAccount, as its upgrade controller writes Nodes.
const operatorSA = "system:serviceaccount:gpu-operator:gpu-operator"

func nvidiaObject(apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name}, "spec": spec}}
	return u
}

var driverWorldOnce sync.Once

// driverWorld is a GPU Operator installed before the gate: the reduced CRDs
// (testdata/nvidia, testdata/olm), a ClusterPolicy whose drivers come from
// NVIDIADrivers, NVIDIADriver v100 (nodes labelled driver-pool=a: gpu-v100-01
// and -02) at the running driver, NVIDIADriver v100-b (driver-pool=b:
// gpu-v100-04) at an unqualified 580.140.02, and RBAC for the operator's
// ServiceAccount and for people on Deployments and InstallPlans. They are
// written while the webhook is not registered, as objects that predate the
// gate; every test then starts from them and restores what it changes.
func driverWorld(t *testing.T) {
	t.Helper()
	driverWorldOnce.Do(func() {
		ctx := context.Background()
		root, err := testenv.RepoRoot()
		require.NoError(t, err)
		_, err = envtest.InstallCRDs(env.CP.RESTConfig(), envtest.CRDInstallOptions{Paths: []string{
			filepath.Join(root, "testdata", "nvidia", "crds.yaml"), filepath.Join(root, "testdata", "olm", "crd-installplans.yaml")}})
		require.NoError(t, err)
		// A record qualifying V100 nodes on the source tuple with driver 580.130.00.
		rec := testenv.Record("v100-driver-580-130", now.Add(-24*time.Hour), func(r *qualification.Record) {
			r.Target = testenv.Source
			r.Target.Driver = "580.130.00"
		})
		require.NoError(t, env.CreateRecords(ctx, map[string]*qualification.Record{"v100-driver": rec}))

		require.NoError(t, env.UnregisterWebhook(ctx))
		for n, pool := range map[string]string{"gpu-v100-01": "a", "gpu-v100-02": "a", "gpu-v100-04": "b"} {
			require.NoError(t, patchNode(env.Admin, n, `{"metadata":{"labels":{"driver-pool":"`+pool+`"}}}`))
		}
		policy := map[string]any{"autoUpgrade": true, "maxParallelUpgrades": int64(1)}
		objs := []client.Object{
			nvidiaObject("nvidia.com/v1", "ClusterPolicy", "cluster-policy", map[string]any{
				"driver":       map[string]any{"version": "580.126.20", "useNvidiaDriverCRD": true, "upgradePolicy": policy},
				"dcgmExporter": map[string]any{"version": testenv.Source.DCGMExporter},
			}),
			nvidiaObject("nvidia.com/v1alpha1", "NVIDIADriver", "v100", map[string]any{"version": "580.126.20", "nodeSelector": map[string]any{"driver-pool": "a"}}),
			nvidiaObject("nvidia.com/v1alpha1", "NVIDIADriver", "v100-b", map[string]any{"version": "580.140.02", "nodeSelector": map[string]any{"driver-pool": "b"}}),
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator"}, Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"nodes", "nodes/status"}, Verbs: []string{"get", "list", "watch", "patch", "update"}},
				{APIGroups: []string{"nvidia.com"}, Resources: []string{"clusterpolicies", "clusterpolicies/status", "nvidiadrivers", "nvidiadrivers/status"}, Verbs: []string{"*"}}}},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator"},
				RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "gpu-operator"},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "gpu-operator", Namespace: "gpu-operator"}}},
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator-upgraders"}, Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"*"}},
				{APIGroups: []string{"operators.coreos.com"}, Resources: []string{"installplans"}, Verbs: []string{"*"}}}},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator-upgraders"},
				RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "gpu-operator-upgraders"},
				Subjects: []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "platform-admins"},
					{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "system:serviceaccounts:olm"}}},
		}
		createAll(t, objs...)
		require.NoError(t, env.RegisterWebhook(ctx))
	})
}

// preGate runs f with the webhook unregistered: objects written as they
// would have been before the gate was installed.
func preGate(t *testing.T, f func()) {
	t.Helper()
	require.NoError(t, env.UnregisterWebhook(context.Background()))
	defer func() { require.NoError(t, env.RegisterWebhook(context.Background())) }()
	f()
}

// requireDeniedWith checks the API error is a denial carrying at least the
// codes (a fleet-wide change trips several rules on the odd nodes).
func requireDeniedWith(t *testing.T, err error, codes ...gate.Code) {
	t.Helper()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "denied the request")
	for _, c := range codes {
		assert.Contains(t, err.Error(), "["+string(c)+"]")
	}
}

func getObj(t *testing.T, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(u.GroupVersionKind())
	require.NoError(t, env.Admin.Get(context.Background(), client.ObjectKeyFromObject(u), got))
	return got
}

func cpRef() *unstructured.Unstructured {
	return nvidiaObject("nvidia.com/v1", "ClusterPolicy", "cluster-policy", nil)
}

func ndRef(name string) *unstructured.Unstructured {
	return nvidiaObject("nvidia.com/v1alpha1", "NVIDIADriver", name, nil)
}

// edit reads obj fresh, applies f and updates it as c.
func edit(t *testing.T, c client.Client, ref *unstructured.Unstructured, f func(u *unstructured.Unstructured)) error {
	t.Helper()
	u := getObj(t, ref)
	f(u)
	return c.Update(context.Background(), u)
}

func set(path string, v any) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		if err := unstructured.SetNestedField(u.Object, v, strings.Split(path, ".")...); err != nil {
			panic(err)
		}
	}
}

func annotate(kv ...string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		a := u.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			a[kv[i]] = kv[i+1]
		}
		u.SetAnnotations(a)
	}
}

// TestDriverPath: the GPU Operator's own route to a new driver is gated like
// a Plan: an unqualified change is refused, a qualified serialized one
// admitted.
func TestDriverPath(t *testing.T) {
	driverWorld(t)
	alice, _ := as(t, "alice")
	requireDenied(t, edit(t, alice, ndRef("v100"), set("spec.version", "580.130.00")), gate.CodeRecordMissing)
	require.NoError(t, edit(t, alice, ndRef("v100"), func(u *unstructured.Unstructured) {
		set("spec.version", "580.130.00")(u)
		annotate(gate.AnnotationQualification, "v100-driver")(u)
	}), "qualified for every node it reaches, one node at a time")
	defer preGate(t, func() { require.NoError(t, edit(t, env.Admin, ndRef("v100"), set("spec.version", "580.126.20"))) })

	// The whole fleet through the ClusterPolicy: H200 and odd V100 nodes are
	// not covered by the V100 record.
	requireDeniedWith(t, edit(t, alice, cpRef(), func(u *unstructured.Unstructured) {
		set("spec.driver.version", "580.130.00")(u)
		annotate(gate.AnnotationQualification, "v100-driver")(u)
	}), gate.CodeHardwareNotQualified)
	require.NoError(t, edit(t, alice, ndRef("v100"), annotate("touch", "1")), "metadata only: not gated")
}

// TestDriverPathBypasses: each route of issue 10's driver bullet that
// reloaded drivers unreviewed is stopped at the request (on the old main
// every one of these was admitted without review).
func TestDriverPathBypasses(t *testing.T) {
	driverWorld(t)
	ctx := context.Background()
	alice, _ := as(t, "alice")
	cases := []struct {
		name  string
		write func() error
		codes []gate.Code
	}{
		{"create an NVIDIADriver", func() error {
			return alice.Create(ctx, nvidiaObject("nvidia.com/v1alpha1", "NVIDIADriver", "sneaky", map[string]any{"version": "580.140.02", "nodeSelector": map[string]any{"driver-pool": "a"}}))
		}, []gate.Code{gate.CodeRecordMissing}},
		{"widen an NVIDIADriver's nodeSelector", func() error {
			return edit(t, alice, ndRef("v100"), func(u *unstructured.Unstructured) {
				unstructured.RemoveNestedField(u.Object, "spec", "nodeSelector")
				annotate(gate.AnnotationQualification, "v100-driver")(u)
			})
		}, []gate.Code{gate.CodeHardwareNotQualified}},
		// A reload at the running version: that tuple is no record's target.
		{"change the driver repository", func() error {
			return edit(t, alice, ndRef("v100"), func(u *unstructured.Unstructured) {
				set("spec.repository", "registry.example.com/mirror")(u)
				annotate(gate.AnnotationQualification, "v100-driver")(u)
			})
		}, []gate.Code{gate.CodeTargetNotQualified}},
		// An NVIDIADriver that names its driver by a full image reference
		// (no version field) gets a new tag.
		{"change the tag of a full driver image reference", func() error {
			preGate(t, func() {
				require.NoError(t, edit(t, env.Admin, ndRef("v100"), func(u *unstructured.Unstructured) {
					unstructured.RemoveNestedField(u.Object, "spec", "version")
					set("spec.image", "nvcr.io/nvidia/driver:580.126.20-ubuntu24.04")(u)
				}))
			})
			defer preGate(t, func() {
				require.NoError(t, edit(t, env.Admin, ndRef("v100"), func(u *unstructured.Unstructured) {
					unstructured.RemoveNestedField(u.Object, "spec", "image")
					set("spec.version", "580.126.20")(u)
				}))
			})
			return edit(t, alice, ndRef("v100"), func(u *unstructured.Unstructured) {
				set("spec.image", "nvcr.io/nvidia/driver:580.140.02-ubuntu24.04")(u)
				annotate(gate.AnnotationQualification, "v100-driver")(u)
			})
		}, []gate.Code{gate.CodeTargetNotQualified}},
		{"change the kernel module type", func() error {
			return edit(t, alice, ndRef("v100"), func(u *unstructured.Unstructured) {
				set("spec.kernelModuleType", "open")(u)
				annotate(gate.AnnotationQualification, "v100-driver")(u)
			})
		}, []gate.Code{gate.CodeTargetNotQualified}},
		{"set maxParallelUpgrades 0", func() error {
			return edit(t, alice, cpRef(), set("spec.driver.upgradePolicy.maxParallelUpgrades", int64(0)))
		}, []gate.Code{gate.CodeConcurrencyNotSerial}},
		{"change the DCGM exporter image", func() error {
			return edit(t, alice, cpRef(), set("spec.dcgmExporter.repository", "registry.example.com/mirror"))
		}, []gate.Code{gate.CodeRecordMissing}},
		{"create a second ClusterPolicy with a new version (delete and recreate)", func() error {
			return alice.Create(ctx, nvidiaObject("nvidia.com/v1", "ClusterPolicy", "recreated", map[string]any{
				"driver": map[string]any{"version": "580.140.02", "upgradePolicy": map[string]any{"autoUpgrade": true, "maxParallelUpgrades": int64(1)}}}))
		}, []gate.Code{gate.CodeRecordMissing}},
		{"delete the ClusterPolicy while GPUs are held", func() error {
			return alice.Delete(ctx, cpRef())
		}, []gate.Code{gate.CodeGPUHolders}},
		// Issue 25: the node an NVIDIADriver's nodeSelector no longer
		// selects loses its driver, as by the NVIDIADriver's deletion.
		{"narrow an NVIDIADriver's nodeSelector off a node that holds GPUs", func() error {
			preGate(t, func() {
				require.NoError(t, env.Admin.Create(ctx, nvidiaObject("nvidia.com/v1alpha1", "NVIDIADriver", "holder", map[string]any{
					"version": "580.126.20", "nodeSelector": map[string]any{"kubernetes.io/hostname": "gpu-v100-holder"}})))
			})
			defer preGate(t, func() { require.NoError(t, env.Admin.Delete(ctx, ndRef("holder"))) })
			before := webhookRequests(t, webhook.PathDriver)
			err := edit(t, alice, ndRef("holder"), set("spec.nodeSelector", map[string]any{"kubernetes.io/hostname": "gpu-v100-none"}))
			assert.Greater(t, webhookRequests(t, webhook.PathDriver), before, "the driver webhook's match condition sent the nodeSelector change")
			require.Error(t, err)
			assert.Contains(t, err.Error(), "node gpu-v100-holder runs 1 GPU holder(s)")
			assert.Contains(t, err.Error(), "this change of the NVIDIADriver's nodeSelector no longer selects the node")
			return err
		}, []gate.Code{gate.CodeGPUHolders}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			requireDeniedWith(t, tc.write(), tc.codes...)
		})
	}
	t.Run("the safe neighbours", func(t *testing.T) {
		// A serial policy edit, and deleting an NVIDIADriver whose nodes are
		// idle (restored with the webhook out of the way).
		require.NoError(t, edit(t, alice, cpRef(), set("spec.driver.upgradePolicy.drain", map[string]any{"enable": true})))
		require.NoError(t, edit(t, alice, cpRef(), func(u *unstructured.Unstructured) {
			unstructured.RemoveNestedField(u.Object, "spec", "driver", "upgradePolicy", "drain")
		}))
		require.NoError(t, alice.Delete(ctx, ndRef("v100-b")))
		preGate(t, func() {
			require.NoError(t, env.Admin.Create(ctx, nvidiaObject("nvidia.com/v1alpha1", "NVIDIADriver", "v100-b", map[string]any{"version": "580.140.02", "nodeSelector": map[string]any{"driver-pool": "b"}})))
		})
	})
}

// operatorStep writes a node's driver upgrade state as the GPU Operator's
// upgrade controller does (k8s-operator-libs ChangeNodeUpgradeState: a
// strategic merge patch of the label, as the operator's ServiceAccount).
// No operator runs here: the test plays its upgrade controller.
func operatorStep(t *testing.T, c client.Client, node, state string) error {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, gate.LabelDriverUpgradeState, state)
	return c.Patch(context.Background(), n, client.RawPatch(types.StrategicMergePatchType, []byte(patch)))
}

func stateOf(t *testing.T, node string) string {
	t.Helper()
	var n corev1.Node
	require.NoError(t, env.Admin.Get(context.Background(), client.ObjectKey{Name: node}, &n))
	return n.Labels[gate.LabelDriverUpgradeState]
}

// TestDriverStep: the per-node guard. The test plays the GPU Operator's
// upgrade controller (no operator runs here), writing each node's driver
// upgrade state as its ServiceAccount. The move into pod-restart-required,
// after which the operator deletes the node's driver Pod, is judged for that
// node at that moment; a refusal leaves the node in its state and the
// controller's retry passes once the cause is gone.
func TestDriverStep(t *testing.T) {
	driverWorld(t)
	ctx := context.Background()
	op, err := client.New(env.CP.ConfigFor(operatorSA, "system:serviceaccounts", "system:serviceaccounts:gpu-operator", "system:authenticated"), client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	alice, _ := as(t, "alice")
	nodes := []string{"gpu-v100-01", "gpu-v100-02", "gpu-v100-04", "gpu-v100-holder", "gpu-h200-01"}
	defer func() {
		for _, n := range nodes {
			_ = patchNode(op, n, `{"metadata":{"labels":{"`+gate.LabelDriverUpgradeState+`":null}}}`) // the operator's own label (docs/ownership.md)
		}
		_ = patchNode(env.Admin, "gpu-v100-holder", `{"metadata":{"labels":{"driver-pool":null}}}`)
		_ = patchNode(env.Admin, "gpu-v100-01", `{"spec":{"unschedulable":false},"metadata":{"annotations":{"nvidia.com/gpu-driver-upgrade-validation-start-time":null}}}`)
		_ = edit(t, env.Admin, ndRef("v100"), func(u *unstructured.Unstructured) { u.SetAnnotations(nil) })
	}()
	// The rollout the operator is about to perform on pool a: NVIDIADriver
	// v100's driver, qualified by record v100-driver (named on it). The
	// version change itself was admitted; its driver reaches each node only
	// through the states below.
	require.NoError(t, edit(t, alice, ndRef("v100"), func(u *unstructured.Unstructured) {
		set("spec.version", "580.130.00")(u)
		annotate(gate.AnnotationQualification, "v100-driver")(u)
	}))
	defer preGate(t, func() { require.NoError(t, edit(t, env.Admin, ndRef("v100"), set("spec.version", "580.126.20"))) })

	own := ownWrites{since: time.Now(), resources: []string{"nodes"}, users: []string{operatorSA}, names: []string{"gpu-v100-01", "gpu-v100-02"}}
	// The controller's other writes never reach a webhook: states before
	// and after the reload, its cordon, its annotations.
	for _, s := range []string{"upgrade-required", "cordon-required", "wait-for-jobs-required", "pod-deletion-required", "drain-required"} {
		require.NoError(t, operatorStep(t, op, "gpu-v100-01", s))
		require.NoError(t, operatorStep(t, op, "gpu-v100-02", s))
	}
	require.NoError(t, patchNode(op, "gpu-v100-01", `{"spec":{"unschedulable":true},"metadata":{"annotations":{"nvidia.com/gpu-driver-upgrade-validation-start-time":"1"}}}`))
	assert.Equal(t, 0, own.reviews(t, webhook.WebhookDriverStep, 11), "no state write before the reload reaches the driver step webhook")
	assert.Equal(t, 0, own.reviews(t, webhook.WebhookNodes, 11), "the operator's Node writes never reach the Node webhook")

	// gpu-v100-01 starts its reload: qualified, idle, nothing else in flight.
	require.NoError(t, operatorStep(t, op, "gpu-v100-01", "pod-restart-required"))
	assert.Equal(t, 1, own.reviews(t, webhook.WebhookDriverStep, 12), "exactly the reload step is reviewed")
	// maxParallelUpgrades is the operator's to honour; the gate holds the
	// disruption budget of one either way: gpu-v100-02 waits in
	// drain-required (and, waiting at this step, did not hold gpu-v100-01).
	// (The message names gpu-v100-01's state as the caches see it, a moment
	// after the write: retried until they do.)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		err = operatorStep(t, op, "gpu-v100-02", "pod-restart-required")
		if err == nil || strings.Contains(err.Error(), "already out: gpu-v100-01 (driver upgrade state pod-restart-required)") || time.Now().After(deadline) {
			break
		}
	}
	requireDenied(t, err, gate.CodeDisruptionBudgetExceeded)
	assert.Contains(t, err.Error(), "already out: gpu-v100-01 (driver upgrade state pod-restart-required)")
	assert.Equal(t, "drain-required", stateOf(t, "gpu-v100-02"), "a refused step leaves the node where it was")
	// A person may not write the state at all: it is the GPU Operator's
	// (gate/ownership.go), whatever the budget says.
	requireDenied(t, operatorStep(t, alice, "gpu-v100-02", "pod-restart-required"), gate.CodeOwnedFactWritten)
	for _, s := range []string{"validation-required", "uncordon-required"} {
		require.NoError(t, operatorStep(t, op, "gpu-v100-01", s))
		requireDenied(t, operatorStep(t, op, "gpu-v100-02", "pod-restart-required"), gate.CodeDisruptionBudgetExceeded)
	}
	// The operator uncordons the node it cordoned at uncordon-required
	// (played here: the upgrade controller's own write), so it is no
	// longer out once done.
	require.NoError(t, patchNode(op, "gpu-v100-01", `{"spec":{"unschedulable":false}}`))
	require.NoError(t, operatorStep(t, op, "gpu-v100-01", "upgrade-done"))
	// The controller retries; the gate's caches see gpu-v100-01 done a
	// moment after the write, so a retry or two may still meet the budget.
	eventuallyWrite(t, func() error { return operatorStep(t, op, "gpu-v100-02", "pod-restart-required") })
	require.NoError(t, operatorStep(t, op, "gpu-v100-02", "upgrade-done"))

	cases := []struct {
		name, node string
		prepare    func()
		codes      []gate.Code
		contains   string
	}{
		// An NVIDIADriver created while the gate was absent (v100-b, an
		// unqualified 580.140.02): stopped at its nodes' step.
		{"an unqualified driver reaches its node", "gpu-v100-04", nil, []gate.Code{gate.CodeRecordMissing}, ""},
		// A busy node labelled into an NVIDIADriver's selector.
		{"a node with GPU holders labelled into the selector", "gpu-v100-holder", func() {
			require.NoError(t, patchNode(env.Admin, "gpu-v100-holder", `{"metadata":{"labels":{"driver-pool":"a"}}}`))
		}, []gate.Code{gate.CodeGPUHolders}, "train-0"},
		{"no NVIDIADriver selects the node", "gpu-h200-01", nil, []gate.Code{gate.CodeFactsMissing}, "the NVIDIADriver that drives node gpu-h200-01 (none selects it)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.prepare != nil {
				tc.prepare()
			}
			require.NoError(t, operatorStep(t, op, tc.node, "drain-required"))
			// gpu-v100-02's upgrade-done reaches the caches a moment late.
			var err error
			eventuallyWrite(t, func() error { err = operatorStep(t, op, tc.node, "pod-restart-required"); return err }, tc.codes...)
			assert.Contains(t, err.Error(), "Node "+tc.node+" driver reload")
			assert.Contains(t, err.Error(), tc.contains)
			assert.Equal(t, "drain-required", stateOf(t, tc.node))
		})
	}
	t.Run("the restart-only shortcut and post-maintenance-required are judged too", func(t *testing.T) {
		require.NoError(t, operatorStep(t, op, "gpu-v100-04", "upgrade-required"))
		requireDenied(t, operatorStep(t, op, "gpu-v100-04", "pod-restart-required"), gate.CodeRecordMissing)
		require.NoError(t, operatorStep(t, op, "gpu-v100-04", "node-maintenance-required"))
		requireDenied(t, operatorStep(t, op, "gpu-v100-04", "post-maintenance-required"), gate.CodeRecordMissing)
	})
	t.Run("through nodes/status", func(t *testing.T) {
		n := &corev1.Node{}
		require.NoError(t, env.Admin.Get(ctx, client.ObjectKey{Name: "gpu-v100-04"}, n))
		n.Labels[gate.LabelDriverUpgradeState] = "pod-restart-required"
		requireDenied(t, op.Status().Update(ctx, n), gate.CodeRecordMissing)
	})
	t.Run("two NVIDIADrivers select the node", func(t *testing.T) {
		preGate(t, func() {
			require.NoError(t, env.Admin.Create(ctx, nvidiaObject("nvidia.com/v1alpha1", "NVIDIADriver", "overlap", map[string]any{"version": "580.130.00", "nodeSelector": map[string]any{"driver-pool": "b"}})))
		})
		defer preGate(t, func() { require.NoError(t, env.Admin.Delete(ctx, ndRef("overlap"))) })
		err := operatorStep(t, op, "gpu-v100-04", "pod-restart-required")
		requireDenied(t, err, gate.CodeFactsMissing)
		assert.Contains(t, err.Error(), "overlap and v100-b all select it")
	})
	t.Run("a node no NVIDIADriver selects takes the default one", func(t *testing.T) {
		preGate(t, func() {
			require.NoError(t, env.Admin.Create(ctx, nvidiaObject("nvidia.com/v1alpha1", "NVIDIADriver", "fallback", map[string]any{"version": "580.126.20", "default": true})))
		})
		defer preGate(t, func() { require.NoError(t, env.Admin.Delete(ctx, ndRef("fallback"))) })
		err := operatorStep(t, op, "gpu-h200-01", "pod-restart-required")
		requireDenied(t, err, gate.CodeRecordMissing)
		assert.Contains(t, err.Error(), "rolling out NVIDIADriver fallback")
	})
	t.Run("without useNvidiaDriverCRD the ClusterPolicy's driver rolls out", func(t *testing.T) {
		preGate(t, func() { require.NoError(t, edit(t, env.Admin, cpRef(), set("spec.driver.useNvidiaDriverCRD", false))) })
		defer preGate(t, func() { require.NoError(t, edit(t, env.Admin, cpRef(), set("spec.driver.useNvidiaDriverCRD", true))) })
		err := operatorStep(t, op, "gpu-h200-01", "pod-restart-required")
		requireDenied(t, err, gate.CodeRecordMissing)
		assert.Contains(t, err.Error(), "rolling out ClusterPolicy cluster-policy")
	})
}

// TestDriverOperatorWrites: the operator's writes of its own objects (status,
// metadata) never reach a webhook.
func TestDriverOperatorWrites(t *testing.T) {
	driverWorld(t)
	ctx := context.Background()
	op, err := client.New(env.CP.ConfigFor(operatorSA, "system:serviceaccounts", "system:serviceaccounts:gpu-operator", "system:authenticated"), client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	own := ownWrites{since: time.Now(), users: []string{operatorSA}, names: []string{"cluster-policy", "v100"},
		resources: []string{"clusterpolicies", "clusterpolicies/status", "nvidiadrivers", "nvidiadrivers/status"}}
	for _, ref := range []*unstructured.Unstructured{cpRef(), ndRef("v100")} {
		u := getObj(t, ref)
		require.NoError(t, unstructured.SetNestedField(u.Object, "ready", "status", "state"))
		require.NoError(t, op.Status().Update(ctx, u))
		require.NoError(t, edit(t, op, ref, func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{"app.kubernetes.io/managed-by": "gpu-operator"})
			u.SetFinalizers([]string{"nvidia.com/finalizer"})
		}))
		require.NoError(t, edit(t, op, ref, func(u *unstructured.Unstructured) { u.SetFinalizers(nil) }))
	}
	assert.Equal(t, 0, own.reviews(t, webhook.WebhookDriver, 6), "status and metadata writes never reach the driver webhook")
}

// TestOperatorUpgrade: a new GPU Operator version, by helm upgrade (the
// Deployment's image) or by approving an OLM InstallPlan, is part of every
// GPU node's tuple: each node's hardware needs a record for it.
func TestOperatorUpgrade(t *testing.T) {
	driverWorld(t)
	ctx := context.Background()
	alice, _ := as(t, "alice")
	ref := types.NamespacedName{Namespace: env.Config.GPUOperator.Namespace, Name: env.Config.GPUOperator.Name}
	setImage := func(c client.Client, image string, annotations map[string]string) error {
		var d appsv1.Deployment
		require.NoError(t, env.Admin.Get(ctx, ref, &d))
		d.Spec.Template.Spec.Containers[0].Image = image
		d.Annotations = annotations
		return c.Update(ctx, &d)
	}
	rec := testenv.Record("v100-op-26-6", now.Add(-24*time.Hour), func(r *qualification.Record) {
		r.Target = testenv.Source
		r.Target.GPUOperator = "v26.6.0"
	})
	require.NoError(t, env.CreateRecords(ctx, map[string]*qualification.Record{"v100-op": rec}))

	const olmUser = "system:serviceaccount:olm:olm-operator-serviceaccount"
	own := ownWrites{since: time.Now(), resources: []string{"deployments", "installplans"}, users: []string{"alice", olmUser},
		names: []string{ref.Name, "install-gpu-op", "install-nfd"}}
	requireDenied(t, setImage(alice, "nvcr.io/nvidia/gpu-operator:v26.6.0", nil), gate.CodeRecordMissing)
	err := setImage(alice, "nvcr.io/nvidia/gpu-operator:v26.6.0", map[string]string{gate.AnnotationQualification: "v100-op"})
	requireDeniedWith(t, err, gate.CodeHardwareNotQualified, gate.CodeTargetNotQualified)
	assert.Contains(t, err.Error(), "node gpu-h200-01", "the H200 has no record for the new operator")
	assert.Contains(t, err.Error(), "node gpu-v100-kernel133 would run", "a V100 on another kernel is not the record's target")
	assert.NotContains(t, err.Error(), "node gpu-v100-01 ", "a V100 on the source tuple is covered")
	assert.Equal(t, 2, own.reviews(t, webhook.WebhookOperator, 2))

	// OLM: approving the InstallPlan that installs the new CSV.
	ip := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
		"metadata": map[string]any{"name": "install-gpu-op", "namespace": ref.Namespace},
		"spec":     map[string]any{"approval": "Manual", "approved": false, "clusterServiceVersionNames": []any{"gpu-operator-certified.v26.6.0"}}}}
	require.NoError(t, alice.Create(ctx, ip))
	requireDenied(t, edit(t, alice, ip, set("spec.approved", true)), gate.CodeRecordMissing)
	requireDeniedWith(t, edit(t, alice, ip, func(u *unstructured.Unstructured) {
		set("spec.approved", true)(u)
		annotate(gate.AnnotationQualification, "v100-op")(u)
	}), gate.CodeHardwareNotQualified)
	assert.False(t, getObj(t, ip).Object["spec"].(map[string]any)["approved"].(bool), "a refused approval is not stored")
	require.NoError(t, edit(t, alice, ip, annotate("note", "edits before the approval are not reviewed")))
	other := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
		"metadata": map[string]any{"name": "install-nfd", "namespace": ref.Namespace},
		"spec":     map[string]any{"approval": "Manual", "approved": false, "clusterServiceVersionNames": []any{"nfd.v4.17.0"}}}}
	require.NoError(t, alice.Create(ctx, other))
	require.NoError(t, edit(t, alice, other, set("spec.approved", true)), "another operator's InstallPlan is not the gate's")
	for _, o := range []*unstructured.Unstructured{ip, other} {
		require.NoError(t, env.Admin.Delete(ctx, o))
	}

	// Edits that change no version, and OLM's own write, reach no webhook.
	var d appsv1.Deployment
	require.NoError(t, env.Admin.Get(ctx, ref, &d))
	d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}}
	require.NoError(t, alice.Update(ctx, &d))
	olm, err := client.New(env.CP.ConfigFor(olmUser, "system:serviceaccounts", "system:serviceaccounts:olm", "system:authenticated"), client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	require.NoError(t, setImage(olm, "nvcr.io/nvidia/gpu-operator:v26.6.0", nil), "OLM applies what an approved InstallPlan installs")
	require.NoError(t, setImage(olm, "nvcr.io/nvidia/gpu-operator:"+testenv.Source.GPUOperator, nil))
	assert.Equal(t, 4, own.reviews(t, webhook.WebhookOperator, 11), "no version change and OLM's writes are not reviewed")

	// Deleting the operator and creating it again with a new image (helm
	// uninstall, helm install) is an upgrade too: refused, whatever the
	// gate's cache still holds of the old Deployment.
	var old appsv1.Deployment
	require.NoError(t, env.Admin.Get(ctx, ref, &old))
	require.NoError(t, env.Admin.Delete(ctx, &old))
	defer preGate(t, func() {
		restored := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: old.Name, Namespace: old.Namespace}, Spec: old.Spec}
		restored.Spec.Template.Spec.Containers[0].Image = "nvcr.io/nvidia/gpu-operator:" + testenv.Source.GPUOperator
		require.NoError(t, env.Admin.Create(ctx, restored))
		require.NoError(t, env.OperatorRollout(ctx, 1, 1, 1), "rolled out, as the Deployment controller would report it")
	})
	recreated := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: old.Name, Namespace: old.Namespace, Annotations: map[string]string{gate.AnnotationQualification: "v100-op"}}, Spec: old.Spec}
	recreated.Spec.Template.Spec.Containers[0].Image = "nvcr.io/nvidia/gpu-operator:v26.6.0"
	err = alice.Create(ctx, recreated)
	requireDeniedWith(t, err)
	assert.Contains(t, err.Error(), "node gpu-h200-01", "every GPU node is judged")
}

// TestValidatorSectionThroughAPIServer (issue 25): the GPU Operator writes
// its validator DaemonSet, unjudged, from the ClusterPolicy's
// spec.validator, so a change of that section now reaches the gate: an
// image of another repository, or the validator's GPU workload switched
// off, is refused with ValidatorForged; a version change within the
// validator's repository (the operator's own upgrade) is admitted.
func TestValidatorSectionThroughAPIServer(t *testing.T) {
	driverWorld(t)
	alice, _ := as(t, "alice")
	nvidia := map[string]any{"repository": "nvcr.io/nvidia/cloud-native", "image": "gpu-operator-validator", "version": "v26.3.4"}
	defer preGate(t, func() {
		require.NoError(t, edit(t, env.Admin, cpRef(), func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "spec", "validator") }))
	})
	requireDenied(t, edit(t, alice, cpRef(), set("spec.validator", map[string]any{"repository": "docker.io/mallory", "image": "always-ready", "version": "v1"})), gate.CodeValidatorForged)
	require.NoError(t, edit(t, alice, cpRef(), set("spec.validator", nvidia)), "a version within the validator's repository")
	require.NoError(t, edit(t, alice, cpRef(), set("spec.validator.plugin", map[string]any{"env": []any{map[string]any{"name": "WITH_WORKLOAD", "value": "true"}}})), "the workload on")
	requireDenied(t, edit(t, alice, cpRef(), set("spec.validator.plugin", map[string]any{"env": []any{map[string]any{"name": "WITH_WORKLOAD", "value": "false"}}})), gate.CodeValidatorForged)
}
