package gate

import (
	"errors"
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
)

// UpgradeCheck answers the anchor CLI's upgrade-check: the same verdicts,
// and stricter where the design is (real booleans, unproven rollbacks).
func UpgradeCheck(req UpgradeCheckRequest) Decision {
	d := Decision{Object: "GPU upgrade of " + strings.Join(req.PCIIDs, ",")}
	var bs blockers
	if req.Record.Err != nil || req.Record.Record == nil {
		err := req.Record.Err
		if err == nil {
			err = errors.New("no record")
		}
		bs.add(CodeRecordInvalid, "", field.Invalid(pathQualification, "", err.Error()))
		d.Blockers = bs
		return d
	}
	rec := req.Record.Record
	d.Record = &RecordInfo{ID: rec.ID, SourceRevision: strings.ToLower(rec.SourceRevision), ApprovedBy: rec.ApprovedBy, CompletedAt: rec.Canary.CompletedAt}
	if exp, err := rec.Expiry(req.Freshness.MaxAge); err == nil {
		d.Record.Expires = exp.UTC().Format(time.RFC3339)
	}
	for _, p := range qualification.Check(rec, req.Freshness) {
		bs.invalid(problemCodes[p.Kind], "", pathQualification, rec.ID, "record %s: %s", rec.ID, p.Err.Error())
	}
	hardwareRules(&bs, rec, req.PCIIDs)

	same := true
	for _, c := range Components {
		cur, tgt, want := TupleValue(req.Current, c), TupleValue(req.Target, c), TupleValue(rec.Target, c)
		paths := flagPath[c]
		if strings.TrimSpace(cur) == "" || strings.TrimSpace(tgt) == "" {
			bs.add(CodeFactsMissing, "", field.Required(paths[0], string(c)+" current and target values are required"))
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
			bs.add(CodeHardwareUnknown, "", field.Duplicate(pathPCIID.Index(i), raw))
		default:
			got = append(got, id)
		}
	}
	slices.Sort(got)
	if want := rec.NormalizedHardware(); len(got) > 0 && !slices.Equal(got, want) {
		bs.forbid(CodeHardwareNotQualified, "", pathPCIID, "hardware tuple mismatch: requested %s, qualified %s", strings.Join(got, ","), strings.Join(want, ","))
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
	cr, cerr := ParseRKE2(cur.RKE2)
	tr, terr := ParseRKE2(tgt.RKE2)
	for _, e := range []struct {
		err  error
		path *field.Path
		v    string
	}{{cerr, flagPath[ComponentRKE2][0], cur.RKE2}, {terr, flagPath[ComponentRKE2][1], tgt.RKE2}} {
		if e.err != nil {
			bs.invalid(CodeVersionInvalid, "", e.path, e.v, "%v", e.err)
		}
	}
	if cerr == nil && terr == nil {
		if tr.Compare(cr) < 0 {
			bs.invalid(CodeRKE2Downgrade, "", flagPath[ComponentRKE2][1], tgt.RKE2, "RKE2 downgrade is not allowed (%s to %s)", cur.RKE2, tgt.RKE2)
		}
		if tr.Major == cr.Major && tr.Minor > cr.Minor+1 {
			bs.invalid(CodeMinorSkip, "", flagPath[ComponentRKE2][1], tgt.RKE2, "RKE2 upgrade cannot skip a Kubernetes minor (1.%d to 1.%d)", cr.Minor, tr.Minor)
		}
	}
	for _, c := range []Component{ComponentKernel, ComponentDriver, ComponentGPUOperator, ComponentDCGMExporter} {
		have, want := TupleValue(cur, c), TupleValue(tgt, c)
		if strings.TrimSpace(have) == "" || strings.TrimSpace(want) == "" {
			continue // already reported as required
		}
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
			bs.invalid(CodeComponentDowngrade, "", flagPath[c][1], want, "%s %s to %s is a downgrade; a rollback must be a proven rollback (record with source and rollbackPassed, applied as a Plan)", c, have, want)
		}
	}
}
