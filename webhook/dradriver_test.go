package webhook

import (
	"context"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"
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
// driver's kubelet plugin is never judged, whatever its image.
func TestDRADriverOtherDaemonSets(t *testing.T) {
	cfg := gate.DefaultConfig()
	cfg.DRADrivers = []dra.Driver{{Name: "gpu.nvidia.com", Namespace: "nvidia-dra-driver-gpu", DaemonSet: "nvidia-dra-driver-gpu-kubelet-plugin"}}
	s := &Server{Config: cfg}
	raw := func(u *unstructured.Unstructured) runtime.RawExtension {
		b, err := u.MarshalJSON()
		require.NoError(t, err)
		return runtime.RawExtension{Raw: b}
	}
	for _, tc := range []struct{ ns, name string }{
		{"nvidia-dra-driver-gpu", "another-daemonset"},
		{"kube-system", "nvidia-dra-driver-gpu-kubelet-plugin"},
		{"gpu-operator", "nvidia-dcgm-exporter"},
	} {
		t.Run(tc.ns+"/"+tc.name, func(t *testing.T) {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update, Namespace: tc.ns, Name: tc.name,
				Kind:      metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"},
				Object:    raw(daemonSet(tc.ns, tc.name, nil, "r/x:v2.0.0")),
				OldObject: raw(daemonSet(tc.ns, tc.name, nil, "r/x:v1.0.0"))}}
			d, err := s.decideDriver(context.Background(), req)
			require.NoError(t, err)
			assert.True(t, d.Allowed)
			assert.Empty(t, d.Codes())
		})
	}
	_, judged := s.draDaemonSet(daemonSet("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu-kubelet-plugin", nil))
	assert.True(t, judged, "the configured one is judged")
}

// TestDRADaemonSetReloadAtTheSameVersion: the plugin's images changing
// while the version reads the same (another repository under the same tag,
// a new digest under the same version label) is judged as a reload of that
// version, not let through as no change; a label-only edit is no reload,
// and a version move is a move, not a reload.
// withInit gives the DaemonSet's Pod template one init container.
func withInit(u *unstructured.Unstructured, image string) *unstructured.Unstructured {
	_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "init", "image": image}}, "spec", "template", "spec", "initContainers")
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

// TestDRAMatchConditionSendsScheduling evaluates the chart's match
// condition with the API server's CEL environment (its base libraries,
// object and oldObject untyped as the webhook's match conditions see a
// DaemonSet): a change of the Pod template's nodeSelector or required node
// affinity reaches the gate, as an image change does; other edits do not.
func TestDRAMatchConditionSendsScheduling(t *testing.T) {
	var cond string
	for _, w := range Webhooks {
		for _, m := range w.MatchConditions {
			if w.Name == WebhookDRAPlugins && m.Name == "dra-release-or-scheduling-changes" {
				cond = m.CEL
			}
		}
	}
	require.NotEmpty(t, cond)
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

	affinity := func(values ...any) map[string]any {
		return map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{
			map[string]any{"matchExpressions": []any{map[string]any{"key": "nvidia.com/gpu.product", "operator": "In", "values": values}}}}}}}
	}
	for _, tc := range []struct {
		name string
		edit func(u *unstructured.Unstructured)
		sent bool
	}{
		{"nothing the gate reads changes (an annotation)", func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{"a": "b"}) }, false},
		{"the status changes", func(u *unstructured.Unstructured) {
			require.NoError(t, unstructured.SetNestedField(u.Object, int64(3), "status", "numberReady"))
		}, false},
		{"a preferred node affinity changes", func(u *unstructured.Unstructured) {
			require.NoError(t, unstructured.SetNestedField(u.Object, map[string]any{"nodeAffinity": map[string]any{"preferredDuringSchedulingIgnoredDuringExecution": []any{}}}, "spec", "template", "spec", "affinity"))
		}, false},
		{"the image changes", func(u *unstructured.Unstructured) {
			require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "c0", "image": "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.12.0"}}, "spec", "template", "spec", "containers"))
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
	// And a narrowed affinity, both sides set.
	old := daemonSet("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu-kubelet-plugin", nil, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1")
	require.NoError(t, unstructured.SetNestedField(old.Object, affinity("NVIDIA-H200", "Tesla-V100-PCIE-32GB"), "spec", "template", "spec", "affinity"))
	cur := old.DeepCopy()
	require.NoError(t, unstructured.SetNestedField(cur.Object, affinity("NVIDIA-H200"), "spec", "template", "spec", "affinity"))
	out, _, err := prog.Eval(map[string]any{"object": cur.Object, "oldObject": old.Object, "request": map[string]any{"operation": "UPDATE"}})
	require.NoError(t, err)
	assert.Equal(t, true, out.Value())
}
