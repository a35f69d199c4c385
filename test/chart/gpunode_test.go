package chart

import (
	goflag "flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

var update = goflag.Bool("update", false, "rewrite the chart's generated templates (_gpunode.tpl and _ownership.tpl from gate, _webhooks.tpl from the webhook table)")

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
