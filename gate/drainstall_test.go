package gate

import (
	"errors"
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

// TestNodeUnloadsDRADriver: a Node write that stops a configured DRA plugin
// DaemonSet running on the GPU node (a label its scheduling selects on
// removed, a NoExecute taint it does not tolerate added with a label) makes
// the DaemonSet controller delete the plugin Pod there, unloading the DRA
// driver as a narrowed DaemonSet does: refused while the node runs GPU
// holders. Seen failing before: every such write was allowed.
func TestNodeUnloadsDRADriver(t *testing.T) {
	const label = "example.com/dra"
	holder := []Holder{{Namespace: "ml", Pod: "train-0", Owner: "Job/train", Resources: []string{"resourceClaims"}}}
	noExecute := corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoExecute}
	cases := []struct {
		name       string
		mutate     func(s *scenario, ds *appsv1.DaemonSet, old, n *corev1.Node)
		holdersErr error
		want       []Code
		says       string
		once       bool // one blocker only
	}{
		{name: "GPUHolders: the label the plugin selects on removed", mutate: func(*scenario, *appsv1.DaemonSet, *corev1.Node, *corev1.Node) {},
			want: []Code{CodeGPUHolders}, says: "node gpu-v100-01 runs 1 GPU holder(s): Job ml/train [resourceClaims]; this change of the node's labels (which DaemonSet nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin's scheduling reads) no longer selects the node"},
		{name: "GPUHolders: a NoExecute taint the plugin does not tolerate, added with a label", mutate: func(_ *scenario, _ *appsv1.DaemonSet, _, n *corev1.Node) {
			n.Labels[label] = "true"
			n.Labels["team"] = "ml"
			n.Spec.Taints = append(n.Spec.Taints, noExecute)
		}, want: []Code{CodeGPUHolders}, says: "this change of the node's taints (which DaemonSet nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin's scheduling reads)"},
		{name: "FactsMissing: the holders cannot be listed", mutate: func(s *scenario, _ *appsv1.DaemonSet, _, _ *corev1.Node) {
			delete(s.holders, "gpu-v100-01")
		}, holdersErr: errors.New("pods is forbidden"), want: []Code{CodeFactsMissing}, says: "pods is forbidden"},
		{name: "GPUHolders: a GPU mode change that unschedules it is held once, by the mode rule", mutate: func(_ *scenario, _ *appsv1.DaemonSet, _, n *corev1.Node) {
			n.Labels[LabelExpectedWorkloadMode] = "vm-passthrough"
		}, want: []Code{CodeGPUHolders}, says: "stop or migrate them before changing its GPU mode", once: true},
		{name: "no holders: the label removed unloads the driver from nothing in use", mutate: func(s *scenario, _ *appsv1.DaemonSet, _, _ *corev1.Node) {
			delete(s.holders, "gpu-v100-01")
		}},
		{name: "a NoExecute taint the plugin tolerates keeps it", mutate: func(_ *scenario, ds *appsv1.DaemonSet, _, n *corev1.Node) {
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: noExecute.Key, Operator: corev1.TolerationOpExists}}
			n.Labels[label] = "true"
			n.Labels["team"] = "ml"
			n.Spec.Taints = append(n.Spec.Taints, noExecute)
		}},
		{name: "a label the plugin does not read removed keeps it", mutate: func(_ *scenario, _ *appsv1.DaemonSet, old, n *corev1.Node) {
			old.Labels["team"] = "ml"
			n.Labels[label] = "true"
		}},
		{name: "NFD's write of the label is its own and never waits", mutate: func(s *scenario, _ *appsv1.DaemonSet, _, _ *corev1.Node) {
			s.req.User = nfdMaster
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, old, n := nodeScenario(t)
			s.cfg.DRADrivers = []dra.Driver{nvidiaDRA}
			ds := draDaemonSet()
			ds.Spec.Template.Spec.NodeSelector[label] = "true"
			s.cluster.Proof.DRA.DaemonSets = []*appsv1.DaemonSet{ds}
			s.cluster.Proof.DRA.PluginPods = []*corev1.Pod{draPluginPod("gpu-v100-01", corev1.ConditionTrue, reachedAt)}
			old.Labels[label] = "true"
			delete(n.Labels, label)
			s.holders["gpu-v100-01"] = holder
			tc.mutate(s, ds, old, n)
			if s.req.User.Name != nfdMaster.Name {
				n.Annotations[AnnotationMovedBy] = s.req.User.Name
			}
			r := PrepareNode(s.cfg, s.cluster, NodeRequest{Node: n, OldNode: old, User: s.req.User, Now: s.req.Now})
			// The holders the adapter lists: those of HolderNodes.
			listed := map[string][]Holder{}
			for _, name := range r.HolderNodes() {
				if hs, ok := s.holders[name]; ok {
					listed[name] = hs
				}
			}
			d := r.Decide(listed, tc.holdersErr)
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			assert.Equal(t, len(tc.want) == 0, d.Allowed)
			assert.Contains(t, d.Message(), tc.says)
			if tc.once {
				assert.Len(t, d.Blockers, 1, d.Message())
			}
		})
	}
}

// TestNodeTaintsAlone: a Node write that changes only taints (the Node
// webhook sends one that adds a NoExecute taint or lifts a NoSchedule or
// NoExecute one) runs as ReviewNodeTaints: the DRA plugin's install and
// unload judge it, and no other Node rule does, so a person's taint write
// that never reached the gate before meets no rule it never met (every
// Node rule, checked on these writes, is quiet when labels, cordon and the
// two annotations stand: the dispatch makes it hold by construction, not by
// each rule's care). Seen failing: without the dispatch every case fails on
// the review it runs as; without the unload, the NoExecute cases allow.
func TestNodeTaintsAlone(t *testing.T) {
	const label = "example.com/dra"
	holder := []Holder{{Namespace: "ml", Pod: "train-0", Owner: "Job/train", Resources: []string{"resourceClaims"}}}
	dedicated := corev1.Taint{Key: "example.com/dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}
	maintenance := corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoExecute}
	outOfService := corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}
	cases := []struct {
		name   string
		dra    bool // a DRA driver is configured, its plugin selecting the node
		mutate func(s *scenario, ds *appsv1.DaemonSet, old, n *corev1.Node)
		want   []Code
		says   string
	}{
		{name: "TargetNotQualified: lifting a taint the plugin does not tolerate installs it", dra: true, mutate: func(_ *scenario, _ *appsv1.DaemonSet, old, _ *corev1.Node) {
			old.Spec.Taints = []corev1.Taint{dedicated}
		}, want: []Code{CodeTargetNotQualified}, says: "installing DRA driver v25.8.1 there"},
		{name: "lifting a taint the plugin tolerates installs nothing", dra: true, mutate: func(_ *scenario, ds *appsv1.DaemonSet, old, _ *corev1.Node) {
			old.Spec.Taints = []corev1.Taint{dedicated}
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: dedicated.Key, Operator: corev1.TolerationOpEqual, Value: "ml", Effect: corev1.TaintEffectNoSchedule}}
		}},
		{name: "GPUHolders: a NoExecute taint the plugin does not tolerate unloads it", dra: true, mutate: func(s *scenario, _ *appsv1.DaemonSet, _, n *corev1.Node) {
			s.cluster.Proof.DRA.PluginPods = []*corev1.Pod{draPluginPod("gpu-v100-01", corev1.ConditionTrue, reachedAt)}
			n.Spec.Taints = []corev1.Taint{maintenance}
		}, want: []Code{CodeGPUHolders}, says: "this change of the node's taints"},
		{name: "a NoExecute taint the plugin tolerates for a while only unloads it too", dra: true, mutate: func(s *scenario, ds *appsv1.DaemonSet, _, n *corev1.Node) {
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: maintenance.Key, Operator: corev1.TolerationOpExists, TolerationSeconds: new(int64(60))}}
			n.Spec.Taints = []corev1.Taint{maintenance}
		}, want: []Code{CodeGPUHolders}},
		{name: "no holders: the NoExecute taint unloads the driver from nothing in use", dra: true, mutate: func(s *scenario, _ *appsv1.DaemonSet, _, n *corev1.Node) {
			delete(s.holders, "gpu-v100-01")
			n.Spec.Taints = []corev1.Taint{maintenance}
		}},
		// The Node webhook sends a person's out-of-service taint like any
		// (it decides by who writes, not by the key): on a live node it
		// evicts the holders and the plugin.
		{name: "GPUHolders: a person's out-of-service taint on a node running a GPU holder", dra: true, mutate: func(_ *scenario, _ *appsv1.DaemonSet, _, n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{outOfService}
		}, want: []Code{CodeGPUHolders}, says: "this change of the node's taints"},
		// Non-graceful shutdown: the taint-eviction controller deleted the
		// holders once they outlived their unreachable toleration; Pods
		// being deleted hold nothing (Config.HoldersOf), so the listing is
		// empty and the recovery goes through.
		{name: "the out-of-service taint on a shut-down node whose holders are being deleted", dra: true, mutate: func(s *scenario, _ *appsv1.DaemonSet, _, n *corev1.Node) {
			delete(s.holders, "gpu-v100-01")
			n.Spec.Taints = []corev1.Taint{outOfService}
		}},
		{name: "FactsMissing: the plugin DaemonSets cannot be read", dra: true, mutate: func(s *scenario, _ *appsv1.DaemonSet, _, n *corev1.Node) {
			s.cluster.Proof.DRA.DaemonSets, s.cluster.Proof.DRA.DaemonSetsUnreadable = nil, "daemonsets.apps is forbidden"
			n.Spec.Taints = []corev1.Taint{maintenance}
		}, want: []Code{CodeFactsMissing}},
		// No DRA driver configured: nothing reads taints. The node is
		// mid-transition (expected mode vm-passthrough), cordoned by alice
		// and handed over, runs a GPU holder and the destination of no
		// Plan: every taint write stays allowed.
		{name: "no DRA driver: a NoExecute taint added and a NoSchedule one lifted", mutate: func(_ *scenario, _ *appsv1.DaemonSet, old, n *corev1.Node) {
			old.Spec.Taints = []corev1.Taint{dedicated}
			n.Spec.Taints = []corev1.Taint{maintenance}
		}},
		{name: "no DRA driver: a taint's value changes", mutate: func(_ *scenario, _ *appsv1.DaemonSet, old, n *corev1.Node) {
			old.Spec.Taints = []corev1.Taint{dedicated}
			n.Spec.Taints = []corev1.Taint{{Key: dedicated.Key, Value: "batch", Effect: dedicated.Effect}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, old, _ := nodeScenario(t)
			old.Labels[LabelExpectedWorkloadMode] = "vm-passthrough"
			old.Labels[label] = "true"
			s.holders["gpu-v100-01"] = holder
			ds := draDaemonSet()
			ds.Spec.Template.Spec.NodeSelector[label] = "true"
			ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "gpus", Image: "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"}}
			if tc.dra {
				s.cfg.DRADrivers = []dra.Driver{nvidiaDRA}
				s.cluster.Proof.DRA.DaemonSets = []*appsv1.DaemonSet{ds}
			}
			n := old.DeepCopy()
			tc.mutate(s, ds, old, n)
			r := PrepareNode(s.cfg, s.cluster, NodeRequest{Node: n, OldNode: old, User: s.req.User, Now: s.req.Now})
			assert.Equal(t, kindsNodeTaints, r.kinds, "a taint write alone")
			listed := map[string][]Holder{}
			for _, name := range r.HolderNodes() {
				listed[name] = s.holders[name]
			}
			d := r.Decide(listed, nil)
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			assert.Equal(t, len(tc.want) == 0, d.Allowed)
			assert.Contains(t, d.Message(), tc.says)
		})
	}
}
