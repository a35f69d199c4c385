package gate

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

// TestGPUIdentityRemoved: a person's write that takes away what makes a node
// a GPU node is refused, naming the label; the neighbouring safe changes
// (a GFD value changing, an identity label added, a non-identity label
// removed, a GFD label set on a node that stays a GPU node) are allowed.
func TestGPUIdentityRemoved(t *testing.T) {
	const pciVendor = "feature.node.kubernetes.io/pci-10de.present"
	for _, tc := range []struct {
		name   string
		mutate func(n *corev1.Node)
		denied []string // the labels named, in order
		owned  bool     // a person's write of NFD's or GFD's label: OwnedFactWritten (rule_ownedfact.go)
	}{
		{"the GPU Operator's PCI label removed", func(n *corev1.Node) { delete(n.Labels, pciVendor) }, []string{pciVendor}, false},
		{"a PCI label set to false", func(n *corev1.Node) { n.Labels[pciVendor] = "false" }, []string{pciVendor}, false},
		{"gpu.present removed", func(n *corev1.Node) { delete(n.Labels, "nvidia.com/gpu.present") }, []string{"nvidia.com/gpu.present"}, false},
		{"a GFD label removed", func(n *corev1.Node) { delete(n.Labels, "nvidia.com/gpu.product") }, []string{"nvidia.com/gpu.product"}, false},
		{"every identity label stripped", func(n *corev1.Node) {
			for k := range n.Labels {
				if strings.HasPrefix(k, "feature.node.kubernetes.io/pci-10de") || k == "nvidia.com/gpu.present" {
					delete(n.Labels, k)
				}
			}
		}, []string{"feature.node.kubernetes.io/pci-10de.present", "feature.node.kubernetes.io/pci-10de_1db6_10de_124a.present", "nvidia.com/gpu.present"}, false},
		{"a GFD value changes", func(n *corev1.Node) { n.Labels["nvidia.com/gpu.product"] = "Tesla-V100-SXM2-32GB" }, nil, true},
		{"an identity label added", func(n *corev1.Node) { n.Labels["feature.node.kubernetes.io/pci-0302_10de.present"] = "true" }, nil, true},
		{"another vendor's label removed", func(n *corev1.Node) {
			delete(n.Labels, "feature.node.kubernetes.io/pci-1a03_2000_1a03_2000.present")
		}, nil, true},
		{"a team label removed", func(n *corev1.Node) { delete(n.Labels, "team") }, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			old := s.node("gpu-v100-01")
			old.Labels["team"] = "ml"
			n := old.DeepCopy()
			tc.mutate(n)
			d := decideNode(s, old, n)
			var named []string
			for _, b := range d.Blockers {
				if b.Code == CodeGPUIdentityRemoved {
					named = append(named, b.Err.Field)
					assert.Contains(t, b.Err.Detail, "NFD, GFD or the GPU Operator own it")
				}
			}
			var want []string
			for _, k := range tc.denied {
				want = append(want, "metadata.labels["+k+"]")
			}
			assert.Equal(t, want, named)
			assert.Equal(t, tc.owned, slices.Contains(d.Codes(), CodeOwnedFactWritten), "codes %v", d.Codes())
			assert.Equal(t, len(tc.denied) == 0 && !tc.owned, d.Allowed, "codes %v", d.Codes())
		})
	}
	t.Run("an exempt system controller may", func(t *testing.T) {
		s := safeScenario(t)
		old := s.node("gpu-v100-01")
		n := old.DeepCopy()
		delete(n.Labels, pciVendor)
		s.req.User = UserInfo{Name: "system:serviceaccount:node-feature-discovery:nfd-node-feature-discovery", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:node-feature-discovery"}}
		d := decideNode(s, old, n)
		assert.True(t, d.Allowed)
		assert.Equal(t, "nfd", d.Exemption)
	})
}
