package gate

import "k8s.io/apimachinery/pkg/util/validation/field"

// selfApproved builds every SelfApproved blocker (the two-person rule;
// applied by useRecord).
func selfApproved(path *field.Path, id, approver, act string) Blocker {
	return forbidden(CodeSelfApproved, "", path, "record %s was approved by %q, who is also %s; a second person must apply it (two-person rule)", id, approver, act)
}
