package gate

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestSameProblemOneBlocker: nodes of one hardware with the same problem
// (code, field, sentence but for the node's name) share one blocker that
// counts them, names them all up to maxNamed or the first few sorted and
// how many more, and keeps the values and the fix; a lone node's blocker
// reads as before; different values, hardware or codes stay apart.
func TestSameProblemOneBlocker(t *testing.T) {
	problem := func(node, hw, kernel string) Blocker {
		b := forbidden(CodeSourceMismatch, node, pathSelector, "node %s does not run record %s's source tuple: kernel %s (want 6.8.0-134-generic); upgrade it to the source tuple first", node, "r1", kernel)
		b.perNode.hardware = hw
		return b
	}
	nodes := func(prefix string, n int) []string {
		var out []string
		for i := n; i > 0; i-- { // added out of order: reported sorted
			out = append(out, fmt.Sprintf("%s-%02d", prefix, i))
		}
		return out
	}
	cases := []struct {
		name  string
		add   func(f *findings)
		want  []string // details, in order
		nodes [][]string
	}{
		{"one node: as before", func(f *findings) { f.add(problem("a", "hw1", "6.8.0-133-generic")) },
			[]string{"node a does not run record r1's source tuple: kernel 6.8.0-133-generic (want 6.8.0-134-generic); upgrade it to the source tuple first"}, [][]string{nil}},
		{"a few nodes: all named", func(f *findings) {
			for _, n := range nodes("b", 3) {
				f.add(problem(n, "hw1", "6.8.0-133-generic"))
			}
			f.add(problem("b-02", "hw1", "6.8.0-133-generic")) // judged twice
		}, []string{"3 nodes of hardware hw1 (b-01,b-02,b-03) have the same problem: node b-01 does not run record r1's source tuple: kernel 6.8.0-133-generic (want 6.8.0-134-generic); upgrade it to the source tuple first"},
			[][]string{{"b-01", "b-02", "b-03"}}},
		{"many nodes: the first five and how many more", func(f *findings) {
			for _, n := range nodes("c", 12) {
				f.add(problem(n, "hw1", "6.8.0-133-generic"))
			}
		}, []string{"12 nodes of hardware hw1 (c-01,c-02,c-03,c-04,c-05 and 7 more; gpu-upgrade-gate inventory lists each GPU node's hardware and tuple) have the same problem: node c-01 does not run"},
			[][]string{slices.Sorted(slices.Values(nodes("c", 12)))}},
		{"different values, hardware and codes stay apart", func(f *findings) {
			f.add(problem("d1", "hw1", "6.8.0-133-generic"))
			f.add(problem("d2", "hw1", "6.8.0-132-generic"))
			f.add(problem("d3", "hw2", "6.8.0-133-generic"))
			f.add(forbidden(CodeGPUHolders, "d4", pathSelector, "node %s runs %d GPU holder(s): %s", "d4", 1, "Job ml/a"))
			f.add(forbidden(CodeGPUHolders, "d5", pathSelector, "node %s runs %d GPU holder(s): %s", "d5", 1, "Job ml/b"))
			f.add(problem("d6", "hw1", "6.8.0-133-generic"))
		}, []string{"2 nodes of hardware hw1 (d1,d6) have the same problem: node d1 does not run record r1's source tuple: kernel 6.8.0-133-generic",
			"node d2 does not run record r1's source tuple: kernel 6.8.0-132-generic", "node d3 does not run", "node d4 runs 1 GPU holder(s): Job ml/a", "node d5 runs 1 GPU holder(s): Job ml/b"},
			[][]string{{"d1", "d6"}, nil, nil, nil, nil}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var f findings
			tc.add(&f)
			var d Decision
			f.settle(&d)
			require.Len(t, d.Blockers, len(tc.want), d.Message())
			for i, b := range d.Blockers {
				require.True(t, strings.HasPrefix(b.Err.Detail, tc.want[i]), "%d: %s", i, b.Err.Detail)
				require.Equal(t, tc.nodes[i], b.Nodes)
				require.Equal(t, pathSelector.String(), b.Err.Field)
				require.Equal(t, field.ErrorTypeForbidden, b.Err.Type)
				require.Nil(t, b.perNode)
				if b.Nodes == nil {
					require.NotEmpty(t, b.Node)
				} else {
					require.Empty(t, b.Node)
				}
			}
		})
	}
}
