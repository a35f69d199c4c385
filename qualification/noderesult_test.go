package qualification

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestParseCheckResult: a check Pod's termination message is read
// strictly; each refusal names the field, the value seen and what is
// expected.
func TestParseCheckResult(t *testing.T) {
	cases := []struct {
		name, msg, want string // want "" = accepted
	}{
		{name: "measured", msg: `{"kind":"nccl-allreduce","value":182.4,"unit":"GB/s"}`},
		{name: "pass/fail", msg: `{"kind":"dcgm-diag","level":2,"passed":true}`},
		{name: "a team's own kind in a known unit", msg: `{"kind":"stream-triad","value":790,"unit":"GiB/s"}`},
		{name: "a trailing newline", msg: "{\"kind\":\"gemm\",\"value\":310,\"unit\":\"TFLOPS\"}\n"},
		{name: "two objects", msg: `{"kind":"gemm","value":310,"unit":"TFLOPS"}{"kind":"gemm","value":1,"unit":"TFLOPS"}`, want: "expected one JSON object and nothing after it"},
		{name: "a quoted number", msg: `{"kind":"gemm","value":"310","unit":"TFLOPS"}`, want: "cannot unmarshal string"},
		{name: "a negative figure", msg: `{"kind":"gemm","value":-1,"unit":"TFLOPS"}`, want: `result.value: Invalid value: "-1": expected a number of 0 or more`},
		{name: "no unit", msg: `{"kind":"gemm","value":310}`, want: "result.unit: Required value: one of TFLOPS"},
		{name: "an unknown unit of a team's kind", msg: `{"kind":"stream-triad","value":790,"unit":"bananas"}`, want: `result.unit: Unsupported value: "bananas"`},
		{name: "no figure", msg: `{"kind":"gemm","unit":"TFLOPS"}`, want: "result.value: Required value"},
		{name: "neither", msg: `{"kind":"gemm"}`, want: "result: Required value: a result reports passed"},
		{name: "both", msg: `{"kind":"stream-triad","passed":true,"value":1,"unit":"GB/s"}`, want: "result.passed: Forbidden: a result is either pass/fail"},
		{name: "passed for a measured kind", msg: `{"kind":"nccl-allreduce","passed":true}`, want: "result.passed: Forbidden: nccl-allreduce (NCCL all-reduce bus bandwidth) is measured"},
		{name: "dcgm-diag without a level", msg: `{"kind":"dcgm-diag","passed":true}`, want: "result.level: Invalid value: 0"},
		{name: "a level elsewhere", msg: `{"kind":"gemm","level":1,"value":310,"unit":"TFLOPS"}`, want: "result.level: Forbidden: only a dcgm-diag result has a level"},
		{name: "a bad kind", msg: `{"kind":"GEMM","value":310,"unit":"TFLOPS"}`, want: `result.kind: Invalid value: "GEMM"`},
		{name: "a repeated key", msg: `{"kind":"gemm","value":1,"unit":"TFLOPS","value":900}`, want: "result.value: Duplicate value"},
		// encoding/json matches keys case-insensitively (with Unicode
		// folding): a respelled key is the same field, read last.
		{name: "a key repeated in another case", msg: `{"kind":"dcgm-diag","level":2,"passed":false,"Passed":true}`, want: "result.Passed: Duplicate value"},
		{name: "a key repeated in a folded spelling", msg: `{"kind":"dcgm-diag","level":2,"passed":false,"paſſed":true}`, want: "Duplicate value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCheckResult(field.NewPath("result"), tc.msg)
			if tc.want == "" {
				assert.Nil(t, err)
				return
			}
			require.NotNil(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
