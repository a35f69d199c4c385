package gate

import (
	"errors"
	"slices"
	"strings"

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

// FlagPaths are upgrade-check's --current-* and --target-* flags, from the
// component table.
func FlagPaths() (current, target map[Component]*field.Path) {
	current, target = map[Component]*field.Path{}, map[Component]*field.Path{}
	for _, s := range componentTable {
		current[s.Name] = field.NewPath("--current-" + s.Flag)
		target[s.Name] = field.NewPath("--target-" + s.Flag)
	}
	return current, target
}

var (
	pathPCIID         = field.NewPath("--pci-id")
	pathQualification = field.NewPath("--qualification")
	pathMaxCanaryAge  = field.NewPath("--max-canary-age")
	pathClockSkew     = field.NewPath("--clock-skew")
)

// UpgradeCheck answers the anchor CLI's upgrade-check: one typed transition
// judged by the rule table, with the anchor's verdicts and stricter where
// the design is (real booleans, bounded id and maximum age, no rollback,
// values that must parse as versions). req.Freshness must hold valid limits
// (qualification.ValidateFreshness); invalid ones deny rather than fall back
// to a default.
func UpgradeCheck(req UpgradeCheckRequest) Decision {
	d := Decision{Object: "GPU upgrade of " + strings.Join(req.PCIIDs, ",")}
	r := &upgradeCheckReview{req: req}
	r.kinds = kindsUpgradeCheck
	if rec := req.Record.Record; req.Record.Err == nil && rec != nil {
		cur, tgt := FlagPaths()
		after := req.Target
		var scratch findings // typedHardwareRule reports them
		t := newTransition(nil, NodeFacts{Identities: typedHardware(&scratch, req.PCIIDs)}, req.Current, rec, false)
		t.After, t.Typed = &after, true
		t.Path, t.RecordPath, t.CurrentPath, t.AfterPath = cur[ComponentKernel], pathQualification, cur, tgt
		t.Dest = &rec.Target // typed values are checked against the target, never a source
		r.ts = []*Transition{t}
	}
	var f findings
	applyTable(r, &f, &d)
	f.settle(&d)
	if r.stopped {
		d.Allowed = false
	}
	return d
}

// upgradeCheckReview is upgrade-check's one typed transition.
type upgradeCheckReview struct {
	reviewBase
	req UpgradeCheckRequest
}

// recordRules (the record and evidence rows): the limits, the load (a
// record that does not load ends the check), every record problem.
func (r *upgradeCheckReview) recordRules(f *findings, d *Decision) {
	req := r.req
	freshnessLimits(f, req.Freshness)
	if req.Record.Err != nil || req.Record.Record == nil {
		err := req.Record.Err
		if err == nil {
			err = errors.New("no record")
		}
		for _, b := range recordInvalid(badRecord{where: pathQualification, what: "the record", err: err}) {
			f.add(b)
		}
		r.stop()
		return
	}
	rec := req.Record.Record
	d.Record = recordInfo(rec, "", req.Freshness.MaxAge)
	for _, p := range recordProblems(rec, req.Freshness, r.versions()) {
		f.add(recordProblem(p, pathQualification, rec.ID, rec.ID))
	}
}

// typedHardware reads --pci-id: well formed and distinct; it returns the
// valid identities, sorted.
func typedHardware(f *findings, ids []string) []string {
	if len(ids) == 0 {
		f.add(hardwareUnknown("", pathPCIID, "", hwNoneGiven))
		return nil
	}
	var got []string
	for i, raw := range ids {
		id := strings.ToLower(strings.TrimSpace(raw))
		switch {
		case !isPCIID(id):
			f.add(hardwareUnknown("", pathPCIID.Index(i), raw, hwMalformed))
		case slices.Contains(got, id):
			f.add(hardwareUnknown("", pathPCIID.Index(i), raw, hwDuplicate))
		default:
			got = append(got, id)
		}
	}
	slices.Sort(got)
	return got
}

// isPCIID checks vendor:device/subvendor:subdevice.
func isPCIID(id string) bool {
	if len(id) != 19 || id[4] != ':' || id[9] != '/' || id[14] != ':' {
		return false
	}
	for _, p := range []string{id[0:4], id[5:9], id[10:14], id[15:19]} {
		if !isHex(p) {
			return false
		}
	}
	return true
}
