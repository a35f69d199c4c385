package gate_test

// Engine benchmarks on the fleet (internal/fleetgen): 5,000 nodes,
// 1,000 GPU nodes of 4 hardware identities in 3 zones, ~60 labels a node, 50
// Plans. Targets (issue 5): a Plan decision at most 1 ms, a Node decision at
// most 20 µs. Run: go test -run '^$' -bench . -benchmem ./gate/
// (make bench runs them and publishes the figures in docs/performance.md).

import (
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/benchcpu"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

var benchDay = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)

// benchFleet is the fleet with labels and the status fields the
// webhook's informer keeps (StripNode), built once.
var benchFleet = sync.OnceValue(func() *fleetgen.Fleet { return fleetgen.Generate(fleetgen.Options{Seed: 1, Now: benchDay}) })

func planByName(b *testing.B, f *fleetgen.Fleet, name string) *upgradev1.Plan {
	for _, p := range f.Plans {
		if p.Name == name {
			return p
		}
	}
	b.Fatalf("no Plan %s", name)
	return nil
}

// BenchmarkPlanDecision is one Plan review's engine work: select among 5,000
// nodes, read the GPU nodes' facts, apply every rule (PreparePlan + Decide).
// The holders are given (the webhook lists them from the API server).
func BenchmarkPlanDecision(b *testing.B) {
	f := benchFleet()
	cl := f.Cluster(nil)
	everything := fleetgen.GPUPlan("gpu-everything", fleetgen.RecordName("v100"))
	everything.Spec.NodeSelector.MatchExpressions = nil // {} selects every node
	cases := []struct {
		name    string
		plan    *upgradev1.Plan
		allowed bool
	}{
		// One V100 node by hostname: the common canary.
		{"canary", planByName(b, f, "gpu-v100-canary-zone-b"), true},
		// Four V100 nodes of one zone by identity, zone and wave labels; a
		// wave also looks for a proven canary among all GPU nodes.
		{"wave", planByName(b, f, "gpu-v100-zone-a-wave-1"), true},
		// An RKE2 agent Plan selecting ~440 CPU nodes: no GPU node, allowed.
		{"rke2-agent", planByName(b, f, "rke2-agent-cpu-pool-1"), true},
		// The worst case: {} selects all 5,000 nodes, 1,000 GPU nodes of 4
		// hardware identities; denied with one blocker per distinct problem
		// (nodes of one hardware with the same problem share one).
		{"select-everything", everything, false},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			req := gate.PlanRequest{Operation: "CREATE", Plan: tc.plan, User: gate.UserInfo{Name: "alice", Groups: []string{"platform-admins"}}, Now: benchDay.Add(time.Hour)}
			r := gate.PreparePlan(f.Config, cl, req)
			holders := f.Holders(r.HolderNodes())
			if d := r.Decide(holders, nil); d.Allowed != tc.allowed {
				b.Fatalf("%s: allowed=%v, want %v: %s", tc.name, d.Allowed, tc.allowed, d.Message())
			}
			b.ReportAllocs()
			cpu := benchcpu.Start(b)
			for b.Loop() {
				r := gate.PreparePlan(f.Config, cl, req)
				_ = r.Decide(holders, nil)
			}
			cpu.Stop()
		})
	}
}

// BenchmarkNodeDecision is one Node label-change review's engine work with 50
// Plans in the cluster (PrepareNode + Decide).
func BenchmarkNodeDecision(b *testing.B) {
	f := benchFleet()
	cl := f.Cluster(nil)
	plain := f.ByRole("v100", "zone-b", fleetgen.RolePlain)[0]
	cordoned := f.ByRole("a100", "", fleetgen.RoleCordoned)[0]
	change := func(n *corev1.Node, mod func(*corev1.Node)) *corev1.Node {
		c := n.DeepCopy()
		mod(c)
		return c
	}
	cases := []struct {
		name     string
		old, new *corev1.Node
		allowed  bool
	}{
		// A label no Plan selects (the rack): checked against all 50 Plans.
		{"relabel", plain, change(plain, func(n *corev1.Node) { n.Labels[fleetgen.LabelRack] = "zone-b-r99" }), true},
		// Joining wave-2 pulls the node into that wave's Plan, which is then
		// decided over the 5,000 nodes as if it were applied now; the write
		// names its mover (MovedByMissing otherwise).
		{"join-wave", plain, change(plain, func(n *corev1.Node) {
			n.Labels[fleetgen.LabelWave] = "wave-2"
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[gate.AnnotationMovedBy] = "alice"
		}), true},
		// A GPU mode change on a cordoned node.
		{"mode-change", cordoned, change(cordoned, func(n *corev1.Node) {
			n.Labels[gate.LabelWorkloadMode], n.Labels[gate.LabelExpectedWorkloadMode] = "vm-passthrough", "vm-passthrough"
			n.Labels[gate.LabelWorkloadConfig] = "vm-passthrough"
		}), true},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			req := gate.NodeRequest{Node: tc.new, OldNode: tc.old, User: gate.UserInfo{Name: "alice", Groups: []string{"platform-admins"}}, Now: benchDay.Add(time.Hour)}
			r := gate.PrepareNode(f.Config, cl, req)
			holders := f.Holders(r.HolderNodes())
			if d := r.Decide(holders, nil); d.Allowed != tc.allowed {
				b.Fatalf("%s: allowed=%v, want %v: %s", tc.name, d.Allowed, tc.allowed, d.Message())
			}
			b.ReportAllocs()
			cpu := benchcpu.Start(b)
			for b.Loop() {
				r := gate.PrepareNode(f.Config, cl, req)
				_ = r.Decide(holders, nil)
			}
			cpu.Stop()
		})
	}
}

// BenchmarkRecord is loading and validating one record: the strict YAML
// loader and the checks (qualification.Parse + Check), and the whole record
// ConfigMap review (gate.DecideRecord: load, checks, version parsing).
func BenchmarkRecord(b *testing.B) {
	f := benchFleet()
	cm := f.RecordConfigMaps[0]
	data := []byte(cm.Data[qualification.ConfigMapKey])
	now := benchDay.Add(time.Hour)
	fresh := qualification.Freshness{Now: now, MaxAge: f.Config.MaxCanaryAge.Duration, ClockSkew: f.Config.ClockSkew.Duration}
	b.Run("parse+check", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			rec, err := qualification.Parse(data)
			if err != nil {
				b.Fatal(err)
			}
			if p := qualification.Check(rec, fresh); len(p) > 0 {
				b.Fatal(p.ErrorList())
			}
		}
	})
	// The record as its author creates it (an approval is a write of its
	// own, by someone else: rule_attestation.go).
	created := cm.DeepCopy()
	created.Annotations = map[string]string{qualification.AnnotationAuthor: fleetgen.RecordAuthor}
	b.Run("configmap-review", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if d := gate.DecideRecord(f.Config, gate.RecordRequest{ConfigMap: created, User: gate.UserInfo{Name: fleetgen.RecordAuthor}, Now: now}); !d.Allowed {
				b.Fatal(d.Message())
			}
		}
	})
}

// BenchmarkNextSnapshot is what the first Plan review after a node changed
// pays on top of a decision: the webhook indexes the new node list, carrying
// over what it knew of every unchanged node (NewNodeIndex with the previous
// index), and the review builds the snapshot's fleet facts and label lists
// on first use. Compare with BenchmarkPlanDecision/canary, the steady state.
func BenchmarkNextSnapshot(b *testing.B) {
	f := benchFleet()
	cl := f.Cluster(nil)
	req := gate.PlanRequest{Operation: "CREATE", Plan: planByName(b, f, "gpu-v100-canary-zone-b"), User: gate.UserInfo{Name: "alice", Groups: []string{"platform-admins"}}, Now: benchDay.Add(time.Hour)}
	holders := f.Holders(gate.PreparePlan(f.Config, cl, req).HolderNodes())
	if d := gate.PreparePlan(f.Config, cl, req).Decide(holders, nil); !d.Allowed {
		b.Fatal(d.Message())
	}
	prev := cl.Index
	b.ReportAllocs()
	cpu := benchcpu.Start(b)
	i := 0
	for b.Loop() {
		next := *cl
		next.Nodes = append([]*corev1.Node(nil), cl.Nodes...)
		changed := next.Nodes[i%len(next.Nodes)].DeepCopy() // a kubelet's status write
		changed.ResourceVersion += "1"
		next.Nodes[i%len(next.Nodes)] = changed
		next.Index = gate.NewNodeIndex(f.Config, next.Nodes, prev)
		_ = gate.PreparePlan(f.Config, &next, req).Decide(holders, nil)
		prev = next.Index
		i += 7
	}
	cpu.Stop()
}

// BenchmarkSUCStep is the per-node guard's engine work for SUC's Job start
// (PrepareSUCStep + Decide): the Plan's rules on one node, the Node as read
// live; the holders are given. The cached nodes carry a resourceVersion, as
// in the webhook's informer; the live read is, as a rule, that very
// version, else a newer one (a view of the fleet with it swapped in).
func BenchmarkSUCStep(b *testing.B) {
	f := benchFleet()
	cl := f.Cluster(func(n *corev1.Node) *corev1.Node {
		c := n.DeepCopy()
		c.ResourceVersion = "1"
		return c
	})
	gpu := f.ByRole("v100", "zone-a", fleetgen.RoleCanaryPlan)[0].Name
	live := func(name, rv string) *corev1.Node {
		for _, n := range cl.Nodes {
			if n.Name == name {
				c := n.DeepCopy()
				c.ResourceVersion = rv
				return c
			}
		}
		b.Fatalf("no node %s", name)
		return nil
	}
	cases := []struct {
		name, plan string
		node       *corev1.Node
	}{
		// The V100 canary Plan's node (a GPU node: every rule), as cached.
		{"canary", "gpu-v100-canary-zone-a", live(gpu, "1")},
		// The same, a version the cache has not seen yet.
		{"canary-newer-node", "gpu-v100-canary-zone-a", live(gpu, "2")},
		// An RKE2 agent Plan's CPU node: not the gate's business.
		{"rke2-agent-cpu", "rke2-agent-cpu-pool-1", live("cpu-0001", "1")},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			req := gate.SUCStepRequest{Object: "Job system-upgrade/apply-" + tc.plan, Plan: planByName(b, f, tc.plan), Node: tc.node,
				User: gate.UserInfo{Name: "system:serviceaccount:system-upgrade:system-upgrade"}, Now: benchDay.Add(time.Hour)}
			st := gate.PrepareSUCStep(f.Config, cl, req)
			holders := f.Holders(st.HolderNodes())
			if d := st.Decide(holders, nil); !d.Allowed {
				b.Fatalf("%s: denied: %s", tc.name, d.Message())
			}
			b.ReportAllocs()
			cpu := benchcpu.Start(b)
			for b.Loop() {
				st := gate.PrepareSUCStep(f.Config, cl, req)
				_ = st.Decide(holders, nil)
			}
			cpu.Stop()
		})
	}
}
