package main

import (
	"fmt"
	"io"
	"time"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/snapshot"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// runValidateRecord lints record files for a review pipeline.
func runValidateRecord(args []string, stdout, stderr io.Writer) int {
	var (
		c           common
		maxAge, skw time.Duration
	)
	fs := flagSet("validate-record")
	fs.DurationVar(&maxAge, "max-canary-age", qualification.DefaultMaxAge, fmt.Sprintf("how old the canary evidence may be: above 0 and at most %s", qualification.MaxAgeCeiling))
	fs.DurationVar(&skw, "clock-skew", qualification.DefaultClockSkew, fmt.Sprintf("how far in the future completedAt may lie: 0 to %s", qualification.MaxClockSkew))
	c.register(fs)
	if help, err := parseFlags(fs, args, true, stdout); help || err != nil {
		if err != nil {
			return fail(stderr, "validate-record", err)
		}
		return exitAllowed
	}
	now, err := c.validate()
	if err != nil {
		return fail(stderr, "validate-record", err)
	}
	if fs.NArg() == 0 {
		return fail(stderr, "validate-record", usagef("no record file given"))
	}
	if errs := qualification.ValidateFreshness(maxAge, skw, nil); len(errs) > 0 {
		flag := map[string]string{"maxAge": "--max-canary-age", "clockSkew": "--clock-skew"}[errs[0].Field]
		return fail(stderr, "validate-record", usagef("%s %v: %s", flag, errs[0].BadValue, errs[0].Detail))
	}
	f := qualification.Freshness{Now: now, MaxAge: maxAge, ClockSkew: skw}

	status := exitAllowed
	var out []jsonDecision
	for _, file := range fs.Args() {
		entry, err := snapshot.LoadRecordFile(file)
		if err != nil {
			fmt.Fprintf(stderr, "gpu-upgrade-gate validate-record: %v\n", unreadable("record", file, err))
			status = exitUsage
			continue
		}
		d := gate.ValidateRecord(entry, f)
		if !d.Allowed && status == exitAllowed {
			status = exitDenied
		}
		if c.output == "json" {
			j := toJSON(d, styleFieldError)
			j.File = file
			out = append(out, j)
			continue
		}
		if d.Allowed {
			fmt.Fprintf(stdout, "%s: ok\n", file)
		}
		writeBlockers(stdout, d, file+": ", styleFieldError)
		if d.Record != nil {
			fmt.Fprintf(stdout, "%s: approval: %s\n", file, d.Record.Approval)
		}
	}
	if c.output == "json" {
		if out == nil {
			out = []jsonDecision{}
		}
		writeJSON(stdout, out)
	}
	return status
}
