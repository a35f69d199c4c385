package gate

import "k8s.io/apimachinery/pkg/util/validation/field"

// selfApproved builds every SelfApproved blocker (the two-person rule;
// applied by useRecord). role is what the requester was for the record,
// as the record webhook attested it: "wrote", "approved".
func selfApproved(path *field.Path, id, user, role, act string) Blocker {
	return forbidden(CodeSelfApproved, "", path, "%q %s record %s and is also %s; someone who neither wrote nor approved it must apply it (two-person rule)", user, role, id, act)
}
