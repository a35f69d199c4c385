package gate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// nonRKE2 turns the canary Plan into a driver/kernel Plan of a custom image,
// which carries its own version string.
func nonRKE2(s *scenario) {
	s.req.Plan.Spec.Upgrade.Image = "registry.example.com/platform/gpu-node-upgrade"
	s.req.Plan.Spec.Version = "r580-130"
}

func useRecord(mod ...func(*qualification.Record)) func(*scenario) {
	return func(s *scenario) { s.cluster.Records["v100-r580"] = approved(record(mod...)) }
}

// ncclCheck gives the record an NCCL all-reduce check of value GB/s
// against a 190 GB/s baseline, 5% allowed.
func ncclCheck(value float64, explanation string) func(*qualification.Record) {
	return func(r *qualification.Record) {
		base, dev := 190.0, 5.0
		r.Canary.Checks = []qualification.CanaryCheck{{Kind: "nccl-allreduce", Value: &value, Unit: "GB/s", Baseline: &base, MaxDeviationPercent: &dev, Explanation: explanation}}
	}
}

// TestExplainedDeviationShown: a Plan using a record with an explained
// deviation is allowed, and its answer says so (warning and record info).
func TestExplainedDeviationShown(t *testing.T) {
	s := safeScenario(t)
	useRecord(ncclCheck(170, "NVLink switch firmware differs; INC-77"))(s)
	d := s.decide()
	require.True(t, d.Allowed, "%+v", d.Blockers)
	want := "nccl-allreduce 170 GB/s is 10.5263% worse than the baseline 190 GB/s, 5% allowed; explained: NVLink switch firmware differs; INC-77"
	require.NotNil(t, d.Record)
	assert.Equal(t, []string{want}, d.Record.Explained)
	assert.Contains(t, strings.Join(d.Warnings, "\n"), "record v100-r580-canary-1: canary check "+want)
}

// TestMixedPlanNamesNodes: the MixedPlan blocker names the selected GPU and
// non-GPU nodes by name, the first five of each in name order, whatever
// order the fleet lists them in; a Plan of CPU nodes only names none.
func TestMixedPlanNamesNodes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []string
		want  string // "": no MixedPlan
	}{
		{name: "GPU and CPU nodes: each named in order", nodes: []string{"gpu-v100-02", "gpu-v100-01", "cpu-07", "cpu-03", "cpu-01", "cpu-05", "cpu-06", "cpu-02", "cpu-04"},
			want: "the Plan selects 2 GPU node(s) (gpu-v100-01,gpu-v100-02) and 7 non-GPU node(s) (cpu-01,cpu-02,cpu-03,cpu-04,cpu-05 and 2 more)"},
		{name: "CPU nodes only: none named", nodes: []string{"cpu-07", "cpu-03", "cpu-01", "cpu-05", "cpu-06", "cpu-02", "cpu-04"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			for _, n := range []string{"cpu-07", "cpu-03", "cpu-05", "cpu-06", "cpu-02", "cpu-04"} { // not in name order
				s.cluster.Nodes = append(s.cluster.Nodes, cpuNode(n))
			}
			s.req.Plan = canaryPlan(tc.nodes...)
			d := s.decide()
			if tc.want == "" {
				assert.NotContains(t, d.Codes(), CodeMixedPlan, d.Message())
				return
			}
			assert.Contains(t, d.Codes(), CodeMixedPlan, d.Message())
			assert.Contains(t, d.Message(), tc.want)
		})
	}
}

func TestPlanRules(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*scenario)
		want   []Code // nil: allowed
	}{
		{name: "safe canary is allowed", mutate: func(*scenario) {}},
		{name: "plan selecting only CPU nodes is allowed", mutate: func(s *scenario) {
			s.req.Plan = canaryPlan("cpu-01")
			s.req.Plan.Annotations = nil
			s.req.Plan.Spec.Concurrency = 3
		}},
		{name: "MixedPlan: GPU and CPU nodes", mutate: func(s *scenario) { s.req.Plan = canaryPlan("gpu-v100-01", "cpu-01") }, want: []Code{CodeMixedPlan}},
		{name: "UnpinnedVersion: channel only", mutate: func(s *scenario) {
			s.req.Plan.Spec.Version, s.req.Plan.Spec.Channel = "", "https://update.rke2.io/v1-release/channels/stable"
		}, want: []Code{CodeUnpinnedVersion}},
		{name: "ConcurrencyNotSerial: 2", mutate: func(s *scenario) { s.req.Plan.Spec.Concurrency = 2 }, want: []Code{CodeConcurrencyNotSerial}},
		{name: "ConcurrencyNotSerial: 0 (SUC selects nothing, still not serial)", mutate: func(s *scenario) { s.req.Plan.Spec.Concurrency = 0 }, want: []Code{CodeConcurrencyNotSerial}},
		{name: "CordonRequired: neither cordon nor drain", mutate: func(s *scenario) { s.req.Plan.Spec.Cordon = false }, want: []Code{CodeCordonRequired}},
		{name: "drain without cordon is allowed (drain implies cordon)", mutate: func(s *scenario) {
			s.req.Plan.Spec.Cordon, s.req.Plan.Spec.Drain = false, &upgradev1.DrainSpec{Force: true}
		}},
		{name: "SelectorInvalid: unknown operator", mutate: func(s *scenario) {
			s.req.Plan.Spec.NodeSelector.MatchExpressions[0].Operator = "Near"
		}, want: []Code{CodeSelectorInvalid}},
		{name: "RecordMissing: no annotation", mutate: func(s *scenario) { delete(s.req.Plan.Annotations, AnnotationQualification) }, want: []Code{CodeRecordMissing}},
		{name: "RecordMissing: no such ConfigMap", mutate: func(s *scenario) { s.req.Plan.Annotations[AnnotationQualification] = "v100-r999" }, want: []Code{CodeRecordMissing}},
		{name: "RecordInvalid: does not load", mutate: func(s *scenario) {
			s.cluster.Records["v100-r580"] = RecordEntry{Err: errors.New(`canary.allocationPassed: "yes" is not a boolean`)}
		}, want: []Code{CodeRecordInvalid}},
		{name: "RecordInvalid: short sourceRevision", mutate: useRecord(func(r *qualification.Record) { r.SourceRevision = "abc123" }), want: []Code{CodeRecordInvalid}},
		{name: "RecordInvalid: rollback without source", mutate: func(s *scenario) {
			useRecord(kubeDC)(s)
			s.req.Plan.Annotations[AnnotationRollback] = "true"
		}, want: []Code{CodeRecordInvalid}},
		{name: "RecordNotQualified: draft", mutate: useRecord(func(r *qualification.Record) { r.State = "draft" }), want: []Code{CodeRecordNotQualified}},
		{name: "CanaryIncomplete: monitoring failed", mutate: useRecord(func(r *qualification.Record) { r.Canary.MonitoringPassed = false }), want: []Code{CodeCanaryIncomplete}},
		{name: "CanaryIncomplete: NCCL beyond its baseline's threshold", mutate: useRecord(ncclCheck(170, "")), want: []Code{CodeCanaryIncomplete}},
		{name: "an NCCL figure within its threshold is allowed", mutate: useRecord(ncclCheck(185, ""))},
		{name: "an explained NCCL deviation is allowed", mutate: useRecord(ncclCheck(170, "NVLink switch firmware differs; INC-77"))},
		{name: "EvidenceStale: 720h and one second", mutate: func(s *scenario) { s.req.Now = completedAt.Add(720*time.Hour + time.Second) }, want: []Code{CodeEvidenceStale}},
		{name: "evidence exactly 720h old is allowed", mutate: func(s *scenario) { s.req.Now = completedAt.Add(720 * time.Hour) }},
		{name: "EvidenceFromFuture: 5m1s ahead", mutate: func(s *scenario) { s.req.Now = completedAt.Add(-5*time.Minute - time.Second) }, want: []Code{CodeEvidenceFromFuture}},
		{name: "evidence 5m ahead is allowed (clock skew)", mutate: func(s *scenario) { s.req.Now = completedAt.Add(-5 * time.Minute) }},
		{name: "SelfApproved: approver applies the Plan", mutate: func(s *scenario) { s.writer("bob") }, want: []Code{CodeSelfApproved}},
		{name: "HardwareUnknown: no subsystem-qualified label", mutate: func(s *scenario) {
			delete(s.node("gpu-v100-01").Labels, "feature.node.kubernetes.io/pci-10de_1db6_10de_124a.present")
		}, want: []Code{CodeHardwareUnknown}},
		{name: "HardwareNotQualified: H200 under a V100 record", mutate: func(s *scenario) { s.req.Plan = canaryPlan("gpu-h200-01") }, want: []Code{CodeHardwareNotQualified}},
		{name: "FactsMissing: no driver label", mutate: func(s *scenario) {
			n := s.node("gpu-v100-01")
			for _, k := range []string{labelDriverFull, labelDriverMajor, labelOldDriverMaj} {
				delete(n.Labels, k)
			}
		}, want: []Code{CodeFactsMissing}},
		{name: "driver from the part labels is enough", mutate: func(s *scenario) { delete(s.node("gpu-v100-01").Labels, labelDriverFull) }},
		{name: "FactsMissing: GPU Operator not found", mutate: func(s *scenario) { s.cluster.GPUOperatorImage = "" }, want: []Code{CodeFactsMissing}},
		{name: "FactsMissing: API server version unknown", mutate: func(s *scenario) { s.cluster.ServerVersion = "" }, want: []Code{CodeFactsMissing}},
		{name: "TargetNotQualified: other RKE2 version", mutate: func(s *scenario) { s.req.Plan.Spec.Version = "v1.36.2+rke2r1" }, want: []Code{CodeTargetNotQualified}},
		{name: "the -rke2r form SUC writes is the same version", mutate: func(s *scenario) { s.req.Plan.Spec.Version = "v1.36.1-rke2r1" }},
		{name: "TargetNotQualified: image tag overrides version", mutate: func(s *scenario) {
			s.req.Plan.Spec.Upgrade.Image = "rancher/rke2-upgrade:v1.37.0-rke2r1"
		}, want: []Code{CodeTargetNotQualified}},
		{name: "image tagged with the version itself is allowed", mutate: func(s *scenario) { s.req.Plan.Spec.Upgrade.Image = "rancher/rke2-upgrade:v1.36.1-rke2r1" }},
		{name: "SourceMismatch: node is not on the source kernel", mutate: func(s *scenario) {
			s.node("gpu-v100-01").Status.NodeInfo.KernelVersion = "6.8.0-133-generic"
		}, want: []Code{CodeSourceMismatch}},
		{name: "kube-dc record without source accepts any current tuple", mutate: func(s *scenario) {
			useRecord(kubeDC)(s)
			s.node("gpu-v100-01").Status.NodeInfo.KernelVersion = "6.8.0-133-generic"
		}},
		{name: "RKE2Downgrade: node is newer", mutate: func(s *scenario) {
			useRecord(kubeDC)(s)
			s.node("gpu-v100-01").Status.NodeInfo.KubeletVersion = "v1.36.1+rke2r2"
		}, want: []Code{CodeRKE2Downgrade}},
		{name: "MinorSkip: 1.34 to 1.36", mutate: func(s *scenario) {
			useRecord(kubeDC)(s)
			s.node("gpu-v100-01").Status.NodeInfo.KubeletVersion = "v1.34.9+rke2r1"
		}, want: []Code{CodeMinorSkip}},
		{name: "VersionSkew: API server still on 1.35", mutate: func(s *scenario) { s.cluster.ServerVersion = "v1.35.3+rke2r3" }, want: []Code{CodeVersionSkew}},
		{name: "ComponentDowngrade: driver older than the node's", mutate: func(s *scenario) {
			useRecord(kubeDC)(s)
			s.node("gpu-v100-01").Labels[labelDriverFull] = "580.140.01"
		}, want: []Code{CodeComponentDowngrade}},
		{name: "ComponentDowngrade: rollback Plan needs rollbackPassed", mutate: func(s *scenario) {
			rollbackScenario(s)
			useRecord(func(r *qualification.Record) { r.Target.RKE2 = tupleSource.RKE2; r.Canary.RollbackPassed = false })(s)
		}, want: []Code{CodeComponentDowngrade, CodeCanaryIncomplete}},
		{name: "proven rollback is allowed", mutate: rollbackScenario},
		{name: "MultipleCanaries: two V100 nodes", mutate: func(s *scenario) { s.req.Plan = canaryPlan("gpu-v100-01", "gpu-v100-02") }, want: []Code{CodeMultipleCanaries}},
		{name: "a node SUC has applied the Plan to does not count", mutate: func(s *scenario) {
			s.req.Plan = canaryPlan("gpu-v100-01", "gpu-v100-02")
			setTuple(s.node("gpu-v100-02"), tupleTarget)
			labelApplied(s, "gpu-v100-02")
			prove(s, "gpu-v100-02")
		}},
		// Issue 11: SUC's selection, not the tuple, says which nodes a Plan
		// touches; an at-target node without the hash label is cordoned,
		// drained and upgraded again.
		{name: "MultipleCanaries: a node at target but not labelled still counts", mutate: func(s *scenario) {
			setTuple(s.node("gpu-v100-02"), tupleTarget)
			s.req.Plan = canaryPlan("gpu-v100-01", "gpu-v100-02")
		}, want: []Code{CodeMultipleCanaries}},
		{name: "GPUHolders: a node at target but not labelled is checked for holders", mutate: func(s *scenario) {
			setTuple(s.node("gpu-v100-01"), tupleTarget)
			s.holders["gpu-v100-01"] = []Holder{{Namespace: "ml", Pod: "train-0", Owner: "Job/train", Resources: []string{"nvidia.com/gpu"}}}
		}, want: []Code{CodeGPUHolders}},
		{name: "a label with another hash does not make a node done", mutate: func(s *scenario) {
			s.req.Plan = canaryPlan("gpu-v100-01", "gpu-v100-02")
			s.node("gpu-v100-02").Labels["plan.upgrade.cattle.io/gpu-v100-canary"] = "0123abcd"
		}, want: []Code{CodeMultipleCanaries}},
		{name: "a node opted out with disabled does not count", mutate: func(s *scenario) {
			s.req.Plan = canaryPlan("gpu-v100-01", "gpu-v100-02")
			s.node("gpu-v100-02").Labels["plan.upgrade.cattle.io/gpu-v100-canary"] = "disabled"
		}},
		{name: "CanaryNotProven: wave before any canary", mutate: func(s *scenario) {
			s.cfg.WaveSize = 3
			s.req.Plan = canaryPlan("gpu-v100-01", "gpu-v100-02")
		}, want: []Code{CodeCanaryNotProven}},
		{name: "wave after a proven canary is allowed", mutate: waveScenario},
		{name: "CrossFailureDomain: wave spans zones", mutate: func(s *scenario) {
			waveScenario(s)
			s.node("gpu-v100-02").Labels[LabelZone] = "zone-b"
		}, want: []Code{CodeCrossFailureDomain}},
		{name: "GPUHolders: a VM holds the GPUs", mutate: func(s *scenario) {
			s.holders["gpu-v100-01"] = []Holder{{Namespace: "tenant-a", Pod: "virt-launcher-vm-1-x", Owner: "VirtualMachineInstance/vm-1", Resources: []string{"nvidia.com/GV100GL_Tesla_V100"}}}
		}, want: []Code{CodeGPUHolders}},
		{name: "holders on a node the Plan does not select are irrelevant", mutate: func(s *scenario) {
			s.holders["gpu-v100-02"] = []Holder{{Namespace: "t", Pod: "p", Owner: "Pod/p", Resources: []string{"nvidia.com/gpu"}}}
		}},
		{name: "VersionEditInFlight: version edit while applying", mutate: func(s *scenario) {
			old := s.req.Plan.DeepCopy()
			old.Spec.Version = "v1.36.0+rke2r1"
			old.Status.Applying = []string{"gpu-v100-01"}
			s.req.Operation, s.req.OldPlan = "UPDATE", old
		}, want: []Code{CodeVersionEditInFlight}},
		{name: "version edit with nothing applying is allowed", mutate: func(s *scenario) {
			old := s.req.Plan.DeepCopy()
			old.Spec.Version = "v1.36.0+rke2r1"
			s.req.Operation, s.req.OldPlan = "UPDATE", old
		}},
		{name: "VersionInvalid: unparsable version", mutate: func(s *scenario) { s.req.Plan.Spec.Version = "v1.36" }, want: []Code{CodeVersionInvalid, CodeTargetNotQualified}},
		// An unparsable record version is the record's problem, as the
		// ConfigMap webhook and validate-record say (issue 9).
		{name: "RecordInvalid: record target driver does not parse", mutate: useRecord(func(r *qualification.Record) { r.Target.Driver = "580-beta" }), want: []Code{CodeRecordInvalid}},
		{name: "non-RKE2 Plan takes RKE2 from the record", mutate: nonRKE2},
		{name: "non-RKE2 Plan with an RKE2 downgrade in the record", mutate: func(s *scenario) {
			nonRKE2(s)
			useRecord(kubeDC, func(r *qualification.Record) { r.Target.RKE2 = "v1.35.1+rke2r1" })(s)
		}, want: []Code{CodeRKE2Downgrade}},
		{name: "all violations are reported together", mutate: func(s *scenario) {
			s.req.Plan = canaryPlan("gpu-v100-01", "gpu-v100-02", "cpu-01")
			s.req.Plan.Spec.Concurrency = 4
			s.req.Plan.Spec.Cordon = false
			s.writer("bob")
		}, want: []Code{CodeMixedPlan, CodeConcurrencyNotSerial, CodeCordonRequired, CodeSelfApproved, CodeMultipleCanaries}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			tc.mutate(s)
			d := s.decide()
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			assert.Equal(t, len(tc.want) == 0, d.Allowed)
			for _, b := range d.Blockers {
				assert.NotEmpty(t, b.Err.Field, "blocker %s has no field path", b.Code)
				assert.NotEmpty(t, b.Err.Detail)
			}
		})
	}
}

// rollbackScenario: the node runs the record's target; the Plan, annotated
// as a rollback, moves it back to source. The record changes kernel and
// driver only, so RKE2 stays put.
func rollbackScenario(s *scenario) {
	useRecord(func(r *qualification.Record) { r.Target.RKE2 = tupleSource.RKE2 })(s)
	nonRKE2(s)
	at := tupleTarget
	at.RKE2 = tupleSource.RKE2
	setTuple(s.node("gpu-v100-01"), at)
	s.req.Plan.Annotations[AnnotationRollback] = "true"
}

// waveScenario: wave size 3, a proven canary (gpu-v100-03 at target), and a
// two-node wave in one zone.
func waveScenario(s *scenario) {
	s.cfg.WaveSize = 3
	s.cluster.Nodes = append(s.cluster.Nodes, v100(s.t, "gpu-v100-03", tupleTarget))
	prove(s, "gpu-v100-03")
	s.req.Plan = canaryPlan("gpu-v100-01", "gpu-v100-02")
}

func TestPlanDecisionShape(t *testing.T) {
	s := safeScenario(t)
	s.req.Plan.Spec.Concurrency = 2
	s.holders["gpu-v100-01"] = []Holder{{Namespace: "ml", Pod: "train-0", Owner: "Job/train", Resources: []string{"nvidia.com/gpu"}}}
	d := s.decide()
	require.False(t, d.Allowed)
	msg := d.Message()
	assert.True(t, strings.HasPrefix(msg, "Plan system-upgrade/gpu-v100-canary is denied"), msg)
	assert.Contains(t, msg, "\n[ConcurrencyNotSerial] concurrency is 2")
	assert.Contains(t, msg, "Job ml/train [nvidia.com/gpu]")
	a := d.AuditAnnotations()
	assert.Equal(t, "deny", a[AuditDecision])
	assert.Equal(t, "ConcurrencyNotSerial,GPUHolders", a[AuditReasons])
	assert.Equal(t, "v100-r580-canary-1@0123456789abcdef0123456789abcdef01234567", a[AuditRecord])
	assert.Regexp(t, `^approved by \S+, written by \S+ \(attested\)$`, a[AuditApproval], "who approved the record is in the audit log")
	assert.Equal(t, "gpu-v100-01", a[AuditNodes])
	errs := d.ErrorList()
	require.Len(t, errs, 2)
	assert.Equal(t, "spec.concurrency", errs[0].Field)
	assert.Equal(t, "spec.nodeSelector", errs[1].Field)
}

func TestPlanWarnings(t *testing.T) {
	t.Run("absent nodeSelector selects nothing", func(t *testing.T) {
		s := safeScenario(t)
		s.req.Plan.Spec.NodeSelector = nil
		d := s.decide()
		assert.True(t, d.Allowed)
		assert.Contains(t, strings.Join(d.Warnings, "\n"), "nodeSelector is absent")
	})
	t.Run("record about to expire", func(t *testing.T) {
		s := safeScenario(t)
		s.req.Now = completedAt.Add(700 * time.Hour)
		d := s.decide()
		assert.True(t, d.Allowed)
		assert.Contains(t, strings.Join(d.Warnings, "\n"), "expires at 2026-12-20T12:00:00Z")
	})
	t.Run("every node at target", func(t *testing.T) {
		s := safeScenario(t)
		setTuple(s.node("gpu-v100-01"), tupleTarget)
		d := s.decide()
		assert.True(t, d.Allowed)
		assert.Equal(t, []string{"gpu-v100-01"}, d.Nodes, "SUC still selects it")
		assert.Contains(t, strings.Join(d.Warnings, "\n"), "already runs the record's target tuple; SUC still cordons and upgrades each of them")
	})
	t.Run("every node applied", func(t *testing.T) {
		s := safeScenario(t)
		setTuple(s.node("gpu-v100-01"), tupleTarget)
		labelApplied(s, "gpu-v100-01")
		prove(s, "gpu-v100-01")
		d := s.decide()
		assert.True(t, d.Allowed)
		assert.Empty(t, d.Nodes)
		assert.Contains(t, strings.Join(d.Warnings, "\n"), "SUC has already applied this Plan to every GPU node it selects")
	})
}

func TestPlanExemptionAndBreakGlass(t *testing.T) {
	t.Run("Rancher's Plans: its identity, narrowed by namespace and label", func(t *testing.T) {
		s := safeScenario(t)
		rancher := "system:serviceaccount:cattle-system:rancher"
		s.cfg.Exemptions = append(s.cfg.Exemptions, Exemption{Name: "rancher-managed", Resources: []string{"plans"}, Users: []string{rancher}, Namespaces: []string{"system-upgrade"}, MatchLabels: map[string]string{"rancher-managed": "true"}})
		s.req.Plan.Spec.Concurrency = 5
		s.req.Plan.Labels = map[string]string{"rancher-managed": "true"}
		d := s.decide()
		assert.False(t, d.Allowed, "a person's Plan carrying Rancher's label is judged: the label is the writer's to set (issue 10)")
		assert.Empty(t, d.AuditAnnotations()[AuditExemption])
		s.req.User = UserInfo{Name: rancher, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:cattle-system"}}
		d = s.decide()
		assert.True(t, d.Allowed)
		assert.Equal(t, "rancher-managed", d.AuditAnnotations()[AuditExemption])
		s.req.Plan.Labels = nil
		assert.False(t, s.decide().Allowed, "Rancher's unlabelled Plan is judged")
	})
	t.Run("a namespace group exempts every ServiceAccount of the namespace", func(t *testing.T) {
		s := safeScenario(t)
		s.cfg.Exemptions = []Exemption{{Name: "bots", Resources: []string{"plans"}, Groups: []string{"system:serviceaccounts:platform-bots"}}}
		s.req.Plan.Spec.Concurrency = 5
		assert.False(t, s.decide().Allowed, "a person is judged")
		s.req.User = UserInfo{Name: "system:serviceaccount:platform-bots:any", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:platform-bots", "system:authenticated"}}
		d := s.decide()
		assert.True(t, d.Allowed)
		assert.Equal(t, "bots", d.AuditAnnotations()[AuditExemption])
	})
	t.Run("break-glass needs the group", func(t *testing.T) {
		s := safeScenario(t)
		s.req.Plan.Spec.Concurrency = 5
		s.req.Plan.Annotations[AnnotationBreakGlass] = "INC-1234 driver hotfix"
		assert.False(t, s.decide().Allowed, "annotation alone must not allow")
		s.req.User.Groups = append(s.req.User.Groups, s.cfg.BreakGlassGroup)
		d := s.decide()
		assert.True(t, d.Allowed)
		assert.Equal(t, "INC-1234 driver hotfix", d.AuditAnnotations()[AuditBreakGlass])
		assert.Equal(t, "ConcurrencyNotSerial", d.AuditAnnotations()[AuditReasons], "the overridden reasons stay in the audit log")
		assert.Contains(t, strings.Join(d.Warnings, "\n"), "break-glass")
	})
}

// TestBreakGlassIsForOneWrite: break glass overrides only the write that
// sets it, with a real reason; one left in place from an earlier write is
// judged normally and says so.
func TestBreakGlassIsForOneWrite(t *testing.T) {
	cases := []struct {
		name     string
		old, now string // the annotation before and after; old "-": a CREATE
		allowed  bool
		warning  string
	}{
		{"set on create", "-", "INC-1234 driver hotfix", true, "for this write only"},
		{"added by an update", "", "INC-1234 driver hotfix", true, "for this write only"},
		{"reason changed by an update", "INC-1234 driver hotfix", "INC-1240 second hotfix", true, "for this write only"},
		{"left in place by a later edit", "INC-1234 driver hotfix", "INC-1234 driver hotfix", false, "left from an earlier write and overrides nothing"},
		{"a single space", "-", " ", false, "has 0 non-space characters, expected at least 5"},
		{"too short", "", "ok  ", false, "has 2 non-space characters"},
		{"five characters", "", "INC-9", true, "for this write only"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			s.req.User.Groups = append(s.req.User.Groups, s.cfg.BreakGlassGroup)
			s.req.Plan.Spec.Concurrency = 5
			s.req.Plan.Annotations[AnnotationBreakGlass] = tc.now
			if tc.old != "-" {
				old := s.req.Plan.DeepCopy()
				old.Spec.Concurrency = 1
				if tc.old == "" {
					delete(old.Annotations, AnnotationBreakGlass)
				} else {
					old.Annotations[AnnotationBreakGlass] = tc.old
				}
				s.req.Operation, s.req.OldPlan = "UPDATE", old
			}
			d := s.decide()
			assert.Equal(t, tc.allowed, d.Allowed, d.Message())
			assert.Contains(t, strings.Join(d.Warnings, "\n"), tc.warning)
			if !tc.allowed {
				assert.Equal(t, []Code{CodeConcurrencyNotSerial}, d.Codes(), "judged normally")
				assert.Empty(t, d.BreakGlass)
			}
		})
	}
}

func TestPlanSelector(t *testing.T) {
	s := safeScenario(t)
	n := s.node("gpu-v100-01")
	for _, tc := range []struct {
		name string
		sel  *metav1.LabelSelector
		mod  func()
		want bool
	}{
		{"nil selects nothing", nil, func() {}, false},
		{"empty selects all", &metav1.LabelSelector{}, func() {}, true},
		{"opted out with disabled", &metav1.LabelSelector{}, func() { n.Labels["plan.upgrade.cattle.io/gpu-v100-canary"] = "disabled" }, false},
		{"a hash value does not opt out", &metav1.LabelSelector{}, func() { n.Labels["plan.upgrade.cattle.io/gpu-v100-canary"] = "abc" }, true},
		{"no hostname label", &metav1.LabelSelector{}, func() { delete(n.Labels, "kubernetes.io/hostname") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n = v100(t, "gpu-v100-01", tupleSource)
			tc.mod()
			p := canaryPlan()
			p.Spec.NodeSelector = tc.sel
			sel, err := NewPlanSelector(p)
			require.NoError(t, err)
			assert.Equal(t, tc.want, sel.Matches(n))
		})
	}
}

// labelApplied labels the nodes as SUC does once the Plan's Job succeeded:
// plan.upgrade.cattle.io/<plan>=<latestHash>.
func labelApplied(s *scenario, nodes ...string) {
	hash, ok := PredictHash(s.req.Plan)
	require.True(s.t, ok)
	s.req.Plan.Status.LatestHash = hash
	for _, n := range nodes {
		s.node(n).Labels["plan.upgrade.cattle.io/"+s.req.Plan.Name] = hash
	}
}

// TestRKE2PlanRecognition: a Plan is held to the RKE2 rules on every
// spelling and mirror of the RKE2 upgrade image, and whenever its version
// parses as an RKE2 version whatever the image (issue 9: these were
// admitted as "not RKE2").
func TestRKE2PlanRecognition(t *testing.T) {
	rke2Codes := []Code{CodeTargetNotQualified, CodeMinorSkip, CodeVersionSkew}
	for _, image := range []string{
		"rancher/rke2-upgrade",
		"docker.io/rancher/rke2-upgrade",
		"index.docker.io/rancher/rke2-upgrade",
		"registry-1.docker.io/rancher/rke2-upgrade",
		"mirror.corp.example:5000/rancher/rke2-upgrade",
		"harbor.corp.example/dockerhub/rancher/rke2-upgrade",
		"registry.example.com/platform/gpu-node-upgrade", // not an RKE2 image, but an RKE2 version
	} {
		t.Run(image, func(t *testing.T) {
			s := safeScenario(t)
			s.req.Plan.Spec.Upgrade.Image = image
			s.req.Plan.Spec.Version = "v1.38.0+rke2r1"
			d := s.decide()
			assert.False(t, d.Allowed)
			assert.ElementsMatch(t, rke2Codes, d.Codes(), d.Message())
		})
	}
	t.Run("a pinned registry entry matches only that registry", func(t *testing.T) {
		s := safeScenario(t)
		s.cfg.RKE2Images = []string{"registry.corp.example/rancher/rke2-upgrade"}
		s.req.Plan.Spec.Upgrade.Image = "registry.corp.example/rancher/rke2-upgrade:v1.36.1-rke2r1"
		assert.True(t, s.decide().Allowed)
		s.req.Plan.Spec.Upgrade.Image = "registry.corp.example/rancher/rke2-upgrade:v1.36.2-rke2r1"
		d := s.decide()
		assert.Equal(t, []Code{CodeTargetNotQualified}, d.Codes(), "the tag SUC runs is checked")
	})
	t.Run("a custom image with its own version is not an RKE2 Plan", func(t *testing.T) {
		s := safeScenario(t)
		nonRKE2(s)
		assert.True(t, s.decide().Allowed)
	})
}

func TestImageInvalid(t *testing.T) {
	for _, image := range []string{"rancher/RKE2-upgrade", "rancher/rke2-upgrade:", "rancher/rke2-upgrade@sha256:abc", ""} {
		t.Run(image, func(t *testing.T) {
			s := safeScenario(t)
			s.req.Plan.Spec.Upgrade.Image = image
			d := s.decide()
			assert.Equal(t, []Code{CodeImageInvalid}, d.Codes(), d.Message())
			assert.Contains(t, d.Message(), "expected [registry[:port]/]repository[:tag][@sha256:<64 hex>]")
			assert.Equal(t, "spec.upgrade.image", d.Blockers[0].Err.Field)
		})
	}
	t.Run("a valid reference with a digest is allowed", func(t *testing.T) {
		s := safeScenario(t)
		nonRKE2(s)
		s.req.Plan.Spec.Upgrade.Image += "@sha256:" + strings.Repeat("0a", 32)
		assert.True(t, s.decide().Allowed)
	})
}

// TestPlanPendingHash: the pending set uses the hash SUC will compute for
// the Plan as written, so a version change re-selects the nodes labelled
// with the old hash.
func TestPlanPendingHash(t *testing.T) {
	applied := func(t *testing.T) *scenario {
		s := safeScenario(t)
		s.req.Plan = canaryPlan("gpu-v100-01", "gpu-v100-02")
		labelApplied(s, "gpu-v100-01", "gpu-v100-02")
		return s
	}
	t.Run("nodes at the Plan's hash are done", func(t *testing.T) {
		s := applied(t)
		assert.Empty(t, PreparePlan(s.cfg, s.cluster, s.req).HolderNodes())
	})
	t.Run("a new version is a new hash: every node is pending again", func(t *testing.T) {
		s := applied(t)
		old := s.req.Plan.DeepCopy()
		s.req.Operation, s.req.OldPlan = "UPDATE", old
		s.req.Plan.Spec.Version = "v1.36.2+rke2r1"
		assert.Equal(t, []string{"gpu-v100-01", "gpu-v100-02"}, PreparePlan(s.cfg, s.cluster, s.req).HolderNodes())
	})
	t.Run("a hashed Secret: the stored hash holds while nothing hashed changes", func(t *testing.T) {
		s := applied(t)
		s.req.Plan.Spec.Secrets = []upgradev1.SecretSpec{{Name: "creds", Path: "/c"}}
		_, ok := PredictHash(s.req.Plan)
		require.False(t, ok)
		old := s.req.Plan.DeepCopy()
		s.req.Operation, s.req.OldPlan = "UPDATE", old
		s.req.Plan.Spec.Concurrency = 1
		assert.Empty(t, PreparePlan(s.cfg, s.cluster, s.req).HolderNodes())
		s.req.OldPlan = nil // a CREATE cannot know the hash: every selected node is pending
		assert.Equal(t, []string{"gpu-v100-01", "gpu-v100-02"}, PreparePlan(s.cfg, s.cluster, s.req).HolderNodes())
	})
}

func TestPredictHash(t *testing.T) {
	p := canaryPlan("gpu-v100-01")
	h, ok := PredictHash(p)
	require.True(t, ok)
	// sha224("v1.36.1-rke2r1" + "system-upgrade"), as SUC's DigestStatus writes it.
	assert.Len(t, h, 56)
	p.Spec.Version = "v1.36.1-rke2r1" // the + and - spellings resolve to one latestVersion
	h2, _ := PredictHash(p)
	assert.Equal(t, h, h2)
	p.Annotations[upgradev1.AnnotationDigest] = "spec.upgrade.envs"
	_, ok = PredictHash(p)
	assert.False(t, ok, "a digest annotation folds spec paths the gate does not hash")
}

// TestPrepareNodeStep: one node's step of a Plan is judged by the same
// rules, for exactly that node.
func TestPrepareNodeStep(t *testing.T) {
	t.Run("the node's own transition", func(t *testing.T) {
		s := safeScenario(t)
		s.req.Plan = canaryPlan("gpu-v100-01", "gpu-v100-02")
		s.holders["gpu-v100-02"] = []Holder{{Namespace: "ml", Pod: "p", Owner: "Pod/p", Resources: []string{"nvidia.com/gpu"}}}
		r := PrepareNodeStep(s.cfg, s.cluster, s.req, "gpu-v100-01")
		assert.Equal(t, []string{"gpu-v100-01"}, r.HolderNodes())
		d := r.Decide(s.holders, nil)
		assert.True(t, d.Allowed, "the wave counts this one node; gpu-v100-02's holders are its own step's: %s", d.Message())
		r = PrepareNodeStep(s.cfg, s.cluster, s.req, "gpu-v100-02")
		d = r.Decide(s.holders, nil)
		assert.Equal(t, []Code{CodeGPUHolders}, d.Codes())
	})
	t.Run("labelled with the hash, the step is still judged", func(t *testing.T) {
		s := safeScenario(t)
		labelApplied(s, "gpu-v100-01")
		setTuple(s.node("gpu-v100-01"), tupleSource)
		s.req.Plan.Spec.Concurrency = 2
		r := PrepareNodeStep(s.cfg, s.cluster, s.req, "gpu-v100-01")
		assert.Equal(t, []string{"gpu-v100-01"}, r.HolderNodes())
		d := r.Decide(s.holders, nil)
		assert.Equal(t, []Code{CodeConcurrencyNotSerial}, d.Codes())
	})
	t.Run("the wrong hardware", func(t *testing.T) {
		s := safeScenario(t)
		s.req.Plan = canaryPlan("gpu-v100-01", "gpu-h200-01")
		d := PrepareNodeStep(s.cfg, s.cluster, s.req, "gpu-h200-01").Decide(s.holders, nil)
		assert.Equal(t, []Code{CodeHardwareNotQualified}, d.Codes())
	})
	t.Run("a node the Plan does not select has no transition", func(t *testing.T) {
		s := safeScenario(t)
		r := PrepareNodeStep(s.cfg, s.cluster, s.req, "gpu-v100-02")
		assert.Empty(t, r.HolderNodes())
	})
}

// TestEchoedValuesAreClipped: a 1 MiB value in the request comes back
// clipped, with its length, in every message and field error.
func TestEchoedValuesAreClipped(t *testing.T) {
	long := strings.Repeat("9", 1<<20)
	for name, mod := range map[string]func(*PlanRequest){
		"spec.version":    func(r *PlanRequest) { r.Plan.Spec.Version = "v1.36." + long },
		"upgrade image":   func(r *PlanRequest) { r.Plan.Spec.Upgrade.Image = "rancher/rke2-upgrade:v1.36." + long },
		"record name":     func(r *PlanRequest) { r.Plan.Annotations[AnnotationQualification] = "r" + long },
		"break-glass":     func(r *PlanRequest) { r.Plan.Annotations[AnnotationBreakGlass] = long },
		"selector values": func(r *PlanRequest) { r.Plan.Spec.NodeSelector.MatchLabels = map[string]string{"x": long} },
	} {
		t.Run(name, func(t *testing.T) {
			s := safeScenario(t)
			s.req.Plan.Spec.Concurrency = 5 // at least one denial
			mod(&s.req)
			d := s.decide()
			require.False(t, d.Allowed)
			assert.Less(t, len(d.Message()), 8<<10, "the denial is not the value")
			for _, e := range d.ErrorList() {
				assert.Less(t, len(e.Error()), 4<<10, e.Field)
			}
			for _, w := range d.Warnings {
				assert.Less(t, len(w), 4<<10)
			}
			if strings.Contains(d.Message(), "99999999") {
				assert.Contains(t, d.Message(), "bytes", "a clipped value says how long it was")
			}
		})
	}
}
