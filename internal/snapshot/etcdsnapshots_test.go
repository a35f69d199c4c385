package snapshot

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
)

// TestEtcdSnapshotsFromASnapshot: `check` reads RKE2's ETCDSnapshotFiles
// from a List saved with etcdsnapshotfiles.k3s.cattle.io; a List without
// any reads as a cluster that serves none.
func TestEtcdSnapshotsFromASnapshot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		items  string
		served bool
		err    string
	}{
		{name: "a ready snapshot", served: true, items: `{"apiVersion":"k3s.cattle.io/v1","kind":"ETCDSnapshotFile","metadata":{"name":"local-etcd-snapshot-server-1-1764633600"},
 "spec":{"snapshotName":"etcd-snapshot-server-1-1764633600","nodeName":"server-1","location":"file:///var/lib/rancher/rke2/server/db/snapshots/etcd-snapshot-server-1-1764633600"},
 "status":{"readyToUse":true,"creationTime":"2026-12-02T00:00:00Z","size":"10485792"}}`},
		{name: "a malformed one fails closed", served: true, err: "status.readyToUse", items: `{"apiVersion":"k3s.cattle.io/v1","kind":"ETCDSnapshotFile","metadata":{"name":"odd"},"status":{"readyToUse":"yes"}}`},
		{name: "none: not served", items: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"x","name":"y"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap, err := Parse([]byte(`{"apiVersion":"v1","kind":"List","items":[` + tc.items + `]}`))
			require.NoError(t, err)
			cl, err := loader.New(gate.DefaultConfig(), snap.Source("v1.36.1+rke2r1")).Cluster(context.Background())
			require.NoError(t, err)
			got := cl.EtcdSnapshots
			assert.Equal(t, tc.served, got.Served)
			if tc.err != "" {
				assert.ErrorContains(t, got.Err, tc.err)
				return
			}
			require.NoError(t, got.Err)
			if tc.served {
				require.Len(t, got.Items, 1)
				assert.Equal(t, "server-1", got.Items[0].Node)
				assert.True(t, got.Items[0].ReadyToUse)
			}
		})
	}
}
