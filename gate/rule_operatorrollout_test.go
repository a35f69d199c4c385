package gate

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// rolledOutOperator is the GPU Operator's Deployment as the Deployment
// controller leaves it once a rollout has finished, installed by OLM.
func rolledOutOperator() *OperatorRollout {
	return &OperatorRollout{Deployment: "gpu-operator/gpu-operator", Generation: 3, ObservedGeneration: 3,
		Desired: 1, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		CSV: OperatorCSVs{Served: true, Items: []OperatorCSV{{Name: "gpu-operator-certified.v26.3.3", Phase: "Succeeded", Reason: "InstallSucceeded"}}}}
}

// TestOperatorRolloutUnfinished: a driver change, and the per-node driver
// step, wait for the GPU Operator's own rollout; each way it can be
// unfinished is named, and its neighbouring finished state is allowed.
func TestOperatorRolloutUnfinished(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*OperatorRollout)
		nilRO  bool
		cfgOff bool
		want   string // "" = allowed; else a piece of the message
	}{
		{name: "rolled out, CSV Succeeded", mutate: func(*OperatorRollout) {}},
		{name: "a Helm install: no OLM API, the CSV is not checked", mutate: func(o *OperatorRollout) { o.CSV = OperatorCSVs{} }},
		{name: "OLM served but no CSV of the package (Helm on an OLM cluster)", mutate: func(o *OperatorRollout) { o.CSV.Items = nil }},
		{name: "scaled to two, both rolled out", mutate: func(o *OperatorRollout) {
			o.Desired, o.Replicas, o.UpdatedReplicas, o.ReadyReplicas, o.AvailableReplicas = 2, 2, 2, 2, 2
		}},
		{name: "spec not observed yet", mutate: func(o *OperatorRollout) { o.Generation = 4 },
			want: "status.observedGeneration 3 < metadata.generation 4"},
		{name: "progress deadline exceeded", mutate: func(o *OperatorRollout) { o.DeadlineExceeded = true },
			want: "ProgressDeadlineExceeded"},
		{name: "new replica not created yet", mutate: func(o *OperatorRollout) { o.UpdatedReplicas = 0 },
			want: "0 of 1 replicas updated"},
		{name: "old replica pending termination", mutate: func(o *OperatorRollout) { o.Replicas = 2 },
			want: "1 old replica(s) pending termination (status.replicas 2, updatedReplicas 1)"},
		{name: "updated replica not available", mutate: func(o *OperatorRollout) { o.AvailableReplicas = 0 },
			want: "0 of 1 updated replicas available"},
		{name: "replica not ready", mutate: func(o *OperatorRollout) { o.ReadyReplicas = 0 },
			want: "0 of 1 replicas ready"},
		{name: "CSV still installing", mutate: func(o *OperatorRollout) {
			o.CSV.Items = append(o.CSV.Items, OperatorCSV{Name: "gpu-operator-certified.v26.3.4", Phase: "Installing", Reason: "InstallWaiting"})
		}, want: "ClusterServiceVersion gpu-operator-certified.v26.3.4 is in phase Installing, not Succeeded (reason InstallWaiting)"},
		{name: "CSV without a phase yet", mutate: func(o *OperatorRollout) { o.CSV.Items[0].Phase, o.CSV.Items[0].Reason = "", "" },
			want: "is in phase <none>, not Succeeded"},
		{name: "CSVs cannot be listed: fail closed", mutate: func(o *OperatorRollout) { o.CSV.Err = errors.New("forbidden") },
			want: "ClusterServiceVersions cannot be read (forbidden)"},
		{name: "Deployment cannot be read: fail closed", mutate: func(o *OperatorRollout) { o.Err = errors.New(`deployments.apps "gpu-operator" not found`) },
			want: "Deployment gpu-operator/gpu-operator cannot be read"},
		{name: "not read at all: fail closed", nilRO: true, want: "not read for this review"},
		{name: "precondition off", mutate: func(o *OperatorRollout) { o.Replicas = 2 }, cfgOff: true},
	}
	for _, tc := range cases {
		for _, path := range []string{"driver change", "driver step"} {
			t.Run(tc.name+"/"+path, func(t *testing.T) {
				ds, st := safeDriverScenario(t), safeDriverStepScenario(t)
				for _, sc := range []*scenario{ds.scenario, st.scenario} {
					if tc.nilRO {
						sc.operatorRollout = nil
					} else {
						tc.mutate(sc.operatorRollout)
					}
					sc.cfg.OperatorRollout.Required = !tc.cfgOff
				}
				d := ds.decide()
				if path == "driver step" {
					d = st.prepareDriverStep(st.step).Decide(st.holders, nil)
				}
				if tc.want == "" {
					assert.True(t, d.Allowed, d.Message())
					return
				}
				assert.Equal(t, []Code{CodeOperatorRolloutUnfinished}, d.Codes(), d.Message())
				assert.Contains(t, d.Message(), tc.want)
				assert.Contains(t, d.Message(), "operatorRollout.required: false")
				if path == "driver step" {
					assert.Contains(t, d.Message(), "driver change (ClusterPolicy cluster-policy on node gpu-v100-01)")
				}
			})
		}
	}
}

// TestOperatorRolloutNotOnOtherPaths: an upgrade of the operator itself and
// a Plan do not read the operator's rollout.
func TestOperatorRolloutNotOnOtherPaths(t *testing.T) {
	s := safeScenario(t)
	s.operatorRollout = nil
	d := s.decide()
	assert.NotContains(t, d.Codes(), CodeOperatorRolloutUnfinished, d.Message())
}
