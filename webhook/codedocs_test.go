package webhook

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// The docs generated from the rule table (gate.CodeSummaries) and the
// webhook table (Webhooks): README's code table, each contract's code list,
// docs/codes.md, and the audit section's webhook names and policy. Each
// piece sits between a begin and an end marker; the prose around it stays
// hand-written. Regenerate: go test ./webhook -run TestCodeDocsAreGenerated -update.
const regenerate = "go test ./webhook -run TestCodeDocsAreGenerated -update"

// cliReviews are the CLI commands that run the engine and the review each
// runs (cmd/gpu-upgrade-gate: check.go PreparePlan, upgradecheck.go
// UpgradeCheck, validate.go ValidateRecord).
var cliReviews = []struct {
	command string
	review  gate.Review
}{{"check", gate.ReviewPlan}, {"upgrade-check", gate.ReviewUpgradeCheck}, {"validate-record", gate.ReviewValidateRecord}}

func beginMarker(what string) string {
	return "<!-- generated: " + what + " (" + regenerate + ") -->\n"
}

func endMarker(what string) string { return "<!-- end generated: " + what + " -->\n" }

// generated is one generated piece of a file.
type generated struct {
	what, content string
}

// requireGeneratedDoc holds each piece of file to its generated content,
// and rewrites them under -update. A file without a piece's markers fails,
// naming them: a merge or a hand edit that dropped them is caught too.
func requireGeneratedDoc(t *testing.T, file string, pieces ...generated) {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	doc, want := string(data), string(data)
	for _, p := range pieces {
		begin, end := beginMarker(p.what), endMarker(p.what)
		i := strings.Index(want, begin)
		j := strings.Index(want, end)
		require.True(t, i >= 0 && j > i, "%s needs the markers\n%s...\n%s(run %s once they are in)", file, begin, end, regenerate)
		// Blank lines around the piece: Markdown ends the marker's HTML
		// block there, so a table or paragraph inside renders as one.
		want = want[:i+len(begin)] + "\n" + p.content + "\n" + want[j:]
	}
	if *update {
		require.NoError(t, os.WriteFile(file, []byte(want), 0o644))
		doc = want
	}
	requireSame(t, file, want, doc)
}

// requireSame fails when a generated file is stale, naming the command that
// rewrites it and the first line that differs (not the whole file).
func requireSame(t *testing.T, file, want, got string) {
	t.Helper()
	if want == got {
		return
	}
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	line := func(ls []string) string {
		if i < len(ls) {
			return ls[i]
		}
		return "<end of file>"
	}
	t.Errorf("%s is not what the rule and webhook tables generate: run %s\nfirst difference at line %d:\n  file:      %s\n  generated: %s", file, regenerate, i+1, line(g), line(w))
}

// anchor is a code's section in docs/codes.md (GitHub's heading anchor).
func anchor(c gate.Code) string { return strings.ToLower(string(c)) }

// codeLinks lists codes, each linked to its section of docs/codes.md
// (codesDoc: the path from the file the list is in), wrapped for reading.
func codeLinks(codes []gate.Code, codesDoc string) string {
	var sb strings.Builder
	line := 0
	for i, c := range codes {
		item := fmt.Sprintf("[`%s`](%s#%s)", c, codesDoc, anchor(c))
		if i < len(codes)-1 {
			item += ","
		} else {
			item += "."
		}
		if line > 0 && line+len(item) > 100 {
			sb.WriteString("\n")
			line = 0
		} else if i > 0 {
			sb.WriteString(" ")
			line++
		}
		sb.WriteString(item)
		line += len(item)
	}
	return sb.String()
}

// readmeCodeTable is README's code table: each code once, in table order.
func readmeCodeTable() string {
	var sb strings.Builder
	sb.WriteString("| code | denied when |\n|---|---|\n")
	for _, s := range gate.CodeSummaries() {
		fmt.Fprintf(&sb, "| [`%s`](docs/codes.md#%s) | %s |\n", s.Code, anchor(s.Code), s.Meaning())
	}
	return sb.String()
}

// contractCodeList is a contract's **Codes** paragraph: exactly the codes
// of the reviews its webhook runs.
func contractCodeList(w Webhook) string {
	return "**Codes** (each explained in [docs/codes.md](../docs/codes.md)):\n" + codeLinks(gate.CodesOf(w.Reviews...), "../docs/codes.md") + "\n"
}

// returnedBy names the webhooks and CLI commands that can return a code.
func returnedBy(s gate.CodeSummary) []string {
	var out []string
	for _, w := range Webhooks {
		if slices.Contains(gate.CodesOf(w.Reviews...), s.Code) {
			out = append(out, fmt.Sprintf("[`%s`](../webhook/%s)", w.Name, w.Contract))
		}
	}
	for _, c := range cliReviews {
		if slices.Contains(s.Reviews, c.review) {
			out = append(out, fmt.Sprintf("CLI [`%s`](cli.md)", c.command))
		}
	}
	return out
}

// codesDoc is docs/codes.md: one section per code.
func codesDoc() string {
	var sb strings.Builder
	sb.WriteString(`# Reason codes

Every denial names one or more reason codes, one line each: ` + "`[Code] what is wrong; what to do`" + `.
A code is a stable interface: dashboards, audit queries and runbooks key on it, and it
is never renamed. This page is generated from the rule table (gate/rules.go: each row's
` + "`Docs`" + `) and the webhook table (webhook/table.go); do not edit it by hand
(` + "`" + regenerate + "`" + ` rewrites it). How to read a denial, proof, halts and
break glass: the README's [Denied: what now](../README.md#denied-what-now).

The example messages are real: each was printed by the rule in the gate's tests (node,
record and user names are the tests'). A message that stands for several nodes with the
same problem starts "N nodes of hardware H (…) have the same problem:"; on a Node
review, a Plan's blocker starts "Plan namespace/name:".

`)
	sums := gate.CodeSummaries()
	sb.WriteString("| code | denied when |\n|---|---|\n")
	for _, s := range sums {
		fmt.Fprintf(&sb, "| [`%s`](#%s) | %s |\n", s.Code, anchor(s.Code), s.Meaning())
	}
	for _, s := range sums {
		fmt.Fprintf(&sb, "\n## `%s`\n\n", s.Code)
		if len(s.Meanings) == 1 {
			fmt.Fprintf(&sb, "**Denied when** %s.\n\n", s.Meanings[0])
		} else {
			sb.WriteString("**Denied when**\n\n")
			for i, m := range s.Meanings {
				end := ";"
				if i == len(s.Meanings)-1 {
					end = "."
				}
				fmt.Fprintf(&sb, "- %s%s\n", m, end)
			}
			sb.WriteString("\n")
		}
		fmt.Fprintf(&sb, "**Example**\n\n```text\n%s\n```\n\n", s.Example)
		fmt.Fprintf(&sb, "**What to do**: %s.\n\n", strings.TrimSuffix(s.Fix, "."))
		if s.NoBreakGlass {
			sb.WriteString("**Break glass** does not override it.\n\n")
		}
		if by := returnedBy(s); len(by) > 0 {
			fmt.Fprintf(&sb, "**Returned by**: %s.\n", strings.Join(by, ", "))
		} else {
			sb.WriteString("**Returned by**: no webhook or command yet.\n")
		}
	}
	return sb.String()
}

// webhookNames lists every webhook of the table, as the API server keys
// their audit annotations.
func webhookNames() string {
	names := make([]string, len(Webhooks))
	for i, w := range Webhooks {
		names[i] = "`" + w.Name + "`"
	}
	return "Webhook names (the `<webhook name>` of each key): " + strings.Join(names, ", ") + ".\n"
}

// contractLinks links every webhook's contract by its heading's title, in
// the table's order; contractTitle holds each heading to its row.
func contractLinks(t *testing.T) string {
	links := make([]string, len(Webhooks))
	for i, w := range Webhooks {
		links[i] = "[" + contractTitle(t, w) + "](webhook/" + w.Contract + ")"
	}
	return "Each webhook's contract: " + strings.Join(links, ", ") + ".\n"
}

// contractTitle is the title of w's contract: its first line reads
// "# <title> — `<webhook name>` at `<path>`", the name and path the table's.
func contractTitle(t *testing.T, w Webhook) string {
	t.Helper()
	data, err := os.ReadFile(w.Contract)
	require.NoError(t, err)
	first, _, _ := strings.Cut(string(data), "\n")
	title, rest, ok := strings.Cut(strings.TrimPrefix(first, "# "), " — ")
	require.True(t, ok && strings.HasPrefix(first, "# "), "%s: the first line must read \"# <title> — `%s` at `%s`\", got %q", w.Contract, w.Name, w.Path, first)
	require.Equal(t, "`"+w.Name+"` at `"+w.Path+"`", rest, "%s: the heading names the table's webhook and path", w.Contract)
	return title
}

// auditPolicy is the audit policy rule that keeps at least Metadata for
// every write a webhook of the table reviews, subresources included: one
// rule per set of verbs (UPDATE is update and patch).
func auditPolicy() string {
	type groupRes struct {
		group string
		res   []string
	}
	type rule struct {
		verbs  []string
		groups []groupRes
	}
	var rules []*rule
	add := func(verbs []string, group, res string) {
		var r *rule
		for _, x := range rules {
			if slices.Equal(x.verbs, verbs) {
				r = x
			}
		}
		if r == nil {
			r = &rule{verbs: verbs}
			rules = append(rules, r)
		}
		for i := range r.groups {
			if r.groups[i].group == group {
				if !slices.Contains(r.groups[i].res, res) {
					r.groups[i].res = append(r.groups[i].res, res)
				}
				return
			}
		}
		r.groups = append(r.groups, groupRes{group, []string{res}})
	}
	// A resource's verbs are the union over every webhook that reviews it.
	verbsOf := map[string][]string{}
	var order []string
	for _, w := range Webhooks {
		for _, r := range w.Resources {
			key := r.Group + "\x00" + r.Resource
			if _, ok := verbsOf[key]; !ok {
				order = append(order, key)
			}
			for _, op := range w.OperationsOf(r) {
				for _, v := range map[admissionv1.Operation][]string{admissionv1.Create: {"create"}, admissionv1.Update: {"update", "patch"}, admissionv1.Delete: {"delete"}, admissionv1.Connect: {"connect"}}[op] {
					if !slices.Contains(verbsOf[key], v) {
						verbsOf[key] = append(verbsOf[key], v)
					}
				}
			}
		}
	}
	rank := []string{"create", "update", "patch", "delete", "connect"}
	for _, key := range order {
		vs := verbsOf[key]
		slices.SortFunc(vs, func(a, b string) int { return slices.Index(rank, a) - slices.Index(rank, b) })
		group, res, _ := strings.Cut(key, "\x00")
		add(vs, group, res)
	}
	var sb strings.Builder
	sb.WriteString("```yaml\n")
	for _, r := range rules {
		fmt.Fprintf(&sb, "- level: Metadata\n  verbs: [%s]\n  resources:\n", strings.Join(r.verbs, ", "))
		for _, g := range r.groups {
			fmt.Fprintf(&sb, "  - group: %q\n    resources: [%s]\n", g.group, strings.Join(g.res, ", "))
		}
	}
	sb.WriteString("```\n")
	return sb.String()
}

// TestCodeDocsAreGenerated holds the docs to the rule and webhook tables:
// README's code table lists exactly the codes the table can emit, each
// contract exactly the codes of the reviews its webhook runs, docs/codes.md
// every code, and the audit section every webhook and every resource a
// webhook reviews (plans/status and nodes/status too). A code added without
// regenerating, or a code no longer emitted, fails here.
func TestCodeDocsAreGenerated(t *testing.T) {
	requireGeneratedDoc(t, "../README.md",
		generated{"code table", readmeCodeTable()},
		generated{"webhook names", webhookNames()},
		generated{"contracts", contractLinks(t)})
	requireGeneratedDoc(t, "../docs/install.md",
		generated{"webhook names", webhookNames()},
		generated{"audit policy", auditPolicy()})
	for _, w := range Webhooks {
		t.Run(w.Name, func(t *testing.T) {
			require.NotEmpty(t, w.Contract, "%s names no contract", w.Name)
			require.NotEmpty(t, w.Reviews, "%s names no reviews", w.Name)
			requireGeneratedDoc(t, w.Contract, generated{"codes", contractCodeList(w)})
		})
	}
	const codes = "../docs/codes.md"
	want := codesDoc()
	if *update {
		require.NoError(t, os.WriteFile(codes, []byte(want), 0o644))
	}
	got, err := os.ReadFile(codes)
	require.NoError(t, err)
	requireSame(t, codes, want, string(got))
}

// TestGeneratedCodeDocsCoverTheTable: what the generators write names every
// code the engine can emit (so the check above cannot pass on an empty
// table), every webhook, and the status subresources the audit policy
// must keep.
func TestGeneratedCodeDocsCoverTheTable(t *testing.T) {
	table, doc := readmeCodeTable(), codesDoc()
	var all []gate.Code
	for _, r := range gate.Rules() {
		for _, c := range r.Codes {
			if !slices.Contains(all, c) {
				all = append(all, c)
			}
		}
	}
	require.NotEmpty(t, all)
	for _, c := range all {
		assert.Equal(t, 1, strings.Count(table, "| [`"+string(c)+"`]"), "README code table lists %s once", c)
		assert.Contains(t, doc, "\n## `"+string(c)+"`\n")
	}
	for _, w := range Webhooks {
		assert.Contains(t, webhookNames(), "`"+w.Name+"`")
		for _, c := range gate.CodesOf(w.Reviews...) {
			assert.Contains(t, contractCodeList(w), "[`"+string(c)+"`]")
		}
	}
	policy := auditPolicy()
	for _, res := range []string{"plans", "plans/status", "nodes", "nodes/status", "configmaps", "jobs", "clusterpolicies", "nvidiadrivers", "deployments", "installplans"} {
		listed := false
		for _, form := range []string{"[" + res + ",", "[" + res + "]", " " + res + ",", " " + res + "]"} {
			listed = listed || strings.Contains(policy, form)
		}
		assert.True(t, listed, "audit policy names %s:\n%s", res, policy)
	}
	assert.Contains(t, policy, "delete", "the halt record's and the driver path's deletes are reviewed")
}
