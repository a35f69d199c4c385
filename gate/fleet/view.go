package fleet

import (
	"reflect"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// View is what the loaded objects alone say about the fleet, worked out once
// per set of objects and never changed after: the webhook builds one per
// informer event of what it is built from, the CLI one per snapshot, and
// every review of that set reads it (package doc, step 4). It holds no
// answer that depends on the clock.
//
// It holds SUC's Jobs by node and which of them are live (a node with a
// live SUC Job is upgrading), answers who cordoned a node from those Jobs
// and the halt record, and works out halt detection's scope (HaltScope)
// once; the rest of node state, proof and the budget's counts join it as
// they move here.
type View struct {
	// in is what it was built from (BuiltFrom).
	in ViewInputs
	// jobsByNode: every Job by its upgrade.cattle.io/node label ("" for
	// none), in list order.
	jobsByNode map[string][]*batchv1.Job
	// sucJobs: those that also name their Plan (SUCJobsFor).
	sucJobs map[string][]*batchv1.Job
	// liveJobs: the live Jobs, in list order (LiveJobs); liveSUC: each
	// node's first live SUC Job (LiveSUCJob).
	liveJobs []*batchv1.Job
	liveSUC  map[string]*batchv1.Job
	// liveOn: the nodes with a live Job, SUC's or not (a stranded node has
	// none).
	liveOn map[string]bool
	// halts is halt detection's scope over the view's own index, worked
	// out on first use (HaltScope).
	haltOnce sync.Once
	halts    *HaltScope
	// pods are the proof facts' Pods by node, worked out on first use
	// (PodsOn), shared by the views of the same Pods (NextView).
	pods *podIndex
	// versions is the version parsers' memo of every review of this view
	// (Versions): the one cache that fills after the view is built, which
	// changes none of its answers.
	versions *Versions
}

// JobLive says whether a Job was started and has neither completed nor
// failed: its node is being upgraded. It reads the Job object alone (no
// clock), so the view answers it once per Job; gate holds the rule.
type JobLive func(*batchv1.Job) bool

// ViewInputs are the loaded objects a view is built from, each as its
// adapter keeps it (a snapshot per informer event in the webhook): a view
// is reused only while every part is the very same (BuiltFrom).
type ViewInputs struct {
	// UpgradeJobs are SUC's Jobs (the Jobs labelled upgrade.cattle.io/node
	// the loader reads).
	UpgradeJobs []*batchv1.Job
	// Halts are the halt record's halts by hardware key (HaltRecord.Halts).
	Halts map[string]Halt
	// Index is the adapter's node index (nil when it keeps none), and
	// Plans, PlanSelectors, Records and the two workload images the
	// Cluster's: halt detection's scope (HaltScope) is worked out from
	// them, so a view is reused only while they are the same too.
	Index         *NodeIndex
	Plans         []*upgradev1.Plan
	PlanSelectors []*PlanSelector
	Records       map[string]RecordEntry
	// GPUOperatorImage and DCGMExporterImage are the images the tuples'
	// cluster-wide versions are read from.
	GPUOperatorImage, DCGMExporterImage string
	// Validators, Unowned and AllocationChecks are the proof facts' Pods
	// (ProofFacts): a proof reads each node's (PodsOn).
	Validators, Unowned, AllocationChecks []*corev1.Pod
}

// NewView works the view out from the loaded objects, live saying which
// Jobs run.
func NewView(in ViewInputs, live JobLive) *View {
	v := &View{in: in, jobsByNode: make(map[string][]*batchv1.Job, len(in.UpgradeJobs)), sucJobs: map[string][]*batchv1.Job{}, liveSUC: map[string]*batchv1.Job{}, liveOn: map[string]bool{}, versions: NewVersions(), pods: &podIndex{}}
	for _, j := range in.UpgradeJobs {
		node := j.Labels[upgradev1.LabelNode]
		v.jobsByNode[node] = append(v.jobsByNode[node], j)
		isLive := live(j)
		if isLive {
			v.liveJobs = append(v.liveJobs, j)
			v.liveOn[node] = true
		}
		if j.Labels[upgradev1.LabelPlan] != "" {
			v.sucJobs[node] = append(v.sucJobs[node], j)
			if _, seen := v.liveSUC[node]; isLive && !seen {
				v.liveSUC[node] = j
			}
		}
	}
	return v
}

// BuiltFrom says whether the view was built from exactly these objects
// (the Jobs, Plans and selectors pointer for pointer, the same maps of
// halts and records, the same index and images): a review whose objects
// differ builds its own (NextView).
func (v *View) BuiltFrom(in ViewInputs) bool {
	return v.sameJobs(in) && v.in.Index == in.Index && samePointers(v.in.Plans, in.Plans) &&
		samePointers(v.in.PlanSelectors, in.PlanSelectors) && sameMap(v.in.Records, in.Records) &&
		v.in.GPUOperatorImage == in.GPUOperatorImage && v.in.DCGMExporterImage == in.DCGMExporterImage &&
		samePods(v.in, in)
}

// sameJobs: built from these very Jobs and halt record, what NewView works
// out at once.
func (v *View) sameJobs(in ViewInputs) bool {
	return samePointers(v.in.UpgradeJobs, in.UpgradeJobs) && sameMap(v.in.Halts, in.Halts)
}

// NextView is prev when it was built from in, else the view of in: one
// that shares prev's Jobs and parse memo when only the parts worked out
// lazily differ (a review's own Plan or node swapped in, a node event), or
// a new one.
func NextView(prev *View, in ViewInputs, live JobLive) *View {
	switch {
	case prev == nil:
		return NewView(in, live)
	case prev.BuiltFrom(in):
		return prev
	case prev.sameJobs(in):
		pods := &podIndex{}
		if samePods(prev.in, in) {
			pods = prev.pods
		}
		return &View{in: in, jobsByNode: prev.jobsByNode, sucJobs: prev.sucJobs, liveJobs: prev.liveJobs, liveSUC: prev.liveSUC, liveOn: prev.liveOn, versions: prev.versions, pods: pods}
	}
	return NewView(in, live)
}

// samePointers: the same list, or equal pointer for pointer.
func samePointers[T any](a, b []*T) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// sameMap: the very same map (a snapshot's), not one with equal entries.
func sameMap[K comparable, V any](a, b map[K]V) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// UpgradeJobsByNode are the Jobs by the node they upgrade: read only.
func (v *View) UpgradeJobsByNode() map[string][]*batchv1.Job { return v.jobsByNode }

// SUCJobsFor are SUC's Jobs for the node, by the Jobs' own labels
// (upgrade.cattle.io/node, upgrade.cattle.io/plan: SUC v0.20.1
// pkg/upgrade/job/job.go; it sets no owner reference, handle_upgrade.go's
// NoOwnerReference), whatever the node's hostname label or Plan now say.
// Read only.
func (v *View) SUCJobsFor(node string) []*batchv1.Job { return v.sucJobs[node] }

// LiveJobs are the live Jobs among those the view was built from, in list
// order. Read only.
func (v *View) LiveJobs() []*batchv1.Job { return v.liveJobs }

// LiveSUCJob is the node's first live SUC Job (SUCJobsFor), nil for none:
// the node is upgrading.
func (v *View) LiveSUCJob(node string) *batchv1.Job { return v.liveSUC[node] }

// ProofPods names one of the proof facts' Pod lists (ViewInputs).
type ProofPods int

const (
	ValidatorPods ProofPods = iota
	UnownedPods
	AllocationCheckPods
)

// PodsOn are the Pods of the list on the node that are not being deleted,
// in list order: a proof of each of a wide Plan's nodes looked through
// every list once per node. Read only.
func (v *View) PodsOn(which ProofPods, node string) []*corev1.Pod {
	x := v.pods
	x.once.Do(func() {
		for i, pods := range [3][]*corev1.Pod{v.in.Validators, v.in.Unowned, v.in.AllocationChecks} {
			m := map[string][]*corev1.Pod{}
			for _, p := range pods {
				if p.DeletionTimestamp == nil {
					m[p.Spec.NodeName] = append(m[p.Spec.NodeName], p)
				}
			}
			x.byNode[i] = m
		}
	})
	return x.byNode[which][node]
}

// podIndex is the proof facts' Pods by node.
type podIndex struct {
	once   sync.Once
	byNode [3]map[string][]*corev1.Pod
}

// samePods: the same proof facts' Pods, pointer for pointer.
func samePods(a, b ViewInputs) bool {
	return samePointers(a.Validators, b.Validators) && samePointers(a.Unowned, b.Unowned) && samePointers(a.AllocationChecks, b.AllocationChecks)
}

// Versions is the memo of parsed versions the reviews of this view share
// (package doc, step 5).
func (v *View) Versions() *Versions { return v.versions }
