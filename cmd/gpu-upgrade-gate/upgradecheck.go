package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/snapshot"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// runUpgradeCheck is the kube-dc upgrade-check with its flags unchanged:
// every value is typed, so prefer check, which reads them from the cluster.
func runUpgradeCheck(args []string, stdout, stderr io.Writer) int {
	var (
		c            common
		file         string
		pciIDs       []string
		cur, tgt     qualification.Tuple
		maxCanaryAge time.Duration
	)
	fs := flagSet("upgrade-check")
	fs.StringVar(&file, "qualification", "", "the GPUUpgradeQualification record file")
	fs.StringSliceVar(&pciIDs, "pci-id", nil, "GPU identity vendor:device/subvendor:subdevice; repeat the flag or separate with commas")
	for _, c := range gate.ComponentTable() {
		fs.Var(&tupleFlag{&cur, c}, "current-"+c.Flag, "the node's current "+c.Flag+" version")
		fs.Var(&tupleFlag{&tgt, c}, "target-"+c.Flag, "the "+c.Flag+" version after the upgrade; must equal the record's target byte for byte")
	}
	fs.DurationVar(&maxCanaryAge, "max-canary-age", qualification.DefaultMaxAge, fmt.Sprintf("how old the canary evidence may be: above 0 and at most %s", qualification.MaxAgeCeiling))
	c.register(fs)
	if help, err := parseFlags(fs, args, false, stdout); help || err != nil {
		if err != nil {
			return fail(stderr, "upgrade-check", err)
		}
		return exitAllowed
	}
	now, err := c.validate()
	if err != nil {
		return fail(stderr, "upgrade-check", err)
	}
	optional := map[string]bool{"max-canary-age": true, "now": true, "output": true}
	for _, c := range gate.ComponentTable() {
		// A member a tuple may leave out (the DRA driver) is typed only
		// where the record names it.
		optional["current-"+c.Flag], optional["target-"+c.Flag] = c.Optional, c.Optional
	}
	var missing []string
	fs.VisitAll(func(fl *pflag.Flag) {
		if !fs.Changed(fl.Name) && !optional[fl.Name] {
			missing = append(missing, "--"+fl.Name)
		}
	})
	if len(missing) > 0 {
		return fail(stderr, "upgrade-check", usagef("required flag(s) not set: %s", strings.Join(missing, ", ")))
	}
	if maxCanaryAge <= 0 || maxCanaryAge > qualification.MaxAgeCeiling {
		return fail(stderr, "upgrade-check", usagef("--max-canary-age %s: must be above 0 and at most %s (default %s)", maxCanaryAge, qualification.MaxAgeCeiling, qualification.DefaultMaxAge))
	}
	entry, err := snapshot.LoadRecordFile(file)
	if err != nil {
		return fail(stderr, "upgrade-check", unreadable("--qualification", file, err))
	}
	d := gate.UpgradeCheck(gate.UpgradeCheckRequest{
		Record: entry, PCIIDs: pciIDs, Current: cur, Target: tgt,
		Freshness: qualification.Freshness{Now: now, MaxAge: maxCanaryAge, ClockSkew: qualification.DefaultClockSkew},
	})
	if c.output == "json" {
		writeJSON(stdout, toJSON(d, styleMessage))
	} else if d.Allowed {
		r := d.Record
		fmt.Fprintf(stdout, "GPU upgrade gate: PASS\nQualification: %s\nApproved by: %s\nSource revision: %s\nCanary completed: %s\n", r.ID, r.ApprovedBy, r.SourceRevision, r.CompletedAt)
		fmt.Fprintln(stdout, "Next: apply only the reviewed serialized canary plan; stop on any health or allocation regression.")
	} else {
		fmt.Fprintln(stderr, "GPU upgrade blocked:")
		writeBlockers(stderr, d, "", styleMessage)
	}
	if !d.Allowed {
		return exitDenied
	}
	return exitAllowed
}

// tupleFlag is one --current-* or --target-* flag: one component of a
// tuple, from the component table.
type tupleFlag struct {
	t *qualification.Tuple
	c gate.ComponentSpec
}

func (f *tupleFlag) String() string {
	if f.t == nil {
		return ""
	}
	return f.c.Value(*f.t)
}
func (f *tupleFlag) Set(v string) error { f.c.Set(f.t, v); return nil }
func (f *tupleFlag) Type() string       { return "string" }
