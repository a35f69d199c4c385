package gate

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Separation is who may apply what a record qualifies. The record's author
// and approver always differ (the record webhook attests both,
// rule_attestation.go; unapproved refuses a self-approval); separation
// says whether the author may then apply the change.
type Separation string

const (
	// SeparationTwoPerson (the default) is the seed's flow: the operator
	// who ran the canary writes the record, a second operator approves
	// it, and the first applies the reviewed Plan. The approver may not
	// apply what they approved: then one person would have both vouched
	// for and rolled out the change.
	SeparationTwoPerson Separation = "two-person"
	// SeparationThreePerson keeps author, approver and applier apart.
	SeparationThreePerson Separation = "three-person"
)

var separations = []Separation{SeparationTwoPerson, SeparationThreePerson}

// separationRule (applied by useRecord): the requester may not be the
// record's attested approver, nor, under three-person separation, its
// attested author. Usernames compare exactly, as the API server
// authenticated them.
func (c *Config) separationRule(f *findings, u recordUse, rec *qualification.Record, att qualification.Attestation) {
	switch name := u.user.Name; {
	case name == "":
	case name == att.ApprovedBy:
		f.add(selfApproved(u.path, rec.ID, name, "approved", u.act, c.Separation))
	case name == att.Author && c.Separation == SeparationThreePerson:
		f.add(selfApproved(u.path, rec.ID, name, "wrote", u.act, c.Separation))
	}
}

// selfApproved builds every SelfApproved blocker. role is what the
// requester was for the record, as the record webhook attested it:
// "wrote", "approved".
func selfApproved(path *field.Path, id, user, role, act string, sep Separation) Blocker {
	who := "someone other than its approver (its author may) must apply it (two-person rule)"
	if sep == SeparationThreePerson {
		who = "someone who neither wrote nor approved it must apply it (separation: three-person)"
	}
	return forbidden(CodeSelfApproved, "", path, "%q %s record %s and is also %s; %s", user, role, id, act, who)
}
