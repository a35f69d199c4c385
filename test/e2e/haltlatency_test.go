//go:build e2e

package e2e

import (
	"os"
	"strings"
	"testing"
	"time"
)

// haltLatency logs (never asserts: speed is measured, not tested) how long
// after a failure signal a review was first refused with RolloutHalted and
// the halt record first held the halt, polling both every 10 ms for up to
// 60 s; signal is when the test wrote the signal (the Job's Failed status).
func haltLatency(t *testing.T, signal time.Time, interval time.Duration, refused, recorded func() bool) {
	t.Helper()
	var refusedAt, recordedAt time.Time
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && (refusedAt.IsZero() || recordedAt.IsZero()); time.Sleep(10 * time.Millisecond) {
		if refusedAt.IsZero() && refused() {
			refusedAt = time.Now()
		}
		if recordedAt.IsZero() && recorded() {
			recordedAt = time.Now()
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	since := func(at time.Time) string {
		if at.IsZero() {
			return "not within 60s"
		}
		return at.Sub(signal).Round(time.Millisecond).String()
	}
	t.Logf("halt latency: signal (Job Failed written) to the first RolloutHalted refusal %s, to the halt record holding it %s (halt loop every %s; load %s)",
		since(refusedAt), since(recordedAt), interval, strings.Join(strings.Fields(string(load))[:3], " "))
}
