package gate

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// TestSUCStepOutsideWindow: SUC holds a Plan to its own spec.window only;
// with maintenance windows configured, the start of a GPU node's Job is
// held to them too. testNow is Saturday 12:00 UTC.
func TestSUCStepOutsideWindow(t *testing.T) {
	berlin := func(days []upgradev1.Day, start, end string) upgradev1.TimeWindowSpec {
		return upgradev1.TimeWindowSpec{Days: days, StartTime: start, EndTime: end, TimeZone: "Europe/Berlin"}
	}
	sundayNight := berlin([]upgradev1.Day{"su"}, "02:00", "06:00")
	cases := []struct {
		name    string
		windows []upgradev1.TimeWindowSpec
		mutate  func(*stepScenario)
		want    []Code
		msg     string
	}{
		{name: "no window configured: the Plan's own window (24/7) decides"},
		{name: "inside a configured window (13:00 in Berlin)", windows: []upgradev1.TimeWindowSpec{sundayNight, berlin([]upgradev1.Day{"sa"}, "12:00", "14:00")}},
		{name: "OutsideWindow: the Plan's window is 24/7, every configured window is closed", windows: []upgradev1.TimeWindowSpec{sundayNight},
			want: []Code{CodeOutsideWindow},
			msg:  "Plan system-upgrade/gpu-v100-canary: [OutsideWindow] node gpu-v100-01's upgrade (SUC's Job) would start at 2026-11-21T12:00:00Z, outside every maintenance window in the gate's config (windows.maintenance); the next opens at Sun 2026-11-22 02:00 CET, time zone Europe/Berlin (windows.maintenance[0]: su 02:00-06:00 Europe/Berlin); retry then (SUC retries on its own"},
		{name: "a rollback Plan's Job is held to the windows too", windows: []upgradev1.TimeWindowSpec{sundayNight},
			mutate: func(s *stepScenario) { s.req.Plan.Annotations[AnnotationRollback] = "true" }, want: []Code{CodeOutsideWindow}},
		{name: "a CPU node's Job is not judged", windows: []upgradev1.TimeWindowSpec{sundayNight}, mutate: func(s *stepScenario) {
			s.node = s.scenario.node("cpu-01")
			s.req.Plan = canaryPlan("cpu-01")
			s.req.Plan.Annotations = nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeStep(t)
			s.cfg.Windows.Maintenance = tc.windows
			if tc.mutate != nil {
				tc.mutate(s)
			}
			d := s.decide(nil)
			assert.Equal(t, tc.want, windowCodes(d), d.Message())
			assert.Contains(t, d.Message(), tc.msg)
		})
	}
}

// windowCodes are the decision's OutsideWindow codes (a rollback Plan's
// step has other business of its own).
func windowCodes(d Decision) []Code {
	var out []Code
	for _, c := range d.Codes() {
		if c == CodeOutsideWindow {
			out = append(out, c)
		}
	}
	return out
}

// TestPlanWindowWarning: a GPU Plan whose window is open while every
// configured window is closed is admitted with a warning (the Job guard
// holds its nodes); one within the configured windows is not warned.
func TestPlanWindowWarning(t *testing.T) {
	weekendNights := upgradev1.TimeWindowSpec{Days: []upgradev1.Day{"sa", "su"}, StartTime: "02:00", EndTime: "06:00", TimeZone: "Europe/Berlin"}
	cases := []struct {
		name       string
		configured []upgradev1.TimeWindowSpec
		plan       *upgradev1.TimeWindowSpec
		warn       string
	}{
		{name: "24/7 under weekend nights", configured: []upgradev1.TimeWindowSpec{weekendNights}, plan: openWindow(),
			warn: "spec.window (0,1,2,3,4,5,6 00:00-23:59:59 UTC) is open at Sat 2026-11-21 12:00 UTC, outside every maintenance window in the gate's config (windows.maintenance)"},
		{name: "opens an hour before the configured window", configured: []upgradev1.TimeWindowSpec{weekendNights},
			plan: &upgradev1.TimeWindowSpec{Days: []upgradev1.Day{"su"}, StartTime: "01:00", EndTime: "05:00", TimeZone: "Europe/Berlin"}, warn: "is open at Sun 2026-11-22 01:00 CET"},
		{name: "the configured window itself: no warning", configured: []upgradev1.TimeWindowSpec{weekendNights}, plan: &weekendNights},
		{name: "inside it, in another time zone: no warning", configured: []upgradev1.TimeWindowSpec{weekendNights},
			plan: &upgradev1.TimeWindowSpec{Days: []upgradev1.Day{"su"}, StartTime: "02:00", EndTime: "04:00", TimeZone: "UTC"}},
		{name: "no window configured: no warning", plan: openWindow()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			s.cfg.Windows.Maintenance = tc.configured
			s.req.Plan.Spec.Window = tc.plan
			d := s.decide()
			assert.True(t, d.Allowed, d.Message())
			var got []string
			for _, w := range d.Warnings {
				if strings.Contains(w, "spec.window") {
					got = append(got, w)
				}
			}
			if tc.warn == "" {
				assert.Empty(t, got)
				return
			}
			if assert.Len(t, got, 1) {
				assert.Contains(t, got[0], tc.warn)
				assert.Contains(t, got[0], "the gate holds each GPU node's Job until a configured window opens (OutsideWindow)")
			}
		})
	}
}
