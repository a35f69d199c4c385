package webhook

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// TestDRAServed: the gate watches ResourceSlices and ResourceClaims only
// where the API server serves both; otherwise it says why (DRA nodes stay
// unproven), and a failed discovery is an error, not "not served".
func TestDRAServed(t *testing.T) {
	both := []metav1.APIResource{{Name: "resourceslices"}, {Name: "resourceclaims"}, {Name: "deviceclasses"}}
	cases := []struct {
		name      string
		resources []*metav1.APIResourceList
		want      string
	}{
		{name: "served", resources: []*metav1.APIResourceList{{GroupVersion: "resource.k8s.io/v1", APIResources: both}}},
		{name: "group not served", resources: []*metav1.APIResourceList{{GroupVersion: "resource.k8s.io/v1beta1", APIResources: both}},
			want: "the API server does not serve resource.k8s.io/v1"},
		{name: "claims missing", resources: []*metav1.APIResourceList{{GroupVersion: "resource.k8s.io/v1", APIResources: both[:1]}},
			want: "the API server serves no resourceclaims in resource.k8s.io/v1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := draServed(&fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tc.resources}})
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestStripSlice: a cached slice keeps what the proof counts (driver, node,
// pool, each device and its type), not the rest of its attributes.
func TestStripSlice(t *testing.T) {
	node := "gpu-01"
	in := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{"x": "y"}},
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: &node, Pool: resourcev1.ResourcePool{Name: node, Generation: 3, ResourceSliceCount: 2},
			Devices: []resourcev1.Device{{Name: "gpu-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type": {StringValue: new("gpu")}, "uuid": {StringValue: new("GPU-1")}}}, {Name: "gpu-1"}}}}
	out, err := StripSlice(in)
	require.NoError(t, err)
	got := out.(*resourcev1.ResourceSlice)
	assert.Equal(t, in.Spec.Pool, got.Spec.Pool)
	assert.Equal(t, node, *got.Spec.NodeName)
	assert.Equal(t, "gpu.nvidia.com", got.Spec.Driver)
	require.Len(t, got.Spec.Devices, 2)
	assert.Equal(t, "gpu", *got.Spec.Devices[0].Attributes["type"].StringValue)
	assert.NotContains(t, got.Spec.Devices[0].Attributes, resourcev1.QualifiedName("uuid"))
	assert.Nil(t, got.Labels)
}

// TestStripDaemonSet: a cached kubelet-plugin DaemonSet keeps its UID (its
// Pods' controller) and its Pods' nodeSelector and required node affinity
// (the nodes it serves), its tolerations, nodeName and host networking (where
// it schedules: a Node write that widens it installs the driver, issue 25
// follow-up) and its containers' names and images with the version label
// (the release it installs); not the rest of its containers, labels or
// status.
func TestStripDaemonSet(t *testing.T) {
	required := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "nvidia.com/gpu.present", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}}}}}
	in := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "nvidia-dra-driver-gpu", Name: "kubelet-plugin", UID: "u-1", Labels: map[string]string{"x": "y"}},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: required,
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1}}}},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:  []corev1.Container{{Name: "plugin", Image: "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1", Args: []string{"-v=6"}}}}}},
		Status: appsv1.DaemonSetStatus{NumberReady: 3}}
	out, err := StripDaemonSet(in)
	require.NoError(t, err)
	got := out.(*appsv1.DaemonSet)
	assert.Equal(t, in.UID, got.UID)
	assert.Equal(t, in.Namespace+"/"+in.Name, got.Namespace+"/"+got.Name)
	assert.Equal(t, in.Spec.Template.Spec.NodeSelector, got.Spec.Template.Spec.NodeSelector)
	assert.Equal(t, required, got.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
	assert.Nil(t, got.Spec.Template.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	assert.Equal(t, in.Spec.Template.Spec.Tolerations, got.Spec.Template.Spec.Tolerations)
	assert.Equal(t, []corev1.Container{{Name: "plugin", Image: "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"}}, got.Spec.Template.Spec.Containers)
	assert.Zero(t, got.Status.NumberReady)
	assert.Nil(t, got.Labels)
}
