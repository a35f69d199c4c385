package gate

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// RecordRequest is a write of a record ConfigMap in the gate's namespace.
type RecordRequest struct {
	ConfigMap *corev1.ConfigMap
	// Update: the write edits a record that exists (the webhook's UPDATE).
	Update bool
	// Old is the stored ConfigMap of an UPDATE (nil on CREATE); when it was
	// not a record, the write is judged as a CREATE of one.
	Old  *corev1.ConfigMap
	User UserInfo
	Now  time.Time
}

// DecideRecord refuses a record that could never qualify a Plan, so a bad
// record fails at kubectl apply rather than at upgrade time, and every
// write whose author or approval annotations are not the requester's own
// (rule_attestation.go), whatever else the write does. Staleness only
// warns: an old record is history, not an error.
func DecideRecord(cfg *Config, req RecordRequest) Decision {
	cm := req.ConfigMap
	d := Decision{Object: "ConfigMap " + cm.Namespace + "/" + cm.Name}
	r := &recordWriteReview{req: req}
	r.kinds, r.cfg, r.user, r.now = kindsRecord, cfg, req.User, req.Now
	var f findings
	applyTable(r, &f, &d)
	f.settle(&d)
	if r.forged {
		// A forged attestation is refused even where the edit would revoke.
		return d
	}
	return revokes(req, d)
}

// recordWriteReview is a write of a record ConfigMap.
type recordWriteReview struct {
	reviewBase
	req RecordRequest
	// forged: the attestation rule refused the write.
	forged bool
}

// dataRules judge what the record says (the record and evidence rows).
func (r *recordWriteReview) dataRules(f *findings, d *Decision) {
	cm := r.req.ConfigMap
	path := field.NewPath("data").Key(qualification.ConfigMapKey)
	rec, err := qualification.FromConfigMap(cm)
	if err != nil {
		for _, b := range recordInvalid(badRecord{where: path, what: fmt.Sprintf("record ConfigMap %s/%s", cm.Namespace, cm.Name), err: err}) {
			f.add(b)
		}
		return
	}
	d.Record = recordInfo(rec, cm.Name, r.cfg.MaxCanaryAge.Duration)
	d.Record.Approval = r.cfg.approvalState(rec, qualification.AttestationOf(cm))
	d.Record.Expires = ""
	for _, p := range recordProblems(rec, r.cfg.freshness(r.now), r.versions()) {
		if p.Kind == qualification.ProblemStale {
			f.warn("record %s is stale and cannot qualify a Plan: %s", rec.ID, p.Err.Detail)
			continue
		}
		f.add(recordProblem(p, path, cm.Name, rec.ID))
	}
}

// revokes allows an edit that leaves a record unable to qualify anything
// (invalid, or withdrawn from state qualified): a record that does not
// qualify only ever denies, so the edit revokes it, and every Plan naming it
// is denied at its next review. Refusing the edit would leave deleting it
// the only way to revoke. A new record must still be valid.
func revokes(req RecordRequest, d Decision) Decision {
	if d.Allowed || !req.Update {
		return d
	}
	d.Warnings = append(d.Warnings, fmt.Sprintf("gpu-upgrade-gate: this edit revokes record ConfigMap %s/%s: it no longer qualifies any upgrade (%s), and every Plan naming it is denied at its next review",
		req.ConfigMap.Namespace, req.ConfigMap.Name, codeList(d.Codes())))
	d.Allowed, d.Revoked = true, true
	return d
}

func recordInfo(rec *qualification.Record, configMap string, maxAge time.Duration) *RecordInfo {
	info := &RecordInfo{ConfigMap: configMap, ID: rec.ID, SourceRevision: strings.ToLower(rec.SourceRevision), ApprovedBy: rec.ApprovedBy, CompletedAt: rec.Canary.CompletedAt}
	if exp, err := rec.Expiry(maxAge); err == nil {
		info.Expires = exp.UTC().Format(time.RFC3339)
	}
	info.Explained = rec.ExplainedDeviations()
	return info
}

// ValidateRecord lints one record for a review pipeline: every load
// problem, every record problem (freshness included, so a stale record fails
// the lint, and every target or source value that does not parse as a
// version of its component). Each blocker's field is the record path it is
// about; load problems carry their line in the message instead.
func ValidateRecord(entry RecordEntry, fr qualification.Freshness) Decision {
	d := Decision{Object: "record"}
	r := &validateRecordReview{entry: entry, fr: fr}
	r.kinds = kindsValidateRecord
	var f findings
	applyTable(r, &f, &d)
	f.settle(&d)
	if r.stopped {
		d.Allowed = false
	}
	return d
}

// validateRecordReview is the lint of one record file.
type validateRecordReview struct {
	reviewBase
	entry RecordEntry
	fr    qualification.Freshness
}

// recordRules (the record and evidence rows): the limits, the load (a
// record that does not load ends the lint), every record problem.
func (r *validateRecordReview) recordRules(f *findings, d *Decision) {
	freshnessLimits(f, r.fr)
	if r.entry.Err != nil || r.entry.Record == nil {
		for _, b := range recordInvalid(badRecord{err: r.entry.Err}) {
			f.add(b)
		}
		r.stop()
		return
	}
	rec, entry := r.entry.Record, r.entry
	d.Object = "record " + rec.ID
	d.Record = recordInfo(rec, "", r.fr.MaxAge)
	d.Record.Approval = fmt.Sprintf("not attested in a file (the record webhook attests it in the cluster); approving a ConfigMap whose data.%s is this file byte for byte names %s=%s", qualification.ConfigMapKey, qualification.AnnotationApprovedSHA256, entry.Attestation.DataSHA256)
	if entry.Attestation.Author != "" {
		d.Record.Approval = (&Config{}).approvalState(rec, entry.Attestation)
	}
	for _, p := range recordProblems(rec, r.fr, r.versions()) {
		f.add(recordProblem(p, nil, "", rec.ID))
	}
}
