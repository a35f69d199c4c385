package gate

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// declaredCodes are the Code constants of code.go, by identifier.
func declaredCodes(t *testing.T) map[string]Code {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "code.go", nil, 0)
	require.NoError(t, err)
	out := map[string]Code{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && strings.HasPrefix(n.Name, "Code") {
					out[n.Name] = Code(strings.Trim(lit.Value, `"`))
				}
			}
		}
	}
	return out
}

// TestEveryCodeIsInTheTable: a declared code that no row emits is dead, and
// a row's code must be declared.
func TestEveryCodeIsInTheTable(t *testing.T) {
	declared := declaredCodes(t)
	require.NotEmpty(t, declared)
	var inTable, judged []Code
	for _, r := range ruleTable {
		require.NotEmpty(t, r.Codes, "row %s", r.Name)
		require.NotEmpty(t, r.Reviews, "row %s", r.Name)
		require.True(t, r.Apply != nil || r.Judge != nil, "row %s names no function that applies it", r.Name)
		for _, c := range r.Codes {
			assert.False(t, slices.Contains(judged, c) && r.Judge != nil, "%s is in two transition rows", c)
			if r.Judge != nil {
				judged = append(judged, c)
			}
			inTable = append(inTable, c)
		}
	}
	for name, c := range declared {
		assert.Contains(t, inTable, c, "%s is declared but in no row of the rule table", name)
	}
	for _, c := range inTable {
		assert.Contains(t, slices.Collect(mapValues(declared)), c)
	}
}

func mapValues[K comparable, V any](m map[K]V) func(func(V) bool) {
	return func(yield func(V) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// TestEachCodeBuiltInOneFunction: every code's blocker is built in exactly
// one function, in the rule file of its row (rule_<name>.go). code.go
// declares the codes and rules.go lists them; nothing else names a code.
func TestEachCodeBuiltInOneFunction(t *testing.T) {
	declared := declaredCodes(t)
	uses := map[string][]string{} // code identifier -> "file:function"
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") || file == "code.go" || file == "rules.go" {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			where := file + ":<package level>"
			if fn, ok := d.(*ast.FuncDecl); ok {
				where = file + ":" + fn.Name.Name
			}
			ast.Inspect(d, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok {
					if _, isCode := declared[id.Name]; isCode && !slices.Contains(uses[id.Name], where) {
						uses[id.Name] = append(uses[id.Name], where)
					}
				}
				return true
			})
		}
	}
	// A code several rows emit (FactsMissing) is built in one of their files.
	filesOf := map[Code][]string{}
	for _, r := range ruleTable {
		for _, c := range r.Codes {
			filesOf[c] = append(filesOf[c], "rule_"+r.Name+".go")
		}
	}
	for name, c := range declared {
		require.Len(t, uses[name], 1, "%s must be built in exactly one function, found %v", name, uses[name])
		file, _, _ := strings.Cut(uses[name][0], ":")
		assert.Contains(t, filesOf[c], file, "%s is built in %s, want a function of %v", name, uses[name][0], filesOf[c])
	}
	for _, r := range ruleTable {
		_, err := os.Stat("rule_" + r.Name + ".go")
		assert.NoError(t, err, "row %s has no rule file", r.Name)
	}
}

// TestComponentTableMatchesTuple: the component table and the record's
// tuple have the same members in the same order, so a sixth component
// cannot be half added.
func TestComponentTableMatchesTuple(t *testing.T) {
	typ := reflect.TypeOf(qualification.Tuple{})
	require.Equal(t, typ.NumField(), len(componentTable))
	for i := range typ.NumField() {
		key, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		s := componentTable[i]
		assert.Equal(t, key, string(s.Name))
		var tu qualification.Tuple
		s.Set(&tu, "x")
		assert.Equal(t, "x", reflect.ValueOf(tu).Field(i).String(), "row %s sets field %s", s.Name, typ.Field(i).Name)
		assert.Equal(t, "x", s.Value(tu))
		assert.NotEmpty(t, s.Label)
		assert.NotEmpty(t, s.Flag)
		assert.NotEmpty(t, s.Fact)
		assert.NotEmpty(t, s.Expected)
	}
}

// TestCodesOf: the reviews' code sets are what the contracts document.
func TestCodesOf(t *testing.T) {
	assert.Equal(t, []Code{CodeAttestationForged, CodeRecordInvalid, CodeRecordNotQualified, CodeCanaryIncomplete, CodeEvidenceFromFuture}, CodesOf(ReviewRecord))
	assert.Equal(t, []Code{CodeReviewInvalid}, CodesOf(ReviewAdmission))
	assert.NotContains(t, CodesOf(ReviewDriver), CodeMinorSkip)
	assert.Contains(t, CodesOf(ReviewUpgradeCheck), CodeNoChange)
}
