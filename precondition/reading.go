package precondition

import (
	"fmt"
	"time"
)

// State is a precondition's state as judged.
type State string

const (
	// Holds: read, and healthy.
	Holds State = "holds"
	// Fails: read, and not healthy (the expression returned false, or a
	// matching alert fires).
	Fails State = "fails"
	// Unknown: it could not be judged (the objects cannot be read, the
	// expression failed or ran out of budget, the source's answer was not
	// understood). Fails closed.
	Unknown State = "unknown"
	// Stale: an alerts source not read successfully within maxAge (or not
	// yet). Fails closed.
	Stale State = "stale"
)

// States lists every state, for metrics.
var States = []State{Holds, Fails, Unknown, Stale}

// Reading is one precondition as the adapter read it: the fact the rules
// judge.
type Reading struct {
	Precondition Precondition
	// State is Holds, Fails or Unknown as read; an alerts reading's age is
	// judged at the review's time (At).
	State State
	// Seen says what was read, with the values (e.g. "2 objects; the
	// expression returned false", "alert CephHealthError (active since
	// ...)"), or why it could not be judged.
	Seen string
	// ReadAt (alerts) is when the source last answered in full; zero:
	// never.
	ReadAt time.Time
	// LastErr (alerts) is why the latest read failed, if it did: the
	// reading of ReadAt still counts until it is older than maxAge.
	LastErr error
}

// At judges the reading at now: an alerts reading older than its maxAge
// (or never read) is Stale, whatever it said.
func (r Reading) At(now time.Time) (State, string) {
	if r.Precondition.Kind == KindAlerts && r.Precondition.Alerts != nil {
		maxAge := r.Precondition.Alerts.Age()
		last := ""
		if r.LastErr != nil {
			last = "; the latest read failed: " + r.LastErr.Error()
		}
		switch {
		case r.ReadAt.IsZero():
			return Stale, fmt.Sprintf("%s has not been read successfully yet%s", r.Precondition.Alerts.URL, last)
		case now.Sub(r.ReadAt) > maxAge:
			return Stale, fmt.Sprintf("%s was last read successfully at %s, %s ago, beyond maxAge %s%s", r.Precondition.Alerts.URL,
				r.ReadAt.UTC().Format(time.RFC3339), now.Sub(r.ReadAt).Round(time.Second), maxAge, last)
		}
	}
	if r.State == "" {
		return Unknown, "not read"
	}
	return r.State, r.Seen
}

// ReadCEL evaluates a cel precondition over its objects (each as its JSON
// map; listErr: why they could not be listed) within budget, the runtime
// cost left of this round; it returns the reading and the budget left. No
// object is Unknown unless the precondition allows an empty set.
func ReadCEL(p Precondition, prog *Program, objects []any, listErr error, budget int64) (Reading, int64) {
	r := Reading{Precondition: p, State: Unknown}
	switch {
	case listErr != nil:
		r.Seen = "its objects cannot be read (" + listErr.Error() + ")"
	case prog == nil:
		r.Seen = "its expression is not compiled"
	case len(objects) == 0 && (p.CEL == nil || !p.CEL.AllowEmpty):
		// objects.all(...) holds over none: an empty set is judged only
		// where the config says it may be empty.
		r.Seen = "no objects matched " + where(p) + " (set cel.allowEmpty: true if none is healthy)"
	default:
		ok, left, err := prog.Eval(objects, budget)
		budget = left
		switch {
		case err != nil:
			r.Seen = fmt.Sprintf("the expression failed over %d object(s): %v", len(objects), err)
		case ok:
			r.State, r.Seen = Holds, fmt.Sprintf("the expression returned true over %d object(s)", len(objects))
		default:
			r.State, r.Seen = Fails, fmt.Sprintf("the expression returned false over %d object(s)", len(objects))
		}
	}
	return r, budget
}

// ReadCELs reads every cel precondition of list, each at its index (nil for
// the others), within one runtime budget (RuntimeBudget, as
// ValidatingAdmissionPolicy's for its expressions together): the one
// reading of the webhook's watches and of inventory's live read. read gives
// precondition i's compiled expression and its objects (each as its JSON
// map), or why they cannot be read.
func ReadCELs(list []Precondition, read func(i int) (prog *Program, objects []any, err error)) []*Reading {
	out := make([]*Reading, len(list))
	budget := int64(RuntimeBudget)
	for i, p := range list {
		if p.Kind != KindCEL || p.CEL == nil {
			continue
		}
		prog, objects, err := read(i)
		var r Reading
		r, budget = ReadCEL(p, prog, objects, err, budget)
		out[i] = &r
	}
	return out
}

// where names what a cel precondition reads.
func where(p Precondition) string {
	if p.CEL == nil {
		return "its objects"
	}
	return p.CEL.Where()
}

// ReadAlerts is one poll of an alerts precondition at `at`: the source's
// answer (body) or why it failed (err). A failed poll keeps what the last
// successful one read (prev), which counts until it is older than maxAge.
func ReadAlerts(p Precondition, prev Reading, body []byte, err error, at time.Time) Reading {
	if err == nil {
		var alerts []Alert
		if alerts, err = ParseAlerts(body, IsAlertmanager(p.Alerts.URL)); err == nil {
			r := Reading{Precondition: p, State: Holds, ReadAt: at, Seen: fmt.Sprintf("no firing alert matches %s", p.Alerts.Matcher())}
			if firing := p.Alerts.Match(alerts); len(firing) > 0 {
				r.State, r.Seen = Fails, fmt.Sprintf("%d firing alert(s) match %s: %s", len(firing), p.Alerts.Matcher(), alertList(firing))
			}
			return r
		}
	}
	prev.Precondition, prev.LastErr = p, err
	return prev
}

// alertList names up to 3 alerts.
func alertList(as []Alert) string {
	var s string
	for i, a := range as {
		if i == 3 {
			return s + fmt.Sprintf(" and %d more", len(as)-3)
		}
		if i > 0 {
			s += ", "
		}
		s += a.String()
	}
	return s
}
