package loader

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// NodeMaintenanceGVK is the NVIDIA maintenance operator's request kind
// (github.com/Mellanox/maintenance-operator api/v1alpha1
// nodemaintenance_types.go: namespaced, spec.nodeName, spec.requestorID,
// spec.additionalRequestors). Read as unstructured: the gate takes no
// dependency on the operator for three fields.
var NodeMaintenanceGVK = schema.GroupVersionKind{Group: "maintenance.nvidia.com", Version: "v1alpha1", Kind: "NodeMaintenance"}

// NodeMaintenanceResource is its resource, as discovery and RBAC name it.
const NodeMaintenanceResource = "nodemaintenances"

// NodeMaintenanceSource is a Source that holds NodeMaintenances itself (a
// saved List).
type NodeMaintenanceSource interface {
	NodeMaintenances() ([]gate.NodeMaintenance, error)
}

// ReadNodeMaintenances lists every namespace's NodeMaintenances through r.
// A cluster that serves no such kind (no maintenance operator) has none.
func ReadNodeMaintenances(ctx context.Context, r client.Reader) ([]gate.NodeMaintenance, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(NodeMaintenanceGVK.GroupVersion().WithKind(NodeMaintenanceGVK.Kind + "List"))
	err := r.List(ctx, list)
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("list nodemaintenances.maintenance.nvidia.com: %w", err)
	}
	return NodeMaintenancesOf(list.Items)
}

// NodeMaintenancesOf reads what the budget counts of each object; a field
// of the wrong type or an object without a node or requestor is an error
// naming it (the budget would otherwise miss a node out).
func NodeMaintenancesOf(items []unstructured.Unstructured) ([]gate.NodeMaintenance, error) {
	out := make([]gate.NodeMaintenance, 0, len(items))
	for i := range items {
		u := &items[i]
		nm, err := nodeMaintenanceOf(u)
		if err != nil {
			return nil, fmt.Errorf("NodeMaintenance %s/%s: %w", qualification.Clip(u.GetNamespace()), qualification.Clip(u.GetName()), err)
		}
		out = append(out, nm)
	}
	return out, nil
}

func nodeMaintenanceOf(u *unstructured.Unstructured) (gate.NodeMaintenance, error) {
	nm := gate.NodeMaintenance{Namespace: u.GetNamespace(), Name: u.GetName(), Deleting: u.GetDeletionTimestamp() != nil}
	node, _, err := unstructured.NestedString(u.Object, "spec", "nodeName")
	if err != nil || node == "" {
		return nm, fmt.Errorf("spec.nodeName: expected the name of the node in maintenance, e.g. gpu-node-01 (%v)", errOrMissing(err))
	}
	id, _, err := unstructured.NestedString(u.Object, "spec", "requestorID")
	if err != nil || id == "" {
		return nm, fmt.Errorf("spec.requestorID: expected the requestor's ID, e.g. network-operator.nvidia.com (%v)", errOrMissing(err))
	}
	more, _, err := unstructured.NestedStringSlice(u.Object, "spec", "additionalRequestors")
	if err != nil {
		return nm, fmt.Errorf("spec.additionalRequestors: expected a list of requestor IDs: %w", err)
	}
	nm.Node, nm.Requestors = node, append([]string{id}, more...)
	return nm, nil
}

func errOrMissing(err error) any {
	if err != nil {
		return err
	}
	return "missing"
}
