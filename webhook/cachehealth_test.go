package webhook

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDRAWatchFailureIsTheDRAProofsOwn: a failed watch of the DRA cache
// (ResourceSlices, ResourceClaims, plugin Pods) leaves the gate ready and
// the view readable; it makes the DRA facts unreadable, saying why, which
// keeps DRA nodes unproven (gate/fleet/proof_dra.go) and nothing else.
func TestDRAWatchFailureIsTheDRAProofsOwn(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newWatchedFacts(t, ctx)
	f := w.facts
	cl, err := f.Cluster(ctx)
	require.NoError(t, err)
	assert.Empty(t, cl.Proof.DRA.Unreadable)

	f.draWatches.fail("the *v1.ResourceSlice watch", errors.New("connection reset by peer"))
	assert.NoError(t, f.ready(), "the gate stays ready")
	cl, err = f.Cluster(ctx)
	require.NoError(t, err, "every review still reads its view")
	assert.Contains(t, cl.Proof.DRA.Unreadable, "the *v1.ResourceSlice watch failed")
	assert.Contains(t, cl.Proof.DRA.Unreadable, "connection reset by peer")

	again, err := f.Cluster(ctx)
	require.NoError(t, err)
	f.draWatches = watchHealth{}
	healthy, err := f.Cluster(ctx)
	require.NoError(t, err)
	assert.Empty(t, healthy.Proof.DRA.Unreadable, "the shared proof facts were not marked: only that review's copy")
	assert.NotEmpty(t, again.Proof.DRA.Unreadable)
}
