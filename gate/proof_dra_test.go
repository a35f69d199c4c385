package gate

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/dra"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
)

// NVIDIA's DRA driver as the config names it (its Helm chart's names).
var nvidiaDRA = dra.Driver{Name: "gpu.nvidia.com", Namespace: "nvidia-dra-driver-gpu", DaemonSet: "nvidia-dra-driver-gpu-kubelet-plugin"}

// draPluginUID is the UID of the driver's kubelet-plugin DaemonSet.
const draPluginUID = "5d0c9e1a-2b3c-4d5e-8f90-a1b2c3d4e5f6"

// draDaemonSet is the driver's kubelet-plugin DaemonSet as its Helm chart
// schedules it: on nodes NFD finds an NVIDIA PCI device on, or GFD labels
// as GPU nodes (required node affinity, any term), Linux only.
func draDaemonSet() *appsv1.DaemonSet {
	term := func(key string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}}}
	}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: nvidiaDRA.Namespace, Name: nvidiaDRA.DaemonSet, UID: draPluginUID}}
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
	ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{term("feature.node.kubernetes.io/pci-10de.present"), term("nvidia.com/gpu.present")}}}}
	return ds
}

// draPluginPod is the driver's kubelet-plugin Pod on node, controlled by its
// DaemonSet, Ready since at.
func draPluginPod(node string, ready corev1.ConditionStatus, at time.Time) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: nvidiaDRA.Namespace, Name: "nvidia-dra-driver-gpu-kubelet-plugin-" + node,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: nvidiaDRA.DaemonSet,
				UID: draPluginUID, Controller: new(true), BlockOwnerDeletion: new(true)}}},
		Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.NewTime(at)}}},
	}
}

// draSlice is a ResourceSlice as NVIDIA's kubelet plugin publishes it: one
// pool named after the node, whole GPUs typed "gpu".
func draSlice(node string, generation, sliceCount int64, gpus int) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-gpu.nvidia.com-g%d-%d", node, generation, gpus)},
		Spec: resourcev1.ResourceSliceSpec{Driver: nvidiaDRA.Name, NodeName: new(node),
			Pool: resourcev1.ResourcePool{Name: node, Generation: generation, ResourceSliceCount: sliceCount}},
	}
	for i := range gpus {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"type": {StringValue: new("gpu")}}})
	}
	return s
}

// draCheck is an allocation check whose GPU came from a ResourceClaim made
// from a template (the Pod's status names it, as the kubelet writes it),
// and that claim as the scheduler allocates it from pool's gpu-0.
func draCheck(node, pool string, started time.Time) (*corev1.Pod, *resourcev1.ResourceClaim) {
	pod := allocationPod(node, corev1.PodSucceeded, started)
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: new("single-gpu")}}
	claimName := pod.Name + "-gpu-x7k2p"
	pod.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &claimName}}
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: claimName},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{
			Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
				{Request: "gpu", Driver: nvidiaDRA.Name, Pool: pool, Device: "gpu-0"}}},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
				{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{pool}}}}}},
		}},
	}
	return pod, claim
}

// proveDRA gives a DRA node everything a proof asks: the SUC Job and
// validator of prove, the plugin Pod Ready, a complete slice of its 8 GPUs,
// and an allocation check through a claim allocated from its pool.
func proveDRA(s *scenario, n *corev1.Node) {
	s.cfg.DRADrivers = []dra.Driver{nvidiaDRA}
	prove(s, n.Name)
	delete(n.Status.Capacity, fleet.ResourceGPU)
	delete(n.Status.Allocatable, fleet.ResourceGPU)
	check, claim := draCheck(n.Name, n.Name, reachedAt.Add(3*time.Minute))
	s.cluster.Proof.AllocationChecks = []*corev1.Pod{check}
	s.cluster.Proof.DRA = DRAProofFacts{
		DaemonSets: []*appsv1.DaemonSet{draDaemonSet()},
		PluginPods: []*corev1.Pod{draPluginPod(n.Name, corev1.ConditionTrue, reachedAt.Add(2*time.Minute))},
		Slices:     []*resourcev1.ResourceSlice{draSlice(n.Name, 2, 1, 8)},
		Claims:     []*resourcev1.ResourceClaim{claim},
	}
}

// TestDRAProof: a node that offers its GPUs through a configured DRA driver
// is proven by its plugin Pod, its slices and an allocation check through a
// claim allocated on it; each missing piece is named.
func TestDRAProof(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(s *scenario, n *corev1.Node)
		want   string // "" = proven
	}{
		{name: "proven: no nvidia.com/gpu in allocatable needed", mutate: func(*scenario, *corev1.Node) {}},
		{name: "proven: a claim named in the Pod's spec", mutate: func(s *scenario, _ *corev1.Node) {
			p := s.cluster.Proof.AllocationChecks[0]
			p.Spec.ResourceClaims[0] = corev1.PodResourceClaim{Name: "gpu", ResourceClaimName: p.Status.ResourceClaimStatuses[0].ResourceClaimName}
			p.Status.ResourceClaimStatuses = nil
		}},
		{name: "proven: MIG devices are parts of the GPUs counted", mutate: func(s *scenario, _ *corev1.Node) {
			sl := s.cluster.Proof.DRA.Slices[0]
			sl.Spec.Devices = append(sl.Spec.Devices, resourcev1.Device{Name: "gpu-0-mig-1g-10gb-0",
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"type": {StringValue: new("mig")}}})
		}},
		{name: "proven: a stale older generation is ignored", mutate: func(s *scenario, n *corev1.Node) {
			s.cluster.Proof.DRA.Slices = append(s.cluster.Proof.DRA.Slices, draSlice(n.Name, 1, 1, 6))
		}},
		{name: "proven: two slices of one pool", mutate: func(s *scenario, n *corev1.Node) {
			s.cluster.Proof.DRA.Slices = []*resourcev1.ResourceSlice{draSlice(n.Name, 2, 2, 4), draSlice(n.Name, 2, 2, 4)}
			s.cluster.Proof.DRA.Slices[1].Name += "-b"
		}},
		{name: "plugin Pod not Ready", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.DRA.PluginPods[0].Status.Conditions[0].Status = corev1.ConditionFalse
		}, want: "DRA plugin Pod nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin-gpu-v100-03 of gpu.nvidia.com is not Ready (phase Running)"},
		{name: "plugin Pod not owned by the DaemonSet", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.DRA.PluginPods[0].OwnerReferences[0].Name = "impostor"
		}, want: "no DRA plugin Pod of gpu.nvidia.com (controlled by DaemonSet nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin) on the node]"},
		{name: "forged plugin Pod: the DaemonSet's name, another UID", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.DRA.PluginPods[0].OwnerReferences[0].UID = "0badc0de-0000-4000-8000-000000000000"
		}, want: "no DRA plugin Pod of gpu.nvidia.com (controlled by DaemonSet nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin) on the node; " +
			"ignored (they name it as their controller, but not its UID): nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin-gpu-v100-03"},
		{name: "plugin DaemonSet not there: its Pods' controller cannot be told", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.DRA.DaemonSets = nil
		}, want: "(controlled by DaemonSet nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin, which is not there) on the node; ignored"},
		{name: "crashed plugin, slices withdrawn, on a node the DaemonSet selects", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.DRA.PluginPods[0].Status.Conditions[0].Status = corev1.ConditionFalse
			s.cluster.Proof.DRA.Slices = nil
		}, want: "DRA plugin Pod nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin-gpu-v100-03 of gpu.nvidia.com is not Ready (phase Running) " +
			"no ResourceSlices of gpu.nvidia.com for the node"},
		{name: "plugin Pod gone, slices withdrawn, on a node the DaemonSet selects", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.DRA.PluginPods, s.cluster.Proof.DRA.Slices = nil, nil
		}, want: "no DRA plugin Pod of gpu.nvidia.com (controlled by DaemonSet nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin) on the node " +
			"no ResourceSlices of gpu.nvidia.com for the node"},
		{name: "plugin DaemonSet cannot be read", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.DRA.DaemonSets, s.cluster.Proof.DRA.DaemonSetsUnreadable = nil, "daemonsets.apps is forbidden"
		}, want: "whether gpu.nvidia.com serves the node is unknown: its kubelet-plugin DaemonSet nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin cannot be read (daemonsets.apps is forbidden)"},
		{name: "plugin Pod with no controller", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.DRA.PluginPods[0].OwnerReferences = nil
		}, want: "no DRA plugin Pod of gpu.nvidia.com"},
		{name: "slice lost a device", mutate: func(s *scenario, n *corev1.Node) {
			s.cluster.Proof.DRA.Slices = []*resourcev1.ResourceSlice{draSlice(n.Name, 2, 1, 7)}
		}, want: "ResourceSlices of gpu.nvidia.com list 7 devices, expected 8 (nvidia.com/gpu.count)"},
		{name: "stale pool generation: the newest lists fewer", mutate: func(s *scenario, n *corev1.Node) {
			s.cluster.Proof.DRA.Slices = []*resourcev1.ResourceSlice{draSlice(n.Name, 2, 1, 8), draSlice(n.Name, 3, 1, 7)}
		}, want: "ResourceSlices of gpu.nvidia.com list 7 devices, expected 8"},
		{name: "newest pool generation incomplete", mutate: func(s *scenario, n *corev1.Node) {
			s.cluster.Proof.DRA.Slices = []*resourcev1.ResourceSlice{draSlice(n.Name, 2, 1, 8), draSlice(n.Name, 3, 2, 8)}
		}, want: "ResourceSlices of gpu.nvidia.com pool gpu-v100-03 generation 3: 1 of 2 slices published (incomplete)"},
		{name: "no slices, plugin running", mutate: func(s *scenario, _ *corev1.Node) { s.cluster.Proof.DRA.Slices = nil },
			want: "no ResourceSlices of gpu.nvidia.com for the node"},
		{name: "no GFD count to expect", mutate: func(_ *scenario, n *corev1.Node) { delete(n.Labels, fleet.LabelGPUCount) },
			want: "ResourceSlices of gpu.nvidia.com list 8 devices, but the node has no nvidia.com/gpu.count label"},
		{name: "another driver's slices do not count", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.DRA.Slices[0].Spec.Driver = "hami-core-gpu.project-hami.io"
		}, want: "no ResourceSlices of gpu.nvidia.com for the node"},
		{name: "allocation check with no claim", mutate: func(s *scenario, n *corev1.Node) {
			s.cluster.Proof.AllocationChecks = []*corev1.Pod{allocationPod(n.Name, corev1.PodSucceeded, reachedAt.Add(3*time.Minute))}
		}, want: "gpu-upgrade-gate/allocation-check-gpu-v100-03 used no ResourceClaim allocated on the node (it references none)"},
		{name: "claim allocated on another node", mutate: func(s *scenario, n *corev1.Node) {
			check, claim := draCheck(n.Name, "gpu-v100-02", reachedAt.Add(3*time.Minute))
			s.cluster.Proof.AllocationChecks, s.cluster.Proof.DRA.Claims = []*corev1.Pod{check}, []*resourcev1.ResourceClaim{claim}
		}, want: "is allocated for other nodes"},
		{name: "claim from another node's pool, selector forged to this node", mutate: func(s *scenario, n *corev1.Node) {
			s.cluster.Proof.DRA.Claims[0].Status.Allocation.Devices.Results[0].Pool = "gpu-v100-02"
		}, want: "claim allocation-check-gpu-v100-03-gpu-x7k2p is allocated gpu.nvidia.com/gpu-v100-02/gpu-0, none from the node's pools"},
		{name: "claim not allocated (deallocated)", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.DRA.Claims[0].Status.Allocation = nil
		}, want: "is not allocated"},
		{name: "claim not found", mutate: func(s *scenario, _ *corev1.Node) { s.cluster.Proof.DRA.Claims = nil },
			want: "claim allocation-check-gpu-v100-03-gpu-x7k2p not found"},
		{name: "claim of the same name in another namespace", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.DRA.Claims[0].Namespace = "tenant-a"
		}, want: "not found"},
		{name: "check before the tuple was reached", mutate: func(s *scenario, _ *corev1.Node) {
			st := metav1.NewTime(reachedAt.Add(-time.Hour))
			s.cluster.Proof.AllocationChecks[0].Status.StartTime = &st
		}, want: "allocation-check-gpu-v100-03 started before the node reached its tuple"},
		{name: "check before the plugin became Ready", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.DRA.PluginPods[0].Status.Conditions[0].LastTransitionTime = metav1.NewTime(reachedAt.Add(4 * time.Minute))
		}, want: "started before the node reached its tuple"},
		{name: "check failed", mutate: func(s *scenario, _ *corev1.Node) { s.cluster.Proof.AllocationChecks[0].Status.Phase = corev1.PodFailed },
			want: "allocation-check-gpu-v100-03 is Failed"},
		{name: "resource.k8s.io not served: a node running the plugin stays unproven", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.DRA = DRAProofFacts{DaemonSets: s.cluster.Proof.DRA.DaemonSets, PluginPods: s.cluster.Proof.DRA.PluginPods, Unreadable: "the API server does not serve resource.k8s.io/v1"}
		}, want: "ResourceSlices of gpu.nvidia.com cannot be read (the API server does not serve resource.k8s.io/v1)"},
		{name: "an extended resource the node also advertises must be whole", mutate: func(_ *scenario, n *corev1.Node) {
			n.Status.Capacity[fleet.ResourceGPU], n.Status.Allocatable[fleet.ResourceGPU] = resource.MustParse("8"), resource.MustParse("6")
		}, want: "allocatable nvidia.com/gpu 6 of 8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			n := v100(t, "gpu-v100-03", tupleTarget)
			s.cluster.Nodes = append(s.cluster.Nodes, n)
			proveDRA(s, n)
			tc.mutate(s, n)
			p := s.cfg.Prove(s.cluster, n, testNow)
			if tc.want == "" {
				assert.True(t, p.Proven(), "%v", p.Missing)
				return
			}
			require.False(t, p.Proven())
			assert.Contains(t, fmt.Sprint(p.Missing), tc.want)
		})
	}
}

// TestDRAProofLeavesOtherNodesAlone: with a DRA driver configured, a node
// it does not serve (its DaemonSet does not select it, no slice, no plugin
// Pod) is proven by its extended resources as before; a node it serves is
// never proven by them, also once its plugin crashed and its slices went.
func TestDRAProofLeavesOtherNodesAlone(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(s *scenario, n *corev1.Node)
		want   []string // nil: proven by its extended resources
	}{
		{name: "the DaemonSet's affinity does not select the node", mutate: func(s *scenario, n *corev1.Node) {
			delete(n.Labels, "feature.node.kubernetes.io/pci-10de.present")
			delete(n.Labels, "nvidia.com/gpu.present")
		}},
		{name: "the DaemonSet's nodeSelector does not select the node", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.DRA.DaemonSets[0].Spec.Template.Spec.NodeSelector["nvidia.com/dra"] = "true"
		}},
		{name: "the DaemonSet is not there: slices and plugin Pods alone say", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.DRA.DaemonSets = nil
		}},
		{name: "resource.k8s.io not served, the DaemonSet selects no GPU node", mutate: func(s *scenario, n *corev1.Node) {
			delete(n.Labels, "feature.node.kubernetes.io/pci-10de.present")
			delete(n.Labels, "nvidia.com/gpu.present")
			s.cluster.Proof.DRA.Unreadable = "the API server does not serve resource.k8s.io/v1"
		}},
		{name: "the DaemonSet selects the node: its plugin crashed, its slices are gone", mutate: func(*scenario, *corev1.Node) {},
			want: []string{"no DRA plugin Pod of gpu.nvidia.com", "no ResourceSlices of gpu.nvidia.com for the node", "used no ResourceClaim allocated on the node (it references none)"}},
		{name: "the driver publishes a slice for the node the DaemonSet does not select", mutate: func(s *scenario, n *corev1.Node) {
			s.cluster.Proof.DRA.DaemonSets[0].Spec.Template.Spec.NodeSelector["nvidia.com/dra"] = "true"
			s.cluster.Proof.DRA.Slices = []*resourcev1.ResourceSlice{draSlice(n.Name, 1, 1, 8)}
		}, want: []string{"no DRA plugin Pod of gpu.nvidia.com", "used no ResourceClaim allocated on the node (it references none)"}},
		{name: "a forged plugin Pod does not make a node a DRA node", mutate: func(s *scenario, n *corev1.Node) {
			s.cluster.Proof.DRA.DaemonSets[0].Spec.Template.Spec.NodeSelector["nvidia.com/dra"] = "true"
			p := draPluginPod(n.Name, corev1.ConditionTrue, reachedAt)
			p.OwnerReferences[0].UID = "0badc0de-0000-4000-8000-000000000000"
			s.cluster.Proof.DRA.PluginPods = []*corev1.Pod{p}
		}},
		{name: "the DaemonSet cannot be read: unknown, unproven", mutate: func(s *scenario, n *corev1.Node) {
			s.cluster.Proof.DRA.DaemonSets, s.cluster.Proof.DRA.DaemonSetsUnreadable = nil, "its cache has not synced"
		}, want: []string{"whether gpu.nvidia.com serves the node is unknown: its kubelet-plugin DaemonSet nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin cannot be read (its cache has not synced)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			s.cfg.DRADrivers = []dra.Driver{nvidiaDRA}
			n := v100(t, "gpu-v100-03", tupleTarget)
			s.cluster.Nodes = append(s.cluster.Nodes, n)
			prove(s, n.Name) // a device-plugin node's proof: nvidia.com/gpu, a check requesting it
			s.cluster.Proof.DRA = DRAProofFacts{DaemonSets: []*appsv1.DaemonSet{draDaemonSet()}}
			tc.mutate(s, n)
			p := s.cfg.Prove(s.cluster, n, testNow)
			if tc.want == nil {
				assert.True(t, p.Proven(), "%v", p.Missing)
				return
			}
			require.False(t, p.Proven())
			for _, w := range tc.want {
				assert.Contains(t, fmt.Sprint(p.Missing), w)
			}
		})
	}
}

// TestPreviousDRANodeUnproven: the done-when of issue 25 item 1 at the
// Plan review: a proven DRA canary lets the next node's Plan through; one
// whose plugin is not Ready, whose slice lost a device or whose check used
// no claim holds it, naming what is missing.
func TestPreviousDRANodeUnproven(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(s *scenario, n *corev1.Node)
		msg    string // "" = allowed
	}{
		{name: "DRA canary proven: allowed", mutate: func(*scenario, *corev1.Node) {}},
		{name: "plugin not Ready", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.DRA.PluginPods[0].Status.Conditions[0].Status = corev1.ConditionFalse
		}, msg: "DRA plugin Pod nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin-gpu-v100-02 of gpu.nvidia.com is not Ready"},
		{name: "slice lost a device", mutate: func(s *scenario, n *corev1.Node) {
			s.cluster.Proof.DRA.Slices = []*resourcev1.ResourceSlice{draSlice(n.Name, 2, 1, 7)}
		}, msg: "ResourceSlices of gpu.nvidia.com list 7 devices, expected 8"},
		{name: "check used no claim", mutate: func(s *scenario, n *corev1.Node) {
			s.cluster.Proof.AllocationChecks = []*corev1.Pod{allocationPod(n.Name, corev1.PodSucceeded, reachedAt.Add(3*time.Minute))}
		}, msg: "used no ResourceClaim allocated on the node"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			upgraded(s)
			n := s.node("gpu-v100-02")
			proveDRA(s, n)
			tc.mutate(s, n)
			d := s.decide()
			if tc.msg == "" {
				assert.True(t, d.Allowed, d.Message())
				assert.Equal(t, "gpu-v100-02=proven", d.AuditAnnotations()[AuditProofs])
				return
			}
			assert.Equal(t, []Code{CodePreviousNodeUnproven}, d.Codes(), d.Message())
			assert.Contains(t, d.Message(), tc.msg)
		})
	}
}
