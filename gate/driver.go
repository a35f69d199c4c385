package gate

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/dra"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// The GPU Operator's own path to a GPU node's tuple: a ClusterPolicy or
// NVIDIADriver write that changes the driver (or the DCGM exporter) makes the
// driver manager reload kernel modules on every node it reaches; a new GPU
// Operator version changes every GPU node's tuple at once.

// DriverUpgradePolicy is ClusterPolicy spec.driver.upgradePolicy, which the
// operator's upgrade controller applies to ClusterPolicy and NVIDIADriver
// rollouts alike.
type DriverUpgradePolicy struct {
	// Present is false when the ClusterPolicy has no upgradePolicy (or there
	// is no ClusterPolicy).
	Present             bool
	AutoUpgrade         bool
	MaxParallelUpgrades int64
	DrainEnabled        bool
}

// Operations of a driver-path request.
const (
	OpCreate = "CREATE"
	OpUpdate = "UPDATE"
	OpDelete = "DELETE"
)

// DriverChange is a write on the GPU Operator's path to a node's tuple: a
// ClusterPolicy (nvidia.com/v1) or NVIDIADriver (nvidia.com/v1alpha1)
// CREATE, UPDATE or DELETE, or an upgrade of the operator itself (its
// Deployment's image, an OLM InstallPlan's approval), reduced to what the
// rules read.
type DriverChange struct {
	// Object is "ClusterPolicy <name>", "NVIDIADriver <name>", "Deployment
	// <ns>/<name>" or "InstallPlan <ns>/<name>".
	Object      string
	Annotations map[string]string
	// Operation is OpCreate, OpUpdate ("" counts as update) or OpDelete.
	Operation string
	// OldAnnotations are the object's before the write (break glass counts
	// only when this write sets it); nil for a CREATE and a DELETE, which
	// carries no annotations of its own, so the object's count for it.
	OldAnnotations map[string]string
	// Driver and DCGMExporter versions before and after; DCGM only exists on
	// a ClusterPolicy. Empty means "not set".
	OldDriver, NewDriver string
	OldDCGM, NewDCGM     string
	DriverPath, DCGMPath *field.Path
	// OldDRA and NewDRA are the DRA driver versions before and after a
	// change of its kubelet-plugin DaemonSet's image or of a GPUCluster's
	// DRA driver; equal (usually empty) for every other change.
	OldDRA, NewDRA string
	DRAPath        *field.Path
	// NoPolicy: the change is rolled out by a DaemonSet of its own (the DRA
	// kubelet plugin), not by the operator's driver upgrade controller, so
	// the ClusterPolicy's upgrade policy says nothing about it.
	NoPolicy bool
	// OperatorNamespace is set on the DELETE of the GPU Operator's
	// namespace: the namespace controller then deletes every operand in it
	// at once (the driver DaemonSets, the device plugin, the validator, a
	// DRA driver's plugin, the operator) and nothing is created again in a
	// terminating namespace, so every GPU node loses its driver. Held as a
	// DRA driver's deletion is: by the nodes' GPU holders and by a rollout
	// in flight, whose proofs read what goes (pullsDevices). Also set on a
	// person's DELETE of one DaemonSet there (the driver, the device plugin,
	// the DCGM exporter): that operand goes from every GPU node at once.
	OperatorNamespace bool
	// DRAUnconfigured names the DRA driver (its ResourceSlices'
	// spec.driver) a GPUCluster write deploys that config.draDrivers has
	// no entry for: what is left of it on the nodes, and their DRA proof,
	// cannot be read (draConfigRule: FactsMissing naming the entry to add).
	DRAUnconfigured string
	// DRAPlugin is set on a CREATE of a DRA driver's kubelet-plugin
	// DaemonSet or of a GPUCluster, or a GPUCluster UPDATE that switches the
	// DRA driver on (judged as its CREATE): the driver, and the Pods the new
	// DaemonSet's selector adopts. Its version before is what the nodes still run of that
	// driver, not what a deleted DaemonSet said (DRAPluginCreate); on a
	// node where nothing of it is left, what the records name for the
	// tuple the node runs (DriverReview.recordedDRA).
	DRAPlugin *DRAPluginCreate
	// DRAScheduling is set on an UPDATE of a DRA driver's kubelet-plugin
	// DaemonSet: the DaemonSet before and after, whose scheduling says
	// which nodes it reaches (the nodes the old one selected and the new one
	// does not lose the driver: DRAScheduling.narrowed).
	DRAScheduling *DRAScheduling
	// OldOperator and NewOperator are the GPU Operator versions before and
	// after an upgrade of the operator itself; equal for every other change.
	OldOperator, NewOperator string
	OperatorPath             *field.Path
	// Reload says a field other than the versions changed that restarts the
	// driver on every reached node: repository, image, kernelModuleType,
	// usePrecompiled, env and anything else under the driver spec.
	Reload bool
	// PolicyChanged: the upgrade policy itself changed, so it is judged even
	// when nothing reloads now (maxParallelUpgrades: 0 releases every node
	// that waits for a pending rollout at once).
	PolicyChanged bool
	// NodeSelector selects the nodes an NVIDIADriver covers; nil means every
	// GPU node (ClusterPolicy). OldNodeSelector is the selector before an
	// UPDATE (nil: unchanged); nodes it did not select reload, nodes it
	// selected that NodeSelector does not lose the driver (unloaded).
	NodeSelector, OldNodeSelector map[string]string
	Policy                        DriverUpgradePolicy
	PolicyPath                    *field.Path
	// PolicyErr is the adapter's failure to read the policy (a live read of
	// the ClusterPolicy for an NVIDIADriver): FactsMissing, not "no policy".
	PolicyErr error
	// Validator is a ClusterPolicy's validator section after a CREATE, or an
	// UPDATE that changes it; nil otherwise. The exempt GPU Operator writes
	// the validator DaemonSet from it (ValidatorForged).
	Validator *ValidatorSection
}

// ValidatorSection is what the GPU Operator's validator DaemonSet runs, as
// a ClusterPolicy's spec.validator says it.
type ValidatorSection struct {
	// Image is the reference the operator composes (repository/image:version,
	// or image alone when neither repository nor version is set); "" when
	// the section names none and the operator's own default applies.
	Image     string
	ImagePath *field.Path
	// WorkloadOff are the env entries this write sets to switch the
	// validator's GPU workload off (WITH_WORKLOAD false where it was not),
	// by path.
	WorkloadOff []*field.Path
}

// DRAPluginCreate is a DRA driver whose kubelet-plugin DaemonSet is being
// created, and the selector of the new DaemonSet (the Pods it will adopt).
// For a GPUCluster's CREATE, whose operator creates the DaemonSet later
// with a selector the gate does not see, Pods is nil: the driver's Pods
// are then those in its namespace that name its DaemonSet as controller or
// have no controller at all (an orphan: the garbage collector strips the
// owner of a Pod its DaemonSet's deletion orphaned).
type DRAPluginCreate struct {
	Driver dra.Driver
	Pods   labels.Selector
}

// leftOn says what of the driver still runs on the node ("" : nothing): a
// Pod in its namespace the new DaemonSet would adopt (an orphan of the
// deleted one: kubectl delete --cascade=orphan), or its ResourceSlices (the
// old plugin registered with the kubelet). The DaemonSet that said its
// version is gone, so the version the node runs is unknown: a CREATE is
// not judged as a fresh install there.
func (p *DRAPluginCreate) leftOn(cl *Cluster, node string) string {
	var left []string
	for _, pod := range fleet.PodsOnNode(cl.Proof.DRA.PluginPods, node) {
		if pod.Namespace == p.Driver.Namespace && p.adopts(pod) {
			left = append(left, "Pod "+pod.Namespace+"/"+qualification.Clip(pod.Name))
		}
	}
	n := 0
	for _, s := range cl.Proof.DRA.Slices {
		if s.Spec.Driver == p.Driver.Name && s.Spec.NodeName != nil && *s.Spec.NodeName == node {
			n++
		}
	}
	if n > 0 {
		left = append(left, fmt.Sprintf("%d ResourceSlice(s) of %s", n, p.Driver.Name))
	}
	if len(left) == 0 {
		return ""
	}
	slices.Sort(left)
	if p.Pods == nil {
		return fmt.Sprintf("the DRA driver version the node runs: %s still run there, and the GPUCluster does not say which version they run; "+
			"wait until they are gone (or delete those Pods, or the DaemonSet %s/%s that runs them) and create the GPUCluster again", strings.Join(left, ", "), p.Driver.Namespace, p.Driver.DaemonSet)
	}
	return fmt.Sprintf("the DRA driver version the node runs: %s still run there, and the DaemonSet %s/%s that named their version is gone; "+
		"wait until they are gone (or delete those Pods) and create the DaemonSet again", strings.Join(left, ", "), p.Driver.Namespace, p.Driver.DaemonSet)
}

// adopts: the Pod is one of the driver's that the created DaemonSet would
// take over (DRAPluginCreate).
func (p *DRAPluginCreate) adopts(pod *corev1.Pod) bool {
	if p.Pods == nil {
		return metav1.GetControllerOfNoCopy(pod) == nil || fleet.NamesPluginDaemonSet(p.Driver, pod)
	}
	return !p.Pods.Empty() && p.Pods.Matches(labels.Set(pod.Labels))
}

// DRAScheduling is a DRA driver's kubelet-plugin DaemonSet before and
// after an UPDATE; only its Pod template's scheduling is read.
type DRAScheduling struct {
	Old, New *appsv1.DaemonSet
}

// changed: the Pod template's nodeName, nodeSelector, required node
// affinity, tolerations or host networking changed (what runsOn and
// schedulesOn read).
func (s *DRAScheduling) changed() bool {
	if s == nil || s.Old == nil || s.New == nil {
		return false
	}
	o, n := &s.Old.Spec.Template.Spec, &s.New.Spec.Template.Spec
	return o.NodeName != n.NodeName || !maps.Equal(o.NodeSelector, n.NodeSelector) || !equality.Semantic.DeepEqual(requiredAffinity(o), requiredAffinity(n)) ||
		!equality.Semantic.DeepEqual(o.Tolerations, n.Tolerations) || o.HostNetwork != n.HostNetwork
}

// narrowed: the DaemonSet ran on the node before the UPDATE and does not
// after, so the DaemonSet controller deletes its plugin Pod there: the
// driver is unloaded from the node, as by the DaemonSet's deletion.
func (s *DRAScheduling) narrowed(n *corev1.Node) bool {
	return s.changed() && runsOn(s.Old, n) && !runsOn(s.New, n)
}

// widened: the UPDATE makes the DaemonSet controller create a plugin Pod
// on a node that had none: the new scheduling places one there
// (schedulesOn) and the old one did not, or kept one only because a
// NoSchedule taint came after it (its Pod there, by UID, says so).
func (s *DRAScheduling) widened(cl *Cluster, n *corev1.Node) bool {
	if !s.changed() || !schedulesOn(s.New, n) || schedulesOn(s.Old, n) {
		return false
	}
	return !runsOn(s.Old, n) || !slices.ContainsFunc(fleet.PodsOnNode(cl.Proof.DRA.PluginPods, n.Name), func(p *corev1.Pod) bool {
		return p.Namespace == s.Old.Namespace && metav1.IsControlledBy(p, s.Old)
	})
}

// runsOn: the DaemonSet's Pod may keep running on the node: its scheduling
// selects the node (daemonSetSelects) and it tolerates the node's
// NoExecute taints, which the DaemonSet controller otherwise deletes its
// Pod for (a toleration dropped unloads the driver as a narrowed
// nodeSelector does). NoSchedule taints keep a running Pod, so the
// narrowing side leaves them out.
func runsOn(ds *appsv1.DaemonSet, n *corev1.Node) bool {
	return fleet.DaemonSetSelects(ds, n) && toleratesTaints(ds, n, true, corev1.TaintEffectNoExecute)
}

// schedulesOn: the DaemonSet controller would create a Pod of the
// DaemonSet on the node: as runsOn, and it tolerates the node's
// NoSchedule taints too (the controller's check for a new Pod). The
// widening side reads this: a toleration added for a tainted node installs
// the plugin there as a widened nodeSelector does.
func schedulesOn(ds *appsv1.DaemonSet, n *corev1.Node) bool {
	return fleet.DaemonSetSelects(ds, n) && toleratesTaints(ds, n, false, corev1.TaintEffectNoExecute, corev1.TaintEffectNoSchedule)
}

// toleratesTaints: the DaemonSet's Pods tolerate each of the node's taints
// of those effects, counting the tolerations the DaemonSet controller adds
// to every Pod it creates (AddOrUpdateDaemonPodTolerations in
// pkg/controller/daemon/util: not-ready and unreachable NoExecute; disk,
// memory and PID pressure and unschedulable NoSchedule; network-unavailable
// NoSchedule for host-network Pods). To keep a Pod (keeps), a NoExecute
// toleration with tolerationSeconds counts for nothing: the taint manager
// evicts the Pod once they pass.
func toleratesTaints(ds *appsv1.DaemonSet, n *corev1.Node, keeps bool, effects ...corev1.TaintEffect) bool {
	spec := &ds.Spec.Template.Spec
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		if !slices.Contains(effects, t.Effect) || daemonTolerated(spec, t) {
			continue
		}
		// Discard: the gate logs nothing; comparison operators as the
		// API server's current default.
		if !slices.ContainsFunc(spec.Tolerations, func(tol corev1.Toleration) bool {
			return tol.ToleratesTaint(logr.Discard(), t, true) && !(keeps && t.Effect == corev1.TaintEffectNoExecute && tol.TolerationSeconds != nil)
		}) {
			return false
		}
	}
	return true
}

// daemonTolerated: the DaemonSet controller's own toleration covers the
// taint (toleratesTaints).
func daemonTolerated(spec *corev1.PodSpec, t *corev1.Taint) bool {
	switch t.Key {
	case corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable:
		return t.Effect == corev1.TaintEffectNoExecute
	case corev1.TaintNodeDiskPressure, corev1.TaintNodeMemoryPressure, corev1.TaintNodePIDPressure, corev1.TaintNodeUnschedulable:
		return t.Effect == corev1.TaintEffectNoSchedule
	case corev1.TaintNodeNetworkUnavailable:
		return t.Effect == corev1.TaintEffectNoSchedule && spec.HostNetwork
	}
	return false
}

func requiredAffinity(spec *corev1.PodSpec) *corev1.NodeSelector {
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil {
		return a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return nil
}

// DriverRequest is one driver-path request.
type DriverRequest struct {
	Change DriverChange
	User   UserInfo
	Now    time.Time
}

// DriverReview decides a driver-path change in the Plan's two steps.
type DriverReview struct {
	reviewBase
	req     DriverRequest
	changed bool
	nodes   []NodeFacts
	current map[string]qualification.Tuple
	// pending (reviewBase) are the reached nodes it reloads or moves; names
	// (reviewBase) the records the annotation names, in order.
	// fresh are the nodes that take every version the object sets: it
	// reloads them, or reaches them only now.
	fresh map[string]bool
	// narrowed are the pending nodes an UPDATE no longer schedules the
	// driver on: an NVIDIADriver's nodeSelector, or a DRA driver's plugin
	// DaemonSet's scheduling (DRAScheduling.narrowed). Unloaded.
	narrowed map[string]bool
	// step is set for the per-node driver step (driverstep.go): one node,
	// judged when its reload starts, with the budget instead of the policy.
	step *DriverStep
	// operatorRollout is the operator's rollout the adapter read for this
	// review (SetOperatorRollout); nil: not read, which fails closed.
	operatorRollout *OperatorRollout
	// unknownDRA says, per node, why the DRA driver version it runs is
	// not known (DRAPluginCreate.leftOn, recordedDRA); draFrom where the
	// version a CREATE moves it from came from, when records said it.
	unknownDRA, draFrom map[string]string
	// draRecords are the loaded records whose target names a DRA driver,
	// by name (recordedDRA; nil until read).
	draRecords []*qualification.Record
}

var (
	pathDriverRecords = field.NewPath("metadata", "annotations").Key(AnnotationQualification)
	pathDeletion      = field.NewPath("metadata", "name")
	// pathPluginScheduling: where a DRA plugin DaemonSet's Pods may run
	// (nodeSelector, affinity, tolerations); pathNodeSelector the nodes an
	// NVIDIADriver covers.
	pathPluginScheduling = field.NewPath("spec", "template", "spec")
	pathNodeSelector     = field.NewPath("spec", "nodeSelector")
)

// What an UPDATE narrowed off a node, in GPUHolders' words.
const (
	unscheduledPlugin       = "the DRA kubelet plugin's scheduling (nodeSelector, required node affinity)"
	unscheduledNVIDIADriver = "the NVIDIADriver's nodeSelector"
)

// PrepareDriver finds the GPU nodes the change reaches and which of them
// it would reload or move.
func PrepareDriver(cfg *Config, cl *Cluster, req DriverRequest) *DriverReview {
	ch := req.Change
	r := &DriverReview{req: req, current: map[string]qualification.Tuple{}, fresh: map[string]bool{}, narrowed: map[string]bool{},
		unknownDRA: map[string]string{}, draFrom: map[string]string{}}
	r.driverBase(cfg, cl)
	selectorChanged := ch.OldNodeSelector != nil && !maps.Equal(ch.OldNodeSelector, ch.NodeSelector)
	r.changed = ch.OldDriver != ch.NewDriver || ch.OldDCGM != ch.NewDCGM || ch.OldOperator != ch.NewOperator || ch.OldDRA != ch.NewDRA ||
		ch.Reload || ch.PolicyChanged || selectorChanged || ch.Operation == OpCreate || ch.Operation == OpDelete || ch.DRAScheduling.changed() || ch.DRAUnconfigured != ""
	if !r.changed {
		return r
	}
	cl = cl.indexedCluster(cfg)
	r.cl = cl
	r.nameRecords()
	sel, oldSel := labels.SelectorFromSet(ch.NodeSelector), labels.SelectorFromSet(ch.OldNodeSelector)
	idx := cl.nodeIndex(cfg)
	op, dcgm := clusterVersions(cl)
	var unloaded []NodeFacts
	for _, i := range idx.GPUNodes(cfg) {
		n := idx.Node(i)
		reached := ch.NodeSelector == nil || sel.Matches(labels.Set(n.Labels))
		// A node the old NVIDIADriver selector selected and the new one does
		// not: the operator's driver DaemonSet for it no longer selects the
		// node, so its driver Pod there is deleted and the driver unloaded.
		narrowed := selectorChanged && !reached && oldSel.Matches(labels.Set(n.Labels))
		if s := ch.DRAScheduling; s != nil && s.New != nil {
			// The plugin DaemonSet reaches what its scheduling selects,
			// as the DRA proof reads it.
			narrowed = s.narrowed(n)
			reached = fleet.DaemonSetSelects(s.New, n) && !narrowed
		}
		if narrowed {
			f := idx.FactsOf(cfg, i)
			r.narrowed[f.Name] = true
			unloaded = append(unloaded, f)
			r.current[f.Name] = f.Tuple(op, dcgm)
		}
		if !reached {
			continue
		}
		f := idx.FactsOf(cfg, i)
		r.nodes = append(r.nodes, f)
		r.current[f.Name] = f.Tuple(op, dcgm)
		if ch.OldDRA != "" || ch.NewDRA != "" {
			// A change of the DRA driver's object: the node runs the
			// version it named before (a CREATE: recordedDRA).
			cur := r.current[f.Name]
			cur.DRADriver = ch.OldDRA
			r.current[f.Name] = cur
		}
		// A node the object reaches only now takes every version it sets, as
		// a new install would: an NVIDIADriver's widened nodeSelector, or a
		// DRA plugin DaemonSet's widened scheduling.
		widened := selectorChanged && !oldSel.Matches(labels.Set(n.Labels)) || ch.DRAScheduling.widened(cl, n)
		r.fresh[f.Name] = ch.Reload || ch.Operation == OpCreate || widened
		if p := ch.DRAPlugin; p != nil {
			if why := p.leftOn(cl, f.Name); why != "" {
				r.unknownDRA[f.Name] = why
			}
		}
		if (ch.Operation == OpCreate || ch.DRAPlugin != nil) && ch.NewDRA != "" && r.unknownDRA[f.Name] == "" {
			r.recordedDRA(f)
		}
	}
	slices.SortFunc(r.nodes, func(a, b NodeFacts) int { return strings.Compare(a.Name, b.Name) })
	for _, f := range r.nodes {
		// A node reloads when its tuple changes, when a driver field other
		// than the version changes, and when the object reaches it only now.
		// A new DRA driver image reaches every node its DaemonSet runs on,
		// whatever the node was thought to run (an unreadable old image).
		if r.fresh[f.Name] || ch.Operation == OpDelete || ch.OldDRA != ch.NewDRA || !SameTuple(r.current[f.Name], r.after(f.Name, r.current[f.Name])) {
			r.pending = append(r.pending, f)
		}
	}
	if len(unloaded) > 0 {
		r.pending = append(r.pending, unloaded...)
		slices.SortFunc(r.pending, func(a, b NodeFacts) int { return strings.Compare(a.Name, b.Name) })
	}
	return r
}

// recordedDRA: a CREATE that finds nothing of the DRA driver on the node
// (its DaemonSet deleted, its Pods and slices gone) would judge a fresh
// install there, so an older release created again would be a downgrade
// nobody reviewed as one. The version the node ran is then the one the
// approved, qualified records for its hardware name whose target tuple the
// node runs (an unapproved record is anyone's claim, so it says nothing of
// the node's past), taking each chain of moves at its head; heads that
// disagree, or moves that only go round, leave it unknown (FactsMissing),
// and no record naming a version leaves a fresh install.
//
// Why the head is safe: a record R whose source is record A's target (same
// tuple, same DRA driver version) is an approved, canaried move from A's
// version to R's on this hardware, so a node that ran A's version may run
// R's. Judging from the head can therefore only err towards strictness: a
// CREATE at the head is no move (and, for a node that ran an earlier
// version of the chain, exactly the moves the records qualify); a CREATE
// older than the head is a ComponentDowngrade even where the node ran that
// older version (a proven rollback still passes). And nothing of the
// driver is left on the node (leftOn), so no plugin state migrates from
// the version the node ran: the source matters here only to catch a
// release older than the node was qualified to run.
func (r *DriverReview) recordedDRA(f NodeFacts) {
	if r.draRecords == nil {
		r.draRecords = []*qualification.Record{}
		for _, name := range sortedKeys(r.cl.Records) {
			if e := r.cl.Records[name]; r.cfg.stands(e) && strings.TrimSpace(e.Record.Target.DRADriver) != "" {
				r.draRecords = append(r.draRecords, e.Record)
			}
		}
	}
	cur := r.current[f.Name]
	var matching []*qualification.Record
	for _, rec := range r.draRecords {
		if slices.Equal(rec.NormalizedHardware(), f.Identities) && SameTuple(cur, rec.Target) {
			matching = append(matching, rec)
		}
	}
	var heads, superseded []*qualification.Record
	for _, rec := range matching {
		if slices.ContainsFunc(matching, func(next *qualification.Record) bool { return movesFrom(next, rec) }) {
			superseded = append(superseded, rec)
		} else {
			heads = append(heads, rec)
		}
	}
	var named, versions []string
	for _, rec := range heads {
		v := strings.TrimSpace(rec.Target.DRADriver)
		named = append(named, draNamed(rec))
		if !slices.ContainsFunc(versions, func(x string) bool { return SameComponent(ComponentDRADriver, x, v) }) {
			versions = append(versions, v)
		}
	}
	var moved []string
	for _, rec := range superseded {
		moved = append(moved, draNamed(rec))
	}
	switch {
	case len(matching) == 0:
	case len(versions) == 1:
		cur.DRADriver = versions[0]
		r.current[f.Name] = cur
		r.draFrom[f.Name] = fmt.Sprintf("nothing names the DRA driver version the node ran any more, so it is the one record(s) %s name for the tuple it runs", strings.Join(named, ", "))
		if len(moved) > 0 {
			r.draFrom[f.Name] += fmt.Sprintf(", which move it on from record(s) %s", strings.Join(moved, ", "))
		}
	case len(versions) == 0:
		r.unknownDRA[f.Name] = fmt.Sprintf("the DRA driver version the node ran: nothing names it any more, and the records whose target tuple it runs only move it round in a cycle: %s; "+
			"correct or delete the stale record(s) so that one version is the last one moved to for this tuple", strings.Join(moved, ", "))
	default:
		r.unknownDRA[f.Name] = fmt.Sprintf("the DRA driver version the node ran: nothing names it any more, and the records whose target tuple it runs name different versions: %s; "+
			"correct or delete the stale record(s) so that one version is named for this tuple", strings.Join(named, ", "))
	}
}

// movesFrom: record next moves the DRA driver on from record prev's
// target: its source names prev's target tuple with the same DRA driver
// version (a source that names no DRA driver moves it from nothing
// known), and its target another version.
func movesFrom(next, prev *qualification.Record) bool {
	return next != prev && next.Source != nil && strings.TrimSpace(next.Source.DRADriver) != "" &&
		SameTuple(*next.Source, prev.Target) && !SameComponent(ComponentDRADriver, next.Target.DRADriver, prev.Target.DRADriver)
}

func draNamed(rec *qualification.Record) string {
	return rec.ID + " (" + qualification.Clip(strings.TrimSpace(rec.Target.DRADriver)) + ")"
}

// driverBase fills what the driver path's rules read of every review.
func (r *DriverReview) driverBase(cfg *Config, cl *Cluster) {
	r.cfg, r.cl, r.user, r.now = cfg, cl, r.req.User, r.req.Now
	r.recordPath, r.subject, r.act, r.missing = pathDriverRecords, "change", "making this change", missingDriverAnnotation
}

// nameRecords reads the records the object names in its annotation.
func (r *DriverReview) nameRecords() {
	r.rollback = r.req.Change.Annotations[AnnotationRollback] == "true"
	for _, name := range strings.Split(r.req.Change.Annotations[AnnotationQualification], ",") {
		if name = strings.TrimSpace(name); name != "" && !slices.Contains(r.names, name) {
			r.names = append(r.names, name)
		}
	}
}

// after is a node's tuple once the change has rolled out to it: the
// versions the change moves, and on a fresh node (reloaded, or reached only
// now) every version the object sets, whatever the node ran before.
func (r *DriverReview) after(node string, cur qualification.Tuple) qualification.Tuple {
	ch, fresh := r.req.Change, r.fresh[node]
	if ch.NewDriver != "" && (fresh || ch.NewDriver != ch.OldDriver) {
		cur.Driver = ch.NewDriver
	}
	if ch.NewDCGM != "" && (fresh || ch.NewDCGM != ch.OldDCGM) {
		cur.DCGMExporter = ch.NewDCGM
	}
	if ch.NewOperator != ch.OldOperator {
		cur.GPUOperator = ch.NewOperator
	}
	if ch.NewDRA != ch.OldDRA || fresh && ch.NewDRA != "" {
		cur.DRADriver = ch.NewDRA
	}
	return cur
}

// HolderNodes are the nodes whose GPU holders Decide needs: none for an
// upgrade of the operator itself, which reloads no driver, nor for a DRA
// driver change alone, which restarts the kubelet plugin (running Pods keep
// their devices; new claims wait for it).
func (r *DriverReview) HolderNodes() []string {
	if r.operatorUpgrade() {
		return nil
	}
	if r.draOnly() {
		return sortedKeys(r.narrowed) // none unless it unloads some nodes too
	}
	return names(r.pending)
}

func (r *DriverReview) operatorUpgrade() bool {
	return r.req.Change.OldOperator != r.req.Change.NewOperator
}

// draOnly: the change moves or restarts the DRA driver and nothing else
// (its DaemonSet's image, a GPUCluster's DRA driver version, or any other
// change of the plugin DaemonSet's Pod template, which restarts the plugin
// at the same version: no stricter than a move of its version).
func (r *DriverReview) draOnly() bool {
	ch := r.req.Change
	return (ch.OldDRA != ch.NewDRA && !ch.Reload || ch.Reload && ch.NoPolicy) && ch.OldDriver == ch.NewDriver && ch.OldDCGM == ch.NewDCGM && ch.Operation != OpDelete
}

// pullsDevices: the change removes a driver from the nodes that a rollout
// in flight on them waits for, as any driver change does: a DELETE of a
// DRA driver's kubelet-plugin DaemonSet or of a GPUCluster, of the GPU
// Operator's namespace (every operand at once), or an UPDATE narrowing an
// NVIDIADriver's nodeSelector or the DRA DaemonSet's scheduling.
func (r *DriverReview) pullsDevices() bool {
	ch := r.req.Change
	return ch.Operation == OpDelete && (ch.NoPolicy || ch.OperatorNamespace) || len(r.narrowed) > 0
}

// review is the engine review this one runs as.
func (r *DriverReview) review() Review {
	switch {
	case r.step != nil:
		return ReviewDriverStep
	case r.operatorUpgrade():
		return ReviewOperator
	}
	return ReviewDriver
}

// Decide builds one Transition per reached node it reloads or moves, under
// the named record that covers its hardware, and applies the rule table
// (the upgrade policy rule; the budget at the per-node step). A policy edit
// alone is judged by the policy rule; a deletion, which removes the driver,
// by the holders of the nodes it reached.
func (r *DriverReview) Decide(holders map[string][]Holder, holdersErr error) Decision {
	ch := r.req.Change
	d := Decision{Object: ch.Object, Nodes: names(r.pending)}
	if !r.changed || (len(r.pending) == 0 && !ch.PolicyChanged && ch.DRAUnconfigured == "") {
		// Nothing reloads: no reached node would change (a DRA driver
		// switched on that the gate cannot read is judged all the same).
		// A changed validator section is still judged (rule_validator.go).
		if ch.Validator == nil {
			d.Allowed = true
			return d
		}
		var f findings
		r.kinds = kindsValidator
		applyTable(r, &f, &d)
		f.settle(&d)
		return d
	}
	r.kinds = kindsDriver
	switch r.review() {
	case ReviewDriverStep:
		r.kinds = kindsDriverStep
	case ReviewOperator:
		r.kinds = kindsOperator
	}
	// A narrowing of the plugin DaemonSet's scheduling alone unloads and
	// moves nothing.
	r.unloading = ch.Operation == OpDelete || len(r.narrowed) > 0 && len(r.narrowed) == len(r.pending)
	// Only a change that reloads or moves nodes uses records.
	r.records = len(r.pending) > 0 && !r.unloading
	r.perNode = r.step != nil
	r.ts, r.unloads, r.uses = nil, nil, nil
	for _, nf := range r.pending {
		if ch.Operation != OpDelete && !r.narrowed[nf.Name] {
			continue
		}
		t := newTransition(r.cfg, nf, r.current[nf.Name], nil, false)
		t.Path, t.HoldersPath, t.Unload, t.CheckHolders = pathDriverRecords, pathDeletion, true, true
		switch {
		case ch.Operation == OpDelete:
		case ch.DRAScheduling != nil:
			t.HoldersPath, t.Unscheduled = pathPluginScheduling, unscheduledPlugin
		default:
			t.HoldersPath, t.Unscheduled = pathNodeSelector, unscheduledNVIDIADriver
		}
		r.unloads = append(r.unloads, t)
	}
	if r.records && len(r.names) > 0 { // else RecordMissing says it all
		r.transitions()
	}
	if st := r.step; st != nil && r.records {
		// The step is judged on the fleet as its live reads see it (the
		// in-flight nodes and the node itself written over the cache); the
		// request on the cache.
		r.fleetCl = r.cl.withNodes(r.cfg, append(slices.Clone(st.InFlight), st.Node)...)
	}
	r.beginListed(holders, holdersErr)
	var f findings
	applyTable(r, &f, &d)
	if r.stopped {
		// A step whose rollout cannot be read: break glass does not start it.
		return r.cfg.finish(d, f, r.req.User, nil, nil)
	}
	return r.cfg.finish(d, f, r.req.User, ch.Annotations, ch.OldAnnotations)
}

// transitions builds one Transition per node the change reloads or moves,
// under the loaded record that covers its hardware.
func (r *DriverReview) transitions() {
	ch := r.req.Change
	var usable []*qualification.Record
	for _, name := range r.names {
		if e, ok := r.cl.Records[name]; ok && e.Err == nil && e.Record != nil {
			usable = append(usable, e.Record)
			r.uses = append(r.uses, recordDest{e.Record, &e.Record.Target})
		}
	}
	for _, nf := range r.pending {
		if r.narrowed[nf.Name] {
			continue // unloaded (Decide), not moved
		}
		cur := r.current[nf.Name]
		after := r.after(nf.Name, cur)
		t := newTransition(r.cfg, nf, cur, coveringRecord(usable, nf.Identities), r.rollback)
		t.After, t.ByHardware = &after, true
		t.Path, t.RecordPath, t.HoldersPath = pathDriverRecords, pathDriverRecords, ch.PolicyPath
		t.AfterPath = map[Component]*field.Path{ComponentDriver: ch.DriverPath, ComponentDCGMExporter: ch.DCGMPath, ComponentGPUOperator: ch.OperatorPath, ComponentDRADriver: ch.DRAPath}
		t.CheckHolders, t.Drains = !r.operatorUpgrade() && !r.draOnly(), ch.Policy.DrainEnabled
		t.CurrentUnknown = r.unknownDRA[nf.Name]
		if from := r.draFrom[nf.Name]; from != "" {
			t.CurrentFrom = map[Component]string{ComponentDRADriver: from}
		}
		if r.step != nil {
			t.Path, t.HoldersPath, t.DrainOver = pathDriverState, pathDriverState, true
		}
		r.ts = append(r.ts, t)
	}
}

func coveringRecord(recs []*qualification.Record, ids []string) *qualification.Record {
	for _, rec := range recs {
		if slices.Equal(rec.NormalizedHardware(), ids) {
			return rec
		}
	}
	return nil
}
