package gate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// changeScenario is the V100 wave under the fixture record: gpu-v100-03 the
// proven canary at the target, the Plan moving gpu-v100-01 and -02, the
// record carrying typed canary checks.
func changeScenario(t *testing.T) *scenario {
	s := safeScenario(t)
	s.cluster.Nodes = append(s.cluster.Nodes, v100(t, "gpu-v100-03", tupleTarget))
	prove(s, "gpu-v100-03")
	// The canary was moved by a Plan of its own, before this one.
	s.cluster.Proof.UpgradeJobs[0].Labels[upgradev1.LabelPlan] = "gpu-v100-03"
	rec := record(func(r *qualification.Record) {
		v, base, dev := 182.4, 185.0, 5.0
		r.Canary.Checks = []qualification.CanaryCheck{{Kind: "nccl-allreduce", Value: &v, Unit: "GB/s", Baseline: &base, MaxDeviationPercent: &dev}}
	})
	s.cluster.Records = map[string]RecordEntry{"v100-r580": approved(rec)}
	s.req.Plan = canaryPlan("gpu-v100-01", "gpu-v100-02")
	s.cluster.Plans = append(s.cluster.Plans, s.req.Plan)
	return s
}

func clearedV100() ClearedHalt {
	h := haltV100()
	h.Node, h.SeenAt = "gpu-v100-02", testNow.Add(-3*time.Hour)
	return ClearedHalt{Halt: h, Reason: "image pull deadline raised (INC-1)", ClearedAt: testNow.Add(-2 * time.Hour)}
}

// TestChangeRecordOf: each part of a rollout's change record comes from the
// Plan, the record, the nodes' proof and the halt record.
func TestChangeRecordOf(t *testing.T) {
	type want struct {
		rollout, requester string
		canary             []string
		nodes              map[string]string // node -> "tuple/proof"
		failures           []string          // "state node"
		from, to           qualification.Tuple
		firstSignal        string
	}
	wave := want{rollout: "Plan system-upgrade/gpu-v100-canary", requester: "alice", canary: []string{"gpu-v100-03"},
		nodes: map[string]string{"gpu-v100-01": "source/not-at-destination", "gpu-v100-02": "source/not-at-destination"},
		from:  tupleSource, to: tupleTarget, firstSignal: "the Plan's SUC Job for a node failed"}
	with := func(w want, mod func(*want)) want {
		w.nodes = map[string]string{"gpu-v100-01": w.nodes["gpu-v100-01"], "gpu-v100-02": w.nodes["gpu-v100-02"]}
		mod(&w)
		return w
	}
	cases := []struct {
		name    string
		mutate  func(s *scenario) ChangeSubject
		want    want
		wantErr string
	}{
		{name: "a wave that has not failed", mutate: func(s *scenario) ChangeSubject { return ChangeSubject{Plan: s.req.Plan} }, want: wave},
		{name: "a node at the target, unproven", mutate: func(s *scenario) ChangeSubject {
			setTuple(s.node("gpu-v100-01"), tupleTarget)
			return ChangeSubject{Plan: s.req.Plan}
		}, want: with(wave, func(w *want) { w.nodes["gpu-v100-01"] = "target/unproven" })},
		{name: "a node half way", mutate: func(s *scenario) ChangeSubject {
			s.node("gpu-v100-01").Status.NodeInfo.KernelVersion = tupleTarget.Kernel
			s.node("gpu-v100-01").Labels["feature.node.kubernetes.io/kernel-version.full"] = tupleTarget.Kernel
			return ChangeSubject{Plan: s.req.Plan}
		}, want: with(wave, func(w *want) {
			w.nodes["gpu-v100-01"] = "between/not-at-destination"
			w.failures = []string{"detected gpu-v100-01"} // half applied, the halt loop has not recorded it yet
		})},
		{name: "kept and cleared halts of the Plan", mutate: func(s *scenario) ChangeSubject {
			s.cluster.Halts = HaltRecord{Halts: map[string]Halt{keyV100: haltV100()}, Cleared: map[string]ClearedHalt{keyV100: clearedV100()}}
			return ChangeSubject{Plan: s.req.Plan}
		}, want: with(wave, func(w *want) { w.failures = []string{"cleared gpu-v100-02", "halted gpu-v100-01"} })},
		{name: "a clear annotation not yet applied", mutate: func(s *scenario) ChangeSubject {
			s.cluster.Halts = HaltRecord{Halts: map[string]Halt{keyV100: haltV100()}, Clears: map[string]string{keyV100: "rolled back"}}
			return ChangeSubject{Plan: s.req.Plan}
		}, want: with(wave, func(w *want) { w.failures = []string{"clear-requested gpu-v100-01"} })},
		{name: "a failed Job the halt loop has not recorded yet", mutate: func(s *scenario) ChangeSubject {
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{upgradeJob("gpu-v100-01", batchv1.JobFailed, testNow.Add(-time.Minute))}
			return ChangeSubject{Plan: s.req.Plan}
		}, want: with(wave, func(w *want) { w.failures = []string{"detected gpu-v100-01"} })},
		{name: "a halt of another Plan is not this rollout's", mutate: func(s *scenario) ChangeSubject {
			h := haltV100()
			h.Plan = "system-upgrade/other"
			s.cluster.Halts = HaltRecord{Halts: map[string]Halt{keyV100: h}}
			return ChangeSubject{Plan: s.req.Plan}
		}, want: wave},
		{name: "an unreadable halt record halts every rollout", mutate: func(s *scenario) ChangeSubject {
			s.cluster.Halts = HaltRecord{Name: "gpu-upgrade-gate/gpu-upgrade-gate-halts", Err: errors.New("the ConfigMap does not exist")}
			return ChangeSubject{Plan: s.req.Plan}
		}, want: with(wave, func(w *want) { w.failures = []string{"unreadable "} })},
		{name: "a node opted out after its Job ran is still the Plan's", mutate: func(s *scenario) ChangeSubject {
			s.req.Plan.Spec.NodeSelector.MatchExpressions[0].Values = []string{"gpu-v100-02"}
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{upgradeJob("gpu-v100-01", batchv1.JobComplete, testNow.Add(-10*time.Minute))}
			return ChangeSubject{Plan: s.req.Plan}
		}, want: wave},
		{name: "a rollback Plan moves target to source and never halts", mutate: func(s *scenario) ChangeSubject {
			s.req.Plan.Annotations[AnnotationRollback] = "true"
			return ChangeSubject{Plan: s.req.Plan}
		}, want: with(wave, func(w *want) {
			// No node outside the rollout runs the source: its first node there is the canary.
			w.from, w.to, w.canary = tupleTarget, tupleSource, []string{"gpu-v100-01"}
			w.nodes = map[string]string{"gpu-v100-01": "source/unproven", "gpu-v100-02": "source/unproven"}
			w.firstSignal = "none: a rollback Plan"
		})},
		{name: "the first node at the target is the canary when none was before", mutate: func(s *scenario) ChangeSubject {
			s.cluster.Nodes = s.cluster.Nodes[:len(s.cluster.Nodes)-1] // no gpu-v100-03
			setTuple(s.node("gpu-v100-02"), tupleTarget)
			return ChangeSubject{Plan: s.req.Plan}
		}, want: with(wave, func(w *want) { w.canary = []string{"gpu-v100-02"}; w.nodes["gpu-v100-02"] = "target/unproven" })},
		{name: "a driver change by its record: every node of the hardware", mutate: func(s *scenario) ChangeSubject {
			return ChangeSubject{Record: "v100-r580"}
		}, want: want{rollout: "driver change under record v100-r580", canary: []string{"gpu-v100-03"},
			nodes: map[string]string{"gpu-v100-01": "source/not-at-destination", "gpu-v100-02": "source/not-at-destination", "gpu-v100-03": "target/proven"},
			from:  tupleSource, to: tupleTarget, firstSignal: "a cordoned node of the hardware"}},
		{name: "a Plan without a record", mutate: func(s *scenario) ChangeSubject {
			delete(s.req.Plan.Annotations, AnnotationQualification)
			return ChangeSubject{Plan: s.req.Plan}
		}, wantErr: "names no record (annotation gpu-upgrade-gate.io/qualification)"},
		{name: "a record that is not loaded", mutate: func(*scenario) ChangeSubject { return ChangeSubject{Record: "nope"} },
			wantErr: "record ConfigMap gpu-upgrade-gate/nope (labelled gpu-upgrade-gate.io/qualification) is not loaded"},
		{name: "a record that does not load", mutate: func(s *scenario) ChangeSubject {
			s.cluster.Records["v100-r580"] = RecordEntry{Err: errors.New("canary.checks[0].unit: Unsupported value")}
			return ChangeSubject{Plan: s.req.Plan}
		}, wantErr: "does not load: canary.checks[0].unit: Unsupported value"},
		{name: "no subject", mutate: func(*scenario) ChangeSubject { return ChangeSubject{} }, wantErr: ErrNoRollout.Error()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := changeScenario(t)
			cr, err := s.cfg.ChangeRecordOf(s.cluster, tc.mutate(s), testNow)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			w := tc.want
			assert.Equal(t, w.rollout, cr.Rollout)
			assert.Equal(t, w.requester, cr.Requester)
			assert.Equal(t, w.canary, cr.Canary.Nodes)
			assert.Equal(t, []string{hwV100}, cr.Canary.Hardware)
			require.NotNil(t, cr.VersionDiff.From)
			assert.Equal(t, w.from, *cr.VersionDiff.From)
			assert.Equal(t, w.to, cr.VersionDiff.To)
			nodes := map[string]string{}
			for _, n := range cr.Nodes {
				nodes[n.Node] = n.Tuple + "/" + n.Proof
			}
			assert.Equal(t, w.nodes, nodes)
			var failures []string
			for _, f := range cr.Failures {
				failures = append(failures, f.State+" "+f.Node)
			}
			assert.Equal(t, w.failures, failures)
			require.NotEmpty(t, cr.RollbackTrigger.Signals)
			assert.True(t, strings.HasPrefix(cr.RollbackTrigger.Signals[0], w.firstSignal), cr.RollbackTrigger.Signals[0])
			assert.Equal(t, "v100-r580-canary-1@0123456789abcdef0123456789abcdef01234567", cr.Record.Ref)
			assert.Contains(t, cr.Record.Approval, "approved by bob")
			assert.Contains(t, cr.Objective, "change-record-42", "the change reference is the record's evidence")
			assert.Equal(t, "30m0s", cr.ObservationWindow.Soak)
		})
	}
}

// TestChangeRecordFailureDetail: a failure keeps who asked for the rollout
// and the clear's reason and time.
func TestChangeRecordFailureDetail(t *testing.T) {
	s := changeScenario(t)
	s.cluster.Halts = HaltRecord{Halts: map[string]Halt{}, Cleared: map[string]ClearedHalt{keyV100: clearedV100()}}
	cr, err := s.cfg.ChangeRecordOf(s.cluster, ChangeSubject{Plan: s.req.Plan}, testNow)
	require.NoError(t, err)
	require.Len(t, cr.Failures, 1)
	assert.Equal(t, ChangeFailure{State: FailureCleared, Node: "gpu-v100-02", Signal: haltV100().Signal, SeenAt: "2026-11-21T09:00:00Z",
		Plan: "system-upgrade/gpu-v100-canary", RequestedBy: "alice", ClearReason: "image pull deadline raised (INC-1)", ClearedAt: "2026-11-21T10:00:00Z"}, cr.Failures[0])
	assert.Contains(t, cr.Text(), `clear: "image pull deadline raised (INC-1)" at 2026-11-21T10:00:00Z`)
}

// TestChangeRecordEmptyFields: a complete record names no empty field, and
// each field emptied is named, so the demo's check can fail.
func TestChangeRecordEmptyFields(t *testing.T) {
	s := changeScenario(t)
	s.cluster.Halts = HaltRecord{Halts: map[string]Halt{keyV100: haltV100()}, Cleared: map[string]ClearedHalt{keyV100: clearedV100()}}
	full, err := s.cfg.ChangeRecordOf(s.cluster, ChangeSubject{Plan: s.req.Plan}, testNow)
	require.NoError(t, err)
	require.Empty(t, full.EmptyFields())
	cases := []struct {
		field string
		empty func(*ChangeRecord)
	}{
		{"rollout", func(r *ChangeRecord) { r.Rollout = "" }},
		{"objective", func(r *ChangeRecord) { r.Objective = "" }},
		{"requester", func(r *ChangeRecord) { r.Requester = "" }},
		{"versionDiff.from", func(r *ChangeRecord) { r.VersionDiff.From = nil }},
		{"versionDiff.changes", func(r *ChangeRecord) { r.VersionDiff.Changes = nil }},
		{"record.configMap", func(r *ChangeRecord) { r.Record.ConfigMap = "" }},
		{"record.approval", func(r *ChangeRecord) { r.Record.Approval = "" }},
		{"canary.hardware", func(r *ChangeRecord) { r.Canary.Hardware = nil }},
		{"canary.nodes", func(r *ChangeRecord) { r.Canary.Nodes = nil }},
		{"canary.figures", func(r *ChangeRecord) { r.Canary.Figures = nil }},
		{"nodes", func(r *ChangeRecord) { r.Nodes = nil }},
		{"nodes[gpu-v100-01].proof", func(r *ChangeRecord) { r.Nodes[0].Proof = "" }},
		{"observationWindow.soak", func(r *ChangeRecord) { r.ObservationWindow.Soak = "" }},
		{"rollbackTrigger.signals", func(r *ChangeRecord) { r.RollbackTrigger.Signals = nil }},
		{"rollbackTrigger.rollback", func(r *ChangeRecord) { r.RollbackTrigger.Rollback = "" }},
		{"failures", func(r *ChangeRecord) { r.Failures = nil }},
		{"failures[].clear", func(r *ChangeRecord) { r.Failures = r.Failures[1:] }},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			cr := *full
			cr.Nodes = append([]ChangeNode(nil), full.Nodes...)
			tc.empty(&cr)
			assert.Contains(t, cr.EmptyFields(), tc.field)
		})
	}
}

// TestChangeRecordText: the text names every part, so a reader of the CLI
// or the demo sees each field.
func TestChangeRecordText(t *testing.T) {
	s := changeScenario(t)
	s.cluster.Halts = HaltRecord{Halts: map[string]Halt{keyV100: haltV100()}}
	cr, err := s.cfg.ChangeRecordOf(s.cluster, ChangeSubject{Plan: s.req.Plan}, testNow)
	require.NoError(t, err)
	text := cr.Text()
	for _, want := range []string{"objective:", "requester:    alice", "version diff: kernel 6.8.0-134-generic -> 6.8.0-135-generic",
		"record:       v100-r580-canary-1@", "canary scope: hardware 10de:1db6/10de:124a", "canary nodes: gpu-v100-03",
		"figure:     nccl-allreduce 182.4 GB/s", "gpu-v100-01: tuple source", "observation window: soak 30m0s",
		"rollback trigger: halts on", "halted: node gpu-v100-01"} {
		assert.Contains(t, text, want)
	}
}

// TestChangeRecordNodeChecks: a node's own check results (proof.checks)
// appear in its change-record entry, a failure marked as one.
func TestChangeRecordNodeChecks(t *testing.T) {
	cases := []struct {
		name   string
		msg    string
		failed bool
		part   string
	}{
		{name: "within the threshold", msg: ncclOK, part: "184.5 GB/s"},
		{name: "below the threshold", msg: ncclLow, failed: true, part: "150 GB/s is 21.0526% worse than the baseline 190 GB/s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := changeScenario(t)
			s.cfg.Proof.Checks = []NodeCheck{{Kind: "nccl-allreduce"}}
			s.cluster.Records = map[string]RecordEntry{"v100-r580": approved(record(ncclBaseline))}
			setTuple(s.node("gpu-v100-01"), tupleTarget)
			prove(s, "gpu-v100-01")
			s.cluster.Proof.AllocationChecks = append(s.cluster.Proof.AllocationChecks,
				checkPod("nccl-gpu-v100-01", "gpu-v100-01", "nccl-allreduce", tc.msg, corev1.PodSucceeded, reachedAt.Add(5*time.Minute)))
			cr, err := s.cfg.ChangeRecordOf(s.cluster, ChangeSubject{Plan: s.req.Plan}, testNow)
			require.NoError(t, err)
			var got []ChangeNodeCheck
			for _, n := range cr.Nodes {
				if n.Node == "gpu-v100-01" {
					got = n.Checks
				}
			}
			require.Len(t, got, 1)
			assert.Equal(t, tc.failed, got[0].Failed)
			assert.Contains(t, got[0].Summary, tc.part)
			verdict := "check passed: "
			if tc.failed {
				verdict = "check FAILED (halts the rollout): "
			}
			assert.Contains(t, cr.Text(), verdict)
		})
	}
}

// TestChangeRecordTriggerNamesNodeChecks: each configured node check is a
// rollback trigger of its own; without any, none is listed.
func TestChangeRecordTriggerNamesNodeChecks(t *testing.T) {
	for _, checks := range [][]NodeCheck{nil, {{Kind: "nccl-allreduce"}, {Kind: "dcgm-diag", Level: 3}}} {
		s := changeScenario(t)
		s.cfg.Proof.Checks = checks
		cr, err := s.cfg.ChangeRecordOf(s.cluster, ChangeSubject{Plan: s.req.Plan}, testNow)
		require.NoError(t, err)
		n := 0
		for _, sig := range cr.RollbackTrigger.Signals {
			if strings.Contains(sig, " check beyond the record's allowed deviation") {
				n++
			}
		}
		assert.Equal(t, len(checks), n, "%v", cr.RollbackTrigger.Signals)
	}
}

// TestChangeRecordFirstNodeHasAReachedTime: with no canary before the
// rollout, the canary is its earliest node at the destination that has a
// reached time, not the first by name that has none.
func TestChangeRecordFirstNodeHasAReachedTime(t *testing.T) {
	s := changeScenario(t)
	s.cluster.Nodes = s.cluster.Nodes[:len(s.cluster.Nodes)-1] // no gpu-v100-03
	setTuple(s.node("gpu-v100-01"), tupleTarget)
	setTuple(s.node("gpu-v100-02"), tupleTarget)
	n := s.node("gpu-v100-01")
	for i := range n.Status.Conditions {
		n.Status.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	cr, err := s.cfg.ChangeRecordOf(s.cluster, ChangeSubject{Plan: s.req.Plan}, testNow)
	require.NoError(t, err)
	assert.Equal(t, []string{"gpu-v100-02"}, cr.Canary.Nodes)
}
