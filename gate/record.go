package gate

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// problemCodes gives each kind of record problem its reason code.
var problemCodes = map[qualification.ProblemKind]Code{
	qualification.ProblemInvalid:          CodeRecordInvalid,
	qualification.ProblemNotQualified:     CodeRecordNotQualified,
	qualification.ProblemCanaryIncomplete: CodeCanaryIncomplete,
	qualification.ProblemStale:            CodeEvidenceStale,
	qualification.ProblemFuture:           CodeEvidenceFromFuture,
}

// RecordRequest is a write of a record ConfigMap in the gate's namespace.
type RecordRequest struct {
	ConfigMap *corev1.ConfigMap
	User      UserInfo
	Now       time.Time
}

// DecideRecord refuses a record that could never qualify a Plan, so a bad
// record fails at kubectl apply rather than at upgrade time. Staleness only
// warns: an old record is history, not an error.
func DecideRecord(cfg *Config, req RecordRequest) Decision {
	cm := req.ConfigMap
	d := Decision{Object: "ConfigMap " + cm.Namespace + "/" + cm.Name}
	path := field.NewPath("data").Key(qualification.ConfigMapKey)
	var bs blockers
	rec, err := qualification.FromConfigMap(cm)
	if err != nil {
		bs.invalid(CodeRecordInvalid, "", path, cm.Name, "%v", err)
		d.Blockers = bs
		return d
	}
	d.Record = &RecordInfo{ConfigMap: cm.Name, ID: rec.ID, SourceRevision: strings.ToLower(rec.SourceRevision), ApprovedBy: rec.ApprovedBy, CompletedAt: rec.Canary.CompletedAt}
	f := qualification.Freshness{Now: req.Now, MaxAge: cfg.MaxCanaryAge.Duration, ClockSkew: cfg.ClockSkew.Duration}
	for _, p := range qualification.Check(rec, f) {
		if p.Kind == qualification.ProblemStale {
			d.Warnings = append(d.Warnings, fmt.Sprintf("record %s is stale and cannot qualify a Plan: %s", rec.ID, p.Err.Detail))
			continue
		}
		bs.invalid(problemCodes[p.Kind], "", path, cm.Name, "record %s: %s", rec.ID, p.Err.Error())
	}
	for _, e := range recordVersionErrors(rec) {
		bs.invalid(CodeRecordInvalid, "", path, e.value, "record %s %s: %v", rec.ID, e.field, e.err)
	}
	d.Blockers = bs
	d.Allowed = len(bs) == 0
	return d
}

type versionProblem struct {
	field, value string
	err          error
}

// recordVersionErrors lists the record's target and source values that do
// not parse as versions of their component.
func recordVersionErrors(rec *qualification.Record) []versionProblem {
	var out []versionProblem
	check := func(name string, t *qualification.Tuple) {
		if t == nil {
			return
		}
		for _, c := range Components {
			if v := TupleValue(*t, c); v != "" {
				if err := ParseComponent(c, v); err != nil {
					out = append(out, versionProblem{name + "." + string(c), v, err})
				}
			}
		}
	}
	check("target", &rec.Target)
	check("source", rec.Source)
	return out
}
