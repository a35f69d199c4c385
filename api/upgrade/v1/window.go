package v1

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// SUC reads spec.window with kured's timewindow package (v1.13.1,
// pkg/timewindow; SUC v0.20.1 pkg/apis/upgrade.cattle.io/v1 Contains and
// pkg/upgrade/plan Validate): days by number or English name, a start and
// an end time in one of six layouts, a time zone name (empty means UTC).
// The same reading here, so a window the gate accepts is one SUC accepts and
// opens at the same instants.

// Days lists every spelling of a day SUC's CRD accepts, by weekday.
var Days = [7][]Day{
	{"0", "su", "sun", "sunday"}, {"1", "mo", "mon", "monday"}, {"2", "tu", "tue", "tuesday"},
	{"3", "we", "wed", "wednesday"}, {"4", "th", "thu", "thursday"}, {"5", "fr", "fri", "friday"},
	{"6", "sa", "sat", "saturday"},
}

// windowTimeLayouts are kured's, in its order.
var windowTimeLayouts = []string{"15:04", "15:04:05", "03:04pm", "15", "03pm", "3pm"}

// window is a parsed TimeWindowSpec.
type window struct {
	days       [7]bool
	loc        *time.Location
	start, end time.Time // clock times (year 0) in loc
}

// Validate reports every problem of the window as SUC's validation (and its
// CRD's enum and minItems on days) would, with the value seen and the form
// expected. "Local" is refused: it would mean the gate's zone here and SUC's
// there.
func (w *TimeWindowSpec) Validate(path *field.Path) field.ErrorList {
	_, errs := w.parse(path)
	return errs
}

func (w *TimeWindowSpec) parse(path *field.Path) (*window, field.ErrorList) {
	var errs field.ErrorList
	out := &window{}
	if len(w.Days) == 0 {
		errs = append(errs, field.Required(path.Child("days"), "at least one day, e.g. [sa, su] (0-6 or the English name, 2 or 3 letters, lower case)"))
	}
	for i, d := range w.Days {
		wd, ok := weekday(d)
		if !ok {
			errs = append(errs, field.Invalid(path.Child("days").Index(i), string(d), "expected a day: 0-6 (0 is Sunday) or su, sun, sunday, mo, ... in lower case"))
			continue
		}
		out.days[wd] = true
	}
	var err error
	switch {
	case w.TimeZone == "Local":
		errs = append(errs, field.Invalid(path.Child("timeZone"), w.TimeZone, "expected an IANA time zone name, e.g. Europe/Berlin or UTC (Local would mean SUC's zone in SUC and the gate's here)"))
	default:
		if out.loc, err = loadLocation(w.TimeZone); err != nil {
			errs = append(errs, field.Invalid(path.Child("timeZone"), w.TimeZone, "expected an IANA time zone name, e.g. Europe/Berlin or UTC (empty means UTC): "+err.Error()))
		}
	}
	loc := out.loc
	if loc == nil {
		loc = time.UTC
	}
	for _, t := range []struct {
		name string
		v    string
		dst  *time.Time
	}{{"startTime", w.StartTime, &out.start}, {"endTime", w.EndTime, &out.end}} {
		if *t.dst, err = parseWindowTime(t.v, loc); err != nil {
			errs = append(errs, field.Invalid(path.Child(t.name), t.v, "expected a time of day as 15:04, 15:04:05, 03:04pm, 15, 03pm or 3pm"))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

func weekday(d Day) (time.Weekday, bool) {
	for wd, spellings := range Days {
		if slices.Contains(spellings, d) {
			return time.Weekday(wd), true
		}
	}
	return 0, false
}

func parseWindowTime(s string, loc *time.Location) (time.Time, error) {
	for _, layout := range windowTimeLayouts {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("invalid time %q", s)
}

// Contains says whether t lies in the window, as SUC decides before it
// creates a Plan's first Jobs. An invalid window contains nothing (SUC
// refuses to run its Plan).
func (w *TimeWindowSpec) Contains(t time.Time) bool {
	p, errs := w.parse(nil)
	return len(errs) == 0 && p.contains(t)
}

// kured's rule: the weekday of t in the window's zone must be listed; a
// window whose start is after its end wraps to the day before when t is
// before the end, else to the next day; both ends included (the end to its
// last nanosecond).
func (p *window) contains(t time.Time) bool {
	l := t.In(p.loc)
	if !p.days[l.Weekday()] {
		return false
	}
	start := time.Date(l.Year(), l.Month(), l.Day(), p.start.Hour(), p.start.Minute(), p.start.Second(), 0, p.loc)
	end := time.Date(l.Year(), l.Month(), l.Day(), p.end.Hour(), p.end.Minute(), p.end.Second(), 1e9-1, p.loc)
	if p.start.After(p.end) {
		if l.Before(end) {
			start = start.Add(-24 * time.Hour)
		} else {
			end = end.Add(24 * time.Hour)
		}
	}
	return !l.Before(start) && !l.After(end)
}

// NextOpen is the first instant after t at which the window contains the
// time (false for an invalid window). It opens only at its start time on a
// listed day, or at midnight of a listed day while a wrapped window's end
// part runs, so those are the only candidates.
func (w *TimeWindowSpec) NextOpen(t time.Time) (time.Time, bool) {
	p, errs := w.parse(nil)
	if len(errs) > 0 {
		return time.Time{}, false
	}
	var best time.Time
	l := t.In(p.loc)
	for d := 0; d <= 8; d++ {
		day := time.Date(l.Year(), l.Month(), l.Day()+d, 0, 0, 0, 0, p.loc)
		for _, c := range []time.Time{day, time.Date(day.Year(), day.Month(), day.Day(), p.start.Hour(), p.start.Minute(), p.start.Second(), 0, p.loc)} {
			if c.After(t) && p.contains(c) && (best.IsZero() || c.Before(best)) {
				best = c
			}
		}
	}
	return best, !best.IsZero()
}

// String is the window as one line: "sa,su 02:00-06:00 Europe/Berlin".
func (w *TimeWindowSpec) String() string {
	days := make([]string, len(w.Days))
	for i, d := range w.Days {
		days[i] = string(d)
	}
	tz := w.TimeZone
	if tz == "" {
		tz = "UTC"
	}
	return strings.Join(days, ",") + " " + w.StartTime + "-" + w.EndTime + " " + tz
}

// AllDays is every weekday, for a window open all week.
func AllDays() []Day {
	out := make([]Day, 7)
	for i := range out {
		out[i] = Day(strconv.Itoa(i))
	}
	return out
}

// zones memoises time.LoadLocation, which reads and parses the zone's tzdata
// on every call (about 5% of a Node decision that judges a Plan's window);
// a *time.Location is immutable, so one is shared. Only names that loaded
// are kept, and valid zone names are a few hundred, so it stays small.
var zones sync.Map // name → *time.Location

func loadLocation(name string) (*time.Location, error) {
	if l, ok := zones.Load(name); ok {
		return l.(*time.Location), nil
	}
	l, err := time.LoadLocation(name)
	if err == nil {
		zones.Store(name, l)
	}
	return l, err
}
