package gate

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

const v100Product = "Tesla-V100-PCIE-32GB"

// TestDriverPathFields: every field that changes what runs on GPU nodes is
// judged, not only the versions (issue 10's driver-path bypasses).
func TestDriverPathFields(t *testing.T) {
	v100Only := map[string]string{"nvidia.com/gpu.product": v100Product}
	holder := []Holder{{Namespace: "ml", Pod: "p", Owner: "Pod/p", Resources: []string{"nvidia.com/gpu"}}}
	// narrowOffH200 narrows NVIDIADriver v100 from every GPU node to the
	// V100s, at the version they run.
	narrowOffH200 := func(s *driverScenario) {
		s.change.Object, s.change.OldDriver, s.change.Annotations = "NVIDIADriver v100", "580.130.00", nil
		s.change.OldNodeSelector, s.change.NodeSelector = map[string]string{}, v100Only
		for _, n := range []string{"gpu-v100-01", "gpu-v100-02"} {
			s.node(n).Labels[labelDriverFull] = "580.130.00"
		}
	}
	cases := []struct {
		name   string
		mutate func(*driverScenario)
		want   []Code
		says   string
	}{
		{name: "repository change at the running version reloads every node: its tuple must be a record's target", mutate: func(s *driverScenario) {
			s.change.NewDriver, s.change.Reload = s.change.OldDriver, true
		}, want: []Code{CodeTargetNotQualified}},
		{name: "repository change together with the qualified version is allowed", mutate: func(s *driverScenario) { s.change.Reload = true }},
		{name: "reload at a tuple a record qualifies is allowed", mutate: func(s *driverScenario) {
			// The nodes already run the record's target: a kernelModuleType
			// change reloads the qualified tuple.
			for _, n := range []string{"gpu-v100-01", "gpu-v100-02", "gpu-h200-01"} {
				s.node(n).Labels[labelDriverFull] = "580.130.00"
			}
			s.change.OldDriver, s.change.Reload = "580.130.00", true
		}},
		{name: "reload with GPU holders and no drain", mutate: func(s *driverScenario) {
			s.change.Reload = true
			s.holders["gpu-h200-01"] = []Holder{{Namespace: "ml", Pod: "p", Owner: "Pod/p", Resources: []string{"nvidia.com/gpu"}}}
		}, want: []Code{CodeGPUHolders}},
		{name: "maxParallelUpgrades 0 alone is refused", mutate: func(s *driverScenario) {
			s.change.NewDriver, s.change.Annotations = s.change.OldDriver, nil
			// A node on another driver is not reloaded by a policy edit.
			s.node("gpu-v100-02").Labels[labelDriverFull] = "580.140.02"
			s.change.PolicyChanged, s.change.Policy.MaxParallelUpgrades = true, 0
		}, want: []Code{CodeConcurrencyNotSerial}},
		{name: "autoUpgrade off alone is refused (the DaemonSet would roll without the per-node guard)", mutate: func(s *driverScenario) {
			s.change.NewDriver, s.change.Annotations = s.change.OldDriver, nil
			s.change.PolicyChanged, s.change.Policy.AutoUpgrade = true, false
		}, want: []Code{CodeConcurrencyNotSerial}},
		{name: "a serial policy edit alone needs no record", mutate: func(s *driverScenario) {
			s.change.NewDriver, s.change.Annotations = s.change.OldDriver, nil
			s.change.PolicyChanged, s.change.Policy.DrainEnabled = true, true
		}},
		{name: "NVIDIADriver CREATE without records", mutate: func(s *driverScenario) {
			s.change.Object, s.change.Operation, s.change.OldDriver, s.change.Annotations = "NVIDIADriver v100", OpCreate, "", nil
			s.change.NodeSelector = v100Only
		}, want: []Code{CodeRecordMissing}},
		{name: "NVIDIADriver CREATE at a qualified version", mutate: func(s *driverScenario) {
			s.change.Object, s.change.Operation, s.change.OldDriver = "NVIDIADriver v100", OpCreate, ""
			s.change.NodeSelector, s.change.Annotations[AnnotationQualification] = v100Only, "v100-driver"
		}},
		{name: "ClusterPolicy CREATE (delete and recreate with a new version) reaches every GPU node", mutate: func(s *driverScenario) {
			s.change.Operation, s.change.OldDriver, s.change.OldDCGM = OpCreate, "", ""
			s.change.NewDriver = "580.140.02"
		}, want: []Code{CodeTargetNotQualified}},
		{name: "ClusterPolicy CREATE at the running version reloads nothing new but is judged", mutate: func(s *driverScenario) {
			s.change.Operation, s.change.OldDriver, s.change.OldDCGM, s.change.Annotations = OpCreate, "", "", nil
			s.change.NewDriver = "580.126.20"
		}, want: []Code{CodeRecordMissing}},
		{name: "widening an NVIDIADriver's nodeSelector reloads the nodes it reaches only now", mutate: func(s *driverScenario) {
			s.change.Object, s.change.OldDriver = "NVIDIADriver v100", "580.130.00"
			s.change.OldNodeSelector, s.change.NodeSelector = v100Only, map[string]string{}
			s.change.Annotations[AnnotationQualification] = "v100-driver"
		}, want: []Code{CodeHardwareNotQualified}},
		{name: "narrowing an NVIDIADriver's nodeSelector reloads nothing", mutate: func(s *driverScenario) {
			s.change.Object, s.change.OldDriver, s.change.Annotations = "NVIDIADriver v100", "580.130.00", nil
			s.change.OldNodeSelector, s.change.NodeSelector = map[string]string{}, v100Only
			for _, n := range []string{"gpu-v100-01", "gpu-v100-02"} {
				s.node(n).Labels[labelDriverFull] = "580.130.00"
			}
		}},
		// Issue 25: the nodes an NVIDIADriver's nodeSelector no longer
		// selects lose its driver (the operator's DaemonSet for it deletes
		// their driver Pod): held as its deletion is.
		{name: "GPUHolders: narrowing an NVIDIADriver's nodeSelector off a node that holds GPUs", mutate: func(s *driverScenario) {
			narrowOffH200(s)
			s.holders["gpu-h200-01"] = holder
			s.holders["gpu-v100-01"] = holder   // still selected, at its version: nothing happens there
			s.change.Policy.DrainEnabled = true // nothing drains a node the driver leaves
		}, want: []Code{CodeGPUHolders}, says: "node gpu-h200-01 runs 1 GPU holder(s): Pod ml/p [nvidia.com/gpu]; this change of the NVIDIADriver's nodeSelector no longer selects the node"},
		{name: "RolloutInFlight: narrowing an NVIDIADriver's nodeSelector while a rollout is in flight", mutate: func(s *driverScenario) {
			narrowOffH200(s)
			s.node("gpu-v100-01").Labels[LabelDriverUpgradeState] = "upgrade-required"
		}, want: []Code{CodeRolloutInFlight}},
		{name: "narrowing an NVIDIADriver's nodeSelector alone reloads nothing: the upgrade policy is not judged", mutate: func(s *driverScenario) {
			narrowOffH200(s)
			s.change.Policy = DriverUpgradePolicy{}
		}},
		{name: "FactsMissing: narrowing with the ClusterPolicy unreadable is still judged by the holders of the nodes it leaves", mutate: func(s *driverScenario) {
			narrowOffH200(s)
			s.change.PolicyErr = errors.New("connection refused")
			s.holdersErr = errors.New("connection refused")
		}, want: []Code{CodeFactsMissing}, says: "the GPU holders on node gpu-h200-01"},
		{name: "GPUHolders: narrowing off a busy node with a new version for the others", mutate: func(s *driverScenario) {
			s.change.Object, s.change.Annotations[AnnotationQualification] = "NVIDIADriver v100", "v100-driver"
			s.change.OldNodeSelector, s.change.NodeSelector = map[string]string{}, v100Only
			s.holders["gpu-h200-01"] = holder
		}, want: []Code{CodeGPUHolders}, says: "node gpu-h200-01 runs 1 GPU holder(s)"},
		{name: "NVIDIADriver DELETE with a GPU holder on a node it drives", mutate: func(s *driverScenario) {
			s.change.Object, s.change.Operation, s.change.Annotations = "NVIDIADriver v100", OpDelete, nil
			s.change.NodeSelector = v100Only
			s.holders["gpu-v100-02"] = []Holder{{Namespace: "ml", Pod: "p", Owner: "Pod/p", Resources: []string{"nvidia.com/gpu"}}}
			s.change.Policy.DrainEnabled = true // a deletion drains nothing
		}, want: []Code{CodeGPUHolders}},
		{name: "NVIDIADriver DELETE of idle nodes needs no record", mutate: func(s *driverScenario) {
			s.change.Object, s.change.Operation, s.change.Annotations = "NVIDIADriver v100", OpDelete, nil
			s.change.NodeSelector = v100Only
		}},
		{name: "FactsMissing: holders of a deleted driver's nodes cannot be listed", mutate: func(s *driverScenario) {
			s.change.Object, s.change.Operation, s.change.Annotations = "NVIDIADriver v100", OpDelete, nil
			s.change.NodeSelector = v100Only
			s.holdersErr = errors.New("connection refused")
		}, want: []Code{CodeFactsMissing}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeDriverScenario(t)
			tc.mutate(s)
			r := s.prepareDriver(DriverRequest{Change: s.change, User: s.req.User, Now: s.req.Now})
			d := r.Decide(s.listed(r), s.holdersErr)
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			assert.Equal(t, len(tc.want) == 0, d.Allowed)
			assert.Contains(t, d.Message(), tc.says)
		})
	}
}

// TestOperatorNamespaceDeletion (issue 25): deleting the GPU Operator's
// namespace unloads every GPU node's driver at once (the namespace
// controller deletes every operand there): held by any GPU node's holders,
// named, and by a rollout in flight, which a ClusterPolicy's deletion is
// not; allowed on idle nodes with nothing in flight, or as a rollback.
func TestOperatorNamespaceDeletion(t *testing.T) {
	holder := []Holder{{Namespace: "ml", Pod: "train-0", Owner: "Job/train", Resources: []string{"nvidia.com/gpu"}}}
	deleteNamespace := func(s *driverScenario) {
		s.change = DriverChange{Object: "Namespace gpu-operator", Operation: OpDelete, OperatorNamespace: true}
	}
	for _, tc := range []struct {
		name   string
		mutate func(*driverScenario)
		want   []Code
		says   string
	}{
		{name: "no GPU holders, nothing in flight: allowed without a record", mutate: deleteNamespace},
		{name: "GPUHolders: a GPU node runs a holder", mutate: func(s *driverScenario) {
			deleteNamespace(s)
			s.holders["gpu-h200-01"] = holder
		}, want: []Code{CodeGPUHolders}, says: "node gpu-h200-01 runs 1 GPU holder(s): Job ml/train [nvidia.com/gpu]; deleting this object removes the driver from the node"},
		{name: "GPUHolders: every busy node named", mutate: func(s *driverScenario) {
			deleteNamespace(s)
			s.holders["gpu-h200-01"], s.holders["gpu-v100-02"] = holder, holder
		}, want: []Code{CodeGPUHolders}, says: "node gpu-v100-02 runs 1 GPU holder(s)"},
		{name: "GPUHolders: the upgrade policy's drain drains nothing here", mutate: func(s *driverScenario) {
			deleteNamespace(s)
			s.change.Policy = DriverUpgradePolicy{Present: true, AutoUpgrade: true, MaxParallelUpgrades: 1, DrainEnabled: true}
			s.holders["gpu-v100-01"] = holder
		}, want: []Code{CodeGPUHolders}},
		{name: "RolloutInFlight: the operator's driver rollout", mutate: func(s *driverScenario) {
			deleteNamespace(s)
			s.node("gpu-v100-01").Labels[LabelDriverUpgradeState] = "upgrade-required"
		}, want: []Code{CodeRolloutInFlight}, says: "the GPU Operator's driver rollout is in flight on GPU node(s) gpu-v100-01 (upgrade-required)"},
		{name: "a ClusterPolicy's deletion is not held by the rollout (the neighbour)", mutate: func(s *driverScenario) {
			s.change.Operation, s.change.Annotations = OpDelete, nil
			s.node("gpu-v100-01").Labels[LabelDriverUpgradeState] = "upgrade-required"
		}},
		{name: "a rollback is not held by the rollout", mutate: func(s *driverScenario) {
			deleteNamespace(s)
			s.change.Annotations = map[string]string{AnnotationRollback: "true"}
			s.node("gpu-v100-01").Labels[LabelDriverUpgradeState] = "upgrade-required"
		}},
		{name: "FactsMissing: the holders cannot be listed", mutate: func(s *driverScenario) {
			deleteNamespace(s)
			s.holdersErr = errors.New("connection refused")
		}, want: []Code{CodeFactsMissing}, says: "the GPU holders on node gpu-h200-01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := safeDriverScenario(t)
			tc.mutate(s)
			r := s.prepareDriver(DriverRequest{Change: s.change, User: s.req.User, Now: s.req.Now})
			d := r.Decide(s.listed(r), s.holdersErr)
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			assert.Equal(t, len(tc.want) == 0, d.Allowed, d.Message())
			assert.Contains(t, d.Message(), tc.says)
		})
	}
}

// operatorRecord qualifies hw on the source tuple with GPU Operator v26.6.0.
func operatorRecord(id, hw string) RecordEntry {
	return approved(record(func(r *qualification.Record) {
		r.ID, r.Hardware = id, []string{hw}
		r.Target = tupleSource
		r.Target.GPUOperator = "v26.6.0"
	}))
}

// TestOperatorUpgrade: a new GPU Operator version changes every GPU node's
// tuple at once; each node's hardware needs a record for its tuple with the
// new operator.
func TestOperatorUpgrade(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*driverScenario)
		want   []Code
	}{
		{name: "qualified for every GPU node's hardware", mutate: func(*driverScenario) {}},
		{name: "holders do not matter: no driver reloads", mutate: func(s *driverScenario) {
			s.holders["gpu-v100-01"] = []Holder{{Namespace: "ml", Pod: "p", Owner: "Pod/p", Resources: []string{"nvidia.com/gpu"}}}
		}},
		{name: "RecordMissing", mutate: func(s *driverScenario) { s.change.Annotations = nil }, want: []Code{CodeRecordMissing}},
		{name: "HardwareNotQualified: no H200 record", mutate: func(s *driverScenario) {
			s.change.Annotations[AnnotationQualification] = "v100-op"
		}, want: []Code{CodeHardwareNotQualified}},
		{name: "TargetNotQualified: another operator version", mutate: func(s *driverScenario) { s.change.NewOperator = "v26.9.0" }, want: []Code{CodeTargetNotQualified}},
		{name: "TargetNotQualified: a node on another driver", mutate: func(s *driverScenario) {
			s.node("gpu-v100-02").Labels[labelDriverFull] = "580.140.02"
		}, want: []Code{CodeTargetNotQualified, CodeSourceMismatch}},
		{name: "ComponentDowngrade", mutate: func(s *driverScenario) {
			s.change.NewOperator = "v25.10.0"
			for name, hw := range map[string]string{"v100-op": hwV100, "h200-op": hwH200} {
				e := operatorRecord(name, hw)
				e.Record.Target.GPUOperator = "v25.10.0"
				s.cluster.Records[name] = e
			}
		}, want: []Code{CodeComponentDowngrade}},
		{name: "VersionInvalid", mutate: func(s *driverScenario) { s.change.NewOperator = "latest" }, want: []Code{CodeVersionInvalid, CodeTargetNotQualified}},
		{name: "ConcurrencyNotSerial: the operator would re-render the driver DaemonSet without the per-node guard", mutate: func(s *driverScenario) {
			s.change.Policy.AutoUpgrade = false
		}, want: []Code{CodeConcurrencyNotSerial}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeDriverScenario(t)
			s.cluster.Records = map[string]RecordEntry{"v100-op": operatorRecord("v100-op", hwV100), "h200-op": operatorRecord("h200-op", hwH200)}
			s.change = DriverChange{Object: "Deployment gpu-operator/gpu-operator", Annotations: map[string]string{AnnotationQualification: "v100-op,h200-op"},
				OldOperator: "v26.3.3", NewOperator: "v26.6.0", OperatorPath: field.NewPath("spec", "template", "spec", "containers").Index(0).Child("image"),
				Policy: s.change.Policy, PolicyPath: s.change.PolicyPath}
			tc.mutate(s)
			r := s.prepareDriver(DriverRequest{Change: s.change, User: s.req.User, Now: s.req.Now})
			assert.Empty(t, r.HolderNodes(), "an operator upgrade lists no holders")
			d := r.Decide(s.holders, nil)
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			assert.Equal(t, len(tc.want) == 0, d.Allowed)
			assert.Equal(t, []string{"gpu-h200-01", "gpu-v100-01", "gpu-v100-02"}, d.Nodes)
		})
	}
}

func TestStartsDriverReload(t *testing.T) {
	for _, tc := range []struct {
		old, new string
		want     bool
	}{
		{"drain-required", "pod-restart-required", true},
		{"upgrade-required", "pod-restart-required", true}, // restart-only shortcut
		{"node-maintenance-required", "pod-restart-required", true},
		{"node-maintenance-required", "post-maintenance-required", true},
		{"", "pod-restart-required", true},
		{"pod-restart-required", "pod-restart-required", false},
		{"drain-required", "upgrade-failed", false},
		{"upgrade-required", "cordon-required", false},
		{"pod-restart-required", "validation-required", false},
	} {
		assert.Equal(t, tc.want, StartsDriverReload(tc.old, tc.new), "%q -> %q", tc.old, tc.new)
	}
}

type driverStepScenario struct {
	*scenario
	step DriverStep
}

func safeDriverStepScenario(t *testing.T) *driverStepScenario {
	d := safeDriverScenario(t)
	s := &driverStepScenario{scenario: d.scenario}
	n := s.node("gpu-v100-01")
	n.Labels[LabelDriverUpgradeState] = "drain-required"
	s.step = DriverStep{Node: n, OldState: "drain-required", NewState: "pod-restart-required",
		Rollout: DriverRollout{Object: "ClusterPolicy cluster-policy", Annotations: map[string]string{AnnotationQualification: "v100-driver,h200-driver"},
			Driver: "580.130.00", DCGM: tupleSource.DCGMExporter, DriverPath: field.NewPath("spec", "driver", "version"), DCGMPath: field.NewPath("spec", "dcgmExporter", "version")},
		User: UserInfo{Name: "system:serviceaccount:gpu-operator:gpu-operator"}, Now: testNow}
	return s
}

func inState(n *corev1.Node, state string) *corev1.Node {
	n = n.DeepCopy()
	n.Labels[LabelDriverUpgradeState] = state
	return n
}

// TestDriverStep: the operator's move of one node into pod-restart-required
// is judged for that node, now.
func TestDriverStep(t *testing.T) {
	holder := []Holder{{Namespace: "ml", Pod: "train-0", Owner: "Job/train", Resources: []string{"nvidia.com/gpu"}}}
	cases := []struct {
		name   string
		mutate func(*driverStepScenario)
		want   []Code
	}{
		{name: "qualified reload of an idle node with no other reload in flight", mutate: func(*driverStepScenario) {}},
		{name: "other GPU nodes queued or done do not count", mutate: func(s *driverStepScenario) {
			s.step.InFlight = []*corev1.Node{inState(s.node("gpu-v100-02"), "upgrade-required"), inState(s.node("gpu-h200-01"), "upgrade-done")}
		}},
		{name: "another GPU node drained for its own reload waits at this step too: it does not count (no deadlock)", mutate: func(s *driverStepScenario) {
			s.step.InFlight = []*corev1.Node{inState(s.node("gpu-v100-02"), "drain-required")}
		}},
		{name: "DisruptionBudgetExceeded: another GPU node is validating its new driver", mutate: func(s *driverStepScenario) {
			s.step.InFlight = []*corev1.Node{inState(s.node("gpu-v100-02"), "validation-required")}
		}, want: []Code{CodeDisruptionBudgetExceeded}},
		{name: "DisruptionBudgetExceeded: another GPU node failed its upgrade", mutate: func(s *driverStepScenario) {
			s.step.InFlight = []*corev1.Node{inState(s.node("gpu-h200-01"), "upgrade-failed")}
		}, want: []Code{CodeDisruptionBudgetExceeded}},
		{name: "DisruptionBudgetExceeded: another GPU node is in a Plan's status.applying", mutate: func(s *driverStepScenario) {
			p := canaryPlan("gpu-v100-02")
			p.Status.Applying = []string{"gpu-v100-02"}
			s.cluster.Plans = append(s.cluster.Plans, p)
		}, want: []Code{CodeDisruptionBudgetExceeded}},
		{name: "a budget of 2 lets a second node reload", mutate: func(s *driverStepScenario) {
			s.cfg.Budget.MaxUnavailable = 2
			s.step.InFlight = []*corev1.Node{inState(s.node("gpu-v100-02"), "validation-required")}
		}},
		{name: "DisruptionBudgetExceeded: the hardware's own budget of 1 holds under a cluster budget of 2", mutate: func(s *driverStepScenario) {
			s.cfg.Budget = BudgetConfig{MaxUnavailable: 2, Hardware: []HardwareBudget{{Hardware: []string{hwV100}, MaxUnavailable: 1}}}
			s.step.InFlight = []*corev1.Node{inState(s.node("gpu-v100-02"), "validation-required")}
		}, want: []Code{CodeDisruptionBudgetExceeded}},
		{name: "the hardware's budget does not count other hardware", mutate: func(s *driverStepScenario) {
			s.cfg.Budget = BudgetConfig{MaxUnavailable: 2, Hardware: []HardwareBudget{{Hardware: []string{hwV100}, MaxUnavailable: 1}}}
			s.step.InFlight = []*corev1.Node{inState(s.node("gpu-h200-01"), "validation-required")}
		}},
		{name: "OutsideWindow: no configured maintenance window is open", mutate: func(s *driverStepScenario) {
			// testNow is Saturday 12:00 UTC.
			s.cfg.Windows.Maintenance = []upgradev1.TimeWindowSpec{{Days: []upgradev1.Day{"su"}, StartTime: "02:00", EndTime: "06:00", TimeZone: "Europe/Berlin"}}
		}, want: []Code{CodeOutsideWindow}},
		{name: "inside a configured maintenance window", mutate: func(s *driverStepScenario) {
			s.cfg.Windows.Maintenance = []upgradev1.TimeWindowSpec{{Days: []upgradev1.Day{"su"}, StartTime: "02:00", EndTime: "06:00", TimeZone: "Europe/Berlin"},
				{Days: []upgradev1.Day{"sa"}, StartTime: "12:00", EndTime: "14:00", TimeZone: "Europe/Berlin"}}
		}},
		{name: "the node itself listed in flight does not count", mutate: func(s *driverStepScenario) {
			s.step.InFlight = []*corev1.Node{inState(s.node("gpu-v100-01"), "pod-restart-required")}
		}},
		{name: "a CPU node in flight does not count", mutate: func(s *driverStepScenario) {
			s.step.InFlight = []*corev1.Node{inState(s.node("cpu-01"), "pod-restart-required")}
		}},
		{name: "GPUHolders: the drain left a holder", mutate: func(s *driverStepScenario) {
			s.holders["gpu-v100-01"] = holder
			s.step.Rollout.Policy.DrainEnabled = true
		}, want: []Code{CodeGPUHolders}},
		{name: "FactsMissing: holders cannot be listed", mutate: func(s *driverStepScenario) { s.holdersErr = errors.New("timeout") }, want: []Code{CodeFactsMissing}},
		{name: "FactsMissing: the rollout cannot be read", mutate: func(s *driverStepScenario) {
			s.step.Rollout = DriverRollout{Missing: "the ClusterPolicy (list clusterpolicies.nvidia.com: timeout)"}
		}, want: []Code{CodeFactsMissing}},
		{name: "FactsMissing: the node's kernel is unknown", mutate: func(s *driverStepScenario) {
			s.step.Node.Status.NodeInfo.KernelVersion = ""
			delete(s.step.Node.Labels, labelKernelFull)
		}, want: []Code{CodeFactsMissing}},
		{name: "RecordMissing: the rolling object names no record", mutate: func(s *driverStepScenario) { s.step.Rollout.Annotations = nil }, want: []Code{CodeRecordMissing}},
		{name: "TargetNotQualified: the operator rolls out an unqualified driver", mutate: func(s *driverStepScenario) { s.step.Rollout.Driver = "580.140.02" }, want: []Code{CodeTargetNotQualified}},
		{name: "TargetNotQualified: an unqualified DCGM exporter", mutate: func(s *driverStepScenario) { s.step.Rollout.DCGM = "4.6.0-4.9.0-distroless" }, want: []Code{CodeTargetNotQualified}},
		{name: "HardwareNotQualified: the H200 node with only the V100 record", mutate: func(s *driverStepScenario) {
			s.step.Node = inState(s.node("gpu-h200-01"), "drain-required")
			delete(s.node("gpu-v100-01").Labels, LabelDriverUpgradeState)
			s.step.Rollout.Annotations[AnnotationQualification] = "v100-driver"
		}, want: []Code{CodeHardwareNotQualified}},
		{name: "ComponentDowngrade: back to 570 without a proven rollback", mutate: func(s *driverStepScenario) {
			s.step.Rollout.Driver = "570.86.15"
			s.cluster.Records["v100-driver"] = driverRecord("v100-driver", hwV100, func(r *qualification.Record) { r.Target.Driver = "570.86.15" })
		}, want: []Code{CodeComponentDowngrade}},
		{name: "restart-only reload at a qualified tuple", mutate: func(s *driverStepScenario) {
			s.step.Node.Labels[labelDriverFull] = "580.130.00"
			s.step.OldState = "upgrade-required"
		}},
		{name: "a non-GPU node is not judged", mutate: func(s *driverStepScenario) {
			s.step.Node, s.step.Rollout = inState(s.node("cpu-01"), "drain-required"), DriverRollout{}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeDriverStepScenario(t)
			tc.mutate(s)
			r := s.prepareDriverStep(s.step)
			d := r.Decide(s.holders, s.holdersErr)
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			assert.Equal(t, len(tc.want) == 0, d.Allowed)
			for _, b := range d.Blockers {
				if b.Node != "" {
					assert.Contains(t, b.Err.Detail, s.step.Node.Name, "a node's blocker names the node")
				}
			}
			assert.Contains(t, d.Message(), "Node "+s.step.Node.Name+" driver reload")
		})
	}
}

func TestDriverStepMessage(t *testing.T) {
	s := safeDriverStepScenario(t)
	s.step.InFlight = []*corev1.Node{inState(s.node("gpu-v100-02"), "uncordon-required")}
	d := s.prepareDriverStep(s.step).Decide(s.holders, nil)
	assert.Contains(t, d.Message(), `Node gpu-v100-01 driver reload (nvidia.com/gpu-driver-upgrade-state drain-required -> pod-restart-required, rolling out ClusterPolicy cluster-policy) is denied`)
	assert.Contains(t, d.Message(), "already out: gpu-v100-02 (driver upgrade state uncordon-required)")
	assert.Equal(t, "metadata.labels[nvidia.com/gpu-driver-upgrade-state]", d.Blockers[0].Err.Field)
	assert.Equal(t, []string{"gpu-v100-01"}, d.Nodes)
}

func TestConfigGPUOperatorCSV(t *testing.T) {
	cfg, err := LoadConfig(nil)
	assert.NoError(t, err)
	assert.Equal(t, "gpu-operator-certified", cfg.GPUOperatorCSV)
	_, err = LoadConfig([]byte("gpuOperatorCSV: Not_A_Name\n"))
	assert.ErrorContains(t, err, `gpuOperatorCSV: Invalid value: "Not_A_Name"`)
}
