package chart

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// namespaceValues are the Helm lines that list a row's namespaces from the
// chart's values, at the indent of a selector's values.
var namespaceValues = map[webhook.Namespaces]string{
	webhook.SUCNamespaces:        "{{- toYaml .Values.config.sucNamespaces | nindent 10 }}",
	webhook.ReleaseNamespace:     "- {{ .Release.Namespace }}",
	webhook.GPUOperatorNamespace: "- {{ .Values.config.gpuOperator.namespace }}",
	webhook.DRADriverNamespaces:  "{{- include \"gug.draDriverNamespaces\" . | nindent 10 }}",
	webhook.DriverNamespaces:     "{{- include \"gug.driverNamespaces\" . | nindent 10 }}",
	webhook.ValidatorNamespace:   "- {{ .Values.config.proof.validator.namespace }}",
}

// namespaceSet is the Helm condition that the namespaces of an optional row
// are configured.
var namespaceSet = map[webhook.Namespaces]string{
	webhook.DRADriverNamespaces: ".Values.config.draDrivers",
}

// webhooksTemplate is the chart's templates/_webhooks.tpl as the webhook
// table (webhook/table.go) defines it: one `webhooks:` entry a row. The
// operator's choices (timeout, failure policy where a row names a value,
// namespaces, the Service or URL and the CA bundle) stay Helm actions on
// values; what the binary serves is spelled out.
func webhooksTemplate() (string, error) {
	var b strings.Builder
	b.WriteString(`{{- /*
Generated from the webhook table (webhook/table.go) by
go test ./test/chart -run TestWebhooksTemplateIsGenerated -update
Do not edit: change webhook/table.go and regenerate. The entries of the
ValidatingWebhookConfiguration (templates/webhook.yaml), one a row of the
table; match conditions that depend on values are the templates the table
names (templates/_helpers.tpl).
*/ -}}
{{- define "gug.webhooks" -}}
`)
	for _, w := range webhook.Webhooks {
		if w.Optional {
			set, ok := namespaceSet[w.Namespaces]
			if !ok {
				return "", fmt.Errorf("%s: optional, but the generator has no Helm condition for namespaces %q", w.Name, w.Namespaces)
			}
			fmt.Fprintf(&b, "{{- if %s }}\n", set)
		}
		for _, line := range strings.Split(w.Why, "\n") {
			fmt.Fprintf(&b, "# %s\n", line)
		}
		fmt.Fprintf(&b, "- name: %s\n  clientConfig:\n", w.Name)
		fmt.Fprintf(&b, "    {{- include \"gug.clientConfig\" (dict \"root\" . \"path\" %q) | nindent 4 }}\n", w.Path)
		b.WriteString("  rules:\n")
		for _, r := range rulesOf(&w) {
			fmt.Fprintf(&b, "    - apiGroups: %s\n      apiVersions: %s\n      resources: %s\n      operations: %s\n      scope: %s\n",
				flow(r.APIGroups), flow(r.APIVersions), flow(r.Resources), flow(r.Operations), *r.Scope)
		}
		if w.Namespaces != webhook.AnyNamespace {
			values, ok := namespaceValues[w.Namespaces]
			if !ok {
				return "", fmt.Errorf("%s: namespaces %q: the generator has no Helm values for them", w.Name, w.Namespaces)
			}
			fmt.Fprintf(&b, "  namespaceSelector:\n    matchExpressions:\n      - key: %s\n        operator: In\n        values:\n          %s\n", corev1.LabelMetadataName, values)
		}
		if s := w.ObjectSelector; s != nil {
			b.WriteString("  objectSelector:\n")
			if len(s.MatchLabels) > 0 {
				b.WriteString("    matchLabels:\n")
				keys := make([]string, 0, len(s.MatchLabels))
				for k := range s.MatchLabels {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					fmt.Fprintf(&b, "      %s: %s\n", k, strconv.Quote(s.MatchLabels[k]))
				}
			}
			if len(s.MatchExpressions) > 0 {
				b.WriteString("    matchExpressions:\n")
				for _, e := range s.MatchExpressions {
					fmt.Fprintf(&b, "      - key: %s\n        operator: %s\n", e.Key, e.Operator)
					if len(e.Values) > 0 {
						fmt.Fprintf(&b, "        values: %s\n", flow(e.Values))
					}
				}
			}
		}
		if len(w.MatchConditions) > 0 {
			b.WriteString("  matchConditions:\n")
		}
		for _, m := range w.MatchConditions {
			if strings.Contains(m.CEL, "{{") || strings.Contains(m.CEL, "}}") || (m.CEL == "") == (m.Template == "") || (m.Optional && m.Template == "") ||
				(!m.Folded && strings.Contains(m.CEL, "\n")) {
				return "", fmt.Errorf("%s: match condition %s: CEL (no Helm actions; several lines only folded) or a Template (optional only then), not both", w.Name, m.Name)
			}
			if m.Optional {
				fmt.Fprintf(&b, "{{- with include %q . }}\n", m.Template)
			}
			fmt.Fprintf(&b, "    - name: %s\n      expression:", m.Name)
			switch {
			case m.Optional && m.Folded:
				b.WriteString(" >-\n        {{- . | nindent 8 }}\n")
			case m.Optional:
				b.WriteString(" {{ . | quote }}\n")
			case m.Template != "" && m.Folded:
				fmt.Fprintf(&b, " >-\n        {{- include %q . | nindent 8 }}\n", m.Template)
			case m.Template != "":
				fmt.Fprintf(&b, " {{ include %q . | quote }}\n", m.Template)
			case m.Folded:
				b.WriteString(" >-\n")
				for _, line := range strings.Split(m.CEL, "\n") {
					fmt.Fprintf(&b, "        %s\n", line)
				}
			default:
				fmt.Fprintf(&b, " %s\n", strconv.Quote(m.CEL))
			}
			if m.Optional {
				b.WriteString("{{- end }}\n")
			}
		}
		failurePolicy := string(w.FailurePolicy)
		if w.FailurePolicyValue != "" {
			failurePolicy = "{{ .Values." + w.FailurePolicyValue + " }}"
		}
		fmt.Fprintf(&b, "  failurePolicy: %s\n", failurePolicy)
		b.WriteString(`  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
  admissionReviewVersions: ["v1"]
`)
		if w.Optional {
			b.WriteString("{{- end }}\n")
		}
	}
	b.WriteString("{{- end }}\n")
	return b.String(), nil
}

// rulesOf are a row's rules: one per group, version and operations, in the
// order of its resources.
func rulesOf(w *webhook.Webhook) []admissionregistrationv1.RuleWithOperations {
	var rules []admissionregistrationv1.RuleWithOperations
	for _, r := range w.Resources {
		var ops []admissionregistrationv1.OperationType
		for _, op := range w.OperationsOf(r) {
			ops = append(ops, admissionregistrationv1.OperationType(op))
		}
		if n := len(rules); n > 0 {
			last := &rules[n-1]
			if last.APIGroups[0] == r.Group && last.APIVersions[0] == r.Version && slices.Equal(last.Operations, ops) {
				last.Resources = append(last.Resources, r.Resource)
				continue
			}
		}
		scope := w.Scope
		rules = append(rules, admissionregistrationv1.RuleWithOperations{Operations: ops, Rule: admissionregistrationv1.Rule{
			APIGroups: []string{r.Group}, APIVersions: []string{r.Version}, Resources: []string{r.Resource}, Scope: &scope}})
	}
	return rules
}

// flow is a YAML flow list of quoted strings: ["a", "b"].
func flow[S ~string](xs []S) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = strconv.Quote(string(x))
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// TestWebhooksTemplateIsGenerated: the chart's webhook entries are the ones
// the webhook table generates; add or change a row without regenerating and
// this fails (TestWebhookTable then checks every rendered variant against
// the table).
func TestWebhooksTemplateIsGenerated(t *testing.T) {
	want, err := webhooksTemplate()
	require.NoError(t, err)
	requireGenerated(t, "_webhooks.tpl", want, "webhook/table.go", "TestWebhooksTemplateIsGenerated")
}

// TestWebhookTable: adding a row to the webhook table is enough. For every
// variant, the chart renders exactly one entry per row (an optional row's
// only where its namespaces are configured), in the table's
// order, whose path the server registers, with the row's rules, selectors
// (namespaces from the rendered configuration), failure policy and match
// conditions (the CEL ones as written, the value ones present); the
// contract and its codes are webhook's TestCodeDocsAreGenerated.
func TestWebhookTable(t *testing.T) {
	rec := &registrations{}
	(&webhook.Server{}).Register(rec)
	var paths []string
	for _, w := range webhook.Webhooks {
		paths = append(paths, w.Path)
	}
	assert.ElementsMatch(t, paths, rec.paths, "webhook.Server.Register serves exactly the table's paths")
	for file := range variants {
		t.Run(variantName(file), func(t *testing.T) {
			r := load(t, file)
			cfg, _ := configOf(t, r.objs)
			var problems []string
			v := r.vwc(&problems)
			require.Empty(t, problems)
			var names []string
			for _, w := range v.Webhooks {
				names = append(names, w.Name)
			}
			var rows []string
			for _, w := range webhook.Webhooks {
				if w.Rendered(cfg) {
					rows = append(rows, w.Name)
				}
			}
			require.Equal(t, rows, names, "the chart's webhooks vs the table's rows (an optional row only where its namespaces are configured)")
			for i := range webhook.Webhooks {
				row := &webhook.Webhooks[i]
				if !row.Rendered(cfg) {
					continue
				}
				got := hook(v, row.Name)
				t.Run(row.Name, func(t *testing.T) {
					if r.e.url != "" {
						assert.Equal(t, r.e.url+row.Path, *got.ClientConfig.URL)
					} else {
						assert.Equal(t, row.Path, *got.ClientConfig.Service.Path)
					}
					assert.Equal(t, rulesOf(row), got.Rules)
					policy := row.FailurePolicy
					if row.FailurePolicyValue == "webhook.nodeFailurePolicy" {
						policy = r.e.nodePolicy
					}
					assert.Equal(t, policy, *got.FailurePolicy)
					if want := row.Namespaces.Of(cfg); want != nil {
						ns, ok := namespacesSelected(got.NamespaceSelector)
						assert.True(t, ok, "namespaceSelector is one kubernetes.io/metadata.name In")
						assert.Equal(t, want, ns)
					} else {
						assert.Nil(t, got.NamespaceSelector, "any namespace")
					}
					assert.Equal(t, row.ObjectSelector, got.ObjectSelector)
					var want, have []string
					for _, m := range row.MatchConditions {
						if !m.Optional {
							want = append(want, m.Name)
						}
					}
					for _, m := range got.MatchConditions {
						if !slices.ContainsFunc(row.MatchConditions, func(c webhook.MatchCondition) bool { return c.Name == m.Name && c.Optional }) {
							have = append(have, m.Name)
						}
						for _, c := range row.MatchConditions {
							if c.Name == m.Name && c.CEL != "" {
								assert.Equal(t, celAsWritten(t, c), m.Expression, "match condition %s", m.Name)
							}
						}
					}
					assert.Equal(t, want, have, "match conditions")
				})
			}
		})
	}
}

// celAsWritten is a CEL condition's expression as YAML reads what the
// generator writes (a folded block joins its lines).
func celAsWritten(t *testing.T, c webhook.MatchCondition) string {
	if !c.Folded {
		return c.CEL
	}
	var v struct{ E string }
	require.NoError(t, yaml.Unmarshal([]byte("e: >-\n  "+strings.ReplaceAll(c.CEL, "\n", "\n  ")), &v))
	return v.E
}
