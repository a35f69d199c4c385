// Package benchcpu reports a benchmark's CPU time per operation beside its
// wall time. The machine the benchmarks run on is shared: with more runnable
// threads than cores, ns/op counts the time spent waiting for a core, while
// the process's CPU time (every thread, the garbage collector's included)
// counts the work itself, so before/after figures compare across load.
package benchcpu

import (
	"syscall"
	"testing"
	"time"
)

// Meter is a running CPU time measurement.
type Meter struct {
	b     *testing.B
	start time.Duration
}

// Start begins measuring; call it just before the benchmark loop.
func Start(b *testing.B) *Meter { return &Meter{b: b, start: used()} }

// Stop reports cpu-ns/op; call it just after the loop.
func (m *Meter) Stop() {
	if m.b.N > 0 {
		m.b.ReportMetric(float64(used()-m.start)/float64(m.b.N), "cpu-ns/op")
	}
}

// used is the process's user and system CPU time so far.
func used() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
