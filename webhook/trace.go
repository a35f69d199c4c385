package webhook

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"
)

// reviewTrace times the phases of one review (issue 14: where the time a
// Plan create waits on the gate goes), written on the decision log line as
// phasesMs. It starts when the request reaches the webhook, before its body
// is read; each mark closes the phase since the previous one. A nil trace
// (a handler called without the server's wrapper) marks nothing.
type reviewTrace struct {
	mu     sync.Mutex
	last   time.Time
	phases []tracePhase
}

type tracePhase struct {
	name string
	took time.Duration
}

type traceKey struct{}

// withTrace starts a review's trace at now.
func withTrace(ctx context.Context, now time.Time) context.Context {
	return context.WithValue(ctx, traceKey{}, &reviewTrace{last: now, phases: make([]tracePhase, 0, 8)})
}

func traceOf(ctx context.Context) *reviewTrace {
	t, _ := ctx.Value(traceKey{}).(*reviewTrace)
	return t
}

// mark ends the phase name now.
func (t *reviewTrace) mark(name string) {
	if t == nil {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.phases = append(t.phases, tracePhase{name, now.Sub(t.last)})
	t.last = now
}

// timed runs f, one of several reads made at once, and records how long it
// took as phase name beside the sequence of marks.
func (t *reviewTrace) timed(name string, f func()) {
	start := time.Now()
	f()
	if t == nil {
		return
	}
	took := time.Since(start)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.phases = append(t.phases, tracePhase{name, took})
}

// String is "read=0.12 facts=0.30 ...", in milliseconds, in order.
func (t *reviewTrace) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	for i, p := range t.phases {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(p.name)
		b.WriteByte('=')
		b.WriteString(strconv.FormatFloat(float64(p.took.Microseconds())/1000, 'f', 2, 64))
	}
	return b.String()
}
