package webhook

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/dra"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

func daemonSet(ns, name string, labels map[string]any, images ...string) *unstructured.Unstructured {
	var cs []any
	for i, image := range images {
		cs = append(cs, map[string]any{"name": "c" + string(rune('0'+i)), "image": image})
	}
	meta := map[string]any{"name": name, "namespace": ns}
	if labels != nil {
		meta["labels"] = labels
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta,
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": cs}}}}}
}

// TestDRADriverDaemonSetVersion: the kubelet plugin's release is its image
// tag; a digest alone needs the version label; what cannot be read stays
// unreadable (VersionInvalid in the gate), never "unchanged".
func TestDRADriverDaemonSetVersion(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("cd", 32)
	for _, tc := range []struct {
		name string
		ds   *unstructured.Unstructured
		want string
	}{
		{"tag of both containers", daemonSet("dra", "plugin", nil, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1", "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"), "v25.8.1"},
		{"digest alone, with the version label", daemonSet("dra", "plugin", map[string]any{gate.LabelVersion: "v25.8.1"}, "nvcr.io/nvidia/k8s-dra-driver-gpu"+digest), "v25.8.1"},
		{"digest alone, no label: unreadable", daemonSet("dra", "plugin", nil, "nvcr.io/nvidia/k8s-dra-driver-gpu"+digest), "sha256:cdcdcdcdcdcd..."},
		{"no containers", daemonSet("dra", "plugin", nil), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, _ := draVersion(tc.ds)
			assert.Equal(t, tc.want, v)
		})
	}
}

// TestDRADriverOtherDaemonSets: a DaemonSet that is no configured DRA
// driver's kubelet plugin is never judged as the driver, whatever its image;
// outside the drivers' namespaces nothing is even read.
func TestDRADriverOtherDaemonSets(t *testing.T) {
	cfg := gate.DefaultConfig()
	cfg.DRADrivers = []dra.Driver{{Name: "gpu.nvidia.com", Namespace: "nvidia-dra-driver-gpu", DaemonSet: "nvidia-dra-driver-gpu-kubelet-plugin"}}
	// Every live read fails: none may happen.
	s := &Server{Config: cfg, Facts: &Facts{Config: cfg, Live: liveObjects{fail: map[string]bool{"list/*unstructured.UnstructuredList": true}}}}
	for _, tc := range []struct{ ns, name string }{
		{"kube-system", "nvidia-dra-driver-gpu-kubelet-plugin"},
		{"gpu-operator", "nvidia-dcgm-exporter"},
	} {
		t.Run(tc.ns+"/"+tc.name, func(t *testing.T) {
			req := daemonSetReview(t, admissionv1.Update, daemonSet(tc.ns, tc.name, nil, "r/x:v2.0.0"), daemonSet(tc.ns, tc.name, nil, "r/x:v1.0.0"))
			d, err := s.decideDriver(context.Background(), req)
			require.NoError(t, err)
			assert.True(t, d.Allowed)
			assert.Empty(t, d.Codes())
		})
	}
	_, judged := s.draDaemonSet(daemonSet("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu-kubelet-plugin", nil))
	assert.True(t, judged, "the configured one is judged")
}

func daemonSetReview(t *testing.T, op admissionv1.Operation, obj, old *unstructured.Unstructured) admission.Request {
	t.Helper()
	raw := func(u *unstructured.Unstructured) runtime.RawExtension {
		if u == nil {
			return runtime.RawExtension{}
		}
		b, err := u.MarshalJSON()
		require.NoError(t, err)
		return runtime.RawExtension{Raw: b}
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Namespace: obj.GetNamespace(), Name: obj.GetName(),
		Kind:   metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"},
		Object: raw(obj), OldObject: raw(old), UserInfo: authv1.UserInfo{Username: "alice"}}}
}

// TestDRAOtherDaemonSetRunsTheDriver: another DaemonSet of a DRA driver's
// namespace is refused when it runs the configured plugin's image, read
// live (DRAPluginForged); another image is admitted; a read that fails is
// FactsMissing, never an allow.
func TestDRAOtherDaemonSetRunsTheDriver(t *testing.T) {
	const ns = "nvidia-dra-driver-gpu"
	cfg := gate.DefaultConfig()
	cfg.DRADrivers = []dra.Driver{{Name: "gpu.nvidia.com", Namespace: ns, DaemonSet: "nvidia-dra-driver-gpu-kubelet-plugin"}}
	plugin := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nvidia-dra-driver-gpu-kubelet-plugin"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "gpus", Image: "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0"}}}}}}
	live := fake.NewClientBuilder().WithObjects(plugin).Build()
	s := &Server{Config: cfg, Facts: &Facts{Config: cfg, Live: live}}
	for _, tc := range []struct {
		name  string
		image string
		live  client.Reader
		code  gate.Code // "": allowed
	}{
		{"the driver's image under another name", "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1", live, gate.CodeDRAPluginForged},
		{"another image", "quay.io/prometheus/node-exporter:v1.9.0", live, ""},
		{"the plugins cannot be read", "quay.io/prometheus/node-exporter:v1.9.0", liveObjects{fail: map[string]bool{"list/*unstructured.UnstructuredList": true}}, gate.CodeFactsMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.Facts.Live = tc.live
			d, err := s.decideDriver(context.Background(), daemonSetReview(t, admissionv1.Create, daemonSet(ns, "dra-driver-copy", nil, tc.image), nil))
			require.NoError(t, err)
			if tc.code == "" {
				assert.True(t, d.Allowed, d.Message())
				return
			}
			assert.Equal(t, []gate.Code{tc.code}, d.Codes(), d.Message())
		})
	}
}

// TestNamespaceDeletion: the DELETE of a namespace that is no GPU
// driver's is admitted unread; a DRA driver's namespace whose plugins
// cannot be read is FactsMissing; one with no plugin DaemonSet unloads
// nothing the gate knows. The GPU Operator's namespace (and its
// validator's, configured apart) is judged as the unload of every GPU
// node's driver, whatever DaemonSets it holds: without the cluster's facts
// it is FactsMissing, never allowed. (A plugin there, and the operator's
// namespace on the real fleet: test/e2e TestDRANamespaceDeletion,
// TestGPUOperatorNamespaceDeletion.)
func TestNamespaceDeletion(t *testing.T) {
	cfg := gate.DefaultConfig()
	cfg.DRADrivers = []dra.Driver{{Name: "gpu.nvidia.com", Namespace: "nvidia-dra-driver-gpu", DaemonSet: "nvidia-dra-driver-gpu-kubelet-plugin"}}
	cfg.Proof.Validator.Namespace = "nvidia-validator"
	failing := liveObjects{fail: map[string]bool{"list/*unstructured.UnstructuredList": true}}
	review := func(name string) admission.Request {
		b := []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + name + `"}}`)
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Delete, Namespace: name, Name: name,
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Namespace"}, OldObject: runtime.RawExtension{Raw: b}}}
	}
	for _, tc := range []struct {
		name, ns string
		live     client.Reader
		code     gate.Code
	}{
		{"another namespace, not even read", "ml", failing, ""},
		{"the driver's, unreadable", "nvidia-dra-driver-gpu", failing, gate.CodeFactsMissing},
		{"the driver's, without its plugin DaemonSet", "nvidia-dra-driver-gpu", fake.NewClientBuilder().Build(), ""},
		{"the GPU Operator's, without its DaemonSets: judged all the same", "gpu-operator", fake.NewClientBuilder().Build(), gate.CodeFactsMissing},
		{"the validator's, configured apart", "nvidia-validator", fake.NewClientBuilder().Build(), gate.CodeFactsMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{Config: cfg, Facts: &Facts{Config: cfg, Live: tc.live}}
			d, err := s.decideNamespace(context.Background(), review(tc.ns))
			require.NoError(t, err)
			if tc.code == "" {
				assert.True(t, d.Allowed, d.Message())
				return
			}
			assert.Equal(t, []gate.Code{tc.code}, d.Codes(), d.Message())
		})
	}
}

// TestDRADaemonSetReloadAtTheSameVersion: the plugin's Pod template
// changing while the version reads the same (another repository under the
// same tag, a new digest under the same version label, another command or
// env, a rollout restart, its scheduling) is judged as a reload of that
// version, not let through as no change; a label-only edit or an update
// strategy is no reload, and a version move is a move, not a reload.
// withInit gives the DaemonSet's Pod template one init container.
func withInit(u *unstructured.Unstructured, image string) *unstructured.Unstructured {
	_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "init", "image": image}}, "spec", "template", "spec", "initContainers")
	return u
}

// templated sets a field of u; under containers, of its first container.
func templated(u *unstructured.Unstructured, v any, path ...string) *unstructured.Unstructured {
	if i := slices.Index(path, "containers"); i >= 0 {
		cs, _, _ := unstructured.NestedSlice(u.Object, path[:i+1]...)
		c := cs[0].(map[string]any)
		c[path[i+1]] = v
		_ = unstructured.SetNestedSlice(u.Object, cs, path[:i+1]...)
		return u
	}
	_ = unstructured.SetNestedField(u.Object, v, path...)
	return u
}

func TestDRADaemonSetReloadAtTheSameVersion(t *testing.T) {
	digest := func(b string) string { return "@sha256:" + strings.Repeat(b, 32) }
	label := map[string]any{gate.LabelVersion: "v25.8.1"}
	for _, tc := range []struct {
		name            string
		old, cur        *unstructured.Unstructured
		reload, version bool
	}{
		{"another repository, same tag", daemonSet("dra", "plugin", nil, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"),
			daemonSet("dra", "plugin", nil, "registry.example.com/fork/k8s-dra-driver-gpu:v25.8.1"), true, false},
		{"a new digest under the same version label", daemonSet("dra", "plugin", label, "nvcr.io/nvidia/k8s-dra-driver-gpu"+digest("cd")),
			daemonSet("dra", "plugin", label, "nvcr.io/nvidia/k8s-dra-driver-gpu"+digest("ef")), true, false},
		{"the same images", daemonSet("dra", "plugin", nil, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"),
			daemonSet("dra", "plugin", map[string]any{"team": "x"}, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"), false, false},
		{"another init container image at the same version", daemonSet("dra", "plugin", nil, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"),
			withInit(daemonSet("dra", "plugin", nil, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"), "registry.example.com/init:1"), true, false},
		{"a new version", daemonSet("dra", "plugin", nil, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0"),
			daemonSet("dra", "plugin", nil, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"), false, true},
		// Any other field of the Pod template restarts the plugin too.
		{"another command", daemonSet("dra", "plugin", nil, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"),
			templated(daemonSet("dra", "plugin", nil, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"), []any{"gpu-kubelet-plugin", "--v=6"}, "spec", "template", "spec", "containers", "command"), true, false},
		{"another env", daemonSet("dra", "plugin", nil, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"),
			templated(daemonSet("dra", "plugin", nil, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"), []any{map[string]any{"name": "NVIDIA_DRIVER_ROOT", "value": "/"}}, "spec", "template", "spec", "containers", "env"), true, false},
		{"kubectl rollout restart", daemonSet("dra", "plugin", nil, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"),
			templated(daemonSet("dra", "plugin", nil, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"), map[string]any{"kubectl.kubernetes.io/restartedAt": "2026-12-02T06:00:00Z"}, "spec", "template", "metadata", "annotations"), true, false},
		{"a nodeSelector (the kept nodes get a new Pod too)", daemonSet("dra", "plugin", nil, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"),
			templated(daemonSet("dra", "plugin", nil, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"), map[string]any{"nvidia.com/gpu.present": "true"}, "spec", "template", "spec", "nodeSelector"), true, false},
		{"the update strategy alone", daemonSet("dra", "plugin", nil, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"),
			templated(daemonSet("dra", "plugin", nil, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"), map[string]any{"type": "OnDelete"}, "spec", "updateStrategy"), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ch gate.DriverChange
			require.NoError(t, draDaemonSetChange(&ch, dra.Driver{}, tc.cur, tc.old, admissionv1.Update))
			assert.Equal(t, tc.reload, ch.Reload)
			assert.Equal(t, tc.version, ch.OldDRA != ch.NewDRA)
		})
	}
}

// TestDRADaemonSetCreateAndDelete: a DELETE is the driver's removal at the
// version it ran (an unload, judged by holders and rollouts); a CREATE
// carries the driver and the new DaemonSet's selector, so the gate judges it
// from what the nodes still run of that driver; a selector that cannot be
// read is an error, never "nothing left".
func TestDRADaemonSetCreateAndDelete(t *testing.T) {
	d := dra.Driver{Name: "gpu.nvidia.com", Namespace: "nvidia-dra-driver-gpu", DaemonSet: "nvidia-dra-driver-gpu-kubelet-plugin"}
	ds := daemonSet(d.Namespace, d.DaemonSet, nil, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1")

	var del gate.DriverChange
	require.NoError(t, draDaemonSetChange(&del, d, ds, ds, admissionv1.Delete))
	assert.Equal(t, "v25.8.1", del.OldDRA)
	assert.Equal(t, del.OldDRA, del.NewDRA, "nothing moves: the driver goes")
	assert.Nil(t, del.DRAPlugin)

	require.NoError(t, unstructured.SetNestedField(ds.Object, map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "kubelet-plugin"}}, "spec", "selector"))
	var create gate.DriverChange
	require.NoError(t, draDaemonSetChange(&create, d, ds, nil, admissionv1.Create))
	assert.Empty(t, create.OldDRA)
	assert.Equal(t, "v25.8.1", create.NewDRA)
	require.NotNil(t, create.DRAPlugin)
	assert.Equal(t, d, create.DRAPlugin.Driver)
	assert.Equal(t, "app.kubernetes.io/name=kubelet-plugin", create.DRAPlugin.Pods.String())

	require.NoError(t, unstructured.SetNestedField(ds.Object, map[string]any{"matchExpressions": []any{map[string]any{"key": "app", "operator": "Sideways"}}}, "spec", "selector"))
	assert.ErrorContains(t, draDaemonSetChange(&gate.DriverChange{}, d, ds, nil, admissionv1.Create), "spec.selector")
}

// TestDRADaemonSetSchedulingChange: an UPDATE carries the DaemonSet's
// scheduling before and after, so the gate can judge the nodes it stops
// selecting; a template that cannot be read is an error.
func TestDRADaemonSetSchedulingChange(t *testing.T) {
	d := dra.Driver{Name: "gpu.nvidia.com", Namespace: "nvidia-dra-driver-gpu", DaemonSet: "nvidia-dra-driver-gpu-kubelet-plugin"}
	old := daemonSet(d.Namespace, d.DaemonSet, nil, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1")
	cur := old.DeepCopy()
	require.NoError(t, unstructured.SetNestedStringMap(cur.Object, map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200"}, "spec", "template", "spec", "nodeSelector"))

	var ch gate.DriverChange
	require.NoError(t, draDaemonSetChange(&ch, d, cur, old, admissionv1.Update))
	require.NotNil(t, ch.DRAScheduling)
	assert.Empty(t, ch.DRAScheduling.Old.Spec.Template.Spec.NodeSelector)
	assert.Equal(t, map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200"}, ch.DRAScheduling.New.Spec.Template.Spec.NodeSelector)

	require.NoError(t, unstructured.SetNestedField(cur.Object, "sideways", "spec", "template", "spec", "affinity"))
	assert.ErrorContains(t, draDaemonSetChange(&gate.DriverChange{}, d, cur, old, admissionv1.Update), "object spec.template.spec (nodeSelector, affinity)")
}

// TestDRAMatchConditionSendsTemplateChanges evaluates the chart's match
// condition with the API server's CEL environment (its base libraries,
// object and oldObject untyped as the webhook's match conditions see a
// DaemonSet): any change of the Pod template (its scheduling, an image, a
// command, a rollout restart's annotation) reaches the gate, and the
// version label; the DaemonSet's own metadata, status and update strategy
// do not.
func TestDRAMatchConditionSendsTemplateChanges(t *testing.T) {
	prog := matchConditionProgram(t, WebhookDRAPlugins, "created-deleted-or-template-changes")
	affinity := func(values ...any) map[string]any {
		return map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{
			map[string]any{"matchExpressions": []any{map[string]any{"key": "nvidia.com/gpu.product", "operator": "In", "values": values}}}}}}}
	}
	for _, tc := range []struct {
		name string
		edit func(u *unstructured.Unstructured)
		sent bool
	}{
		{"the DaemonSet's own annotation", func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{"a": "b"}) }, false},
		{"the status changes", func(u *unstructured.Unstructured) {
			require.NoError(t, unstructured.SetNestedField(u.Object, int64(3), "status", "numberReady"))
		}, false},
		{"the update strategy", func(u *unstructured.Unstructured) {
			require.NoError(t, unstructured.SetNestedField(u.Object, map[string]any{"type": "OnDelete"}, "spec", "updateStrategy"))
		}, false},
		{"the version label", func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{gate.LabelVersion: "v25.8.1"}) }, true},
		{"a preferred node affinity changes", func(u *unstructured.Unstructured) {
			require.NoError(t, unstructured.SetNestedField(u.Object, map[string]any{"nodeAffinity": map[string]any{"preferredDuringSchedulingIgnoredDuringExecution": []any{}}}, "spec", "template", "spec", "affinity"))
		}, true},
		{"the image changes", func(u *unstructured.Unstructured) {
			require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "c0", "image": "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.12.0"}}, "spec", "template", "spec", "containers"))
		}, true},
		{"the command changes", func(u *unstructured.Unstructured) {
			templated(u, []any{"sh", "-c", "true"}, "spec", "template", "spec", "containers", "command")
		}, true},
		{"kubectl rollout restart", func(u *unstructured.Unstructured) {
			templated(u, map[string]any{"kubectl.kubernetes.io/restartedAt": "2026-12-02T06:00:00Z"}, "spec", "template", "metadata", "annotations")
		}, true},
		{"a nodeSelector is added", func(u *unstructured.Unstructured) {
			require.NoError(t, unstructured.SetNestedStringMap(u.Object, map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200"}, "spec", "template", "spec", "nodeSelector"))
		}, true},
		{"a required node affinity is added", func(u *unstructured.Unstructured) {
			require.NoError(t, unstructured.SetNestedField(u.Object, affinity("NVIDIA-H200"), "spec", "template", "spec", "affinity"))
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := daemonSet("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu-kubelet-plugin", nil, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1")
			cur := old.DeepCopy()
			tc.edit(cur)
			out, _, err := prog.Eval(map[string]any{"object": cur.Object, "oldObject": old.Object, "request": map[string]any{"operation": "UPDATE"}})
			require.NoError(t, err)
			assert.Equal(t, tc.sent, out.Value())
		})
	}
	for _, op := range []string{"CREATE", "DELETE"} {
		ds := daemonSet("nvidia-dra-driver-gpu", "x", nil, "x:1").Object
		out, _, err := prog.Eval(map[string]any{"object": ds, "oldObject": ds, "request": map[string]any{"operation": op}})
		require.NoError(t, err)
		assert.Equal(t, true, out.Value(), op)
	}
}

// TestDRAMatchConditionLeavesTheNamespaceController: the namespace
// controller's deletion of a plugin DaemonSet (its namespace's deletion was
// judged) never reaches the gate; the garbage collector's, and the
// namespace controller's other writes, do.
func TestDRAMatchConditionLeavesTheNamespaceController(t *testing.T) {
	prog := matchConditionProgram(t, WebhookDRAPlugins, "not-the-namespace-controller")
	for _, tc := range []struct {
		name, op, user string
		sent           bool
	}{
		{"the namespace controller deletes", "DELETE", "system:serviceaccount:kube-system:namespace-controller", false},
		{"the garbage collector deletes", "DELETE", "system:serviceaccount:kube-system:generic-garbage-collector", true},
		{"kube-controller-manager deletes (no ServiceAccount credentials)", "DELETE", "system:kube-controller-manager", true},
		{"a person deletes", "DELETE", "alice", true},
		{"the namespace controller's identity updates", "UPDATE", "system:serviceaccount:kube-system:namespace-controller", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := prog.Eval(map[string]any{"request": map[string]any{"operation": tc.op, "userInfo": map[string]any{"username": tc.user}}})
			require.NoError(t, err)
			assert.Equal(t, tc.sent, out.Value())
		})
	}
}

// matchConditionProgram compiles the table's match condition name of
// webhook in the API server's CEL environment, object, oldObject and
// request untyped.
func matchConditionProgram(t *testing.T, webhook, name string) cel.Program {
	t.Helper()
	var cond string
	for _, w := range Webhooks {
		for _, m := range w.MatchConditions {
			if w.Name == webhook && m.Name == name {
				cond = m.CEL
			}
		}
	}
	require.NotEmpty(t, cond, "%s has no match condition %s", webhook, name)
	return celProgram(t, cond)
}

// celProgram compiles a match condition in the API server's CEL
// environment, object, oldObject and request untyped.
func celProgram(t *testing.T, cond string) cel.Program {
	t.Helper()
	set, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        []cel.EnvOption{cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType), cel.Variable("request", cel.DynType)},
	})
	require.NoError(t, err)
	env, err := set.Env(environment.NewExpressions)
	require.NoError(t, err)
	ast, issues := env.Compile(cond)
	require.NoError(t, issues.Err())
	prog, err := env.Program(ast)
	require.NoError(t, err)
	return prog
}

// TestValidatorMatchConditionSendsItsPods: the validator webhook sends a
// CREATE and a change of its Pods' spec or labels; a rollout restart, the
// DaemonSet's own metadata and its status stay away.
func TestValidatorMatchConditionSendsItsPods(t *testing.T) {
	prog := matchConditionProgram(t, WebhookValidator, "created-or-its-pods-change")
	for _, tc := range []struct {
		name string
		op   string
		edit func(u *unstructured.Unstructured)
		sent bool
	}{
		{"created", "CREATE", func(*unstructured.Unstructured) {}, true},
		{"its image", "UPDATE", func(u *unstructured.Unstructured) {
			templated(u, "registry.example.com/always-ready:1", "spec", "template", "spec", "containers", "image")
		}, true},
		{"its Pods' labels", "UPDATE", func(u *unstructured.Unstructured) {
			templated(u, map[string]any{"app": "x"}, "spec", "template", "metadata", "labels")
		}, true},
		{"kubectl rollout restart", "UPDATE", func(u *unstructured.Unstructured) {
			templated(u, map[string]any{"kubectl.kubernetes.io/restartedAt": "2026-12-02T06:00:00Z"}, "spec", "template", "metadata", "annotations")
		}, false},
		{"the DaemonSet's own labels", "UPDATE", func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"a": "b"}) }, false},
		{"its status", "UPDATE", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(3), "status", "numberReady")
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := daemonSet("gpu-operator", "nvidia-operator-validator", nil, "nvcr.io/nvidia/gpu-operator:v25.3.0")
			cur := old.DeepCopy()
			tc.edit(cur)
			out, _, err := prog.Eval(map[string]any{"object": cur.Object, "oldObject": old.Object, "request": map[string]any{"operation": tc.op}})
			require.NoError(t, err)
			assert.Equal(t, tc.sent, out.Value())
		})
	}
}

// TestNodeMatchConditionSendsTaints: the Node webhook's change condition
// sends a taint write that can start or stop a DaemonSet's Pod on the node
// (a NoExecute taint added, a NoSchedule or NoExecute one lifted, by key,
// effect and value), and decides by who writes, never by the key: the
// system's identities (kube-system's ServiceAccounts, the
// kube-controller-manager) and the configured node-taint controllers never
// wait on the gate for a taint, anyone else's is sent whatever its key
// (a made-up node.kubernetes.io/ key, the out-of-service taint). Seen
// failing before: every taint write stayed away; then the node.kubernetes.io/
// and out-of-service keys stayed away for everyone.
func TestNodeMatchConditionSendsTaints(t *testing.T) {
	const (
		alice          = "alice"
		nodeController = "system:serviceaccount:kube-system:node-controller"
		autoscaler     = "system:serviceaccount:kube-system:cluster-autoscaler"
		karpenter      = "system:serviceaccount:karpenter:karpenter"
		nhc            = "system:serviceaccount:medik8s:self-node-remediation"
	)
	prog := celProgram(t, NodeChangeCondition([]string{karpenter, nhc}))
	taint := func(key, value, effect string) map[string]any {
		out := map[string]any{"key": key, "effect": effect}
		if value != "" {
			out["value"] = value
		}
		return out
	}
	dedicated := taint("example.com/dedicated", "ml", "NoSchedule")
	maintenance := taint("example.com/maintenance", "", "NoExecute")
	outOfService := taint("node.kubernetes.io/out-of-service", "nodeshutdown", "NoExecute")
	toBeDeleted := taint("ToBeDeletedByClusterAutoscaler", "1733148000", "NoSchedule")
	for _, tc := range []struct {
		name     string
		writer   string
		old, cur []any
		sent     bool
	}{
		{"a NoExecute taint added", alice, nil, []any{maintenance}, true},
		{"a NoSchedule taint lifted", alice, []any{dedicated}, nil, true},
		{"a NoExecute taint lifted", alice, []any{maintenance}, nil, true},
		{"a taint's value changes", alice, []any{dedicated}, []any{taint("example.com/dedicated", "batch", "NoSchedule")}, true},
		{"a taint's effect changes to NoExecute", alice, []any{dedicated}, []any{taint("example.com/dedicated", "ml", "NoExecute")}, true},
		{"a NoSchedule taint added: keeps every running Pod", alice, nil, []any{dedicated}, false},
		{"a PreferNoSchedule taint added and lifted", alice, []any{taint("example.com/a", "", "PreferNoSchedule")}, []any{taint("example.com/b", "", "PreferNoSchedule")}, false},
		{"the taints reordered", alice, []any{dedicated, maintenance}, []any{maintenance, dedicated}, false},
		{"the taint manager's timeAdded", alice, []any{maintenance}, []any{map[string]any{"key": "example.com/maintenance", "effect": "NoExecute", "timeAdded": "2026-12-02T15:00:00Z"}}, false},
		// A person escapes by no spelling.
		{"a person's made-up node.kubernetes.io/ NoExecute taint", alice, nil, []any{taint("node.kubernetes.io/made-up", "", "NoExecute")}, true},
		{"a person lifts the node-lifecycle controller's not-ready", alice, []any{taint("node.kubernetes.io/not-ready", "", "NoExecute")}, nil, true},
		{"a person lifts the cloud controller's uninitialized", alice, []any{taint("node.cloudprovider.kubernetes.io/uninitialized", "true", "NoSchedule")}, nil, true},
		{"a person lifts a control-plane role taint", alice, []any{taint("node-role.kubernetes.io/control-plane", "", "NoSchedule")}, nil, true},
		{"a person's out-of-service taint", alice, nil, []any{outOfService}, true},
		{"a person lifts the out-of-service taint", alice, []any{outOfService}, nil, true},
		{"a person's taint beside the system's", alice, []any{taint("node.kubernetes.io/not-ready", "", "NoSchedule")}, []any{maintenance}, true},
		{"a person writes the autoscaler's taint", alice, []any{toBeDeleted}, nil, true},
		// The system and the configured controllers never wait on the gate.
		{"the node-lifecycle controller's unreachable taint", nodeController, nil, []any{taint("node.kubernetes.io/unreachable", "", "NoExecute")}, false},
		{"the node-lifecycle controller lifts not-ready", nodeController, []any{taint("node.kubernetes.io/not-ready", "", "NoExecute")}, nil, false},
		{"the kube-controller-manager as its own user", "system:kube-controller-manager", nil, []any{taint("node.kubernetes.io/unreachable", "", "NoExecute")}, false},
		{"the cloud controller lifts uninitialized", "system:serviceaccount:kube-system:cloud-node-controller", []any{taint("node.cloudprovider.kubernetes.io/uninitialized", "true", "NoSchedule")}, nil, false},
		{"RKE2's cloud controller manager lifts uninitialized from a joining node", "rke2-cloud-controller-manager", []any{taint("node.cloudprovider.kubernetes.io/uninitialized", "true", "NoSchedule")}, nil, false},
		{"k3s's cloud controller manager lifts uninitialized", "k3s-cloud-controller-manager", []any{taint("node.cloudprovider.kubernetes.io/uninitialized", "true", "NoSchedule")}, nil, false},
		{"a user named like RKE2's cloud controller manager, but not it", "rke2-cloud-controller-manager-bot", []any{taint("node.cloudprovider.kubernetes.io/uninitialized", "true", "NoSchedule")}, nil, true},
		{"a cluster autoscaler in kube-system lifts ToBeDeletedByClusterAutoscaler (an aborted scale-down)", autoscaler, []any{toBeDeleted}, nil, false},
		{"Karpenter lifts karpenter.sh/unregistered at registration", karpenter, []any{taint("karpenter.sh/unregistered", "", "NoExecute")}, nil, false},
		{"Karpenter lifts karpenter.sh/disrupted", karpenter, []any{taint("karpenter.sh/disrupted", "", "NoSchedule")}, nil, false},
		{"a configured health agent's out-of-service taint", nhc, nil, []any{outOfService}, false},
		// Neighbours of those identities are people.
		{"another ServiceAccount of Karpenter's namespace", "system:serviceaccount:karpenter:default", []any{taint("karpenter.sh/unregistered", "", "NoExecute")}, nil, true},
		{"a namespace that only starts like kube-system", "system:serviceaccount:kube-system-tools:bot", nil, []any{maintenance}, true},
		{"a user named like a ServiceAccount of kube-system's namespace", "kube-system:node-controller", nil, []any{maintenance}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := func(taints []any) map[string]any {
				spec := map[string]any{}
				if taints != nil {
					spec["taints"] = taints
				}
				return map[string]any{"metadata": map[string]any{"name": "gpu-v100-01", "labels": map[string]any{"nvidia.com/gpu.present": "true"}}, "spec": spec}
			}
			request := map[string]any{"operation": "UPDATE", "userInfo": map[string]any{"username": tc.writer}}
			out, _, err := prog.Eval(map[string]any{"object": node(tc.cur), "oldObject": node(tc.old), "request": request})
			require.NoError(t, err)
			assert.Equal(t, tc.sent, out.Value())
		})
	}
	t.Run("a system identity's label change is still sent", func(t *testing.T) {
		old := map[string]any{"metadata": map[string]any{"name": "gpu-v100-01"}, "spec": map[string]any{}}
		cur := map[string]any{"metadata": map[string]any{"name": "gpu-v100-01", "labels": map[string]any{"team": "ml"}}, "spec": map[string]any{}}
		out, _, err := prog.Eval(map[string]any{"object": cur, "oldObject": old, "request": map[string]any{"operation": "UPDATE", "userInfo": map[string]any{"username": nodeController}}})
		require.NoError(t, err)
		assert.Equal(t, true, out.Value())
	})
	t.Run("a quote in a configured username stays a literal", func(t *testing.T) {
		celProgram(t, NodeChangeCondition([]string{`it's`, `back\slash`}))
	})
}

// TestGPUClusterUnconfiguredDRA: a GPUCluster write that rolls the NVIDIA
// DRA driver out (created, switched on, a new version) while
// config.draDrivers has no gpu.nvidia.com entry is marked for the gate's
// FactsMissing (DRAUnconfigured); a write that deploys no DRA driver, or
// leaves it where it is, is not, nor is any write once the entry is there.
func TestGPUClusterUnconfiguredDRA(t *testing.T) {
	cluster := func(dra map[string]any) *unstructured.Unstructured {
		spec := map[string]any{"dcgmExporter": map[string]any{"version": "4.5.3-4.8.2-distroless"}}
		if dra != nil {
			spec["draDriver"] = dra
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster",
			"metadata": map[string]any{"name": "gpu-cluster"}, "spec": spec}}
	}
	on := map[string]any{"version": "v25.8.1"}
	older := map[string]any{"version": "v25.3.0"}
	off := map[string]any{"version": "v25.8.1", "enabled": false}
	unreadable := map[string]any{"version": "v25.8.1", "enabled": "false"}
	nvidia := []dra.Driver{{Name: "gpu.nvidia.com", Namespace: "gpu-operator", DaemonSet: "nvidia-dra-driver-gpu-kubelet-plugin"}}
	for _, tc := range []struct {
		name     string
		op       admissionv1.Operation
		obj, old *unstructured.Unstructured
		drivers  []dra.Driver
		marked   bool
	}{
		{"created with the DRA driver", admissionv1.Create, cluster(on), nil, nil, true},
		{"created with an enabled flag the gate cannot read", admissionv1.Create, cluster(unreadable), nil, nil, true},
		{"created with the DRA driver switched off", admissionv1.Create, cluster(off), nil, nil, false},
		{"created without a DRA driver section", admissionv1.Create, cluster(nil), nil, nil, false},
		{"the DRA driver switched on", admissionv1.Update, cluster(on), cluster(off), nil, true},
		{"the DRA driver section added", admissionv1.Update, cluster(on), cluster(nil), nil, true},
		{"a new DRA driver version", admissionv1.Update, cluster(on), cluster(older), nil, true},
		{"another field, the DRA driver where it is", admissionv1.Update, cluster(on), cluster(on), nil, false},
		{"the DRA driver switched off", admissionv1.Update, cluster(off), cluster(on), nil, false},
		{"deleted", admissionv1.Delete, cluster(on), cluster(on), nil, false},
		{"created with the DRA driver, gpu.nvidia.com configured", admissionv1.Create, cluster(on), nil, nvidia, false},
		{"a new DRA driver version, gpu.nvidia.com configured", admissionv1.Update, cluster(on), cluster(older), nvidia, false},
		{"the DRA driver switched on, gpu.nvidia.com configured", admissionv1.Update, cluster(on), cluster(off), nvidia, false},
		{"the DRA driver section added, gpu.nvidia.com configured", admissionv1.Update, cluster(on), cluster(nil), nvidia, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := gate.DefaultConfig()
			cfg.DRADrivers = tc.drivers
			s := &Server{Config: cfg}
			var ch gate.DriverChange
			s.gpuClusterChange(&ch, tc.obj, tc.old, tc.op)
			if tc.marked {
				assert.Equal(t, "gpu.nvidia.com", ch.DRAUnconfigured)
				return
			}
			assert.Empty(t, ch.DRAUnconfigured)
			// Created, or switched on (judged as its CREATE, nothing ran
			// before): what is left of it is read. Seen failing before
			// for the switch-on cases: DRAPlugin was nil.
			switchedOn := tc.op == admissionv1.Update && deploysDRA(tc.obj) && !deploysDRA(tc.old)
			if tc.drivers != nil && (tc.op == admissionv1.Create || switchedOn) {
				require.NotNil(t, ch.DRAPlugin, "what is left of it is read")
				assert.Equal(t, "gpu.nvidia.com", ch.DRAPlugin.Driver.Name)
				assert.Empty(t, ch.OldDRA, "nothing of the driver ran before")
			} else if tc.drivers != nil {
				assert.Nil(t, ch.DRAPlugin, "a version move reads the DaemonSet's version, not leftovers")
			}
		})
	}
}
