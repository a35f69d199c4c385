package main

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSetMemoryLimit: the container's limit (the downward API's bytes, or a
// quantity) becomes 90% of it as the Go runtime's soft limit; GOMEMLIMIT
// wins; a value that is not a size is refused with the variable named.
func TestSetMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	for _, tc := range []struct {
		name, gomemlimit, limit string
		want                    int64 // the runtime's limit after; 0: unchanged
		msg, err                string
	}{
		{name: "downward API bytes", limit: "268435456", want: 268435456 * 9 / 10, msg: "Go memory limit 230 MiB (90% of GUG_MEMORY_LIMIT=256 MiB)"},
		{name: "quantity", limit: "128Mi", want: 128 << 20 * 9 / 10, msg: "Go memory limit 115 MiB"},
		{name: "GOMEMLIMIT wins", gomemlimit: "100MiB", limit: "128Mi", msg: "GOMEMLIMIT=100MiB (set by the environment)"},
		{name: "no limit"},
		{name: "not a size", limit: "lots", err: `GUG_MEMORY_LIMIT="lots": expected the container's memory limit in bytes`},
		{name: "zero", limit: "0", err: `GUG_MEMORY_LIMIT="0"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			env := map[string]string{"GOMEMLIMIT": tc.gomemlimit, EnvMemoryLimit: tc.limit}
			msg, err := setMemoryLimit(func(k string) string { return env[k] })
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Contains(t, msg, tc.msg)
			want := tc.want
			if want == 0 {
				want = math.MaxInt64
			}
			assert.Equal(t, want, debug.SetMemoryLimit(-1))
		})
	}
}

// TestSetGCPercent: serve's collector target is gcPercent unless GOGC is
// set, which wins (the runtime applied it at start).
func TestSetGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, tc := range []struct {
		name, gogc string
		want       int
		msg        string
	}{
		{name: "default", want: gcPercent, msg: "GOGC=50 (serve's default"},
		{name: "GOGC wins", gogc: "200", want: 100, msg: "GOGC=200 (set by the environment)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			msg := setGCPercent(func(k string) string { return map[string]string{"GOGC": tc.gogc}[k] })
			assert.Contains(t, msg, tc.msg)
			assert.Equal(t, tc.want, debug.SetGCPercent(100))
		})
	}
}
