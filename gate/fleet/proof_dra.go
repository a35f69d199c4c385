package fleet

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/dra"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// The proof of a DRA GPU node (docs/proof.md#dra-nodes): a node that
// offers its GPUs through a configured DRA driver's ResourceSlices has no
// nvidia.com/gpu to count, so the driver's own objects stand in for the
// device plugin's: its kubelet-plugin Pod, the devices its slices list, and
// an allocation check whose claim the scheduler allocated from the node's
// pool.

// draNode is what one configured driver shows of one node.
type draNode struct {
	driver dra.Driver
	// ds is the driver's kubelet-plugin DaemonSet (nil: not there); unknown
	// says why whether it serves the node is not known ("" : it is).
	ds      *appsv1.DaemonSet
	unknown string
	plugins []*corev1.Pod // Pods on the node its DaemonSet controls
	// forged are Pods on the node that name the DaemonSet as their
	// controller but are not its (another UID, or it is not there).
	forged []*corev1.Pod
	slices []*resourcev1.ResourceSlice
}

// draNodeOf is, per configured driver that serves the node, what it shows:
// such a node is a DRA node. A driver serves the node when its
// kubelet-plugin DaemonSet's scheduling selects it (which a crashed plugin
// does not change), or it publishes slices for the node, or its plugin Pod
// runs there; when its DaemonSet cannot be read, every node may be one.
func (pr *Prover) draNodeOf(n *corev1.Node) []draNode {
	var out []draNode
	facts := &pr.Facts.DRA
	for _, d := range pr.DRADrivers {
		dn := draNode{driver: d, ds: facts.DaemonSet(d.Namespace, d.DaemonSet), unknown: facts.DaemonSetsUnreadable}
		scheduled := dn.unknown == "" && dn.ds != nil && daemonSetSelects(dn.ds, n)
		for _, p := range podsOn(facts.PluginPods, n.Name) {
			switch {
			case pluginOf(d, dn.ds, p):
				dn.plugins = append(dn.plugins, p)
			case namesPluginDaemonSet(d, p):
				dn.forged = append(dn.forged, p)
			}
		}
		for _, s := range facts.Slices {
			if s.Spec.Driver == d.Name && s.Spec.NodeName != nil && *s.Spec.NodeName == n.Name {
				dn.slices = append(dn.slices, s)
			}
		}
		if dn.unknown != "" || scheduled || len(dn.plugins) > 0 || len(dn.slices) > 0 {
			out = append(out, dn)
		}
	}
	return out
}

// daemonSetSelects says whether the DaemonSet's Pod template may be
// scheduled on the node: its nodeName (which the DaemonSet controller
// honours), its nodeSelector and its required node affinity, as the
// scheduler reads them. Taints are left out, so more nodes count as served
// (and must prove their DRA driver), never fewer.
func daemonSetSelects(ds *appsv1.DaemonSet, n *corev1.Node) bool {
	spec := &ds.Spec.Template.Spec
	if spec.NodeName != "" && spec.NodeName != n.Name {
		return false
	}
	if !labels.SelectorFromSet(spec.NodeSelector).Matches(labels.Set(n.Labels)) {
		return false
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		return selectsNode(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution, n)
	}
	return true
}

// pluginOf says whether the driver's kubelet-plugin DaemonSet, as read,
// controls the Pod: its controller reference names that DaemonSet and
// carries its UID. Anyone who may create a Pod in the namespace could name
// it like one.
func pluginOf(d dra.Driver, ds *appsv1.DaemonSet, p *corev1.Pod) bool {
	return ds != nil && namesPluginDaemonSet(d, p) && metav1.IsControlledBy(p, ds)
}

// namesPluginDaemonSet says whether the Pod's controller reference names
// the driver's DaemonSet by kind and name (whatever its UID).
func namesPluginDaemonSet(d dra.Driver, p *corev1.Pod) bool {
	ref := metav1.GetControllerOfNoCopy(p)
	return ref != nil && ref.Kind == "DaemonSet" && strings.HasPrefix(ref.APIVersion, "apps/") &&
		ref.Name == d.DaemonSet && p.Namespace == d.Namespace
}

// pluginReadyAt is when the plugin Pods on the node last became Ready: a
// driver restart restarts its plugin, so a check before that proves nothing.
func pluginReadyAt(nodes []draNode) time.Time {
	var t time.Time
	for _, dn := range nodes {
		for _, p := range dn.plugins {
			t = later(t, podCondition(p, corev1.PodReady).LastTransitionTime.Time)
		}
	}
	return t
}

// draResourceProof: each driver's plugin Pod on the node is Ready, and its
// slices (the complete current generation of each pool) list as many GPUs
// as GFD counts. Extended resources the node also advertises must still be
// fully allocatable.
func (pr *Prover) draResourceProof(n *corev1.Node, nodes []draNode, miss func(string, ...any)) {
	for name := range n.Status.Capacity {
		if strings.HasPrefix(string(name), gpuResourcePrefix) {
			resourceProof(n, miss)
			break
		}
	}
	for _, dn := range nodes {
		d := dn.driver
		if dn.unknown != "" {
			miss("whether %s serves the node is unknown: its kubelet-plugin DaemonSet %s/%s cannot be read (%s)", d.Name, d.Namespace, d.DaemonSet, dn.unknown)
			continue
		}
		if len(dn.plugins) == 0 {
			miss("no DRA plugin Pod of %s (controlled by DaemonSet %s/%s%s) on the node%s", d.Name, d.Namespace, d.DaemonSet, notThere(dn.ds), forgedPlugins(dn))
		}
		for _, p := range dn.plugins {
			if podCondition(p, corev1.PodReady).Status != corev1.ConditionTrue {
				miss("DRA plugin Pod %s/%s of %s is not Ready (phase %s)", p.Namespace, qualification.Clip(p.Name), d.Name, quoteOrNone(string(p.Status.Phase)))
			}
		}
		if why := pr.Facts.DRA.Unreadable; why != "" {
			miss("ResourceSlices of %s cannot be read (%s): the node's devices are unknown", d.Name, why)
			continue
		}
		sliceProof(n, d.Name, dn.slices, miss)
	}
}

func notThere(ds *appsv1.DaemonSet) string {
	if ds == nil {
		return ", which is not there"
	}
	return ""
}

// forgedPlugins names the Pods on the node that name the plugin DaemonSet
// as their controller without being its own: ignored.
func forgedPlugins(dn draNode) string {
	var names []string
	for _, p := range dn.forged {
		names = append(names, p.Namespace+"/"+qualification.Clip(p.Name))
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	return "; ignored (they name it as their controller, but not its UID): " + strings.Join(names, ", ")
}

// sliceProof counts the GPUs the node's slices of a driver list: per pool,
// only the highest generation counts (the driver bumps it when it
// republishes, and stale slices linger until deleted), and only once all of
// its resourceSliceCount slices are there (the scheduler ignores an
// incomplete pool too).
func sliceProof(n *corev1.Node, driver string, slices []*resourcev1.ResourceSlice, miss func(string, ...any)) {
	if len(slices) == 0 {
		miss("no ResourceSlices of %s for the node", driver)
		return
	}
	type pool struct {
		gen           int64
		want, got, gp int64
	}
	pools := map[string]*pool{}
	for _, s := range slices {
		p := pools[s.Spec.Pool.Name]
		if p == nil || s.Spec.Pool.Generation > p.gen {
			p = &pool{gen: s.Spec.Pool.Generation}
			pools[s.Spec.Pool.Name] = p
		}
		if s.Spec.Pool.Generation < p.gen {
			continue
		}
		p.want, p.got, p.gp = s.Spec.Pool.ResourceSliceCount, p.got+1, p.gp+gpuDevices(driver, s.Spec.Devices)
	}
	var devices int64
	for _, name := range sortedKeys(pools) {
		p := pools[name]
		if p.got < p.want {
			miss("ResourceSlices of %s pool %s generation %d: %d of %d slices published (incomplete)", driver, qualification.Clip(name), p.gen, p.got, p.want)
		}
		devices += p.gp
	}
	label, ok := n.Labels[LabelGPUCount]
	want, err := strconv.ParseInt(label, 10, 64)
	switch {
	case !ok:
		miss("ResourceSlices of %s list %d devices, but the node has no %s label to expect a count from", driver, devices, LabelGPUCount)
	case err != nil || want < 0:
		miss("ResourceSlices of %s list %d devices, but label %s=%q does not parse as a count", driver, devices, LabelGPUCount, qualification.Clip(label))
	case devices != want:
		miss("ResourceSlices of %s list %d devices, expected %d (%s)", driver, devices, want, LabelGPUCount)
	}
}

// gpuDevices counts a slice's whole GPUs: NVIDIA's driver types its devices
// (attribute type: gpu, mig, ...), and a MIG device is part of a GPU GFD
// already counted; a device without a type counts as one GPU.
func gpuDevices(driver string, devices []resourcev1.Device) int64 {
	var n int64
	for _, d := range devices {
		t, ok := d.Attributes["type"]
		if !ok {
			t, ok = d.Attributes[resourcev1.QualifiedName(driver+"/type")]
		}
		if !ok || t.StringValue == nil || *t.StringValue == "gpu" {
			n++
		}
	}
	return n
}

// draAllocationProof: an allocation check on the node Succeeded after it
// reached its tuple, and one of its ResourceClaims was allocated from the
// node's pool of one of its DRA drivers (as the scheduler writes it).
func (pr *Prover) draAllocationProof(n *corev1.Node, nodes []draNode, pods []*corev1.Pod, reached time.Time, miss func(string, ...any)) {
	var seen, drivers []string
	for _, dn := range nodes {
		drivers = append(drivers, dn.driver.Name)
	}
	for _, pod := range pods {
		started := pod.Status.StartTime
		switch why := pr.claimOnNode(n, nodes, pod); {
		case pod.Status.Phase != corev1.PodSucceeded:
			seen = append(seen, fmt.Sprintf("%s/%s is %s", pod.Namespace, pod.Name, quoteOrNone(string(pod.Status.Phase))))
		case started == nil || started.Time.Before(reached):
			seen = append(seen, fmt.Sprintf("%s/%s started before the node reached its tuple", pod.Namespace, pod.Name))
		case why != "":
			seen = append(seen, fmt.Sprintf("%s/%s used no ResourceClaim allocated on the node (%s)", pod.Namespace, pod.Name, why))
		default:
			return
		}
	}
	detail := "none on the node"
	if len(seen) > 0 {
		slices.Sort(seen)
		detail = nodeList(seen)
	}
	miss("no allocation check (%s) with a ResourceClaim of %s allocated on the node Succeeded after %s: %s",
		pr.Config.AllocationCheck.Selector, strings.Join(drivers, ", "), Stamp(reached), detail)
}

// claimOnNode says why none of the Pod's ResourceClaims was allocated a
// device of the node's pools ("" : one was). The Pod's status names the
// claims made from templates; the claim lives in the Pod's namespace.
func (pr *Prover) claimOnNode(n *corev1.Node, nodes []draNode, pod *corev1.Pod) string {
	if why := pr.Facts.DRA.Unreadable; why != "" {
		return "ResourceClaims cannot be read: " + why
	}
	names := podClaimNames(pod)
	if len(names) == 0 {
		return "it references none"
	}
	var whys []string
	for _, name := range names {
		claim := findClaim(pr.Facts.DRA.Claims, pod.Namespace, name)
		if claim == nil {
			whys = append(whys, "claim "+qualification.Clip(name)+" not found")
			continue
		}
		why := allocatedOn(claim, n, nodes)
		if why == "" {
			return ""
		}
		whys = append(whys, "claim "+qualification.Clip(name)+" "+why)
	}
	return strings.Join(whys, "; ")
}

// podClaimNames are the names of the ResourceClaims the Pod uses: named in
// its spec, made for it from a template (its status), or made for its
// DRA-backed extended resources.
func podClaimNames(pod *corev1.Pod) []string {
	var out []string
	for _, rc := range pod.Spec.ResourceClaims {
		if rc.ResourceClaimName != nil {
			out = append(out, *rc.ResourceClaimName)
		}
	}
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			out = append(out, *s.ResourceClaimName)
		}
	}
	if s := pod.Status.ExtendedResourceClaimStatus; s != nil && s.ResourceClaimName != "" {
		out = append(out, s.ResourceClaimName)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func findClaim(claims []*resourcev1.ResourceClaim, ns, name string) *resourcev1.ResourceClaim {
	for _, c := range claims {
		if c.Namespace == ns && c.Name == name {
			return c
		}
	}
	return nil
}

// allocatedOn says why the claim's allocation is not on the node ("" : it
// is): a device of a node's driver from a pool that driver publishes for the
// node, and a node selector, when set, that selects the node.
func allocatedOn(claim *resourcev1.ResourceClaim, n *corev1.Node, nodes []draNode) string {
	a := claim.Status.Allocation
	if a == nil {
		return "is not allocated"
	}
	if a.NodeSelector != nil && !selectsNode(a.NodeSelector, n) {
		return "is allocated for other nodes (its node selector does not select this one)"
	}
	var got []string
	for _, r := range a.Devices.Results {
		for _, dn := range nodes {
			if r.Driver == dn.driver.Name && slices.ContainsFunc(dn.slices, func(s *resourcev1.ResourceSlice) bool { return s.Spec.Pool.Name == r.Pool }) {
				return ""
			}
		}
		got = append(got, qualification.Clip(r.Driver)+"/"+qualification.Clip(r.Pool)+"/"+qualification.Clip(r.Device))
	}
	if len(got) == 0 {
		return "is allocated no device"
	}
	return "is allocated " + strings.Join(got, ", ") + ", none from the node's pools"
}

// selectsNode evaluates a node selector as the scheduler does: any term
// whose expressions (labels) and fields (metadata.name) all match.
func selectsNode(ns *corev1.NodeSelector, n *corev1.Node) bool {
	for _, term := range ns.NodeSelectorTerms {
		if termSelects(term, n) {
			return true
		}
	}
	return false
}

func termSelects(term corev1.NodeSelectorTerm, n *corev1.Node) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false // an empty term selects nothing
	}
	match := func(reqs []corev1.NodeSelectorRequirement, set labels.Set) bool {
		for _, r := range reqs {
			op := map[corev1.NodeSelectorOperator]selection.Operator{
				corev1.NodeSelectorOpIn: selection.In, corev1.NodeSelectorOpNotIn: selection.NotIn,
				corev1.NodeSelectorOpExists: selection.Exists, corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
				corev1.NodeSelectorOpGt: selection.GreaterThan, corev1.NodeSelectorOpLt: selection.LessThan,
			}[r.Operator]
			req, err := labels.NewRequirement(r.Key, op, r.Values)
			if op == "" || err != nil || !req.Matches(set) {
				return false
			}
		}
		return true
	}
	// metadata.name is the only field a node selector may name, with In
	// or NotIn (a node name may be longer than a label value).
	for _, f := range term.MatchFields {
		in := slices.Contains(f.Values, n.Name)
		if f.Key != "metadata.name" || !(f.Operator == corev1.NodeSelectorOpIn && in || f.Operator == corev1.NodeSelectorOpNotIn && !in) {
			return false
		}
	}
	return match(term.MatchExpressions, n.Labels)
}
