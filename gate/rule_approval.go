package gate

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// A record qualifies only when its approval is attested (applied by
// useRecord): the record webhook accepted the author and approval
// annotations from the users they name (rule_attestation.go), the approval
// is of exactly the data stored, by someone other than the author, and the
// record's own approvedBy names that approver (or maps to it by
// approverAliases). Records written before attestation carry no
// annotations and are reported here, with the command that approves them.

// unapproved says why a record's approval does not stand ("" when it
// does).
func (c *Config) unapproved(rec *qualification.Record, a qualification.Attestation) string {
	switch {
	case a.Author == "":
		return fmt.Sprintf("its ConfigMap has no %s annotation (written before approvals were attested, or a record file)", qualification.AnnotationAuthor)
	case a.ApprovedBy == "" || a.ApprovedSHA256 == "":
		return "nobody has approved its data yet"
	case a.ApprovedBy == a.Author:
		return fmt.Sprintf("%q approved the data they wrote", a.ApprovedBy)
	case a.ApprovedSHA256 != a.DataSHA256:
		return fmt.Sprintf("the approval by %q is of data with SHA-256 %s, and the data changed since (SHA-256 %s), which withdrew it", a.ApprovedBy, qualification.ClipTo(a.ApprovedSHA256, 64), a.DataSHA256)
	case !c.approverMatches(rec.ApprovedBy, a.ApprovedBy):
		return fmt.Sprintf("its approvedBy %q is not the attested approver %q (approverAliases can map one to the other)", rec.ApprovedBy, a.ApprovedBy)
	}
	return ""
}

// stands: the entry loaded, and its record is qualified and approved
// (unapproved): one the engine may rely on without a request naming it (what
// a node ran, what it may run). Freshness is the caller's to add.
func (c *Config) stands(e RecordEntry) bool {
	return e.Err == nil && e.Record != nil && e.Record.State == qualification.StateQualified && c.unapproved(e.Record, e.Attestation) == ""
}

// approvalState is the record's approval in one phrase, for inventory,
// check and validate-record.
func (c *Config) approvalState(rec *qualification.Record, a qualification.Attestation) string {
	if why := c.unapproved(rec, a); why != "" {
		return "not approved: " + why
	}
	return fmt.Sprintf("approved by %s, written by %s (attested)", a.ApprovedBy, a.Author)
}

// approverMatches compares exactly: the record's text, or its alias, is
// the username the API server authenticated.
func (c *Config) approverMatches(approvedBy, attested string) bool {
	if alias, ok := c.ApproverAliases[approvedBy]; ok {
		return alias == attested
	}
	return approvedBy == attested
}

// recordNotApproved builds every RecordNotApproved blocker.
func (c *Config) recordNotApproved(path *field.Path, name string, rec *qualification.Record, why string, a qualification.Attestation) Blocker {
	approver := rec.ApprovedBy
	if alias, ok := c.ApproverAliases[approver]; ok {
		approver = alias
	}
	if approver == "" {
		approver = "<approver>"
	}
	how := ""
	if a.Author == "" {
		how = fmt.Sprintf("whoever vouches for the data runs `kubectl annotate configmap -n %s %s %s=<their username>` first, then ", c.Namespace, name, qualification.AnnotationAuthor)
	}
	return forbidden(CodeRecordNotApproved, "", path, "record %s (ConfigMap %s/%s) is not approved: %s; %sa second person, named in the record's approvedBy, approves exactly this data with `kubectl annotate configmap -n %s %s %s=%s %s=%s --overwrite` (docs/install.md#approving-a-record)",
		rec.ID, c.Namespace, name, why, how, c.Namespace, name, qualification.AnnotationApprovedBy, approver, qualification.AnnotationApprovedSHA256, a.DataSHA256)
}
