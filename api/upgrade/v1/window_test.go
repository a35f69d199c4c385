package v1

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestWindowContains: the instants SUC (kured's timewindow) counts as
// inside a window, including the ends and a window that wraps past midnight.
func TestWindowContains(t *testing.T) {
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	berlinNight := &TimeWindowSpec{Days: []Day{"sa", "su"}, StartTime: "02:00", EndTime: "06:00", TimeZone: "Europe/Berlin"}
	wrap := &TimeWindowSpec{Days: []Day{"5"}, StartTime: "10pm", EndTime: "02", TimeZone: "UTC"}
	cases := []struct {
		name string
		w    *TimeWindowSpec
		t    string
		want bool
	}{
		{"start is inside", berlinNight, "2026-11-21T01:00:00Z", true}, // Sat 02:00 CET
		{"a second before the start", berlinNight, "2026-11-21T00:59:59Z", false},
		{"the end is inside", berlinNight, "2026-11-21T05:00:00Z", true},
		{"a second after the end", berlinNight, "2026-11-21T05:00:01Z", false},
		{"another day", berlinNight, "2026-11-20T02:00:00Z", false},
		{"the zone counts: 02:00 UTC is 03:00 in Berlin", berlinNight, "2026-11-22T02:00:00Z", true},
		{"summer time", berlinNight, "2026-07-04T00:30:00Z", true}, // Sat 02:30 CEST
		{"a wrapped window on its day, late", wrap, "2026-11-20T23:00:00Z", true},
		{"a wrapped window on its day, early (kured wraps to the day before)", wrap, "2026-11-20T01:00:00Z", true},
		{"a wrapped window past midnight into an unlisted day", wrap, "2026-11-21T01:00:00Z", false},
		{"an invalid window contains nothing", &TimeWindowSpec{Days: []Day{"sa"}, StartTime: "x", EndTime: "06:00"}, "2026-11-21T03:00:00Z", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.w.Contains(at(tc.t)))
		})
	}
}

func TestWindowNextOpen(t *testing.T) {
	cases := []struct {
		name, from, want string
		w                *TimeWindowSpec
	}{
		{"later the same day", "2026-11-21T00:00:00Z", "2026-11-21T02:00:00+01:00", &TimeWindowSpec{Days: []Day{"sa"}, StartTime: "02:00", EndTime: "06:00", TimeZone: "Europe/Berlin"}},
		{"next week", "2026-11-21T06:00:00Z", "2026-11-28T02:00:00+01:00", &TimeWindowSpec{Days: []Day{"sa"}, StartTime: "02:00", EndTime: "06:00", TimeZone: "Europe/Berlin"}},
		{"a wrapped window opens at midnight of its day", "2026-11-19T12:00:00Z", "2026-11-20T00:00:00Z", &TimeWindowSpec{Days: []Day{"fr"}, StartTime: "22:00", EndTime: "02:00"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			from, _ := time.Parse(time.RFC3339, tc.from)
			want, _ := time.Parse(time.RFC3339, tc.want)
			got, ok := tc.w.NextOpen(from)
			require.True(t, ok)
			assert.True(t, want.Equal(got), "got %s, want %s", got, want)
			assert.True(t, tc.w.Contains(got))
			assert.False(t, tc.w.Contains(got.Add(-time.Second)))
		})
	}
	_, ok := (&TimeWindowSpec{Days: []Day{"sa"}, StartTime: "2:00"}).NextOpen(time.Now())
	assert.False(t, ok, "an invalid window never opens")
}

func TestWindowValidate(t *testing.T) {
	cases := []struct {
		name string
		w    TimeWindowSpec
		want []string // field: type
	}{
		{"every form SUC accepts", TimeWindowSpec{Days: []Day{"0", "mo", "tue", "wednesday"}, StartTime: "03:04pm", EndTime: "15:04:05", TimeZone: "America/New_York"}, nil},
		{"3pm and an hour alone", TimeWindowSpec{Days: []Day{"sa"}, StartTime: "3pm", EndTime: "23"}, nil},
		{"no days", TimeWindowSpec{StartTime: "02:00", EndTime: "03:00"}, []string{"w.days: Required value"}},
		{"a day out of range, an upper-case day", TimeWindowSpec{Days: []Day{"7", "Mon"}, StartTime: "02:00", EndTime: "03:00"}, []string{"w.days[0]: Invalid value", "w.days[1]: Invalid value"}},
		{"no times", TimeWindowSpec{Days: []Day{"sa"}}, []string{"w.startTime: Invalid value", "w.endTime: Invalid value"}},
		{"Local", TimeWindowSpec{Days: []Day{"sa"}, StartTime: "02:00", EndTime: "03:00", TimeZone: "Local"}, []string{"w.timeZone: Invalid value"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := tc.w.Validate(field.NewPath("w"))
			var got []string
			for _, e := range errs {
				got = append(got, e.Field+": "+e.Type.String())
			}
			assert.Equal(t, tc.want, got, errs.ToAggregate())
		})
	}
}
