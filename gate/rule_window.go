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
// Operator has no window of its own, and a Plan's may be wider than the
// configured ones, so the gate holds the driver path, its per-node step and
// SUC's start of a GPU node's Job to the configured windows. Only a webhook can: a
// ValidatingAdmissionPolicy has no clock.

// WindowsConfig is the `windows` section of the config.
type WindowsConfig struct {
	// RequirePlanWindow: a GPU Plan must carry spec.window.
	RequirePlanWindow bool `json:"requirePlanWindow"`
	// Maintenance are the windows the driver path may start reloads in and
	// SUC may start a GPU node's Job in, SUC's shape; none means neither is
	// held to a time.
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

// windowRule (Plans): a GPU Plan carries a window SUC accepts.
func windowRule(rv review, f *findings, _ *Decision) {
	r, ok := rv.(*PlanReview)
	if !ok {
		return
	}
	w := r.req.Plan.Spec.Window
	if w == nil {
		if r.cfg.Windows.RequirePlanWindow {
			f.add(windowInvalid(field.Required(pathWindow, "")))
		}
		return
	}
	errs := w.Validate(pathWindow)
	for _, e := range errs {
		f.add(windowInvalid(e))
	}
	if len(errs) == 0 && r.write {
		r.planWindowWarning(f)
	}
}

// outsideWindowRule (review-level: the driver path and its per-node step,
// and SUC's start of a GPU node's Job): the step starts inside a configured
// maintenance window. SUC holds a Plan to its own spec.window only, which
// may be wider than the configured windows (24/7), so its starts are held
// to them too.
func (c *Config) outsideWindowRule(f *findings, step windowStep, now time.Time, node string, path *field.Path) {
	if nextIdx, next, open := c.Windows.next(now); !open {
		f.add(outsideWindow(step, node, path, now, c.Windows.Maintenance, nextIdx, next))
	}
}

// planWindowWarning (Plans): the early, friendly answer to the rule above.
// A GPU Plan whose window opens while every configured window is closed
// will have its nodes' starts held at the Job guard until one opens. Only
// the window's openings in the coming week are compared (a window that
// opens inside a configured one but outlasts it is not noticed here; the
// Job guard still holds it).
func (r *PlanReview) planWindowWarning(f *findings) {
	w := r.req.Plan.Spec.Window
	if len(r.cfg.Windows.Maintenance) == 0 {
		return
	}
	at, ok := r.req.Now, w.Contains(r.req.Now)
	if !ok {
		at, ok = w.NextOpen(at)
	}
	for i := 0; ok && i < 8 && at.Sub(r.req.Now) <= 7*24*time.Hour; i++ {
		if _, _, inside := r.cfg.Windows.next(at); !inside {
			f.warn("spec.window (%s) is open at %s, outside every maintenance window in the gate's config (windows.maintenance): SUC may start this Plan's nodes then, and the gate holds each GPU node's Job until a configured window opens (OutsideWindow); narrow spec.window to the configured windows",
				w.String(), at.Format("Mon 2006-01-02 15:04 MST"))
			return
		}
		at, ok = w.NextOpen(at)
	}
}

// next says whether a configured window is open at now and, when none is,
// which opens next (nextIdx -1: none within a week). No window configured:
// always open.
func (w *WindowsConfig) next(now time.Time) (nextIdx int, next time.Time, open bool) {
	ws := w.Maintenance
	if len(ws) == 0 {
		return -1, time.Time{}, true
	}
	nextIdx = -1
	for i := range ws {
		if ws[i].Contains(now) {
			return -1, time.Time{}, true
		}
		if t, ok := ws[i].NextOpen(now); ok && (nextIdx < 0 || t.Before(next)) {
			next, nextIdx = t, i
		}
	}
	return nextIdx, next, false
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

// The steps a maintenance window holds.
type windowStep int

const (
	windowDriver windowStep = iota // the driver path, or its per-node step
	windowSUC                      // SUC's start of a node's upgrade Job
)

// outsideWindow builds every OutsideWindow blocker.
func outsideWindow(step windowStep, node string, path *field.Path, now time.Time, ws []upgradev1.TimeWindowSpec, nextIdx int, next time.Time) Blocker {
	what := "no window opens within a week"
	if nextIdx >= 0 {
		w := ws[nextIdx]
		what = fmt.Sprintf("the next opens at %s, time zone %s (windows.maintenance[%d]: %s)", next.Format("Mon 2006-01-02 15:04 MST"), next.Location(), nextIdx, w.String())
	}
	act, retry := "the change would start driver reloads", "the GPU Operator retries a refused step on its own"
	switch {
	case step == windowSUC:
		act, retry = "node "+node+"'s upgrade (SUC's Job) would start", "SUC retries on its own; the Plan's spec.window alone does not open the gate's windows"
	case node != "":
		act = "node " + node + "'s driver reload would start"
	}
	return forbidden(CodeOutsideWindow, node, path, "%s at %s, outside every maintenance window in the gate's config (windows.maintenance); %s; retry then (%s)", act, now.UTC().Format(time.RFC3339), what, retry)
}
