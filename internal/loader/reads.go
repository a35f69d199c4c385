// Package loader is the one loader of what the engine reads: the objects
// gate.Cluster is built from, where they live and how they are selected (the
// Reads table), and how they become the engine's view (Loader). Three
// sources stand behind one small interface (Source): the webhook's informer
// caches (webhook/cachesource.go; the caches themselves are configured from
// the same Reads), a saved List (internal/snapshot) and a live client
// (Live). So `check` and `inventory` read what the webhook reads, and a new
// kind of fact is one row here and one line where Loader builds its part.
//
// It lives apart from webhook so that internal/snapshot (which imports
// webhook for its Node stripping) and the CLI can use it without a cycle,
// and apart from gate, which stays pure (no client).
package loader

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Read is one kind of object the engine reads and which of them: every
// source returns exactly the objects it selects.
type Read struct {
	// What names the objects in messages ("record ConfigMaps").
	What string
	// Object is the kind's prototype (&corev1.Node{}); NewList makes an
	// empty list of it.
	Object  client.Object
	NewList func() client.ObjectList
	// Namespaces are the objects' namespaces; nil: every namespace.
	Namespaces []string
	// Name, when set, reads the one object of that name (in Namespaces[0]).
	Name string
	// Label and Field select among them; nil: every object.
	Label labels.Selector
	Field fields.Selector
}

// Reads is what the engine reads, one row per kind of fact.
type Reads struct {
	// Nodes: every Node.
	Nodes Read
	// Plans: the Plans of the SUC namespaces.
	Plans Read
	// Records: the labelled record ConfigMaps of the gate's namespace.
	Records Read
	// GPUOperator and DCGMExporter: the two workloads by name, for their
	// images (the cluster's GPU Operator and DCGM exporter versions).
	GPUOperator, DCGMExporter Read
	// Validators and AllocationChecks: the Pods proofs read, by their
	// configured selectors and namespaces.
	Validators, AllocationChecks Read
	// ValidatorDaemonSet: the GPU Operator's validator DaemonSet by name,
	// whose UID says which validator Pods are its own
	// (gate.Config.OwnValidators).
	ValidatorDaemonSet Read
	// UpgradeJobs: SUC's Jobs (label upgrade.cattle.io/node) in the SUC
	// namespaces, which proofs, halts and the disruption budget read.
	UpgradeJobs Read
	// CheckJobs: the Jobs of the allocation checks' namespace, whose UIDs
	// say which check Pods are a Job's (gate.ProofFacts.CheckJobs); nil
	// Object without proof.checks (nothing read).
	CheckJobs Read
	// HaltRecord: the halt record ConfigMap by name.
	HaltRecord Read
	// CreationGates: each configured creation gate's Deployment or
	// ConfigMap by name, in the config's order (gate/fleet/creationgate.go).
	CreationGates []Read
	// DRA: what proofs of DRA nodes read; nil unless the config names DRA
	// drivers (a cluster without them is never asked for resource.k8s.io).
	DRA *DRAProofReads
}

// ReadsOf is the table for a config.
func ReadsOf(cfg *gate.Config) Reads {
	// SUC labels its Jobs with both; the Job webhook sees every Job with
	// the plan label (its object selector), so a Job the gate reads as
	// SUC's can be neither created nor relabelled unreviewed.
	sucJobNode, _ := labels.NewRequirement(upgradev1.LabelNode, selection.Exists, nil)
	sucJobPlan, _ := labels.NewRequirement(upgradev1.LabelPlan, selection.Exists, nil)
	var gates []Read
	for _, g := range cfg.CreationGates {
		r := Read{What: "creation gate " + g.Name, Object: &appsv1.Deployment{}, NewList: func() client.ObjectList { return &appsv1.DeploymentList{} },
			Namespaces: []string{g.Namespace}, Name: g.Object}
		if g.Kind == gate.GateConfigMapKey {
			r.Object, r.NewList = &corev1.ConfigMap{}, configMaps
		}
		gates = append(gates, r)
	}
	var checkJobs Read
	if len(cfg.Proof.Checks) > 0 {
		// proof.checks requires the namespace (gate.validateNodeChecks).
		checkJobs = Read{What: "check Jobs", Object: &batchv1.Job{}, NewList: func() client.ObjectList { return &batchv1.JobList{} },
			Namespaces: []string{cfg.Proof.AllocationCheck.Namespace}}
	}
	return Reads{
		Nodes: Read{What: "Nodes", Object: &corev1.Node{}, NewList: func() client.ObjectList { return &corev1.NodeList{} }},
		Plans: Read{What: "Plans", Object: &upgradev1.Plan{}, NewList: func() client.ObjectList { return &upgradev1.PlanList{} },
			Namespaces: cfg.SUCNamespaces},
		Records: Read{What: "record ConfigMaps", Object: &corev1.ConfigMap{}, NewList: configMaps,
			Namespaces: []string{cfg.Namespace}, Label: labels.SelectorFromSet(labels.Set{qualification.ConfigMapLabel: "true"})},
		GPUOperator: Read{What: "the GPU Operator Deployment", Object: &appsv1.Deployment{}, NewList: func() client.ObjectList { return &appsv1.DeploymentList{} },
			Namespaces: []string{cfg.GPUOperator.Namespace}, Name: cfg.GPUOperator.Name},
		DCGMExporter: Read{What: "the DCGM exporter DaemonSet", Object: &appsv1.DaemonSet{}, NewList: func() client.ObjectList { return &appsv1.DaemonSetList{} },
			Namespaces: []string{cfg.DCGMExporter.Namespace}, Name: cfg.DCGMExporter.Name},
		Validators: Read{What: "validator Pods", Object: &corev1.Pod{}, NewList: pods,
			Namespaces: oneOrAll(cfg.Proof.Validator.Namespace), Label: cfg.Proof.ValidatorSelector()},
		ValidatorDaemonSet: Read{What: "the validator DaemonSet", Object: &appsv1.DaemonSet{}, NewList: func() client.ObjectList { return &appsv1.DaemonSetList{} },
			Namespaces: []string{cfg.Proof.Validator.Namespace}, Name: cfg.Proof.Validator.DaemonSet},
		AllocationChecks: Read{What: "allocation-check Pods", Object: &corev1.Pod{}, NewList: pods,
			Namespaces: oneOrAll(cfg.Proof.AllocationCheck.Namespace), Label: cfg.Proof.AllocationSelector()},
		UpgradeJobs: Read{What: "SUC Jobs", Object: &batchv1.Job{}, NewList: func() client.ObjectList { return &batchv1.JobList{} },
			Namespaces: cfg.SUCNamespaces, Label: labels.NewSelector().Add(*sucJobNode, *sucJobPlan)},
		HaltRecord: Read{What: "the halt record", Object: &corev1.ConfigMap{}, NewList: configMaps,
			Namespaces: []string{cfg.Namespace}, Name: cfg.Halts.ConfigMap},
		CreationGates: gates,
		DRA:           draProofReadsOf(cfg),
		CheckJobs:     checkJobs,
	}
}

// All lists every row, in the table's order.
func (r Reads) All() []Read {
	return append([]Read{r.Nodes, r.Plans, r.Records, r.GPUOperator, r.DCGMExporter, r.Validators, r.ValidatorDaemonSet, r.AllocationChecks, r.UpgradeJobs, r.HaltRecord}, r.CreationGates...)
}

// HolderPods reads the Pods on one node, every namespace: the node's GPU
// holders are among them (read live by the webhook, not cached).
func HolderPods(node string) Read {
	return Read{What: "Pods on " + node, Object: &corev1.Pod{}, NewList: pods, Field: fields.OneTermEqualSelector("spec.nodeName", node)}
}

func configMaps() client.ObjectList { return &corev1.ConfigMapList{} }
func pods() client.ObjectList       { return &corev1.PodList{} }

func oneOrAll(ns string) []string {
	if ns == "" {
		return nil
	}
	return []string{ns}
}

// Selects says whether r selects obj; fieldSet holds obj's selectable fields
// (metadata.name, metadata.namespace and the kind's own). Sources that hold
// every object (a saved List) filter with it.
func (r Read) Selects(obj client.Object, fieldSet fields.Set) bool {
	if r.Namespaces != nil && !slices.Contains(r.Namespaces, obj.GetNamespace()) {
		return false
	}
	if r.Name != "" && obj.GetName() != r.Name {
		return false
	}
	if r.Label != nil && !r.Label.Matches(labels.Set(obj.GetLabels())) {
		return false
	}
	return r.Field == nil || r.Field.Matches(fieldSet)
}
