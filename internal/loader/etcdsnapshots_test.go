package loader

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// snapshotFile is an ETCDSnapshotFile as RKE2 writes it (k3s pkg/etcd:
// spec and status in one object).
func snapshotFile(name string, status map[string]any) unstructured.Unstructured {
	u := unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k3s.cattle.io/v1", "kind": "ETCDSnapshotFile",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"snapshotName": "etcd-snapshot-server-1-1764633600", "nodeName": "server-1", "location": "file:///var/lib/rancher/rke2/server/db/snapshots/etcd-snapshot-server-1-1764633600"},
		"status":   status,
	}}
	return u
}

func TestEtcdSnapshotsOf(t *testing.T) {
	at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	got := EtcdSnapshotsOf([]unstructured.Unstructured{
		snapshotFile("ready", map[string]any{"readyToUse": true, "creationTime": "2026-12-02T00:00:00Z", "size": "1Mi"}),
		snapshotFile("failed", map[string]any{"readyToUse": false, "error": map[string]any{"message": "upload failed", "time": "2026-12-02T00:00:00Z"}}),
		snapshotFile("bare-error", map[string]any{"error": map[string]any{}}),
	})
	require.NoError(t, got.Err)
	assert.True(t, got.Served)
	require.Len(t, got.Items, 3)
	assert.Equal(t, "ready", got.Items[0].Name)
	assert.Equal(t, "server-1", got.Items[0].Node)
	assert.Equal(t, "etcd-snapshot-server-1-1764633600", got.Items[0].Snapshot)
	assert.True(t, got.Items[0].CreatedAt.Equal(at))
	assert.True(t, got.Items[0].ReadyToUse)
	assert.Empty(t, got.Items[0].Error)
	assert.Equal(t, "upload failed", got.Items[1].Error)
	assert.Equal(t, "set", got.Items[2].Error)

	for name, status := range map[string]map[string]any{
		"status.creationTime": {"readyToUse": true, "creationTime": "yesterday"},
		"status.readyToUse":   {"readyToUse": "yes"},
	} {
		t.Run(name, func(t *testing.T) {
			bad := EtcdSnapshotsOf([]unstructured.Unstructured{snapshotFile("odd", status)})
			require.Error(t, bad.Err)
			assert.Contains(t, bad.Err.Error(), "ETCDSnapshotFile odd")
			assert.Contains(t, bad.Err.Error(), name)
		})
	}
}

// TestReadEtcdSnapshots: a cluster that does not serve the kind reads as
// not served (the precondition applies where the objects exist); one that
// does returns its objects.
func TestReadEtcdSnapshots(t *testing.T) {
	failing := func(err error) client.Reader {
		return fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error { return err }}).Build()
	}
	gr := schema.GroupResource{Group: "k3s.cattle.io", Resource: "etcdsnapshotfiles"}
	for _, tc := range []struct {
		name   string
		err    error
		served bool
	}{
		{"no such kind (no CRD)", &meta.NoKindMatchError{GroupKind: ETCDSnapshotFileGVK.GroupKind(), SearchedVersions: []string{"v1"}}, false},
		{"the resource is gone (CRD deleted)", apierrors.NewNotFound(gr, ""), false},
		{"forbidden fails closed", apierrors.NewForbidden(gr, "", errors.New("RBAC")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ReadEtcdSnapshots(context.Background(), failing(tc.err))
			assert.Equal(t, tc.served, got.Served)
			if tc.served {
				require.Error(t, got.Err)
				assert.Contains(t, got.Err.Error(), "list etcdsnapshotfiles.k3s.cattle.io")
			} else {
				assert.NoError(t, got.Err)
			}
		})
	}
	t.Run("served", func(t *testing.T) {
		m := meta.NewDefaultRESTMapper(nil)
		m.Add(ETCDSnapshotFileGVK, meta.RESTScopeRoot)
		obj := snapshotFile("ready", map[string]any{"readyToUse": true, "creationTime": "2026-12-02T00:00:00Z"})
		c := fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithRESTMapper(m).WithObjects(&obj).Build()
		got := ReadEtcdSnapshots(context.Background(), c)
		require.NoError(t, got.Err)
		assert.True(t, got.Served)
		require.Len(t, got.Items, 1)
		assert.True(t, got.Items[0].ReadyToUse)
	})
	t.Run("from the watch cache as it stands, not a consistent read", func(t *testing.T) {
		var rv *string
		c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{List: func(_ context.Context, _ client.WithWatch, _ client.ObjectList, opts ...client.ListOption) error {
			o := (&client.ListOptions{}).ApplyOptions(opts)
			if o.Raw != nil {
				rv = &o.Raw.ResourceVersion
			}
			return nil
		}}).Build()
		ReadEtcdSnapshots(context.Background(), c)
		require.NotNil(t, rv, "no resourceVersion asked for: a consistent read")
		assert.Equal(t, "0", *rv)
	})
}

// TestEtcdSnapshotNoYoungerThanItsObject: a status.creationTime later than
// the object's metadata.creationTimestamp (an old snapshot re-dated by an
// update: no status subresource) counts from the object's creation; an
// object made after its snapshot (RKE2 listing existing snapshots) keeps
// the snapshot's time.
func TestEtcdSnapshotNoYoungerThanItsObject(t *testing.T) {
	snap := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		created time.Time
		want    time.Time
	}{
		{"re-dated after its object was made", snap.Add(-72 * time.Hour), snap.Add(-72 * time.Hour)},
		{"object made after the snapshot", snap.Add(time.Hour), snap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := snapshotFile("s", map[string]any{"readyToUse": true, "creationTime": "2026-12-02T00:00:00Z"})
			u.SetCreationTimestamp(metav1.NewTime(tc.created))
			got := EtcdSnapshotsOf([]unstructured.Unstructured{u})
			require.NoError(t, got.Err)
			assert.True(t, got.Items[0].CreatedAt.Equal(tc.want), "%v", got.Items[0].CreatedAt)
		})
	}
}
