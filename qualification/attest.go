package qualification

import (
	"crypto/sha256"
	"encoding/hex"

	corev1 "k8s.io/api/core/v1"
)

// The annotations of a record ConfigMap that name who wrote its data and who
// approved it. The record webhook accepts them only from the identities they
// name, as the API server authenticated the request (webhook/records.md), so
// in the cluster they are attested; offline they are an export of what the
// cluster's webhook attested.
const (
	// AnnotationAuthor is the username that last wrote the record's data.
	AnnotationAuthor = "gpu-upgrade-gate.io/author"
	// AnnotationApprovedBy is the username that approved the data.
	AnnotationApprovedBy = "gpu-upgrade-gate.io/approved-by"
	// AnnotationApprovedSHA256 is the lower-case hex SHA-256 of
	// data["qualification.yaml"] as the approver saw it: a change of the
	// data leaves it stale, which withdraws the approval.
	AnnotationApprovedSHA256 = "gpu-upgrade-gate.io/approved-sha256"
)

// Attestation is what a record ConfigMap says about who wrote and who
// approved its data, and the digest of that data as stored.
type Attestation struct {
	Author, ApprovedBy, ApprovedSHA256 string
	// DataSHA256 is the SHA-256 of data["qualification.yaml"].
	DataSHA256 string
}

// AttestationOf reads the attestation annotations of a record ConfigMap.
func AttestationOf(cm *corev1.ConfigMap) Attestation {
	if cm == nil {
		return Attestation{}
	}
	return Attestation{
		Author:         cm.Annotations[AnnotationAuthor],
		ApprovedBy:     cm.Annotations[AnnotationApprovedBy],
		ApprovedSHA256: cm.Annotations[AnnotationApprovedSHA256],
		DataSHA256:     DataSHA256(cm.Data[ConfigMapKey]),
	}
}

// DataSHA256 is the approval digest of a record's text.
func DataSHA256(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// Approved says the approval stands: someone other than the author approved
// exactly the data stored. Usernames compare exactly, as the API server
// authenticated them.
func (a Attestation) Approved() bool {
	return a.Author != "" && a.ApprovedBy != "" && a.ApprovedBy != a.Author && a.ApprovedSHA256 == a.DataSHA256
}

// Attest returns cm with the annotations a record webhook would have
// attested for author and approver (both written through the API server in
// a cluster). For fixtures and offline snapshots; approver "" leaves the
// record unapproved.
func Attest(cm *corev1.ConfigMap, author, approver string) *corev1.ConfigMap {
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[AnnotationAuthor] = author
	if approver != "" {
		cm.Annotations[AnnotationApprovedBy] = approver
		cm.Annotations[AnnotationApprovedSHA256] = DataSHA256(cm.Data[ConfigMapKey])
	}
	return cm
}
