package snapshot

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

func TestReadFileBounds(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.yaml")
	require.NoError(t, os.WriteFile(small, []byte("apiVersion: v1\n"), 0o600))
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	cases := []struct {
		name, path string
		limit      int64
		want       string // "" reads
	}{
		{"a small file", small, 1 << 20, ""},
		{"at the limit", small, 15, ""},
		{"above the limit", small, 14, "holds 15 bytes, above the limit of 14 (raise it with --max-input-bytes)"},
		{"a FIFO would block", fifo, 1 << 20, "a named pipe (FIFO), not a regular file"},
		{"a device would never end", "/dev/zero", 1 << 20, "a character device, not a regular file"},
		{"a directory", dir, 1 << 20, "a directory, not a regular file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data, err := ReadFile(tc.path, tc.limit)
			if tc.want == "" {
				require.NoError(t, err)
				assert.Equal(t, "apiVersion: v1\n", string(data))
				return
			}
			require.ErrorIs(t, err, ErrInput)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	t.Run("a record file that is a FIFO", func(t *testing.T) {
		_, err := LoadRecordFile(fifo)
		require.ErrorIs(t, err, ErrInput)
	})
}

// TestParseLayouts: the item-by-item paths (JSON streamed, YAML as kubectl
// lays it out) read the same snapshot as converting the whole document.
func TestParseLayouts(t *testing.T) {
	data, err := os.ReadFile(examples + "cluster/snapshot.yaml")
	require.NoError(t, err)
	_, items, ok := splitYAMLList(data)
	require.True(t, ok, "the example is laid out as kubectl prints it")
	require.Len(t, items, 24)
	whole := &Snapshot{Skipped: map[string]int{}}
	require.NoError(t, wholeList(data, func(_ int, item []byte) error { return whole.add(item) }))

	asJSON, err := yaml.YAMLToJSON(data)
	require.NoError(t, err)
	var indented strings.Builder
	var v any
	require.NoError(t, json.Unmarshal(asJSON, &v))
	out, _ := json.MarshalIndent(v, "", "  ")
	indented.Write(out)
	// A YAML List indented differently (items nested by two) is converted whole.
	header, _, _ := splitYAMLList(data)
	var b strings.Builder
	b.WriteString("items:\n")
	for _, it := range items {
		for _, line := range strings.SplitAfter(string(it), "\n") {
			if strings.TrimSpace(line) != "" {
				line = "  " + line
			}
			b.WriteString(line)
		}
	}
	b.Write(header)
	nested := b.String()
	for name, input := range map[string][]byte{"kubectl YAML": data, "JSON": asJSON, "indented JSON": []byte(indented.String()), "other YAML layout": []byte(nested)} {
		t.Run(name, func(t *testing.T) {
			s, err := Parse(input)
			require.NoError(t, err)
			assert.Equal(t, whole, s)
		})
	}
	_, _, ok = splitYAMLList([]byte(nested))
	assert.False(t, ok, "items nested by two are not kubectl's layout")

	for name, tc := range map[string]struct{ input, want string }{
		"JSON not a List":       {`{"apiVersion":"v1","kind":"Node","items":[]}`, `got apiVersion "v1", kind "Node"`},
		"YAML not a List":       {"apiVersion: v1\nitems:\n- kind: Node\nkind: NodeList\n", `got apiVersion "v1", kind "NodeList"`},
		"JSON trailing data":    {`{"apiVersion":"v1","kind":"List","items":[]} {}`, "unexpected data after the List"},
		"JSON items not a list": {`{"apiVersion":"v1","kind":"List","items":{}}`, "items: expected a list"},
		"bad YAML item":         {"apiVersion: v1\nitems:\n- kind: [\nkind: List\n", "items[0]: not valid YAML"},
		"bad JSON item":         {`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Node","spec":{"unschedulable":"yes"}}]}`, "items[0] (Node )"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.input))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
