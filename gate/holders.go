package gate

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// gpuResourcePrefixes are the extended resources that mean "this Pod holds a
// GPU" (fleet.GPUResourcePrefixes).
var gpuResourcePrefixes = fleet.GPUResourcePrefixes

// Holder is a Pod that holds GPUs on a node, reported by its controller so a
// person sees "VirtualMachineInstance tenant-a/vm-1", not a Pod hash.
type Holder struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	// Owner is "Kind/name" of the controlling owner, or "Pod/<name>".
	Owner     string   `json:"owner"`
	Resources []string `json:"resources"`
}

func (h Holder) String() string {
	return fmt.Sprintf("%s %s/%s [%s]", strings.SplitN(h.Owner, "/", 2)[0], h.Namespace, ownerName(h.Owner), strings.Join(h.Resources, ","))
}

func ownerName(owner string) string {
	if i := strings.IndexByte(owner, '/'); i >= 0 {
		return owner[i+1:]
	}
	return owner
}

// HoldersOf returns the GPU holders among pods: non-terminal, not deleting,
// and asking for a GPU resource in any container kind or the overhead,
// using dynamic resource claims (its own, or the scheduler's for a
// DRA-backed extended resource; any claim counts, a GPU's or not), running with a GPU runtime class, or
// asking the NVIDIA container runtime for devices through
// NVIDIA_VISIBLE_DEVICES (which needs no resource at all where that runtime
// is the node's default). KubeVirt VMs show as their virt-launcher Pods,
// owned by the VirtualMachineInstance.
func (c *Config) HoldersOf(pods []corev1.Pod) []Holder {
	var hs []Holder
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		res := gpuResources(p, c.GPURuntimeClasses)
		if len(res) == 0 {
			continue
		}
		owner := "Pod/" + p.Name
		if ref := metav1.GetControllerOf(p); ref != nil {
			owner = ref.Kind + "/" + ref.Name
		}
		hs = append(hs, Holder{Namespace: p.Namespace, Pod: p.Name, Owner: owner, Resources: res})
	}
	return hs
}

// envVisibleDevices is the NVIDIA container runtime's device request; these
// values (exactly) ask for none.
const envVisibleDevices = "NVIDIA_VISIBLE_DEVICES"

var noVisibleDevices = []string{"", "void", "none"}

func gpuResources(p *corev1.Pod, runtimeClasses []string) []string {
	var res []string
	addList := func(l corev1.ResourceList) {
		for name, q := range l {
			if q.Sign() > 0 && isGPUResource(string(name)) && !slices.Contains(res, string(name)) {
				res = append(res, string(name))
			}
		}
	}
	for _, set := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range set {
			addList(c.Resources.Requests)
			addList(c.Resources.Limits)
		}
	}
	for _, c := range p.Spec.EphemeralContainers {
		addList(c.Resources.Requests)
		addList(c.Resources.Limits)
	}
	addList(p.Spec.Overhead)
	// A DRA-backed extended resource need not be a GPU resource's name (a
	// DeviceClass's extendedResourceName is any name): the scheduler's
	// claim for it, in the Pod's status, says it holds devices.
	if len(p.Spec.ResourceClaims) > 0 || p.Status.ExtendedResourceClaimStatus != nil {
		res = append(res, "resourceClaims")
	}
	if rc := p.Spec.RuntimeClassName; rc != nil && slices.Contains(runtimeClasses, *rc) {
		res = append(res, "runtimeClassName="+*rc)
	}
	addEnv := func(env []corev1.EnvVar) {
		for _, e := range env {
			if e.Name != envVisibleDevices {
				continue
			}
			// A value from a reference cannot be read here: it may ask for all.
			seen := envVisibleDevices + "=" + qualification.Clip(e.Value)
			if e.ValueFrom != nil {
				seen = envVisibleDevices + " from a reference"
			} else if slices.Contains(noVisibleDevices, e.Value) {
				continue
			}
			if !slices.Contains(res, seen) {
				res = append(res, seen)
			}
		}
	}
	for _, set := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range set {
			addEnv(c.Env)
		}
	}
	for _, c := range p.Spec.EphemeralContainers {
		addEnv(c.Env)
	}
	slices.Sort(res)
	return res
}

func isGPUResource(name string) bool { return fleet.IsGPUResource(name) }

// holderList renders holders for a message, grouped by owner.
func holderList(hs []Holder) string {
	s := make([]string, len(hs))
	for i, h := range hs {
		s[i] = h.String()
	}
	slices.Sort(s)
	return strings.Join(slices.Compact(s), "; ")
}
