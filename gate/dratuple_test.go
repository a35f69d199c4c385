package gate

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// draRecord qualifies hardware hw at the source tuple with DRA driver dra.
func draRecord(id, hw, dra string) RecordEntry {
	return approved(record(func(r *qualification.Record) {
		r.ID, r.Hardware = id, []string{hw}
		r.Target = tupleSource
		r.Target.DRADriver = dra
	}))
}

// draMove qualifies hardware hw moving the DRA driver from one release to
// another at the source tuple.
func draMove(id, hw, from, to string) RecordEntry {
	return approved(record(func(r *qualification.Record) {
		r.ID, r.Hardware = id, []string{hw}
		r.Target = tupleSource
		r.Target.DRADriver = to
		src := tupleSource
		src.DRADriver = from
		r.Source = &src
	}))
}

// safeDRAScenario: a new image of the DRA driver's kubelet-plugin DaemonSet
// (v25.3.0 -> v25.8.1), annotated with records naming v25.8.1 for both
// hardware kinds.
func safeDRAScenario(t *testing.T) *driverScenario {
	s := safeScenario(t)
	s.cluster.Records = map[string]RecordEntry{
		"v100-dra": draRecord("v100-dra-25-8", hwV100, "v25.8.1"),
		"h200-dra": draRecord("h200-dra-25-8", hwH200, "v25.8.1"),
	}
	return &driverScenario{scenario: s, change: DriverChange{
		Object:      "DaemonSet nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin",
		Annotations: map[string]string{AnnotationQualification: "v100-dra, h200-dra"},
		Operation:   OpUpdate, OldDRA: "v25.3.0", NewDRA: "v25.8.1",
		DRAPath:  field.NewPath("spec", "template", "spec", "containers").Index(0).Child("image"),
		NoPolicy: true, PolicyPath: field.NewPath("spec", "driver", "upgradePolicy"),
	}}
}

// TestDRADriverPath: a change of the DRA driver's version is a driver-path
// change: it needs a qualified record naming the new version for the
// hardware it reaches; records that leave the DRA driver out qualify no
// move of it.
func TestDRADriverPath(t *testing.T) {
	holder := []Holder{{Namespace: "ml", Pod: "train-0", Owner: "Job/train", Resources: []string{"nvidia.com/gpu"}}}
	cases := []struct {
		name   string
		mutate func(*driverScenario)
		want   []Code
		says   string
	}{
		{name: "a new DRA driver image named by a qualified record is allowed", mutate: func(*driverScenario) {}},
		{name: "the same release (another digest of v25.3.0) is not gated", mutate: func(s *driverScenario) {
			s.change.NewDRA, s.change.Annotations = s.change.OldDRA, nil
		}},
		{name: "RecordMissing: a new DRA driver image without a record", mutate: func(s *driverScenario) { s.change.Annotations = nil },
			want: []Code{CodeRecordMissing}},
		{name: "TargetNotQualified: the records do not name the DRA driver", mutate: func(s *driverScenario) {
			for name, hw := range map[string]string{"v100-dra": hwV100, "h200-dra": hwH200} {
				s.cluster.Records[name] = driverRecord(name, hw, func(r *qualification.Record) { r.Target, r.Source = tupleSource, nil })
			}
		}, want: []Code{CodeTargetNotQualified}, says: "draDriver v25.8.1 (the record names no DRA driver version; the change moves it from v25.3.0)"},
		{name: "TargetNotQualified: the record names another DRA driver", mutate: func(s *driverScenario) { s.change.NewDRA = "v25.12.0" },
			want: []Code{CodeTargetNotQualified}, says: "draDriver v25.12.0 (want v25.8.1)"},
		{name: "a DaemonSet created (from nothing) needs the record too", mutate: func(s *driverScenario) {
			s.change.Operation, s.change.OldDRA, s.change.Annotations = OpCreate, "", nil
		}, want: []Code{CodeRecordMissing}},
		{name: "an unreadable old image still reaches every node", mutate: func(s *driverScenario) {
			s.change.OldDRA = ""
			s.cluster.Records["h200-dra"] = draRecord("h200-dra-25-8", hwH200, "v25.12.0")
		}, want: []Code{CodeTargetNotQualified}},
		{name: "HardwareNotQualified: no record for the H200", mutate: func(s *driverScenario) {
			s.change.Annotations[AnnotationQualification] = "v100-dra"
		}, want: []Code{CodeHardwareNotQualified}},
		{name: "ComponentDowngrade: back to an older DRA driver", mutate: func(s *driverScenario) {
			s.change.OldDRA, s.change.NewDRA = "v25.8.1", "v25.3.0"
			s.cluster.Records["v100-dra"] = draRecord("v100-dra-25-3", hwV100, "v25.3.0")
			s.cluster.Records["h200-dra"] = draRecord("h200-dra-25-3", hwH200, "v25.3.0")
		}, want: []Code{CodeComponentDowngrade}},
		{name: "VersionInvalid: an image pinned by digest alone without a version label", mutate: func(s *driverScenario) {
			s.change.NewDRA, _ = DRADriverVersion([]string{"nvcr.io/nvidia/k8s-dra-driver-gpu@sha256:" + strings.Repeat("ab", 32)}, "")
		}, want: []Code{CodeVersionInvalid, CodeTargetNotQualified}, says: `draDriver version "sha256:abababababab..." is not valid: expected the kubelet plugin image's tag vMAJOR.MINOR.PATCH[-PRERELEASE], e.g. v25.8.1; an image pinned by digest alone needs the DaemonSet label app.kubernetes.io/version`},
		{name: "the kubelet plugin restarting leaves running GPU holders alone", mutate: func(s *driverScenario) { s.holders["gpu-v100-01"] = holder }},
		{name: "the ClusterPolicy's upgrade policy does not roll the DaemonSet", mutate: func(s *driverScenario) { s.change.Policy = DriverUpgradePolicy{} }},
		{name: "DaemonSet nodeSelector: only the nodes it reaches need a record", mutate: func(s *driverScenario) {
			s.change.NodeSelector = map[string]string{"nvidia.com/gpu.product": "Tesla-V100-PCIE-32GB"}
			s.change.Annotations[AnnotationQualification] = "v100-dra"
		}},
		// DELETE of the plugin DaemonSet (webhook: OldDRA = NewDRA): an unload.
		{name: "deleting the plugin DaemonSet while no node holds GPUs and nothing is in flight", mutate: func(s *driverScenario) {
			s.change.Operation, s.change.OldDRA, s.change.Annotations = OpDelete, s.change.NewDRA, nil
		}},
		{name: "GPUHolders: deleting the plugin DaemonSet while a node it serves runs a Pod with a DRA claim", mutate: func(s *driverScenario) {
			s.change.Operation, s.change.OldDRA, s.change.Annotations = OpDelete, s.change.NewDRA, nil
			s.holders["gpu-v100-01"] = []Holder{{Namespace: "ml", Pod: "train-0", Owner: "Job/train", Resources: []string{"resourceClaims"}}}
		}, want: []Code{CodeGPUHolders}, says: "node gpu-v100-01 runs 1 GPU holder(s): Job ml/train [resourceClaims]; deleting this object removes the driver from the node and nothing drains them first: stop or move them before deleting it"},
		{name: "RolloutInFlight: deleting the plugin DaemonSet while a rollout is in flight", mutate: func(s *driverScenario) {
			s.change.Operation, s.change.OldDRA, s.change.Annotations = OpDelete, s.change.NewDRA, nil
			s.node("gpu-h200-01").Labels[LabelDriverUpgradeState] = "upgrade-required"
		}, want: []Code{CodeRolloutInFlight}, says: "the GPU Operator's driver rollout is in flight on GPU node(s) gpu-h200-01 (upgrade-required)"},
		// CREATE after a DELETE: judged from what the nodes still run.
		// Issue 25: nothing of the old one left, the version before is what
		// the records name for the tuple the nodes run (v25.8.1), so an
		// older release is a downgrade, not a fresh install (this case
		// expected TargetNotQualified alone before).
		{name: "ComponentDowngrade: a DaemonSet created again at an older release, nothing of the old one left", mutate: func(s *driverScenario) {
			createAgain(s, "v25.3.0")
		}, want: []Code{CodeComponentDowngrade, CodeTargetNotQualified}, says: "node gpu-h200-01 runs draDriver v25.8.1 (nothing names the DRA driver version the node ran any more, so it is the one record(s) h200-dra-25-8 (v25.8.1) name for the tuple it runs) and the change moves it back to v25.3.0"},
		{name: "created again older as a proven rollback of the records that moved it", mutate: func(s *driverScenario) {
			createAgain(s, "v25.3.0")
			rollbackRecords(s)
			s.change.Annotations = map[string]string{AnnotationQualification: "v100-dra, h200-dra", AnnotationRollback: "true"}
		}},
		{name: "created again at the release the records name for the nodes' tuple", mutate: func(s *driverScenario) {
			createAgain(s, "v25.8.1")
		}},
		{name: "FactsMissing: created again while the records for the node's tuple name different releases", mutate: func(s *driverScenario) {
			createAgain(s, "v25.8.1")
			s.cluster.Records["v100-dra-old"] = draRecord("v100-dra-25-3", hwV100, "v25.3.0")
		}, want: []Code{CodeFactsMissing}, says: "node gpu-v100-01: cannot read the DRA driver version the node ran: nothing names it any more, and the records whose target tuple it runs name different versions: " +
			"v100-dra-25-8 (v25.8.1), v100-dra-25-3 (v25.3.0)"},
		// Issue 25 follow-up: a DRA-only upgrade leaves the record of the
		// release before beside the record that moved it on; the move's
		// head is the release (both expected FactsMissing before).
		{name: "created again at the release a record moved the tuple on to (the record before it superseded)", mutate: func(s *driverScenario) {
			createAgain(s, "v25.8.1")
			rollbackRecords(s)
			s.cluster.Records["v100-dra-before"] = draRecord("v100-dra-25-3", hwV100, "v25.3.0")
			s.cluster.Records["h200-dra-before"] = draRecord("h200-dra-25-3", hwH200, "v25.3.0")
		}},
		{name: "ComponentDowngrade: created again at the superseded release, judged from the move's head", mutate: func(s *driverScenario) {
			createAgain(s, "v25.3.0")
			rollbackRecords(s)
			s.cluster.Records["v100-dra-before"] = draRecord("v100-dra-25-3", hwV100, "v25.3.0")
			s.cluster.Records["h200-dra-before"] = draRecord("h200-dra-25-3", hwH200, "v25.3.0")
			s.change.Annotations = map[string]string{AnnotationQualification: "v100-dra-before, h200-dra-before"}
		}, want: []Code{CodeComponentDowngrade}, says: "node gpu-v100-01 runs draDriver v25.8.1 (nothing names the DRA driver version the node ran any more, so it is the one record(s) v100-dra-25-3-to-25-8 (v25.8.1) name for the tuple it runs, " +
			"which move it on from record(s) v100-dra-25-3 (v25.3.0)) and the change moves it back to v25.3.0"},
		{name: "an unapproved record naming another release says nothing of the node's past", mutate: func(s *driverScenario) {
			createAgain(s, "v25.8.1")
			e := draRecord("v100-dra-25-3", hwV100, "v25.3.0")
			e.Attestation = qualification.Attestation{}
			s.cluster.Records["v100-dra-old"] = e
		}},
		{name: "a record not in state qualified says nothing of the node's past", mutate: func(s *driverScenario) {
			createAgain(s, "v25.8.1")
			e := draRecord("v100-dra-25-3", hwV100, "v25.3.0")
			e.Record.State = "draft"
			s.cluster.Records["v100-dra-old"] = approved(e.Record)
		}},
		{name: "FactsMissing: two moves from the same release to different ones (heads disagree)", mutate: func(s *driverScenario) {
			createAgain(s, "v25.8.1")
			rollbackRecords(s)
			s.cluster.Records["v100-dra-before"] = draRecord("v100-dra-25-3", hwV100, "v25.3.0")
			s.cluster.Records["v100-dra-fork"] = draMove("v100-dra-25-3-to-25-12", hwV100, "v25.3.0", "v25.12.0")
		}, want: []Code{CodeFactsMissing}, says: "name different versions: v100-dra-25-3-to-25-8 (v25.8.1), v100-dra-25-3-to-25-12 (v25.12.0)"},
		{name: "FactsMissing: moves that only go round (no head)", mutate: func(s *driverScenario) {
			createAgain(s, "v25.8.1")
			rollbackRecords(s)
			s.cluster.Records["v100-dra-back"] = draMove("v100-dra-25-8-to-25-3", hwV100, "v25.8.1", "v25.3.0")
		}, want: []Code{CodeFactsMissing}, says: "only move it round in a cycle"},
		{name: "records of other hardware or another tuple say nothing of the node's release", mutate: func(s *driverScenario) {
			createAgain(s, "v25.8.1")
			s.change.NodeSelector = map[string]string{"nvidia.com/gpu.product": "Tesla-V100-PCIE-32GB"}
			s.change.Annotations[AnnotationQualification] = "v100-dra"
			s.cluster.Records["h200-old"] = draRecord("h200-dra-25-3", hwH200, "v25.3.0")
			s.cluster.Records["v100-target"] = approved(record(func(r *qualification.Record) { r.ID, r.Target.DRADriver = "v100-dra-target", "v25.3.0" }))
		}},
		{name: "a node whose tuple's records name no DRA driver stays a fresh install", mutate: func(s *driverScenario) {
			createAgain(s, "v25.3.0")
			plain := func(id, hw string) RecordEntry {
				return approved(record(func(r *qualification.Record) {
					r.ID, r.Hardware, r.Target, r.Source = id, []string{hw}, tupleSource, nil
				}))
			}
			s.cluster.Records = map[string]RecordEntry{"v100-plain": plain("v100-plain", hwV100), "h200-plain": plain("h200-plain", hwH200)}
			s.change.Annotations = map[string]string{AnnotationQualification: "v100-plain, h200-plain"}
		}, want: []Code{CodeTargetNotQualified}, says: "draDriver v25.3.0 (the record names no DRA driver version; the change moves it from <none>)"},
		{name: "a DaemonSet created again with a record naming its version, nothing left", mutate: func(s *driverScenario) {
			s.change.Operation, s.change.OldDRA = OpCreate, ""
			s.change.DRAPlugin = &DRAPluginCreate{Driver: nvidiaDRA, Pods: labels.SelectorFromSet(labels.Set{"app": "kubelet-plugin"})}
			// Terminating Pods of the deleted DaemonSet are gone already.
			p := draPluginPod("gpu-v100-01", corev1.ConditionTrue, reachedAt)
			p.Labels, p.OwnerReferences, p.DeletionTimestamp = map[string]string{"app": "kubelet-plugin"}, nil, &metav1.Time{Time: reachedAt}
			s.cluster.Proof.DRA.PluginPods = []*corev1.Pod{p}
		}},
		{name: "FactsMissing: created again while the old plugin still runs on a node (orphaned Pod)", mutate: func(s *driverScenario) {
			s.change.Operation, s.change.OldDRA, s.change.NewDRA = OpCreate, "", "v25.8.1"
			s.change.DRAPlugin = &DRAPluginCreate{Driver: nvidiaDRA, Pods: labels.SelectorFromSet(labels.Set{"app": "kubelet-plugin"})}
			p := draPluginPod("gpu-v100-01", corev1.ConditionTrue, reachedAt)
			p.Labels, p.OwnerReferences = map[string]string{"app": "kubelet-plugin"}, nil
			s.cluster.Proof.DRA.PluginPods = []*corev1.Pod{p}
		}, want: []Code{CodeFactsMissing}, says: "node gpu-v100-01: cannot read the DRA driver version the node runs: Pod nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin-gpu-v100-01 still run there, " +
			"and the DaemonSet nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin that named their version is gone"},
		{name: "FactsMissing: created again while the old plugin's slices are still there", mutate: func(s *driverScenario) {
			s.change.Operation, s.change.OldDRA = OpCreate, ""
			s.change.DRAPlugin = &DRAPluginCreate{Driver: nvidiaDRA, Pods: labels.SelectorFromSet(labels.Set{"app": "kubelet-plugin"})}
			s.cluster.Proof.DRA.Slices = []*resourcev1.ResourceSlice{draSlice("gpu-h200-01", 1, 1, 8)}
		}, want: []Code{CodeFactsMissing}, says: "node gpu-h200-01: cannot read the DRA driver version the node runs: 1 ResourceSlice(s) of gpu.nvidia.com still run there"},
		// Issue 25 follow-up: a GPUCluster's CREATE (the operator creates
		// the plugin DaemonSet later, its selector unseen) reads what is
		// left of the driver as the DaemonSet's CREATE does (no Pod counted
		// before).
		{name: "a GPUCluster created with nothing of the driver left, at the release the records name", mutate: func(s *driverScenario) {
			createGPUCluster(s, "v25.8.1")
			job := draPluginPod("gpu-v100-01", corev1.ConditionTrue, reachedAt)
			job.Name, job.OwnerReferences = "nvidia-dra-driver-gpu-validation", []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "validation", UID: "j", Controller: new(true)}}
			s.cluster.Proof.DRA.PluginPods = []*corev1.Pod{job} // another controller's Pod: not the plugin's
		}},
		// A GPUCluster that deploys the NVIDIA DRA driver while
		// config.draDrivers has no gpu.nvidia.com entry reads nothing of
		// it (webhook: DRAUnconfigured): refused, naming the entry.
		{name: "FactsMissing: a GPUCluster deploying the DRA driver with no gpu.nvidia.com entry in config.draDrivers", mutate: func(s *driverScenario) {
			createGPUCluster(s, "v25.8.1")
			s.change.DRAPlugin, s.change.DRAUnconfigured = nil, "gpu.nvidia.com"
		}, want: []Code{CodeFactsMissing}, says: "[FactsMissing] this write makes the GPU Operator deploy the DRA driver gpu.nvidia.com, but config.draDrivers has no entry named gpu.nvidia.com"},
		{name: "FactsMissing: a GPUCluster switching the DRA driver on at the version it names, unconfigured", mutate: func(s *driverScenario) {
			createGPUCluster(s, "v25.8.1")
			s.change.Operation, s.change.OldDRA, s.change.Annotations = OpUpdate, "v25.8.1", nil
			s.change.DRAPlugin, s.change.DRAUnconfigured = nil, "gpu.nvidia.com"
		}, want: []Code{CodeFactsMissing}, says: "add to config.draDrivers {name: gpu.nvidia.com"},
		{name: "FactsMissing: a GPUCluster created while an orphaned plugin Pod still runs on a node", mutate: func(s *driverScenario) {
			createGPUCluster(s, "v25.8.1")
			p := draPluginPod("gpu-v100-01", corev1.ConditionTrue, reachedAt)
			p.OwnerReferences = nil
			s.cluster.Proof.DRA.PluginPods = []*corev1.Pod{p}
		}, want: []Code{CodeFactsMissing}, says: "node gpu-v100-01: cannot read the DRA driver version the node runs: Pod nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin-gpu-v100-01 still run there, " +
			"and the GPUCluster does not say which version they run"},
		// A GPUCluster UPDATE that switches the driver on is its CREATE
		// (the webhook sets DRAPlugin and no version before): what is left
		// is read. Seen failing before: allowed, nothing read.
		{name: "FactsMissing: a GPUCluster switching the DRA driver on while an orphaned plugin Pod still runs on a node", mutate: func(s *driverScenario) {
			createGPUCluster(s, "v25.8.1")
			s.change.Operation = OpUpdate
			p := draPluginPod("gpu-v100-01", corev1.ConditionTrue, reachedAt)
			p.OwnerReferences = nil
			s.cluster.Proof.DRA.PluginPods = []*corev1.Pod{p}
		}, want: []Code{CodeFactsMissing}, says: "node gpu-v100-01: cannot read the DRA driver version the node runs: Pod nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin-gpu-v100-01 still run there"},
		{name: "a GPUCluster switching the DRA driver on with nothing of it left, at the release the records name", mutate: func(s *driverScenario) {
			createGPUCluster(s, "v25.8.1")
			s.change.Operation = OpUpdate
		}},
		{name: "FactsMissing: a GPUCluster created while the plugin DaemonSet's Pod still runs on a node", mutate: func(s *driverScenario) {
			createGPUCluster(s, "v25.8.1")
			s.cluster.Proof.DRA.PluginPods = []*corev1.Pod{draPluginPod("gpu-h200-01", corev1.ConditionTrue, reachedAt)}
		}, want: []Code{CodeFactsMissing}, says: "node gpu-h200-01: cannot read the DRA driver version the node runs: Pod nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin-gpu-h200-01 still run there"},
		{name: "FactsMissing: a GPUCluster created while the old plugin's slices are still there", mutate: func(s *driverScenario) {
			createGPUCluster(s, "v25.8.1")
			s.cluster.Proof.DRA.Slices = []*resourcev1.ResourceSlice{draSlice("gpu-h200-01", 1, 1, 8)}
		}, want: []Code{CodeFactsMissing}, says: "node gpu-h200-01: cannot read the DRA driver version the node runs: 1 ResourceSlice(s) of gpu.nvidia.com still run there"},
		// UPDATE of the plugin DaemonSet's scheduling: the nodes it no
		// longer selects lose the driver (an unload); those it selects
		// only now take the version it runs.
		{name: "GPUHolders: a nodeSelector narrowed off a node that holds GPUs through the driver", mutate: func(s *driverScenario) {
			narrowTo(s, func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.NodeSelector["nvidia.com/gpu.product"] = "Tesla-V100-PCIE-32GB"
			})
			s.holders["gpu-h200-01"] = []Holder{{Namespace: "ml", Pod: "train-0", Owner: "Job/train", Resources: []string{"resourceClaims"}}}
			s.holders["gpu-v100-01"] = holder // still selected: keeps its plugin
		}, want: []Code{CodeGPUHolders}, says: "node gpu-h200-01 runs 1 GPU holder(s): Job ml/train [resourceClaims]; this change of the DRA kubelet plugin's scheduling"},
		{name: "GPUHolders: a required node affinity narrowed off a node (metadata.name NotIn)", mutate: func(s *driverScenario) {
			narrowTo(s, func(ds *appsv1.DaemonSet) {
				terms := ds.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
				for i := range terms {
					terms[i].MatchFields = []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"gpu-v100-01"}}}
				}
			})
			s.holders["gpu-v100-01"] = holder
		}, want: []Code{CodeGPUHolders}, says: "node gpu-v100-01 runs 1 GPU holder(s)"},
		{name: "GPUHolders: a toleration of a node's NoExecute taint dropped (the DaemonSet controller deletes the plugin Pod there)", mutate: func(s *driverScenario) {
			tol := taintGPU(s, "gpu-h200-01")
			narrowTo(s, func(*appsv1.DaemonSet) {})
			s.change.DRAScheduling.Old.Spec.Template.Spec.Tolerations = tol
			s.holders["gpu-h200-01"] = holder
		}, want: []Code{CodeGPUHolders}, says: "node gpu-h200-01 runs 1 GPU holder(s)"},
		{name: "GPUHolders: a toleration of a node's NoExecute taint given tolerationSeconds (the taint manager evicts the plugin Pod then)", mutate: func(s *driverScenario) {
			tol := taintGPU(s, "gpu-h200-01")
			narrowTo(s, func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Tolerations = slices.Clone(tol)
				ds.Spec.Template.Spec.Tolerations[0].TolerationSeconds = new(int64(0))
			})
			s.change.DRAScheduling.Old.Spec.Template.Spec.Tolerations = tol
			s.holders["gpu-h200-01"] = holder
		}, want: []Code{CodeGPUHolders}, says: "node gpu-h200-01 runs 1 GPU holder(s)"},
		{name: "a toleration of a node's NoExecute taint kept, another added, unloads nothing", mutate: func(s *driverScenario) {
			tol := taintGPU(s, "gpu-h200-01")
			narrowTo(s, func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Tolerations = append(slices.Clone(tol), corev1.Toleration{Key: "example.com/other", Operator: corev1.TolerationOpExists})
			})
			s.change.DRAScheduling.Old.Spec.Template.Spec.Tolerations = tol
			s.holders["gpu-h200-01"] = holder
		}},
		{name: "a nodeSelector narrowed off nodes that hold no GPUs, nothing in flight, needs no record", mutate: func(s *driverScenario) {
			narrowTo(s, func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.NodeSelector["nvidia.com/gpu.product"] = "Tesla-V100-PCIE-32GB"
			})
			s.holders["gpu-v100-01"] = holder
		}},
		{name: "RolloutInFlight: a nodeSelector narrowed while a rollout is in flight", mutate: func(s *driverScenario) {
			narrowTo(s, func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.NodeSelector["nvidia.com/gpu.product"] = "Tesla-V100-PCIE-32GB"
			})
			s.node("gpu-v100-01").Labels[LabelDriverUpgradeState] = "upgrade-required"
		}, want: []Code{CodeRolloutInFlight}},
		// A widening installs the plugin on the nodes it selects only now:
		// those need a record for their hardware, as a new install does.
		{name: "RecordMissing: a nodeSelector widened at the same version, without a record for the nodes it reaches only now", mutate: func(s *driverScenario) {
			narrowTo(s, func(*appsv1.DaemonSet) {})
			s.change.DRAScheduling.Old.Spec.Template.Spec.NodeSelector["nvidia.com/gpu.product"] = "Tesla-V100-PCIE-32GB"
			s.change.Annotations = nil
		}, want: []Code{CodeRecordMissing}},
		{name: "a nodeSelector widened at the same version, with a record for the nodes it reaches only now", mutate: func(s *driverScenario) {
			narrowTo(s, func(*appsv1.DaemonSet) {})
			s.change.DRAScheduling.Old.Spec.Template.Spec.NodeSelector["nvidia.com/gpu.product"] = "Tesla-V100-PCIE-32GB"
			s.change.Annotations = map[string]string{AnnotationQualification: "h200-dra"}
			s.holders["gpu-v100-01"] = holder
		}},
		// Issue 25: the DaemonSet controller creates a new Pod only where the
		// Pod tolerates every NoSchedule and NoExecute taint (besides those
		// it tolerates itself), so a toleration added for either installs the
		// plugin on a node that had none.
		{name: "RecordMissing: a toleration added for a node's NoSchedule taint installs the plugin there", mutate: func(s *driverScenario) {
			tol := taintGPUWith(s, "gpu-h200-01", corev1.TaintEffectNoSchedule)
			narrowTo(s, func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Tolerations = tol })
			s.holders["gpu-h200-01"] = holder
		}, want: []Code{CodeRecordMissing}},
		{name: "a toleration added for a node's NoSchedule taint, with a record for the node it reaches only now", mutate: func(s *driverScenario) {
			tol := taintGPUWith(s, "gpu-h200-01", corev1.TaintEffectNoSchedule)
			narrowTo(s, func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Tolerations = tol })
			s.change.Annotations = map[string]string{AnnotationQualification: "h200-dra"}
		}},
		{name: "RecordMissing: a toleration added for a node's NoExecute taint installs the plugin there", mutate: func(s *driverScenario) {
			tol := taintGPU(s, "gpu-h200-01")
			narrowTo(s, func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Tolerations = tol })
		}, want: []Code{CodeRecordMissing}},
		{name: "RecordMissing: host networking turned on tolerates network-unavailable (the DaemonSet controller's own toleration)", mutate: func(s *driverScenario) {
			s.node("gpu-h200-01").Spec.Taints = append(s.node("gpu-h200-01").Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNetworkUnavailable, Effect: corev1.TaintEffectNoSchedule})
			narrowTo(s, func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.HostNetwork = true })
		}, want: []Code{CodeRecordMissing}},
		{name: "a toleration added for taints the DaemonSet controller tolerates anyway installs nothing new", mutate: func(s *driverScenario) {
			for _, key := range []string{corev1.TaintNodeUnschedulable, corev1.TaintNodeMemoryPressure, corev1.TaintNodeDiskPressure, corev1.TaintNodePIDPressure} {
				s.node("gpu-h200-01").Spec.Taints = append(s.node("gpu-h200-01").Spec.Taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
			}
			narrowTo(s, func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists}}
			})
		}},
		{name: "a toleration added for a NoSchedule taint that came after the plugin's Pod installs nothing new", mutate: func(s *driverScenario) {
			tol := taintGPUWith(s, "gpu-h200-01", corev1.TaintEffectNoSchedule)
			narrowTo(s, func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Tolerations = tol })
			s.cluster.Proof.DRA.PluginPods = []*corev1.Pod{draPluginPod("gpu-h200-01", corev1.ConditionTrue, reachedAt)}
		}},
		{name: "RecordMissing: a Pod that only names the DaemonSet (another UID) does not make the node one it runs on", mutate: func(s *driverScenario) {
			tol := taintGPUWith(s, "gpu-h200-01", corev1.TaintEffectNoSchedule)
			narrowTo(s, func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Tolerations = tol })
			p := draPluginPod("gpu-h200-01", corev1.ConditionTrue, reachedAt)
			p.OwnerReferences[0].UID = "00000000-0000-4000-8000-000000000bad"
			s.cluster.Proof.DRA.PluginPods = []*corev1.Pod{p}
		}, want: []Code{CodeRecordMissing}},
		{name: "a toleration of a node's NoSchedule taint dropped unloads nothing (the running plugin Pod stays)", mutate: func(s *driverScenario) {
			tol := taintGPUWith(s, "gpu-h200-01", corev1.TaintEffectNoSchedule)
			narrowTo(s, func(*appsv1.DaemonSet) {})
			s.change.DRAScheduling.Old.Spec.Template.Spec.Tolerations = tol
			s.holders["gpu-h200-01"] = holder
		}},
		{name: "GPUHolders: the Pod template's nodeName pinned to another node (the DaemonSet controller honours it)", mutate: func(s *driverScenario) {
			narrowTo(s, func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeName = "gpu-v100-02" })
			s.holders["gpu-h200-01"] = holder
		}, want: []Code{CodeGPUHolders}, says: "node gpu-h200-01 runs 1 GPU holder(s)"},
		{name: "TargetNotQualified: a nodeSelector widened at the same version under a record naming another release", mutate: func(s *driverScenario) {
			narrowTo(s, func(*appsv1.DaemonSet) {})
			s.change.DRAScheduling.Old.Spec.Template.Spec.NodeSelector["nvidia.com/gpu.product"] = "Tesla-V100-PCIE-32GB"
			s.change.Annotations = map[string]string{AnnotationQualification: "h200-dra"}
			s.cluster.Records["h200-dra"] = draRecord("h200-dra-25-12", hwH200, "v25.12.0")
		}, want: []Code{CodeTargetNotQualified}, says: "draDriver v25.8.1 (want v25.12.0)"},
		{name: "an unchanged scheduling unloads nothing (a new image alone)", mutate: func(s *driverScenario) {
			narrowTo(s, func(*appsv1.DaemonSet) {})
			s.change.OldDRA, s.change.Annotations = "v25.3.0", map[string]string{AnnotationQualification: "v100-dra, h200-dra"}
			s.holders["gpu-v100-01"], s.holders["gpu-h200-01"] = holder, holder
		}},
		{name: "GPUHolders and HardwareNotQualified: narrowed and a new version at once", mutate: func(s *driverScenario) {
			narrowTo(s, func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.NodeSelector["nvidia.com/gpu.product"] = "Tesla-V100-PCIE-32GB"
			})
			s.change.OldDRA, s.change.Annotations = "v25.3.0", map[string]string{AnnotationQualification: "h200-dra"}
			s.holders["gpu-h200-01"] = holder
		}, want: []Code{CodeGPUHolders, CodeHardwareNotQualified}, says: "node gpu-h200-01 runs 1 GPU holder(s)"},
		{name: "a new version narrowed off the H200 needs only the V100 record", mutate: func(s *driverScenario) {
			narrowTo(s, func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.NodeSelector["nvidia.com/gpu.product"] = "Tesla-V100-PCIE-32GB"
			})
			s.change.OldDRA, s.change.Annotations = "v25.3.0", map[string]string{AnnotationQualification: "v100-dra"}
		}},
		{name: "another namespace's Pod with the same labels is not the driver's", mutate: func(s *driverScenario) {
			s.change.Operation, s.change.OldDRA = OpCreate, ""
			s.change.DRAPlugin = &DRAPluginCreate{Driver: nvidiaDRA, Pods: labels.SelectorFromSet(labels.Set{"app": "kubelet-plugin"})}
			p := draPluginPod("gpu-v100-01", corev1.ConditionTrue, reachedAt)
			p.Namespace, p.Labels = "ml", map[string]string{"app": "kubelet-plugin"}
			s.cluster.Proof.DRA.PluginPods = []*corev1.Pod{p}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeDRAScenario(t)
			tc.mutate(s)
			d := s.decide()
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			assert.Equal(t, len(tc.want) == 0, d.Allowed)
			assert.Contains(t, d.Message(), tc.says)
		})
	}
}

// narrowTo makes the change an UPDATE of the plugin DaemonSet's scheduling
// alone (same version, no record named), from the chart's scheduling to
// what edit leaves.
// taintGPU gives node a NoExecute taint for dedicated GPU nodes and
// returns the plugin's toleration of it.
func taintGPU(s *driverScenario, node string) []corev1.Toleration {
	return taintGPUWith(s, node, corev1.TaintEffectNoExecute)
}

// taintGPUWith is taintGPU with the taint's effect.
func taintGPUWith(s *driverScenario, node string, effect corev1.TaintEffect) []corev1.Toleration {
	s.node(node).Spec.Taints = append(s.node(node).Spec.Taints, corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: effect})
	return []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: effect}}
}

// createAgain makes the change a CREATE of the plugin DaemonSet at
// version after its deletion (nothing of the old one left unless the case
// adds it).
func createAgain(s *driverScenario, version string) {
	s.change.Operation, s.change.OldDRA, s.change.NewDRA = OpCreate, "", version
	s.change.DRAPlugin = &DRAPluginCreate{Driver: nvidiaDRA, Pods: labels.SelectorFromSet(labels.Set{"app": "kubelet-plugin"})}
}

// createGPUCluster: a GPUCluster created naming the DRA driver version, as
// the webhook builds its change (the configured NVIDIA driver, no selector).
func createGPUCluster(s *driverScenario, version string) {
	s.change.Object, s.change.DRAPath = "GPUCluster gpu-cluster", field.NewPath("spec", "draDriver", "version")
	s.change.Operation, s.change.OldDRA, s.change.NewDRA = OpCreate, "", version
	s.change.DRAPlugin = &DRAPluginCreate{Driver: nvidiaDRA}
}

// rollbackRecords: the records that moved both kinds of hardware from DRA
// driver v25.3.0 to v25.8.1 at the source tuple, their rollback passed.
func rollbackRecords(s *driverScenario) {
	for name, hw := range map[string]string{"v100-dra": hwV100, "h200-dra": hwH200} {
		s.cluster.Records[name] = draMove(name+"-25-3-to-25-8", hw, "v25.3.0", "v25.8.1")
	}
}

func narrowTo(s *driverScenario, edit func(*appsv1.DaemonSet)) {
	old, cur := draDaemonSet(), draDaemonSet()
	edit(cur)
	s.change.OldDRA, s.change.Annotations = s.change.NewDRA, nil
	s.change.DRAScheduling = &DRAScheduling{Old: old, New: cur}
}

// TestDRADriverOptional: a tuple that leaves the DRA driver out (a node
// without DRA, a record that does not name it) behaves as before; a record
// that names it is held to it.
func TestDRADriverOptional(t *testing.T) {
	with := func(v string) qualification.Tuple { x := tupleSource; x.DRADriver = v; return x }
	cases := []struct {
		name string
		a, b qualification.Tuple
		same bool
	}{
		{"neither names it", tupleSource, tupleSource, true},
		{"the node has none, the record names it", tupleSource, with("v25.8.1"), true},
		{"the node runs one, the record does not name it", with("v25.8.1"), tupleSource, true},
		{"both name the same release, v or not", with("v25.8.1"), with("25.8.1"), true},
		{"both name different releases", with("v25.3.0"), with("v25.8.1"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.same, SameTuple(tc.a, tc.b))
			assert.True(t, complete(tc.a), "an optional member left out keeps the tuple complete")
		})
	}
	assert.NotContains(t, tupleSource.String(), "draDriver", "a tuple without it reads as before")
	assert.Contains(t, with("v25.8.1").String(), "draDriver=v25.8.1")
}

// TestDRADriverVersion: the release is the kubelet plugin's image tag; an
// image pinned by digest alone needs the DaemonSet's version label; what
// cannot be read is refused, never guessed.
func TestDRADriverVersion(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("ab", 32)
	cases := []struct {
		name   string
		images []string
		label  string
		want   string
		ok     bool
	}{
		{"tag", []string{"nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"}, "", "v25.8.1", true},
		{"tag and digest: the tag is the release", []string{"nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1" + digest}, "v9.9.9", "v25.8.1", true},
		{"two containers of one image", []string{"nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1", "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"}, "", "v25.8.1", true},
		{"digest alone with the version label", []string{"nvcr.io/nvidia/k8s-dra-driver-gpu" + digest}, "v25.8.1", "v25.8.1", true},
		{"digest alone without the label", []string{"nvcr.io/nvidia/k8s-dra-driver-gpu" + digest}, "", "sha256:abababababab...", false},
		{"containers disagree", []string{"r/dra:v25.8.1", "r/dra:v25.3.0"}, "", "r/dra:v25.8.1 and r/dra:v25.3.0", false},
		{"no tag (latest names no release)", []string{"nvcr.io/nvidia/k8s-dra-driver-gpu"}, "", "nvcr.io/nvidia/k8s-dra-driver-gpu", false},
		{"unparseable reference", []string{"nvcr.io/nvidia/k8s-dra-driver-gpu:bad tag"}, "", "nvcr.io/nvidia/k8s-dra-driver-gpu:bad tag", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := DRADriverVersion(tc.images, tc.label)
			assert.Equal(t, tc.want, v)
			assert.Equal(t, tc.ok, ok)
			if !ok {
				assert.Error(t, ParseComponent(ComponentDRADriver, v), "an unreadable value never parses as a release")
			}
		})
	}
}
