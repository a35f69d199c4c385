package gate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/dra"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// TestNodeInstallsDRADriver (issue 25 follow-up 3): a Node write that makes
// a configured DRA plugin DaemonSet schedule on the GPU node installs the
// DRA driver there, as a widened DaemonSet does: it needs a record naming
// that version for the node's tuple. Seen failing before the rule: every
// denial was allowed.
func TestNodeInstallsDRADriver(t *testing.T) {
	const label = "example.com/dra"
	setup := func(t *testing.T) (*scenario, *corev1.Node, *corev1.Node) {
		s, old, n := nodeScenario(t)
		s.cfg.DRADrivers = []dra.Driver{nvidiaDRA}
		ds := draDaemonSet()
		ds.Spec.Template.Spec.NodeSelector[label] = "true"
		ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "gpus", Image: "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"}}
		s.cluster.Proof.DRA.DaemonSets = []*appsv1.DaemonSet{ds}
		s.cluster.Records = map[string]RecordEntry{"v100-dra": draRecord("v100-dra-25-8", hwV100, "v25.8.1")}
		n.Labels[label] = "true"
		return s, old, n
	}
	cases := []struct {
		name   string
		mutate func(s *scenario, old, n *corev1.Node)
		want   []Code
		says   string
	}{
		{name: "a label that schedules the plugin, with a record naming its version for the tuple", mutate: func(*scenario, *corev1.Node, *corev1.Node) {}},
		{name: "RecordMissing: a label that schedules the plugin, no record for the hardware", mutate: func(s *scenario, _, _ *corev1.Node) {
			s.cluster.Records = map[string]RecordEntry{"h200-dra": draRecord("h200-dra-25-8", hwH200, "v25.8.1")}
		}, want: []Code{CodeRecordMissing}, says: "this write makes DaemonSet nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin schedule its DRA kubelet plugin on node gpu-v100-01, installing DRA driver v25.8.1 there"},
		{name: "RecordMissing: the record is not approved", mutate: func(s *scenario, _, _ *corev1.Node) {
			e := s.cluster.Records["v100-dra"]
			e.Attestation = qualification.Attestation{}
			s.cluster.Records["v100-dra"] = e
		}, want: []Code{CodeRecordMissing}},
		{name: "TargetNotQualified: the record names another DRA driver version", mutate: func(s *scenario, _, _ *corev1.Node) {
			s.cluster.Records = map[string]RecordEntry{"v100-dra": draRecord("v100-dra-25-3", hwV100, "v25.3.0")}
		}, want: []Code{CodeTargetNotQualified}, says: "which no record for its hardware qualifies: v100-dra-25-3 (draDriver v25.8.1 (want v25.3.0))"},
		{name: "TargetNotQualified: the record names no DRA driver", mutate: func(s *scenario, _, _ *corev1.Node) {
			s.cluster.Records = map[string]RecordEntry{"v100": approved(record(func(r *qualification.Record) { r.Target, r.Source = tupleSource, nil }))}
		}, want: []Code{CodeTargetNotQualified}, says: "it names no DRA driver version"},
		{name: "TargetNotQualified: removing a taint the plugin does not tolerate", mutate: func(s *scenario, old, n *corev1.Node) {
			old.Labels[label] = "true"
			old.Spec.Taints = []corev1.Taint{{Key: "example.com/dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}}
			s.cluster.Records = map[string]RecordEntry{"v100-dra": draRecord("v100-dra-25-3", hwV100, "v25.3.0")}
		}, want: []Code{CodeTargetNotQualified}},
		{name: "removing a taint the DaemonSet controller tolerates anyway installs nothing", mutate: func(s *scenario, old, n *corev1.Node) {
			old.Labels[label] = "true"
			old.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}}
			s.cluster.Records = nil
		}},
		{name: "a label the plugin's scheduling does not read installs nothing", mutate: func(s *scenario, _, n *corev1.Node) {
			delete(n.Labels, label)
			n.Labels["team"] = "ml"
			s.cluster.Records = nil
		}},
		{name: "a node its plugin already runs on is no install", mutate: func(s *scenario, _, _ *corev1.Node) {
			s.cluster.Records = nil
			s.cluster.Proof.DRA.PluginPods = []*corev1.Pod{draPluginPod("gpu-v100-01", corev1.ConditionTrue, reachedAt)}
		}},
		{name: "FactsMissing: the plugin DaemonSets cannot be read", mutate: func(s *scenario, _, _ *corev1.Node) {
			s.cluster.Proof.DRA.DaemonSetsUnreadable = "daemonsets.apps is forbidden"
		}, want: []Code{CodeFactsMissing}, says: "daemonsets.apps is forbidden"},
		{name: "NFD's write of the label is its own and never waits", mutate: func(s *scenario, old, n *corev1.Node) {
			s.cluster.Records = nil
			s.req.User = nfdMaster
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, old, n := setup(t)
			tc.mutate(s, old, n)
			var d Decision
			if s.req.User.Name == nfdMaster.Name {
				d = PrepareNode(s.cfg, s.cluster, NodeRequest{Node: n, OldNode: old, User: nfdMaster, Now: s.req.Now}).Decide(s.holders, nil)
			} else {
				d = decideNode(s, old, n)
			}
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			assert.Equal(t, len(tc.want) == 0, d.Allowed)
			assert.Contains(t, d.Message(), tc.says)
		})
	}
}
