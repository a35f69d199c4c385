package webhook

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/dra"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
)

// The GPU Operator's resources, read as unstructured: their Go module is not
// a dependency, and fields a newer operator adds must not break decoding.
var (
	ClusterPolicyGVK = schema.GroupVersionKind{Group: "nvidia.com", Version: "v1", Kind: "ClusterPolicy"}
	NVIDIADriverGVK  = schema.GroupVersionKind{Group: "nvidia.com", Version: "v1alpha1", Kind: "NVIDIADriver"}
	// GPUClusterGVK is the GPU Operator's DRA model (v26.7, technology
	// preview): one cluster-scoped GPUCluster whose spec names the DRA
	// driver the operator deploys.
	GPUClusterGVK = schema.GroupVersionKind{Group: "nvidia.com", Version: "v1alpha1", Kind: "GPUCluster"}
	daemonSetGVK  = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}
)

var (
	pathUpgradePolicy   = field.NewPath("spec", "driver", "upgradePolicy")
	pathCPUpgradePolicy = field.NewPath("ClusterPolicy", "spec", "driver", "upgradePolicy")
)

// decideDriver reviews a CREATE, UPDATE or DELETE of a ClusterPolicy or an
// NVIDIADriver or a GPUCluster, and of a configured DRA driver's
// kubelet-plugin DaemonSet (contracts: driver.md, and dradaemonsets.md for
// the DaemonSets, which the chart sends through a webhook of their own).
func (s *Server) decideDriver(ctx context.Context, req admission.Request) (gate.Decision, error) {
	obj, old, err := decodePair(req)
	if err != nil {
		return gate.Decision{}, err
	}
	ch := gate.DriverChange{Object: obj.GetKind() + " " + namespaced(obj), Annotations: obj.GetAnnotations(), Operation: string(req.Operation), PolicyPath: pathUpgradePolicy}
	if req.Operation == admissionv1.Update {
		ch.OldAnnotations = old.GetAnnotations()
	}
	switch obj.GroupVersionKind().GroupKind() {
	case ClusterPolicyGVK.GroupKind():
		ch.NewDriver, ch.DriverPath = driverVersion(obj, "spec", "driver")
		ch.NewDCGM, ch.DCGMPath = imageVersion(obj, "spec", "dcgmExporter")
		ch.Policy = upgradePolicy(obj)
		if old != nil {
			ch.OldDriver, _ = driverVersion(old, "spec", "driver")
			ch.OldDCGM, _ = imageVersion(old, "spec", "dcgmExporter")
			ch.Reload = !sameExcept(obj, old, []string{"spec", "driver"}, "version", "upgradePolicy") || !sameExcept(obj, old, []string{"spec", "dcgmExporter"}, "version")
			ch.PolicyChanged = !sameExcept(obj, old, []string{"spec", "driver", "upgradePolicy"})
		}
		if req.Operation != admissionv1.Delete && (old == nil || !sameExcept(obj, old, []string{"spec", "validator"})) {
			ch.Validator = validatorSection(obj, old)
		}
	case NVIDIADriverGVK.GroupKind():
		ch.NewDriver, ch.DriverPath = driverVersion(obj, "spec")
		if ch.NodeSelector, err = nodeSelector(obj); err != nil {
			return gate.Decision{}, err
		}
		if old != nil && req.Operation == admissionv1.Update {
			ch.OldDriver, _ = driverVersion(old, "spec")
			if ch.OldNodeSelector, err = nodeSelector(old); err != nil {
				return gate.Decision{}, err
			}
			ch.Reload = !sameExcept(obj, old, []string{"spec"}, "version", "nodeSelector")
		}
		ch.PolicyPath = pathCPUpgradePolicy
	case GPUClusterGVK.GroupKind():
		s.gpuClusterChange(&ch, obj, old, req.Operation)
	case daemonSetGVK.GroupKind():
		d, ok := s.draDaemonSet(obj)
		if !ok {
			// Another DaemonSet of a DRA driver's namespace: it must not run
			// the driver (DRAPluginForged).
			return s.decideDRADaemonSet(ctx, req, obj, old)
		}
		if err := draPluginChange(&ch, d, obj, old, req.Operation); err != nil {
			return gate.Decision{}, err
		}
	default:
		return gate.Decision{}, fmt.Errorf("kind %s is not a GPU Operator driver resource", obj.GroupVersionKind())
	}
	return s.judgeDriverChange(ctx, req, ch)
}

// gpuClusterChange fills ch from a write of a GPUCluster: its DRA driver
// section (the GPU Operator's GPUCluster reference documents the DRA driver
// as one of its operands), with no upgrade policy.
func (s *Server) gpuClusterChange(ch *gate.DriverChange, obj, old *unstructured.Unstructured, op admissionv1.Operation) {
	ch.NewDRA, ch.DRAPath = imageVersion(obj, "spec", "draDriver")
	ch.NoPolicy = true
	d, configured := s.draDriverNamed(dra.NVIDIADriverName)
	switch op {
	case admissionv1.Update:
		ch.OldDRA, _ = imageVersion(old, "spec", "draDriver")
		if configured && deploysDRA(obj) && !deploysDRA(old) {
			// Switched on (the section added, or enabled): nothing of the
			// driver ran from this GPUCluster, whatever its old section
			// named, so it is judged as the driver's CREATE: what is left
			// of it on the nodes is read, and the records say what a node
			// with nothing left ran.
			ch.OldDRA = ""
			ch.DRAPlugin = &gate.DRAPluginCreate{Driver: d}
		}
	case admissionv1.Delete:
		// Removes the DRA driver from every node: judged as an unload.
		ch.OldDRA = ch.NewDRA
		return
	case admissionv1.Create:
		// The operator then runs the NVIDIA DRA driver's kubelet plugin:
		// what is left of it on a node (orphaned Pods, slices) is read
		// as on its DaemonSet's CREATE, without the selector it will have.
		if configured {
			ch.DRAPlugin = &gate.DRAPluginCreate{Driver: d}
		}
	}
	// Rolling the DRA driver out (created, switched on, a new version)
	// with no driver configured to read it by: fail closed.
	if !configured && deploysDRA(obj) && (op == admissionv1.Create || !deploysDRA(old) || ch.OldDRA != ch.NewDRA) {
		ch.DRAUnconfigured = dra.NVIDIADriverName
	}
}

// draPluginChange fills ch from a write of driver d's kubelet-plugin
// DaemonSet: draDaemonSetChange, the nodes it reaches, and no upgrade
// policy (the DaemonSet rolls itself out).
func draPluginChange(ch *gate.DriverChange, d dra.Driver, obj, old *unstructured.Unstructured, op admissionv1.Operation) error {
	if err := draDaemonSetChange(ch, d, obj, old, op); err != nil {
		return err
	}
	var err error
	ch.NodeSelector, err = podNodeSelector(obj)
	ch.NoPolicy = true
	return err
}

// judgeDriverChange judges a driver-path change on the cluster's facts,
// the operator's rollout and the reached nodes' holders.
func (s *Server) judgeDriverChange(ctx context.Context, req admission.Request, ch gate.DriverChange) (gate.Decision, error) {
	cl, err := s.Facts.Cluster(ctx)
	if err != nil {
		return gate.FactsUnavailable(ch.Object, err), nil
	}
	if ch.PolicyPath == pathCPUpgradePolicy && req.Operation != admissionv1.Delete {
		// The operator applies the ClusterPolicy's upgrade policy to
		// NVIDIADriver rollouts too.
		ch.Policy, ch.PolicyErr = s.clusterPolicy(ctx)
	}
	r := gate.PrepareDriver(s.Config, cl, gate.DriverRequest{Change: ch, User: userOf(req), Now: s.now()})
	checked, holders, herr, err := s.operatorAndHolders(ctx, r, s.Facts.RequestHolders)
	if err != nil {
		return gate.FactsUnavailable(ch.Object, err), nil
	}
	d := r.Decide(holders, herr)
	if checked {
		notePrecondition(preconditionOperatorRollout, d, gate.CodeOperatorRolloutUnfinished)
	}
	return d, nil
}

// operatorAndHolders reads, at once (each is a round trip), the GPU
// Operator's own rollout live for a review that judges it
// (OperatorRolloutUnfinished: a cache a moment behind could miss a rollout
// that just started) and the review's nodes' holders with list. checked
// says whether the review judges the operator's rollout; err is a read's
// panic (the review fails closed).
func (s *Server) operatorAndHolders(ctx context.Context, r *gate.DriverReview, list func(context.Context, []string) (map[string][]gate.Holder, error)) (checked bool, holders map[string][]gate.Holder, herr, err error) {
	checked = r.NeedsOperatorRollout()
	var operator *gate.OperatorRollout
	err = concurrently(
		func() {
			if checked {
				operator = loader.ReadOperatorRollout(ctx, s.Facts.Live, s.Config)
			}
		},
		func() { holders, herr = list(ctx, r.HolderNodes()) },
	)
	if checked && err == nil {
		r.SetOperatorRollout(operator)
	}
	return checked, holders, herr, err
}

// decodePair returns the object under review (the stored one for a DELETE)
// and the object before (nil for a CREATE; for a DELETE, the same).
func decodePair(req admission.Request) (obj, old *unstructured.Unstructured, err error) {
	decode := func(raw []byte, what string) (*unstructured.Unstructured, error) {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return u, nil
	}
	switch req.Operation {
	case admissionv1.Delete:
		obj, err = decode(req.OldObject.Raw, "oldObject")
		return obj, obj, err
	case admissionv1.Create:
		obj, err = decode(req.Object.Raw, "object")
		return obj, nil, err
	}
	if obj, err = decode(req.Object.Raw, "object"); err != nil {
		return nil, nil, err
	}
	if old, err = decode(req.OldObject.Raw, "oldObject"); err != nil {
		return nil, nil, err
	}
	if obj.GroupVersionKind().GroupKind() != old.GroupVersionKind().GroupKind() {
		return nil, nil, fmt.Errorf("object is %s but oldObject is %s", obj.GroupVersionKind(), old.GroupVersionKind())
	}
	return obj, old, nil
}

// sameExcept says whether the maps at path are equal once the named keys
// are left out: any other field under a driver spec (repository, image,
// kernelModuleType, usePrecompiled, env, a field a newer operator adds)
// changes the driver DaemonSet and so reloads the driver.
func sameExcept(a, b *unstructured.Unstructured, path []string, except ...string) bool {
	ma, _, _ := unstructured.NestedFieldNoCopy(a.Object, path...)
	mb, _, _ := unstructured.NestedFieldNoCopy(b.Object, path...)
	strip := func(v any) any {
		m, ok := v.(map[string]any)
		if !ok || len(except) == 0 {
			return v
		}
		out := make(map[string]any, len(m))
		for k, x := range m {
			out[k] = x
		}
		for _, k := range except {
			delete(out, k)
		}
		return out
	}
	return equality.Semantic.DeepEqual(strip(ma), strip(mb))
}

// imageVersion is the version an operand section rolls out: its version
// field, else the tag (or digest) of its image, which the operator then uses
// as the whole reference. The path says which field it came from.
func imageVersion(u *unstructured.Unstructured, section ...string) (string, *field.Path) {
	v, _, p := operandVersion(u, section...)
	return v, p
}

func operandVersion(u *unstructured.Unstructured, section ...string) (v string, fromImage bool, p *field.Path) {
	p = field.NewPath(section[0], section[1:]...)
	if v := str(u, append(section, "version")...); v != "" {
		return v, false, p.Child("version")
	}
	image := str(u, append(section, "image")...)
	if v, ok := gate.ImageVersion(image); ok {
		return v, true, p.Child("image")
	}
	if strings.ContainsAny(image, ":@") {
		// A reference the gate cannot read is its own (unparsable) version:
		// VersionInvalid, never "unchanged".
		return image, false, p.Child("image")
	}
	return "", false, p.Child("version")
}

// driverVersion is imageVersion for a driver, whose image tags carry the OS
// ("580.130.00-ubuntu24.04"): only the version part counts.
func driverVersion(u *unstructured.Unstructured, section ...string) (string, *field.Path) {
	v, fromImage, p := operandVersion(u, section...)
	if fromImage && !strings.HasPrefix(v, "sha256:") {
		v, _, _ = strings.Cut(v, "-")
	}
	return v, p
}

// validatorSection reads a ClusterPolicy's spec.validator (old: before an
// UPDATE, nil on a CREATE). The image is composed as the GPU Operator's
// ImagePath does: repository/image:version (@version for a digest), image
// alone when neither repository nor version is set, none (the operator's
// default) when nothing is. WITH_WORKLOAD (NVIDIA's validator reads it as
// --with-workload) counts as switched off only on an UPDATE that sets it
// false where it was not: NVIDIA's own chart creates the ClusterPolicy with
// the plugin's WITH_WORKLOAD false.
func validatorSection(obj, old *unstructured.Unstructured) *gate.ValidatorSection {
	sec := field.NewPath("spec", "validator")
	out := &gate.ValidatorSection{}
	repo, image, version := str(obj, "spec", "validator", "repository"), str(obj, "spec", "validator", "image"), str(obj, "spec", "validator", "version")
	switch {
	case repo == "" && version == "":
		out.Image, out.ImagePath = image, sec.Child("image")
	case strings.HasPrefix(version, "sha256:"):
		out.Image, out.ImagePath = repo+"/"+image+"@"+version, sec.Child("version")
	default:
		out.Image, out.ImagePath = repo+"/"+image+":"+version, sec.Child("version")
	}
	if old == nil {
		return out
	}
	// The section's own env and each validation's (plugin, cuda, driver...).
	lists := [][]string{{"env"}}
	if m, ok, _ := unstructured.NestedMap(obj.Object, "spec", "validator"); ok {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if _, isMap := m[k].(map[string]any); isMap {
				lists = append(lists, []string{k, "env"})
			}
		}
	}
	for _, l := range lists {
		path := append([]string{"spec", "validator"}, l...)
		was := workloadOff(old, path)
		for i, off := range workloadOff(obj, path) {
			if off && !slices.Contains(was, true) {
				out.WorkloadOff = append(out.WorkloadOff, field.NewPath(path[0], path[1:]...).Index(i).Child("value"))
			}
		}
	}
	return out
}

// workloadOff says, per entry of the env list at path, whether it sets
// WITH_WORKLOAD false.
func workloadOff(u *unstructured.Unstructured, path []string) []bool {
	env, _, _ := unstructured.NestedSlice(u.Object, path...)
	out := make([]bool, len(env))
	for i, e := range env {
		m, _ := e.(map[string]any)
		name, _ := m["name"].(string)
		value, _ := m["value"].(string)
		b, err := strconv.ParseBool(value)
		out[i] = name == "WITH_WORKLOAD" && err == nil && !b
	}
	return out
}

func namespaced(u *unstructured.Unstructured) string {
	if u.GetNamespace() != "" {
		return u.GetNamespace() + "/" + u.GetName()
	}
	return u.GetName()
}

// draDaemonSet says whether the DaemonSet is a configured DRA driver's
// kubelet plugin (config draDrivers); the chart's match condition sends no
// other, this is the same check on the server.
func (s *Server) draDaemonSet(u *unstructured.Unstructured) (dra.Driver, bool) {
	for _, d := range s.Config.DRADrivers {
		if u.GetNamespace() == d.Namespace && u.GetName() == d.DaemonSet {
			return d, true
		}
	}
	return dra.Driver{}, false
}

// draDriverNamed is the configured DRA driver (config draDrivers) of that
// name in ResourceSlices.
func (s *Server) draDriverNamed(name string) (dra.Driver, bool) {
	i := slices.IndexFunc(s.Config.DRADrivers, func(d dra.Driver) bool { return d.Name == name })
	if i < 0 {
		return dra.Driver{}, false
	}
	return s.Config.DRADrivers[i], true
}

// deploysDRA: the GPUCluster has the operator run the DRA driver: its
// spec.draDriver section is there and not switched off (enabled: false, the
// operand convention of ClusterPolicy sections). A section the gate cannot
// read counts as deployed.
func deploysDRA(u *unstructured.Unstructured) bool {
	if u == nil {
		return false
	}
	sec, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "draDriver")
	if !found || sec == nil {
		return false
	}
	m, _ := sec.(map[string]any)
	on, isBool := m["enabled"].(bool)
	return !isBool || on
}

var pathPodContainers = field.NewPath("spec", "template", "spec", "containers")

// draVersion is the DRA driver release the kubelet-plugin DaemonSet runs
// (gate.DRADriverVersion); the path is its first container's image.
func draVersion(u *unstructured.Unstructured) (string, *field.Path) {
	images := containerImages(u)
	if len(images) == 0 {
		return "", pathPodContainers
	}
	v, _ := gate.DRADriverVersion(images, u.GetLabels()[gate.LabelVersion])
	return v, pathPodContainers.Index(0).Child("image")
}

// draDaemonSetChange fills ch from the DRA kubelet plugin's DaemonSet: its
// version before and after, and a reload when its Pod template changes at
// the same version (another repository, a new digest under the same
// version label, another command or env, a rollout restart): the plugin
// restarted on every node, judged as a restart of the same version, as a
// ClusterPolicy's repository change is. A DELETE removes the driver from
// every node it reaches (an unload, as a GPUCluster's); a CREATE moves the
// nodes from what they still run of driver d (gate.DRAPluginCreate), which
// the new DaemonSet's selector tells.
func draDaemonSetChange(ch *gate.DriverChange, d dra.Driver, obj, old *unstructured.Unstructured, op admissionv1.Operation) error {
	ch.NewDRA, ch.DRAPath = draVersion(obj)
	switch op {
	case admissionv1.Update:
		ch.OldDRA, _ = draVersion(old)
		// Any change of the Pod template (an image, command, args, env,
		// volumes, securityContext, kubectl rollout restart's annotation,
		// its scheduling too) makes the DaemonSet controller replace the
		// plugin Pod on every node it keeps: a restart of that version.
		ch.Reload = ch.OldDRA == ch.NewDRA && !sameExcept(obj, old, []string{"spec", "template"})
		// Its scheduling before and after: the nodes it stops selecting
		// lose the driver (gate.DRAScheduling).
		var sched gate.DRAScheduling
		var err error
		if sched.Old, err = typedDaemonSet(old, "oldObject spec.template.spec (nodeSelector, affinity)"); err != nil {
			return err
		}
		if sched.New, err = typedDaemonSet(obj, "object spec.template.spec (nodeSelector, affinity)"); err != nil {
			return err
		}
		ch.DRAScheduling = &sched
	case admissionv1.Delete:
		ch.OldDRA = ch.NewDRA
	case admissionv1.Create:
		var ls metav1.LabelSelector
		raw, _, err := unstructured.NestedMap(obj.Object, "spec", "selector")
		if err == nil {
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &ls)
		}
		sel, serr := metav1.LabelSelectorAsSelector(&ls)
		if err = errors.Join(err, serr); err != nil {
			return fmt.Errorf("spec.selector: %w", err)
		}
		ch.DRAPlugin = &gate.DRAPluginCreate{Driver: d, Pods: sel}
	}
	return nil
}

// containerImages are the images of a workload's Pod template's
// containers, in order.
func containerImages(u *unstructured.Unstructured) []string { return podImages(u, "containers") }

// podImages are the images of one list of a workload's Pod template
// (containers, initContainers), in order.
func podImages(u *unstructured.Unstructured, list string) []string {
	cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", list)
	var images []string
	for _, c := range cs {
		m, _ := c.(map[string]any)
		image, _ := m["image"].(string)
		images = append(images, image)
	}
	return images
}

// podNodeSelector is the DaemonSet's Pod nodeSelector: the nodes it can
// reach (its affinity is left out, so more nodes count, never fewer).
func podNodeSelector(u *unstructured.Unstructured) (map[string]string, error) {
	sel, _, err := unstructured.NestedStringMap(u.Object, "spec", "template", "spec", "nodeSelector")
	if err != nil {
		return nil, fmt.Errorf("spec.template.spec.nodeSelector: %w", err)
	}
	return sel, nil // nil: every GPU node
}

func nodeSelector(u *unstructured.Unstructured) (map[string]string, error) {
	sel, _, err := unstructured.NestedStringMap(u.Object, "spec", "nodeSelector")
	if err != nil {
		return nil, fmt.Errorf("spec.nodeSelector: %w", err)
	}
	if sel == nil {
		sel = map[string]string{} // no selector: every GPU node
	}
	return sel, nil
}

// clusterPolicy reads the upgrade policy live: driver changes are rare, and
// a cache of the operator's CRDs would make the gate depend on them being
// installed. A read failure is FactsMissing (naming the read); no
// ClusterPolicy at all leaves the policy absent, which denies.
func (s *Server) clusterPolicy(ctx context.Context) (gate.DriverUpgradePolicy, error) {
	cp, err := s.liveClusterPolicy(ctx)
	if err != nil || cp == nil {
		return gate.DriverUpgradePolicy{}, err
	}
	return upgradePolicy(cp), nil
}

// liveClusterPolicy lists the ClusterPolicy (the operator uses the one
// there is); nil when there is none.
func (s *Server) liveClusterPolicy(ctx context.Context) (*unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(ClusterPolicyGVK.GroupVersion().WithKind("ClusterPolicyList"))
	if err := s.Facts.Live.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list clusterpolicies.nvidia.com: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return &list.Items[0], nil
}

func upgradePolicy(cp *unstructured.Unstructured) gate.DriverUpgradePolicy {
	p, found, err := unstructured.NestedMap(cp.Object, "spec", "driver", "upgradePolicy")
	if err != nil || !found {
		return gate.DriverUpgradePolicy{}
	}
	auto, _, _ := unstructured.NestedBool(p, "autoUpgrade")
	maxPar, _, _ := unstructured.NestedInt64(p, "maxParallelUpgrades")
	drain, _, _ := unstructured.NestedBool(p, "drain", "enable")
	return gate.DriverUpgradePolicy{Present: true, AutoUpgrade: auto, MaxParallelUpgrades: maxPar, DrainEnabled: drain}
}

func str(u *unstructured.Unstructured, path ...string) string {
	v, _, _ := unstructured.NestedString(u.Object, path...)
	return v
}
