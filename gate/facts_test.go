package gate

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFactsOfFixtures(t *testing.T) {
	cfg := DefaultConfig()
	v := cfg.FactsOf(loadNode(t, "node-v100.json"))
	assert.True(t, v.GPU)
	assert.Equal(t, []string{hwV100}, v.Identities, "the ASPEED BMC VGA (1a03) is not a GPU vendor")
	assert.Equal(t, "6.8.0-134-generic", v.Kernel)
	assert.Equal(t, "v1.35.3+rke2r3", v.RKE2)
	assert.Equal(t, "580.126.20", v.Driver)
	assert.True(t, v.Ready)
	h := cfg.FactsOf(loadNode(t, "node-h200.json"))
	assert.Equal(t, []string{hwH200}, h.Identities)
	assert.False(t, cfg.FactsOf(cpuNode("c")).GPU)
}

func TestGPUIdentityLabels(t *testing.T) {
	cfg := DefaultConfig()
	cases := []struct {
		label string
		gpu   bool
		ids   []string
	}{
		{"feature.node.kubernetes.io/pci-10de_1db6_10de_124a.present", true, []string{hwV100}},
		{"feature.node.kubernetes.io/pci-0302_10de_2335_10de_18bf.present", true, []string{hwH200}},
		{"feature.node.kubernetes.io/pci-10de.present", true, nil},
		{"feature.node.kubernetes.io/pci-0300_10de.present", true, nil},
		{"feature.node.kubernetes.io/pci-0302_10de.present", true, nil},
		{"feature.node.kubernetes.io/pci-10de_1db6.present", true, nil},
		{"nvidia.com/gpu.present", true, nil},
		{"feature.node.kubernetes.io/pci-1a03_2000_1a03_2000.present", false, nil},
		{"feature.node.kubernetes.io/pci-0300_1a03.present", false, nil},
		{"feature.node.kubernetes.io/pci-10de_1db6_10de_124a.sriov.capable", false, nil},
		{"feature.node.kubernetes.io/pci-10DE_1DB6_10DE_124A.present", false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.label, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{tc.label: "true"}}}
			f := cfg.FactsOf(n)
			assert.Equal(t, tc.gpu, f.GPU)
			assert.Equal(t, tc.gpu, cfg.IsGPUNode(n))
			assert.Equal(t, tc.ids, f.Identities)
		})
	}
	t.Run("value false is not a GPU", func(t *testing.T) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"nvidia.com/gpu.present": "false", "feature.node.kubernetes.io/pci-10de.present": "false"}}}
		assert.False(t, cfg.IsGPUNode(n))
	})
}

func TestDriverFallbacks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{"full", map[string]string{labelDriverFull: "580.126.20", labelDriverMajor: "1"}, "580.126.20"},
		{"parts", map[string]string{labelDriverMajor: "550", labelDriverMinor: "90", labelDriverRev: "07"}, "550.90.07"},
		{"two parts", map[string]string{labelDriverMajor: "580", labelDriverMinor: "65", labelDriverRev: ""}, "580.65"},
		{"deprecated", map[string]string{labelOldDriverMaj: "535", labelOldDriverMin: "104", labelOldDriverRev: "05"}, "535.104.05"},
		{"none", map[string]string{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, driverOf(tc.labels)) })
	}
}

func TestHoldersOf(t *testing.T) {
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	ctrl := true
	pod := func(name string, mod func(*corev1.Pod)) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "gpu-v100-01", Containers: []corev1.Container{{Name: "c"}}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		mod(&p)
		return p
	}
	now := metav1.NewTime(time.Now())
	pods := []corev1.Pod{
		pod("limits", func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Limits = gpu }),
		pod("init", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: gpu}}}
		}),
		pod("ephemeral", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"gpu.intel.com/i915": resource.MustParse("1")}}}}}
		}),
		pod("overhead", func(p *corev1.Pod) { p.Spec.Overhead = corev1.ResourceList{"amd.com/gpu": resource.MustParse("1")} }),
		pod("claims", func(p *corev1.Pod) { p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu"}} }),
		// A DRA-backed extended resource of any name: the scheduler's claim
		// in the status (resource.k8s.io/v1, DRAExtendedResource).
		pod("extended-claim", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"example.com/accelerator": resource.MustParse("1")}
			p.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "extended-claim-gpu-x2k9f",
				RequestMappings: []corev1.ContainerExtendedResourceRequest{{ContainerName: "c", ResourceName: "example.com/accelerator", RequestName: "container-0-request-0"}}}
		}),
		pod("virt-launcher-vm-1", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/GV100GL_Tesla_V100": resource.MustParse("1")}
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "VirtualMachineInstance", Name: "vm-1", Controller: &ctrl}}
		}),
		pod("cpu-only", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"cpu": resource.MustParse("1")}
		}),
		pod("zero", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("0")}
		}),
		pod("done", func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Limits = gpu; p.Status.Phase = corev1.PodSucceeded }),
		pod("failed", func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Limits = gpu; p.Status.Phase = corev1.PodFailed }),
		pod("deleting", func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Limits = gpu; p.DeletionTimestamp = &now }),
	}
	hs := DefaultConfig().HoldersOf(pods)
	var got []string
	for _, h := range hs {
		got = append(got, h.Owner)
	}
	assert.Equal(t, []string{"Pod/limits", "Pod/init", "Pod/ephemeral", "Pod/overhead", "Pod/claims", "Pod/extended-claim", "VirtualMachineInstance/vm-1"}, got)
	require.Len(t, hs, 7)
	assert.Equal(t, "VirtualMachineInstance ns/vm-1 [nvidia.com/GV100GL_Tesla_V100]", hs[6].String())
	assert.Equal(t, []string{"resourceClaims"}, hs[4].Resources)
	assert.Equal(t, []string{"resourceClaims"}, hs[5].Resources)
}

// TestHoldersByRuntime: a Pod that reaches GPUs through the NVIDIA runtime,
// with no GPU resource, holds GPUs; asking it for no devices does not.
func TestHoldersByRuntime(t *testing.T) {
	rc := func(name string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Spec.RuntimeClassName = &name } }
	env := func(value string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "OTHER", Value: "all"}, {Name: "NVIDIA_VISIBLE_DEVICES", Value: value}}
		}
	}
	cases := []struct {
		name string
		mod  func(*corev1.Pod)
		want []string // nil: not a holder
	}{
		{"runtime class nvidia", rc("nvidia"), []string{"runtimeClassName=nvidia"}},
		{"another runtime class", rc("kata"), nil},
		{"a configured runtime class", rc("nvidia-cdi"), []string{"runtimeClassName=nvidia-cdi"}},
		{"NVIDIA_VISIBLE_DEVICES=all", env("all"), []string{"NVIDIA_VISIBLE_DEVICES=all"}},
		{"NVIDIA_VISIBLE_DEVICES=0,1", env("0,1"), []string{"NVIDIA_VISIBLE_DEVICES=0,1"}},
		{"NVIDIA_VISIBLE_DEVICES=GPU-uuid", env("GPU-5f3a"), []string{"NVIDIA_VISIBLE_DEVICES=GPU-5f3a"}},
		{"NVIDIA_VISIBLE_DEVICES=NONE is not none", env("NONE"), []string{"NVIDIA_VISIBLE_DEVICES=NONE"}},
		{"NVIDIA_VISIBLE_DEVICES=void", env("void"), nil},
		{"NVIDIA_VISIBLE_DEVICES=none", env("none"), nil},
		{"NVIDIA_VISIBLE_DEVICES empty", env(""), nil},
		{"another variable", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "CUDA_VISIBLE_DEVICES", Value: "all"}}
		}, nil},
		{"in an init container", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i", Env: []corev1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"}}}}
		}, []string{"NVIDIA_VISIBLE_DEVICES=all"}},
		{"in an ephemeral container", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "e", Env: []corev1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"}}}}}
		}, []string{"NVIDIA_VISIBLE_DEVICES=all"}},
		{"from a ConfigMap: cannot be read, counted", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "devices"}}}}
		}, []string{"NVIDIA_VISIBLE_DEVICES from a reference"}},
		{"a long value is clipped", env(strings.Repeat("0,", 400)), []string{"NVIDIA_VISIBLE_DEVICES=" + strings.Repeat("0,", 128) + "... (800 bytes in all)"}},
		{"both", func(p *corev1.Pod) { rc("nvidia")(p); env("all")(p) }, []string{"NVIDIA_VISIBLE_DEVICES=all", "runtimeClassName=nvidia"}},
	}
	cfg := DefaultConfig()
	cfg.GPURuntimeClasses = append(cfg.GPURuntimeClasses, "nvidia-cdi")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "gpu-v100-01", Containers: []corev1.Container{{Name: "c"}}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
			tc.mod(&p)
			hs := cfg.HoldersOf([]corev1.Pod{p})
			if tc.want == nil {
				assert.Empty(t, hs)
				return
			}
			require.Len(t, hs, 1)
			assert.Equal(t, tc.want, hs[0].Resources)
		})
	}
	t.Run("no runtime class configured", func(t *testing.T) {
		c := DefaultConfig()
		c.GPURuntimeClasses = nil
		name := "nvidia"
		assert.Empty(t, c.HoldersOf([]corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{RuntimeClassName: &name}}}))
	})
}

// TestClusterVersionsFromTheAdapterOnlyForItsImages: the versions an adapter
// read (Cluster.Versions) answer only while the cluster's images are the
// ones they were read from; otherwise the images are read again, so a stale
// hand-over never stands in for the running workloads.
func TestClusterVersionsFromTheAdapterOnlyForItsImages(t *testing.T) {
	const (
		op1, op2     = "nvcr.io/nvidia/gpu-operator:v25.3.0", "nvcr.io/nvidia/gpu-operator:v25.10.1"
		dcgm1, dcgm2 = "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.1-ubuntu22.04", "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless"
	)
	for _, tc := range []struct {
		name         string
		versions     *WorkloadVersions
		wantOp, want string
	}{
		{"none handed over", nil, "v25.10.1", "4.5.3-4.8.2-distroless"},
		{"handed over for these images", VersionsOf(op2, dcgm2), "v25.10.1", "4.5.3-4.8.2-distroless"},
		{"handed over for other images", VersionsOf(op1, dcgm1), "v25.10.1", "4.5.3-4.8.2-distroless"},
		{"other DCGM exporter image only", VersionsOf(op2, dcgm1), "v25.10.1", "4.5.3-4.8.2-distroless"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := &Cluster{GPUOperatorImage: op2, DCGMExporterImage: dcgm2, Versions: tc.versions}
			op, dcgm := clusterVersions(cl)
			require.Equal(t, tc.wantOp, op)
			require.Equal(t, tc.want, dcgm)
		})
	}
	// The hand-over is what is read: a forged one for these images shows.
	forged := VersionsOf(op2, dcgm2)
	forged.GPUOperator, forged.DCGMExporter = "handed", "over"
	op, dcgm := clusterVersions(&Cluster{GPUOperatorImage: op2, DCGMExporterImage: dcgm2, Versions: forged})
	require.Equal(t, []string{"handed", "over"}, []string{op, dcgm})
}
