package gate

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// The record rules (review-level, once per named record): it is named,
// exists, loads, its versions parse, it is qualified, complete and fresh
// (rule_evidence.go), approved as the record webhook attested
// (rule_approval.go) by someone other than the requester
// (rule_selfapproved.go), and
// a rollback has a source to go back to.

// recordProblems is every problem of a loaded record: qualification.Check,
// and the target and source values that do not parse as versions of their
// component. An unparsable record version is the record's problem,
// RecordInvalid, wherever the record is used (the ConfigMap webhook, Plans,
// the driver path, validate-record, upgrade-check).
func recordProblems(rec *qualification.Record, fr qualification.Freshness, vs *fleet.Versions) qualification.Problems {
	ps := qualification.Check(rec, fr)
	for _, side := range []struct {
		name string
		t    *qualification.Tuple
	}{{"target", &rec.Target}, {"source", rec.Source}} {
		if side.t == nil {
			continue
		}
		for i := range componentTable {
			s := &componentTable[i]
			if v := s.Value(*side.t); strings.TrimSpace(v) != "" {
				if err := s.Parse(vs, v); err != nil {
					ps = append(ps, qualification.Problem{Kind: qualification.ProblemInvalid, Err: field.Invalid(field.NewPath(side.name, string(s.Name)), v, err.Error()+"; fix the record and have it reviewed again")})
				}
			}
		}
	}
	return ps
}

// recordProblem turns one record problem into its code's blocker. where
// nil keeps the problem's own field (validate-record); else the blocker
// points at where (the field naming the record) with value name.
func recordProblem(p qualification.Problem, where *field.Path, name, id string) Blocker {
	switch p.Kind {
	case qualification.ProblemNotQualified:
		return recordNotQualified(p.Err, where, name, id)
	case qualification.ProblemCanaryIncomplete:
		return canaryIncomplete(p.Err, where, name, id)
	case qualification.ProblemStale:
		return evidenceStale(p.Err, where, name, id)
	case qualification.ProblemFuture:
		return evidenceFromFuture(p.Err, where, name, id)
	}
	return recordInvalid(badRecord{where: where, what: name, problem: p.Err, id: id})[0]
}

// recordBlocker is the shared form of the record problem codes: "record
// <id>: <field>: <value>: <what is wrong; what to do>".
func recordBlocker(code Code, e *field.Error, where *field.Path, name, id string) Blocker {
	if where == nil {
		return Blocker{Code: code, Err: e}
	}
	return invalid(code, "", where, name, "record %s: %s", id, e.Error())
}

// recordNotQualified builds every RecordNotQualified blocker.
func recordNotQualified(e *field.Error, where *field.Path, name, id string) Blocker {
	return recordBlocker(CodeRecordNotQualified, e, where, name, id)
}

// canaryIncomplete builds every CanaryIncomplete blocker.
func canaryIncomplete(e *field.Error, where *field.Path, name, id string) Blocker {
	return recordBlocker(CodeCanaryIncomplete, e, where, name, id)
}

type missingProblem int

const (
	missingPlanAnnotation   missingProblem = iota // a Plan names no record
	missingDriverAnnotation                       // a driver-path change names none
	missingConfigMap                              // the named ConfigMap holds no record
	missingDRAInstall                             // a Node write installs a DRA driver no record qualifies (rule_drainstall.go)
)

// recordMissing builds every RecordMissing blocker; a missingDRAInstall's
// args are the node, the DaemonSet, the DRA driver version and the tuple
// the node would run.
func recordMissing(cfg *Config, path *field.Path, name string, p missingProblem, args ...any) Blocker {
	switch p {
	case missingDRAInstall:
		return forbidden(CodeRecordMissing, args[0].(string), path, "this write makes DaemonSet %[2]s schedule its DRA kubelet plugin on node %[1]s, installing DRA driver %[3]s there, so the node would run %[4]s, and no approved, qualified, fresh record for its hardware qualifies its tuple; "+
			"qualify it on a canary first (a record whose target names DRA driver %[3]s), or keep the node out of the DaemonSet's scheduling", args...)
	case missingPlanAnnotation:
		return required(CodeRecordMissing, "", path, "the Plan names no qualification record; annotate it with %s=<ConfigMap in namespace %s labelled %s=true>", AnnotationQualification, cfg.Namespace, qualification.ConfigMapLabel)
	case missingDriverAnnotation:
		return required(CodeRecordMissing, "", path, "the change names no qualification record; annotate it with %s=<record ConfigMap>[,<another, one per hardware identity>]", AnnotationQualification)
	}
	return Blocker{Code: CodeRecordMissing, Err: &field.Error{Type: field.ErrorTypeNotFound, Field: path.String(), BadValue: name,
		Detail: fmt.Sprintf("no ConfigMap %s/%s labelled %s=true holds a record; create it, or fix the annotation", cfg.Namespace, name, qualification.ConfigMapLabel)}}
}

// badRecord is what recordInvalid reports: a record that does not load
// (err; where names it, or nil to list each load problem on its own, as
// validate-record does), one of its problems (problem), or a rollback
// asked of a record without source (rollbackOf names the asker).
type badRecord struct {
	where      *field.Path
	what       string
	err        error
	problem    *field.Error
	id         string
	rollbackOf string
}

// recordInvalid builds every RecordInvalid blocker.
func recordInvalid(b badRecord) []Blocker {
	switch {
	case b.problem != nil:
		return []Blocker{recordBlocker(CodeRecordInvalid, b.problem, b.where, b.what, b.id)}
	case b.rollbackOf != "":
		return []Blocker{invalid(CodeRecordInvalid, "", b.where, "true", "the %s asks for a rollback but record %s has no source tuple to roll back to; use a %s record with source", b.rollbackOf, b.id, qualification.APIVersionGate)}
	case b.where != nil:
		return []Blocker{invalid(CodeRecordInvalid, "", b.where, b.what, "%s does not load: %v; fix the record and have it reviewed again", b.what, b.err)}
	}
	var le *qualification.LoadError
	switch {
	case errors.As(b.err, &le):
		bs := make([]Blocker, len(le.Problems))
		for i, p := range le.Problems {
			bs[i] = Blocker{Code: CodeRecordInvalid, Err: &field.Error{Type: field.ErrorTypeInvalid, Detail: p}}
		}
		return bs
	case b.err != nil:
		return []Blocker{{Code: CodeRecordInvalid, Err: &field.Error{Type: field.ErrorTypeInvalid, Detail: b.err.Error()}}}
	}
	return []Blocker{required(CodeRecordInvalid, "", field.NewPath("record"), "no record was given; pass a record file")}
}

// recordRule (Plans and the driver path, one function for the record,
// evidence, approval and selfapproved rows): every record the object names
// exists, loads, qualifies, is fresh and complete, and is approved by
// someone other than the requester. A record about to expire is warned of
// on every path that uses one (before, only a Plan's review warned).
func recordRule(rv review, f *findings, d *Decision) {
	switch r := rv.(type) {
	case *recordWriteReview:
		r.dataRules(f, d)
		return
	case *validateRecordReview:
		r.recordRules(f, d)
		return
	case *upgradeCheckReview:
		r.recordRules(f, d)
		return
	}
	b := rv.base()
	if !b.records {
		return
	}
	if len(b.names) == 0 {
		f.add(recordMissing(b.cfg, b.recordPath, "", b.missing))
		return
	}
	_, plan := rv.(*PlanReview) // a Plan names one record, the driver path several
	var refs []string
	for _, name := range b.names {
		e, ok := b.cl.Records[name]
		rec := b.cfg.useRecord(f, recordUse{name: name, entry: e, found: ok, user: b.user, now: b.now,
			path: b.recordPath, rollback: b.rollback, subject: b.subject, act: b.act, vs: b.versions()})
		if rec == nil {
			continue
		}
		var explained []string
		if plan {
			d.Record = recordInfo(rec, name, b.cfg.MaxCanaryAge.Duration)
			d.Record.Approval = b.cfg.approvalState(rec, e.Attestation)
			explained = d.Record.Explained
		} else {
			refs = append(refs, rec.Ref())
			explained = rec.ExplainedDeviations()
		}
		if exp, err := rec.Expiry(b.cfg.MaxCanaryAge.Duration); err == nil && b.now.Before(exp) && exp.Sub(b.now) <= b.cfg.ExpiryWarning.Duration {
			f.warn("record %s expires at %s (in %s); renew the canary evidence soon", rec.ID, exp.UTC().Format(time.RFC3339), exp.Sub(b.now).Round(time.Minute))
		}
		// An explained deviation qualifies; whoever applies the record
		// still reads it in the answer.
		for _, x := range explained {
			f.warn("record %s: canary check %s", rec.ID, x)
		}
	}
	if !plan {
		d.RecordRefs = refs
	}
}

// recordUse is one named record and who asks to use it.
type recordUse struct {
	name     string
	entry    RecordEntry
	found    bool
	user     UserInfo
	now      time.Time
	path     *field.Path
	rollback bool
	// subject and act word the messages: "Plan", "applying this Plan".
	subject, act string
	// vs is the review's memo of parsed versions.
	vs *fleet.Versions
}

// useRecord applies the record rules to a record a request names, for
// Plans and the driver path alike. It returns the record when it loaded,
// for the transitions.
func (c *Config) useRecord(f *findings, u recordUse) *qualification.Record {
	switch {
	case !u.found:
		f.add(recordMissing(c, u.path, u.name, missingConfigMap))
		return nil
	case u.entry.Err != nil || u.entry.Record == nil:
		for _, b := range recordInvalid(badRecord{where: u.path, what: fmt.Sprintf("record ConfigMap %s/%s", c.Namespace, u.name), err: u.entry.Err}) {
			f.add(b)
		}
		return nil
	}
	rec := u.entry.Record
	for _, p := range recordProblems(rec, c.freshness(u.now), u.vs) {
		f.add(recordProblem(p, u.path, u.name, rec.ID))
	}
	att := u.entry.Attestation
	if why := c.unapproved(rec, att); why != "" {
		f.add(c.recordNotApproved(u.path, u.name, rec, why, att))
	}
	c.separationRule(f, u, rec, att)
	if u.rollback && rec.Source == nil {
		for _, b := range recordInvalid(badRecord{where: pathRollback, id: rec.ID, rollbackOf: u.subject}) {
			f.add(b)
		}
	}
	return rec
}

func (c *Config) freshness(now time.Time) qualification.Freshness {
	return qualification.Freshness{Now: now, MaxAge: c.MaxCanaryAge.Duration, ClockSkew: c.ClockSkew.Duration}
}
