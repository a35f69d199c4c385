package webhook

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/benchcpu"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
)

func TestStripNode(t *testing.T) {
	f := fleetgen.Generate(fleetgen.Options{Seed: 1, Nodes: 50, Kubelet: true, Now: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)})
	decode := func(n *corev1.Node) *corev1.Node { // as the informer does: each node its own strings
		data, err := json.Marshal(n)
		require.NoError(t, err)
		var out corev1.Node
		require.NoError(t, json.Unmarshal(data, &out))
		return &out
	}
	a, b := decode(f.Nodes[10]), decode(f.Nodes[11])
	sa, err := StripNode(a)
	require.NoError(t, err)
	sb, _ := StripNode(b)
	na, nb := sa.(*corev1.Node), sb.(*corev1.Node)

	assert.Equal(t, a.Labels, na.Labels)
	assert.Equal(t, a.Status.NodeInfo.KernelVersion, na.Status.NodeInfo.KernelVersion)
	assert.Equal(t, a.Status.NodeInfo.KubeletVersion, na.Status.NodeInfo.KubeletVersion)
	// Of the conditions, Ready and the configured GPU-health ones, with
	// their type, status and time, not their text.
	health := gate.DefaultConfig().Proof.HealthConditions
	require.NotEmpty(t, health)
	a.Status.Conditions = append(a.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeConditionType(health[0].Type), Status: health[0].UnhealthyStatus, Reason: "XidError", Message: "GPU fell off the bus"})
	sa, err = StripNode(a)
	require.NoError(t, err)
	na = sa.(*corev1.Node)
	var want []corev1.NodeCondition
	for _, c := range a.Status.Conditions {
		if c.Type == corev1.NodeReady || c.Type == corev1.NodeConditionType(health[0].Type) {
			want = append(want, corev1.NodeCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime})
		}
	}
	require.Len(t, want, 2)
	assert.Equal(t, want, na.Status.Conditions, "Ready and the health condition; not MemoryPressure, DiskPressure and the others")
	for k := range na.Status.Capacity {
		assert.Contains(t, string(k), "/", "only extended resources are kept")
	}
	if q, ok := a.Status.Capacity["nvidia.com/gpu"]; ok {
		assert.True(t, q.Equal(na.Status.Capacity["nvidia.com/gpu"]))
	}
	assert.Empty(t, na.Status.Images)
	assert.Empty(t, na.Annotations)

	// The same key and value on two nodes share their bytes.
	const key = "feature.node.kubernetes.io/kernel-version.full"
	ka, kb := keyOf(na.Labels, key), keyOf(nb.Labels, key)
	assert.Equal(t, unsafe.StringData(ka), unsafe.StringData(kb), "label keys are interned")
	assert.Equal(t, unsafe.StringData(na.Labels[key]), unsafe.StringData(nb.Labels[key]), "label values are interned")

	// Other objects pass through.
	cm := &corev1.ConfigMap{}
	got, err := StripNode(cm)
	require.NoError(t, err)
	assert.Same(t, cm, got)
}

// TestStripTwiceKeepsOneCopy: the informers' WatchList strips each object into
// the reflector's store and again on the queue's Replace; a stripped object
// comes back as is, so the fleet is not held twice at the end of the sync. An
// object that only looks stripped (no managed fields, no creation time) but
// carries anything the strip drops is still stripped.
func TestStripTwiceKeepsOneCopy(t *testing.T) {
	f := fleetgen.Generate(fleetgen.Options{Seed: 1, Nodes: 50, Kubelet: true, Validators: true, Now: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)})
	require.NotEmpty(t, f.ProofPods)
	gpu := slices.IndexFunc(f.Nodes, f.Config.IsGPUNode)
	require.GreaterOrEqual(t, gpu, 0)
	// As the API server sends it: the generated Pod carries only what the
	// strip keeps (its container's name and image).
	validator := f.ProofPods[0].DeepCopy()
	validator.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	validator.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	for _, tc := range []struct {
		name  string
		obj   any
		strip func(any) (any, error)
	}{
		{"GPU node", f.Nodes[gpu], StripNode},
		{"CPU node", f.Nodes[0], StripNode},
		{"validator Pod", validator, StripPod},
		{"SUC Job", &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "apply-driver-on-gpu-1", Namespace: "system-upgrade", Labels: map[string]string{upgradev1.LabelNode: "gpu-1"}, Annotations: map[string]string{"a": "b"}},
			Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Message: "done"}}}}, StripJob},
	} {
		t.Run(tc.name, func(t *testing.T) {
			once, err := tc.strip(tc.obj)
			require.NoError(t, err)
			assert.NotSame(t, tc.obj, once, "an object as the API server sends it is stripped")
			twice, err := tc.strip(once)
			require.NoError(t, err)
			assert.Same(t, once, twice, "a stripped object comes back as is")
		})
	}

	// Looks stripped, is not: no creation time or managed fields, but an
	// image list, an annotation and a condition message.
	once, _ := StripNode(f.Nodes[gpu])
	n := once.(*corev1.Node).DeepCopy()
	n.Annotations = map[string]string{"a": "b"}
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"nvcr.io/nvidia/driver:580"}}}
	n.Status.Conditions[0].Message = "kubelet is posting ready status"
	got, err := StripNode(n)
	require.NoError(t, err)
	s := got.(*corev1.Node)
	assert.NotSame(t, n, s)
	assert.Empty(t, s.Annotations)
	assert.Empty(t, s.Status.Images)
	assert.Empty(t, s.Status.Conditions[0].Message)
	assert.Equal(t, n.Labels, s.Labels)
}

func keyOf(m map[string]string, k string) string {
	for key := range m {
		if key == k {
			return key
		}
	}
	return ""
}

// TestDecodeErrorsNameFields: a field of the wrong JSON type is named with
// the form expected, not the Go types behind it.
func TestDecodeErrorsNameFields(t *testing.T) {
	cases := []struct {
		name, body, want string
	}{
		{"Node labels not an object", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":"gpu"}}`, "metadata.labels: expected an object of strings, got a JSON string"},
		{"Node unschedulable not a boolean", `{"apiVersion":"v1","kind":"Node","spec":{"unschedulable":"yes"}}`, "spec.unschedulable: expected true or false, got a JSON string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeNode([]byte(tc.body))
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
			assert.NotContains(t, err.Error(), "Go ")
		})
	}
	var cm corev1.ConfigMap
	err := decodeObject([]byte(`{"apiVersion":"v1","kind":"ConfigMap","data":{"qualification.yaml":7}}`), &cm, "ConfigMap")
	require.Error(t, err)
	assert.Equal(t, "data: expected a string, got a JSON number", err.Error(), "a map value is named by its map")
}

// TestDecodeNodeKeepsProofAndIdentity: the review decoder keeps both what
// makes a GPU node (every capacity name, gate/gpunode.go) and what a proof
// reads (nvidia.com/ quantities of capacity and allocatable, condition
// times, the cordon taint); other quantities are not parsed.
func TestDecodeNodeKeepsProofAndIdentity(t *testing.T) {
	body := `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"},
	"spec":{"unschedulable":true,"taints":[{"key":"node.kubernetes.io/unschedulable","effect":"NoSchedule","timeAdded":"2026-11-29T10:00:00Z"}]},
	"status":{"capacity":{"cpu":"64","amd.com/gpu":"8","nvidia.com/gpu":"8"},"allocatable":{"cpu":"63","nvidia.com/gpu":"6"},
	"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-11-29T09:00:00Z","message":"kubelet is posting ready status"}]}}`
	n, err := decodeNode([]byte(body))
	require.NoError(t, err)
	assert.Equal(t, "8", n.Status.Capacity.Name("nvidia.com/gpu", resource.DecimalSI).String())
	assert.Equal(t, "6", n.Status.Allocatable.Name("nvidia.com/gpu", resource.DecimalSI).String())
	assert.Contains(t, n.Status.Capacity, corev1.ResourceName("amd.com/gpu"), "a GPU resource name makes a GPU node")
	assert.True(t, n.Status.Capacity.Name("amd.com/gpu", resource.DecimalSI).IsZero(), "quantities a proof does not read are not parsed")
	assert.NotContains(t, n.Status.Allocatable, corev1.ResourceName("cpu"))
	require.Len(t, n.Status.Conditions, 1)
	assert.Equal(t, time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC), n.Status.Conditions[0].LastTransitionTime.UTC())
	require.Len(t, n.Spec.Taints, 1)
	assert.Equal(t, "node.kubernetes.io/unschedulable", n.Spec.Taints[0].Key)

	for _, tc := range []struct{ name, body, want string }{
		{"capacity quantity", `{"apiVersion":"v1","kind":"Node","status":{"capacity":{"nvidia.com/gpu":"eight"}}}`, "status.capacity: nvidia.com/gpu"},
		{"allocatable quantity", `{"apiVersion":"v1","kind":"Node","status":{"allocatable":{"nvidia.com/gpu":true}}}`, "status.allocatable: nvidia.com/gpu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeNode([]byte(tc.body))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "expected a quantity")
		})
	}
}

// BenchmarkStripNode: the cache transform per Node event, on a Node as the
// API server sends it (creation time, managed fields, images) and on one
// already stripped (the WatchList Replace, which transforms a second time).
func BenchmarkStripNode(b *testing.B) {
	f := fleetgen.Generate(fleetgen.Options{Seed: 1, Nodes: 50, Kubelet: true, Now: benchNow})
	served := f.Nodes[slices.IndexFunc(f.Nodes, f.Config.IsGPUNode)].DeepCopy()
	served.CreationTimestamp = metav1.NewTime(benchNow)
	served.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}}
	stripped, _ := StripNode(served)
	for _, tc := range []struct {
		name string
		obj  any
	}{{"served", served}, {"stripped", stripped}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := benchcpu.Start(b)
			for b.Loop() {
				if _, err := StripNode(tc.obj); err != nil {
					b.Fatal(err)
				}
			}
			cpu.Stop()
		})
	}
}

// TestStripJobKeepsWhetherItRuns: the budget counts a node whose SUC Job
// runs or ran (gate.JobRuns, the pod counts); the cached Job keeps that, so
// a Job SUC created held (parallelism 0) is not counted as started, as a
// live read or a saved List (which strips the same way) does not count it.
func TestStripJobKeepsWhetherItRuns(t *testing.T) {
	zero, yes := int32(0), true
	for _, tc := range []struct {
		name string
		job  batchv1.Job
		runs bool
	}{
		{"held by SUC (parallelism 0)", batchv1.Job{Spec: batchv1.JobSpec{Parallelism: &zero}}, false},
		{"suspended", batchv1.Job{Spec: batchv1.JobSpec{Suspend: &yes}}, false},
		{"running", batchv1.Job{Spec: batchv1.JobSpec{}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.job.Status = batchv1.JobStatus{Active: 1, Succeeded: 2, Failed: 3}
			got, err := StripJob(&tc.job)
			require.NoError(t, err)
			j := got.(*batchv1.Job)
			assert.Equal(t, tc.runs, gate.JobRuns(j.Spec))
			assert.Equal(t, []int32{1, 2, 3}, []int32{j.Status.Active, j.Status.Succeeded, j.Status.Failed})
		})
	}
}

// TestStripPodKeepsCheckResults: a check Pod (label gpu-upgrade-gate.io/check)
// keeps its containers' termination messages and finish times, which its
// proof reads (gate/fleet/nodechecks.go); other proof Pods keep no container
// statuses.
func TestStripPodKeepsCheckResults(t *testing.T) {
	const result = `{"kind":"nccl-allreduce","value":184.5,"unit":"GB/s"}`
	finished := metav1.NewTime(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	pod := func(labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nccl-check-x", Namespace: "gpu-upgrade-gate", Labels: labels},
			Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: "check", Image: "nvcr.io/nvidia/pytorch:25.01-py3",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", Message: result, FinishedAt: finished}}}}}}
	}
	got, err := StripPod(pod(map[string]string{"gpu-upgrade-gate.io/allocation-check": "true", gate.LabelCheck: "nccl-allreduce"}))
	require.NoError(t, err)
	want := []corev1.ContainerStatus{{Name: "check", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: result, FinishedAt: finished}}}}
	assert.Equal(t, want, got.(*corev1.Pod).Status.ContainerStatuses)

	got, err = StripPod(pod(map[string]string{"gpu-upgrade-gate.io/allocation-check": "true"}))
	require.NoError(t, err)
	assert.Empty(t, got.(*corev1.Pod).Status.ContainerStatuses, "an allocation check without a kind keeps none")
}

// TestStripValidatorKeepsImages: the cached validator DaemonSet and its Pods
// keep their containers' (and init containers') names and images, which
// decide whether a Pod with the DaemonSet's UID counts as its validator
// (gate.Config.OwnValidators); stripped, a Pod running the template's
// images counts and one whose image was changed in place does not.
func TestStripValidatorKeepsImages(t *testing.T) {
	f := fleetgen.Generate(fleetgen.Options{Seed: 1, Nodes: 20, Now: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)})
	ds := f.ValidatorDaemonSet.DeepCopy()
	ds.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "driver-validation", Image: "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.3.3"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ds.Namespace, Name: "nvidia-operator-validator-x", Labels: map[string]string{"app": "nvidia-operator-validator"},
		OwnerReferences: []metav1.OwnerReference{fleetgen.ValidatorOwner}}, Spec: *ds.Spec.Template.Spec.DeepCopy()}
	pod.Spec.NodeName = "gpu-1"
	changed := pod.DeepCopy()
	changed.Name, changed.Spec.Containers[0].Image = "nvidia-operator-validator-y", "busybox:always-ready"

	sds, err := StripValidatorDaemonSet(ds)
	require.NoError(t, err)
	var pods []*corev1.Pod
	for _, p := range []*corev1.Pod{pod, changed} {
		sp, err := StripPod(p)
		require.NoError(t, err)
		pods = append(pods, sp.(*corev1.Pod))
	}
	facts := f.Config.ProofFactsOf(pods, nil)
	require.Len(t, facts.Validators, 2, "both carry the validator label")
	f.Config.OwnValidators(&facts, sds.(*appsv1.DaemonSet), nil)
	require.Len(t, facts.Validators, 1)
	assert.Equal(t, pod.Name, facts.Validators[0].Name, "the Pod running the template's images counts")
	require.Len(t, facts.Unowned, 1)
	assert.Equal(t, changed.Name, facts.Unowned[0].Name, "the Pod whose image was changed does not")
}
