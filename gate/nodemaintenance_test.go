package gate

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// networkOperatorMaintenance is a NodeMaintenance as the Network Operator's
// OFED upgrade in requestor mode would create it for node.
func networkOperatorMaintenance(node string) NodeMaintenance {
	return NodeMaintenance{Namespace: "nvidia-network-operator", Name: "ofed-upgrade-" + node, Node: node, Requestors: []string{"network.operator"}}
}

// TestNodeMaintenanceOut: another requestor's NodeMaintenance counts its GPU
// node out for the budget (issue 27 item 2).
func TestNodeMaintenanceOut(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*scenario)
		want   []Code
		named  string
	}{
		{name: "DisruptionBudgetExceeded: another GPU node in the Network Operator's maintenance", mutate: func(s *scenario) {
			s.cluster.NodeMaintenances = []NodeMaintenance{networkOperatorMaintenance("gpu-h200-01")}
		}, want: []Code{CodeDisruptionBudgetExceeded}, named: "gpu-h200-01 (NodeMaintenance nvidia-network-operator/ofed-upgrade-gpu-h200-01 of requestor network.operator)"},
		{name: "DisruptionBudgetExceeded: one being deleted counts until it is gone (the operator uncordons in its finalizer)", mutate: func(s *scenario) {
			nm := networkOperatorMaintenance("gpu-h200-01")
			nm.Deleting = true
			s.cluster.NodeMaintenances = []NodeMaintenance{nm}
		}, want: []Code{CodeDisruptionBudgetExceeded}, named: "of requestor network.operator (being deleted"},
		{name: "DisruptionBudgetExceeded: an ignored requestor's request shared with another requestor", mutate: func(s *scenario) {
			s.cfg.NodeMaintenance.IgnoreRequestors = []string{"nvidia-network-operator/gpu-operator.nvidia.com"}
			nm := networkOperatorMaintenance("gpu-h200-01")
			nm.Requestors = []string{"gpu-operator.nvidia.com", "network.operator"}
			s.cluster.NodeMaintenances = []NodeMaintenance{nm}
		}, want: []Code{CodeDisruptionBudgetExceeded}, named: "of requestor gpu-operator.nvidia.com, network.operator"},
		{name: "DisruptionBudgetExceeded: named beside the cordon the maintenance operator made", mutate: func(s *scenario) {
			s.node("gpu-h200-01").Spec.Unschedulable = true
			s.cluster.NodeMaintenances = []NodeMaintenance{networkOperatorMaintenance("gpu-h200-01")}
		}, want: []Code{CodeDisruptionBudgetExceeded}, named: "gpu-h200-01 (NodeMaintenance nvidia-network-operator/ofed-upgrade-gpu-h200-01 of requestor network.operator; cordoned by"},
		{name: "an ignored requestor's request in its namespace does not count", mutate: func(s *scenario) {
			s.cfg.NodeMaintenance.IgnoreRequestors = []string{"nvidia-network-operator/network.operator"}
			s.cluster.NodeMaintenances = []NodeMaintenance{networkOperatorMaintenance("gpu-h200-01")}
		}},
		{name: "DisruptionBudgetExceeded: the ignored requestor's ID in another namespace counts (anyone may write an ID)", mutate: func(s *scenario) {
			s.cfg.NodeMaintenance.IgnoreRequestors = []string{"nvidia-network-operator/network.operator"}
			nm := networkOperatorMaintenance("gpu-h200-01")
			nm.Namespace = "team-ml"
			s.cluster.NodeMaintenances = []NodeMaintenance{nm}
		}, want: []Code{CodeDisruptionBudgetExceeded}, named: "gpu-h200-01 (NodeMaintenance team-ml/ofed-upgrade-gpu-h200-01 of requestor network.operator)"},
		{name: "a CPU node's maintenance does not count", mutate: func(s *scenario) {
			s.cluster.NodeMaintenances = []NodeMaintenance{networkOperatorMaintenance("cpu-01")}
		}},
		{name: "a node that does not exist does not count", mutate: func(s *scenario) {
			s.cluster.NodeMaintenances = []NodeMaintenance{networkOperatorMaintenance("gpu-gone-01")}
		}},
		{name: "the Plan's own pending node in maintenance is already out: it adds nothing", mutate: func(s *scenario) {
			s.cluster.NodeMaintenances = []NodeMaintenance{networkOperatorMaintenance("gpu-v100-01")}
		}},
		{name: "a budget of 2 allows the Plan's node beside one in maintenance", mutate: func(s *scenario) {
			s.cfg.Budget.MaxUnavailable = 2
			s.cluster.NodeMaintenances = []NodeMaintenance{networkOperatorMaintenance("gpu-h200-01")}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			tc.mutate(s)
			d := s.decide()
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			if tc.named != "" {
				assert.Contains(t, d.Message(), tc.named)
			}
		})
	}
}

// TestNodeMaintenanceState: the fleet view shows the node out, naming the
// request.
func TestNodeMaintenanceState(t *testing.T) {
	s := safeScenario(t)
	s.cluster.NodeMaintenances = []NodeMaintenance{networkOperatorMaintenance("gpu-h200-01")}
	var got *NodeStatus
	for _, st := range NodeStates(s.cfg, s.cluster, time.Now()) {
		if st.Node == "gpu-h200-01" {
			got = &st
		}
	}
	require.NotNil(t, got)
	assert.Equal(t, StateOut, got.State)
	assert.Equal(t, []string{"NodeMaintenance nvidia-network-operator/ofed-upgrade-gpu-h200-01 of requestor network.operator"}, got.Why)
}

func TestNodeMaintenanceConfig(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want string
	}{
		{id: "gpu-operator/network-operator.nvidia.com"},
		{id: "network-operator.nvidia.com", want: `nodeMaintenance.ignoreRequestors[0]: Invalid value: "network-operator.nvidia.com": expected <namespace>/<requestorID>`},
		{id: "/network-operator.nvidia.com", want: `Invalid value: "/network-operator.nvidia.com": expected <namespace>/<requestorID>`},
		{id: "Gpu_Operator/network-operator.nvidia.com", want: `Invalid value: "Gpu_Operator/network-operator.nvidia.com": expected <namespace>/<requestorID>`},
		{id: "gpu-operator/x", want: `nodeMaintenance.ignoreRequestors[0]: Invalid value: "gpu-operator/x": expected <namespace>/<requestorID> whose requestor ID is a NodeMaintenance spec.requestorID`},
		{id: "gpu-operator/bad_id", want: `Invalid value: "gpu-operator/bad_id"`},
		{id: "gpu-operator/-lead.example", want: `Invalid value: "gpu-operator/-lead.example"`},
		{id: "gpu-operator/a/b", want: `Invalid value: "gpu-operator/a/b"`},
	} {
		t.Run(tc.id, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.NodeMaintenance.IgnoreRequestors = []string{tc.id}
			errs := cfg.Validate()
			if tc.want == "" {
				assert.Empty(t, errs)
				return
			}
			require.NotEmpty(t, errs)
			assert.Contains(t, errs.ToAggregate().Error(), tc.want)
		})
	}
}

// TestNodeMaintenancesUnreadable: NodeMaintenances that cannot be read
// (their watch failed, one is malformed) fail closed only the moves that
// take a GPU node out, naming the failure; SUC's completion, a person's
// uncordon of a proven node and a relabel go on as before.
func TestNodeMaintenancesUnreadable(t *testing.T) {
	unreadable := errors.New("NodeMaintenance ns/odd: spec.nodeName: expected the name of the node in maintenance, e.g. gpu-node-01 (missing)")
	for _, tc := range []struct {
		name   string
		decide func(t *testing.T, err error) Decision
		// held: the move consumes the budget, so the error refuses it.
		held bool
	}{
		{"a Plan that takes a GPU node out", func(t *testing.T, err error) Decision {
			s := safeScenario(t)
			s.cluster.NodeMaintenancesErr = err
			return s.decide()
		}, true},
		{"SUC's Job start on a GPU node", func(t *testing.T, err error) Decision {
			s := safeStep(t)
			s.cluster.NodeMaintenancesErr = err
			return s.decide(nil)
		}, true},
		{"a driver change", func(t *testing.T, err error) Decision {
			s := safeDriverScenario(t)
			s.cluster.NodeMaintenancesErr = err
			return s.decide()
		}, true},
		{"the driver's per-node step", func(t *testing.T, err error) Decision {
			s := safeDriverStepScenario(t)
			s.cluster.NodeMaintenancesErr = err
			return s.prepareDriverStep(s.step).Decide(nil, nil)
		}, true},
		{"SUC's completion of a proven node", func(t *testing.T, err error) Decision {
			s, old, n := completionScenario(t)
			prove(s, "gpu-v100-01")
			s.cluster.NodeMaintenancesErr = err
			return DecideCompletion(s.cfg, s.cluster, NodeRequest{Node: n, OldNode: old, User: UserInfo{Name: sucUserName}, Now: testNow})
		}, false},
		{"a person's uncordon of a proven node", func(t *testing.T, err error) Decision {
			s, old, n := completionScenario(t)
			prove(s, "gpu-v100-01")
			n.Labels = old.Labels // the uncordon alone
			s.cluster.NodeMaintenancesErr = err
			return PrepareNode(s.cfg, s.cluster, NodeRequest{Node: n, OldNode: old, User: s.req.User, Now: testNow}).Decide(nil, nil)
		}, false},
		{"a relabel that moves no node", func(t *testing.T, err error) Decision {
			s, old, n := nodeScenario(t)
			n.Labels["team"] = "ml"
			s.cluster.NodeMaintenancesErr = err
			return decideNode(s, old, n)
		}, false},
		{"a Plan whose only node is already out", func(t *testing.T, err error) Decision {
			s := safeScenario(t)
			s.node("gpu-v100-01").Labels[LabelDriverUpgradeState] = "pod-restart-required"
			s.cluster.NodeMaintenancesErr = err
			d := s.decide()
			return Decision{Object: d.Object, Allowed: !slices.Contains(d.Codes(), CodeFactsMissing), Blockers: slices.DeleteFunc(slices.Clone(d.Blockers), func(b Blocker) bool { return b.Code != CodeFactsMissing })}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			readable := tc.decide(t, nil)
			require.True(t, readable.Allowed, "readable: %s", readable.Message())
			d := tc.decide(t, unreadable)
			if !tc.held {
				assert.True(t, d.Allowed, "takes no GPU node out: %s", d.Message())
				return
			}
			assert.Equal(t, []Code{CodeFactsMissing}, d.Codes(), d.Message())
			assert.Contains(t, d.Message(), "[FactsMissing] the disruption budget cannot count the GPU nodes out before taking GPU node(s) ")
			assert.Contains(t, d.Message(), "gpu-v100-01")
			assert.Contains(t, d.Message(), " out: the maintenance operator's NodeMaintenances (maintenance.nvidia.com) cannot be read (NodeMaintenance ns/odd: spec.nodeName: expected the name of the node in maintenance")
		})
	}
}
