package webhook

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConcurrentlyRunsTheReadsAtOnce: each read waits until the other has
// started, so reads made one after another would never both finish; a
// panicking read fails the review's reads (an error), never the process.
func TestConcurrentlyRunsTheReadsAtOnce(t *testing.T) {
	t.Run("at once", func(t *testing.T) {
		a, b := make(chan struct{}), make(chan struct{})
		met := func(mine, other chan struct{}) func() {
			return func() {
				close(mine)
				select {
				case <-other:
				case <-time.After(5 * time.Second):
					t.Error("the other read did not start while this one was in flight")
				}
			}
		}
		require.NoError(t, concurrently(met(a, b), met(b, a)))
	})
	t.Run("a panic is an error", func(t *testing.T) {
		ran := false
		err := concurrently(func() { panic("boom") }, func() { ran = true })
		require.Error(t, err)
		assert.Contains(t, err.Error(), "boom")
		assert.True(t, ran, "the other read still ran")
	})
	t.Run("no panic, no error", func(t *testing.T) {
		assert.NoError(t, concurrently(func() {}, func() {}))
	})
}
