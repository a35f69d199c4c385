package gate

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// The record webhook cannot mutate, so it makes the author and approval
// annotations true by refusing every write where they are not the
// requester's own (applied by DecideRecord, before and whatever the record's
// content rules say):
//   - a write that changes the data or the author, or makes a ConfigMap a
//     record (CREATE, or the label added: judged alike, so removing and
//     re-adding the label launders nothing), carries author = the requester;
//   - an approval (approved-by or approved-sha256 added or changed, both
//     set) comes in a write that changes neither data nor author, from the
//     user it names, who is not the author, for the SHA-256 of the data;
//   - a change of data or author withdraws the approval: approval
//     annotations left in place that no longer match are stale (allowed,
//     with a warning); left in place while they match the new data (the
//     data changed back) they would revive an approval the change withdrew,
//     so that write is refused.
// Removing approval annotations is allowed to anyone who may write the
// record: it only withdraws.

var (
	pathAnnotations = field.NewPath("metadata", "annotations")
	pathAuthor      = pathAnnotations.Key(qualification.AnnotationAuthor)
	pathApprovedBy  = pathAnnotations.Key(qualification.AnnotationApprovedBy)
	pathApprovedSHA = pathAnnotations.Key(qualification.AnnotationApprovedSHA256)
)

// recordWrite is what one record write changes.
type recordWrite struct {
	cm             *corev1.ConfigMap
	user           string
	now, was       qualification.Attestation
	becomes        bool // CREATE, or the write makes the ConfigMap a record
	data, author   bool // the data or the author annotation changes
	approval       bool // approved-by or approved-sha256 changes
	approvalClaims bool // after the write both are set
}

func (c *Config) recordWriteOf(req RecordRequest) recordWrite {
	w := recordWrite{cm: req.ConfigMap, user: req.User.Name, now: qualification.AttestationOf(req.ConfigMap)}
	old := req.Old
	w.becomes = old == nil || old.Namespace != c.Namespace || old.Labels[qualification.ConfigMapLabel] != "true"
	if !w.becomes {
		w.was = qualification.AttestationOf(old)
	}
	oldText, oldHas := "", false
	if !w.becomes {
		oldText, oldHas = old.Data[qualification.ConfigMapKey]
	}
	newText, newHas := w.cm.Data[qualification.ConfigMapKey]
	w.data = w.becomes || oldHas != newHas || oldText != newText
	w.author = w.becomes || w.was.Author != w.now.Author
	w.approval = w.was.ApprovedBy != w.now.ApprovedBy || w.was.ApprovedSHA256 != w.now.ApprovedSHA256
	w.approvalClaims = w.now.ApprovedBy != "" && w.now.ApprovedSHA256 != ""
	return w
}

// attestationRule (record writes): the rules above.
func attestationRule(rv review, f *findings, _ *Decision) {
	if r, ok := rv.(*recordWriteReview); ok {
		n := len(f.blockers)
		r.cfg.attestation(r.req, f)
		r.forged = len(f.blockers) > n
	}
}

// attestation applies the rules above to one record write.
func (c *Config) attestation(req RecordRequest, f *findings) {
	w := c.recordWriteOf(req)
	ref := fmt.Sprintf("record ConfigMap %s/%s", w.cm.Namespace, w.cm.Name)
	if w.user == "" {
		f.add(forbidden(CodeAttestationForged, "", pathAuthor, "the request names no user, so no author or approval can be attested; write the record as an authenticated user"))
		return
	}
	if w.data || w.author {
		what := "changes the data of"
		switch {
		case w.becomes:
			what = "creates"
		case !w.data:
			what = "changes the author of"
		}
		if w.now.Author != w.user {
			f.add(invalid(CodeAttestationForged, "", pathAuthor, w.now.Author, "this write %s %s, so %s must be the requester %q, exactly as the API server authenticated it; set %s=%s", what, ref, qualification.AnnotationAuthor, w.user, qualification.AnnotationAuthor, w.user))
		}
		switch {
		case w.approval && w.approvalClaims:
			f.add(forbidden(CodeAttestationForged, "", pathApprovedBy, "this write %s %s and also sets its approval; an approval is a write of its own, by the approver, that leaves the data as it is: remove %s and %s here, then the approver runs kubectl annotate", what, ref, qualification.AnnotationApprovedBy, qualification.AnnotationApprovedSHA256))
		case w.approvalClaims && w.now.ApprovedSHA256 == w.now.DataSHA256:
			f.add(forbidden(CodeAttestationForged, "", pathApprovedSHA, "this write %s %s and keeps the approval by %q, which matches the data after the write; a change of data or author withdraws the approval, so remove %s and %s in this write and have the data approved again", what, ref, w.now.ApprovedBy, qualification.AnnotationApprovedBy, qualification.AnnotationApprovedSHA256))
		case w.approvalClaims:
			f.warn("gpu-upgrade-gate: this write withdraws the approval by %q of %s: it approved data with SHA-256 %s, the data now has %s; the approver approves it again with kubectl annotate", w.now.ApprovedBy, ref, qualification.ClipTo(w.now.ApprovedSHA256, 64), w.now.DataSHA256)
		}
		return
	}
	if !w.approval || !w.approvalClaims {
		return // nothing attested changes, or an approval is withdrawn
	}
	a := w.now
	switch {
	case a.ApprovedBy != w.user:
		f.add(invalid(CodeAttestationForged, "", pathApprovedBy, a.ApprovedBy, "only %q can approve %s as %q; this write is by %q, exactly as the API server authenticated it: the approver annotates it themself", a.ApprovedBy, ref, a.ApprovedBy, w.user))
	case a.Author == "":
		f.add(required(CodeAttestationForged, "", pathAuthor, "%s has no %s, so nobody is attested to have written its data; whoever vouches for it sets %s=<their username> first", ref, qualification.AnnotationAuthor, qualification.AnnotationAuthor))
	case a.Author == w.user:
		f.add(forbidden(CodeAttestationForged, "", pathApprovedBy, "%q wrote the data of %s (%s), so cannot approve it; a second person must (two-person rule)", w.user, ref, qualification.AnnotationAuthor))
	case a.ApprovedSHA256 != a.DataSHA256:
		f.add(invalid(CodeAttestationForged, "", pathApprovedSHA, a.ApprovedSHA256, "is not the SHA-256 of data.%s of %s; approve exactly the data stored: %s=%s", qualification.ConfigMapKey, ref, qualification.AnnotationApprovedSHA256, a.DataSHA256))
	}
}
