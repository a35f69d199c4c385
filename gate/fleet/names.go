package fleet

import "github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"

// The names gate reads the parsers, the tuple and image references by,
// until its callers read fleet (package doc, step 1).

// Same, Compare and Parse are the component's comparison and parser over
// its values (the table's functions, for gate's rules), through the
// caller's memo (nil: parse every time).
func (s *ComponentSpec) Same(vs *Versions, a, b string) bool { return s.same(vs, a, b) }
func (s *ComponentSpec) Compare(vs *Versions, a, b string) (int, error) {
	return s.compare(vs, a, b)
}
func (s *ComponentSpec) Parse(vs *Versions, v string) error { return s.parse(vs, v) }

// Required: every tuple names the component.
func (s *ComponentSpec) Required() bool { return s.required() }

// TupleDiff, QuoteOrNone, SameTrimmed and MatchesRepository are
// the tuple's and the image references' helpers gate's rules share.
// TupleDiff parses through the caller's memo (nil: none).
func TupleDiff(vs *Versions, have, want qualification.Tuple, exact bool) []string {
	return tupleDiff(vs, have, want, exact)
}
func QuoteOrNone(s string) string                    { return quoteOrNone(s) }
func SameTrimmed(a, b string) bool                   { return sameTrimmed(a, b) }
func MatchesRepository(img Image, entry string) bool { return matchesRepository(img, entry) }
