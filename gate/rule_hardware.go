package gate

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
)

// hardwareRule: the node's GPU identity set must be known and be exactly
// the record's (a subset is not a match).
func hardwareRule(t *Transition, f *findings) {
	ids := t.Node.Identities
	if len(ids) == 0 {
		if !t.Typed { // upgrade-check reports its --pci-id values itself
			f.add(hardwareUnknown(t.Node.Name, t.Path, "", hwNoLabel))
		}
		return
	}
	switch {
	case t.ByHardware && t.Record == nil:
		f.add(hardwareNotQualified(t, ids, nil))
	case t.Record != nil:
		want := t.recordHardware
		if want == nil {
			want = t.Record.NormalizedHardware()
		}
		if !slices.Equal(ids, want) {
			f.add(hardwareNotQualified(t, ids, want))
		}
	}
}

type hwProblem int

const (
	hwNoLabel   hwProblem = iota // a node without a subsystem-qualified identity label
	hwNoneGiven                  // upgrade-check without --pci-id
	hwMalformed                  // a --pci-id value of the wrong form
	hwDuplicate                  // a --pci-id value given twice
)

// typedHardwareRule (upgrade-check, the hardware row): --pci-id is well
// formed and distinct.
func typedHardwareRule(rv review, f *findings, _ *Decision) {
	if r, ok := rv.(*upgradeCheckReview); ok {
		typedHardware(f, r.req.PCIIDs)
	}
}

// hardwareUnknown builds every HardwareUnknown blocker.
func hardwareUnknown(node string, path *field.Path, value string, p hwProblem) Blocker {
	switch p {
	case hwNoneGiven:
		return required(CodeHardwareUnknown, node, path, "no hardware identity was given; pass --pci-id vendor:device/subvendor:subdevice for each GPU identity of the node")
	case hwMalformed:
		return invalid(CodeHardwareUnknown, node, path, value, "hardware %q must be vendor:device/subvendor:subdevice, e.g. 10de:1db6/10de:124a; fix the value", value)
	case hwDuplicate:
		e := field.Duplicate(path, value)
		e.Detail = fmt.Sprintf("hardware %q is duplicated (IDs compare case-insensitively); give each GPU identity once", value)
		return Blocker{Code: CodeHardwareUnknown, Node: node, Err: e}
	}
	return forbidden(CodeHardwareUnknown, node, path, "GPU node %s has no subsystem-qualified GPU identity label, so its hardware cannot be matched to a record; %s", node, nodeFeatureRuleDoc)
}

// hardwareNotQualified builds every HardwareNotQualified blocker; want nil
// means no named record covers the node (the driver path picks records by
// hardware).
func hardwareNotQualified(t *Transition, ids, want []string) Blocker {
	have := strings.Join(ids, ",")
	switch {
	case want == nil:
		return forbidden(CodeHardwareNotQualified, t.Node.Name, t.Path, "no record named in %s qualifies node %s's hardware %s; add a record for it (one per hardware identity)", AnnotationQualification, t.Node.Name, have)
	case t.Typed:
		return forbidden(CodeHardwareNotQualified, "", pathPCIID, "hardware tuple mismatch: requested %s, qualified %s (record %s); check the node's GPU identities, or use the record of that hardware", have, fleet.QuoteOrNone(strings.Join(want, ",")), t.Record.ID)
	}
	return forbidden(CodeHardwareNotQualified, t.Node.Name, t.Path, "node %s has GPU hardware %s but record %s qualifies %s; select only nodes of the qualified hardware, or qualify this hardware on its own canary", t.Node.Name, have, t.Record.ID, strings.Join(want, ","))
}
