package gate

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCodeDocs: every code of every row is documented in that row (its
// meaning), every code has an example and a fix somewhere in its rows, and
// a row documents only its own codes. The generated docs
// (go test ./webhook -run TestCodeDocsAreGenerated -update) rely on it.
func TestCodeDocs(t *testing.T) {
	for i, r := range ruleTable {
		for c := range r.Docs {
			assert.Contains(t, r.Codes, c, "row %d (%s) documents %s, which it does not emit", i, r.Name, c)
		}
		for _, c := range r.Codes {
			doc, ok := r.Docs[c]
			if !assert.True(t, ok, "row %d (%s) has no Docs entry for %s: add {Meaning, Example, Fix} (gate/codedoc.go)", i, r.Name, c) {
				continue
			}
			assert.NotEmpty(t, doc.Meaning, "row %d (%s): %s has no Meaning", i, r.Name, c)
			assert.NotContains(t, doc.Meaning, "\n", "row %d (%s): %s's Meaning is one line", i, r.Name, c)
			assert.NotContains(t, doc.Meaning, "|", "row %d (%s): %s's Meaning goes into a Markdown table", i, r.Name, c)
			assert.NotContains(t, doc.Meaning, "](", "row %d (%s): %s's Meaning is rendered in files in different folders: name a doc, do not link it", i, r.Name, c)
		}
	}
	sums := CodeSummaries()
	var codes []Code
	for _, s := range sums {
		assert.NotContains(t, codes, s.Code)
		codes = append(codes, s.Code)
		assert.True(t, strings.HasPrefix(s.Example, "["+string(s.Code)+"] "), "%s: no row gives an example starting %q", s.Code, "["+string(s.Code)+"] ")
		assert.NotEmpty(t, s.Fix, "%s: no row gives a Fix and its example has no fix after \"; \"", s.Code)
		assert.NotEmpty(t, s.Reviews)
	}
	for _, r := range ruleTable {
		for _, c := range r.Codes {
			assert.Contains(t, codes, c)
		}
	}
}

// TestCodeSummariesJoinRows: a code in two rows gets both meanings, the
// first example and every review of both rows.
func TestCodeSummariesJoinRows(t *testing.T) {
	var got *CodeSummary
	sums := CodeSummaries()
	for i := range sums {
		if sums[i].Code == CodeCordonedByOther {
			got = &sums[i]
		}
	}
	require.NotNil(t, got)
	var meanings []string
	var reviews []Review
	for _, r := range ruleTable {
		if slices.Contains(r.Codes, CodeCordonedByOther) {
			meanings = append(meanings, r.Docs[CodeCordonedByOther].Meaning)
			reviews = append(reviews, r.Reviews...)
		}
	}
	require.Len(t, meanings, 2, "CordonedByOther is in two rows")
	assert.Equal(t, meanings, got.Meanings)
	assert.ElementsMatch(t, slices.Compact(slices.Sorted(slices.Values(reviews))), got.Reviews)
	assert.Equal(t, strings.Join(meanings, "; "), got.Meaning())
}

func TestExampleFix(t *testing.T) {
	for _, tc := range []struct{ example, want string }{
		{"[CordonRequired] neither is set; set spec.cordon: true (or a drain)", "set spec.cordon: true (or a drain)"},
		{"[A] what; fix one; and more", "fix one; and more"},
		{"[NoChange] no fix clause", ""},
		{"no code at all; x", ""},
	} {
		t.Run(tc.example, func(t *testing.T) {
			assert.Equal(t, tc.want, ExampleFix(tc.example))
		})
	}
}

// minExampleMatch is how many characters of an example a rule's literal
// must cover: a record problem's example is mostly apimachinery's words
// ("state: Unsupported value: ..."), the rest are far above it.
const minExampleMatch = 12

// formatVerb matches a fmt verb, %[2]s and %-8d included.
var formatVerb = regexp.MustCompile(`%(\[\d+\])?[-+# 0-9.]*(\[\d+\])?[a-zA-Z%]`)

// messageLiterals are the string literals of the given files (the rule
// files of a code's rows, and the record checks whose words its record
// problems carry), as the fragments between their format verbs.
func messageLiterals(t *testing.T, files []string) [][]string {
	t.Helper()
	var out [][]string
	fset := token.NewFileSet()
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			require.NoError(t, err)
			var frags []string
			for _, fr := range formatVerb.Split(s, -1) {
				if len(strings.TrimSpace(fr)) >= 4 {
					frags = append(frags, fr)
				}
			}
			if len(frags) > 0 {
				out = append(out, frags)
			}
			return true
		})
	}
	return out
}

// matchesLiteral: every fragment of the literal appears in the text, in
// order; it returns how many characters they cover.
func matchesLiteral(text string, frags []string) int {
	n, at := 0, 0
	for _, fr := range frags {
		i := strings.Index(text[at:], fr)
		if i < 0 {
			return 0
		}
		at += i + len(fr)
		n += len(fr)
	}
	return n
}

// TestCodeDocExamples holds each row's example message to its rule: it
// starts "[Code] " and its words are a message literal of the code's rule
// file (rule_<row>.go; a record problem's words may come from the record
// checks in qualification/), every fragment between the format verbs in
// order, so an example cannot drift from what the rule says. Change a
// message and this names the example to update (paste what the rule now
// prints; the README and docs/codes.md are then regenerated).
func TestCodeDocExamples(t *testing.T) {
	quals, err := filepath.Glob("../qualification/*.go")
	require.NoError(t, err)
	quals = slices.DeleteFunc(quals, func(f string) bool { return strings.HasSuffix(f, "_test.go") })
	for i, r := range ruleTable {
		for c, doc := range r.Docs {
			if doc.Example == "" {
				continue
			}
			t.Run(string(c)+"/"+strconv.Itoa(i), func(t *testing.T) {
				prefix := "[" + string(c) + "] "
				require.True(t, strings.HasPrefix(doc.Example, prefix), "row %d (%s): example for %s must start %q: %q", i, r.Name, c, prefix, doc.Example)
				files := []string{"rule_" + r.Name + ".go"}
				for _, o := range ruleTable {
					if slices.Contains(o.Codes, c) && !slices.Contains(files, "rule_"+o.Name+".go") {
						files = append(files, "rule_"+o.Name+".go")
					}
				}
				best := 0
				for _, frags := range messageLiterals(t, append(files, quals...)) {
					best = max(best, matchesLiteral(doc.Example, frags))
				}
				assert.GreaterOrEqual(t, best, minExampleMatch, "row %d (%s): the example for %s matches no message literal of %v: paste a message the rule prints now: %q", i, r.Name, c, files, doc.Example)
			})
		}
	}
}

// TestCodeDocExamplesCanFail: an example in no rule's words fails the match
// TestCodeDocExamples requires.
func TestCodeDocExamplesCanFail(t *testing.T) {
	lits := messageLiterals(t, []string{"rule_shape.go"})
	best := 0
	for _, frags := range lits {
		best = max(best, matchesLiteral("[CordonRequired] please be careful with GPUs", frags))
	}
	assert.Less(t, best, minExampleMatch)
	best = 0
	for _, frags := range lits {
		best = max(best, matchesLiteral(ruleDoc(t, CodeCordonRequired).Example, frags))
	}
	assert.GreaterOrEqual(t, best, minExampleMatch)
}

func ruleDoc(t *testing.T, c Code) CodeDoc {
	t.Helper()
	for _, r := range ruleTable {
		if d, ok := r.Docs[c]; ok && d.Example != "" {
			return d
		}
	}
	t.Fatalf("no example for %s", c)
	return CodeDoc{}
}
