package webhook

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
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
		if c := gate.Code(m[1]); slices.Contains(gate.CodesOf(gate.ReviewPlan, gate.ReviewNode, gate.ReviewDriver, gate.ReviewSubscription, gate.ReviewAdmission), c) {
			documented = append(documented, c)
		}
	}
	assert.ElementsMatch(t, gate.NoBreakGlassCodes(), documented)
}

// TestReadmeConfigTableComplete: the README's configuration table has a row
// for every key of the config file (gate.Config's JSON names), so a key
// added to the config cannot stay undocumented.
func TestReadmeConfigTableComplete(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, rest, found := strings.Cut(string(data), "Configuration (`--config`")
	require.True(t, found, "README.md has no Configuration section")
	table, _, _ := strings.Cut(rest, "\n\n###")
	typ := reflect.TypeOf(gate.Config{})
	require.Positive(t, typ.NumField())
	for i := range typ.NumField() {
		key, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if key == "" || key == "-" {
			continue
		}
		assert.Contains(t, table, "\n| `"+key+"` |", "README's configuration table has no row for config key %q", key)
	}
}
