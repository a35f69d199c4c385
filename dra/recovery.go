// Package dra reads a DRA GPU driver's state: its kubelet-plugin Pods and
// the ResourceSlices it publishes per node. It is pure (objects and the time
// in, an answer out), as gate is: the CLI feeds it from a snapshot or the
// API server.
package dra

import (
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// DefaultMinUnready is the seed's bound: a driver Pod is a recovery
// candidate only after it has been unready this long.
const DefaultMinUnready = 10 * time.Minute

// NVIDIADriverName is the NVIDIA DRA driver's name in ResourceSlices: the
// driver the GPU Operator's GPUCluster deploys.
const NVIDIADriverName = "gpu.nvidia.com"

// Driver names a DRA driver and the DaemonSet that runs its kubelet
// plugin on every GPU node.
type Driver struct {
	// Name is the driver's name in ResourceSlices (spec.driver), e.g.
	// gpu.nvidia.com or hami-core-gpu.project-hami.io.
	Name string `json:"name"`
	// Namespace and DaemonSet name the kubelet-plugin DaemonSet.
	Namespace string `json:"namespace"`
	DaemonSet string `json:"daemonSet"`
	// Controllers are the usernames of the driver's own controllers, as
	// the API server authenticates them (NVIDIA's ComputeDomain controller:
	// system:serviceaccount:<namespace>:<release>-service-account-controller).
	// They create workloads of the driver's image in its namespace (the
	// ComputeDomain daemons' DaemonSets) and never wait on the gate; any
	// other writer there, a ServiceAccount of the namespace too, is judged
	// (DRAPluginForged).
	Controllers []string `json:"controllers,omitempty"`
}

// RecoveryInput is what the planner reads: the Nodes, the plugin
// DaemonSet (nil when it is not there), the Pods of its namespace and the
// cluster's ResourceSlices (other drivers' are ignored).
type RecoveryInput struct {
	Driver     Driver
	Nodes      []*corev1.Node
	DaemonSet  *appsv1.DaemonSet
	Pods       []*corev1.Pod
	Slices     []*resourcev1.ResourceSlice
	MinUnready time.Duration
	Now        time.Time
}

// Condition is one of the seed's four conditions as the planner found it.
type Condition struct {
	Name   string `json:"name"`
	Holds  bool   `json:"holds"`
	Detail string `json:"detail"`
}

// The seed's conditions, in the order they are reported.
const (
	CondDriverDegraded = "driver-degraded"  // the DaemonSet wants more ready Pods than it has
	CondStalePod       = "stale-driver-pod" // a Pod of the current DaemonSet, not deleting, unready long enough
	CondNodeReady      = "node-ready"       // the Pod's node is Ready
	CondInventoryEmpty = "inventory-empty"  // the node's slices of the driver hold no device
)

// PodFinding is one driver Pod the planner looked at and every condition
// it checked for it.
type PodFinding struct {
	Namespace  string      `json:"namespace"`
	Pod        string      `json:"pod"`
	Node       string      `json:"node"`
	Conditions []Condition `json:"conditions"`
	// UnreadySince is the PodReady condition's last transition.
	UnreadySince time.Time `json:"unreadySince,omitzero"`
}

// Candidate says whether every condition holds.
func (f PodFinding) Candidate() bool {
	for _, c := range f.Conditions {
		if !c.Holds {
			return false
		}
	}
	return len(f.Conditions) > 0
}

// RecoveryPlan is the planner's answer: the DaemonSet's condition, every
// driver Pod examined and at most one candidate. It never deletes.
type RecoveryPlan struct {
	Driver    Driver       `json:"driver"`
	DaemonSet Condition    `json:"daemonSet"`
	Pods      []PodFinding `json:"pods"`
	// Candidate is the Pod to delete after review, nil when none.
	Candidate *PodFinding `json:"candidate,omitempty"`
	// Ignored are Pods in the namespace that look like driver Pods but are
	// not controlled by the DaemonSet (a forged label, a replaced
	// DaemonSet's leftovers): they never become candidates.
	Ignored []string `json:"ignored,omitempty"`
	// Why says why there is no candidate.
	Why string `json:"why,omitempty"`
}

// Command is what a reviewer runs after reading the plan; the planner
// never runs it.
func (p *RecoveryPlan) Command() string {
	if p.Candidate == nil {
		return ""
	}
	return fmt.Sprintf("kubectl -n %s delete pod %s --wait=false", p.Candidate.Namespace, p.Candidate.Pod)
}

// PlanRecovery applies the seed's bounded stale-driver rules exactly:
// a candidate needs a degraded DaemonSet (desired > 0, ready < desired), and
// a Pod the current DaemonSet controls (its UID) that is not deleting, not
// Ready, and has been unready for at least MinUnready, on a Ready node whose
// ResourceSlices of the driver hold no device. Of several, the one unready
// longest is chosen (ties by namespace/name). MinUnready must be positive:
// validate it before (a bad value is never replaced by the default).
func PlanRecovery(in RecoveryInput) *RecoveryPlan {
	p := &RecoveryPlan{Driver: in.Driver, Pods: []PodFinding{}}
	ds := in.DaemonSet
	switch {
	case ds == nil:
		p.DaemonSet = Condition{Name: CondDriverDegraded, Detail: fmt.Sprintf("DaemonSet %s/%s not found", in.Driver.Namespace, in.Driver.DaemonSet)}
	case ds.Status.DesiredNumberScheduled > 0 && ds.Status.NumberReady < ds.Status.DesiredNumberScheduled:
		p.DaemonSet = Condition{Name: CondDriverDegraded, Holds: true, Detail: fmt.Sprintf("%d of %d ready", ds.Status.NumberReady, ds.Status.DesiredNumberScheduled)}
	default:
		p.DaemonSet = Condition{Name: CondDriverDegraded, Detail: fmt.Sprintf("%d of %d ready: not degraded", ds.Status.NumberReady, ds.Status.DesiredNumberScheduled)}
	}
	nodes := make(map[string]*corev1.Node, len(in.Nodes))
	for _, n := range in.Nodes {
		nodes[n.Name] = n
	}
	devices, slices := devicesByNode(in.Driver.Name, in.Slices)
	for _, pod := range in.Pods {
		if pod.Namespace != in.Driver.Namespace {
			continue
		}
		// Controlled by this DaemonSet object, by UID: a Pod of a deleted
		// and recreated DaemonSet, or one a tenant labelled to look like a
		// driver Pod, never counts.
		if ds == nil || !metav1.IsControlledBy(pod, ds) {
			if ds != nil && looksLikeDriverPod(pod, ds) {
				p.Ignored = append(p.Ignored, pod.Namespace+"/"+pod.Name+": not controlled by DaemonSet "+ds.Namespace+"/"+ds.Name+" (uid "+string(ds.UID)+")")
			}
			continue
		}
		f := PodFinding{Namespace: pod.Namespace, Pod: pod.Name, Node: pod.Spec.NodeName}
		f.Conditions = append(f.Conditions, p.DaemonSet)
		stale, since := staleCondition(pod, in.MinUnready, in.Now)
		f.Conditions, f.UnreadySince = append(f.Conditions, stale), since
		f.Conditions = append(f.Conditions, nodeReady(nodes[pod.Spec.NodeName], pod.Spec.NodeName))
		f.Conditions = append(f.Conditions, inventoryEmpty(in.Driver.Name, pod.Spec.NodeName, devices[pod.Spec.NodeName], slices[pod.Spec.NodeName]))
		p.Pods = append(p.Pods, f)
	}
	sort.Slice(p.Pods, func(i, j int) bool {
		a, b := p.Pods[i], p.Pods[j]
		return a.Namespace+"/"+a.Pod < b.Namespace+"/"+b.Pod
	})
	sort.Strings(p.Ignored)
	for i := range p.Pods {
		f := &p.Pods[i]
		if f.Candidate() && (p.Candidate == nil || f.UnreadySince.Before(p.Candidate.UnreadySince)) {
			p.Candidate = f
		}
	}
	if p.Candidate == nil {
		p.Why = why(p)
	}
	return p
}

// why says, briefly, which conditions kept every Pod from being a
// candidate.
func why(p *RecoveryPlan) string {
	if !p.DaemonSet.Holds {
		return p.DaemonSet.Name + ": " + p.DaemonSet.Detail
	}
	if len(p.Pods) == 0 {
		return "no Pod controlled by the DaemonSet"
	}
	var out []string
	for _, f := range p.Pods {
		var failed []string
		for _, c := range f.Conditions {
			if !c.Holds {
				failed = append(failed, c.Name)
			}
		}
		out = append(out, f.Namespace+"/"+f.Pod+": "+strings.Join(failed, ", "))
	}
	return "no Pod meets every condition (" + strings.Join(out, "; ") + ")"
}

// looksLikeDriverPod: the Pod carries the DaemonSet's selector labels or
// names it as owner, so leaving it out is worth saying.
func looksLikeDriverPod(pod *corev1.Pod, ds *appsv1.DaemonSet) bool {
	if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "DaemonSet" && ref.Name == ds.Name {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	return err == nil && ds.Spec.Selector != nil && !sel.Empty() && sel.Matches(labels.Set(pod.Labels))
}

func staleCondition(pod *corev1.Pod, minUnready time.Duration, now time.Time) (Condition, time.Time) {
	c := Condition{Name: CondStalePod}
	if pod.DeletionTimestamp != nil {
		c.Detail = "already deleting since " + pod.DeletionTimestamp.UTC().Format(time.RFC3339)
		return c, time.Time{}
	}
	var ready *corev1.PodCondition
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			ready = &pod.Status.Conditions[i]
		}
	}
	switch {
	case ready == nil:
		c.Detail = "no Ready condition: the kubelet has not reported the Pod"
		return c, time.Time{}
	case ready.Status == corev1.ConditionTrue:
		c.Detail = "Ready"
		return c, time.Time{}
	case ready.LastTransitionTime.IsZero():
		c.Detail = "not Ready, with no transition time: how long is unknown"
		return c, time.Time{}
	}
	since := ready.LastTransitionTime.UTC()
	age := now.Sub(since)
	if age < minUnready {
		c.Detail = fmt.Sprintf("not Ready since %s, %s ago; at least %s is required", since.Format(time.RFC3339), age.Round(time.Second), minUnready)
		return c, since
	}
	c.Holds = true
	c.Detail = fmt.Sprintf("not Ready since %s, %s ago (at least %s)", since.Format(time.RFC3339), age.Round(time.Second), minUnready)
	return c, since
}

func nodeReady(n *corev1.Node, name string) Condition {
	c := Condition{Name: CondNodeReady}
	if n == nil {
		c.Detail = fmt.Sprintf("node %q not found", name)
		return c
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			c.Holds = cond.Status == corev1.ConditionTrue
			c.Detail = fmt.Sprintf("node %s Ready=%s", n.Name, cond.Status)
			return c
		}
	}
	c.Detail = "node " + n.Name + " reports no Ready condition"
	return c
}

func inventoryEmpty(driver, node string, devices, slices int) Condition {
	c := Condition{Name: CondInventoryEmpty, Holds: devices == 0}
	c.Detail = fmt.Sprintf("%d ResourceSlices of %s on node %s with %d devices", slices, driver, node, devices)
	return c
}

// devicesByNode counts, per node, the driver's ResourceSlices that name it
// and the devices they list.
func devicesByNode(driver string, all []*resourcev1.ResourceSlice) (devices, slices map[string]int) {
	devices, slices = map[string]int{}, map[string]int{}
	for _, s := range all {
		if s.Spec.Driver != driver || s.Spec.NodeName == nil {
			continue
		}
		slices[*s.Spec.NodeName]++
		devices[*s.Spec.NodeName] += len(s.Spec.Devices)
	}
	return devices, slices
}

// Validate reports a driver entry that cannot name what it means.
func (d Driver) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if msgs := validation.IsDNS1123Subdomain(d.Name); len(msgs) > 0 {
		errs = append(errs, field.Invalid(path.Child("name"), d.Name, "expected the driver's name as ResourceSlices carry it in spec.driver, e.g. gpu.nvidia.com: "+msgs[0]))
	}
	if msgs := validation.IsDNS1123Label(d.Namespace); len(msgs) > 0 {
		errs = append(errs, field.Invalid(path.Child("namespace"), d.Namespace, "expected the namespace of the driver's kubelet-plugin DaemonSet: "+msgs[0]))
	}
	if msgs := validation.IsDNS1123Subdomain(d.DaemonSet); len(msgs) > 0 {
		errs = append(errs, field.Invalid(path.Child("daemonSet"), d.DaemonSet, "expected the name of the driver's kubelet-plugin DaemonSet: "+msgs[0]))
	}
	seen := map[string]bool{}
	for i, c := range d.Controllers {
		p := path.Child("controllers").Index(i)
		if seen[c] {
			errs = append(errs, field.Duplicate(p, qualification.Clip(c)))
		}
		seen[c] = true
		if msg := controllerProblem(c); msg != "" {
			errs = append(errs, field.Invalid(p, qualification.Clip(c), msg))
		}
	}
	return errs
}

// controllerProblem says why c is no username a controller can have ("" if
// it can): a group (system:serviceaccounts:<ns> is every ServiceAccount of
// a namespace, the exemption this list replaces), or a ServiceAccount's
// username that is not system:serviceaccount:<namespace>:<name>.
func controllerProblem(c string) string {
	const want = "expected the username of one of the driver's controllers as the API server authenticates it, e.g. system:serviceaccount:nvidia-dra-driver-gpu:nvidia-dra-driver-gpu-service-account-controller"
	switch {
	case c == "":
		return want + " (empty)"
	case strings.ContainsAny(c, " \t\n\r"):
		return want + " (no spaces)"
	case strings.HasPrefix(c, serviceaccount.ServiceAccountGroupPrefix) || c == serviceaccount.AllServiceAccountsGroup || c == user.AllAuthenticated:
		return want + ": this is a group of users, not one controller's username"
	case strings.HasPrefix(c, serviceaccount.ServiceAccountUsernamePrefix):
		if _, _, err := serviceaccount.SplitUsername(c); err != nil {
			return want + ": a ServiceAccount's username is system:serviceaccount:<namespace>:<name>"
		}
	}
	return ""
}
