package loader

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/dra"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// DRAReads are what the DRA planner reads of one driver: its kubelet-plugin
// DaemonSet by name, the Pods of that namespace, and the driver's
// ResourceSlices (field spec.driver, which the API server indexes).
type DRAReads struct {
	PluginDaemonSet, PluginPods, Slices Read
}

// DRAReadsOf is the table for a driver.
func DRAReadsOf(d dra.Driver) DRAReads {
	return DRAReads{
		PluginDaemonSet: Read{What: "the DRA kubelet-plugin DaemonSet", Object: &appsv1.DaemonSet{}, NewList: func() client.ObjectList { return &appsv1.DaemonSetList{} },
			Namespaces: []string{d.Namespace}, Name: d.DaemonSet},
		PluginPods: Read{What: "DRA kubelet-plugin Pods", Object: &corev1.Pod{}, NewList: pods, Namespaces: []string{d.Namespace}},
		Slices: Read{What: "ResourceSlices of " + d.Name, Object: &resourcev1.ResourceSlice{}, NewList: func() client.ObjectList { return &resourcev1.ResourceSliceList{} },
			Field: fields.OneTermEqualSelector("spec.driver", d.Name)},
	}
}

// Recovery reads the DRA recovery planner's input for d.
func (l *Loader) Recovery(ctx context.Context, d dra.Driver, minUnready time.Duration, now time.Time) (dra.RecoveryInput, error) {
	in := dra.RecoveryInput{Driver: d, MinUnready: minUnready, Now: now}
	var err error
	if in.Nodes, err = l.Nodes(ctx); err != nil {
		return in, err
	}
	in.DaemonSet, in.Pods, in.Slices, err = l.driverObjects(ctx, d)
	return in, err
}

// driverObjects reads a driver's DaemonSet (nil when absent), the Pods of
// its namespace and its ResourceSlices.
func (l *Loader) driverObjects(ctx context.Context, d dra.Driver) (*appsv1.DaemonSet, []*corev1.Pod, []*resourcev1.ResourceSlice, error) {
	r := DRAReadsOf(d)
	dss, err := read[*appsv1.DaemonSet](ctx, l.Source, r.PluginDaemonSet)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("get DaemonSet %s/%s: %w", d.Namespace, d.DaemonSet, err)
	}
	var ds *appsv1.DaemonSet
	if len(dss) > 0 {
		ds = dss[0]
	}
	pods, err := read[*corev1.Pod](ctx, l.Source, r.PluginPods)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list Pods in %s: %w", d.Namespace, err)
	}
	slices, err := read[*resourcev1.ResourceSlice](ctx, l.Source, r.Slices)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list ResourceSlices of %s: %w", d.Name, err)
	}
	return ds, pods, slices, nil
}

// DRANodes is, per node, what each configured DRA driver shows of it
// (dra.NodeStates), in the drivers' order.
func (l *Loader) DRANodes(ctx context.Context, drivers []dra.Driver) (map[string][]dra.NodeState, error) {
	out := map[string][]dra.NodeState{}
	for _, d := range drivers {
		ds, pods, slices, err := l.driverObjects(ctx, d)
		if err != nil {
			return nil, err
		}
		for node, s := range dra.NodeStates(d, ds, pods, slices) {
			out[node] = append(out[node], s)
		}
	}
	return out, nil
}

// DRAProofReads are what proofs of DRA nodes read: the DaemonSets of the
// drivers' namespaces (their kubelet-plugin DaemonSets say which nodes they
// serve, and their UIDs which Pods are theirs; a name selector would take
// one informer per driver), the Pods of those namespaces (their kubelet
// plugins, told apart by their controller), every ResourceSlice (a
// driver's field selector would take one informer per driver) and the
// ResourceClaims of the allocation checks' namespace (a claim lives in its
// Pod's).
type DRAProofReads struct {
	PluginDaemonSets, PluginPods, Slices, Claims Read
}

func draProofReadsOf(cfg *gate.Config) *DRAProofReads {
	if len(cfg.DRADrivers) == 0 {
		return nil
	}
	var namespaces []string
	for _, d := range cfg.DRADrivers {
		if !slices.Contains(namespaces, d.Namespace) {
			namespaces = append(namespaces, d.Namespace)
		}
	}
	return &DRAProofReads{
		PluginDaemonSets: Read{What: "DRA kubelet-plugin DaemonSets", Object: &appsv1.DaemonSet{}, NewList: func() client.ObjectList { return &appsv1.DaemonSetList{} },
			Namespaces: namespaces},
		PluginPods: Read{What: "DRA kubelet-plugin Pods", Object: &corev1.Pod{}, NewList: pods, Namespaces: namespaces},
		Slices:     Read{What: "ResourceSlices", Object: &resourcev1.ResourceSlice{}, NewList: func() client.ObjectList { return &resourcev1.ResourceSliceList{} }},
		Claims: Read{What: "ResourceClaims", Object: &resourcev1.ResourceClaim{}, NewList: func() client.ObjectList { return &resourcev1.ResourceClaimList{} },
			Namespaces: oneOrAll(cfg.Proof.AllocationCheck.Namespace)},
	}
}

// draProof reads what proofs of DRA nodes read. An API server that does not
// serve resource.k8s.io/v1 is no error: the proof of a node running a
// driver's plugin then names it (gate.DRAProofFacts.Unreadable), and every
// other node is proven as before. DaemonSets that cannot be read are no
// error either: every GPU node's proof names it
// (gate.DRAProofFacts.DaemonSetsUnreadable), as which nodes are DRA nodes
// is then unknown.
func (l *Loader) draProof(ctx context.Context) (gate.DRAProofFacts, error) {
	var out gate.DRAProofFacts
	r := l.Reads.DRA
	if r == nil {
		return out, nil
	}
	var err error
	if out.DaemonSets, err = read[*appsv1.DaemonSet](ctx, l.Source, r.PluginDaemonSets); err != nil {
		out.DaemonSets, out.DaemonSetsUnreadable = nil, err.Error()
	}
	if out.PluginPods, err = read[*corev1.Pod](ctx, l.Source, r.PluginPods); err != nil {
		return out, fmt.Errorf("%s: %w", r.PluginPods.What, err)
	}
	if out.Slices, err = read[*resourcev1.ResourceSlice](ctx, l.Source, r.Slices); err == nil {
		out.Claims, err = read[*resourcev1.ResourceClaim](ctx, l.Source, r.Claims)
	}
	switch {
	case meta.IsNoMatchError(err):
		out.Slices, out.Claims, out.Unreadable = nil, nil, "the API server does not serve resource.k8s.io/v1: "+err.Error()
	case err != nil:
		return out, fmt.Errorf("ResourceSlices and ResourceClaims: %w", err)
	}
	return out, nil
}
