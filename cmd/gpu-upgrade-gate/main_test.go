package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/snapshot"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.golden from the current output")

const (
	ex         = "../../deploy/examples/"
	exSnapshot = ex + "cluster/snapshot.yaml"
	config     = ex + "config.yaml"
	now        = "--now=2026-11-29T12:00:00Z"
	kubeDC     = ex + "records/v100-kernel-rke2-kubedc.yaml"
	v100       = "10de:1db6/10de:124a"
)

// sourceToTarget are upgrade-check's flags for the V100 move of the examples.
var sourceToTarget = []string{
	"--pci-id", v100,
	"--current-kernel", "6.8.0-134-generic", "--target-kernel", "6.8.0-135-generic",
	"--current-rke2", "v1.35.3+rke2r3", "--target-rke2", "v1.36.1+rke2r1",
	"--current-driver", "580.126.20", "--target-driver", "580.130.00",
	"--current-gpu-operator", "v26.3.3", "--target-gpu-operator", "v26.3.3",
	"--current-dcgm-exporter", "4.5.3-4.8.2-distroless", "--target-dcgm-exporter", "4.5.3-4.8.2-distroless",
}

func checkArgs(plan string, extra ...string) []string {
	return append([]string{"check", "--plan", plan, "--cluster", exSnapshot, "--config", config, "--user", "j.smith", now}, extra...)
}

func upgradeCheckArgs(record string, extra ...string) []string {
	args := append([]string{"upgrade-check", "--qualification", record, now}, sourceToTarget...)
	return append(args, extra...)
}

// flagValue replaces the value after flag in a copy of args.
func flagValue(args []string, flag, value string) []string {
	out := append([]string(nil), args...)
	for i := range out {
		if out[i] == flag {
			out[i+1] = value
			return out
		}
	}
	panic("no flag " + flag)
}

// swap replaces the argument old in a copy of args.
func swap(args []string, old, new string) []string {
	out := append([]string(nil), args...)
	for i := range out {
		if out[i] == old {
			out[i] = new
			return out
		}
	}
	panic("no argument " + old)
}

// without drops flag and its value from a copy of args.
func without(args []string, flag string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == flag {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

type result struct {
	code           int
	stdout, stderr string
}

func runCLI(args ...string) result {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// TestGolden runs the CLI over the examples and compares the exit status
// and both streams with testdata/golden/<name>.golden (go test -update
// rewrites them).
func TestGolden(t *testing.T) {
	cases := []struct {
		name string
		args []string
		exit int
	}{
		// check: the walkthrough over deploy/examples.
		{"check-canary", checkArgs(ex + "plans/gpu-v100-canary.yaml"), 0},
		{"check-canary-json", checkArgs(ex+"plans/gpu-v100-canary.yaml", "-o", "json"), 0},
		{"check-wave", checkArgs(ex + "plans/gpu-v100-wave.yaml"), 1},
		{"check-wave-size-2", flagValue(checkArgs(ex+"plans/gpu-v100-wave.yaml"), "--config", "testdata/config-wave2.yaml"), 1},
		{"check-rke2", checkArgs(ex + "plans/rke2-upgrade.yaml"), 0},
		{"check-rke2-json", checkArgs(ex+"plans/rke2-upgrade.yaml", "-o", "json"), 0},
		{"check-rke2-spellings", checkArgs("testdata/plans/rke2-spellings.yaml"), 1},
		{"check-unsafe-channel", checkArgs(ex + "plans/unsafe-channel.yaml"), 1},
		{"check-unsafe-concurrency", checkArgs(ex + "plans/unsafe-concurrency.yaml"), 1},
		{"check-unsafe-mixed", checkArgs(ex + "plans/unsafe-mixed.yaml"), 1},
		{"check-unsafe-mixed-json", checkArgs(ex+"plans/unsafe-mixed.yaml", "-o", "json"), 1},
		{"check-self-approved", flagValue(checkArgs(ex+"plans/gpu-v100-canary.yaml"), "--user", "m.novak"), 1},
		// Two-person separation: the record's author (r.chen) applies what
		// m.novak approved; three-person separation refuses it.
		{"check-author-applies", flagValue(checkArgs("testdata/plans/canary-by-r.chen.yaml"), "--user", "r.chen"), 0},
		{"check-author-applies-three-person", flagValue(flagValue(checkArgs("testdata/plans/canary-by-r.chen.yaml"), "--user", "r.chen"), "--config", "testdata/config-three-person.yaml"), 1},
		// Usernames compare exactly, as the API server authenticated them.
		{"check-other-user-in-another-case", flagValue(checkArgs("testdata/plans/canary-by-M.Novak.yaml"), "--user", "M.Novak"), 0},
		{"check-stale", swap(checkArgs(ex+"plans/gpu-v100-canary.yaml"), now, "--now=2026-12-21T12:00:00Z"), 1},
		{"check-expiring", swap(checkArgs(ex+"plans/gpu-v100-canary.yaml"), now, "--now=2026-12-18T12:00:00Z"), 0},
		{"check-records-dir", checkArgs(ex+"plans/gpu-v100-canary.yaml", "--records", ex+"records"), 0},
		{"check-records-invalid", checkArgs(ex+"plans/gpu-v100-canary.yaml", "--records", "testdata/records/v100-kernel-rke2-canary.yaml"), 1},
		{"check-outside-namespace", checkArgs("testdata/plans/outside-namespace.yaml"), 0},
		{"check-outside-namespace-json", checkArgs("testdata/plans/outside-namespace.yaml", "-o", "json"), 0},
		{"check-planted-record", checkArgs("testdata/plans/planted-record.yaml"), 1},
		{"check-server-version", checkArgs(ex+"plans/gpu-v100-canary.yaml", "--server-version", "v1.35.9+rke2r1"), 1},

		// upgrade-check: the anchor's output, and ours where it differs.
		{"upgrade-check-pass", upgradeCheckArgs(kubeDC), 0},
		{"upgrade-check-pass-json", upgradeCheckArgs(kubeDC, "-o", "json"), 0},
		{"upgrade-check-pass-source", upgradeCheckArgs(ex + "records/v100-kernel-rke2-canary.yaml"), 0},
		{"upgrade-check-comma-pci-ids", flagValue(upgradeCheckArgs(kubeDC), "--pci-id", v100+",10de:2335/10de:18bf"), 1},
		{"upgrade-check-blocked", flagValue(flagValue(upgradeCheckArgs(kubeDC), "--target-rke2", "1.36.1+rke2r1"), "--current-driver", "999.99"), 1},
		{"upgrade-check-blocked-json", flagValue(upgradeCheckArgs(kubeDC, "-o", "json"), "--current-driver", "999.99"), 1},
		{"upgrade-check-stale", upgradeCheckArgs(kubeDC, "--max-canary-age", "48h"), 1},
		{"upgrade-check-record-invalid", upgradeCheckArgs("testdata/records/bad/yaml11-booleans.yaml"), 1},

		// inventory over the example snapshot.
		{"inventory", []string{"inventory", now, "--cluster", ex + "cluster/snapshot.yaml"}, 0},
		{"inventory-json", []string{"inventory", now, "--cluster", ex + "cluster/snapshot.yaml", "-o", "json"}, 0},
		{"inventory-csv", []string{"inventory", now, "--cluster", ex + "cluster/snapshot.yaml", "-o", "csv"}, 0},
		{"inventory-stale", []string{"inventory", "--now=2027-01-10T00:00:00Z", "--cluster", ex + "cluster/snapshot.yaml"}, 0},
		{"inventory-both-sources", []string{"inventory", now, "--cluster", ex + "cluster/snapshot.yaml", "--kubeconfig", "x"}, 2},

		// change-record: the wave of plans/gpu-v100-wave.yaml, halted; a
		// driver change by its record; a Plan that is not stored.
		{"change-record", []string{"change-record", now, "--cluster", "testdata/cluster/wave.yaml", "--plan", "system-upgrade/gpu-v100-wave"}, 0},
		{"change-record-json", []string{"change-record", now, "--cluster", "testdata/cluster/wave.yaml", "--plan", "system-upgrade/gpu-v100-wave", "-o", "json"}, 0},
		{"change-record-driver", []string{"change-record", now, "--cluster", ex + "cluster/snapshot.yaml", "--record", "v100-kernel-rke2-canary"}, 0},
		{"change-record-no-plan", []string{"change-record", now, "--cluster", ex + "cluster/snapshot.yaml", "--plan", "system-upgrade/gpu-v100-wave"}, 2},

		// validate-record.
		{"validate-examples", []string{"validate-record", now, ex + "records/h200-rke2-driver-canary.yaml", ex + "records/v100-kernel-rke2-canary.yaml", kubeDC}, 0},
		{"validate-bad", []string{"validate-record", now, "testdata/records/bad/many-problems.yaml", "testdata/records/bad/yaml11-booleans.yaml", kubeDC}, 1},
		{"validate-bad-json", []string{"validate-record", now, "-o", "json", "testdata/records/bad/many-problems.yaml", kubeDC}, 1},
		{"validate-stale", []string{"validate-record", "--now=2027-01-10T00:00:00Z", kubeDC}, 1},
		{"validate-unreadable", []string{"validate-record", now, "testdata/records/nosuch.yaml", kubeDC}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(tc.args...)
			assert.Equal(t, tc.exit, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			got := "$ gpu-upgrade-gate " + strings.Join(tc.args, " ") + "\n" +
				"exit: " + strconv.Itoa(r.code) + "\n--- stdout\n" + r.stdout + "--- stderr\n" + r.stderr
			path := filepath.Join("testdata", "golden", tc.name+".golden")
			if *update {
				require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
				return
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test -update to create it")
			assert.Equal(t, string(want), got)
		})
	}
}

// TestJSONShape holds -o json to the documented shape, whatever the golden
// files say.
func TestJSONShape(t *testing.T) {
	keys := func(t *testing.T, raw json.RawMessage) []string {
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &m))
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		return ks
	}
	t.Run("upgrade-check prints one object", func(t *testing.T) {
		r := runCLI(flagValue(upgradeCheckArgs(kubeDC, "-o", "json"), "--current-driver", "999.99")...)
		assert.Equal(t, 1, r.code)
		assert.Empty(t, r.stderr)
		assert.ElementsMatch(t, []string{"allowed", "blockers", "warnings", "record"}, keys(t, json.RawMessage(r.stdout)))
		var d jsonDecision
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &d))
		require.NotEmpty(t, d.Blockers)
		assert.Equal(t, "ComponentDowngrade", string(d.Blockers[0].Code))
		assert.Equal(t, "--target-driver", d.Blockers[0].Field)
	})
	t.Run("check prints an array, one object per Plan, each with object", func(t *testing.T) {
		r := runCLI(checkArgs(ex+"plans/rke2-upgrade.yaml", "-o", "json")...)
		assert.Equal(t, 0, r.code)
		var arr []json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &arr))
		require.Len(t, arr, 2)
		for _, raw := range arr {
			assert.ElementsMatch(t, []string{"object", "allowed", "blockers", "warnings", "record"}, keys(t, raw))
		}
		r = runCLI(checkArgs(ex+"plans/unsafe-concurrency.yaml", "-o", "json")...)
		assert.Equal(t, 1, r.code)
		var ds []jsonDecision
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &ds))
		require.Len(t, ds, 1, "one Plan is still an array")
		assert.Equal(t, "Plan system-upgrade/gpu-v100-pool", ds[0].Object)
		var nodes []string
		for _, b := range ds[0].Blockers {
			assert.NotEmpty(t, b.Field)
			nodes = append(nodes, b.Node)
		}
		assert.Contains(t, nodes, "gpu-v100-02")
	})
}

// TestChangeRecordJSONShape holds change-record -o json to its documented
// keys (docs/cli.md#change-record), whatever the golden files say.
func TestChangeRecordJSONShape(t *testing.T) {
	r := runCLI("change-record", now, "--cluster", "testdata/cluster/wave.yaml", "--plan", "system-upgrade/gpu-v100-wave", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &m))
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	assert.ElementsMatch(t, []string{"rollout", "objective", "requester", "versionDiff", "record", "canary", "nodes",
		"observationWindow", "rollbackTrigger", "failures", "notes", "at"}, keys)
	var cr gate.ChangeRecord
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &cr))
	assert.Empty(t, cr.EmptyFields(), "the wave snapshot shows every field")
}

func TestUsageErrors(t *testing.T) {
	canary := checkArgs(ex + "plans/gpu-v100-canary.yaml")
	uc := upgradeCheckArgs(kubeDC)
	cases := []struct {
		name string
		args []string
		want []string // substrings of stderr
	}{
		{"no command", nil, []string{"Usage:"}},
		{"unknown command", []string{"deploy"}, []string{`unknown command "deploy"`}},
		{"help of an unknown command", []string{"help", "deploy"}, []string{`unknown command "deploy"`}},
		{"check: missing --plan", without(canary, "--plan"), []string{"required flag --plan"}},
		{"check: missing --cluster", without(canary, "--cluster"), []string{"give exactly one of --cluster (a List saved with " + snapshot.Recipe + ") and --kubeconfig"}},
		{"check: unknown flag", append(canary, "--dry-run"), []string{"unknown flag: --dry-run"}},
		{"check: stray argument", append(canary, "extra.yaml"), []string{`unexpected argument "extra.yaml"`}},
		{"check: bad --now", swap(canary, now, "--now=2026-11-29"), []string{`--now "2026-11-29" is not an RFC 3339 time`}},
		{"check: bad -o", append(canary, "-o", "yaml"), []string{`-o/--output "yaml" is not supported`}},
		{"check: unreadable --plan", flagValue(canary, "--plan", "testdata/nosuch.yaml"), []string{"--plan testdata/nosuch.yaml: cannot read it: no such file or directory"}},
		{"check: unreadable --cluster", flagValue(canary, "--cluster", "testdata/nosuch.yaml"), []string{"--cluster testdata/nosuch.yaml: cannot read it"}},
		{"check: unreadable --config", flagValue(canary, "--config", "testdata/nosuch.yaml"), []string{"--config testdata/nosuch.yaml: cannot read it"}},
		{"check: --plan a device", flagValue(canary, "--plan", "/dev/zero"), []string{"--plan /dev/zero: refused: it is a character device, not a regular file"}},
		{"check: input above --max-input-bytes", append(canary, "--max-input-bytes", "100"), []string{"--config ", "refused: it holds ", " bytes, above the limit of 100 (raise it with --max-input-bytes)"}},
		{"inventory: --cluster a device", []string{"inventory", "--cluster", "/dev/null"}, []string{"--cluster /dev/null: refused: it is a character device"}},
		{"check: unreadable --records", append(canary, "--records", "testdata/nosuch"), []string{"--records testdata/nosuch: cannot read it"}},
		{"check: malformed Plan names the field and value", flagValue(canary, "--plan", "testdata/plans/malformed-concurrency.yaml"),
			[]string{"--plan testdata/plans/malformed-concurrency.yaml", "spec.concurrency", `"one"`}},
		{"check: Plan without namespace", flagValue(canary, "--plan", "testdata/plans/no-namespace.yaml"), []string{"has no metadata.namespace"}},
		{"check: file without a Plan", flagValue(canary, "--plan", "testdata/plans/empty.yaml"), []string{"holds no Plan"}},
		{"check: malformed List names the item, field and value", flagValue(canary, "--cluster", "testdata/cluster/malformed-node.yaml"),
			[]string{"--cluster testdata/cluster/malformed-node.yaml", "items[0] (Node cp-01)", "spec.unschedulable", `"yes"`}},
		{"check: --cluster is not a List", flagValue(canary, "--cluster", ex+"plans/gpu-v100-canary.yaml"), []string{`expected apiVersion v1, kind List`, `kind "Plan"`}},
		{"check: malformed config", flagValue(canary, "--config", ex+"plans/gpu-v100-canary.yaml"), []string{"--config", "unknown field"}},
		{"check: namespace differs from the config's", append(canary, "--namespace", "platform"), []string{`--namespace "platform" differs from namespace "gpu-upgrade-gate"`}},
		{"check: bad --namespace", without(append(canary, "--namespace", "Bad_NS"), "--config"), []string{`--namespace "Bad_NS"`}},
		{"check: no control plane and no --server-version", flagValue(canary, "--cluster", "testdata/cluster/no-control-plane.yaml"), []string{"pass --server-version"}},
		{"check: bad --server-version", append(canary, "--server-version", "1.36"), []string{"--server-version", `"1.36"`}},
		{"upgrade-check: missing --target-kernel", without(uc, "--target-kernel"), []string{"required flag(s) not set: --target-kernel"}},
		{"upgrade-check: missing --qualification and --pci-id", without(without(uc, "--qualification"), "--pci-id"), []string{"--qualification, --pci-id"}},
		{"upgrade-check: unknown flag", append(uc, "--kubeconfig", "x"), []string{"unknown flag: --kubeconfig"}},
		{"upgrade-check: stray argument", append(uc, "now"), []string{`unexpected argument "now"`}},
		{"upgrade-check: bad --now", swap(uc, now, "--now=2026-11-29 12:00:00"), []string{"--now"}},
		{"upgrade-check: bad -o", append(uc, "--output", "yaml"), []string{"-o/--output"}},
		{"upgrade-check: --max-canary-age 0", append(uc, "--max-canary-age", "0"), []string{"--max-canary-age 0s: must be above 0 and at most 2160h0m0s"}},
		{"upgrade-check: --max-canary-age -1h", append(uc, "--max-canary-age", "-1h"), []string{"--max-canary-age -1h0m0s"}},
		{"upgrade-check: --max-canary-age 2161h", append(uc, "--max-canary-age", "2161h"), []string{"--max-canary-age 2161h0m0s"}},
		{"upgrade-check: --max-canary-age not a duration", append(uc, "--max-canary-age", "30d"), []string{"--max-canary-age"}},
		{"upgrade-check: unreadable record", flagValue(uc, "--qualification", "testdata/nosuch.yaml"), []string{"--qualification testdata/nosuch.yaml: cannot read it"}},
		{"validate-record: no file", []string{"validate-record", now}, []string{"no record file given"}},
		{"validate-record: --max-canary-age 0", []string{"validate-record", "--max-canary-age", "0", kubeDC}, []string{"--max-canary-age 0s"}},
		{"validate-record: --clock-skew 2h", []string{"validate-record", "--clock-skew", "2h", kubeDC}, []string{"--clock-skew 2h0m0s"}},
		{"validate-record: unknown flag", []string{"validate-record", "--strict", kubeDC}, []string{"unknown flag: --strict"}},
		{"change-record: neither --plan nor --record", []string{"change-record", "--cluster", ex + "cluster/snapshot.yaml"}, []string{"give exactly one of --plan namespace/name"}},
		{"change-record: both --plan and --record", []string{"change-record", "--cluster", ex + "cluster/snapshot.yaml", "--plan", "a/b", "--record", "c"}, []string{"give exactly one of --plan namespace/name"}},
		{"change-record: --plan without a namespace", []string{"change-record", "--cluster", ex + "cluster/snapshot.yaml", "--plan", "gpu-v100-wave"}, []string{`--plan "gpu-v100-wave": expected namespace/name`}},
		{"change-record: record not loaded", []string{"change-record", "--cluster", ex + "cluster/snapshot.yaml", "--record", "nosuch"}, []string{"record ConfigMap gpu-upgrade-gate/nosuch", "is not loaded"}},
		{"change-record: no --cluster", []string{"change-record", "--record", "v100-kernel-rke2-canary"}, []string{"give exactly one of --cluster"}},
		{"version: stray argument", []string{"version", "--short"}, []string{"unknown flag: --short"}},
		{"version: positional", []string{"version", "short"}, []string{`unexpected argument "short"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(tc.args...)
			assert.Equal(t, exitUsage, r.code)
			assert.Empty(t, r.stdout, "usage errors print nothing on stdout")
			for _, w := range tc.want {
				assert.Contains(t, r.stderr, w)
			}
		})
	}
}

func TestHelpAndVersion(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		r := runCLI(args...)
		assert.Equal(t, 0, r.code)
		assert.Contains(t, r.stdout, "upgrade-check")
	}
	for _, cmd := range []string{"check", "upgrade-check", "validate-record", "version"} {
		t.Run(cmd, func(t *testing.T) {
			r := runCLI(cmd, "-h")
			assert.Equal(t, 0, r.code)
			assert.Contains(t, r.stdout, "Usage of gpu-upgrade-gate "+cmd)
			assert.Equal(t, r, runCLI("help", cmd))
		})
	}
	r := runCLI("upgrade-check", "-h")
	for _, f := range []string{"--qualification", "--pci-id", "--current-kernel", "--target-dcgm-exporter", "--max-canary-age", "--now", "--output"} {
		assert.Contains(t, r.stdout, f)
	}
	r = runCLI("version")
	assert.Equal(t, 0, r.code)
	assert.Equal(t, "gpu-upgrade-gate dev\ncommit: dev\ngo: "+runtime.Version()+"\n", r.stdout)
}

// TestCheckRKE2Spellings: check holds a Plan to the RKE2 rules whatever the
// spelling or mirror of the RKE2 upgrade image (issue 9).
func TestCheckRKE2Spellings(t *testing.T) {
	r := runCLI(append(checkArgs("testdata/plans/rke2-spellings.yaml"), "-o", "json")...)
	require.Equal(t, exitDenied, r.code, r.stderr)
	var out []struct {
		Object   string `json:"object"`
		Allowed  bool   `json:"allowed"`
		Blockers []struct {
			Code string `json:"code"`
		} `json:"blockers"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
	require.Len(t, out, 3)
	for _, d := range out {
		var codes []string
		for _, b := range d.Blockers {
			codes = append(codes, b.Code)
		}
		assert.False(t, d.Allowed, d.Object)
		assert.ElementsMatch(t, []string{"TargetNotQualified", "MinorSkip", "VersionSkew"}, codes, d.Object)
	}
}

// TestServeFlags: serve parses its flags like every other command (issue 9:
// a bad flag printed nothing, -h was an error).
func TestServeFlags(t *testing.T) {
	r := runCLI("serve", "--bogus")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "gpu-upgrade-gate serve: unknown flag: --bogus")
	assert.Contains(t, r.stderr, "Run 'gpu-upgrade-gate serve -h' for usage.")
	assert.Empty(t, r.stdout)

	r = runCLI("serve", "-h")
	assert.Equal(t, exitAllowed, r.code, r.stderr)
	assert.Contains(t, r.stdout, "Usage of gpu-upgrade-gate serve:")
	assert.Contains(t, r.stdout, "--cert-dir")
	assert.Empty(t, r.stderr)

	r = runCLI("serve", "extra")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, `unexpected argument "extra"`)

	r = runCLI("serve", "--config", "testdata/no-such-config.yaml")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "--config testdata/no-such-config.yaml: cannot read it")
}

// TestCheckGroups: check decides break glass and group exemptions offline
// as the webhook does (issue 9: break glass was denied by check).
func TestCheckGroups(t *testing.T) {
	bg := checkArgs("testdata/plans/break-glass.yaml")
	r := runCLI(bg...)
	assert.Equal(t, exitDenied, r.code, "without the group the blockers stand: %s", r.stdout)
	assert.Contains(t, r.stdout, "[ConcurrencyNotSerial]")

	r = runCLI(append(bg, "--group", "platform-admins", "--group", "gpu-upgrade-gate:break-glass")...)
	assert.Equal(t, exitAllowed, r.code, r.stdout)
	assert.Contains(t, r.stdout, `break-glass by j.smith ("INC-4711: firmware CVE, vendor hotfix") overrode`)

	exempt := flagValue(checkArgs(ex+"plans/unsafe-concurrency.yaml"), "--config", "testdata/config-group-exemption.yaml")
	r = runCLI(exempt...)
	assert.Equal(t, exitDenied, r.code, r.stdout)
	r = runCLI(append(exempt, "--group", "rancher:fleet")...)
	assert.Equal(t, exitAllowed, r.code, r.stdout)
	assert.Contains(t, r.stdout, `exempt by "rancher-managed"`)
}

// TestSnapshotRecipeIsOneCommand: the command that saves a List for
// --cluster is spelled once (snapshot.Recipe); check's and inventory's help
// and docs/cli.md give it as it is, and it saves every kind the loader
// reads, Plans and Jobs included.
func TestSnapshotRecipeIsOneCommand(t *testing.T) {
	for _, kind := range []string{"nodes", "pods", "deployments", "daemonsets", "configmaps", "jobs", "plans.upgrade.cattle.io"} {
		assert.Contains(t, strings.Split(strings.Fields(snapshot.Recipe)[2], ","), kind)
	}
	doc, err := os.ReadFile("../../docs/cli.md")
	require.NoError(t, err)
	assert.Contains(t, string(doc), snapshot.Recipe)
	assert.NotContains(t, string(doc), "configmaps -A", "no older spelling of the recipe")
	for _, cmd := range []string{"check", "inventory"} {
		var out, errOut bytes.Buffer
		require.Equal(t, 0, run([]string{cmd, "--help"}, &out, &errOut))
		assert.Contains(t, out.String(), snapshot.Recipe, cmd)
	}
}
