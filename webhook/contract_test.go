package webhook

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

var backticked = regexp.MustCompile("`([A-Za-z0-9]+)`")

// readmeCodes are the codes in the first column of the README's code table.
func readmeCodes(t *testing.T) []gate.Code {
	data, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	var out []gate.Code
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "| code |"):
			in = true
		case in && !strings.HasPrefix(line, "|"):
			return out
		case in:
			first := strings.SplitN(strings.TrimPrefix(line, "|"), "|", 2)[0]
			for _, m := range backticked.FindAllStringSubmatch(first, -1) {
				out = append(out, gate.Code(m[1]))
			}
		}
	}
	require.True(t, in, "README.md has no \"| code |\" table")
	return out
}

// contractCodes are the codes of a contract's **Codes** paragraph.
func contractCodes(t *testing.T, file string) []gate.Code {
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	_, rest, found := strings.Cut(string(data), "\n**Codes**")
	require.True(t, found, "%s has no **Codes** paragraph", file)
	para, _, _ := strings.Cut(rest, "\n\n")
	var out []gate.Code
	for _, m := range backticked.FindAllStringSubmatch(para, -1) {
		out = append(out, gate.Code(m[1]))
	}
	return out
}

// TestDocumentedCodes holds the docs to the rule table: the README's code
// table lists exactly the codes the table can emit, and each webhook's
// contract lists exactly the codes of the reviews that webhook runs. It
// fails when a code is added without docs, and when a documented code can
// no longer be emitted.
func TestDocumentedCodes(t *testing.T) {
	all := gate.CodesOf(gate.ReviewPlan, gate.ReviewNode, gate.ReviewDriver, gate.ReviewRecord, gate.ReviewUpgradeCheck, gate.ReviewValidateRecord, gate.ReviewPlanStatus, gate.ReviewSUCJob, gate.ReviewAdmission)
	readme := readmeCodes(t)
	assert.ElementsMatch(t, all, readme, "README.md code table vs the rule table")
	for _, c := range readme {
		assert.Equal(t, 1, countOf(readme, c), "README lists %s more than once", c)
	}
	for _, w := range Webhooks {
		t.Run(w.Name, func(t *testing.T) {
			require.NotEmpty(t, w.Contract, "%s names no contract", w.Name)
			require.NotEmpty(t, w.Reviews, "%s names no reviews", w.Name)
			assert.ElementsMatch(t, gate.CodesOf(w.Reviews...), contractCodes(t, w.Contract), "%s vs the codes its reviews can emit", w.Contract)
		})
	}
}

// TestReadmeLinksEveryContract: the README's list of contracts links the
// contract of every row of the webhook table.
func TestReadmeLinksEveryContract(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, rest, found := strings.Cut(string(data), "\nEach webhook's contract:")
	require.True(t, found, "README.md has no \"Each webhook's contract:\" paragraph")
	para, _, _ := strings.Cut(rest, "\n\n")
	for _, w := range Webhooks {
		assert.Contains(t, para, "(webhook/"+w.Contract+")", "README's contract list vs %s", w.Name)
	}
}

func countOf(cs []gate.Code, c gate.Code) int {
	return len(slices.DeleteFunc(slices.Clone(cs), func(x gate.Code) bool { return x != c }))
}

// TestDocumentedAuditKeys: every audit annotation key the engine writes (the
// Audit* constants of gate/decision.go) has a row in docs/install.md's audit
// table, so a person reading an audit event can look each key up.
func TestDocumentedAuditKeys(t *testing.T) {
	file, err := parser.ParseFile(token.NewFileSet(), "../gate/decision.go", nil, 0)
	require.NoError(t, err)
	var keys []string
	ast.Inspect(file, func(n ast.Node) bool {
		v, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range v.Names {
			if i >= len(v.Values) {
				break
			}
			if lit, ok := v.Values[i].(*ast.BasicLit); ok && strings.HasPrefix(name.Name, "Audit") && lit.Kind == token.STRING {
				key, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				keys = append(keys, key)
			}
		}
		return true
	})
	require.NotEmpty(t, keys, "no Audit* constants found in gate/decision.go")
	doc, err := os.ReadFile("../docs/install.md")
	require.NoError(t, err)
	for _, key := range keys {
		if key == gate.AuditDecision {
			// The table's first row spells the webhook names out in full.
			assert.True(t, strings.Contains(string(doc), "`plans.gpu-upgrade-gate.io/"+key+"`"), "audit key %q has no row in docs/install.md section 5", key)
			continue
		}
		assert.True(t, strings.Contains(string(doc), "`…/"+key+"`"), "audit key %q has no row in docs/install.md section 5", key)
	}
}

// TestBreakGlassCodesDocumented holds docs/install.md's list of the codes
// break glass cannot override to the rule table (Rule.NoBreakGlass).
func TestBreakGlassCodesDocumented(t *testing.T) {
	data, err := os.ReadFile("../docs/install.md")
	require.NoError(t, err)
	_, rest, found := strings.Cut(string(data), "\n**Break glass cannot override**")
	require.True(t, found, "docs/install.md has no **Break glass cannot override** paragraph")
	para, _, _ := strings.Cut(rest, "\n\n")
	var documented []gate.Code
	for _, m := range backticked.FindAllStringSubmatch(para, -1) {
		if c := gate.Code(m[1]); slices.Contains(gate.CodesOf(gate.ReviewPlan, gate.ReviewNode, gate.ReviewDriver, gate.ReviewAdmission), c) {
			documented = append(documented, c)
		}
	}
	assert.ElementsMatch(t, gate.NoBreakGlassCodes(), documented)
}
