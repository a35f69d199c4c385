package loader

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
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
// A cluster that serves no such kind (no maintenance operator) has none;
// one that serves them only at another version (disc tells) cannot be
// read (OtherVersionError), as in the webhook.
func ReadNodeMaintenances(ctx context.Context, r client.Reader, disc discovery.DiscoveryInterface) ([]gate.NodeMaintenance, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(NodeMaintenanceGVK.GroupVersion().WithKind(NodeMaintenanceGVK.Kind + "List"))
	err := r.List(ctx, list)
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		// Not served at this version: none only if not served at all.
		if disc == nil {
			return nil, fmt.Errorf("list nodemaintenances.maintenance.nvidia.com: %w (and no discovery to tell whether another version is served)", err)
		}
		if _, serr := NodeMaintenancesServed(disc); serr != nil {
			return nil, serr
		}
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

// NodeMaintenancesServed says whether the API server serves NodeMaintenances at the
// version the gate reads. Not served at all (no maintenance operator) is
// false; served only at other versions (an operator upgraded past what the
// gate knows) is an OtherVersionError, not "no maintenance": the gate
// would miss every node the operator takes out. Any other error: discovery
// failed.
func NodeMaintenancesServed(disc discovery.DiscoveryInterface) (bool, error) {
	gv := NodeMaintenanceGVK.GroupVersion().String()
	list, err := disc.ServerResourcesForGroupVersion(gv)
	switch {
	case err == nil && hasNodeMaintenances(list):
		return true, nil
	case err != nil && !apierrors.IsNotFound(err):
		return false, fmt.Errorf("discover %s: %w", gv, err)
	}
	groups, err := disc.ServerGroups()
	if err != nil {
		return false, fmt.Errorf("discover the API groups: %w", err)
	}
	var served []string
	for _, g := range groups.Groups {
		if g.Name != NodeMaintenanceGVK.Group {
			continue
		}
		for _, v := range g.Versions {
			if v.GroupVersion == gv {
				continue
			}
			list, err := disc.ServerResourcesForGroupVersion(v.GroupVersion)
			switch {
			case apierrors.IsNotFound(err):
				// Gone since ServerGroups.
			case err != nil:
				return false, fmt.Errorf("discover %s: %w", v.GroupVersion, err)
			case hasNodeMaintenances(list):
				served = append(served, v.GroupVersion)
			}
		}
	}
	if len(served) > 0 {
		return false, &OtherVersionError{served: served}
	}
	return false, nil
}

func hasNodeMaintenances(list *metav1.APIResourceList) bool {
	return list != nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == NodeMaintenanceResource })
}

// OtherVersionError: NodeMaintenances are served, but only at versions
// other than the one the gate reads.
type OtherVersionError struct{ served []string }

func (e *OtherVersionError) Error() string {
	return fmt.Sprintf("the API server serves them at %s, not at %s, the version the gate reads: a maintenance operator the gate does not know (serve %s again, or run a gate that reads %s)",
		strings.Join(e.served, ", "), NodeMaintenanceGVK.GroupVersion(), NodeMaintenanceGVK.Version, strings.Join(e.served, " or "))
}
