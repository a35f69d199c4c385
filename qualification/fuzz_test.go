package qualification

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	sigsyaml "sigs.k8s.io/yaml"
)

// FuzzLoad checks that the loader never panics, is deterministic, and that
// every record it accepts survives a marshal/parse round trip (so what the
// gate reports is what the reviewer wrote). Seeds live in
// testdata/fuzz/FuzzLoad and run under plain `go test`.
func FuzzLoad(f *testing.F) {
	for _, name := range []string{"valid-kubedc.yaml", "valid-gate.yaml", "valid-kubedc.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rec1, err1 := Parse(data)
		rec2, err2 := Parse(data)
		require.Equal(t, rec1, rec2, "Parse must be deterministic")
		require.Equal(t, errText(err1), errText(err2), "Parse must be deterministic")
		if err1 != nil {
			require.Nil(t, rec1)
			return
		}
		require.NotNil(t, rec1)

		// Check must not panic on anything the loader accepts.
		p1 := Check(rec1, freshAt(testNow))
		require.Equal(t, p1, Check(rec2, freshAt(testNow)))

		out, err := sigsyaml.Marshal(rec1)
		require.NoError(t, err)
		// The re-marshalled text may exceed MaxRecordBytes (quoting and
		// block style take more room), so parse it without the size limit.
		again, err := parse(out)
		require.NoError(t, err, "marshalled record must load again:\n%s", out)
		require.Equal(t, rec1, again, "marshalled record must load to the same record:\n%s", out)
	})
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
