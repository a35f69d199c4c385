package loader

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/dra"
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
