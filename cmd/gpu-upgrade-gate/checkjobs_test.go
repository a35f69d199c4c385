package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// The tools' output as they print it, for the example Jobs' scripts:
// dcgmi diag's result table, nccl-tests' summary lines, the GEMM's figure.
const (
	dcgmiPass = `+---------------------------+------------------------------------------------+
| Diagnostic                | Result                                         |
+===========================+================================================+
|-----  Deployment  --------+------------------------------------------------|
| Denylist                  | Pass                                           |
| Software                  | Pass                                           |
|-----  Integration  -------+------------------------------------------------|
| PCIe                      | Pass - All                                     |
|-----  Hardware  ----------+------------------------------------------------|
| Memory                    | Pass - All                                     |
+---------------------------+------------------------------------------------+`
	ncclSummary = `#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
  8589934592    2147483648     float     sum      -1    82451  104.18  182.32      0    82411  104.23  182.41      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 182.345 
#`
)

// TestExampleCheckJobs: each example check Job of deploy/examples/checks
// parses as a Job, tolerates SUC's cordon, is pinned to the node, carries
// the label the gate's default allocation-check selector watches and its
// kind, and its script, run with the tool's output (stubbed: no GPU here),
// leaves a result the gate reads as that kind; a failure is reported as one,
// and a run without a figure leaves no result.
func TestExampleCheckJobs(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	cases := []struct {
		file, kind string
		stubs      map[string]string // tool -> its output
		exit       map[string]int    // tool -> its exit code
		want       string            // the result, "" = none written
		failed     bool              // the Pod fails (non-zero exit)
	}{
		{file: "dcgm-diag-job.yaml", kind: "dcgm-diag", stubs: map[string]string{"nv-hostengine": "", "dcgmi": dcgmiPass},
			want: `{"kind":"dcgm-diag","level":2,"passed":true}`},
		{file: "dcgm-diag-job.yaml", kind: "dcgm-diag", stubs: map[string]string{"nv-hostengine": "", "dcgmi": dcgmiPass + "\n| Targeted Stress           | Fail - GPU: 3                                  |"},
			exit: map[string]int{"dcgmi": 226}, want: `{"kind":"dcgm-diag","level":2,"passed":false}`, failed: true},
		{file: "dcgm-diag-job.yaml", kind: "dcgm-diag", stubs: map[string]string{"nv-hostengine": "", "dcgmi": "Error: unable to connect to host engine"},
			exit: map[string]int{"dcgmi": 1}, failed: true},
		{file: "nccl-allreduce-job.yaml", kind: "nccl-allreduce", stubs: map[string]string{"all_reduce_perf": ncclSummary},
			want: `{"kind":"nccl-allreduce","value":182.345,"unit":"GB/s"}`},
		{file: "nccl-allreduce-job.yaml", kind: "nccl-allreduce", stubs: map[string]string{"all_reduce_perf": "NCCL failure common.cu:1012 'unhandled system error'"},
			exit: map[string]int{"all_reduce_perf": 3}, failed: true},
		{file: "gemm-job.yaml", kind: "gemm", stubs: map[string]string{"python3": "97.3"}, want: `{"kind":"gemm","value":97.3,"unit":"TFLOPS"}`},
		{file: "gemm-job.yaml", kind: "gemm", stubs: map[string]string{"python3": "CUDA error: no kernel image is available"}, failed: true},
	}
	for _, tc := range cases {
		t.Run(tc.file+" "+tc.want, func(t *testing.T) {
			b, err := os.ReadFile(ex + "checks/" + tc.file)
			require.NoError(t, err)
			var job batchv1.Job
			require.NoError(t, yaml.UnmarshalStrict(b, &job))
			assert.Equal(t, "Job", job.Kind)
			pod := job.Spec.Template
			assert.Equal(t, map[string]string{"gpu-upgrade-gate.io/allocation-check": "true", gate.LabelCheck: tc.kind}, pod.Labels)
			assert.Equal(t, "NODE", pod.Spec.NodeName, "pinned to the node by the sed of its header")
			assert.Contains(t, pod.Spec.Tolerations, corev1.Toleration{Key: gate.TaintUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}, "tolerates SUC's cordon")
			require.Len(t, pod.Spec.Containers, 1)
			c := pod.Spec.Containers[0]
			assert.Equal(t, corev1.TerminationMessageReadFile, c.TerminationMessagePolicy, "the result, never the logs")
			assert.Positive(t, c.Resources.Limits.Name("nvidia.com/gpu", "0").Value())
			require.Len(t, c.Command, 3)
			require.Equal(t, []string{"sh", "-c"}, c.Command[:2])

			dir := t.TempDir()
			for tool, out := range tc.stubs {
				script := "#!/bin/sh\ncat <<'OUT'\n" + out + "\nOUT\nexit " + strconv.Itoa(tc.exit[tool]) + "\n"
				require.NoError(t, os.WriteFile(filepath.Join(dir, tool), []byte(script), 0o755))
			}
			result := filepath.Join(dir, "termination-log")
			cmd := exec.Command("sh", "-c", c.Command[2])
			cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin", "RESULT_FILE=" + result}
			for _, e := range c.Env {
				cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
			}
			out, err := cmd.CombinedOutput()
			if tc.failed {
				assert.Error(t, err, "%s", out)
			} else {
				require.NoError(t, err, "%s", out)
			}
			msg, rerr := os.ReadFile(result)
			if tc.want == "" {
				assert.True(t, os.IsNotExist(rerr), "no result is written without a figure: %s", msg)
				return
			}
			require.NoError(t, rerr)
			assert.JSONEq(t, tc.want, string(msg))
			res, ferr := qualification.ParseCheckResult(field.NewPath("terminationMessage"), string(msg))
			require.Nil(t, ferr)
			assert.Equal(t, tc.kind, res.Kind)

			// The Pod the Job controller would create from the template, its
			// status as the kubelet writes it: the gate's default selector picks it.
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: job.Namespace, Labels: pod.Labels}, Spec: pod.Spec,
				Status: corev1.PodStatus{Phase: corev1.PodSucceeded, StartTime: &metav1.Time{Time: time.Now()}}}
			assert.Len(t, gate.DefaultConfig().ProofFactsOf([]*corev1.Pod{p}, nil).AllocationChecks, 1)
		})
	}
}
