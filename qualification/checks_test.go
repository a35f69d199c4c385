package qualification

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsyaml "sigs.k8s.io/yaml"
)

// recordWithChecks is a valid gate record whose canary ends with the
// given checks YAML (indented as canary.checks items).
func recordWithChecks(apiVersion, checks string) string {
	src := "source: {kernel: 6.8.0-134-generic, rke2: v1.36.1+rke2r1, driver: 580.126.20, gpuOperator: v26.3.4, dcgmExporter: 4.4.1-4.6.0-ubuntu22.04}\n"
	if apiVersion == APIVersionKubeDC {
		src = ""
	}
	return "apiVersion: " + apiVersion + `
kind: GPUUpgradeQualification
id: h200-driver-canary-1
state: qualified
approvedBy: bob
sourceRevision: 3f2a9c1d4b5e6f708192a3b4c5d6e7f801234567
hardware: ["10de:2335/10de:18bf"]
target: {kernel: 6.8.0-134-generic, rke2: v1.36.1+rke2r1, driver: 580.130.00, gpuOperator: v26.3.4, dcgmExporter: 4.4.1-4.6.0-ubuntu22.04}
` + src + `canary:
  completedAt: "2026-07-14T12:00:00Z"
  allocationPassed: true
  monitoringPassed: true
  rollbackPassed: true
  evidence: CHG-1142
  checks:
` + checks
}

func TestCanaryChecks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		api    string
		checks string
		// load is a substring of the load error, when loading must fail.
		load string
		want []found
		// explained is what ExplainedDeviations lists.
		explained []string
	}{
		{name: "every known kind within its threshold", checks: `
  - {kind: dcgm-diag, level: 3, passed: true}
  - {kind: nccl-allreduce, value: 188, unit: GB/s, baseline: 190.1, maxDeviationPercent: 5}
  - {kind: p2p-bandwidth, value: 401.2, unit: GB/s, baseline: 400, maxDeviationPercent: 3}
  - {kind: gemm, value: 650, unit: TFLOPS, baseline: 660, maxDeviationPercent: 2}
  - {kind: inference, value: 41, unit: ms, baseline: 40, maxDeviationPercent: 5}
  - {kind: storage-fio, value: 3.1, unit: GiB/s, baseline: 3.0, maxDeviationPercent: 10}
  - {kind: cuda-basic, passed: true}
`},
		{name: "a throughput beyond its threshold", checks: `
  - {kind: nccl-allreduce, value: 170, unit: GB/s, baseline: 190, maxDeviationPercent: 5}
`, want: []found{{ProblemCanaryIncomplete, "canary.checks[0].value", field.ErrorTypeInvalid}}},
		{name: "a time beyond its threshold (higher is worse)", checks: `
  - {kind: inference, value: 48, unit: ms, baseline: 40, maxDeviationPercent: 10}
`, want: []found{{ProblemCanaryIncomplete, "canary.checks[0].value", field.ErrorTypeInvalid}}},
		{name: "a faster time is no deviation", checks: `
  - {kind: inference, value: 20, unit: ms, baseline: 40, maxDeviationPercent: 1}
`},
		{name: "an explained deviation qualifies and is shown", checks: `
  - {kind: nccl-allreduce, value: 170, unit: GB/s, baseline: 190, maxDeviationPercent: 5, explanation: "NVLink switch firmware differs; INC-77"}
`, explained: []string{"nccl-allreduce 170 GB/s is 10.5263% worse than the baseline 190 GB/s, 5% allowed; explained: NVLink switch firmware differs; INC-77"}},
		{name: "a failed DCGM diagnostic", checks: `
  - {kind: dcgm-diag, level: 2, passed: false}
`, want: []found{{ProblemCanaryIncomplete, "canary.checks[0].passed", field.ErrorTypeInvalid}}},
		{name: "dcgm-diag without its level", checks: `
  - {kind: dcgm-diag, passed: true}
`, want: []found{{ProblemInvalid, "canary.checks[0].level", field.ErrorTypeInvalid}}},
		{name: "dcgm-diag level 5", checks: `
  - {kind: dcgm-diag, level: 5, passed: true}
`, want: []found{{ProblemInvalid, "canary.checks[0].level", field.ErrorTypeInvalid}}},
		{name: "a level on another kind", checks: `
  - {kind: gemm, level: 2, value: 1, unit: TFLOPS, baseline: 1, maxDeviationPercent: 1}
`, want: []found{{ProblemInvalid, "canary.checks[0].level", field.ErrorTypeForbidden}}},
		{name: "one level of DCGM twice", checks: `
  - {kind: dcgm-diag, level: 3, passed: true}
  - {kind: dcgm-diag, level: 3, passed: false}
`, want: []found{{ProblemInvalid, "canary.checks[1].kind", field.ErrorTypeDuplicate}}},
		{name: "two DCGM levels", checks: `
  - {kind: dcgm-diag, level: 1, passed: true}
  - {kind: dcgm-diag, level: 3, passed: true}
`},
		{name: "a unit the kind is not measured in", checks: `
  - {kind: nccl-allreduce, value: 1500, unit: Gb/s, baseline: 1520, maxDeviationPercent: 5}
`, want: []found{{ProblemInvalid, "canary.checks[0].unit", field.ErrorTypeNotSupported}}},
		{name: "an unknown unit on a team's own kind", checks: `
  - {kind: storage-fio, value: 3, unit: IOPS, baseline: 3, maxDeviationPercent: 5}
`, want: []found{{ProblemInvalid, "canary.checks[0].unit", field.ErrorTypeNotSupported}}},
		{name: "a measured kind recorded as pass/fail", checks: `
  - {kind: gemm, passed: true}
`, want: []found{{ProblemInvalid, "canary.checks[0].passed", field.ErrorTypeForbidden}}},
		{name: "a pass/fail kind with a figure", checks: `
  - {kind: cuda-basic, value: 1, unit: s, baseline: 1, maxDeviationPercent: 1}
`, want: []found{{ProblemInvalid, "canary.checks[0].value", field.ErrorTypeForbidden}}},
		{name: "both passed and a figure", checks: `
  - {kind: storage-fio, passed: true, value: 1, unit: s, baseline: 1, maxDeviationPercent: 1}
`, want: []found{{ProblemInvalid, "canary.checks[0].passed", field.ErrorTypeForbidden}}},
		{name: "neither", checks: `
  - {kind: storage-fio}
`, want: []found{{ProblemInvalid, "canary.checks[0]", field.ErrorTypeRequired}}},
		{name: "missing baseline and threshold", checks: `
  - {kind: gemm, value: 650, unit: TFLOPS}
`, want: []found{{ProblemInvalid, "canary.checks[0].baseline", field.ErrorTypeRequired}, {ProblemInvalid, "canary.checks[0].maxDeviationPercent", field.ErrorTypeRequired}}},
		{name: "a zero baseline and a negative figure", checks: `
  - {kind: gemm, value: -1, unit: TFLOPS, baseline: 0, maxDeviationPercent: 200}
`, want: []found{{ProblemInvalid, "canary.checks[0].value", field.ErrorTypeInvalid}, {ProblemInvalid, "canary.checks[0].baseline", field.ErrorTypeInvalid}, {ProblemInvalid, "canary.checks[0].maxDeviationPercent", field.ErrorTypeInvalid}}},
		{name: "a kind that is not a name", checks: `
  - {kind: "NCCL All Reduce", passed: true}
`, want: []found{{ProblemInvalid, "canary.checks[0].kind", field.ErrorTypeInvalid}}},
		{name: "no kind", checks: `
  - {passed: true}
`, want: []found{{ProblemInvalid, "canary.checks[0].kind", field.ErrorTypeRequired}}},
		{name: "a quoted figure does not load", checks: `
  - {kind: gemm, value: "650", unit: TFLOPS, baseline: 660, maxDeviationPercent: 2}
`, load: `canary.checks[0].value: the scalar "650" is not a number; write a plain number such as 182.5 (quotes make it a string)`},
		{name: "NaN does not load", checks: `
  - {kind: gemm, value: .nan, unit: TFLOPS, baseline: 660, maxDeviationPercent: 2}
`, load: `canary.checks[0].value: ".nan" is not a finite number`},
		{name: "an unknown field does not load", checks: `
  - {kind: gemm, value: 650, unit: TFLOPS, baseline: 660, maxDeviationPercent: 2, threshold: 3}
`, load: `unknown field "canary.checks[0].threshold"`},
		{name: "a yes for passed does not load", checks: `
  - {kind: cuda-basic, passed: yes}
`, load: `canary.checks[0].passed: "yes" is not a boolean`},
		{name: "a mapping for checks does not load", checks: `
    kind: gemm
`, load: "canary.checks: expected a sequence of checks"},
		{name: "kube-dc records have no checks", api: APIVersionKubeDC, checks: `
  - {kind: cuda-basic, passed: true}
`, load: "canary.checks: field is not allowed in kube-dc.io/v1alpha1 records"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := tc.api
			if api == "" {
				api = APIVersionGate
			}
			rec, err := Parse([]byte(recordWithChecks(api, tc.checks)))
			if tc.load != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.load)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, summarize(Check(rec, freshAt(testNow))))
			assert.Equal(t, tc.explained, rec.ExplainedDeviations())
		})
	}
}

// TestCanaryCheckMessages: a deviation names the kind, the figure, the
// baseline and the allowed deviation, and says what to do.
func TestCanaryCheckMessages(t *testing.T) {
	rec, err := Parse([]byte(recordWithChecks(APIVersionGate, `
  - {kind: nccl-allreduce, value: 170, unit: GB/s, baseline: 190, maxDeviationPercent: 5}
  - {kind: dcgm-diag, level: 3, passed: false}
`)))
	require.NoError(t, err)
	ps := Check(rec, freshAt(testNow)).Of(ProblemCanaryIncomplete)
	require.Len(t, ps, 2)
	assert.Equal(t, `canary.checks[0].value: Invalid value: "170": nccl-allreduce 170 GB/s is 10.5263% worse than the baseline 190 GB/s, 5% allowed: beyond the allowed deviation; find the cause, or explain it in canary.checks[0].explanation and have the record reviewed again`, ps[0].Error())
	assert.Equal(t, `canary.checks[1].passed: Invalid value: false: the canary's dcgm-diag level 3 did not pass; run it until it passes, or explain it in canary.checks[1].explanation and have the record reviewed again`, ps[1].Error())
}

// TestCanaryChecksRoundTrip: checks marshalled as YAML load back equal,
// so what a tool writes is what the gate reads.
func TestCanaryChecksRoundTrip(t *testing.T) {
	r := validRecord()
	yes, v, b, dev := true, 182.5, 190.0, 5.0
	r.Canary.Checks = []CanaryCheck{
		{Kind: "dcgm-diag", Level: 3, Passed: &yes},
		{Kind: "nccl-allreduce", Value: &v, Unit: "GB/s", Baseline: &b, MaxDeviationPercent: &dev, Explanation: "line one\nline two"},
	}
	out, err := sigsyaml.Marshal(r)
	require.NoError(t, err)
	again, err := parse(out)
	require.NoError(t, err, "%s", out)
	assert.Equal(t, r, again)
	assert.False(t, strings.Contains(string(out), `"182.5"`), "figures are written as numbers:\n%s", out)
}
