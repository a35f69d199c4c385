package loader

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// ETCDSnapshotFileGVK is the kind RKE2 (through k3s) publishes each etcd
// snapshot as: cluster-scoped, k3s.cattle.io/v1 (k3s-io/api
// k3s.cattle.io/v1 types.go ETCDSnapshotFile; k3s pkg/crd/crds.go
// registers it NonNamespaced, without a status subresource). Read as
// unstructured: the gate takes no k3s dependency for five fields.
var ETCDSnapshotFileGVK = schema.GroupVersionKind{Group: "k3s.cattle.io", Version: "v1", Kind: "ETCDSnapshotFile"}

// EtcdSnapshotTimeout bounds the live read on a Plan review; a slower
// answer counts as unreadable (fail closed).
const EtcdSnapshotTimeout = 3 * time.Second

// ReadEtcdSnapshots lists the ETCDSnapshotFiles through r. A cluster that
// serves no such kind (no RKE2/k3s CRD) reads as not served; any other
// failure is the reading's Err.
//
// The list is served from the API server's watch cache as it stands
// (resourceVersion 0), not read consistently: the rule judges a snapshot's
// age in hours, against which the cache's lag (milliseconds) is nothing,
// while a consistent list waits for the cache to catch up with etcd's
// revision, which other kinds' writes move (up to its ~100 ms progress
// notification when no ETCDSnapshotFile changed: docs/performance.md,
// "GPU holders: the read options"). What the lag can do: miss a snapshot
// written a moment ago (the Plan is refused, and passes on retry), or show
// one RKE2 pruned a moment ago (only an older one than the newest it
// keeps).
func ReadEtcdSnapshots(ctx context.Context, r client.Reader) gate.EtcdSnapshots {
	ctx, cancel := context.WithTimeout(ctx, EtcdSnapshotTimeout)
	defer cancel()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(ETCDSnapshotFileGVK.GroupVersion().WithKind(ETCDSnapshotFileGVK.Kind + "List"))
	err := r.List(ctx, list, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}})
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return gate.EtcdSnapshots{}
	case err != nil:
		return gate.EtcdSnapshots{Served: true, Err: fmt.Errorf("list etcdsnapshotfiles.k3s.cattle.io: %w", err)}
	}
	return EtcdSnapshotsOf(list.Items)
}

// EtcdSnapshotsOf reads the objects' fields the rule judges; a field of the
// wrong type fails the reading closed, naming the object and the field.
func EtcdSnapshotsOf(items []unstructured.Unstructured) gate.EtcdSnapshots {
	out := gate.EtcdSnapshots{Served: true, Items: make([]gate.EtcdSnapshot, 0, len(items))}
	for i := range items {
		s, err := etcdSnapshotOf(&items[i])
		if err != nil {
			out.Err = fmt.Errorf("ETCDSnapshotFile %s: %w", qualification.Clip(items[i].GetName()), err)
			return out
		}
		out.Items = append(out.Items, s)
	}
	return out
}

func etcdSnapshotOf(u *unstructured.Unstructured) (gate.EtcdSnapshot, error) {
	s := gate.EtcdSnapshot{Name: u.GetName()}
	obj := u.Object
	var err error
	str := func(path ...string) string {
		v, _, e := unstructured.NestedString(obj, path...)
		if e != nil && err == nil {
			err = e
		}
		return v
	}
	s.Snapshot, s.Node = str("spec", "snapshotName"), str("spec", "nodeName")
	if created := str("status", "creationTime"); created != "" {
		var t metav1.Time
		if e := t.UnmarshalQueryParameter(created); e != nil {
			return s, fmt.Errorf("status.creationTime %q: expected an RFC 3339 time, e.g. 2026-12-02T00:00:00Z", qualification.Clip(created))
		}
		s.CreatedAt = t.Time
		// A snapshot is no younger than its object: the object has no
		// status subresource, so an update could re-date an old one, but
		// the API server sets metadata.creationTimestamp.
		if ts := u.GetCreationTimestamp().Time; !ts.IsZero() && ts.Before(s.CreatedAt) {
			s.CreatedAt = ts
		}
	}
	ready, _, e := unstructured.NestedBool(obj, "status", "readyToUse")
	if e != nil {
		return s, fmt.Errorf("status.readyToUse: %w (expected true or false)", e)
	}
	s.ReadyToUse = ready
	if errObj, found, _ := unstructured.NestedFieldNoCopy(obj, "status", "error"); found && errObj != nil {
		s.Error = "set"
		if msg := str("status", "error", "message"); msg != "" {
			s.Error = msg
		}
	}
	return s, err
}
