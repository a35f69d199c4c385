package qualification

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sigsyaml "sigs.k8s.io/yaml"
)

// TestRoundTripTrickyStrings marshals records whose string fields hold values
// that YAML treats specially and checks they load back unchanged, which the
// fuzz target relies on.
func TestRoundTripTrickyStrings(t *testing.T) {
	values := []string{
		"", " ", "  lead", "trail  ", "~", "null", "Null", "NULL", "true", "False", "yes", "no", "on", "off", "y", "n",
		"1", "-1", "0x1F", "0o17", "017", "1e3", "1_000", ".inf", "-.Inf", ".nan", "580.130", "580.10",
		"2026-07-14", "2026-07-14T12:00:00Z", "12:30:45", "# comment", "a # b", "a: b", "- item", "? key", "---", "...",
		"--- x", "&anchor", "*alias", "!tag", "%directive", "@at", "`tick", "'single'", `"double"`, `back\slash`,
		"{flow}", "[seq]", ",", "|", ">", "a\tb", "\t", "line\nbreak", "trailing newline\n", "\n", "\n\nlead",
		"\u2028", "\u2029", "\ufeff", "x\ufeff", "\u00a0", "\u200b",
		"é", "日本語", "🙂", "\U0010FFFD",
		strings.Repeat("word ", 40), strings.Repeat("x", 200), strings.Repeat("a b  ", 30) + " ", strings.Repeat("line\n", 5) + "  indented",
	}
	for _, v := range values {
		r := validRecord()
		r.APIVersion, r.Kind, r.ID, r.State, r.ApprovedBy, r.SourceRevision = v, v, v, v, v, v
		r.Hardware = []string{v, v + "x"}
		r.Target = Tuple{v, v, v, v, v, v}
		r.Source = &Tuple{v, v, v, v, v, v}
		r.Canary.CompletedAt, r.Canary.Evidence = v, v
		out, err := sigsyaml.Marshal(r)
		require.NoError(t, err)
		again, err := parse(out)
		if assert.NoError(t, err, "value %q marshalled as:\n%s", v, out) {
			assert.Equal(t, r, again, "value %q marshalled as:\n%s", v, out)
		}
	}
}
