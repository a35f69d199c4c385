package chart

import (
	goflag "flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

var update = goflag.Bool("update", false, "rewrite the chart's generated templates (_gpunode.tpl and _ownership.tpl from gate, _webhooks.tpl and _nodechange.tpl from the webhook table)")

// vendorsAction is the Helm expression the generated template splices where
// gate.GPUNodeConditionFor takes the vendor alternation: config.gpuVendors
// joined by "|", as gate.Config.GPUNodeCondition joins them.
const vendorsAction = `{{ join "|" .Values.config.gpuVendors }}`

// gpuNodeTemplate is the chart's templates/_gpunode.tpl as gate defines it.
func gpuNodeTemplate(t *testing.T) string {
	expr := gate.GPUNodeConditionFor("VENDORS")
	require.NotContains(t, expr, "{{", "the condition would break the Helm template")
	require.NotContains(t, expr, "}}", "the condition would break the Helm template")
	require.Equal(t, 2, strings.Count(expr, "VENDORS"), "the condition names the vendors once per object")
	return `{{- /*
Generated from gate/gpunode.go (the engine's one definition of a GPU node) by
go test ./test/chart -run TestGPUNodeTemplateIsGenerated -update
Do not edit: change gate/gpunode.go and regenerate. The Node webhook's gpu-node
match condition: the node is a GPU node before or after the change.
*/ -}}
{{- define "gug.gpuNodeCondition" -}}
` + strings.ReplaceAll(expr, "VENDORS", vendorsAction) + `
{{- end }}
`
}

// TestGPUNodeTemplateIsGenerated: the chart's GPU-node match condition is the
// one gate generates; change the engine's definition without regenerating and
// this fails (TestCoherence then checks every rendered variant against
// gate.Config.GPUNodeCondition for its own vendors).
func TestGPUNodeTemplateIsGenerated(t *testing.T) {
	requireGenerated(t, "_gpunode.tpl", gpuNodeTemplate(t), "gate/gpunode.go", "TestGPUNodeTemplateIsGenerated")
}

// requireGenerated holds the chart template file to what its Go source
// generates (want), and rewrites it under -update: one check for every
// generated template.
func requireGenerated(t *testing.T, file, want, source, test string) {
	t.Helper()
	dir, err := Dir()
	require.NoError(t, err)
	path := filepath.Join(dir, "templates", file)
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, want, string(got), "%s is not what %s generates: run go test ./test/chart -run %s -update", path, source, test)
}

// taintControllersAction is the Helm expression the generated template
// splices where webhook.NodeChangeConditionFor takes the node-taint
// controllers: webhook.nodeTaintControllers as a CEL list body, as
// webhook.NodeChangeCondition quotes them.
const taintControllersAction = `{{ include "gug.celList" (.Values.webhook.nodeTaintControllers | default list) }}`

// nodeChangeTemplate is the chart's templates/_nodechange.tpl as the
// webhook table defines it.
func nodeChangeTemplate(t *testing.T) string {
	expr := webhook.NodeChangeConditionFor("TAINTCONTROLLERS")
	require.NotContains(t, expr, "{{", "the condition would break the Helm template")
	require.NotContains(t, expr, "}}", "the condition would break the Helm template")
	require.Equal(t, 1, strings.Count(expr, "TAINTCONTROLLERS"), "the condition names the node-taint controllers once")
	return `{{- /*
Generated from webhook/table.go (NodeChangeConditionFor) by
go test ./test/chart -run TestNodeChangeTemplateIsGenerated -update
Do not edit: change webhook/table.go and regenerate. The Node webhook's
labels-taints-or-uncordon match condition: labels, an uncordon, the moved-by
and cordon-handover annotations, or a taint that starts or stops a DaemonSet's
Pod written by anyone but the system and webhook.nodeTaintControllers.
*/ -}}
{{- define "gug.nodeChangeCondition" -}}
` + strings.ReplaceAll(expr, "TAINTCONTROLLERS", taintControllersAction) + `
{{- end }}
`
}

// TestNodeChangeTemplateIsGenerated: the chart's Node change condition is
// the one the webhook table builds; change it without regenerating and this
// fails (checkNodeMatchConditions then checks every rendered variant against
// webhook.NodeChangeCondition for its own node-taint controllers).
func TestNodeChangeTemplateIsGenerated(t *testing.T) {
	requireGenerated(t, "_nodechange.tpl", nodeChangeTemplate(t), "webhook/table.go", "TestNodeChangeTemplateIsGenerated")
}
