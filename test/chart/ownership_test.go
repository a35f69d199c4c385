package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// ownershipTemplate is the chart's templates/_ownership.tpl as gate defines
// it: the label keys of each fact an exemption may list, as a CEL predicate
// over k, the label facts in table order and the step facts, whose writes
// an exemption never lets through unreviewed (gug.nodeExemptCondition in
// _helpers.tpl builds gate.Config.NodeExemptCondition from them).
func ownershipTemplate(t *testing.T) string {
	keys := gate.FactKeyCEL()
	var names []string
	var b strings.Builder
	b.WriteString(`{{- /*
Generated from gate/ownership.go (the ownership table) by
go test ./test/chart -run TestOwnershipTemplateIsGenerated -update
Do not edit: change gate/ownership.go and regenerate. The label keys of each
fact a Node exemption may list (config.exemptions[].facts), as CEL over k.
*/ -}}
`)
	for _, name := range gate.ExemptibleFacts() {
		expr, ok := keys[name]
		if !ok {
			continue // a field (cordon), not labels
		}
		require.NotContains(t, expr, "{{", "the predicate would break the Helm template")
		require.NotContains(t, expr, "}}", "the predicate would break the Helm template")
		names = append(names, name)
		b.WriteString(`{{- define "gug.factKeys.` + name + `" -}}` + "\n" + expr + "\n{{- end }}\n")
	}
	require.False(t, slices.ContainsFunc(names, func(n string) bool { return strings.Contains(n, " ") }))
	b.WriteString(`{{- define "gug.labelFacts" -}}` + "\n" + strings.Join(names, " ") + "\n{{- end }}\n")
	// The step facts: listed or not, their writes reach the webhook.
	b.WriteString(`{{- define "gug.stepFacts" -}}` + "\n" + strings.Join(gate.StepFacts(), " ") + "\n{{- end }}\n")
	return b.String()
}

// TestOwnershipTemplateIsGenerated: the chart's fact predicates are the
// ones gate's ownership table defines; TestCoherence then checks each
// rendered Node match condition against gate.Config.NodeExemptCondition.
func TestOwnershipTemplateIsGenerated(t *testing.T) {
	requireGenerated(t, "_ownership.tpl", ownershipTemplate(t), "gate/ownership.go", "TestOwnershipTemplateIsGenerated")
}

// TestValuesSchemaFactsAreTheTables: the facts an exemption may list in
// values.schema.json are the ownership table's (gate.ExemptibleFacts), so
// helm refuses the names serve would refuse, and no more.
func TestValuesSchemaFactsAreTheTables(t *testing.T) {
	dir, err := Dir()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(dir, "values.schema.json"))
	require.NoError(t, err)
	var schema struct {
		Properties map[string]struct {
			Properties map[string]struct {
				Items struct {
					Properties map[string]struct {
						Items struct {
							Enum []string `json:"enum"`
						} `json:"items"`
					} `json:"properties"`
				} `json:"items"`
			} `json:"properties"`
		} `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(data, &schema))
	require.Equal(t, gate.ExemptibleFacts(), schema.Properties["config"].Properties["exemptions"].Items.Properties["facts"].Items.Enum)
}
