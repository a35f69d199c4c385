package snapshot

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
)

// Source is the loader's source for the snapshot: each Read selects from
// the List's objects of its kind as the webhook's caches select from the
// cluster's (same namespaces, names, labels and fields). version stands
// for the API server's; "" infers it from the control-plane nodes
// (ServerVersion).
func (s *Snapshot) Source(version string) loader.Source {
	return &fileSource{snap: s, version: version}
}

type fileSource struct {
	snap    *Snapshot
	version string
}

func (f *fileSource) Read(_ context.Context, r loader.Read) ([]client.Object, error) {
	var out []client.Object
	add := func(obj client.Object, extra fields.Set) {
		set := fields.Set{"metadata.name": obj.GetName(), "metadata.namespace": obj.GetNamespace()}
		for k, v := range extra {
			set[k] = v
		}
		if r.Selects(obj, set) {
			out = append(out, obj)
		}
	}
	s := f.snap
	switch r.Object.(type) {
	case *corev1.Node:
		for _, n := range s.Nodes {
			add(n, nil)
		}
	case *corev1.Pod:
		for i := range s.Pods {
			p := &s.Pods[i]
			add(p, fields.Set{"spec.nodeName": p.Spec.NodeName, "status.phase": string(p.Status.Phase)})
		}
	case *corev1.ConfigMap:
		for i := range s.ConfigMaps {
			add(&s.ConfigMaps[i], nil)
		}
	case *resourcev1.ResourceSlice:
		for _, rs := range s.ResourceSlices {
			node := ""
			if rs.Spec.NodeName != nil {
				node = *rs.Spec.NodeName
			}
			add(rs, fields.Set{"spec.driver": rs.Spec.Driver, "spec.nodeName": node})
		}
	default:
		for _, obj := range s.objectsOf(r.Object) {
			add(obj, nil)
		}
	}
	return out, nil
}

// objectsOf are the List's objects of the other kinds the loader reads.
func (s *Snapshot) objectsOf(kind client.Object) []client.Object {
	var out []client.Object
	switch kind.(type) {
	case *appsv1.Deployment:
		for i := range s.Deployments {
			out = append(out, &s.Deployments[i])
		}
	case *appsv1.DaemonSet:
		for i := range s.DaemonSets {
			out = append(out, &s.DaemonSets[i])
		}
	case *batchv1.Job:
		for _, j := range s.Jobs {
			out = append(out, j)
		}
	case *upgradev1.Plan:
		for _, p := range s.Plans {
			out = append(out, p)
		}
	case *resourcev1.ResourceClaim:
		for _, c := range s.ResourceClaims {
			out = append(out, c)
		}
	}
	return out
}

// EtcdSnapshots are the List's ETCDSnapshotFiles; a List without any reads
// as a cluster that serves none (the Recipe leaves the kind out, which
// kubectl refuses where it is not served).
func (f *fileSource) EtcdSnapshots() gate.EtcdSnapshots {
	if len(f.snap.EtcdSnapshotFiles) == 0 {
		return gate.EtcdSnapshots{}
	}
	return loader.EtcdSnapshotsOf(f.snap.EtcdSnapshotFiles)
}

// NodeMaintenances are the List's NodeMaintenances (none where the Recipe
// left the kind out).
func (f *fileSource) NodeMaintenances() ([]gate.NodeMaintenance, error) {
	return loader.NodeMaintenancesOf(f.snap.NodeMaintenances)
}

func (f *fileSource) ServerVersion(context.Context) (string, error) {
	if f.version != "" {
		return f.version, nil
	}
	return f.snap.ServerVersion()
}
