package gate

import (
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Other maintenance (issue 27 item 2): the NVIDIA maintenance operator
// (github.com/Mellanox/maintenance-operator) cordons and drains a node for
// whoever asks through a NodeMaintenance (maintenance.nvidia.com/v1alpha1,
// namespaced: spec.nodeName, spec.requestorID, spec.additionalRequestors).
// The Network Operator's OFED upgrade in requestor mode asks through it
// (k8s-operator-libs pkg/upgrade, MAINTENANCE_OPERATOR_REQUESTOR_ID). A GPU
// node in another requestor's maintenance is out for the budget from the
// moment the object exists (the operator cordons it once it schedules the
// request) until the object is gone: a NodeMaintenance being deleted still
// counts, as the operator uncordons in its finalizer.

// NodeMaintenanceConfig is the `nodeMaintenance` section of the config.
type NodeMaintenanceConfig struct {
	// IgnoreRequestors are the requests the budget already counts by other
	// facts, each `namespace/requestorID`: the GPU Operator's, when its
	// driver upgrade runs in requestor mode (its driver upgrade state
	// counts the node; counting its request too would make nodes waiting
	// at the driver step hold each other). An entry matches only in its
	// namespace: a requestor ID is free text anyone who may create a
	// NodeMaintenance anywhere could write, and the namespace is where the
	// ignored requestor really creates them (its RBAC, not its word).
	IgnoreRequestors []string `json:"ignoreRequestors,omitempty"`
}

// requestorID is the maintenance operator's requestorID pattern (its CRD
// validation: DNS-label parts joined by dots, 2 to 63 characters).
var requestorID = regexp.MustCompile(`^[a-z0-9A-Z]([-a-z0-9A-Z]*[a-z0-9A-Z])?(\.[a-z0-9A-Z]([-a-z0-9A-Z]*[a-z0-9A-Z])?)*$`)

func (m *NodeMaintenanceConfig) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, entry := range m.IgnoreRequestors {
		ns, id, ok := strings.Cut(entry, "/")
		switch {
		case !ok || ns == "" || len(validation.IsDNS1123Label(ns)) > 0:
			errs = append(errs, field.Invalid(path.Child("ignoreRequestors").Index(i), qualification.Clip(entry), "expected <namespace>/<requestorID>: the namespace the ignored requestor creates its NodeMaintenances in, then its spec.requestorID, e.g. gpu-operator/gpu-operator.nvidia.com (a requestor ID alone would match anyone's request in any namespace)"))
		case len(id) < 2 || len(id) > 63 || !requestorID.MatchString(id):
			errs = append(errs, field.Invalid(path.Child("ignoreRequestors").Index(i), qualification.Clip(entry), "expected <namespace>/<requestorID> whose requestor ID is a NodeMaintenance spec.requestorID: 2 to 63 characters in domain-name notation, e.g. gpu-operator/gpu-operator.nvidia.com"))
		}
	}
	return errs
}

// counted: some requestor of m is not ignored in m's namespace (a request
// shared with an ignored requestor is still another requestor's
// maintenance).
func (m *NodeMaintenanceConfig) counted(nm NodeMaintenance) bool {
	return slices.ContainsFunc(nm.Requestors, func(id string) bool { return !slices.Contains(m.IgnoreRequestors, nm.Namespace+"/"+id) })
}
