package gate_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
)

// TestSelectAllOneBlockerPerProblem (issue 14 item 5): a Plan selecting the
// whole 5,000-node fleet under a V100 record is denied with one blocker per
// distinct problem, not one per node: each other hardware's nodes share one
// HardwareNotQualified that counts and names them, every GPU holder is
// still named on its own node, and every pending node the hardware rule
// refuses is in exactly one blocker's node list.
func TestSelectAllOneBlockerPerProblem(t *testing.T) {
	f := benchFleet()
	everything := fleetgen.GPUPlan("gpu-everything", fleetgen.RecordName("v100"))
	everything.Spec.NodeSelector.MatchExpressions = nil
	r := gate.PreparePlan(f.Config, f.Cluster(nil), gate.PlanRequest{Operation: "CREATE", Plan: everything, User: gate.UserInfo{Name: "alice"}, Now: benchDay.Add(time.Hour)})
	holders := f.Holders(r.HolderNodes())
	d := r.Decide(holders, nil)
	require.False(t, d.Allowed)
	require.Less(t, len(d.Blockers), 30, d.Message())

	var refused []string
	perHardware := map[string]int{}
	for _, b := range d.Blockers {
		switch b.Code {
		case gate.CodeHardwareNotQualified:
			require.Empty(t, b.Node)
			require.True(t, slices.IsSorted(b.Nodes))
			require.Contains(t, b.Err.Detail, strings.Join(b.Nodes[:5], ",")+" and ")
			require.Contains(t, b.Err.Detail, "but record v100-r580-canary-1 qualifies 10de:1db6/10de:124a; select only nodes of the qualified hardware")
			perHardware[strings.SplitN(b.Nodes[0], "-", 3)[1]]++
			refused = append(refused, b.Nodes...)
		case gate.CodeGPUHolders:
			require.NotEmpty(t, b.Node)
			require.Contains(t, b.Err.Detail, holders[b.Node][0].String())
		}
	}
	require.Equal(t, map[string]int{"a100": 1, "h200": 1, "l40s": 1}, perHardware)
	var want []string
	for _, n := range d.Nodes {
		if !strings.HasPrefix(n, "gpu-v100-") {
			want = append(want, n)
		}
	}
	slices.Sort(refused)
	require.Equal(t, want, refused)
	holding := 0
	for _, hs := range holders {
		if len(hs) > 0 {
			holding++
		}
	}
	codes := 0
	for _, b := range d.Blockers {
		if b.Code == gate.CodeGPUHolders {
			codes++
		}
	}
	require.Equal(t, holding, codes, "one GPUHolders blocker per node with holders")
}
