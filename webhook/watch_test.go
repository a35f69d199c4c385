package webhook

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// A broken watch keeps reviews failing closed until the informer has caught
// up, and no longer than staleWindow after its last failure.
func TestWatchHealth(t *testing.T) {
	r := toolscache.NewReflector(&toolscache.ListWatch{}, &corev1.Node{}, toolscache.NewStore(toolscache.MetaNamespaceKeyFunc), 0)
	var w watchHealth
	require.NoError(t, w.fresh(), "no failure yet")

	w.failedWatch(context.Background(), r, errors.New("connection refused"))
	err := w.fresh()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "connection refused")
	assert.Contains(t, err.Error(), "the *v1.Node watch failed")

	w.fail("the API server", errors.New("connection refused"))
	w.mu.Lock()
	for k, f := range w.failed {
		f.at = time.Now().Add(-staleWindow - time.Second)
		w.failed[k] = f
	}
	w.mu.Unlock()
	assert.NoError(t, w.fresh(), "after the window the informer counts as caught up")
	assert.Empty(t, w.failed)
}
