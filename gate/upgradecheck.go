package gate

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// UpgradeCheckRequest is the anchor CLI's question with typed values: may
// this hardware move from Current to Target under this record? Unlike a Plan
// review, every value is typed by a person, so the answer is only as good as
// the flags.
type UpgradeCheckRequest struct {
	Record    RecordEntry
	PCIIDs    []string
	Current   qualification.Tuple
	Target    qualification.Tuple
	Freshness qualification.Freshness
}

var flagPath = map[Component][2]*field.Path{
	ComponentKernel:       {field.NewPath("--current-kernel"), field.NewPath("--target-kernel")},
	ComponentRKE2:         {field.NewPath("--current-rke2"), field.NewPath("--target-rke2")},
	ComponentDriver:       {field.NewPath("--current-driver"), field.NewPath("--target-driver")},
	ComponentGPUOperator:  {field.NewPath("--current-gpu-operator"), field.NewPath("--target-gpu-operator")},
	ComponentDCGMExporter: {field.NewPath("--current-dcgm-exporter"), field.NewPath("--target-dcgm-exporter")},
}

var (
	pathPCIID         = field.NewPath("--pci-id")
	pathQualification = field.NewPath("--qualification")
	pathMaxCanaryAge  = field.NewPath("--max-canary-age")
	pathClockSkew     = field.NewPath("--clock-skew")
)

// anchorRKE2 is the anchor CLI's RKE2 form. upgrade-check keeps it for both
// flags: SUC's -rke2rN spelling and release candidates, which ParseRKE2 also
// reads, are refused here as the anchor refuses them.
var anchorRKE2 = regexp.MustCompile(`^v?1\.[0-9]+\.[0-9]+\+rke2r[0-9]+$`)

// UpgradeCheck answers the anchor CLI's upgrade-check: the same verdicts,
// and stricter where the design is (real booleans, bounded id and maximum
// age, unproven rollbacks, values that must parse as versions).
// req.Freshness must hold valid limits (qualification.ValidateFreshness);
// invalid ones deny rather than fall back to a default.
func UpgradeCheck(req UpgradeCheckRequest) Decision {
	d := Decision{Object: "GPU upgrade of " + strings.Join(req.PCIIDs, ",")}
	var bs blockers
	freshnessLimits(&bs, req.Freshness)
	if req.Record.Err != nil || req.Record.Record == nil {
		err := req.Record.Err
		if err == nil {
			err = errors.New("no record")
		}
		bs.add(CodeRecordInvalid, "", field.Invalid(pathQualification, "", fmt.Sprintf("%v; fix the record and have it reviewed again", err)))
		d.Blockers = bs
		return d
	}
	rec := req.Record.Record
	d.Record = recordInfo(rec, "", req.Freshness.MaxAge)
	for _, p := range qualification.Check(rec, req.Freshness) {
		bs.invalid(problemCodes[p.Kind], "", pathQualification, rec.ID, "record %s: %s", rec.ID, p.Err.Error())
	}
	hardwareRules(&bs, rec, req.PCIIDs)

	same := true
	for _, c := range Components {
		cur, tgt, want := TupleValue(req.Current, c), TupleValue(req.Target, c), TupleValue(rec.Target, c)
		paths := flagPath[c]
		if blank := strings.TrimSpace(cur) == ""; blank || strings.TrimSpace(tgt) == "" {
			p := paths[1]
			if blank {
				p = paths[0]
			}
			bs.add(CodeFactsMissing, "", field.Required(p, string(c)+" current and target values are required"))
		}
		// Byte for byte, as the anchor compares: a typed value is not normalised.
		if tgt != want {
			bs.invalid(CodeTargetNotQualified, "", paths[1], tgt, "%s target %q is not the qualified value %q", c, tgt, want)
		}
		same = same && cur == tgt
	}
	if same {
		bs.forbid(CodeNoChange, "", field.NewPath("--target-kernel"), "the current tuple already equals the target: at least one kernel, RKE2, driver, GPU Operator, or DCGM exporter target must change")
	}
	upgradeCheckVersions(&bs, req.Current, req.Target)
	if rec.Source != nil && !SameTuple(req.Current, *rec.Source) {
		bs.forbid(CodeSourceMismatch, "", field.NewPath("--current-kernel"), "the current tuple does not match record %s's source: %s", rec.ID, strings.Join(tupleDiff(req.Current, *rec.Source), ", "))
	}
	d.Blockers = bs
	d.Allowed = len(bs) == 0
	return d
}

// freshnessLimits denies on limits a caller failed to validate, so a zero
// or oversize maximum age never silently means the default or "forever".
func freshnessLimits(bs *blockers, f qualification.Freshness) {
	for _, e := range qualification.ValidateFreshness(f.MaxAge, f.ClockSkew, nil) {
		code, path := CodeEvidenceStale, pathMaxCanaryAge
		if e.Field == "clockSkew" {
			code, path = CodeEvidenceFromFuture, pathClockSkew
		}
		bs.invalid(code, "", path, e.BadValue, "%s; got %v, so the freshness of the canary evidence cannot be judged", e.Detail, e.BadValue)
	}
}

func recordInfo(rec *qualification.Record, configMap string, maxAge time.Duration) *RecordInfo {
	info := &RecordInfo{ConfigMap: configMap, ID: rec.ID, SourceRevision: strings.ToLower(rec.SourceRevision), ApprovedBy: rec.ApprovedBy, CompletedAt: rec.Canary.CompletedAt}
	if exp, err := rec.Expiry(maxAge); err == nil {
		info.Expires = exp.UTC().Format(time.RFC3339)
	}
	return info
}

// hardwareRules: the requested PCI identities must be well formed, distinct,
// and equal the record's set (a subset is not a match).
func hardwareRules(bs *blockers, rec *qualification.Record, ids []string) {
	if len(ids) == 0 {
		bs.add(CodeHardwareUnknown, "", field.Required(pathPCIID, "at least one hardware identity is required"))
		return
	}
	var got []string
	for i, raw := range ids {
		id := strings.ToLower(strings.TrimSpace(raw))
		_, _, ok := parsePCIID(id)
		switch {
		case !ok:
			bs.invalid(CodeHardwareUnknown, "", pathPCIID.Index(i), raw, "hardware %q must be vendor:device/subvendor:subdevice, e.g. 10de:1db6/10de:124a", raw)
		case slices.Contains(got, id):
			e := field.Duplicate(pathPCIID.Index(i), raw)
			e.Detail = fmt.Sprintf("hardware %q is duplicated (IDs compare case-insensitively); give each GPU identity once", raw)
			bs.add(CodeHardwareUnknown, "", e)
		default:
			got = append(got, id)
		}
	}
	slices.Sort(got)
	if want := rec.NormalizedHardware(); len(got) > 0 && !slices.Equal(got, want) {
		bs.forbid(CodeHardwareNotQualified, "", pathPCIID, "hardware tuple mismatch: requested %s, qualified %s", strings.Join(got, ","), quoteOrNone(strings.Join(want, ",")))
	}
}

// parsePCIID checks vendor:device/subvendor:subdevice.
func parsePCIID(id string) (vendor, device string, ok bool) {
	if len(id) != 19 || id[4] != ':' || id[9] != '/' || id[14] != ':' {
		return "", "", false
	}
	for _, p := range []string{id[0:4], id[5:9], id[10:14], id[15:19]} {
		if !isHex(p) {
			return "", "", false
		}
	}
	return id[0:4], id[5:9], true
}

// upgradeCheckVersions: RKE2 never downgrades nor skips a minor; the other
// components never move back without a proven rollback.
func upgradeCheckVersions(bs *blockers, cur, tgt qualification.Tuple) {
	var rke2 [2]RKE2Version
	ok := true
	for i, v := range []string{cur.RKE2, tgt.RKE2} {
		p := flagPath[ComponentRKE2][i]
		if !anchorRKE2.MatchString(v) {
			bs.invalid(CodeVersionInvalid, "", p, v, "RKE2 versions must use v1.MINOR.PATCH+rke2rREV, got %q", v)
			ok = false
			continue
		}
		var err error
		if rke2[i], err = ParseRKE2(v); err != nil {
			bs.invalid(CodeVersionInvalid, "", p, v, "%v", err)
			ok = false
		}
	}
	if ok {
		cr, tr := rke2[0], rke2[1]
		if tr.Compare(cr) < 0 {
			bs.invalid(CodeRKE2Downgrade, "", flagPath[ComponentRKE2][1], tgt.RKE2, "RKE2 downgrade is not allowed (%s to %s); RKE2 cannot be downgraded: restore from an etcd snapshot instead", cur.RKE2, tgt.RKE2)
		}
		if tr.Major == cr.Major && tr.Minor > cr.Minor+1 {
			bs.invalid(CodeMinorSkip, "", flagPath[ComponentRKE2][1], tgt.RKE2, "RKE2 upgrade cannot skip a Kubernetes minor (1.%d to 1.%d); upgrade one minor at a time (next: 1.%d)", cr.Minor, tr.Minor, cr.Minor+1)
		}
	}
	for _, c := range []Component{ComponentKernel, ComponentDriver, ComponentGPUOperator, ComponentDCGMExporter} {
		have, want := TupleValue(cur, c), TupleValue(tgt, c)
		if strings.TrimSpace(have) == "" || strings.TrimSpace(want) == "" {
			continue // already reported as required
		}
		// Two valid values with no order (other kernel flavour, a digest
		// against a tag) pass, as in the anchor: the target is still held
		// to the record byte for byte.
		cmp, err := CompareComponent(c, want, have)
		var verr *VersionError
		switch {
		case errors.As(err, &verr):
			p := flagPath[c][1]
			if verr.Value == have {
				p = flagPath[c][0]
			}
			bs.invalid(CodeVersionInvalid, "", p, verr.Value, "%v", err)
		case err == nil && cmp < 0:
			bs.invalid(CodeComponentDowngrade, "", flagPath[c][1], want, "%s %s to %s is a downgrade, which upgrade-check never allows; a rollback must be a proven rollback: a Plan annotated %s=true under a %s record whose source is the older tuple and rollbackPassed is true (check it with gpu-upgrade-gate check)", c, have, want, AnnotationRollback, qualification.APIVersionGate)
		}
	}
}

// ValidateRecord lints one record for a review pipeline: every load
// problem, every Check problem (freshness included, so a stale record fails
// the lint), and every target or source value that does not parse as a
// version of its component. Each blocker's field is the record path it is
// about; load problems carry their line in the message instead.
func ValidateRecord(entry RecordEntry, f qualification.Freshness) Decision {
	d := Decision{Object: "record"}
	var bs blockers
	freshnessLimits(&bs, f)
	if entry.Err != nil || entry.Record == nil {
		var le *qualification.LoadError
		switch {
		case errors.As(entry.Err, &le):
			for _, p := range le.Problems {
				bs.add(CodeRecordInvalid, "", &field.Error{Type: field.ErrorTypeInvalid, Detail: p})
			}
		case entry.Err != nil:
			bs.add(CodeRecordInvalid, "", &field.Error{Type: field.ErrorTypeInvalid, Detail: entry.Err.Error()})
		default:
			bs.add(CodeRecordInvalid, "", field.Required(field.NewPath("record"), "no record was given"))
		}
		d.Blockers = bs
		return d
	}
	rec := entry.Record
	d.Object = "record " + rec.ID
	d.Record = recordInfo(rec, "", f.MaxAge)
	for _, p := range qualification.Check(rec, f) {
		bs.add(problemCodes[p.Kind], "", p.Err)
	}
	for _, e := range recordVersionErrors(rec) {
		bs.add(CodeVersionInvalid, "", field.Invalid(field.NewPath(e.field), e.value, e.err.Error()))
	}
	d.Blockers = bs
	d.Allowed = len(bs) == 0
	return d
}
