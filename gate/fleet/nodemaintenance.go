package fleet

import "strings"

// NodeMaintenance is what the budget reads of one NodeMaintenance object
// (maintenance.nvidia.com/v1alpha1: the NVIDIA maintenance operator cordons
// and drains the node for its requestors; gate/nodemaintenance.go says how
// the budget counts it).
type NodeMaintenance struct {
	Namespace, Name string
	// Node is spec.nodeName.
	Node string
	// Requestors are spec.requestorID then spec.additionalRequestors.
	Requestors []string
	// Deleting: metadata.deletionTimestamp is set (still counts).
	Deleting bool
}

// Why names the object and its requestors for the budget's messages.
func (nm NodeMaintenance) Why() string {
	s := "NodeMaintenance " + nm.Namespace + "/" + nm.Name + " of requestor " + strings.Join(nm.Requestors, ", ")
	if nm.Deleting {
		s += " (being deleted: out until the maintenance operator uncordons it and the object is gone)"
	}
	return s
}
