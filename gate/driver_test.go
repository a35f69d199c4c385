package gate

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// driverRecord qualifies moving hardware hw from the source tuple to the
// same tuple with driver 580.130.00: what a driver-only change needs.
func driverRecord(id, hw string, mod ...func(*qualification.Record)) RecordEntry {
	return approved(record(append([]func(*qualification.Record){func(r *qualification.Record) {
		r.ID, r.Hardware = id, []string{hw}
		r.Target = tupleSource
		r.Target.Driver = "580.130.00"
	}}, mod...)...))
}

type driverScenario struct {
	*scenario
	change DriverChange
}

func safeDriverScenario(t *testing.T) *driverScenario {
	s := safeScenario(t)
	s.cluster.Records = map[string]RecordEntry{
		"v100-driver": driverRecord("v100-driver-580-130", hwV100),
		"h200-driver": driverRecord("h200-driver-580-130", hwH200),
	}
	policy := field.NewPath("spec", "driver", "upgradePolicy")
	return &driverScenario{scenario: s, change: DriverChange{
		Object:      "ClusterPolicy cluster-policy",
		Annotations: map[string]string{AnnotationQualification: "v100-driver, h200-driver"},
		OldDriver:   "580.126.20", NewDriver: "580.130.00",
		OldDCGM: "4.5.3-4.8.2-distroless", NewDCGM: "4.5.3-4.8.2-distroless",
		DriverPath: field.NewPath("spec", "driver", "version"), DCGMPath: field.NewPath("spec", "dcgmExporter", "version"),
		Policy: DriverUpgradePolicy{Present: true, AutoUpgrade: true, MaxParallelUpgrades: 1}, PolicyPath: policy,
	}}
}

func (s *driverScenario) decide() Decision {
	r := s.prepareDriver(DriverRequest{Change: s.change, User: s.req.User, Now: s.req.Now})
	return r.Decide(s.listed(r), nil)
}

// listed are the holders the adapter lists for the review: those of the
// nodes it asks for (HolderNodes) only.
func (s *driverScenario) listed(r *DriverReview) map[string][]Holder {
	out := map[string][]Holder{}
	for _, n := range r.HolderNodes() {
		if hs, ok := s.holders[n]; ok {
			out[n] = hs
		}
	}
	return out
}

func TestDriverPathRules(t *testing.T) {
	holder := []Holder{{Namespace: "ml", Pod: "train-0", Owner: "Job/train", Resources: []string{"nvidia.com/gpu"}}}
	cases := []struct {
		name   string
		mutate func(*driverScenario)
		want   []Code
	}{
		{name: "qualified serialized driver change is allowed", mutate: func(*driverScenario) {}},
		{name: "an edit that changes no version is not gated", mutate: func(s *driverScenario) {
			s.change.NewDriver, s.change.Annotations = s.change.OldDriver, nil
			s.change.Policy = DriverUpgradePolicy{}
		}},
		{name: "RecordMissing: no annotation", mutate: func(s *driverScenario) { s.change.Annotations = nil }, want: []Code{CodeRecordMissing}},
		{name: "RecordMissing: unknown ConfigMap", mutate: func(s *driverScenario) {
			s.change.Annotations[AnnotationQualification] = "v100-driver,h200-driver,a100-driver"
		}, want: []Code{CodeRecordMissing}},
		{name: "HardwareNotQualified: the H200 has no record", mutate: func(s *driverScenario) {
			s.change.Annotations[AnnotationQualification] = "v100-driver"
		}, want: []Code{CodeHardwareNotQualified}},
		{name: "NVIDIADriver for V100 nodes needs only the V100 record", mutate: func(s *driverScenario) {
			s.change.Object = "NVIDIADriver v100"
			s.change.NodeSelector = map[string]string{"nvidia.com/gpu.product": "Tesla-V100-PCIE-32GB"}
			s.change.Annotations[AnnotationQualification] = "v100-driver"
		}},
		{name: "HardwareUnknown", mutate: func(s *driverScenario) {
			delete(s.node("gpu-v100-01").Labels, "feature.node.kubernetes.io/pci-10de_1db6_10de_124a.present")
		}, want: []Code{CodeHardwareUnknown}},
		{name: "TargetNotQualified: the record is for another kernel", mutate: func(s *driverScenario) {
			s.cluster.Records["v100-driver"] = driverRecord("v100-driver-580-130", hwV100, func(r *qualification.Record) { r.Target.Kernel = "6.8.0-135-generic" })
		}, want: []Code{CodeTargetNotQualified}},
		{name: "TargetNotQualified: another driver", mutate: func(s *driverScenario) { s.change.NewDriver = "580.140.02" }, want: []Code{CodeTargetNotQualified}},
		{name: "SourceMismatch", mutate: func(s *driverScenario) {
			s.cluster.Records["v100-driver"] = driverRecord("v100-driver-580-130", hwV100, func(r *qualification.Record) { r.Source.Kernel = "6.8.0-133-generic" })
		}, want: []Code{CodeSourceMismatch}},
		{name: "ConcurrencyNotSerial: no upgrade policy", mutate: func(s *driverScenario) { s.change.Policy = DriverUpgradePolicy{} }, want: []Code{CodeConcurrencyNotSerial}},
		{name: "ConcurrencyNotSerial: autoUpgrade off", mutate: func(s *driverScenario) { s.change.Policy.AutoUpgrade = false }, want: []Code{CodeConcurrencyNotSerial}},
		{name: "ConcurrencyNotSerial: maxParallelUpgrades 0 (all at once)", mutate: func(s *driverScenario) { s.change.Policy.MaxParallelUpgrades = 0 }, want: []Code{CodeConcurrencyNotSerial}},
		{name: "GPUHolders without drain", mutate: func(s *driverScenario) { s.holders["gpu-v100-01"] = holder }, want: []Code{CodeGPUHolders}},
		{name: "holders drained by the policy are allowed", mutate: func(s *driverScenario) {
			s.holders["gpu-v100-01"] = holder
			s.change.Policy.DrainEnabled = true
		}},
		{name: "ComponentDowngrade: back to 570", mutate: func(s *driverScenario) {
			s.change.NewDriver = "570.86.15"
			for name, hw := range map[string]string{"v100-driver": hwV100, "h200-driver": hwH200} {
				s.cluster.Records[name] = driverRecord(name, hw, func(r *qualification.Record) { r.Target.Driver = "570.86.15" })
			}
		}, want: []Code{CodeComponentDowngrade}},
		{name: "proven rollback is allowed", mutate: func(s *driverScenario) {
			// The nodes run the record's target (580.130); the change goes back
			// to its source (580.126.20), annotated as a rollback.
			for _, n := range []string{"gpu-v100-01", "gpu-v100-02", "gpu-h200-01"} {
				s.node(n).Labels[labelDriverFull] = "580.130.00"
			}
			s.change.OldDriver, s.change.NewDriver = "580.130.00", "580.126.20"
			s.change.Annotations[AnnotationRollback] = "true"
		}},
		{name: "VersionInvalid", mutate: func(s *driverScenario) { s.change.NewDriver = "580-beta" }, want: []Code{CodeVersionInvalid, CodeTargetNotQualified}},
		{name: "SelfApproved", mutate: func(s *driverScenario) { s.req.User.Name = "bob" }, want: []Code{CodeSelfApproved}},
		{name: "EvidenceStale", mutate: func(s *driverScenario) { s.req.Now = completedAt.Add(721 * time.Hour) }, want: []Code{CodeEvidenceStale}},
		{name: "FactsMissing: DCGM exporter not found", mutate: func(s *driverScenario) { s.cluster.DCGMExporterImage = "" }, want: []Code{CodeFactsMissing}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeDriverScenario(t)
			tc.mutate(s)
			d := s.decide()
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			assert.Equal(t, len(tc.want) == 0, d.Allowed)
		})
	}
}

func TestDriverPathAudit(t *testing.T) {
	s := safeDriverScenario(t)
	d := s.decide()
	a := d.AuditAnnotations()
	assert.Equal(t, "allow", a[AuditDecision])
	assert.Equal(t, "v100-driver-580-130@0123456789abcdef0123456789abcdef01234567,h200-driver-580-130@0123456789abcdef0123456789abcdef01234567", a[AuditRecord])
	assert.Equal(t, "gpu-h200-01,gpu-v100-01,gpu-v100-02", a[AuditNodes])
}

// TestDriverPathMessages: every driver-path denial says what to do, and a
// failed read of the ClusterPolicy is reported as that failure, not as a
// ClusterPolicy without upgradePolicy (issue 9).
func TestDriverPathMessages(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*driverScenario)
		code   Code
		want   []string
	}{
		{"SourceMismatch says what to do", func(s *driverScenario) {
			s.cluster.Records["v100-driver"] = driverRecord("v100-driver-580-130", hwV100, func(r *qualification.Record) { r.Source.Kernel = "6.8.0-133-generic" })
		}, CodeSourceMismatch, []string{"does not run record v100-driver-580-130's source tuple: kernel 6.8.0-134-generic (want 6.8.0-133-generic)", "; upgrade it to the source tuple first, or use a record whose source it runs"}},
		{"TargetNotQualified says what to do", func(s *driverScenario) { s.change.NewDriver = "580.140.02" },
			CodeTargetNotQualified, []string{"driver 580.140.02 (want 580.130.00)", "; set the versions to a record's target, or name a record that qualifies this tuple"}},
		{"a failed ClusterPolicy read is FactsMissing naming the read", func(s *driverScenario) {
			s.change.Policy, s.change.PolicyErr = DriverUpgradePolicy{}, errors.New("clusterpolicies.nvidia.com is forbidden")
		}, CodeFactsMissing, []string{"the ClusterPolicy's driver upgradePolicy cannot be read (clusterpolicies.nvidia.com is forbidden)", "retry when the API server answers"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeDriverScenario(t)
			tc.mutate(s)
			d := s.decide()
			assert.False(t, d.Allowed)
			assert.Equal(t, []Code{tc.code}, d.Codes(), d.Message())
			for _, w := range tc.want {
				assert.Contains(t, d.Message(), w)
			}
			assert.NotContains(t, d.Message(), "has no driver upgradePolicy")
		})
	}
}
