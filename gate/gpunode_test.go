package gate

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIsGPUNode(t *testing.T) {
	cfg := DefaultConfig()
	pci := func(parts string) map[string]string {
		return map[string]string{labelPCIPrefix + parts + ".present": "true"}
	}
	for _, tc := range []struct {
		name     string
		labels   map[string]string
		capacity corev1.ResourceList
		want     bool
	}{
		{"GPU Operator's deviceLabelFields [vendor]", pci("10de"), nil, true},
		{"NFD's default [class, vendor]", pci("0302_10de"), nil, true},
		{"VGA class", pci("0300_10de"), nil, true},
		{"[vendor, device]", pci("10de_2335"), nil, true},
		{"[vendor, device, subsystem_vendor]", pci("10de_2335_10de"), nil, true},
		{"the chart's NodeFeatureRule (four IDs)", pci("10de_2335_10de_18bf"), nil, true},
		{"all five fields", pci("0302_10de_2335_10de_18bf"), nil, true},
		{"[class, vendor, device]", pci("0302_10de_1db6"), nil, true},
		{"another vendor's device", pci("1a03_2000_1a03_2000"), nil, false},
		{"another vendor, default fields", pci("0300_1a03"), nil, false},
		{"vendor in the device position", pci("8086_10de"), nil, false},
		{"six parts", pci("0302_10de_2335_10de_18bf_0000"), nil, false},
		{"upper-case hex is not NFD's spelling", pci("10DE"), nil, false},
		{"label not true", map[string]string{labelPCIPrefix + "10de.present": "false"}, nil, false},
		{"sriov label of a GPU vendor", map[string]string{labelPCIPrefix + "10de.sriov.capable": "true"}, nil, false},
		{"gpu.present true", map[string]string{"nvidia.com/gpu.present": "true"}, nil, true},
		{"gpu.present false (the operator's mark for a former GPU node)", map[string]string{"nvidia.com/gpu.present": "false"}, nil, false},
		{"GFD product", map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200"}, nil, true},
		{"GFD driver version", map[string]string{"nvidia.com/cuda.driver-version.full": "580.126.20"}, nil, true},
		{"an operand opt-out on a CPU node", map[string]string{"nvidia.com/gpu.deploy.operands": "false"}, nil, false},
		{"GPU extended resource", nil, corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}, true},
		{"MIG resource", nil, corev1.ResourceList{"nvidia.com/mig-1g.18gb": resource.MustParse("7")}, true},
		{"AMD GPU resource", nil, corev1.ResourceList{"amd.com/gpu": resource.MustParse("1")}, true},
		{"CPU and memory only", nil, corev1.ResourceList{"cpu": resource.MustParse("64"), "memory": resource.MustParse("1Ti")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: tc.labels}, Status: corev1.NodeStatus{Capacity: tc.capacity}}
			assert.Equal(t, tc.want, cfg.IsGPUNode(n))
			assert.Equal(t, tc.want, cfg.FactsOf(n).GPU, "FactsOf agrees")
		})
	}
	t.Run("a second configured vendor", func(t *testing.T) {
		cfg := DefaultConfig()
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: pci("0300_1002")}}
		assert.False(t, cfg.IsGPUNode(n))
		cfg.GPUVendors = append(cfg.GPUVendors, "1002")
		assert.True(t, cfg.IsGPUNode(n))
	})
}

// TestGPUNodeCondition: the match condition names every arm of the
// definition, for each configured vendor and both objects. Whether the API
// server evaluates it as IsGPUNode does is the e2e suite's check.
func TestGPUNodeCondition(t *testing.T) {
	cfg := DefaultConfig()
	cfg.GPUVendors = []string{"10de", "1002"}
	c := cfg.GPUNodeCondition()
	for _, want := range []string{
		"object.metadata.?labels", "oldObject.metadata.?labels", "object.?status.?capacity", "oldObject.?status.?capacity",
		"(10de|1002)", "'nvidia.com/gpu.present'", "'nvidia.com/gpu.product'", "r.startsWith('nvidia.com/')", "r.startsWith('amd.com/gpu')",
		`^feature[.]node[.]kubernetes[.]io/pci-(030[02]_)?(10de|1002)(_[0-9a-f]{4}){0,3}[.]present$`,
	} {
		assert.Contains(t, c, want)
	}
	assert.Equal(t, 1, strings.Count(c, " || oldObject.metadata"), "object OR oldObject")
}
