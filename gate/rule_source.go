package gate

import (
	"strings"
)

// sourceRule: a record with a source tuple proves the move only from that
// tuple. A node already at the destination makes no move.
func sourceRule(t *Transition, f *findings) {
	if !t.factsOK || t.From == nil || t.atDestination() || SameTuple(t.Current, *t.From) {
		return
	}
	f.add(sourceMismatch(t))
}

// sourceMismatch builds every SourceMismatch blocker.
func sourceMismatch(t *Transition) Blocker {
	diff := strings.Join(tupleDiff(t.Current, *t.From, false), ", ")
	subject := "node " + t.Node.Name + " does not run"
	if t.Typed {
		subject = "the current tuple is not"
	}
	return forbidden(CodeSourceMismatch, t.Node.Name, t.Path, "%s record %s's source tuple: %s; upgrade it to the source tuple first, or use a record whose source it runs", subject, t.Record.ID, diff)
}
