package fleet

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/dra"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Proof of an upgraded node: what must hold, read from the cluster's own
// objects, before the node counts as proven (docs/proof.md). Nothing is
// remembered between reviews, so a restart of the gate changes nothing.

// ProofRequirement names one requirement of a proof; each can be switched
// off in the config (proof.disabled), and every decision that relied on a proof
// names the requirements that were off.
type ProofRequirement string

const (
	ProofReady       ProofRequirement = "ready"
	ProofValidator   ProofRequirement = "validator"
	ProofResources   ProofRequirement = "resources"
	ProofDriverState ProofRequirement = "driverUpgradeState"
	ProofHealth      ProofRequirement = "healthConditions"
	ProofAllocation  ProofRequirement = "allocation"
	ProofSoak        ProofRequirement = "soak"
)

// ProofRequirements lists every requirement, in the order proofs report them.
var ProofRequirements = []ProofRequirement{ProofReady, ProofValidator, ProofResources, ProofDriverState, ProofHealth, ProofAllocation, ProofSoak}

// Labels and prefixes a proof reads.
const (
	LabelGPUCount     = "nvidia.com/gpu.count"
	labelGPUReplicas  = "nvidia.com/gpu.replicas"
	labelMIGStrategy  = "nvidia.com/mig.strategy"
	ResourceGPU       = corev1.ResourceName("nvidia.com/gpu")
	gpuResourcePrefix = "nvidia.com/"
	// TaintUnschedulable is the taint the node lifecycle controller adds on a
	// cordon; its timeAdded says when the node was cordoned.
	TaintUnschedulable = "node.kubernetes.io/unschedulable"
)

// PodSelector picks Pods by namespace (empty: every namespace) and a label
// selector in kubectl's syntax.
type PodSelector struct {
	Namespace string `json:"namespace,omitempty"`
	Selector  string `json:"selector"`
}

// ValidatorSelector picks the GPU Operator's validator Pods: by label, and
// only those its validator DaemonSet controls. Anyone who may create a Pod
// in the namespace can copy the label; a Pod that the DaemonSet does not
// control is ignored (and named), so it can neither prove nor un-prove a
// node nor halt a rollout.
type ValidatorSelector struct {
	PodSelector
	// DaemonSet is the name of the DaemonSet whose Pods count, in Namespace
	// (an owner reference names an object of the Pod's own namespace). The
	// GPU Operator names it nvidia-operator-validator (its
	// assets/state-operator-validation/0500_daemonset.yaml).
	DaemonSet string `json:"daemonSet"`
	// Repository is the validator's image repository: a ClusterPolicy
	// write that gives the validator an image of another repository is
	// refused (ValidatorForged), since the GPU Operator, not judged, then
	// writes the DaemonSet. Compared as the image helpers compare
	// repositories (a registry-less entry matches below a mirror's prefix).
	Repository string `json:"repository"`
}

// ProofConfig is the `proof` section of the config.
type ProofConfig struct {
	// Off lists requirements switched off; none is off by default.
	Off []ProofRequirement `json:"disabled,omitempty"`
	// Validator: the GPU Operator's validator Pods.
	Validator ValidatorSelector `json:"validator"`
	// AllocationCheck: Pods that request a GPU and prove a real allocation.
	AllocationCheck PodSelector `json:"allocationCheck"`
	// Checks are the check kinds each upgraded GPU node must pass besides
	// the allocation check (nodechecks.go); none by default.
	Checks []NodeCheck `json:"checks,omitempty"`
	// HealthConditions: node conditions that mean the GPUs are unhealthy.
	HealthConditions []HealthCondition `json:"healthConditions"`
	// Soak is how long every requirement must have held.
	Soak metav1.Duration `json:"soak"`
}

// DefaultProofConfig: every requirement on, the GPU Operator's validator, the
// health conditions of NVIDIA's and the clouds' GPU health tools (cited in
// docs/proof.md), a 30 minute soak.
func DefaultProofConfig() ProofConfig {
	return ProofConfig{
		Validator: ValidatorSelector{PodSelector: PodSelector{Namespace: "gpu-operator", Selector: "app=nvidia-operator-validator"}, DaemonSet: "nvidia-operator-validator",
			Repository: "nvcr.io/nvidia/cloud-native/gpu-operator-validator"},
		AllocationCheck: PodSelector{Selector: "gpu-upgrade-gate.io/allocation-check=true"},
		HealthConditions: []HealthCondition{
			{Type: "GpuXidError", UnhealthyStatus: corev1.ConditionTrue},               // NVIDIA NVSentinel
			{Type: "GPUMissing", UnhealthyStatus: corev1.ConditionTrue},                // AKS node-problem-detector
			{Type: "GPUXIDErrors", UnhealthyStatus: corev1.ConditionTrue},              // AKS node-problem-detector
			{Type: "AcceleratedHardwareReady", UnhealthyStatus: corev1.ConditionFalse}, // EKS node monitoring agent
		},
		Soak: metav1.Duration{Duration: 30 * time.Minute},
	}
}

// On says whether a requirement is checked.
func (p *ProofConfig) On(r ProofRequirement) bool { return !slices.Contains(p.Off, r) }

// Validate checks the section (path).
func (p *ProofConfig) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range p.Off {
		if !slices.Contains(ProofRequirements, r) {
			errs = append(errs, field.NotSupported(path.Child("disabled").Index(i), r, ProofRequirements))
		}
	}
	for _, s := range []struct {
		sel  PodSelector
		path *field.Path
	}{{p.Validator.PodSelector, path.Child("validator")}, {p.AllocationCheck, path.Child("allocationCheck")}} {
		if s.sel.Namespace != "" {
			if msgs := validation.IsDNS1123Label(s.sel.Namespace); len(msgs) > 0 {
				errs = append(errs, field.Invalid(s.path.Child("namespace"), s.sel.Namespace, msgs[0]))
			}
		}
		if sel, err := labels.Parse(s.sel.Selector); err != nil {
			errs = append(errs, field.Invalid(s.path.Child("selector"), s.sel.Selector, "expected a label selector, e.g. app=nvidia-operator-validator: "+err.Error()))
		} else if sel.Empty() {
			errs = append(errs, field.Required(s.path.Child("selector"), "a selector that picks only these Pods (an empty one would watch every Pod)"))
		}
	}
	if p.Validator.Namespace == "" {
		errs = append(errs, field.Required(path.Child("validator", "namespace"), "the GPU Operator's namespace, where its validator DaemonSet runs (an owner reference names a DaemonSet of the Pod's own namespace), e.g. gpu-operator"))
	}
	if msgs := validation.IsDNS1123Subdomain(p.Validator.DaemonSet); len(msgs) > 0 {
		errs = append(errs, field.Invalid(path.Child("validator", "daemonSet"), p.Validator.DaemonSet, "expected the name of the GPU Operator's validator DaemonSet, e.g. nvidia-operator-validator: "+msgs[0]))
	}
	if img, err := ParseImage(p.Validator.Repository); err != nil || img.Tag != "" || img.Digest != "" {
		errs = append(errs, field.Invalid(path.Child("validator", "repository"), qualification.Clip(p.Validator.Repository),
			"expected the validator's image repository without tag or digest, e.g. nvcr.io/nvidia/cloud-native/gpu-operator-validator"))
	}
	for i, h := range p.HealthConditions {
		if h.Type == "" {
			errs = append(errs, field.Required(path.Child("healthConditions").Index(i).Child("type"), "the node condition type"))
		}
		if h.UnhealthyStatus != corev1.ConditionTrue && h.UnhealthyStatus != corev1.ConditionFalse {
			errs = append(errs, field.NotSupported(path.Child("healthConditions").Index(i).Child("unhealthyStatus"), h.UnhealthyStatus, []string{"True", "False"}))
		}
	}
	errs = append(errs, validateNodeChecks(p, path)...)
	if p.Soak.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("soak"), p.Soak.Duration.String(), "must not be negative"))
	}
	return errs
}

// ValidatorSelector and AllocationSelector are the parsed selectors (the
// config is validated, so they parse).
func (p *ProofConfig) ValidatorSelector() labels.Selector { return mustSelector(p.Validator.Selector) }
func (p *ProofConfig) AllocationSelector() labels.Selector {
	return mustSelector(p.AllocationCheck.Selector)
}

func mustSelector(s string) labels.Selector {
	sel, err := labels.Parse(s)
	if err != nil {
		return labels.Nothing()
	}
	return sel
}

// FactsOf picks, from Pods and Jobs listed some other way (a snapshot),
// the ones a proof reads: the validator and allocation-check Pods by the
// configured selectors, SUC's Jobs by their node label.
func (c *ProofConfig) FactsOf(pods []*corev1.Pod, jobs []*batchv1.Job) ProofFacts {
	var out ProofFacts
	v, a := c.ValidatorSelector(), c.AllocationSelector()
	for _, p := range pods {
		set := labels.Set(p.Labels)
		if v.Matches(set) && (c.Validator.Namespace == "" || p.Namespace == c.Validator.Namespace) {
			if c.Validator.controls(p) {
				out.Validators = append(out.Validators, p)
			} else {
				out.Unowned = append(out.Unowned, p)
			}
		}
		if a.Matches(set) && (c.AllocationCheck.Namespace == "" || p.Namespace == c.AllocationCheck.Namespace) {
			out.AllocationChecks = append(out.AllocationChecks, p)
		}
	}
	for _, j := range jobs {
		// Both labels, as SUC writes them and the loader reads them: the Job
		// webhook reviews every write of a Job with the plan label, so one
		// with the node label alone is not SUC's (SUCJobForged).
		if j.Labels[upgradev1.LabelNode] != "" && j.Labels[upgradev1.LabelPlan] != "" {
			out.UpgradeJobs = append(out.UpgradeJobs, j)
		}
	}
	return out
}

// OwnValidators completes the proof facts with the validator DaemonSet as
// read (ds nil: it does not exist; err: it could not be read): of the
// Pods FactsOf took for validators, only those whose controller
// reference carries its UID and whose containers run its Pod template's
// images stay; the others become unowned. The UID alone proves little: a
// Pod created with it copied, or an orphan the DaemonSet controller adopts,
// carries it, and a container's image can be changed in place by anyone
// who may update Pods in the namespace. With no DaemonSet to check against,
// none stays: a Pod that only names it could otherwise prove a node, or
// halt a rollout.
func (c *ProofConfig) OwnValidators(f *ProofFacts, ds *appsv1.DaemonSet, err error) {
	v := c.Validator
	switch {
	case err != nil:
		f.ValidatorDaemonSetUnreadable = fmt.Sprintf("cannot read the validator DaemonSet %s/%s, whose UID says which validator Pods are its own: %v", v.Namespace, v.DaemonSet, err)
		f.Validators = nil
		return
	case ds == nil:
		f.ValidatorDaemonSetUnreadable = fmt.Sprintf("the validator DaemonSet %s/%s does not exist, so no validator Pod is its own", v.Namespace, v.DaemonSet)
		f.Validators = nil
		return
	}
	f.ValidatorDaemonSet = ds
	own := f.Validators[:0:0]
	for _, p := range f.Validators {
		if metav1.IsControlledBy(p, ds) && v.templateMismatch(p, ds) == "" {
			own = append(own, p)
		} else {
			f.Unowned = append(f.Unowned, p)
		}
	}
	f.Validators = own
}

// templateMismatch says how the Pod's containers and init containers
// differ from the DaemonSet's Pod template, by container name and image
// ("" when they match). The DaemonSet controller copies the template's
// images verbatim; the template's revision hash is kept in a
// ControllerRevision, not on the DaemonSet, so images are what can be
// compared. Both may keep their init containers among the containers (the
// webhook's cache does): names are unique across the two lists.
// An image of the configured validator repository (Repository, mirrors as
// MatchesRepository allows) other than the template's still counts: while
// the GPU Operator rolls the DaemonSet to a new release, the Pods not yet
// replaced run the old one, and refusing them would leave every node
// unproven (and halt its wave) for the whole rollout. An in-place change to
// any other image is what this guards against.
func (v ValidatorSelector) templateMismatch(p *corev1.Pod, ds *appsv1.DaemonSet) string {
	want := map[string]string{}
	for _, cs := range [][]corev1.Container{ds.Spec.Template.Spec.InitContainers, ds.Spec.Template.Spec.Containers} {
		for _, c := range cs {
			want[c.Name] = c.Image
		}
	}
	have := map[string]bool{}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			img, ok := want[c.Name]
			switch {
			case !ok:
				return fmt.Sprintf("its container %s is not in the DaemonSet's Pod template", qualification.Clip(c.Name))
			case img != c.Image && !v.validatorRelease(c.Image):
				return fmt.Sprintf("its container %s runs image %s, not the DaemonSet's Pod template's %s nor a release of %s", qualification.Clip(c.Name), qualification.Clip(c.Image), qualification.Clip(img), v.Repository)
			}
			have[c.Name] = true
		}
	}
	for name := range want {
		if !have[name] {
			return fmt.Sprintf("it lacks the DaemonSet's Pod template's container %s", qualification.Clip(name))
		}
	}
	return ""
}

// validatorRelease: the image is a release of the configured validator
// repository.
func (v ValidatorSelector) validatorRelease(image string) bool {
	img, err := ParseImage(image)
	return err == nil && MatchesRepository(img, v.Repository)
}

// Prover proves nodes: the proof section of the config and what a proof
// reads besides the node and the clock. A review builds one over its facts
// and view; the soak is worked out at the review's time (Prove's now).
type Prover struct {
	Config *ProofConfig
	// DRADrivers are the configured DRA drivers (proof_dra.go).
	DRADrivers []dra.Driver
	Facts      *ProofFacts
	View       *View
	// Vendors, Records and the cluster-wide GPU Operator and DCGM exporter
	// versions say which records hold a node's check baselines
	// (nodechecks.go); read only when proof.checks names checks.
	Vendors                   []string
	Records                   map[string]RecordEntry
	GPUOperator, DCGMExporter string
}

// OwnValidatorsOn are the node's validator Pods OwnValidators kept (the
// DaemonSet's UID, its template's images): none when the
// DaemonSet could not be read, whatever facts built some other way hold.
// Proofs and halts read validators only through this.
func (pr *Prover) OwnValidatorsOn(node string) []*corev1.Pod {
	if pr.Facts.ValidatorDaemonSetUnreadable != "" {
		return nil
	}
	return pr.View.PodsOn(ValidatorPods, node)
}

// controls says whether the validator DaemonSet is the Pod's controller:
// its controller owner reference names a DaemonSet of apps by that name, in
// the configured namespace.
func (v *ValidatorSelector) controls(p *corev1.Pod) bool {
	ref := metav1.GetControllerOfNoCopy(p)
	return ref != nil && ref.Kind == "DaemonSet" && strings.HasPrefix(ref.APIVersion, "apps/") &&
		ref.Name == v.DaemonSet && p.Namespace == v.Namespace
}

// unownedValidator says why a Pod labelled as a validator was ignored; ds
// is the validator DaemonSet as read (nil: not read).
func (v *ValidatorSelector) unownedValidator(p *corev1.Pod, ds *appsv1.DaemonSet) string {
	if ds != nil && metav1.IsControlledBy(p, ds) {
		if why := v.templateMismatch(p, ds); why != "" {
			return fmt.Sprintf("Pod %s/%s carries the validator label (%s) and DaemonSet %s/%s's UID as its controller, but %s: ignored (a Pod's image can be changed in place)",
				p.Namespace, qualification.Clip(p.Name), v.Selector, v.Namespace, v.DaemonSet, why)
		}
	}
	owner := "no controller"
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		owner = fmt.Sprintf("controller %s %s", ref.Kind, qualification.Clip(ref.Name))
		if ds != nil && v.controls(p) && ref.UID != ds.UID {
			owner += fmt.Sprintf(" with UID %s, not the DaemonSet's %s", qualification.Clip(string(ref.UID)), ds.UID)
		}
	}
	return fmt.Sprintf("Pod %s/%s carries the validator label (%s) but is not controlled by DaemonSet %s/%s (it has %s): ignored",
		p.Namespace, qualification.Clip(p.Name), v.Selector, v.Namespace, v.DaemonSet, owner)
}

// NodeProof is what a proof found for one node.
type NodeProof struct {
	Node string
	// Missing lists each requirement not met, with the value seen.
	Missing []string
	// Ignored names the Pods on the node that carry the validator label but
	// that the validator DaemonSet does not control.
	Ignored []string
	// Failures are the node's check results that failed (proof.checks):
	// each halts the rollout; Checks the results that passed, with their
	// figures and baselines.
	Failures []CheckFailure
	Checks   []string
	// ReachedAt is when the node reached the tuple it runs, as far as the
	// objects' timestamps say; HeldSince when every condition last began to hold.
	ReachedAt, HeldSince time.Time
}

// Proven says whether every requirement that is on holds.
func (p NodeProof) Proven() bool { return len(p.Missing) == 0 }

// State is "proven" or "unproven", for audit annotations and metrics.
func (p NodeProof) State() string {
	if p.Proven() {
		return "proven"
	}
	return "unproven"
}

// Prove works out what holds of one node's proof at now (the soak and what
// must have happened after the node reached its tuple are read against the
// view's objects here, never kept in the view); gate's rules judge it.
// Missing facts (no validator Pod, no allocation Pod) are named, never
// taken as proof.
func (pr *Prover) Prove(n *corev1.Node, now time.Time) NodeProof {
	p := pr.Config
	out := NodeProof{Node: n.Name}
	miss := func(format string, args ...any) { out.Missing = append(out.Missing, fmt.Sprintf(format, args...)) }

	ready := condition(n, corev1.NodeReady)
	out.ReachedAt = later(out.ReachedAt, ready.LastTransitionTime.Time)
	for _, t := range n.Spec.Taints {
		if t.Key == TaintUnschedulable && t.TimeAdded != nil {
			out.ReachedAt = later(out.ReachedAt, t.TimeAdded.Time)
		}
	}
	// The node's SUC Jobs, by their node label, as the view holds them (a
	// scan of every Job per node made a wide Plan's proofs nodes x Jobs).
	for _, j := range pr.View.UpgradeJobsByNode()[n.Name] {
		out.ReachedAt = later(out.ReachedAt, JobCompletion(j))
	}
	validators := pr.OwnValidatorsOn(n.Name)
	for _, u := range pr.View.PodsOn(UnownedPods, n.Name) {
		out.Ignored = append(out.Ignored, p.Validator.unownedValidator(u, pr.Facts.ValidatorDaemonSet))
	}
	for _, v := range validators {
		out.ReachedAt = later(out.ReachedAt, podCondition(v, corev1.PodReady).LastTransitionTime.Time)
	}
	draNodes := pr.draNodeOf(n)
	out.ReachedAt = later(out.ReachedAt, pluginReadyAt(draNodes))
	out.HeldSince = out.ReachedAt

	if p.On(ProofReady) && ready.Status != corev1.ConditionTrue {
		miss("node Ready is %s (want True)", quoteOrNone(string(ready.Status)))
	}
	if p.On(ProofValidator) {
		if why := pr.Facts.ValidatorDaemonSetUnreadable; why != "" {
			miss("no validator Pod counts: %s", why)
		} else {
			pr.validatorProof(validators, miss)
		}
	}
	if p.On(ProofResources) {
		if len(draNodes) > 0 {
			pr.draResourceProof(n, draNodes, miss)
		} else {
			resourceProof(n, miss)
		}
	}
	if p.On(ProofDriverState) {
		if s, ok := n.Labels[LabelDriverUpgradeState]; ok && s != DriverUpgradeDone {
			miss("label %s=%s (want absent or %s)", LabelDriverUpgradeState, s, DriverUpgradeDone)
		}
	}
	if p.On(ProofHealth) {
		for _, h := range p.HealthConditions {
			cond := condition(n, corev1.NodeConditionType(h.Type))
			if cond.Status == h.UnhealthyStatus {
				miss("condition %s %s since %s", h.Type, cond.Status, Stamp(cond.LastTransitionTime.Time))
			} else if cond.Status != "" {
				out.HeldSince = later(out.HeldSince, cond.LastTransitionTime.Time)
			}
		}
	}
	if p.On(ProofAllocation) {
		if len(draNodes) > 0 {
			pr.draAllocationProof(n, draNodes, pr.View.PodsOn(AllocationCheckPods, n.Name), out.ReachedAt, miss)
		} else {
			pr.allocationProof(pr.View.PodsOn(AllocationCheckPods, n.Name), out.ReachedAt, miss)
		}
	}
	if len(p.Checks) > 0 {
		var missing []string
		missing, out.Failures, out.Checks = pr.nodeCheckProof(n, out.ReachedAt)
		out.Missing = append(out.Missing, missing...)
	}
	if p.On(ProofSoak) {
		if held := now.Sub(out.HeldSince); out.HeldSince.IsZero() || held < p.Soak.Duration {
			if out.HeldSince.IsZero() || held < 0 {
				held = 0
			}
			miss("soak %s of %s", held.Truncate(time.Second), p.Soak.Duration)
		}
	}
	return out
}

func (pr *Prover) validatorProof(pods []*corev1.Pod, miss func(string, ...any)) {
	v := pr.Config.Validator
	if len(pods) == 0 {
		miss("no validator Pod (namespace %s, %s) on the node", quoteOrNone(v.Namespace), v.Selector)
		return
	}
	for _, pod := range pods {
		if podCondition(pod, corev1.PodReady).Status != corev1.ConditionTrue {
			miss("validator Pod %s/%s is not Ready (phase %s)", pod.Namespace, pod.Name, quoteOrNone(string(pod.Status.Phase)))
		}
	}
}

// resourceProof: every nvidia.com/ resource in capacity is fully allocatable
// and above zero, and nvidia.com/gpu agrees with GFD's count (times its
// replicas when the GPUs are shared; MIG's single strategy advertises MIG
// devices, so the count does not apply).
func resourceProof(n *corev1.Node, miss func(string, ...any)) {
	var names []string
	for name := range n.Status.Capacity {
		if strings.HasPrefix(string(name), gpuResourcePrefix) {
			names = append(names, string(name))
		}
	}
	slices.Sort(names)
	found := len(names) > 0
	for _, name := range names {
		capQ := n.Status.Capacity[corev1.ResourceName(name)]
		alloc := n.Status.Allocatable[corev1.ResourceName(name)]
		if capQ.Sign() <= 0 || alloc.Cmp(capQ) != 0 {
			miss("allocatable %s %s of %s", name, alloc.String(), capQ.String())
		}
	}
	if !found {
		miss("no %s GPU resource in the node's capacity (device plugin not advertising)", gpuResourcePrefix)
		return
	}
	countLabel, ok := n.Labels[LabelGPUCount]
	gpu, has := n.Status.Capacity[ResourceGPU]
	if !ok || !has || n.Labels[labelMIGStrategy] == "single" {
		return
	}
	count, err := strconv.ParseInt(countLabel, 10, 64)
	replicas, rerr := int64(1), error(nil)
	if r, set := n.Labels[labelGPUReplicas]; set {
		replicas, rerr = strconv.ParseInt(r, 10, 64)
	}
	if err != nil || rerr != nil || replicas < 1 {
		miss("labels %s=%q %s=%q do not parse as counts", LabelGPUCount, countLabel, labelGPUReplicas, n.Labels[labelGPUReplicas])
		return
	}
	if gpu.Value() != count*replicas {
		miss("capacity %s %d but %s=%d (x%d replicas)", ResourceGPU, gpu.Value(), LabelGPUCount, count, replicas)
	}
}

// allocationProof: a Pod that requested a GPU started and Succeeded on the
// node after it reached its tuple.
func (pr *Prover) allocationProof(pods []*corev1.Pod, reached time.Time, miss func(string, ...any)) {
	var seen []string
	for _, pod := range pods {
		started := pod.Status.StartTime
		switch {
		case !requestsGPU(pod):
			seen = append(seen, pod.Namespace+"/"+pod.Name+" requests no GPU")
		case pod.Status.Phase != corev1.PodSucceeded:
			seen = append(seen, fmt.Sprintf("%s/%s is %s", pod.Namespace, pod.Name, quoteOrNone(string(pod.Status.Phase))))
		case started == nil || started.Time.Before(reached):
			seen = append(seen, fmt.Sprintf("%s/%s started before the node reached its tuple", pod.Namespace, pod.Name))
		default:
			return
		}
	}
	detail := "none on the node"
	if len(seen) > 0 {
		slices.Sort(seen)
		detail = nodeList(seen)
	}
	miss("no allocation check (%s) Succeeded after %s: %s", pr.Config.AllocationCheck.Selector, Stamp(reached), detail)
}

func requestsGPU(pod *corev1.Pod) bool {
	for _, ct := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		for _, l := range []corev1.ResourceList{ct.Resources.Limits, ct.Resources.Requests} {
			for name, q := range l {
				if strings.HasPrefix(string(name), gpuResourcePrefix) && q.Sign() > 0 {
					return true
				}
			}
		}
	}
	return false
}

func podsOn(pods []*corev1.Pod, node string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.Spec.NodeName == node && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func condition(n *corev1.Node, t corev1.NodeConditionType) corev1.NodeCondition {
	var out corev1.NodeCondition
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			out = c
		}
	}
	return out
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) corev1.PodCondition {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.PodCondition{}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// nodeList keeps messages short on long lists.
func nodeList(ns []string) string {
	const show = 5
	if len(ns) <= show {
		return strings.Join(ns, ",")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ns[:show], ","), len(ns)-show)
}

// sortedKeys is gate's: sort.Strings keeps it small enough to inline, so
// the keys of a small map stay on the caller's stack.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
