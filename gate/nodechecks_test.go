package gate

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// checkJob is the controller reference the Job controller puts on its Pods.
var checkJob = metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "nccl-check", UID: "0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d", Controller: new(true), BlockOwnerDeletion: new(true)}

// checkPod is a check Pod of kind on node, started at started, whose
// container left msg as its termination message (as the kubelet writes it).
func checkPod(name, node, kind, msg string, phase corev1.PodPhase, started time.Time) *corev1.Pod {
	st := metav1.NewTime(started)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-upgrade-gate", Name: name, OwnerReferences: []metav1.OwnerReference{checkJob},
			Labels: map[string]string{"gpu-upgrade-gate.io/allocation-check": "true", LabelCheck: kind}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "check",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}}},
		Status: corev1.PodStatus{Phase: phase, StartTime: &st, ContainerStatuses: []corev1.ContainerStatus{{Name: "check",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg, FinishedAt: metav1.NewTime(started.Add(10 * time.Minute))}}}}},
	}
}

// ncclBaseline: the record's canary measured 186 GB/s on the target against
// 190 GB/s on the source, 5% allowed.
func ncclBaseline(r *qualification.Record) {
	r.Canary.Checks = []qualification.CanaryCheck{{Kind: "nccl-allreduce", Value: new(186.0), Unit: "GB/s", Baseline: new(190.0), MaxDeviationPercent: new(5.0)}}
}

const ncclOK, ncclLow = `{"kind":"nccl-allreduce","value":184.5,"unit":"GB/s"}`, `{"kind":"nccl-allreduce","value":150,"unit":"GB/s"}`

// TestNodeChecksProof (issue 26 item 2): with proof.checks naming a kind,
// a node at the target is proven only by a check Pod of that kind, owned by
// a Job, started after the node reached its tuple, whose result is within
// the record's allowed deviation of its baseline; a figure beyond it is a
// failure naming the Pod, the kind, the figure and the baseline; anything
// that does not count is named. Without proof.checks nothing changes.
func TestNodeChecksProof(t *testing.T) {
	const node = "gpu-v100-03"
	after := reachedAt.Add(5 * time.Minute)
	pod := func(msg string) *corev1.Pod {
		return checkPod("nccl-"+node, node, "nccl-allreduce", msg, corev1.PodSucceeded, after)
	}
	cases := []struct {
		name   string
		checks []NodeCheck
		pods   []*corev1.Pod
		mutate func(s *scenario)
		want   string // a Missing entry holds it; "" = proven
		fail   string // a failure holds it
		passes string // the passing result says it
	}{
		{name: "no checks configured: the allocation check alone, as before"},
		{name: "within the threshold: proven", checks: []NodeCheck{{Kind: "nccl-allreduce"}}, pods: []*corev1.Pod{pod(ncclOK)},
			passes: "check Pod gpu-upgrade-gate/nccl-gpu-v100-03: nccl-allreduce 184.5 GB/s is 2.89474% worse than the baseline 190 GB/s, 5% allowed (baseline of record v100-r580-canary-1)"},
		{name: "better than the baseline: proven", checks: []NodeCheck{{Kind: "nccl-allreduce"}}, pods: []*corev1.Pod{pod(`{"kind":"nccl-allreduce","value":230,"unit":"GB/s"}`)}},
		{name: "below the threshold: a failure", checks: []NodeCheck{{Kind: "nccl-allreduce"}}, pods: []*corev1.Pod{pod(ncclLow)},
			want: "check nccl-allreduce failed: check Pod gpu-upgrade-gate/nccl-gpu-v100-03: nccl-allreduce 150 GB/s is 21.0526% worse than the baseline 190 GB/s, 5% allowed (baseline of record v100-r580-canary-1)",
			fail: "nccl-allreduce 150 GB/s is 21.0526% worse than the baseline 190 GB/s"},
		{name: "below the threshold on a Failed Pod: a failure", checks: []NodeCheck{{Kind: "nccl-allreduce"}},
			pods: []*corev1.Pod{checkPod("nccl-"+node, node, "nccl-allreduce", ncclLow, corev1.PodFailed, after)}, want: "check nccl-allreduce failed", fail: "150 GB/s"},
		{name: "a pass after a failure does not hide it", checks: []NodeCheck{{Kind: "nccl-allreduce"}},
			pods: []*corev1.Pod{pod(ncclLow), checkPod("nccl-rerun", node, "nccl-allreduce", ncclOK, corev1.PodSucceeded, after.Add(time.Hour))}, want: "check nccl-allreduce failed", fail: "150 GB/s"},
		{name: "no check Pod", checks: []NodeCheck{{Kind: "nccl-allreduce"}},
			want: "no nccl-allreduce check (Pod labelled gpu-upgrade-gate.io/check=nccl-allreduce, controlled by a Job) passed after 2026-11-21T10:01:00Z: none on the node"},
		{name: "on another node", checks: []NodeCheck{{Kind: "nccl-allreduce"}}, pods: []*corev1.Pod{checkPod("nccl-x", "gpu-v100-02", "nccl-allreduce", ncclOK, corev1.PodSucceeded, after)},
			want: "none on the node"},
		{name: "not owned by a Job", checks: []NodeCheck{{Kind: "nccl-allreduce"}}, pods: []*corev1.Pod{func() *corev1.Pod {
			p := pod(ncclOK)
			p.OwnerReferences = nil
			return p
		}()}, want: "gpu-upgrade-gate/nccl-gpu-v100-03 is not controlled by a Job: not counted"},
		{name: "a forged controller: the Job's name, another UID", checks: []NodeCheck{{Kind: "nccl-allreduce"}}, pods: []*corev1.Pod{func() *corev1.Pod {
			p := pod(ncclOK)
			p.OwnerReferences[0].UID = "0badc0de-0000-4000-8000-000000000000"
			return p
		}()}, want: "gpu-upgrade-gate/nccl-gpu-v100-03 names Job nccl-check as its controller, but no Job of that name and UID is in gpu-upgrade-gate: not counted"},
		{name: "a forged controller: a Job that is not there", checks: []NodeCheck{{Kind: "nccl-allreduce"}}, pods: []*corev1.Pod{pod(ncclOK)},
			mutate: func(s *scenario) { s.cluster.Proof.CheckJobs = nil }, want: "names Job nccl-check as its controller, but no Job of that name and UID"},
		{name: "a forged failure does not halt", checks: []NodeCheck{{Kind: "nccl-allreduce"}}, pods: []*corev1.Pod{func() *corev1.Pod {
			p := pod(ncclLow)
			p.OwnerReferences[0].UID = "0badc0de-0000-4000-8000-000000000000"
			return p
		}()}, want: "no nccl-allreduce check (Pod labelled gpu-upgrade-gate.io/check=nccl-allreduce, controlled by a Job) passed"},
		{name: "owned by a ReplicaSet", checks: []NodeCheck{{Kind: "nccl-allreduce"}}, pods: []*corev1.Pod{func() *corev1.Pod {
			p := pod(ncclOK)
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "x", UID: "u", Controller: new(true)}}
			return p
		}()}, want: "is not controlled by a Job"},
		{name: "started before the node reached its tuple", checks: []NodeCheck{{Kind: "nccl-allreduce"}},
			pods: []*corev1.Pod{checkPod("nccl-"+node, node, "nccl-allreduce", ncclOK, corev1.PodSucceeded, reachedAt.Add(-time.Minute))}, want: "started before the node reached its tuple"},
		{name: "no termination message", checks: []NodeCheck{{Kind: "nccl-allreduce"}}, pods: []*corev1.Pod{pod("")},
			want: "nccl-gpu-v100-03 is Succeeded: no container left a termination message (the result)"},
		{name: "two containers left a message", checks: []NodeCheck{{Kind: "nccl-allreduce"}}, pods: []*corev1.Pod{func() *corev1.Pod {
			p := pod(ncclOK)
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "sidecar", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: ncclOK}}})
			return p
		}()}, want: "several containers left a termination message (check, sidecar)"},
		{name: "not JSON", checks: []NodeCheck{{Kind: "nccl-allreduce"}}, pods: []*corev1.Pod{pod("Avg bus bandwidth: 184.5")},
			want: `terminationMessage: Invalid value: "Avg bus bandwidth: 184.5": expected one JSON object`},
		{name: "an unknown field", checks: []NodeCheck{{Kind: "nccl-allreduce"}}, pods: []*corev1.Pod{pod(`{"kind":"nccl-allreduce","value":184.5,"unit":"GB/s","baseline":100}`)},
			want: `unknown field "baseline"`},
		{name: "an unknown unit", checks: []NodeCheck{{Kind: "nccl-allreduce"}}, pods: []*corev1.Pod{pod(`{"kind":"nccl-allreduce","value":184.5,"unit":"GB/sec"}`)},
			want: `terminationMessage.unit: Unsupported value: "GB/sec": supported values: "GB/s"`},
		{name: "a repeated key", checks: []NodeCheck{{Kind: "nccl-allreduce"}}, pods: []*corev1.Pod{pod(`{"kind":"nccl-allreduce","value":100,"value":184.5,"unit":"GB/s"}`)},
			want: "terminationMessage.value: Duplicate value"},
		{name: "the result's kind is not the label's", checks: []NodeCheck{{Kind: "nccl-allreduce"}}, pods: []*corev1.Pod{pod(`{"kind":"gemm","value":300,"unit":"TFLOPS"}`)},
			want: `reports kind "gemm" but is labelled gpu-upgrade-gate.io/check=nccl-allreduce`},
		{name: "no baseline in the record", checks: []NodeCheck{{Kind: "gemm"}}, pods: []*corev1.Pod{checkPod("gemm-"+node, node, "gemm", `{"kind":"gemm","value":300,"unit":"TFLOPS"}`, corev1.PodSucceeded, after)},
			want: "reports gemm 300 TFLOPS, but no record of the node's hardware and tuple holds a measured gemm baseline in canary.checks"},
		{name: "a baseline in another unit", checks: []NodeCheck{{Kind: "stream-triad"}}, mutate: func(s *scenario) {
			s.cluster.Records["v100-r580"].Record.Canary.Checks = append(s.cluster.Records["v100-r580"].Record.Canary.Checks,
				qualification.CanaryCheck{Kind: "stream-triad", Value: new(800.0), Unit: "GB/s", Baseline: new(810.0), MaxDeviationPercent: new(3.0)})
		}, pods: []*corev1.Pod{checkPod("triad-"+node, node, "stream-triad", `{"kind":"stream-triad","value":790,"unit":"GiB/s"}`, corev1.PodSucceeded, after)},
			want: "record v100-r580-canary-1's baseline is in GB/s, the Pod reports GiB/s: not counted"},
		{name: "within the threshold but the Pod Failed", checks: []NodeCheck{{Kind: "nccl-allreduce"}},
			pods: []*corev1.Pod{checkPod("nccl-"+node, node, "nccl-allreduce", ncclOK, corev1.PodFailed, after)}, want: "within the baseline but is Failed: not counted"},
		{name: "the record of another hardware holds no baseline for it", checks: []NodeCheck{{Kind: "nccl-allreduce"}}, mutate: func(s *scenario) {
			s.cluster.Records["v100-r580"].Record.Hardware = []string{hwH200}
		}, pods: []*corev1.Pod{pod(ncclOK)}, want: "no record of the node's hardware and tuple holds a measured nccl-allreduce baseline"},
		{name: "dcgm-diag at a higher level passed: proven", checks: []NodeCheck{{Kind: "dcgm-diag", Level: 2}},
			pods:   []*corev1.Pod{checkPod("dcgm-"+node, node, "dcgm-diag", `{"kind":"dcgm-diag","level":3,"passed":true}`, corev1.PodSucceeded, after)},
			passes: "check Pod gpu-upgrade-gate/dcgm-gpu-v100-03: dcgm-diag level 3 passed"},
		{name: "dcgm-diag below the required level", checks: []NodeCheck{{Kind: "dcgm-diag", Level: 2}},
			pods: []*corev1.Pod{checkPod("dcgm-"+node, node, "dcgm-diag", `{"kind":"dcgm-diag","level":1,"passed":true}`, corev1.PodSucceeded, after)},
			want: "ran dcgm-diag level 1, below the required level 2: not counted"},
		{name: "dcgm-diag did not pass: a failure", checks: []NodeCheck{{Kind: "dcgm-diag", Level: 2}},
			pods: []*corev1.Pod{checkPod("dcgm-"+node, node, "dcgm-diag", `{"kind":"dcgm-diag","level":2,"passed":false}`, corev1.PodFailed, after)},
			want: "check dcgm-diag level 2 failed: check Pod gpu-upgrade-gate/dcgm-gpu-v100-03: dcgm-diag level 2 did not pass", fail: "dcgm-diag level 2 did not pass"},
		{name: "a figure for a pass/fail kind", checks: []NodeCheck{{Kind: "dcgm-diag", Level: 2}},
			pods: []*corev1.Pod{checkPod("dcgm-"+node, node, "dcgm-diag", `{"kind":"dcgm-diag","level":2,"value":1,"unit":"GB/s"}`, corev1.PodSucceeded, after)},
			want: "terminationMessage.value: Forbidden: dcgm-diag (DCGM diagnostics (dcgmi diag -r <level>)) is pass/fail"},
		{name: "two kinds required, one passed", checks: []NodeCheck{{Kind: "nccl-allreduce"}, {Kind: "dcgm-diag", Level: 1}}, pods: []*corev1.Pod{pod(ncclOK)},
			want: "no dcgm-diag level 1 check"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			s.cluster.Records["v100-r580"] = approved(record(ncclBaseline))
			n := v100(t, node, tupleTarget)
			s.cluster.Nodes = append(s.cluster.Nodes, n)
			prove(s, node)
			s.cfg.Proof.Checks = tc.checks
			// The Pods come through the allocation check's selector, as the
			// webhook's cache and the CLI's snapshot pick them.
			s.cluster.Proof.AllocationChecks = append(s.cluster.Proof.AllocationChecks, s.cfg.ProofFactsOf(tc.pods, nil).AllocationChecks...)
			if tc.mutate != nil {
				tc.mutate(s)
			}
			p := s.cfg.Prove(s.cluster, n, testNow)
			if tc.want == "" {
				assert.True(t, p.Proven(), "%v", p.Missing)
				assert.Empty(t, p.Failures)
				assert.Len(t, p.Checks, len(tc.checks), "one passing result per check")
				if tc.passes != "" {
					assert.Equal(t, []string{tc.passes}, p.Checks)
				}
				return
			}
			require.False(t, p.Proven())
			assert.Contains(t, strings.Join(p.Missing, "\n"), tc.want)
			if tc.fail == "" {
				assert.Empty(t, p.Failures)
				return
			}
			require.Len(t, p.Failures, 1)
			assert.Contains(t, p.Failures[0].Signal, tc.fail)
			assert.Equal(t, after.Add(10*time.Minute), p.Failures[0].At, "dated by the check's finish")
		})
	}
}

// TestNodeCheckHaltsTheRollout: a node a stored forward Plan moved to the
// target whose NCCL figure is below the baseline's threshold halts its
// hardware's rollout, naming the node, the kind, the figure and the
// baseline; the next Plan of that hardware is refused (RolloutHalted) and
// its proof is missing (PreviousNodeUnproven). The neighbouring case: a
// figure within the threshold proves the node and halts nothing.
func TestNodeCheckHaltsTheRollout(t *testing.T) {
	const node = "gpu-v100-01"
	cases := []struct {
		name string
		msg  string
		halt string
	}{
		{name: "below the threshold", msg: ncclLow,
			halt: "node gpu-v100-01: check Pod gpu-upgrade-gate/nccl-gpu-v100-01: nccl-allreduce 150 GB/s is 21.0526% worse than the baseline 190 GB/s, 5% allowed (baseline of record v100-r580-canary-1)"},
		{name: "within the threshold", msg: ncclOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			s.cfg.Proof.Checks = []NodeCheck{{Kind: "nccl-allreduce"}}
			s.cluster.Records["v100-r580"] = approved(record(ncclBaseline))
			stored := canaryPlan(node)
			s.cluster.Plans = []*upgradev1.Plan{stored}
			setTuple(s.node(node), tupleTarget)
			prove(s, node)
			finished := reachedAt.Add(15 * time.Minute)
			s.cluster.Proof.AllocationChecks = append(s.cluster.Proof.AllocationChecks,
				checkPod("nccl-"+node, node, "nccl-allreduce", tc.msg, corev1.PodSucceeded, reachedAt.Add(5*time.Minute)))

			halts := DetectHalts(s.cfg, s.cluster, testNow)
			// The next canary of the hardware.
			s.req.Plan = canaryPlan("gpu-v100-02")
			s.req.Plan.Name = "gpu-v100-next"
			d := s.decide()
			if tc.halt == "" {
				assert.Empty(t, halts)
				assert.NotContains(t, d.Codes(), CodeRolloutHalted)
				assert.NotContains(t, d.Codes(), CodePreviousNodeUnproven)
				assert.Contains(t, d.Proofs, node+"=proven")
				return
			}
			require.Len(t, halts, 1)
			assert.Equal(t, tc.halt, "node "+halts[0].Node+": "+halts[0].Signal)
			assert.Equal(t, finished, halts[0].SeenAt)
			assert.Equal(t, "system-upgrade/gpu-v100-canary", halts[0].Plan)
			require.Contains(t, d.Codes(), CodeRolloutHalted)
			require.Contains(t, d.Codes(), CodePreviousNodeUnproven)
			assert.Contains(t, d.Message(), "the rollout of hardware "+hwV100+" is halted: "+tc.halt)
			assert.Contains(t, d.Message(), "check nccl-allreduce failed")
		})
	}
}

// TestNodeCheckConfig: proof.checks names kinds of the record's vocabulary,
// each once, a level for dcgm-diag (1-4) and only for it.
func TestNodeCheckConfig(t *testing.T) {
	cases := []struct {
		name         string
		checks       []NodeCheck
		anyNamespace bool   // proof.allocationCheck.namespace left empty
		want         string // "" = valid
	}{
		{name: "none"},
		{name: "none, check Pods of any namespace", anyNamespace: true},
		{name: "checks, check Pods of any namespace", checks: []NodeCheck{{Kind: "nccl-allreduce"}}, anyNamespace: true,
			want: "proof.allocationCheck.namespace: Required value: proof.checks is set and a check's figure can halt a rollout"},
		{name: "known kinds", checks: []NodeCheck{{Kind: "nccl-allreduce"}, {Kind: "gemm"}, {Kind: "dcgm-diag", Level: 2}}},
		{name: "a team's own kind", checks: []NodeCheck{{Kind: "stream-triad"}}},
		{name: "a bad kind", checks: []NodeCheck{{Kind: "NCCL AllReduce"}}, want: `proof.checks[0].kind: Invalid value: "NCCL AllReduce": expected lowercase letters`},
		{name: "dcgm-diag without a level", checks: []NodeCheck{{Kind: "dcgm-diag"}}, want: "proof.checks[0].level: Invalid value: 0: a dcgm-diag check names the lowest DCGM diagnostic level"},
		{name: "a level elsewhere", checks: []NodeCheck{{Kind: "gemm", Level: 2}}, want: "proof.checks[0].level: Forbidden: only a dcgm-diag check has a level"},
		{name: "twice", checks: []NodeCheck{{Kind: "gemm"}, {Kind: "gemm"}}, want: `proof.checks[1].kind: Duplicate value: "gemm"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultProofConfig()
			p.Checks, p.AllocationCheck.Namespace = tc.checks, "gpu-upgrade-gate"
			if tc.anyNamespace {
				p.AllocationCheck.Namespace = ""
			}
			errs := p.Validate(field.NewPath("proof"))
			if tc.want == "" {
				assert.Empty(t, errs)
				return
			}
			require.NotEmpty(t, errs)
			assert.Contains(t, errs.ToAggregate().Error(), tc.want)
		})
	}
}
