package gate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

func TestInventoryStatuses(t *testing.T) {
	holder := []Holder{{Namespace: "ml", Pod: "p", Owner: "Job/train", Resources: []string{"nvidia.com/gpu"}}}
	cases := []struct {
		name    string
		mutate  func(s *scenario)
		holders map[string][]Holder
		want    InventoryStatus
		rollbk  string
	}{
		{name: "qualified", mutate: func(*scenario) {}, want: StatusQualified, rollbk: "proven by record source"},
		{name: "at target", mutate: func(s *scenario) { setTuple(s.node("gpu-v100-01"), tupleTarget) }, want: StatusAtTarget, rollbk: "proven by record source"},
		{name: "holders", mutate: func(*scenario) {}, holders: map[string][]Holder{"gpu-v100-01": holder}, want: StatusHolders, rollbk: "proven by record source"},
		{name: "stale", mutate: func(s *scenario) { s.req.Now = completedAt.Add(800 * time.Hour) }, want: StatusStale, rollbk: "proven by record source"},
		{name: "no record: not on the source tuple", mutate: func(s *scenario) { s.node("gpu-v100-01").Status.NodeInfo.KernelVersion = "6.8.0-99-generic" }, want: StatusNoRecord, rollbk: "not proven"},
		{name: "kube-dc record: rollback not proven", mutate: func(s *scenario) { s.cluster.Records["v100-r580"] = approved(record(kubeDC)) }, want: StatusQualified, rollbk: "not proven"},
		{name: "not approved: a record written before attestation", mutate: func(s *scenario) { s.cluster.Records["v100-r580"] = RecordEntry{Record: record()} }, want: StatusNotApproved, rollbk: "proven by record source"},
		{name: "hardware mismatch: a node with a V100 and an H200", mutate: func(s *scenario) {
			s.node("gpu-v100-01").Labels["feature.node.kubernetes.io/pci-10de_2335_10de_18bf.present"] = "true"
		}, want: StatusHardwareMismatch, rollbk: "not proven"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			tc.mutate(s)
			inv := Inventory(s.cfg, s.cluster, tc.holders, s.req.Now)
			require.Len(t, inv, 3, "the GPU nodes only")
			got := inv[1]
			require.Equal(t, "gpu-v100-01", got.Node)
			assert.Equal(t, tc.want, got.Status)
			assert.Equal(t, tc.rollbk, got.Rollback)
			assert.Equal(t, "gpu-h200-01", inv[0].Node)
			assert.Equal(t, StatusNoRecord, inv[0].Status, "no H200 record exists")
		})
	}
	t.Run("fields", func(t *testing.T) {
		s := safeScenario(t)
		inv := Inventory(s.cfg, s.cluster, nil, testNow)[1]
		assert.Equal(t, []string{hwV100}, inv.Hardware)
		assert.Equal(t, tupleSource, inv.Current)
		assert.Equal(t, &InventoryRecord{ConfigMap: "v100-r580", ID: "v100-r580-canary-1", Age: "1d0h", Expires: "2026-12-20T12:00:00Z",
			Approval: "approved by bob, written by carol (attested)", ApprovedBy: "bob"}, inv.Record)
		assert.Equal(t, &tupleTarget, inv.Target)
	})
	t.Run("a usable record wins over a newer stale one", func(t *testing.T) {
		s := safeScenario(t)
		s.cluster.Records["v100-newer-draft"] = approved(record(func(r *qualification.Record) {
			r.ID, r.State = "draft", "draft"
			r.Canary.CompletedAt = completedAt.Add(time.Hour).Format(time.RFC3339)
		}))
		inv := Inventory(s.cfg, s.cluster, nil, testNow)[1]
		assert.Equal(t, "v100-r580", inv.Record.ConfigMap)
		assert.Equal(t, StatusQualified, inv.Status)
	})
}

// TestInventoryProof: a node at its target shows its proof; others show none.
func TestInventoryProof(t *testing.T) {
	s := safeScenario(t)
	setTuple(s.node("gpu-v100-01"), tupleTarget)
	inv := Inventory(s.cfg, s.cluster, nil, s.req.Now)
	require.Equal(t, "gpu-v100-01", inv[1].Node)
	assert.Equal(t, "unproven", inv[1].Proof)
	assert.Contains(t, inv[1].ProofMissing[0], "no validator Pod")
	assert.Empty(t, inv[2].Proof, "gpu-v100-02 is not at a destination")
	prove(s, "gpu-v100-01")
	inv = Inventory(s.cfg, s.cluster, nil, s.req.Now)
	assert.Equal(t, "proven", inv[1].Proof)
	assert.Empty(t, inv[1].ProofMissing)
}
