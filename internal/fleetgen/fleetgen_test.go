package fleetgen

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

var day = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)

func TestDeterministic(t *testing.T) {
	a, err := json.Marshal(Generate(Options{Seed: 7, Nodes: 600, Now: day, Kubelet: true}))
	require.NoError(t, err)
	b, err := json.Marshal(Generate(Options{Seed: 7, Nodes: 600, Now: day, Kubelet: true}))
	require.NoError(t, err)
	assert.Equal(t, string(a), string(b), "the same options must give the same fleet")
	c, err := json.Marshal(Generate(Options{Seed: 8, Nodes: 600, Now: day, Kubelet: true}))
	require.NoError(t, err)
	assert.NotEqual(t, string(a), string(c), "another seed gives other details")
}

func TestKubeletDetailsDoNotChangeTheFleet(t *testing.T) {
	a := Generate(Options{Seed: 5, Nodes: 900, Now: day})
	b := Generate(Options{Seed: 5, Nodes: 900, Now: day, Kubelet: true})
	require.Len(t, b.Nodes, len(a.Nodes))
	for i, n := range a.Nodes {
		assert.Equal(t, n.Labels, b.Nodes[i].Labels, n.Name)
		assert.Equal(t, n.Spec.Unschedulable, b.Nodes[i].Spec.Unschedulable, n.Name)
	}
	assert.Equal(t, a.Roles, b.Roles)
	pa, _ := json.Marshal(a.Pods)
	pb, _ := json.Marshal(b.Pods)
	assert.JSONEq(t, string(pa), string(pb))
}

func TestIssueFleet(t *testing.T) {
	f := Generate(Options{Seed: 1, Now: day, Kubelet: true})
	require.Len(t, f.Nodes, 5000)
	require.Len(t, f.Plans, 50)
	cfg := f.Config
	gpu, labels, images := 0, 0, 0
	zones := map[string]int{}
	ids := map[string]int{}
	for _, n := range f.Nodes {
		labels += len(n.Labels)
		images += len(n.Status.Images)
		assert.Len(t, n.Status.Conditions, 5, n.Name)
		if cfg.IsGPUNode(n) {
			gpu++
			zones[n.Labels[gate.LabelZone]]++
			fa := cfg.FactsOf(n)
			require.Len(t, fa.Identities, 1, n.Name)
			ids[fa.Identities[0]]++
		}
	}
	assert.Equal(t, 1000, gpu)
	assert.Len(t, zones, 3)
	assert.Len(t, ids, 4)
	assert.InDelta(t, 60, float64(labels)/5000, 8, "about 60 labels a node")
	assert.InDelta(t, 40, float64(images)/5000, 2, "about 40 images a node")
	node, err := json.Marshal(f.Node("gpu-v100-0100"))
	require.NoError(t, err)
	t.Logf("labels/node %.1f, images/node %.1f, GPU node JSON %d bytes", float64(labels)/5000, float64(images)/5000, len(node))
}

// TestPlanStory checks the fleet tells the story the load tests rely on:
// every Plan is allowed except the A100 zone-b wave-2 Plan, whose node runs a
// training Job; the records load and check as intended.
func TestPlanStory(t *testing.T) {
	f := Generate(Options{Seed: 1, Now: day})
	cl := f.Cluster(nil)
	now := day.Add(time.Hour)
	for _, p := range f.Plans {
		r := gate.PreparePlan(f.Config, cl, gate.PlanRequest{Operation: "CREATE", Plan: p, User: gate.UserInfo{Name: "alice"}, Now: now})
		d := r.Decide(f.Holders(r.HolderNodes()), nil)
		if p.Name == "gpu-a100-zone-b-wave-2" {
			assert.Equal(t, []gate.Code{gate.CodeGPUHolders}, d.Codes(), p.Name)
			continue
		}
		assert.True(t, d.Allowed, "%s: %s", p.Name, d.Message())
		if strings.HasPrefix(p.Name, "gpu-") {
			assert.NotEmpty(t, r.HolderNodes(), "%s selects pending GPU nodes", p.Name)
		}
	}
	fresh := qualification.Freshness{Now: now, MaxAge: f.Config.MaxCanaryAge.Duration, ClockSkew: f.Config.ClockSkew.Duration}
	for name, e := range cl.Records {
		require.NoError(t, e.Err, name)
		problems := qualification.Check(e.Record, fresh)
		switch name {
		case RecordStale:
			assert.NotEmpty(t, problems.Of(qualification.ProblemStale), name)
		case RecordDraft:
			assert.NotEmpty(t, problems.Of(qualification.ProblemNotQualified), name)
		default:
			assert.Empty(t, problems, name)
		}
	}
}

func TestSmallFleetKeepsTheStory(t *testing.T) {
	f := Generate(Options{Seed: 3, Nodes: 600, GPUNodes: 200, Now: day})
	assert.Len(t, f.Plans, 50)
	for _, hw := range Hardwares {
		assert.NotEmpty(t, f.ByRole(hw.Name, "", RoleCanary), hw.Name)
		assert.NotEmpty(t, f.ByRole(hw.Name, "", RolePlain), hw.Name)
	}
	var cordoned int
	for _, n := range f.Nodes {
		if n.Spec.Unschedulable {
			cordoned++
		}
	}
	_ = corev1.NodeReady
	t.Logf("cordoned %d", cordoned)
}

func TestReviews(t *testing.T) {
	f := Generate(Options{Seed: 1, Now: day, Kubelet: true})
	rs := f.Reviews(day.Add(time.Hour))
	type tally struct{ allowed, denied, bytes int }
	by := map[string]*tally{}
	for _, r := range rs {
		k := r.Kind + "/" + r.Scenario
		if by[k] == nil {
			by[k] = &tally{}
		}
		if r.Allowed {
			by[k].allowed++
		} else {
			by[k].denied++
		}
		by[k].bytes += len(r.Body)
		require.Contains(t, string(r.Body), UIDPlaceholder, r.Name)
	}
	for k, v := range by {
		t.Logf("%-24s allowed %3d denied %3d avg body %6d B", k, v.allowed, v.denied, v.bytes/(v.allowed+v.denied))
	}
	// Every GPU Plan is a finished earlier rollout (one GPU rollout at a
	// time: none is in flight), so a node joining a wave joins an empty one.
	want := map[string][2]bool{ // allowed seen, denied seen
		"plan/create": {true, true}, "plan/update": {true, true}, "node/relabel": {true, false}, "node/join-wave": {true, false},
		"node/join-full-wave": {true, false}, "node/mode-uncordoned": {false, true}, "node/mode-cordoned": {true, false},
		"node/uncordon": {true, false}, "record/create": {true, true},
	}
	for k, w := range want {
		require.NotNil(t, by[k], k)
		assert.Equal(t, w, [2]bool{by[k].allowed > 0, by[k].denied > 0}, k)
	}
}
