package dra

import (
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeState is what one DRA driver shows of one node: the devices its
// ResourceSlices list and its kubelet-plugin Pod there (controlled by the
// driver's DaemonSet) and whether it is Ready.
type NodeState struct {
	Driver  string `json:"driver"`
	Slices  int    `json:"slices"`
	Devices int    `json:"devices"`
	// Plugin names the kubelet-plugin Pod on the node ("" : none).
	Plugin      string `json:"plugin,omitempty"`
	PluginReady bool   `json:"pluginReady"`
}

// NodeStates is, per node, the state of every node the driver publishes
// slices for or runs a plugin Pod on.
func NodeStates(d Driver, ds *appsv1.DaemonSet, pods []*corev1.Pod, slices []*resourcev1.ResourceSlice) map[string]NodeState {
	devices, count := devicesByNode(d.Name, slices)
	out := make(map[string]NodeState, len(count))
	for node, n := range count {
		out[node] = NodeState{Driver: d.Name, Slices: n, Devices: devices[node]}
	}
	names := make([]*corev1.Pod, 0, len(pods))
	for _, p := range pods {
		if ds != nil && p.Namespace == d.Namespace && p.Spec.NodeName != "" && metav1.IsControlledBy(p, ds) && p.DeletionTimestamp == nil {
			names = append(names, p)
		}
	}
	sort.Slice(names, func(i, j int) bool { return names[i].Name < names[j].Name })
	for _, p := range names {
		s := out[p.Spec.NodeName]
		if s.Plugin != "" {
			continue // a second Pod on one node: the first by name is shown
		}
		s.Driver, s.Plugin, s.PluginReady = d.Name, p.Namespace+"/"+p.Name, podReady(p)
		out[p.Spec.NodeName] = s
	}
	return out
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
