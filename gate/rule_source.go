package gate

import (
	"strings"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
)

// sourceRule: a record with a source tuple proves the move only from that
// tuple. A node already at the destination makes no move.
func sourceRule(t *Transition, f *findings) {
	if !t.factsOK || t.From == nil || t.atDestination() || fleet.SameTupleIn(t.versions, t.Current, *t.From) {
		return
	}
	f.add(sourceMismatch(t))
}

// sourceMismatch builds every SourceMismatch blocker.
func sourceMismatch(t *Transition) Blocker {
	diff := strings.Join(fleet.TupleDiff(t.versions, t.Current, *t.From, false), ", ") + t.currentFrom(Components...)
	if t.Typed {
		return forbidden(CodeSourceMismatch, t.Node.Name, t.Path, "the current tuple is not record %s's source tuple: %s; upgrade it to the source tuple first, or use a record whose source it runs", t.Record.ID, diff)
	}
	return forbidden(CodeSourceMismatch, t.Node.Name, t.Path, "node %s does not run record %s's source tuple: %s; upgrade it to the source tuple first, or use a record whose source it runs", t.Node.Name, t.Record.ID, diff)
}
