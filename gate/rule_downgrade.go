package gate

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// downgradeRule: a kernel, driver, GPU Operator or DCGM exporter older than
// the node's is a rollback, allowed only as a proven rollback.
func downgradeRule(t *Transition, f *findings) {
	dest := t.destination()
	if !t.factsOK || dest == nil || t.proven() {
		return
	}
	for i := range componentTable {
		s := &componentTable[i]
		have, want := s.Value(t.Current), s.Value(*dest)
		if !s.Ordered || s.Same(t.versions, have, want) {
			continue
		}
		// Two valid values with no order (another kernel flavour, a digest
		// against a tag) pass: the destination is still held to the record.
		if cmp, err := s.Compare(t.versions, want, have); err == nil && cmp < 0 {
			f.add(componentDowngrade(t, s, have, want, t.pathOf(t.AfterPath, s.Name, t.RecordPath)))
		}
	}
}

// componentDowngrade builds every ComponentDowngrade blocker.
func componentDowngrade(t *Transition, s *ComponentSpec, have, want string, path *field.Path) Blocker {
	if t.Typed {
		return invalid(CodeComponentDowngrade, "", path, want, "%s %s to %s is a downgrade, which upgrade-check never allows; a rollback must be a proven rollback: a Plan annotated %s=true under a %s record whose source is the older tuple and rollbackPassed is true (check it with gpu-upgrade-gate check)", s.Name, have, want, AnnotationRollback, qualification.APIVersionGate)
	}
	by := "the change moves it back to"
	if t.After == nil {
		by = "record " + t.Record.ID + " targets the older"
	}
	return invalid(CodeComponentDowngrade, t.Node.Name, path, want, "node %s runs %s %s%s and %s %s; a rollback is allowed only as a proven rollback (a %s record with source, rollbackPassed: true, and the object annotated %s=true)", t.Node.Name, s.Name, have, t.currentFrom(s.Name), by, want, qualification.APIVersionGate, AnnotationRollback)
}
