// Command gpu-upgrade-gate is the GPU upgrade gate: the admission webhook
// (serve) and the same decision engine offline (check, upgrade-check,
// validate-record). The engine decides; this command only reads inputs and
// renders answers.
package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"
	// Maintenance windows name IANA time zones; the binary carries their
	// data (about 450 KB) so it never depends on the image's: the
	// distroless/static image has a zoneinfo today, a scratch one would not.
	_ "time/tzdata"

	"github.com/spf13/pflag"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/snapshot"
)

// Exit statuses: a stable interface for pipelines.
const (
	exitAllowed = 0
	exitDenied  = 1
	exitUsage   = 2
)

const usageText = `gpu-upgrade-gate stops unsafe upgrades of GPU nodes.

Usage:
  gpu-upgrade-gate <command> [flags]

Commands:
  serve            run the validating admission webhook
  check            decide Plans offline against a cluster snapshot, as the webhook would
  upgrade-check    the kube-dc upgrade-check gate, with typed current and target versions
  validate-record  lint qualification records
  inventory        per GPU node: current and target versions, record, readiness, rollback
  change-record    per rollout (a Plan, or a driver change's record): objective, versions, record, canary, proofs, halts
  recovery-plan    read-only: the one stale DRA driver Pod the seed's bounded rules allow deleting, or why none
  version          print the version
  help [command]   show help

Exit status: 0 allowed, 1 denied, 2 bad usage or unreadable input.
Run 'gpu-upgrade-gate <command> -h' for a command's flags.
`

// commands maps each subcommand to its runner; each parses its own flags.
var commands = map[string]func(args []string, stdout, stderr io.Writer) int{
	"serve":           runServe,
	"check":           runCheck,
	"upgrade-check":   runUpgradeCheck,
	"validate-record": runValidateRecord,
	"inventory":       runInventory,
	"change-record":   runChangeRecord,
	"recovery-plan":   runRecoveryPlan,
	"version":         runVersion,
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole command: tests call it in-process.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "--help":
		if name == "help" && len(rest) > 0 {
			if c, ok := commands[rest[0]]; ok && len(rest) == 1 {
				return c([]string{"-h"}, stdout, stderr)
			}
			fmt.Fprintf(stderr, "gpu-upgrade-gate help: unknown command %q\n", strings.Join(rest, " "))
			return exitUsage
		}
		fmt.Fprint(stdout, usageText)
		return exitAllowed
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "gpu-upgrade-gate: unknown command %q\n\n%s", name, usageText)
		return exitUsage
	}
	return c(rest, stdout, stderr)
}

// usageError is bad usage or unreadable input: exit 2, message on stderr.
// hint adds the pointer to -h, for mistakes in the flags themselves.
type usageError struct {
	msg  string
	hint bool
}

func (e *usageError) Error() string { return e.msg }

// usagef is a mistake in the flags.
func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...), hint: true}
}

// inputf is an input file that cannot be read or understood.
func inputf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// flagSet is a command's flags. Parsing never prints: run decides what goes
// where.
func flagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	return fs
}

// parseFlags parses args and refuses positional arguments unless the
// command takes them. help=true means -h was asked and answered.
func parseFlags(fs *pflag.FlagSet, args []string, positional bool, stdout io.Writer) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdout, "Usage of gpu-upgrade-gate %s:\n%s", fs.Name(), fs.FlagUsages())
			return true, nil
		}
		return false, usagef("%v", err)
	}
	if !positional && fs.NArg() > 0 {
		return false, usagef("unexpected argument %q: %s takes flags only", fs.Arg(0), fs.Name())
	}
	return false, nil
}

// fail prints a usage error and returns its status.
func fail(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "gpu-upgrade-gate %s: %v\n", cmd, err)
	var ue *usageError
	if errors.As(err, &ue) && ue.hint {
		fmt.Fprintf(stderr, "Run 'gpu-upgrade-gate %s -h' for usage.\n", cmd)
	}
	return exitUsage
}

// common holds the flags every deciding command shares.
type common struct {
	now    string
	output string
}

func (c *common) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.now, "now", "", "decide as of this RFC 3339 time instead of the clock (e.g. 2026-11-29T12:00:00Z)")
	fs.StringVarP(&c.output, "output", "o", "text", "output format: text or json")
}

// validate checks --now and -o and returns the decision time.
func (c *common) validate() (time.Time, error) {
	if c.output != "text" && c.output != "json" {
		return time.Time{}, usagef("-o/--output %q is not supported: use text or json", c.output)
	}
	return parseNow(c.now)
}

// parseNow reads --now; empty means the clock.
func parseNow(s string) (time.Time, error) {
	if s == "" {
		return time.Now(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, usagef("--now %q is not an RFC 3339 time such as 2026-11-29T12:00:00Z", s)
	}
	return t, nil
}

// maxInput bounds every input file of this run (--max-input-bytes).
var maxInput int64 = snapshot.DefaultMaxInput

// registerMaxInput adds --max-input-bytes to a command that reads snapshots.
func registerMaxInput(fs *pflag.FlagSet) {
	maxInput = snapshot.DefaultMaxInput
	fs.Int64Var(&maxInput, "max-input-bytes", snapshot.DefaultMaxInput, "refuse an input file larger than this (bytes)")
}

// readInput reads a regular file named by a flag, within --max-input-bytes;
// a failure is a usage error naming the flag and the file.
func readInput(flag, path string) ([]byte, error) {
	data, err := snapshot.ReadFile(path, maxInput)
	if err != nil {
		return nil, unreadable(flag, path, err)
	}
	return data, nil
}

func unreadable(flag, path string, err error) error {
	if errors.Is(err, snapshot.ErrInput) {
		return inputf("%s %s: %v", flag, path, err)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return inputf("%s %s: cannot read it: %v", flag, path, err)
}
