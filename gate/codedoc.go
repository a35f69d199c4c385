package gate

import (
	"slices"
	"strings"
)

// CodeDoc documents one code of a rule table row. The README's code table,
// each webhook contract's code list and docs/codes.md are generated from
// these (go test ./webhook -run TestCodeDocsAreGenerated -update), so a
// code is explained in one place: its row.
type CodeDoc struct {
	// Meaning is one line: when this row denies with the code. A code in
	// several rows has one per row, joined in table order.
	Meaning string
	// Example is a message the rule produces, "[Code] detail", as a run of
	// the gate's tests printed it; TestCodeDocExamples holds it to the
	// message literals of the code's rule file. One row per code needs one.
	Example string
	// Fix is what to do. Empty: the example's own fix is used (its text
	// after the first "; "), so a fix the message spells is not written
	// twice.
	Fix string
}

// CodeSummary is a code's documentation across the rows that emit it.
type CodeSummary struct {
	Code Code
	// Meanings are the rows' meanings, in table order, once each.
	Meanings []string
	Example  string
	// Fix is the first row's Fix, else the example's fix clause.
	Fix string
	// Reviews are the reviews that can emit it (the union of its rows').
	Reviews []Review
	// NoBreakGlass: break glass does not override it.
	NoBreakGlass bool
}

// Meaning joins the rows' meanings into the one line the README shows.
func (s CodeSummary) Meaning() string { return strings.Join(s.Meanings, "; ") }

// CodeSummaries lists every code of the table once, in table order (its
// first row), with its documentation gathered from all its rows. A row
// without a doc for a code yields an empty field; TestCodeDocs names it.
func CodeSummaries() []CodeSummary {
	var out []CodeSummary
	at := map[Code]int{}
	for _, r := range ruleTable {
		for _, c := range r.Codes {
			i, ok := at[c]
			if !ok {
				i = len(out)
				at[c] = i
				out = append(out, CodeSummary{Code: c})
			}
			s := &out[i]
			doc := r.Docs[c]
			if doc.Meaning != "" && !slices.Contains(s.Meanings, doc.Meaning) {
				s.Meanings = append(s.Meanings, doc.Meaning)
			}
			if s.Example == "" {
				s.Example = doc.Example
			}
			if s.Fix == "" {
				s.Fix = doc.Fix
			}
			for _, v := range r.Reviews {
				if !slices.Contains(s.Reviews, v) {
					s.Reviews = append(s.Reviews, v)
				}
			}
			s.NoBreakGlass = s.NoBreakGlass || r.NoBreakGlass
		}
	}
	for i := range out {
		if out[i].Fix == "" {
			out[i].Fix = ExampleFix(out[i].Example)
		}
	}
	return out
}

// ExampleFix is the fix a message spells: its detail after the first "; ".
func ExampleFix(example string) string {
	_, detail, ok := strings.Cut(example, "] ")
	if !ok {
		return ""
	}
	_, fix, _ := strings.Cut(detail, "; ")
	return fix
}
