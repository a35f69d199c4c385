package gate

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
)

// A GPU node, defined once (issue 10 item 3). The engine asks IsGPUNode; the
// Node webhook's "gpu-node" match condition is GPUNodeCondition, built from
// the same parts below, so a node the rules treat as a GPU node is always one
// the API server sends to the webhook. test/chart fails when the chart renders
// anything else, and the e2e suite has the real API server evaluate the
// condition against nodes the engine classifies.
//
// A node is a GPU node when any of these holds:
//   - an NFD PCI label of a configured vendor is "true", whatever
//     deviceLabelFields produced it: feature.node.kubernetes.io/pci-<parts>.present
//     where parts are NFD's fixed order class, vendor, device,
//     subsystem_vendor, subsystem_device for any subset that has the vendor
//     (parsePCILabel);
//   - nvidia.com/gpu.present is "true" (the GPU Operator);
//   - one of GFDLabels is set (GPU Feature Discovery writes them only where it
//     found a GPU);
//   - its capacity has a GPU extended resource (gpuResourcePrefixes: the
//     device plugins' nvidia.com/gpu, nvidia.com/mig-*, amd.com/gpu, ...).
//
// The webhook evaluates it on object OR oldObject: a node that is a GPU node
// before a change stays one while that change is reviewed, so removing its
// identity labels is itself reviewed.

// GFDLabels are labels GPU Feature Discovery publishes only on nodes where it
// found a GPU (fleet.GFDLabels).
var GFDLabels = fleet.GFDLabels

// IsGPUNode says whether n is a GPU node by the definition above
// (fleet.IsGPUNode, for the configured vendors).
func (c *Config) IsGPUNode(n *corev1.Node) bool { return fleet.IsGPUNode(c.GPUVendors, n) }

// isGPULabel says whether one label marks a GPU node.
func (c *Config) isGPULabel(k, v string) bool { return fleet.IsGPULabel(c.GPUVendors, k, v) }

// GPUNodeCondition is the CEL expression of the Node webhook's "gpu-node"
// match condition for this configuration: the node is a GPU node before or
// after the change.
func (c *Config) GPUNodeCondition() string {
	return GPUNodeConditionFor(strings.Join(c.GPUVendors, "|"))
}

// GPUNodeConditionFor builds the condition with vendors spliced into a
// regular expression as an alternation (e.g. "10de|1002"). The chart's
// generated template passes a Helm expression that joins config.gpuVendors
// the same way (see test/chart, which writes and checks that template).
func GPUNodeConditionFor(vendors string) string {
	return gpuNodeCEL("object", vendors) + " || " + gpuNodeCEL("oldObject", vendors)
}

// gpuNodeCEL is IsGPUNode in CEL for the node in variable obj.
//
// The PCI label pattern mirrors parsePCILabel: an optional display class
// (isClass: 0300 or 0302) and then the vendor, followed by up to three more
// 4-hex-digit parts; lower-case hex only, as NFD writes (and as the engine
// reads). Config.Validate refuses a vendor that reads as a class, the one
// spelling where the pattern and the parser could disagree.
func gpuNodeCEL(obj, vendors string) string {
	pci := "^" + strings.ReplaceAll(labelPCIPrefix, ".", "[.]") + "(030[02]_)?(" + vendors + ")(_[0-9a-f]{4}){0,3}[.]present$"
	labels := obj + ".metadata.labels"
	var resources []string
	for _, p := range gpuResourcePrefixes {
		resources = append(resources, fmt.Sprintf("r.startsWith(%s)", celQuote(p)))
	}
	return fmt.Sprintf("%s.metadata.?labels.orValue({}).exists(k, (k == %s && %s[k] == 'true') || (k.matches(%s) && %s[k] == 'true') || k in [%s]) || %s.?status.?capacity.orValue({}).exists(r, %s)",
		obj, celQuote(labelGPUPresent), labels, celQuote(pci), labels, celQuoteList(GFDLabels), obj, strings.Join(resources, " || "))
}

// celQuote is a CEL string literal: single-quoted, backslashes and quotes
// escaped, so a configured name can never break out of an expression.
func celQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func celQuoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = celQuote(x)
	}
	return strings.Join(q, ", ")
}
