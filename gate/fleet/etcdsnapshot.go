package fleet

import "time"

// EtcdSnapshot is one of RKE2's ETCDSnapshotFile objects (k3s.cattle.io/v1,
// cluster-scoped) as the etcd snapshot precondition reads it.
type EtcdSnapshot struct {
	// Name is the object's; Snapshot its spec.snapshotName, Node its
	// spec.nodeName.
	Name, Snapshot, Node string
	// CreatedAt is status.creationTime; zero when unset.
	CreatedAt time.Time
	// ReadyToUse is status.readyToUse (unset: false).
	ReadyToUse bool
	// Error is status.error.message, or "set" for an error without one.
	Error string
}

// Usable: ready, without an error, and taken.
func (s EtcdSnapshot) Usable() bool { return s.ReadyToUse && s.Error == "" && !s.CreatedAt.IsZero() }

// EtcdSnapshots are the ETCDSnapshotFiles as read. Served is false when
// the cluster serves no ETCDSnapshotFile API (not RKE2 or k3s): the
// precondition applies only where the objects exist. Err says why a read
// failed, which counts as no snapshot.
type EtcdSnapshots struct {
	Served bool
	Items  []EtcdSnapshot
	Err    error
}
