package gate

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// Maintenance windows (issue 12 item 5). SUC enforces a Plan's own
// spec.window (it creates no Job for a Plan outside it, and lets nodes
// already applying finish), so a GPU Plan must carry a valid one. The GPU
// Operator has no window of its own, so the gate holds the driver path and
// its per-node step to the configured windows. Only a webhook can: a
// ValidatingAdmissionPolicy has no clock.

// WindowsConfig is the `windows` section of the config.
type WindowsConfig struct {
	// RequirePlanWindow: a GPU Plan must carry spec.window.
	RequirePlanWindow bool `json:"requirePlanWindow"`
	// Maintenance are the windows the driver path may start reloads in,
	// SUC's shape; none means the driver path is not held to a time.
	Maintenance []upgradev1.TimeWindowSpec `json:"maintenance,omitempty"`
}

// DefaultWindowsConfig: Plans need a window; no driver window configured.
func DefaultWindowsConfig() WindowsConfig { return WindowsConfig{RequirePlanWindow: true} }

func (w *WindowsConfig) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range w.Maintenance {
		errs = append(errs, w.Maintenance[i].Validate(path.Child("maintenance").Index(i))...)
	}
	return errs
}

var pathWindow = field.NewPath("spec", "window")

// windowRule (review-level, Plans): a GPU Plan carries a window SUC accepts.
func (r *PlanReview) windowRule(f *findings) {
	w := r.req.Plan.Spec.Window
	if w == nil {
		if r.cfg.Windows.RequirePlanWindow {
			f.add(windowInvalid(field.Required(pathWindow, "")))
		}
		return
	}
	for _, e := range w.Validate(pathWindow) {
		f.add(windowInvalid(e))
	}
}

// outsideWindowRule (review-level, driver path and its per-node step): the
// reload starts inside a configured maintenance window.
func (c *Config) outsideWindowRule(f *findings, now time.Time, node string, path *field.Path) {
	ws := c.Windows.Maintenance
	if len(ws) == 0 {
		return
	}
	var next time.Time
	nextIdx := -1
	for i := range ws {
		if ws[i].Contains(now) {
			return
		}
		if t, ok := ws[i].NextOpen(now); ok && (nextIdx < 0 || t.Before(next)) {
			next, nextIdx = t, i
		}
	}
	f.add(outsideWindow(node, path, now, ws, nextIdx, next))
}

// windowInvalid builds every WindowInvalid blocker, from the window's
// field error (the value seen and the form expected).
func windowInvalid(e *field.Error) Blocker {
	if e.Type == field.ErrorTypeRequired && e.Field == pathWindow.String() {
		return required(CodeWindowInvalid, "", pathWindow, "a GPU Plan needs spec.window, so SUC starts its nodes only in a maintenance window; add one in SUC's form, e.g. {days: [sa, su], startTime: \"02:00\", endTime: \"06:00\", timeZone: Europe/Berlin} (or set windows.requirePlanWindow: false in the gate's config)")
	}
	if e.Type == field.ErrorTypeRequired {
		return required(CodeWindowInvalid, "", field.NewPath(e.Field), "%s is required: %s; SUC would refuse the Plan (Validated False) and run nothing", e.Field, e.Detail)
	}
	return invalid(CodeWindowInvalid, "", field.NewPath(e.Field), e.BadValue, "%s %q does not parse as SUC reads it: %s; fix it (SUC would refuse the Plan and run nothing)", e.Field, fmt.Sprint(e.BadValue), e.Detail)
}

// outsideWindow builds every OutsideWindow blocker.
func outsideWindow(node string, path *field.Path, now time.Time, ws []upgradev1.TimeWindowSpec, nextIdx int, next time.Time) Blocker {
	what := "no window opens within a week"
	if nextIdx >= 0 {
		w := ws[nextIdx]
		what = fmt.Sprintf("the next opens at %s, time zone %s (windows.maintenance[%d]: %s)", next.Format("Mon 2006-01-02 15:04 MST"), next.Location(), nextIdx, w.String())
	}
	act := "the change would start driver reloads"
	if node != "" {
		act = "node " + node + "'s driver reload would start"
	}
	return forbidden(CodeOutsideWindow, node, path, "%s at %s, outside every maintenance window in the gate's config (windows.maintenance); %s; retry then (the GPU Operator retries a refused step on its own)", act, now.UTC().Format(time.RFC3339), what)
}
