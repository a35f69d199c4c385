package fleetgen

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Hardware is one GPU hardware identity and what GPU Feature Discovery
// publishes about it. The IDs are real (pci.ids); the label values follow
// the testdata/nodes fixtures.
type Hardware struct {
	Name string // short name in node, Plan and record names
	// Identity is vendor:device/subvendor:subdevice, as records name it.
	Identity string
	Product  string
	Family   string
	Compute  [2]int
	MemoryMi int
	Count    int
	Machine  string
	MIG      bool
	CPU      CPU
	// Share is this hardware's part of the GPU nodes, in percent.
	Share int
}

// CPU is the host CPU as NFD reports it.
type CPU struct {
	Vendor, Family, Model string
	Cores                 int
	Flags                 []string
	OS                    string // Ubuntu VERSION_ID
}

var (
	skylake = CPU{Vendor: "Intel", Family: "6", Model: "85", Cores: 80, OS: "22.04",
		Flags: []string{"ADX", "AESNI", "AVX", "AVX2", "AVX512BW", "AVX512CD", "AVX512DQ", "AVX512F", "AVX512VL", "AVX512VNNI", "FMA3", "IBPB", "MPX", "STIBP", "VMX"}}
	sapphire = CPU{Vendor: "Intel", Family: "6", Model: "143", Cores: 112, OS: "24.04",
		Flags: []string{"ADX", "AESNI", "AMXBF16", "AMXINT8", "AMXTILE", "AVX", "AVX2", "AVX512BF16", "AVX512BW", "AVX512F", "AVX512FP16", "AVX512VNNI", "FMA3", "SHA", "VMX"}}
	rome = CPU{Vendor: "AMD", Family: "23", Model: "49", Cores: 128, OS: "22.04",
		Flags: []string{"ADX", "AESNI", "AVX", "AVX2", "FMA3", "IBPB", "RDPRU", "SHA", "SSE4A", "STIBP", "SVM", "WBNOINVD", "XSAVES", "CLZERO", "MCAXCPT"}}
)

// Hardwares are the fleet's four GPU identities.
var Hardwares = []Hardware{
	{Name: "v100", Identity: "10de:1db6/10de:124a", Product: "Tesla-V100-PCIE-32GB", Family: "volta", Compute: [2]int{7, 0}, MemoryMi: 32510, Count: 8, Machine: "SYS-4029GP-TRT", CPU: skylake, Share: 30},
	{Name: "a100", Identity: "10de:20b2/10de:1463", Product: "NVIDIA-A100-SXM4-80GB", Family: "ampere", Compute: [2]int{8, 0}, MemoryMi: 81920, Count: 8, Machine: "DGXA100-920-23687-2530-000", MIG: true, CPU: rome, Share: 30},
	{Name: "h200", Identity: "10de:2335/10de:18bf", Product: "NVIDIA-H200", Family: "hopper", Compute: [2]int{9, 0}, MemoryMi: 143771, Count: 8, Machine: "PowerEdge-XE9680", MIG: true, CPU: sapphire, Share: 20},
	{Name: "l40s", Identity: "10de:26b9/10de:1851", Product: "NVIDIA-L40S", Family: "ada-lovelace", Compute: [2]int{8, 9}, MemoryMi: 46068, Count: 4, Machine: "PowerEdge-R760xa", CPU: sapphire, Share: 20},
}

// PCILabel is the subsystem-qualified NFD label of the identity.
func (h Hardware) PCILabel() string {
	return "feature.node.kubernetes.io/pci-" + strings.NewReplacer(":", "_", "/", "_").Replace(h.Identity) + ".present"
}

// ControlPlaneNodes are the RKE2 servers.
const ControlPlaneNodes = 3

// CPUPools are the RKE2 agent pools of CPU nodes.
const CPUPools = 9

func (g *generator) nodes() {
	o := g.f.Options
	for i := 1; i <= ControlPlaneNodes; i++ {
		n := g.cpuNode(fmt.Sprintf("cp-%d", i), Zones[(i-1)%len(Zones)], "control-plane", sapphire)
		n.Labels["node-role.kubernetes.io/control-plane"] = "true"
		n.Labels["node-role.kubernetes.io/etcd"] = "true"
		n.Labels["node-role.kubernetes.io/master"] = "true"
		if o.Kubelet {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
				corev1.Taint{Key: "CriticalAddonsOnly", Value: "true", Effect: corev1.TaintEffectNoExecute})
		}
		g.add(n)
	}
	cpu := o.Nodes - ControlPlaneNodes - o.GPUNodes
	for i := 1; i <= cpu; i++ {
		c := skylake
		if i%3 == 0 {
			c = rome
		}
		g.add(g.cpuNode(fmt.Sprintf("cpu-%04d", i), Zones[(i-1)%len(Zones)], fmt.Sprintf("cpu-pool-%d", (i-1)%CPUPools+1), c))
	}
	left := o.GPUNodes
	for hi, hw := range Hardwares {
		count := o.GPUNodes * hw.Share / 100
		if hi == len(Hardwares)-1 {
			count = left
		}
		left -= count
		for i := 1; i <= count; i++ {
			z, k := (i-1)%len(Zones), (i-1)/len(Zones)
			role := g.gpuRole(z, k)
			n := g.gpuNode(hw, fmt.Sprintf("gpu-%s-%04d", hw.Name, i), Zones[z], role)
			g.f.GPU[hw.Name] = append(g.f.GPU[hw.Name], n)
			g.f.Roles[n.Name] = role
			g.add(n)
		}
	}
}

// Role is what a GPU node is in the fleet's story.
type Role string

// Roles of GPU nodes. Per hardware and zone, the k-th node (k from 0) is:
// 0 in zone-a the proven canary (runs Target); 1-4 in wave-1; 5-6 in wave-2;
// 7 the node of the zone's canary Plan; 8 the node of the driver Plan (zone-a);
// 9 in zone-b runs a training Job (a GPU holder); from 10 on, plain nodes of
// which a seeded few drifted to another kernel, are cordoned or NotReady.
const (
	RoleCanary     Role = "canary"
	RoleWave1      Role = "wave-1"
	RoleWave2      Role = "wave-2"
	RoleCanaryPlan Role = "canary-plan"
	RoleDriverPlan Role = "driver-plan"
	RoleHolder     Role = "holder"
	RolePlain      Role = "plain"
	RoleDrifted    Role = "drifted"
	RoleCordoned   Role = "cordoned"
	RoleNotReady   Role = "not-ready"
)

func (g *generator) gpuRole(z, k int) Role {
	switch {
	case k == 0 && z == 0:
		return RoleCanary
	case k == 0:
		return RolePlain
	case k <= 4:
		return RoleWave1
	case k <= 6:
		return RoleWave2
	case k == 7:
		return RoleCanaryPlan
	case k == 8:
		return RoleDriverPlan
	case k == 9 && z == 1:
		return RoleHolder
	case k == 9:
		return RolePlain
	}
	switch p := g.rng.IntN(1000); {
	case p < 20:
		return RoleDrifted
	case p < 30:
		return RoleCordoned
	case p < 35:
		return RoleNotReady
	}
	return RolePlain
}

// ByRole returns the GPU nodes of hardware hw in zone with role r, in name
// order ("" matches every zone).
func (f *Fleet) ByRole(hw string, zone string, r Role) []*corev1.Node {
	var out []*corev1.Node
	for _, n := range f.GPU[hw] {
		if f.Roles[n.Name] == r && (zone == "" || n.Labels["topology.kubernetes.io/zone"] == zone) {
			out = append(out, n)
		}
	}
	return out
}

func (g *generator) add(n *corev1.Node) {
	g.f.Nodes = append(g.f.Nodes, n)
	g.f.byName[n.Name] = n
}

// baseLabels are what every node carries: kubelet, RKE2 and NFD labels.
func (g *generator) baseLabels(name, zone, pool string, cpu CPU, kernel string) map[string]string {
	l := map[string]string{
		"beta.kubernetes.io/arch":          "amd64",
		"beta.kubernetes.io/instance-type": "rke2",
		"beta.kubernetes.io/os":            "linux",
		"kubernetes.io/arch":               "amd64",
		"kubernetes.io/hostname":           name,
		"kubernetes.io/os":                 "linux",
		"node.kubernetes.io/instance-type": "rke2",
		"topology.kubernetes.io/zone":      zone,
		"topology.kubernetes.io/region":    "eu-central",
		LabelPool:                          pool,
		LabelRack:                          fmt.Sprintf("%s-r%02d", zone, g.rng.IntN(40)+1),

		"feature.node.kubernetes.io/cpu-hardware_multithreading":        "true",
		"feature.node.kubernetes.io/cpu-model.family":                   cpu.Family,
		"feature.node.kubernetes.io/cpu-model.id":                       cpu.Model,
		"feature.node.kubernetes.io/cpu-model.vendor_id":                cpu.Vendor,
		"feature.node.kubernetes.io/kernel-config.NO_HZ":                "true",
		"feature.node.kubernetes.io/kernel-config.NO_HZ_IDLE":           "true",
		"feature.node.kubernetes.io/kernel-version.full":                kernel,
		"feature.node.kubernetes.io/kernel-version.major":               "6",
		"feature.node.kubernetes.io/kernel-version.minor":               "8",
		"feature.node.kubernetes.io/kernel-version.revision":            "0",
		"feature.node.kubernetes.io/memory-numa":                        "true",
		"feature.node.kubernetes.io/storage-nonrotationaldisk":          "true",
		"feature.node.kubernetes.io/system-os_release.ID":               "ubuntu",
		"feature.node.kubernetes.io/system-os_release.VERSION_ID":       cpu.OS,
		"feature.node.kubernetes.io/system-os_release.VERSION_ID.major": strings.Split(cpu.OS, ".")[0],
		"feature.node.kubernetes.io/system-os_release.VERSION_ID.minor": strings.Split(cpu.OS, ".")[1],
		// The BMC's VGA controller, and the NICs: PCI labels of non-GPU vendors.
		"feature.node.kubernetes.io/pci-1a03_2000_1a03_2000.present": "true",
		"feature.node.kubernetes.io/pci-15b3_101b_15b3_0007.present": "true",
	}
	for _, f := range cpu.Flags {
		l["feature.node.kubernetes.io/cpu-cpuid."+f] = "true"
	}
	return l
}

func (g *generator) cpuNode(name, zone, pool string, cpu CPU) *corev1.Node {
	l := g.baseLabels(name, zone, pool, cpu, Source.Kernel)
	// NFD's defaults on a CPU node add more CPU and kernel detail.
	for _, k := range []string{"cpu-cstate.enabled", "cpu-pstate.status", "cpu-pstate.turbo", "cpu-rdt.RDTCMT", "cpu-rdt.RDTMBA", "cpu-rdt.RDTL3CA",
		"cpu-security.sgx.enabled", "kernel-selinux.enabled", "network-sriov.capable", "pci-8086_1572_8086_0000.present", "usb-ef_0b1f_03ee.present",
		"system-os_release.VERSION_CODENAME", "cpu-cpuid.MOVBE", "cpu-cpuid.OSXSAVE", "cpu-cpuid.XSAVE"} {
		v := "true"
		switch k {
		case "cpu-pstate.status":
			v = "active"
		case "cpu-rdt.RDTMBA", "cpu-security.sgx.enabled", "kernel-selinux.enabled":
			v = "false"
		case "system-os_release.VERSION_CODENAME":
			v = "jammy"
		}
		l["feature.node.kubernetes.io/"+k] = v
	}
	n := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
		Spec:       corev1.NodeSpec{ProviderID: "rke2://" + name},
		Status: corev1.NodeStatus{
			NodeInfo:   corev1.NodeSystemInfo{KernelVersion: Source.Kernel, KubeletVersion: Source.RKE2},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	if pool == "control-plane" {
		n.Status.NodeInfo.KubeletVersion = Target.RKE2
	}
	g.kubelet(n, cpu, nil)
	return n
}

func (g *generator) gpuNode(hw Hardware, name, zone string, role Role) *corev1.Node {
	tuple := Source
	if role == RoleCanary {
		tuple = Target
	}
	l := g.baseLabels(name, zone, "gpu-"+hw.Name, hw.CPU, tuple.Kernel)
	// As in the testdata fixtures, GPU nodes carry fewer NFD CPU labels
	// (the GPU Operator's bundled NFD configuration).
	delete(l, "feature.node.kubernetes.io/pci-15b3_101b_15b3_0007.present")
	for _, f := range hw.CPU.Flags[2:] {
		delete(l, "feature.node.kubernetes.io/cpu-cpuid."+f)
	}
	major, minor, rev := splitDriver(tuple.Driver)
	gfd := map[string]string{
		"feature.node.kubernetes.io/pci-10de.present": "true",
		hw.PCILabel():                                 "true",
		"nvidia.com/cuda.driver-version.full":         tuple.Driver,
		"nvidia.com/cuda.driver-version.major":        major,
		"nvidia.com/cuda.driver-version.minor":        minor,
		"nvidia.com/cuda.driver-version.revision":     rev,
		"nvidia.com/cuda.driver.major":                major,
		"nvidia.com/cuda.driver.minor":                minor,
		"nvidia.com/cuda.driver.rev":                  rev,
		"nvidia.com/cuda.runtime-version.full":        "13.0",
		"nvidia.com/cuda.runtime-version.major":       "13",
		"nvidia.com/cuda.runtime-version.minor":       "0",
		"nvidia.com/cuda.runtime.major":               "13",
		"nvidia.com/cuda.runtime.minor":               "0",
		"nvidia.com/gfd.timestamp":                    strconv.Itoa(1787220000 + g.rng.IntN(86400)),
		"nvidia.com/gpu-driver-upgrade-state":         "upgrade-done",
		"nvidia.com/gpu.compute.major":                strconv.Itoa(hw.Compute[0]),
		"nvidia.com/gpu.compute.minor":                strconv.Itoa(hw.Compute[1]),
		"nvidia.com/gpu.count":                        strconv.Itoa(hw.Count),
		"nvidia.com/gpu.deploy.container-toolkit":     "true",
		"nvidia.com/gpu.deploy.dcgm":                  "true",
		"nvidia.com/gpu.deploy.dcgm-exporter":         "true",
		"nvidia.com/gpu.deploy.device-plugin":         "true",
		"nvidia.com/gpu.deploy.driver":                "true",
		"nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
		"nvidia.com/gpu.deploy.node-status-exporter":  "true",
		"nvidia.com/gpu.deploy.operator-validator":    "true",
		"nvidia.com/gpu.family":                       hw.Family,
		"nvidia.com/gpu.machine":                      hw.Machine,
		"nvidia.com/gpu.memory":                       strconv.Itoa(hw.MemoryMi),
		"nvidia.com/gpu.mode":                         "compute",
		"nvidia.com/gpu.present":                      "true",
		"nvidia.com/gpu.product":                      hw.Product,
		"nvidia.com/gpu.replicas":                     "1",
		"nvidia.com/gpu.sharing-strategy":             "none",
		"nvidia.com/gpu.workload.config":              "container",
		"nvidia.com/mig.capable":                      strconv.FormatBool(hw.MIG),
		"nvidia.com/mig.strategy":                     "single",
		"nvidia.com/mps.capable":                      "false",
		"nvidia.com/vgpu.present":                     "false",
	}
	if hw.MIG {
		gfd["nvidia.com/gpu.deploy.mig-manager"] = "true"
		gfd["nvidia.com/mig.config"] = "all-disabled"
		gfd["nvidia.com/mig.config.state"] = "success"
	}
	for k, v := range gfd {
		l[k] = v
	}
	n := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
		Spec:       corev1.NodeSpec{ProviderID: "rke2://" + name},
		Status: corev1.NodeStatus{
			NodeInfo:   corev1.NodeSystemInfo{KernelVersion: tuple.Kernel, KubeletVersion: tuple.RKE2},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	switch role {
	case RoleWave1, RoleWave2:
		n.Labels[LabelWave] = string(role)
	case RoleDrifted:
		setTuple(n, Drifted, tuple.RKE2, "")
	case RoleCordoned:
		n.Spec.Unschedulable = true
	case RoleNotReady:
		n.Status.Conditions[0].Status = corev1.ConditionFalse
	}
	g.kubelet(n, hw.CPU, &hw)
	if n.Spec.Unschedulable {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
	}
	g.proof(n, hw, role)
	return n
}

// proof gives a GPU node what a proof of an upgraded node reads (no random
// draws, so the fleet's structure does not move): its GPUs advertised, Ready
// since three days before Now, and for the canary a Ready validator Pod and
// a Succeeded allocation check after that.
func (g *generator) proof(n *corev1.Node, hw Hardware, role Role) {
	since := metav1.NewTime(g.f.Options.Now.Add(-72 * time.Hour))
	n.Status.Conditions[0].LastTransitionTime = since
	if _, ok := n.Status.Capacity["nvidia.com/gpu"]; !ok {
		gpus := resource.MustParse(strconv.Itoa(hw.Count))
		n.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": gpus}
		n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": gpus}
	}
	validator := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: NamespaceOperator, Name: "nvidia-operator-validator-" + n.Name, Labels: map[string]string{"app": "nvidia-operator-validator"},
			OwnerReferences: []metav1.OwnerReference{ValidatorOwner}},
		Spec: corev1.PodSpec{NodeName: n.Name, Containers: []corev1.Container{{Name: "nvidia-operator-validator", Image: "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.3.3"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &since,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: since}}},
	}
	if role != RoleCanary {
		if g.f.Options.Validators {
			g.f.ProofPods = append(g.f.ProofPods, validator)
		}
		return
	}
	started := metav1.NewTime(since.Add(time.Hour))
	g.f.ProofPods = append(g.f.ProofPods,
		validator,
		&corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Namespace: NamespaceGate, Name: "allocation-check-" + n.Name, Labels: map[string]string{"gpu-upgrade-gate.io/allocation-check": "true"}},
			Spec: corev1.PodSpec{NodeName: n.Name, RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "check", Image: "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodSucceeded, StartTime: &started},
		})
}

// setTuple moves a node's facts to kernel, RKE2 and driver.
func setTuple(n *corev1.Node, kernel, rke2, driver string) {
	n.Status.NodeInfo.KernelVersion = kernel
	n.Status.NodeInfo.KubeletVersion = rke2
	n.Labels["feature.node.kubernetes.io/kernel-version.full"] = kernel
	if _, ok := n.Labels["nvidia.com/cuda.driver-version.full"]; ok && driver != "" {
		major, minor, rev := splitDriver(driver)
		n.Labels["nvidia.com/cuda.driver-version.full"] = driver
		n.Labels["nvidia.com/cuda.driver-version.major"] = major
		n.Labels["nvidia.com/cuda.driver-version.minor"] = minor
		n.Labels["nvidia.com/cuda.driver-version.revision"] = rev
		n.Labels["nvidia.com/cuda.driver.major"] = major
		n.Labels["nvidia.com/cuda.driver.minor"] = minor
		n.Labels["nvidia.com/cuda.driver.rev"] = rev
	}
}

func splitDriver(v string) (major, minor, rev string) {
	p := strings.SplitN(v, ".", 3)
	for len(p) < 3 {
		p = append(p, "")
	}
	return p[0], p[1], p[2]
}

// kubelet fills in what the kubelet, RKE2, NFD, Calico and the CSI driver
// publish, when Options.Kubelet is set.
func (g *generator) kubelet(n *corev1.Node, cpu CPU, hw *Hardware) {
	if !g.f.Options.Kubelet {
		return
	}
	structure := g.rng
	g.rng = g.krng
	defer func() { g.rng = structure }()
	ip := fmt.Sprintf("10.%d.%d.%d", 20+g.rng.IntN(4), g.rng.IntN(256), 1+g.rng.IntN(254))
	podCIDR := fmt.Sprintf("10.%d.%d.0/24", 42+g.rng.IntN(4), g.rng.IntN(256))
	n.Spec.PodCIDR, n.Spec.PodCIDRs = podCIDR, []string{podCIDR}
	var features []string
	for k := range n.Labels {
		if rest, ok := strings.CutPrefix(k, "feature.node.kubernetes.io/"); ok {
			features = append(features, rest)
		} else if strings.HasPrefix(k, "nvidia.com/") {
			features = append(features, k)
		}
	}
	slices.Sort(features)
	args := `["agent"]`
	if _, ok := n.Labels["node-role.kubernetes.io/control-plane"]; ok {
		args = `["server","--cni","calico","--etcd-snapshot-schedule-cron","0 */6 * * *"]`
	}
	n.Annotations = map[string]string{
		"nfd.node.kubernetes.io/feature-labels":                  strings.Join(features, ","),
		"node.alpha.kubernetes.io/ttl":                           "0",
		"rke2.io/hostname":                                       n.Name,
		"rke2.io/internal-ip":                                    ip,
		"rke2.io/node-args":                                      args,
		"rke2.io/node-config-hash":                               strings.ToUpper(g.hex(52)) + "====",
		"rke2.io/node-env":                                       "{}",
		"volumes.kubernetes.io/controller-managed-attach-detach": "true",
		"csi.volume.kubernetes.io/nodeid":                        fmt.Sprintf(`{"driver.longhorn.io":%q,"rbd.csi.ceph.com":%q}`, n.Name, n.Name),
		"projectcalico.org/IPv4Address":                          ip + "/16",
		"projectcalico.org/IPv4VXLANTunnelAddr":                  fmt.Sprintf("10.42.%d.%d", g.rng.IntN(256), g.rng.IntN(256)),
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse(strconv.Itoa(cpu.Cores)),
		corev1.ResourceEphemeralStorage: resource.MustParse("937156932Ki"),
		"hugepages-1Gi":                 resource.MustParse("0"),
		"hugepages-2Mi":                 resource.MustParse("0"),
		corev1.ResourceMemory:           resource.MustParse("791242216Ki"),
		corev1.ResourcePods:             resource.MustParse("110"),
	}
	if hw != nil {
		capacity["nvidia.com/gpu"] = resource.MustParse(strconv.Itoa(hw.Count))
		n.Annotations["nvidia.com/gpu-driver-upgrade-enabled"] = "true"
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule})
	}
	alloc := capacity.DeepCopy()
	alloc[corev1.ResourceEphemeralStorage] = resource.MustParse("911668203503")
	n.Status.Capacity, n.Status.Allocatable = capacity, alloc
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: n.Name}}
	n.Status.DaemonEndpoints = corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}}
	beat := metav1.NewTime(g.f.Options.Now.Add(-10 * 1e9))
	since := metav1.NewTime(g.f.Options.Now.Add(-240 * 24 * 3600 * 1e9))
	ready := corev1.ConditionTrue
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status
		}
	}
	readyReason, readyMsg := "KubeletReady", "kubelet is posting ready status"
	if ready != corev1.ConditionTrue {
		readyReason, readyMsg = "KubeletNotReady", "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"
	}
	n.Status.Conditions = []corev1.NodeCondition{
		{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, LastHeartbeatTime: since, LastTransitionTime: since, Reason: "CalicoIsUp", Message: "Calico is running on this node"},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: beat, LastTransitionTime: since, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: beat, LastTransitionTime: since, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: beat, LastTransitionTime: since, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		{Type: corev1.NodeReady, Status: ready, LastHeartbeatTime: beat, LastTransitionTime: since, Reason: readyReason, Message: readyMsg},
	}
	n.Status.NodeInfo = corev1.NodeSystemInfo{
		MachineID: g.hex(32), SystemUUID: g.uuid(), BootID: g.uuid(),
		KernelVersion: n.Status.NodeInfo.KernelVersion, OSImage: "Ubuntu " + cpu.OS + ".5 LTS",
		ContainerRuntimeVersion: "containerd://2.2.2-k3s1", KubeletVersion: n.Status.NodeInfo.KubeletVersion,
		OperatingSystem: "linux", Architecture: "amd64",
	}
	n.Status.Images = g.images.pick(hw != nil)
}

// imageCatalogue is the set of images nodes have pulled; a node lists about
// 40 of them, as kubelets report (nodeStatusMaxImages 50).
type imageCatalogue struct {
	base, gpu, workload []corev1.ContainerImage
}

func newImageCatalogue(rng *rand.Rand) *imageCatalogue {
	mk := func(refs ...string) []corev1.ContainerImage {
		out := make([]corev1.ContainerImage, len(refs))
		for i, ref := range refs {
			repo, _, _ := strings.Cut(ref, ":")
			digest := make([]byte, 64)
			for j := range digest {
				digest[j] = "0123456789abcdef"[rng.IntN(16)]
			}
			out[i] = corev1.ContainerImage{Names: []string{repo + "@sha256:" + string(digest), ref}, SizeBytes: int64(5_000_000 + rng.IntN(900_000_000))}
		}
		return out
	}
	c := &imageCatalogue{
		base: mk("docker.io/rancher/rke2-runtime:v1.35.3-rke2r3", "docker.io/rancher/hardened-kubernetes:v1.35.3-rke2r3-build20260310",
			"docker.io/rancher/hardened-calico:v3.31.2-build20260212", "docker.io/rancher/hardened-flannel:v0.27.4-build20260212",
			"docker.io/rancher/hardened-coredns:v1.13.1-build20260212", "docker.io/rancher/hardened-dns-node-cache:1.26.4-build20260212",
			"docker.io/rancher/hardened-k8s-metrics-server:v0.8.0-build20260212", "docker.io/rancher/hardened-cluster-autoscaler:v1.10.2-build20260212",
			"docker.io/rancher/hardened-addon-resizer:1.8.23-build20260212", "docker.io/rancher/hardened-etcd:v3.6.7-k3s1-build20260212",
			"docker.io/rancher/mirrored-pause:3.6", "docker.io/rancher/nginx-ingress-controller:v1.13.4-hardened2",
			"docker.io/rancher/klipper-helm:v0.9.10-build20260212", "docker.io/rancher/mirrored-sig-storage-snapshot-controller:v8.2.0",
			"docker.io/rancher/rke2-cloud-provider:v1.34.2-0.20260212-build20260212", "docker.io/rancher/system-upgrade-controller:v0.17.0",
			"docker.io/rancher/kubectl:v1.35.3", "docker.io/rancher/rke2-upgrade:v1.35.3-rke2r3",
			"quay.io/prometheus/node-exporter:v1.10.2", "registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.17.0",
			"quay.io/prometheus-operator/prometheus-config-reloader:v0.86.1", "docker.io/grafana/promtail:3.5.4",
			"docker.io/fluent/fluent-bit:4.1.1", "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.15.0",
			"registry.k8s.io/sig-storage/livenessprobe:v2.17.0", "quay.io/cephcsi/cephcsi:v3.15.0",
			"docker.io/longhornio/longhorn-manager:v1.10.1", "docker.io/longhornio/longhorn-engine:v1.10.1",
			"docker.io/longhornio/longhorn-instance-manager:v1.10.1", "registry.k8s.io/nfd/node-feature-discovery:v0.18.2"),
		gpu: mk("nvcr.io/nvidia/gpu-operator:v26.3.3", "nvcr.io/nvidia/driver:580.126.20-ubuntu22.04",
			"nvcr.io/nvidia/k8s-device-plugin:v0.18.1", "nvcr.io/nvidia/k8s/container-toolkit:v1.18.1",
			"nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless", "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.3.3",
			"nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.9.1", "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.13.1",
			"nvcr.io/nvidia/pytorch:25.01-py3", "nvcr.io/nvidia/tritonserver:25.01-py3"),
		workload: mk("docker.io/library/python:3.13-slim", "docker.io/library/nginx:1.29.3", "ghcr.io/example/api-gateway:2.14.0",
			"ghcr.io/example/billing:1.88.2", "ghcr.io/example/search-indexer:0.31.7", "ghcr.io/example/feature-store:5.2.0",
			"ghcr.io/example/notebook:2026.3", "docker.io/bitnami/redis:8.2.1", "docker.io/library/postgres:18.1",
			"quay.io/jupyter/scipy-notebook:2026-03-02"),
	}
	return c
}

func (c *imageCatalogue) pick(gpu bool) []corev1.ContainerImage {
	out := slices.Clone(c.base)
	if gpu {
		out = append(out, c.gpu...)
	} else {
		out = append(out, c.workload...)
	}
	// Kubelets list images by size, largest first.
	slices.SortStableFunc(out, func(a, b corev1.ContainerImage) int { return cmp.Compare(b.SizeBytes, a.SizeBytes) })
	return out
}

// ValidatorOwner is the controller reference the DaemonSet controller puts
// on the GPU Operator's validator Pods (only those count in a proof). No
// DaemonSet exists here: the API server does not check an owner, and no
// garbage collector runs.
var ValidatorOwner = metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "nvidia-operator-validator",
	UID: "7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f", Controller: new(true), BlockOwnerDeletion: new(true)}
