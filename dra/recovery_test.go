package dra

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var (
	now    = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	driver = Driver{Name: "gpu.nvidia.com", Namespace: "nvidia-dra-driver-gpu", DaemonSet: "nvidia-dra-driver-gpu-kubelet-plugin"}
)

// state is a cluster where gpu-01's plugin Pod has been unready for 15
// minutes and its node publishes no device: every seed condition holds.
type state struct{ in RecoveryInput }

func newState() *state {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: driver.Namespace, Name: driver.DaemonSet, UID: "ds-uid"},
		Spec:   appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "kubelet-plugin"}}},
		Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, NumberReady: 1}}
	return &state{in: RecoveryInput{
		Driver:    driver,
		Nodes:     []*corev1.Node{node("gpu-01", corev1.ConditionTrue), node("gpu-02", corev1.ConditionTrue)},
		DaemonSet: ds,
		Pods: []*corev1.Pod{
			pluginPod(ds, "plugin-a", "gpu-01", corev1.ConditionFalse, now.Add(-15*time.Minute)),
			pluginPod(ds, "plugin-b", "gpu-02", corev1.ConditionTrue, now.Add(-2*time.Hour)),
		},
		Slices:     []*resourcev1.ResourceSlice{slice("gpu.nvidia.com", "gpu-02", 8), slice("other.example.com", "gpu-01", 4)},
		MinUnready: DefaultMinUnready,
		Now:        now,
	}}
}

func node(name string, ready corev1.ConditionStatus) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
}

func pluginPod(ds *appsv1.DaemonSet, name, node string, ready corev1.ConditionStatus, since time.Time) *corev1.Pod {
	yes := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ds.Namespace, Name: name, Labels: map[string]string{"app": "kubelet-plugin"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: &yes}}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.NewTime(since)}}},
	}
}

func slice(drv, node string, devices int) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-" + drv},
		Spec: resourcev1.ResourceSliceSpec{Driver: drv, NodeName: &node, Pool: resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1}}}
	for i := 0; i < devices; i++ {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: "gpu-" + string(rune('0'+i))})
	}
	return s
}

func (s *state) pod(name string) *corev1.Pod {
	for _, p := range s.in.Pods {
		if p.Name == name {
			return p
		}
	}
	panic(name)
}

// TestPlanRecovery: the candidate only when all four seed conditions hold,
// one case per condition missing, and the Pods that never count.
func TestPlanRecovery(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*state)
		// want is the candidate's name, "" for none; failed the condition
		// that fails for plugin-a when there is none.
		want, failed string
	}{
		{name: "every condition holds", mutate: func(*state) {}, want: "plugin-a"},
		{name: "the DaemonSet is not degraded", mutate: func(s *state) { s.in.DaemonSet.Status.NumberReady = 2 }, failed: CondDriverDegraded},
		{name: "the DaemonSet wants no Pod", mutate: func(s *state) {
			s.in.DaemonSet.Status.DesiredNumberScheduled, s.in.DaemonSet.Status.NumberReady = 0, 0
		}, failed: CondDriverDegraded},
		{name: "the Pod has been unready for only 9 minutes", mutate: func(s *state) {
			s.pod("plugin-a").Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-9 * time.Minute))
		}, failed: CondStalePod},
		{name: "exactly ten minutes is enough", mutate: func(s *state) {
			s.pod("plugin-a").Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-10 * time.Minute))
		}, want: "plugin-a"},
		{name: "the Pod is Ready", mutate: func(s *state) { s.pod("plugin-a").Status.Conditions[0].Status = corev1.ConditionTrue }, failed: CondStalePod},
		{name: "the Pod's transition time is unknown", mutate: func(s *state) {
			s.pod("plugin-a").Status.Conditions[0].LastTransitionTime = metav1.Time{}
		}, failed: CondStalePod},
		{name: "the Pod is already deleting", mutate: func(s *state) {
			at := metav1.NewTime(now.Add(-time.Minute))
			s.pod("plugin-a").DeletionTimestamp = &at
		}, failed: CondStalePod},
		{name: "the node is not Ready", mutate: func(s *state) { s.in.Nodes[0] = node("gpu-01", corev1.ConditionUnknown) }, failed: CondNodeReady},
		{name: "the node is gone", mutate: func(s *state) { s.in.Nodes = s.in.Nodes[1:] }, failed: CondNodeReady},
		{name: "the node still publishes a device", mutate: func(s *state) {
			s.in.Slices = append(s.in.Slices, slice("gpu.nvidia.com", "gpu-01", 1))
		}, failed: CondInventoryEmpty},
		{name: "an empty slice of the driver is no inventory", mutate: func(s *state) {
			s.in.Slices = append(s.in.Slices, slice("gpu.nvidia.com", "gpu-01", 0))
		}, want: "plugin-a"},
		{name: "the DaemonSet was replaced (another UID)", mutate: func(s *state) { s.in.DaemonSet.UID = "new-uid" }},
		{name: "a look-alike Pod not owned by the DaemonSet", mutate: func(s *state) {
			s.pod("plugin-a").OwnerReferences = nil
		}},
		{name: "the DaemonSet is gone", mutate: func(s *state) { s.in.DaemonSet = nil }},
		{name: "the longest unready is chosen", mutate: func(s *state) {
			s.in.Nodes = append(s.in.Nodes, node("gpu-03", corev1.ConditionTrue))
			s.in.Pods = append(s.in.Pods, pluginPod(s.in.DaemonSet, "plugin-c", "gpu-03", corev1.ConditionFalse, now.Add(-time.Hour)))
		}, want: "plugin-c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newState()
			tc.mutate(s)
			p := PlanRecovery(s.in)
			if tc.want != "" {
				require.NotNil(t, p.Candidate, "why: %s", p.Why)
				assert.Equal(t, tc.want, p.Candidate.Pod)
				assert.Equal(t, "kubectl -n nvidia-dra-driver-gpu delete pod "+tc.want+" --wait=false", p.Command())
				assert.Empty(t, p.Why)
				return
			}
			assert.Nil(t, p.Candidate)
			assert.Empty(t, p.Command())
			assert.NotEmpty(t, p.Why)
			if tc.failed != "" {
				var a *PodFinding
				for i := range p.Pods {
					if p.Pods[i].Pod == "plugin-a" {
						a = &p.Pods[i]
					}
				}
				require.NotNil(t, a)
				var failed []string
				for _, c := range a.Conditions {
					if !c.Holds {
						failed = append(failed, c.Name)
					}
				}
				assert.Equal(t, []string{tc.failed}, failed)
			}
		})
	}
}

// TestPlanRecoveryNamesIgnoredPods: a Pod labelled as the driver's but not
// controlled by the DaemonSet is named, never a candidate.
func TestPlanRecoveryNamesIgnoredPods(t *testing.T) {
	s := newState()
	forged := pluginPod(s.in.DaemonSet, "forged", "gpu-01", corev1.ConditionFalse, now.Add(-time.Hour))
	forged.OwnerReferences[0].UID = types.UID("someone-else")
	s.in.Pods = []*corev1.Pod{forged}
	p := PlanRecovery(s.in)
	assert.Nil(t, p.Candidate)
	assert.Equal(t, []string{"nvidia-dra-driver-gpu/forged: not controlled by DaemonSet nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin (uid ds-uid)"}, p.Ignored)
	assert.Equal(t, "no Pod controlled by the DaemonSet", p.Why)
}

// TestNodeStates: per node, the driver's slices and devices, and its plugin
// Pod (only one the DaemonSet controls) with its readiness.
func TestNodeStates(t *testing.T) {
	s := newState()
	forged := pluginPod(s.in.DaemonSet, "forged", "gpu-03", corev1.ConditionTrue, now)
	forged.OwnerReferences[0].UID = "other"
	s.in.Pods = append(s.in.Pods, forged)
	got := NodeStates(driver, s.in.DaemonSet, s.in.Pods, s.in.Slices)
	assert.Equal(t, map[string]NodeState{
		"gpu-01": {Driver: "gpu.nvidia.com", Plugin: "nvidia-dra-driver-gpu/plugin-a", PluginReady: false},
		"gpu-02": {Driver: "gpu.nvidia.com", Slices: 1, Devices: 8, Plugin: "nvidia-dra-driver-gpu/plugin-b", PluginReady: true},
	}, got, "gpu-03's look-alike Pod and the other driver's slice on gpu-01 are not the driver's")
}
