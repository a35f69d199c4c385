package chart

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"path"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/precondition"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// expect is what one values variant must render. The safety properties hold
// for every variant; these are the parts the values choose.
type expect struct {
	namespace          string
	replicas           int32
	nodePolicy         admissionregistrationv1.FailurePolicyType
	timeout            int32
	sucNamespaces      []string
	gpuVendors         []string
	exemptions         []gate.Exemption // the Node exemptions not narrowed by namespaces or matchLabels
	taintControllers   []string         // webhook.nodeTaintControllers: their taint writes never sent to the Node webhook
	sucServiceAccounts []string         // whose completion writes the completions webhook reviews
	ownCA              bool
	url                string   // webhook.url: the API server calls it instead of the Service
	extraDNSNames      []string // tls.extraDNSNames
	ipAddresses        []string // tls.ipAddresses
	antiAffinity       bool
	zoneSpread         bool
	priorityClassName  string
	nfd                bool
	networkPolicy      bool
	// webhookFrom: the CIDRs the NetworkPolicy admits to the webhook port.
	webhookFrom []string
	// clientCA: the ConfigMap holding the API server's client CA, "" none.
	clientCA       string
	serviceMonitor bool
	// prometheusRule: the alerts rendered; dashboard: the namespace of the
	// dashboard ConfigMap, "" for none.
	prometheusRule bool
	dashboard      string
	probeHook      bool
	deleteHook     bool
	// gpuOperator / dcgm: namespace and name the Roles must name.
	gpuOperator, dcgm [2]string
	// creationGates: the objects the creation-gate Roles must name, and
	// nothing more.
	creationGates []gate.CreationGate
	// dra: config.draDrivers is set, so the webhook reads ResourceSlices
	// and ResourceClaims, and the DRA plugin webhook is rendered for the
	// kubelet-plugin DaemonSets draPlugins (namespace/name) in
	// draNamespaces.
	dra                       bool
	draPlugins, draNamespaces []string
	// draControllers: the drivers' configured controllers, each as
	// <namespace>/<username>, the only writers the DRA webhooks leave out
	// in their namespaces.
	draControllers []string
	// draClaimsNamespace: config.proof.allocationCheck.namespace, where the
	// ResourceClaims are read ("": cluster-wide).
	draClaimsNamespace string
	// gpuOperatorServiceAccounts: the only writers the DRA plugin webhook
	// does not send to the gate.
	gpuOperatorServiceAccounts []string
	// checksNamespace: with config.proof.checks, the allocation checks'
	// namespace, whose Jobs are read.
	checksNamespace string
	// preconditions: the CEL preconditions whose resources the
	// -preconditions Roles and ClusterRole must grant list/watch on, and
	// nothing more.
	preconditions []precondition.Precondition
}

// rendered indexes one render by kind.
type rendered struct {
	objs []Object
	e    expect
}

func only[T any](xs []T, what string, problems *[]string) T {
	var zero T
	if len(xs) != 1 {
		*problems = append(*problems, fmt.Sprintf("expected exactly one %s, rendered %d", what, len(xs)))
		if len(xs) == 0 {
			return zero
		}
	}
	return xs[0]
}

// check runs every safety check; each returns the problems it found.
func (r *rendered) check() []string {
	var problems []string
	for _, c := range []func() []string{
		r.checkNamespaces, r.checkDeployment, r.checkPodSecurity, r.checkPDB, r.checkService,
		r.checkRBAC, r.checkWebhooks, r.checkNodeMatchConditions, r.checkTLS, r.checkNodeFeatureRule,
		r.checkNetworkPolicy, r.checkServiceMonitor, r.checkObservability, r.checkHooks,
	} {
		problems = append(problems, c()...)
	}
	return problems
}

var clusterScoped = []string{"ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration", "NodeFeatureRule"}

func kindOf(o Object) string {
	if k := o.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	return fmt.Sprintf("%T", o.Object)
}

// checkNamespaces: kubectl apply of deploy/manifests relies on every
// namespaced object naming its namespace.
func (r *rendered) checkNamespaces() []string {
	var problems []string
	others := []string{r.e.gpuOperator[0], r.e.dcgm[0]}
	for _, o := range r.objs {
		kind := kindOf(o)
		ns := o.GetNamespace()
		switch {
		case slices.Contains(clusterScoped, kind):
			if ns != "" {
				problems = append(problems, fmt.Sprintf("%s %s is cluster-scoped but has namespace %q", kind, o.GetName(), ns))
			}
		case ns == r.e.namespace:
		case (kind == "Role" || kind == "RoleBinding") && slices.Contains(others, ns):
		case (kind == "Role" || kind == "RoleBinding") && strings.HasSuffix(o.GetName(), "-suc-jobs") && slices.Contains(r.e.sucNamespaces, ns):
		case (kind == "Role" || kind == "RoleBinding") && strings.HasSuffix(o.GetName(), "-creation-gates") &&
			slices.ContainsFunc(r.e.creationGates, func(g gate.CreationGate) bool { return g.Namespace == ns }):
		case (kind == "Role" || kind == "RoleBinding") && strings.HasSuffix(o.GetName(), "-preconditions") &&
			slices.ContainsFunc(r.e.preconditions, func(p precondition.Precondition) bool { return p.CEL != nil && p.CEL.Namespace == ns }):
		case (kind == "Role" || kind == "RoleBinding") && strings.HasSuffix(o.GetName(), "-events") && (slices.Contains(r.e.sucNamespaces, ns) || ns == metav1.NamespaceDefault):
		case (kind == "Role" || kind == "RoleBinding") && strings.HasSuffix(o.GetName(), "-checks") && ns == r.e.checksNamespace && ns != "":
		case (kind == "Role" || kind == "RoleBinding") && strings.HasSuffix(o.GetName(), "-dra") && r.e.dra &&
			(slices.Contains(r.e.draNamespaces, ns) || ns == r.e.draClaimsNamespace):
		case kind == "ConfigMap" && strings.HasSuffix(o.GetName(), "-dashboard") && ns == r.e.dashboard:
		default:
			problems = append(problems, fmt.Sprintf("%s %s: namespace %q, expected the release namespace %q", kind, o.GetName(), ns, r.e.namespace))
		}
	}
	return problems
}

func (r *rendered) deployment(problems *[]string) *appsv1.Deployment {
	return only(Find[*appsv1.Deployment](r.objs), "Deployment", problems)
}

func container(spec *corev1.PodSpec, name string) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	return nil
}

// flag returns the value of --name=value in args; the last one wins, as
// in pflag.
func flag(args []string, name string) (value string, found bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			value, found = v, true
		}
	}
	return value, found
}

func portNumber(c *corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	return -1
}

func (r *rendered) checkDeployment() []string {
	var problems []string
	d := r.deployment(&problems)
	if d == nil {
		return problems
	}
	spec := &d.Spec.Template.Spec
	if d.Spec.Replicas == nil || *d.Spec.Replicas != r.e.replicas {
		problems = append(problems, fmt.Sprintf("Deployment replicas %v, expected %d", d.Spec.Replicas, r.e.replicas))
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		problems = append(problems, "Deployment rolling update must keep every replica until its successor is ready (maxUnavailable 0)")
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		problems = append(problems, "Deployment selector does not match its pod template")
	}
	if spec.PriorityClassName != r.e.priorityClassName {
		problems = append(problems, fmt.Sprintf("priorityClassName %q, expected %q", spec.PriorityClassName, r.e.priorityClassName))
	}
	hostSpread := spec.Affinity != nil && spec.Affinity.PodAntiAffinity != nil &&
		len(spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 1 &&
		spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey == corev1.LabelHostname
	if hostSpread {
		term := spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
		s, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		hostSpread = err == nil && !s.Empty() && s.Matches(labels.Set(d.Spec.Template.Labels))
	}
	if hostSpread != r.e.antiAffinity {
		problems = append(problems, fmt.Sprintf("preferred pod anti-affinity on %s selecting the webhook's pods: %v, expected %v", corev1.LabelHostname, hostSpread, r.e.antiAffinity))
	}
	zone := false
	for _, c := range spec.TopologySpreadConstraints {
		s, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if c.TopologyKey == corev1.LabelTopologyZone && c.MaxSkew == 1 && err == nil && !s.Empty() && s.Matches(labels.Set(d.Spec.Template.Labels)) {
			zone = true
		}
	}
	if zone != r.e.zoneSpread {
		problems = append(problems, fmt.Sprintf("zone spread: %v, expected %v", zone, r.e.zoneSpread))
	}
	c := container(spec, "webhook")
	if c == nil {
		return append(problems, "Deployment has no container named webhook")
	}
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		problems = append(problems, fmt.Sprintf("webhook args %v do not start with serve", c.Args))
	}
	probeAddr, _ := flag(c.Args, "health-probe-bind-address")
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			problems = append(problems, fmt.Sprintf("%s probe: want an httpGet on %s", p.name, p.path))
			continue
		}
		if p.probe.HTTPGet.Path != p.path || portNumber(c, p.probe.HTTPGet.Port) != 8081 || probeAddr != ":8081" {
			problems = append(problems, fmt.Sprintf("%s probe: httpGet %s port %s (serve --health-probe-bind-address=%s), want %s on 8081",
				p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), probeAddr, p.path))
		}
		if p.probe.TimeoutSeconds < 1 || p.probe.FailureThreshold < 2 {
			problems = append(problems, fmt.Sprintf("%s probe: timeout %ds and failure threshold %d flap on busy nodes", p.name, p.probe.TimeoutSeconds, p.probe.FailureThreshold))
		}
	}
	if port, _ := flag(c.Args, "port"); port != fmt.Sprint(portNumber(c, intstr.FromString("webhook"))) {
		problems = append(problems, fmt.Sprintf("serve --port=%s is not the container port named webhook", port))
	}
	// The config file comes from the rendered ConfigMap, the TLS pair from the Secret.
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	cfgPath, _ := flag(c.Args, "config")
	certDir, _ := flag(c.Args, "cert-dir")
	var cfgVolume, tlsVolume *corev1.Volume
	for name, mp := range mounts {
		v := vols[name]
		if mp == path.Dir(cfgPath) {
			cfgVolume = &v
		}
		if mp == certDir {
			tlsVolume = &v
		}
	}
	cms := map[string]bool{}
	for _, cm := range Find[*corev1.ConfigMap](r.objs) {
		cms[cm.Name] = true
	}
	if cfgVolume == nil || cfgVolume.ConfigMap == nil || !cms[cfgVolume.ConfigMap.Name] {
		problems = append(problems, fmt.Sprintf("--config=%s is not in a volume from a rendered ConfigMap", cfgPath))
	}
	if tlsVolume == nil || tlsVolume.Secret == nil || tlsVolume.Secret.SecretName != r.tlsSecretName() {
		problems = append(problems, fmt.Sprintf("--cert-dir=%s is not the TLS Secret %s", certDir, r.tlsSecretName()))
	}
	if spec.ServiceAccountName != r.serviceAccount() {
		problems = append(problems, fmt.Sprintf("pods run as %q, not the chart's ServiceAccount %q", spec.ServiceAccountName, r.serviceAccount()))
	}
	// --client-ca names a file of the client CA ConfigMap's volume.
	clientCA, set := flag(c.Args, "client-ca")
	switch {
	case set != (r.e.clientCA != ""):
		problems = append(problems, fmt.Sprintf("serve --client-ca set %v, expected %v", set, r.e.clientCA != ""))
	case set:
		v, ok := vols[nameOfMount(mounts, path.Dir(clientCA))]
		if !ok || v.ConfigMap == nil || v.ConfigMap.Name != r.e.clientCA {
			problems = append(problems, fmt.Sprintf("--client-ca=%s is not in a volume of ConfigMap %s", clientCA, r.e.clientCA))
		}
	}
	return problems
}

func nameOfMount(mounts map[string]string, dir string) string {
	for name, mp := range mounts {
		if mp == dir {
			return name
		}
	}
	return ""
}

// podSpecs are the webhook's pods and every hook Job's pods.
func (r *rendered) podSpecs() map[string]*corev1.PodSpec {
	specs := map[string]*corev1.PodSpec{}
	for _, d := range Find[*appsv1.Deployment](r.objs) {
		specs["Deployment "+d.Name] = &d.Spec.Template.Spec
	}
	for _, j := range Find[*batchv1.Job](r.objs) {
		specs["Job "+j.Name] = &j.Spec.Template.Spec
	}
	return specs
}

// checkPodSecurity: the restricted Pod Security Standard, and resources.
func (r *rendered) checkPodSecurity() []string {
	var problems []string
	for what, spec := range r.podSpecs() {
		bad := func(f string, a ...any) { problems = append(problems, what+": "+fmt.Sprintf(f, a...)) }
		psc := spec.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
			bad("pod securityContext.runAsNonRoot must be true")
		}
		if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			bad("pod seccompProfile must be RuntimeDefault")
		}
		if psc != nil && psc.RunAsUser != nil && *psc.RunAsUser == 0 {
			bad("pod runs as uid 0")
		}
		if spec.HostNetwork || spec.HostPID || spec.HostIPC {
			bad("host namespaces")
		}
		for _, v := range spec.Volumes {
			if v.HostPath != nil {
				bad("hostPath volume %s", v.Name)
			}
		}
		for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
			sc := c.SecurityContext
			if sc == nil {
				bad("container %s has no securityContext", c.Name)
				continue
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				bad("container %s: allowPrivilegeEscalation must be false", c.Name)
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				bad("container %s: readOnlyRootFilesystem must be true", c.Name)
			}
			if sc.Privileged != nil && *sc.Privileged {
				bad("container %s is privileged", c.Name)
			}
			if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
				bad("container %s: capabilities must drop ALL and add none", c.Name)
			}
			if sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot || sc.RunAsUser != nil && *sc.RunAsUser == 0 {
				bad("container %s may run as root", c.Name)
			}
			if sc.SeccompProfile != nil && sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				bad("container %s: seccompProfile %s", c.Name, sc.SeccompProfile.Type)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				bad("container %s: needs cpu and memory requests and a memory limit", c.Name)
			}
			if c.Name == "webhook" && !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
				return e.Name == "GUG_MEMORY_LIMIT" && e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil && e.ValueFrom.ResourceFieldRef.Resource == "limits.memory"
			}) {
				bad("container webhook: GUG_MEMORY_LIMIT from resourceFieldRef limits.memory (the Go memory limit)")
			}
		}
	}
	return problems
}

// checkPDB: a PodDisruptionBudget that never blocks a drain.
func (r *rendered) checkPDB() []string {
	var problems []string
	pdb := only(Find[*policyv1.PodDisruptionBudget](r.objs), "PodDisruptionBudget", &problems)
	d := r.deployment(&problems)
	if pdb == nil || d == nil {
		return problems
	}
	if pdb.Spec.MinAvailable != nil {
		problems = append(problems, fmt.Sprintf("PDB minAvailable %s can block drains; use maxUnavailable", pdb.Spec.MinAvailable.String()))
	}
	if mu := pdb.Spec.MaxUnavailable; mu == nil || mu.Type != intstr.Int || mu.IntVal < 1 {
		problems = append(problems, fmt.Sprintf("PDB maxUnavailable %v: a drain must always be allowed to evict one replica (an integer >= 1)", mu))
	}
	if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
		problems = append(problems, "PDB unhealthyPodEvictionPolicy must be AlwaysAllow, so a crash-looping replica never blocks a drain")
	}
	if s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || s.Empty() || !s.Matches(labels.Set(d.Spec.Template.Labels)) {
		problems = append(problems, "PDB selector does not select the webhook's pods")
	}
	return problems
}

func (r *rendered) webhookService(problems *[]string) *corev1.Service {
	d := r.deployment(problems)
	var out []*corev1.Service
	for _, s := range Find[*corev1.Service](r.objs) {
		for _, p := range s.Spec.Ports {
			if p.Name == "webhook" {
				out = append(out, s)
			}
		}
	}
	s := only(out, "Service with a port named webhook", problems)
	if s != nil && d != nil && !labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
		*problems = append(*problems, "webhook Service does not select the webhook's pods")
	}
	return s
}

func (r *rendered) checkService() []string {
	var problems []string
	s := r.webhookService(&problems)
	d := r.deployment(&problems)
	if s == nil || d == nil {
		return problems
	}
	c := container(&d.Spec.Template.Spec, "webhook")
	for _, p := range s.Spec.Ports {
		if p.Name == "webhook" && (c == nil || portNumber(c, p.TargetPort) != 9443) {
			problems = append(problems, fmt.Sprintf("webhook Service targetPort %s is not the container's webhook port 9443", p.TargetPort.String()))
		}
	}
	return problems
}

func (r *rendered) serviceAccount() string {
	var problems []string
	if sa := only(r.webhookServiceAccounts(), "webhook ServiceAccount", &problems); sa != nil {
		return sa.Name
	}
	return ""
}

// webhookServiceAccounts are the ServiceAccounts that are not hook objects.
func (r *rendered) webhookServiceAccounts() []*corev1.ServiceAccount {
	var out []*corev1.ServiceAccount
	for _, sa := range Find[*corev1.ServiceAccount](r.objs) {
		if !isHook(sa) {
			out = append(out, sa)
		}
	}
	return out
}

func isHook(o interface{ GetAnnotations() map[string]string }) bool {
	return o.GetAnnotations()["helm.sh/hook"] != ""
}

// checkRBAC: the webhook's ServiceAccount reads, never writes; no Secrets;
// ConfigMaps only in its own namespace; workloads only by name. A hook's RBAC
// may only delete the webhook configuration, by name.
func (r *rendered) checkRBAC() []string {
	var problems []string
	sa := r.serviceAccount()
	vwcName := ""
	if v := Find[*admissionregistrationv1.ValidatingWebhookConfiguration](r.objs); len(v) == 1 {
		vwcName = v[0].Name
	}
	clusterRoles := map[string]*rbacv1.ClusterRole{}
	for _, cr := range Find[*rbacv1.ClusterRole](r.objs) {
		clusterRoles[cr.Name] = cr
	}
	roles := map[string]*rbacv1.Role{}
	for _, ro := range Find[*rbacv1.Role](r.objs) {
		roles[ro.Namespace+"/"+ro.Name] = ro
	}
	type grant struct {
		where     string // "cluster" or a namespace
		rule      rbacv1.PolicyRule
		hook, own bool
		// gate: a creation-gate Role's rule (read one named object each).
		gate bool
		// pre: a -preconditions Role's or ClusterRole's rule (list/watch
		// one configured resource).
		pre bool
	}
	var grants []grant
	bindingSubjects := func(what string, subjects []rbacv1.Subject, hook bool) bool {
		own := false
		for _, s := range subjects {
			switch {
			case s.Kind == rbacv1.ServiceAccountKind && s.Name == sa && s.Namespace == r.e.namespace && !hook:
				own = true
			case s.Kind == rbacv1.ServiceAccountKind && hook && s.Namespace == r.e.namespace:
			default:
				problems = append(problems, fmt.Sprintf("%s binds %s %s/%s: only the chart's own ServiceAccounts may be bound", what, s.Kind, s.Namespace, s.Name))
			}
		}
		return own
	}
	bound := map[string]bool{}
	for _, b := range Find[*rbacv1.ClusterRoleBinding](r.objs) {
		own := bindingSubjects("ClusterRoleBinding "+b.Name, b.Subjects, isHook(b))
		cr := clusterRoles[b.RoleRef.Name]
		if b.RoleRef.Kind != "ClusterRole" || cr == nil {
			problems = append(problems, fmt.Sprintf("ClusterRoleBinding %s refers to %s %s, which the chart does not render", b.Name, b.RoleRef.Kind, b.RoleRef.Name))
			continue
		}
		bound["ClusterRole/"+cr.Name] = true
		for _, rule := range cr.Rules {
			grants = append(grants, grant{"cluster", rule, isHook(cr), own, false, strings.HasSuffix(cr.Name, "-preconditions")})
		}
	}
	for _, b := range Find[*rbacv1.RoleBinding](r.objs) {
		own := bindingSubjects("RoleBinding "+b.Namespace+"/"+b.Name, b.Subjects, isHook(b))
		switch {
		case b.RoleRef.Kind == "Role" && roles[b.Namespace+"/"+b.RoleRef.Name] != nil:
			ro := roles[b.Namespace+"/"+b.RoleRef.Name]
			bound["Role/"+ro.Namespace+"/"+ro.Name] = true
			for _, rule := range ro.Rules {
				grants = append(grants, grant{b.Namespace, rule, isHook(ro), own, strings.HasSuffix(ro.Name, "-creation-gates"), strings.HasSuffix(ro.Name, "-preconditions")})
			}
		case b.RoleRef.Kind == "ClusterRole" && clusterRoles[b.RoleRef.Name] != nil:
			for _, rule := range clusterRoles[b.RoleRef.Name].Rules {
				grants = append(grants, grant{b.Namespace, rule, isHook(clusterRoles[b.RoleRef.Name]), own, false, false})
			}
		default:
			problems = append(problems, fmt.Sprintf("RoleBinding %s/%s refers to %s %s, which the chart does not render", b.Namespace, b.Name, b.RoleRef.Kind, b.RoleRef.Name))
		}
	}
	for name := range clusterRoles {
		if !bound["ClusterRole/"+name] {
			problems = append(problems, "ClusterRole "+name+" is bound to nothing")
		}
	}
	for key := range roles {
		if !bound["Role/"+key] {
			problems = append(problems, "Role "+key+" is bound to nothing")
		}
	}
	readOnly := []string{"get", "list", "watch"}
	// What the webhook's informers and holder lists need, and where.
	allowed := map[string]struct {
		verbs  []string
		where  func(ns string) bool
		byName []string // resourceNames required (empty: none)
	}{
		"/nodes":                  {readOnly, func(ns string) bool { return ns == "cluster" }, nil},
		"upgrade.cattle.io/plans": {readOnly, func(string) bool { return true }, nil},
		// Pods: holders listed live, and the proof's two label-selected informers.
		"/pods": {[]string{"list", "watch"}, func(string) bool { return true }, nil},
		// SUC's upgrade Jobs (the proof dates a node's upgrade by them).
		"batch/jobs": {[]string{"list", "watch"}, func(ns string) bool { return slices.Contains(r.e.sucNamespaces, ns) }, nil},
		// With proof.checks, the Jobs of the checks' namespace (their UIDs).
		"batch/jobs (checks)": {[]string{"list", "watch"}, func(ns string) bool { return r.e.checksNamespace != "" && ns == r.e.checksNamespace }, nil},
		// The driver path reads the upgrade policy live (webhook/driver.md).
		"nvidia.com/clusterpolicies": {[]string{"list"}, func(ns string) bool { return ns == "cluster" }, nil},
		"nvidia.com/nvidiadrivers":   {[]string{"list"}, func(ns string) bool { return ns == "cluster" }, nil},
		// RKE2's etcd snapshots, listed live for an RKE2-minor Plan.
		"k3s.cattle.io/etcdsnapshotfiles": {[]string{"list"}, func(ns string) bool { return ns == "cluster" }, nil},
		// The maintenance operator's requests, watched where served (the budget).
		"maintenance.nvidia.com/nodemaintenances": {[]string{"list", "watch"}, func(ns string) bool { return ns == "cluster" }, nil},
		// The drain check's budgets, listed live for a draining Plan.
		"policy/poddisruptionbudgets": {[]string{"list"}, func(ns string) bool { return ns == "cluster" }, nil},
		// OLM's phase of the GPU Operator, listed live on a driver change.
		"operators.coreos.com/clusterserviceversions": {[]string{"list"}, func(ns string) bool { return ns == r.e.gpuOperator[0] }, nil},
		"/configmaps":      {readOnly, func(ns string) bool { return ns == r.e.namespace }, nil},
		"apps/deployments": {readOnly, func(ns string) bool { return ns == r.e.gpuOperator[0] }, []string{r.e.gpuOperator[1]}},
		"apps/daemonsets":  {readOnly, func(ns string) bool { return ns == r.e.dcgm[0] }, []string{r.e.dcgm[1]}},
		// The validator DaemonSet, by name: its UID says which validator
		// Pods count (gate.Config.OwnValidators).
		"apps/daemonsets (validator)": {readOnly, func(ns string) bool { return ns == "gpu-operator" }, []string{"nvidia-operator-validator"}},
		// The one write: Events on the Plans (SUC namespaces) and Nodes
		// (default) whose step the gate holds; never read, update or delete.
		"events.k8s.io/events": {[]string{"create", "patch"}, func(ns string) bool {
			return slices.Contains(r.e.sucNamespaces, ns) || ns == metav1.NamespaceDefault
		}, nil},
		// The one write: the halt record, by name; the Lease electing its
		// writer (create cannot be limited by name).
		"/configmaps (halt record)":  {[]string{"update", "patch"}, func(ns string) bool { return ns == r.e.namespace }, []string{"gpu-upgrade-gate-halts"}},
		"coordination.k8s.io/leases": {[]string{"get", "update", "patch"}, func(ns string) bool { return ns == r.e.namespace }, []string{"gpu-upgrade-gate-halts"}},
		// The Plan nudge: one annotation of the gate's (the plans webhook
		// refuses any other change by the gate: NudgeForged).
		"upgrade.cattle.io/plans (nudge)":     {[]string{"patch"}, func(ns string) bool { return slices.Contains(r.e.sucNamespaces, ns) }, nil},
		"coordination.k8s.io/leases (create)": {[]string{"create"}, func(ns string) bool { return ns == r.e.namespace }, nil},
	}
	// Proofs of DRA nodes: the driver's slices, the checks' claims (in
	// their namespace when it is set) and the drivers' DaemonSets in their
	// namespaces, only when DRA drivers are configured.
	dra := []string{"resource.k8s.io/resourceslices", "resource.k8s.io/resourceclaims", "apps/daemonsets (dra)"}
	if r.e.dra {
		type grantable = struct {
			verbs  []string
			where  func(ns string) bool
			byName []string
		}
		claimsWhere := r.e.draClaimsNamespace
		if claimsWhere == "" {
			claimsWhere = "cluster"
		}
		allowed[dra[0]] = grantable{[]string{"list", "watch"}, func(ns string) bool { return ns == "cluster" }, nil}
		allowed[dra[1]] = grantable{[]string{"list", "watch"}, func(ns string) bool { return ns == claimsWhere }, nil}
		allowed[dra[2]] = grantable{[]string{"list", "watch"}, func(ns string) bool { return slices.Contains(r.e.draNamespaces, ns) }, nil}
	}
	seen := map[string]bool{}
	for _, g := range grants {
		rule := g.rule
		if len(rule.NonResourceURLs) > 0 {
			problems = append(problems, fmt.Sprintf("rule grants non-resource URLs %v (discovery and /version are already readable by every authenticated user)", rule.NonResourceURLs))
		}
		for _, group := range rule.APIGroups {
			for _, res := range rule.Resources {
				key := group + "/" + res
				if group == "*" || res == "*" || slices.Contains(rule.Verbs, "*") {
					problems = append(problems, fmt.Sprintf("wildcard rule %v in %s", rule, g.where))
					continue
				}
				if res == "secrets" || strings.HasPrefix(res, "secrets/") {
					problems = append(problems, fmt.Sprintf("rule grants %v on Secrets in %s: the kubelet mounts the TLS Secret; nothing else needs it", rule.Verbs, g.where))
					continue
				}
				if g.hook {
					if key != "admissionregistration.k8s.io/validatingwebhookconfigurations" || !slices.Equal(rule.Verbs, []string{"delete"}) ||
						!slices.Equal(rule.ResourceNames, []string{vwcName}) || g.where != "cluster" {
						problems = append(problems, fmt.Sprintf("hook rule %v in %s: a hook may only delete the webhook configuration %q by name", rule, g.where, vwcName))
					}
					continue
				}
				if !g.own {
					problems = append(problems, fmt.Sprintf("rule %v in %s is bound to no ServiceAccount of the chart", rule, g.where))
					continue
				}
				if g.gate {
					// A creation gate's object, read by name, as configured.
					if !slices.Equal(rule.Verbs, readOnly) || !slices.ContainsFunc(r.e.creationGates, func(c gate.CreationGate) bool {
						res := "apps/deployments"
						if c.Kind == gate.GateConfigMapKey {
							res = "/configmaps"
						}
						return c.Namespace == g.where && res == key && slices.Equal(rule.ResourceNames, []string{c.Object})
					}) {
						problems = append(problems, fmt.Sprintf("creation-gate rule %v in %s names no configured creation gate (or more than reading it)", rule, g.where))
					}
					continue
				}
				if g.pre {
					// A CEL precondition's resource, listed and watched as
					// configured: a Role in its namespace, else cluster-wide.
					if !slices.Equal(rule.Verbs, []string{"list", "watch"}) || len(rule.ResourceNames) > 0 || !slices.ContainsFunc(r.e.preconditions, func(p precondition.Precondition) bool {
						if p.CEL == nil {
							return false
						}
						where := p.CEL.Namespace
						if where == "" {
							where = "cluster"
						}
						return p.CEL.Group+"/"+p.CEL.Resource == key && where == g.where
					}) {
						problems = append(problems, fmt.Sprintf("precondition rule %v in %s names no configured CEL precondition's resource (or more than listing and watching it)", rule, g.where))
					}
					continue
				}
				switch {
				case key == "/configmaps" && len(rule.ResourceNames) > 0:
					key += " (halt record)"
				case key == "coordination.k8s.io/leases" && len(rule.ResourceNames) == 0:
					key += " (create)"
				case key == "upgrade.cattle.io/plans" && slices.Contains(rule.Verbs, "patch"):
					key += " (nudge)"
				case key == "apps/daemonsets" && len(rule.ResourceNames) == 0 && r.e.dra:
					key += " (dra)"
				case key == "apps/daemonsets" && slices.Equal(rule.ResourceNames, []string{"nvidia-operator-validator"}):
					key += " (validator)"
				case key == "batch/jobs" && g.where == r.e.checksNamespace && !slices.Contains(r.e.sucNamespaces, g.where):
					key += " (checks)"
				}
				a, ok := allowed[key]
				if !ok {
					problems = append(problems, fmt.Sprintf("the webhook's ServiceAccount is granted %s, which it does not read", key))
					continue
				}
				seen[key] = true
				for _, v := range rule.Verbs {
					if !slices.Contains(a.verbs, v) {
						problems = append(problems, fmt.Sprintf("the webhook's ServiceAccount may %s %s in %s; it only needs %v", v, key, g.where, a.verbs))
					}
				}
				if !a.where(g.where) {
					problems = append(problems, fmt.Sprintf("the webhook's ServiceAccount may read %s in %s; it reads them only in its own place", key, g.where))
				}
				if len(a.byName) > 0 && !slices.Equal(rule.ResourceNames, a.byName) {
					problems = append(problems, fmt.Sprintf("%s in %s must be restricted to resourceNames %v, got %v", key, g.where, a.byName, rule.ResourceNames))
				}
			}
		}
	}
	for _, key := range []string{"/nodes", "upgrade.cattle.io/plans", "/pods", "batch/jobs", "/configmaps", "apps/deployments", "apps/daemonsets", "apps/daemonsets (validator)", "nvidia.com/clusterpolicies", "nvidia.com/nvidiadrivers", "k3s.cattle.io/etcdsnapshotfiles", "maintenance.nvidia.com/nodemaintenances", "policy/poddisruptionbudgets"} {
		if !seen[key] {
			problems = append(problems, "the webhook's ServiceAccount cannot read "+key+", which its informers need")
		}
	}
	for _, key := range dra {
		if r.e.dra && !seen[key] {
			problems = append(problems, "the webhook's ServiceAccount cannot read "+key+", which proofs of DRA nodes need (config.draDrivers)")
		}
	}
	if r.e.checksNamespace != "" && !seen["batch/jobs (checks)"] {
		problems = append(problems, "the webhook's ServiceAccount cannot read batch/jobs in "+r.e.checksNamespace+", whose UIDs say which check Pods count (config.proof.checks)")
	}
	for _, ns := range r.e.draNamespaces {
		// Each driver's namespace: which nodes its DaemonSet serves.
		if !slices.ContainsFunc(grants, func(g grant) bool {
			return g.own && g.where == ns && slices.Contains(g.rule.APIGroups, "apps") && slices.Contains(g.rule.Resources, "daemonsets") &&
				slices.Contains(g.rule.Verbs, "list") && slices.Contains(g.rule.Verbs, "watch")
		}) {
			problems = append(problems, "the webhook's ServiceAccount cannot read apps/daemonsets (dra) in "+ns+", which proofs of DRA nodes need (config.draDrivers)")
		}
	}
	for _, ns := range append(slices.Clone(r.e.sucNamespaces), metav1.NamespaceDefault) {
		if !slices.ContainsFunc(grants, func(g grant) bool {
			return g.own && g.where == ns && slices.Contains(g.rule.APIGroups, "events.k8s.io") && slices.Contains(g.rule.Verbs, "create")
		}) {
			problems = append(problems, "the webhook's ServiceAccount cannot create Events in "+ns+", where the Plans (or Nodes) it holds are told")
		}
	}
	return problems
}

func (r *rendered) vwc(problems *[]string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	return only(Find[*admissionregistrationv1.ValidatingWebhookConfiguration](r.objs), "ValidatingWebhookConfiguration", problems)
}

func hook(v *admissionregistrationv1.ValidatingWebhookConfiguration, name string) *admissionregistrationv1.ValidatingWebhook {
	for i := range v.Webhooks {
		if v.Webhooks[i].Name == name {
			return &v.Webhooks[i]
		}
	}
	return nil
}

// namespacesSelected returns the values of a kubernetes.io/metadata.name In
// selector, and false when the selector is anything else (which could match
// kube-system).
func namespacesSelected(s *metav1.LabelSelector) ([]string, bool) {
	if s == nil || len(s.MatchLabels) > 0 || len(s.MatchExpressions) != 1 {
		return nil, false
	}
	e := s.MatchExpressions[0]
	if e.Key != corev1.LabelMetadataName || e.Operator != metav1.LabelSelectorOpIn {
		return nil, false
	}
	return e.Values, true
}

// checkWebhooks: the webhooks, their rules, selectors and policies.
func (r *rendered) checkWebhooks() []string {
	var problems []string
	v := r.vwc(&problems)
	svc := r.webhookService(&problems)
	if v == nil {
		return problems
	}
	// The optional row (the DRA plugin row) is rendered only with
	// config.draDrivers.
	optional := map[string]bool{}
	rows := 0
	for _, w := range webhook.Webhooks {
		optional[w.Name] = w.Optional
		if r.e.dra || !w.Optional {
			rows++
		}
	}
	if len(v.Webhooks) != rows {
		problems = append(problems, fmt.Sprintf("%d webhooks, expected one per row of the webhook table rendered here (%d)", len(v.Webhooks), rows))
	}
	for _, w := range v.Webhooks {
		bad := func(f string, a ...any) { problems = append(problems, w.Name+": "+fmt.Sprintf(f, a...)) }
		if w.SideEffects == nil || *w.SideEffects != admissionregistrationv1.SideEffectClassNone {
			bad("sideEffects must be None (dry-run requests are reviewed too)")
		}
		if !slices.Equal(w.AdmissionReviewVersions, []string{"v1"}) {
			bad("admissionReviewVersions %v, expected [v1]", w.AdmissionReviewVersions)
		}
		if w.TimeoutSeconds == nil || *w.TimeoutSeconds != r.e.timeout || *w.TimeoutSeconds > 10 {
			bad("timeoutSeconds %v, expected %d (never above 10)", w.TimeoutSeconds, r.e.timeout)
		}
		if w.MatchPolicy == nil || *w.MatchPolicy != admissionregistrationv1.Equivalent {
			bad("matchPolicy must be Equivalent")
		}
		if r.e.url != "" {
			if w.ClientConfig.Service != nil || w.ClientConfig.URL == nil || !strings.HasPrefix(*w.ClientConfig.URL, r.e.url+"/validate/") {
				bad("clientConfig must be url %s/validate/..., got %+v", r.e.url, w.ClientConfig)
			}
		} else if w.ClientConfig.URL != nil {
			bad("clientConfig.url: the chart calls its Service")
		} else if s := w.ClientConfig.Service; s == nil || svc == nil || s.Name != svc.Name || s.Namespace != svc.Namespace || s.Port == nil ||
			!slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "webhook" && p.Port == *s.Port }) {
			bad("clientConfig.service does not name the webhook Service and its webhook port")
		}
		for _, rule := range w.Rules {
			for _, res := range rule.Resources {
				// nodes/status only where labels change: the Node webhook, the
				// completions webhook (a plan label) and the driver step (a
				// label transition). plans/status only on the Plan status
				// webhook, which guards SUC's status.applying on purpose (its
				// match conditions, TestCoherence, keep SUC and every other
				// status write away from the gate). pods/ephemeralcontainers
				// only on the DRA workload webhook: the one way to add a
				// container, of the driver's image too, to a running Pod.
				statusOK := (res == "nodes/status" && slices.Contains([]string{"nodes.gpu-upgrade-gate.io", "completions.gpu-upgrade-gate.io", "driverstep.gpu-upgrade-gate.io"}, w.Name)) ||
					(res == "plans/status" && w.Name == "planstatus.gpu-upgrade-gate.io") ||
					(res == "pods/ephemeralcontainers" && w.Name == "draworkloads.gpu-upgrade-gate.io")
				if res == "*" || (strings.Contains(res, "/") && !statusOK) || slices.Contains([]string{"leases", "endpoints", "endpointslices", "events"}, res) {
					bad("matches %q: never subresources (plans/status only on the Plan status webhook; nodes/status only on the Node, completions and driver-step webhooks; pods/ephemeralcontainers only on the DRA workload webhook), leases, endpoints or events", res)
				}
			}
			if slices.Contains(rule.APIGroups, "*") || slices.Contains(rule.APIVersions, "*") {
				bad("wildcard group or version")
			}
			for _, op := range rule.Operations {
				// Deleting an NVIDIADriver or the ClusterPolicy unloads drivers,
				// so the driver path reviews it; deleting the webhook
				// configuration still breaks glass.
				// Deleting the halt record would drop its halts: reviewed too.
				// Deleting a DRA driver's plugin DaemonSet unloads it, and
				// creating it again must not be judged from nothing.
				// Deleting the GPU Operator's or a DRA driver's namespace
				// deletes its driver Pods, and deleting one of the operator's
				// DaemonSets its operand's on every GPU node.
				if op == admissionregistrationv1.Delete && (w.Name == "driver.gpu-upgrade-gate.io" || w.Name == "halts.gpu-upgrade-gate.io" ||
					w.Name == "dradaemonsets.gpu-upgrade-gate.io" || w.Name == "namespaces.gpu-upgrade-gate.io" || w.Name == "operatordaemonsets.gpu-upgrade-gate.io") {
					continue
				}
				if op != admissionregistrationv1.Create && op != admissionregistrationv1.Update {
					bad("operation %s: only CREATE and UPDATE (a DELETE must always work when the gate is down)", op)
				}
			}
			if rule.Scope != nil && *rule.Scope == admissionregistrationv1.NamespacedScope {
				ns, ok := namespacesSelected(w.NamespaceSelector)
				if !ok || slices.Contains(ns, "kube-system") || len(ns) == 0 {
					bad("a namespaced rule needs a namespaceSelector kubernetes.io/metadata.name In [...] without kube-system, got %v", w.NamespaceSelector)
				}
			}
		}
	}
	type rule struct {
		group, version, resource string // resource: the resources, comma-separated
		scope                    admissionregistrationv1.ScopeType
		ops                      []admissionregistrationv1.OperationType
	}
	type want struct {
		name       string
		rules      []rule
		policy     admissionregistrationv1.FailurePolicyType
		namespaces []string
	}
	cu := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
	cud := append(slices.Clone(cu), admissionregistrationv1.Delete)
	u := []admissionregistrationv1.OperationType{admissionregistrationv1.Update}
	cluster, namespaced := admissionregistrationv1.ClusterScope, admissionregistrationv1.NamespacedScope
	for _, wt := range []want{
		{"plans.gpu-upgrade-gate.io", []rule{{"upgrade.cattle.io", "v1", "plans", namespaced, cu}}, admissionregistrationv1.Fail, r.e.sucNamespaces},
		{"nodes.gpu-upgrade-gate.io", []rule{{"", "v1", "nodes,nodes/status", cluster, u}}, r.e.nodePolicy, nil},
		{"completions.gpu-upgrade-gate.io", []rule{{"", "v1", "nodes,nodes/status", cluster, u}}, admissionregistrationv1.Fail, nil},
		{"records.gpu-upgrade-gate.io", []rule{{"", "v1", "configmaps", namespaced, cu}}, admissionregistrationv1.Fail, []string{r.e.namespace}},
		{"halts.gpu-upgrade-gate.io", []rule{{"", "v1", "configmaps", namespaced, cud}}, admissionregistrationv1.Fail, []string{r.e.namespace}},
		{"driver.gpu-upgrade-gate.io", []rule{{"nvidia.com", "v1", "clusterpolicies", cluster, cud}, {"nvidia.com", "v1alpha1", "nvidiadrivers,gpuclusters", cluster, cud}},
			admissionregistrationv1.Fail, nil},
		{"jobs.gpu-upgrade-gate.io", []rule{{"batch", "v1", "jobs", namespaced, cu}}, admissionregistrationv1.Fail, r.e.sucNamespaces},
		{"driverstep.gpu-upgrade-gate.io", []rule{{"", "v1", "nodes,nodes/status", cluster, u}}, admissionregistrationv1.Fail, nil},
		{"operator.gpu-upgrade-gate.io", []rule{{"apps", "v1", "deployments", namespaced, cu}, {"operators.coreos.com", "v1alpha1", "installplans,subscriptions", namespaced, cu}},
			admissionregistrationv1.Fail, []string{r.e.gpuOperator[0]}},
		{"planstatus.gpu-upgrade-gate.io", []rule{{"upgrade.cattle.io", "v1", "plans/status", namespaced, u}}, admissionregistrationv1.Fail, r.e.sucNamespaces},
		{"dradaemonsets.gpu-upgrade-gate.io", []rule{{"apps", "v1", "daemonsets", namespaced, cud}}, admissionregistrationv1.Fail, r.e.draNamespaces},
		// A Namespace's own labels are what the namespaceSelector matches:
		// the GPU Operator's (its validator's is the same) always, the DRA
		// drivers' when configured.
		{"namespaces.gpu-upgrade-gate.io", []rule{{"", "v1", "namespaces", cluster, []admissionregistrationv1.OperationType{admissionregistrationv1.Delete}}},
			admissionregistrationv1.Fail, append([]string{r.e.gpuOperator[0]}, r.e.draNamespaces...)},
		{"validatordaemonset.gpu-upgrade-gate.io", []rule{{"apps", "v1", "daemonsets", namespaced, cu}}, admissionregistrationv1.Fail, []string{"gpu-operator"}},
		{"operatordaemonsets.gpu-upgrade-gate.io", []rule{{"apps", "v1", "daemonsets", namespaced, []admissionregistrationv1.OperationType{admissionregistrationv1.Delete}}},
			admissionregistrationv1.Fail, []string{r.e.gpuOperator[0]}},
		{"draworkloads.gpu-upgrade-gate.io", []rule{{"", "v1", "pods,replicationcontrollers", namespaced, cu}, {"", "v1", "pods/ephemeralcontainers", namespaced, u},
			{"apps", "v1", "deployments,replicasets,statefulsets", namespaced, cu}, {"batch", "v1", "jobs,cronjobs", namespaced, cu}}, admissionregistrationv1.Fail, r.e.draNamespaces},
	} {
		w := hook(v, wt.name)
		if optional[wt.name] && !r.e.dra {
			if w != nil {
				problems = append(problems, wt.name+": rendered without config.draDrivers, where no DaemonSet is the gate's")
			}
			continue
		}
		if w == nil {
			problems = append(problems, "no webhook "+wt.name)
			continue
		}
		bad := func(f string, a ...any) { problems = append(problems, wt.name+": "+fmt.Sprintf(f, a...)) }
		if len(w.Rules) != len(wt.rules) {
			bad("%d rules, expected %d", len(w.Rules), len(wt.rules))
		}
		for i, got := range w.Rules {
			if i >= len(wt.rules) {
				break
			}
			x := wt.rules[i]
			if !slices.Equal(got.APIGroups, []string{x.group}) || !slices.Equal(got.APIVersions, []string{x.version}) ||
				strings.Join(got.Resources, ",") != x.resource || got.Scope == nil || *got.Scope != x.scope {
				bad("rule %v, expected %s/%s %s (%s)", got.Rule, x.group, x.version, x.resource, x.scope)
			}
			if !slices.Equal(got.Operations, x.ops) {
				bad("operations %v, expected %v", got.Operations, x.ops)
			}
		}
		if w.FailurePolicy == nil || *w.FailurePolicy != wt.policy {
			bad("failurePolicy %v, expected %s", w.FailurePolicy, wt.policy)
		}
		ns, _ := namespacesSelected(w.NamespaceSelector)
		if wt.namespaces != nil && !slices.Equal(ns, wt.namespaces) {
			bad("namespaces %v, expected %v", ns, wt.namespaces)
		}
		if wt.namespaces == nil && w.NamespaceSelector != nil && (len(w.NamespaceSelector.MatchLabels) > 0 || len(w.NamespaceSelector.MatchExpressions) > 0) {
			bad("a cluster-scoped rule ignores namespaceSelector; drop it")
		}
		switch wt.rules[0].resource {
		case "configmaps":
			if wt.name == "halts.gpu-upgrade-gate.io" {
				break // one object by name (its match condition)
			}
			if w.ObjectSelector == nil || !labels.SelectorFromSet(w.ObjectSelector.MatchLabels).Matches(labels.Set{"gpu-upgrade-gate.io/qualification": "true"}) ||
				len(w.ObjectSelector.MatchLabels) != 1 || len(w.ObjectSelector.MatchExpressions) > 0 {
				bad("objectSelector must be exactly gpu-upgrade-gate.io/qualification=true, got %v", w.ObjectSelector)
			}
		case "jobs":
			// SUC's Jobs by their plan label only: requiring the node label
			// too would let a Job without it run unjudged.
			want := []metav1.LabelSelectorRequirement{{Key: "upgrade.cattle.io/plan", Operator: metav1.LabelSelectorOpExists}}
			if w.ObjectSelector == nil || len(w.ObjectSelector.MatchLabels) > 0 || !reflect.DeepEqual(w.ObjectSelector.MatchExpressions, want) {
				bad("objectSelector must be exactly upgrade.cattle.io/plan Exists, got %v", w.ObjectSelector)
			}
		default:
			if w.ObjectSelector != nil && (len(w.ObjectSelector.MatchLabels) > 0 || len(w.ObjectSelector.MatchExpressions) > 0) {
				bad("unexpected objectSelector %v", w.ObjectSelector)
			}
		}
		conds := ""
		for _, c := range w.MatchConditions {
			conds += c.Expression + "\n"
		}
		switch wt.name {
		case "nodes.gpu-upgrade-gate.io", "completions.gpu-upgrade-gate.io", "jobs.gpu-upgrade-gate.io", "planstatus.gpu-upgrade-gate.io":
			// These are compared with the configuration in TestCoherence.
		case "driver.gpu-upgrade-gate.io":
			// Only changes of what runs on GPU nodes may reach the gate (the
			// operator's own writes must never depend on it).
			if len(w.MatchConditions) != 1 || !strings.Contains(conds, "object.?spec.?driver.orValue({}) != oldObject.?spec.?driver.orValue({})") ||
				!strings.Contains(conds, "object.?spec.?dcgmExporter.orValue({})") || !strings.Contains(conds, "object.?spec.orValue({}) != oldObject.?spec.orValue({})") ||
				// The operator writes the validator DaemonSet, unjudged, from
				// the ClusterPolicy's validator section (ValidatorForged).
				!strings.Contains(conds, "object.?spec.?validator.orValue({}) != oldObject.?spec.?validator.orValue({})") ||
				!strings.Contains(conds, "request.operation != 'UPDATE'") {
				bad("the driver webhook must match CREATE, DELETE and changes of the driver/DCGM/validator sections or an NVIDIADriver's spec, got %v", w.MatchConditions)
			}
		case "halts.gpu-upgrade-gate.io":
			if len(w.MatchConditions) != 1 || !strings.Contains(conds, "(request.operation == 'DELETE' ? oldObject.metadata.name : object.metadata.name) == 'gpu-upgrade-gate-halts'") {
				bad("the halts webhook must match the halt record by name, its deletion too, got %v", w.MatchConditions)
			}
		case "driverstep.gpu-upgrade-gate.io":
			if len(w.MatchConditions) != 1 || !strings.Contains(conds, "['pod-restart-required', 'post-maintenance-required']") ||
				!strings.Contains(conds, "oldObject.metadata.?labels[?'nvidia.com/gpu-driver-upgrade-state']") {
				bad("the driver step webhook must match only moves into a reload state, got %v", w.MatchConditions)
			}
		case "operator.gpu-upgrade-gate.io":
			// An InstallPlan approved at its creation is an approval (OLM under
			// automatic approval); a Subscription only of the operator's package.
			if !strings.Contains(conds, "object.metadata.name == '"+r.e.gpuOperator[1]+"'") || !strings.Contains(conds, "clusterServiceVersionNames") ||
				!strings.Contains(conds, "(request.operation == 'CREATE' || !oldObject.?spec.?approved.orValue(false) ||") ||
				!strings.Contains(conds, "request.resource.resource == 'subscriptions' ?") || !strings.Contains(conds, "object.?spec.?name.orValue('') == '") {
				bad("the operator webhook must match only the operator Deployment's image, InstallPlan approvals (at creation too) and the operator package's Subscriptions, got %v", w.MatchConditions)
			}
		case "dradaemonsets.gpu-upgrade-gate.io":
			// The configured plugins' Pod template or version-label changes,
			// creates and deletes; other DaemonSets' creates and template
			// changes, but not their own namespace's ServiceAccounts'; never
			// the GPU Operator's own ServiceAccounts' writes (its GPUCluster
			// was the reviewed step), by name: another ServiceAccount of its
			// namespace is judged; nor the namespace controller's deletes,
			// after the namespace's reviewed deletion.
			if len(w.MatchConditions) != 4 || w.MatchConditions[0].Expression != "request.namespace + '/' + (request.operation == 'DELETE' ? oldObject : object).metadata.name in ["+celList(r.e.draPlugins)+"]"+
				" || (request.operation != 'DELETE' && !((request.namespace + '/' + request.userInfo.username) in ["+celList(r.e.draControllers)+"]))" ||
				w.MatchConditions[1].Expression != "request.operation != 'UPDATE' || object.spec.template != oldObject.spec.template || "+
					"object.metadata.?labels[?'app.kubernetes.io/version'].orValue('') != oldObject.metadata.?labels[?'app.kubernetes.io/version'].orValue('')" ||
				w.MatchConditions[2].Expression != "!(request.userInfo.username in ["+celList(r.e.gpuOperatorServiceAccounts)+"])" ||
				w.MatchConditions[3].Expression != "request.operation != 'DELETE' || request.userInfo.username != 'system:serviceaccount:kube-system:namespace-controller'" {
				bad("the DRA plugin webhook must match only the configured kubelet-plugin DaemonSets' Pod template or version-label changes (and creates and deletes) and other DaemonSets' creates and template changes by anyone but the drivers' configured controllers, not the GPU Operator's own ServiceAccounts' writes nor the namespace controller's deletes, got %v", w.MatchConditions)
			}
		case "operatordaemonsets.gpu-upgrade-gate.io":
			// A person's deletion; never the GPU Operator's own, the
			// namespace controller's or the garbage collector's.
			if len(w.MatchConditions) != 2 || w.MatchConditions[0].Expression != "!(request.userInfo.username in ["+celList(r.e.gpuOperatorServiceAccounts)+"])" ||
				w.MatchConditions[1].Expression != "!(request.userInfo.username in ['system:serviceaccount:kube-system:namespace-controller', "+
					"'system:serviceaccount:kube-system:generic-garbage-collector', 'system:kube-controller-manager'])" {
				bad("the operator DaemonSet webhook must match only a person's deletion, not the GPU Operator's own ServiceAccounts', the namespace controller's or the garbage collector's, got %v", w.MatchConditions)
			}
		case "draworkloads.gpu-upgrade-gate.io":
			// Pods and Pod templates created or changed, never by the
			// kube-controller-manager's Pod-writing controllers or kubelets
			// (their Pods follow a judged template), the GPU Operator's own
			// ServiceAccounts or the drivers' configured controllers.
			if len(w.MatchConditions) != 4 || w.MatchConditions[0].Expression != "!(request.userInfo.username in ['system:kube-controller-manager', "+
				"'system:serviceaccount:kube-system:daemon-set-controller', 'system:serviceaccount:kube-system:deployment-controller', "+
				"'system:serviceaccount:kube-system:replicaset-controller', 'system:serviceaccount:kube-system:replication-controller', 'system:serviceaccount:kube-system:statefulset-controller', "+
				"'system:serviceaccount:kube-system:job-controller', 'system:serviceaccount:kube-system:cronjob-controller']) && !('system:nodes' in request.userInfo.groups)" ||
				!strings.HasPrefix(w.MatchConditions[1].Expression, "request.operation == 'CREATE' ||") ||
				!strings.Contains(w.MatchConditions[1].Expression, "object.spec.template != oldObject.spec.template") ||
				w.MatchConditions[2].Expression != "!(request.userInfo.username in ["+celList(r.e.gpuOperatorServiceAccounts)+"])" ||
				w.MatchConditions[3].Expression != "!((request.namespace + '/' + request.userInfo.username) in ["+celList(r.e.draControllers)+"])" {
				bad("the DRA workload webhook must match only Pods and Pod templates created or changed, not by the kube-controller-manager's Pod-writing controllers, kubelets, the GPU Operator's own ServiceAccounts or the drivers' configured controllers, got %v", w.MatchConditions)
			}
		case "validatordaemonset.gpu-upgrade-gate.io":
			// The validator DaemonSet by name, created or its Pods changed,
			// never by the GPU Operator's own ServiceAccounts.
			if len(w.MatchConditions) != 3 || w.MatchConditions[0].Expression != "object.metadata.name == 'nvidia-operator-validator'" ||
				!strings.HasPrefix(w.MatchConditions[1].Expression, "request.operation == 'CREATE' || object.spec.template.spec != oldObject.spec.template.spec") ||
				w.MatchConditions[2].Expression != "!(request.userInfo.username in ["+celList(r.e.gpuOperatorServiceAccounts)+"])" {
				bad("the validator webhook must match only the validator DaemonSet's creation or Pod changes, not the GPU Operator's own ServiceAccounts' writes, got %v", w.MatchConditions)
			}
		default:
			if len(w.MatchConditions) > 0 {
				bad("unexpected match conditions")
			}
		}
	}
	return problems
}

func celList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(x) + "'"
	}
	return strings.Join(q, ", ")
}

// expectedJobMatchConditions are the Job webhook's match conditions: writes
// by a ServiceAccount of a SUC namespace that start a Job (created running,
// or from paused or suspended to running) and nothing else.
func expectedJobMatchConditions(sucNamespaces []string) []admissionregistrationv1.MatchCondition {
	starts := "object.spec.?parallelism.orValue(1) > 0 && !object.spec.?suspend.orValue(false) && " +
		"(request.operation == 'CREATE' || oldObject.spec.?parallelism.orValue(1) == 0 || oldObject.spec.?suspend.orValue(false))"
	return []admissionregistrationv1.MatchCondition{
		// SUC's start, or anyone else's create, relabel or start (SUCJobForged).
		{Name: "suc-starts-or-another-writes", Expression: "(request.userInfo.groups.exists(g, g in [" + celList(sucGroups(sucNamespaces)) + "])) ? (" + starts + ") : " +
			"(request.operation == 'CREATE' || object.metadata.?labels.orValue({}) != oldObject.metadata.?labels.orValue({}) || (" + starts + "))"},
	}
}

// sucGroups are the groups of the ServiceAccounts of the SUC namespaces:
// SUC, as the API server authenticates it.
func sucGroups(sucNamespaces []string) []string {
	groups := make([]string, len(sucNamespaces))
	for i, ns := range sucNamespaces {
		groups[i] = "system:serviceaccounts:" + ns
	}
	return groups
}

// expectedPlanStatusMatchConditions are the Plan status webhook's match
// conditions: writes by anyone but a ServiceAccount of a SUC namespace that
// change any of the four status fields, and nothing else.
func expectedPlanStatusMatchConditions(sucNamespaces []string) []admissionregistrationv1.MatchCondition {
	return []admissionregistrationv1.MatchCondition{
		{Name: "not-suc", Expression: "!request.userInfo.groups.exists(g, g in [" + celList(sucGroups(sucNamespaces)) + "])"},
		{Name: "changes-status", Expression: "object.?status.?applying.orValue([]) != oldObject.?status.?applying.orValue([]) || object.?status.?conditions.orValue([]) != oldObject.?status.?conditions.orValue([]) || object.?status.?latestHash.orValue('') != oldObject.?status.?latestHash.orValue('') || object.?status.?latestVersion.orValue('') != oldObject.?status.?latestVersion.orValue('')"},
	}
}

// ExpectedNodeMatchConditions are the Node webhook's match conditions for a
// configuration: the spec the chart's template implements (kubelets, exempt
// system controllers, non-GPU nodes and changes that neither touch labels nor
// uncordon never reach the webhook). The GPU-node condition is the engine's
// own (gate.Config.GPUNodeCondition): the chart rendering anything else fails.
func expectedNodeMatchConditions(gpuVendors []string, exemptions []gate.Exemption, taintControllers []string) []admissionregistrationv1.MatchCondition {
	cfg := &gate.Config{GPUVendors: gpuVendors, Exemptions: exemptions}
	// Who writes, not which key: kube-system's ServiceAccounts, the
	// kube-controller-manager, RKE2's and k3s's cloud controller manager and
	// the configured node-taint controllers.
	system := "request.userInfo.username.startsWith('system:serviceaccount:kube-system:') || request.userInfo.username in ['system:kube-controller-manager', 'rke2-cloud-controller-manager', 'k3s-cloud-controller-manager'] || request.userInfo.username in [" + celList(taintControllers) + "]"
	conds := []admissionregistrationv1.MatchCondition{
		{Name: "not-a-kubelet", Expression: "!('system:nodes' in request.userInfo.groups)"},
		{Name: "gpu-node", Expression: cfg.GPUNodeCondition()},
		{Name: "labels-taints-or-uncordon", Expression: "object.metadata.?labels.orValue({}) != oldObject.metadata.?labels.orValue({}) || (oldObject.spec.?unschedulable.orValue(false) && !object.spec.?unschedulable.orValue(false)) || object.metadata.?annotations.orValue({})[?'gpu-upgrade-gate.io/moved-by'].orValue('') != oldObject.metadata.?annotations.orValue({})[?'gpu-upgrade-gate.io/moved-by'].orValue('') || object.metadata.?annotations.orValue({})[?'gpu-upgrade-gate.io/cordon-handover'].orValue('') != oldObject.metadata.?annotations.orValue({})[?'gpu-upgrade-gate.io/cordon-handover'].orValue('')" +
			// A taint that starts or stops a DaemonSet's Pod: a NoExecute one
			// added, a NoSchedule or NoExecute one lifted (key, effect, value),
			// by anyone but the system, whatever the key.
			" || (!(" + system + ") && (object.spec.?taints.orValue([]).exists(t, t.effect == 'NoExecute' && !([t.key, t.effect, t.?value.orValue('')] in oldObject.spec.?taints.orValue([]).map(o, [o.key, o.effect, o.?value.orValue('')])))" +
			" || oldObject.spec.?taints.orValue([]).exists(t, t.effect in ['NoSchedule', 'NoExecute'] && !([t.key, t.effect, t.?value.orValue('')] in object.spec.?taints.orValue([]).map(o, [o.key, o.effect, o.?value.orValue('')])))))"},
	}
	if exempt := cfg.NodeExemptCondition(); exempt != "" {
		conds = append(conds, admissionregistrationv1.MatchCondition{Name: "not-a-system-controller", Expression: exempt})
	}
	return conds
}

// expectedCompletionMatchConditions are the completions webhook's match
// conditions: only SUC's uncordon or plan-label completion of a GPU node.
func expectedCompletionMatchConditions(gpuVendors, sucUsers []string) []admissionregistrationv1.MatchCondition {
	gpu := admissionregistrationv1.MatchCondition{Name: "gpu-node", Expression: (&gate.Config{GPUVendors: gpuVendors}).GPUNodeCondition()}
	return []admissionregistrationv1.MatchCondition{
		{Name: "suc-service-account", Expression: "request.userInfo.username in [" + celList(sucUsers) + "]"},
		gpu,
		{Name: "uncordon-or-marked-done", Expression: "(oldObject.spec.?unschedulable.orValue(false) && !object.spec.?unschedulable.orValue(false)) || object.metadata.?labels.orValue({}).exists(k, k.startsWith('plan.upgrade.cattle.io/') && object.metadata.labels[k] != 'disabled' && oldObject.metadata.?labels.orValue({})[?k].orValue('') != object.metadata.labels[k])"},
	}
}

func (r *rendered) checkNodeMatchConditions() []string {
	var problems []string
	v := r.vwc(&problems)
	if v == nil {
		return problems
	}
	w := hook(v, "nodes.gpu-upgrade-gate.io")
	if w == nil {
		return problems
	}
	want := expectedNodeMatchConditions(r.e.gpuVendors, r.e.exemptions, r.e.taintControllers)
	if !slices.Equal(w.MatchConditions, want) {
		problems = append(problems, fmt.Sprintf("nodes.gpu-upgrade-gate.io match conditions\n  got  %v\n  want %v", w.MatchConditions, want))
	}
	if c := hook(v, "completions.gpu-upgrade-gate.io"); c != nil {
		if want := expectedCompletionMatchConditions(r.e.gpuVendors, r.e.sucServiceAccounts); !slices.Equal(c.MatchConditions, want) {
			problems = append(problems, fmt.Sprintf("completions.gpu-upgrade-gate.io match conditions\n  got  %v\n  want %v", c.MatchConditions, want))
		}
	}
	return problems
}

func (r *rendered) tlsSecretName() string {
	if r.e.ownCA {
		return "gpu-upgrade-gate-own-tls"
	}
	var problems []string
	if d := r.deployment(&problems); d != nil {
		return d.Name + "-tls"
	}
	return ""
}

// checkTLS: the cert-manager chain (self-signed Issuer → CA Certificate → CA
// Issuer → serving Certificate) and its injection, or a supplied CA bundle.
func (r *rendered) checkTLS() []string {
	var problems []string
	v := r.vwc(&problems)
	svc := r.webhookService(&problems)
	issuers := Find[*certmanagerv1.Issuer](r.objs)
	certs := Find[*certmanagerv1.Certificate](r.objs)
	if len(Find[*certmanagerv1.ClusterIssuer](r.objs)) > 0 {
		problems = append(problems, "a ClusterIssuer: the chain must stay in the release namespace")
	}
	if v == nil || svc == nil {
		return problems
	}
	inject := v.Annotations["cert-manager.io/inject-ca-from"]
	if r.e.ownCA {
		if len(issuers)+len(certs) > 0 || inject != "" {
			problems = append(problems, "own-CA mode renders cert-manager objects or the inject-ca-from annotation")
		}
		for _, w := range v.Webhooks {
			block, _ := pem.Decode(w.ClientConfig.CABundle)
			if block == nil {
				problems = append(problems, w.Name+": caBundle is not PEM")
				continue
			}
			if ca, err := x509.ParseCertificate(block.Bytes); err != nil || !ca.IsCA {
				problems = append(problems, fmt.Sprintf("%s: caBundle is not a CA certificate (%v)", w.Name, err))
			}
		}
		return problems
	}
	for _, w := range v.Webhooks {
		if len(w.ClientConfig.CABundle) > 0 {
			problems = append(problems, w.Name+": a caBundle in cert-manager mode (cainjector owns it)")
		}
	}
	var selfSigned, caIssuer *certmanagerv1.Issuer
	for _, is := range issuers {
		switch {
		case is.Spec.SelfSigned != nil:
			selfSigned = is
		case is.Spec.CA != nil:
			caIssuer = is
		default:
			problems = append(problems, "Issuer "+is.Name+" is neither the self-signed nor the CA issuer")
		}
	}
	if len(issuers) != 2 || selfSigned == nil || caIssuer == nil {
		return append(problems, fmt.Sprintf("expected a self-signed Issuer and a CA Issuer, rendered %d Issuers", len(issuers)))
	}
	var ca, serving *certmanagerv1.Certificate
	for _, c := range certs {
		if c.Spec.IsCA {
			ca = c
		} else {
			serving = c
		}
	}
	if len(certs) != 2 || ca == nil || serving == nil {
		return append(problems, fmt.Sprintf("expected a CA Certificate and a serving Certificate, rendered %d Certificates", len(certs)))
	}
	ref := func(c *certmanagerv1.Certificate, is *certmanagerv1.Issuer) bool {
		return c.Spec.IssuerRef.Name == is.Name && c.Spec.IssuerRef.Kind == "Issuer" && (c.Spec.IssuerRef.Group == "" || c.Spec.IssuerRef.Group == "cert-manager.io")
	}
	if !ref(ca, selfSigned) {
		problems = append(problems, "the CA Certificate is not issued by the self-signed Issuer")
	}
	if caIssuer.Spec.CA.SecretName != ca.Spec.SecretName {
		problems = append(problems, "the CA Issuer does not sign with the CA Certificate's Secret")
	}
	if !ref(serving, caIssuer) {
		problems = append(problems, "the serving Certificate is not issued by the CA Issuer (renewals would change the injected CA)")
	}
	if serving.Spec.SecretName != r.tlsSecretName() {
		problems = append(problems, fmt.Sprintf("the serving Certificate writes %s, the pods mount %s", serving.Spec.SecretName, r.tlsSecretName()))
	}
	wantDNS := append([]string{svc.Name, svc.Name + "." + svc.Namespace + ".svc", svc.Name + "." + svc.Namespace + ".svc.cluster.local"}, r.e.extraDNSNames...)
	if !slices.Equal(serving.Spec.DNSNames, wantDNS) {
		problems = append(problems, fmt.Sprintf("serving dnsNames %v, expected %v", serving.Spec.DNSNames, wantDNS))
	}
	if !slices.Equal(serving.Spec.IPAddresses, r.e.ipAddresses) {
		problems = append(problems, fmt.Sprintf("serving ipAddresses %v, expected %v", serving.Spec.IPAddresses, r.e.ipAddresses))
	}
	if !slices.Contains(serving.Spec.Usages, certmanagerv1.UsageServerAuth) {
		problems = append(problems, "the serving Certificate lacks the server auth usage")
	}
	for _, c := range []*certmanagerv1.Certificate{ca, serving} {
		if c.Spec.Duration == nil || c.Spec.RenewBefore == nil || c.Spec.RenewBefore.Duration <= 0 || c.Spec.RenewBefore.Duration >= c.Spec.Duration.Duration {
			problems = append(problems, "Certificate "+c.Name+": renewBefore must be set and shorter than duration")
		}
	}
	if ca.Spec.Duration != nil && serving.Spec.Duration != nil && ca.Spec.Duration.Duration <= serving.Spec.Duration.Duration {
		problems = append(problems, "the CA must outlive the serving certificate")
	}
	if want := serving.Namespace + "/" + serving.Name; inject != want {
		problems = append(problems, fmt.Sprintf("cert-manager.io/inject-ca-from %q, expected %q (the serving Certificate, whose ca.crt is the stable CA)", inject, want))
	}
	return problems
}

// The labels template of rule A in labels.md section 1.5, verbatim.
const wantLabelsTemplate = "{{ range .pci.device }}pci-{{ .vendor }}_{{ .device }}_{{ .subsystem_vendor }}_{{ .subsystem_device }}.present=true\n{{ end }}\n"

func (r *rendered) checkNodeFeatureRule() []string {
	var problems []string
	rules := FindUnstructured(r.objs, NodeFeatureRule)
	if !r.e.nfd {
		if len(rules) > 0 {
			problems = append(problems, "NodeFeatureRule rendered although disabled")
		}
		return problems
	}
	nfr := only(rules, "NodeFeatureRule", &problems)
	if nfr == nil {
		return problems
	}
	list, _, _ := unstructured.NestedSlice(nfr.Object, "spec", "rules")
	if len(list) != 1 {
		return append(problems, fmt.Sprintf("NodeFeatureRule: %d rules, expected rule A only", len(list)))
	}
	rule, _ := list[0].(map[string]any)
	tmpl, _, _ := unstructured.NestedString(rule, "labelsTemplate")
	if tmpl != wantLabelsTemplate {
		problems = append(problems, fmt.Sprintf("NodeFeatureRule labelsTemplate\n  got  %q\n  want %q", tmpl, wantLabelsTemplate))
	}
	for _, k := range []string{"labels", "taints", "annotations", "extendedResources", "vars", "varsTemplate"} {
		if _, ok := rule[k]; ok {
			problems = append(problems, "NodeFeatureRule sets "+k+": it must only add the identity labels, leaving NFD's and the GPU Operator's untouched")
		}
	}
	mf, _, _ := unstructured.NestedSlice(rule, "matchFeatures")
	if len(mf) != 1 {
		return append(problems, fmt.Sprintf("NodeFeatureRule: %d matchFeatures, expected pci.device", len(mf)))
	}
	f, _ := mf[0].(map[string]any)
	if name, _, _ := unstructured.NestedString(f, "feature"); name != "pci.device" {
		problems = append(problems, "NodeFeatureRule matches feature "+name+", expected pci.device")
	}
	for key, want := range map[string][]string{"vendor": r.e.gpuVendors, "class": {"0300", "0302"}} {
		op, _, _ := unstructured.NestedString(f, "matchExpressions", key, "op")
		got, _, _ := unstructured.NestedStringSlice(f, "matchExpressions", key, "value")
		if op != "In" || !slices.Equal(got, want) {
			problems = append(problems, fmt.Sprintf("NodeFeatureRule %s: %s %v, expected In %v", key, op, got, want))
		}
	}
	if exprs, _, _ := unstructured.NestedMap(f, "matchExpressions"); len(exprs) != 2 {
		problems = append(problems, fmt.Sprintf("NodeFeatureRule matchExpressions %v, expected vendor and class", exprs))
	}
	return problems
}

func (r *rendered) checkNetworkPolicy() []string {
	var problems []string
	nps := Find[*networkingv1.NetworkPolicy](r.objs)
	if !r.e.networkPolicy {
		if len(nps) > 0 {
			problems = append(problems, "NetworkPolicy rendered although disabled")
		}
		return problems
	}
	np := only(nps, "NetworkPolicy", &problems)
	d := r.deployment(&problems)
	if np == nil || d == nil {
		return problems
	}
	if s, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); err != nil || s.Empty() || !s.Matches(labels.Set(d.Spec.Template.Labels)) {
		problems = append(problems, "NetworkPolicy does not select the webhook's pods")
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		problems = append(problems, "NetworkPolicy must restrict ingress and egress")
	}
	webhookOpen, metricsOpenToAll := false, false
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port == nil {
				problems = append(problems, "an ingress rule opens every port")
				continue
			}
			switch p.Port.String() {
			case "webhook", "9443":
				// The API server runs on the host network: only its addresses
				// can name it, and nothing else may be admitted.
				var cidrs []string
				for _, from := range rule.From {
					if from.IPBlock == nil || from.PodSelector != nil || from.NamespaceSelector != nil || len(from.IPBlock.Except) > 0 {
						problems = append(problems, "the webhook port is opened to a peer that is not an API server address")
						continue
					}
					cidrs = append(cidrs, from.IPBlock.CIDR)
				}
				if len(rule.From) == 0 {
					problems = append(problems, "NetworkPolicy opens the webhook port to any source")
				}
				webhookOpen = webhookOpen || slices.Equal(cidrs, r.e.webhookFrom)
			case "metrics", "8080":
				metricsOpenToAll = metricsOpenToAll || len(rule.From) == 0
			default:
				problems = append(problems, "NetworkPolicy opens port "+p.Port.String())
			}
		}
		if len(rule.Ports) == 0 {
			problems = append(problems, "an ingress rule opens every port")
		}
	}
	if !webhookOpen {
		problems = append(problems, fmt.Sprintf("NetworkPolicy must open the webhook port to the API server's addresses %v only", r.e.webhookFrom))
	}
	if metricsOpenToAll {
		problems = append(problems, "NetworkPolicy opens metrics to any source")
	}
	dns, api := false, false
	for _, rule := range np.Spec.Egress {
		for _, p := range rule.Ports {
			if p.Port == nil {
				problems = append(problems, "an egress rule allows every port")
				continue
			}
			switch p.Port.IntValue() {
			case 53:
				dns = true
			case 443, 6443:
				api = true
			}
		}
		if len(rule.Ports) == 0 {
			problems = append(problems, "an egress rule allows every port")
		}
	}
	if !dns || !api {
		problems = append(problems, "NetworkPolicy egress must allow DNS and the API server")
	}
	return problems
}

func (r *rendered) checkServiceMonitor() []string {
	var problems []string
	sms := FindUnstructured(r.objs, ServiceMonitor)
	if !r.e.serviceMonitor {
		if len(sms) > 0 {
			problems = append(problems, "ServiceMonitor rendered although disabled")
		}
		return problems
	}
	sm := only(sms, "ServiceMonitor", &problems)
	d := r.deployment(&problems)
	if sm == nil || d == nil {
		return problems
	}
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	port := ""
	if len(eps) == 1 {
		port, _, _ = unstructured.NestedString(eps[0].(map[string]any), "port")
	}
	found := false
	for _, s := range Find[*corev1.Service](r.objs) {
		if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(labels.Set(s.Labels)) {
			continue
		}
		for _, p := range s.Spec.Ports {
			c := container(&d.Spec.Template.Spec, "webhook")
			if p.Name == port && c != nil && portNumber(c, p.TargetPort) == 8080 && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
				found = true
			}
		}
	}
	if !found {
		problems = append(problems, fmt.Sprintf("ServiceMonitor selects no Service whose port %q reaches the pods' metrics port 8080", port))
	}
	return problems
}

// checkObservability: the PrometheusRule and the dashboard are opt-in; when
// on, the rules select the metrics Service's scrape job (what the
// ServiceMonitor produces) and each has a runbook, and the dashboard carries
// the sidecar's label and is a dashboard. hack/tools/promtool decodes the
// rule with its real type, parses every query and runs the alert tests.
func (r *rendered) checkObservability() []string {
	var problems []string
	rules := FindUnstructured(r.objs, PrometheusRule)
	if !r.e.prometheusRule && len(rules) > 0 {
		problems = append(problems, "PrometheusRule rendered although disabled")
	}
	if r.e.prometheusRule {
		if pr := only(rules, "PrometheusRule", &problems); pr != nil {
			job := ""
			for _, s := range Find[*corev1.Service](r.objs) {
				if s.Labels["app.kubernetes.io/component"] == "metrics" {
					job = fmt.Sprintf("job=%q, namespace=%q", s.Name, s.Namespace)
				}
			}
			groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
			n := 0
			for _, g := range groups {
				rs, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
				for _, rule := range rs {
					m := rule.(map[string]any)
					name, _, _ := unstructured.NestedString(m, "alert")
					expr, _, _ := unstructured.NestedString(m, "expr")
					runbook, _, _ := unstructured.NestedString(m, "annotations", "runbook_url")
					n++
					if job == "" || !strings.Contains(expr, job) {
						problems = append(problems, fmt.Sprintf("alert %s does not select the metrics Service's scrape (%s): %s", name, job, expr))
					}
					if !strings.HasSuffix(runbook, "#"+strings.ToLower(name)) {
						problems = append(problems, fmt.Sprintf("alert %s: runbook_url %q does not point at its runbook section", name, runbook))
					}
				}
			}
			if n == 0 {
				problems = append(problems, "PrometheusRule has no alerts")
			}
		}
	}
	var dashboards []*corev1.ConfigMap
	for _, cm := range Find[*corev1.ConfigMap](r.objs) {
		if strings.HasSuffix(cm.Name, "-dashboard") {
			dashboards = append(dashboards, cm)
		}
	}
	if r.e.dashboard == "" {
		if len(dashboards) > 0 {
			problems = append(problems, "dashboard ConfigMap rendered although disabled")
		}
		return problems
	}
	cm := only(dashboards, "dashboard ConfigMap", &problems)
	if cm == nil {
		return problems
	}
	if cm.Labels["grafana_dashboard"] != "1" {
		problems = append(problems, fmt.Sprintf("dashboard ConfigMap labels %v lack the sidecar's grafana_dashboard: \"1\"", cm.Labels))
	}
	var d struct {
		UID    string            `json:"uid"`
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal([]byte(cm.Data["gpu-upgrade-gate.json"]), &d); err != nil || d.UID == "" || len(d.Panels) == 0 {
		problems = append(problems, fmt.Sprintf("dashboard ConfigMap holds no dashboard with a uid and panels (%v)", err))
	}
	return problems
}

func (r *rendered) checkHooks() []string {
	var problems []string
	jobs := Find[*batchv1.Job](r.objs)
	var names []string
	for _, j := range jobs {
		names = append(names, j.Name)
		if !isHook(j) {
			problems = append(problems, "Job "+j.Name+" is not a Helm hook")
		}
		if j.Spec.ActiveDeadlineSeconds == nil {
			problems = append(problems, "Job "+j.Name+" has no activeDeadlineSeconds: a hook must never hang a release")
		}
	}
	sort.Strings(names)
	var want []string
	if r.e.deleteHook {
		want = append(want, "delete-webhook")
	}
	if r.e.probeHook {
		want = append(want, "probe")
	}
	var got []string
	for _, n := range names {
		switch {
		case strings.HasSuffix(n, "-probe"):
			got = append(got, "probe")
		case strings.HasSuffix(n, "-delete-webhook"):
			got = append(got, "delete-webhook")
		default:
			got = append(got, n)
		}
	}
	if !slices.Equal(got, want) {
		problems = append(problems, fmt.Sprintf("hook Jobs %v, expected %v", got, want))
	}
	for _, j := range jobs {
		if strings.HasSuffix(j.Name, "-probe") {
			problems = append(problems, r.checkProbe(j)...)
		}
	}
	return problems
}

// probeCall is one line of the probe's script: the path it posts to and the
// environment variable that carries the review.
var probeCall = regexp.MustCompile(`(?m)^\s*probe (\S+) "\$(\w+)"$`)

// checkProbe: the probe posts, to every path of the webhook table and to no
// other, a review the API server could send there, for the uid the script
// waits for: one of the row's resources with its kind, one of its operations
// on it, in a namespace the rendered webhook selects (none for a cluster
// resource).
func (r *rendered) checkProbe(j *batchv1.Job) []string {
	var problems []string
	if len(j.Spec.Template.Spec.Containers) != 1 || len(j.Spec.Template.Spec.Containers[0].Command) == 0 {
		return []string{"the probe Job has no one container with a script"}
	}
	c := &j.Spec.Template.Spec.Containers[0]
	script := c.Command[len(c.Command)-1]
	m := regexp.MustCompile(`'"uid":"([^"]+)"'`).FindStringSubmatch(script)
	if m == nil {
		return []string{"the probe's script waits for no uid"}
	}
	uid := m[1]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	posts := map[string]string{}
	for _, call := range probeCall.FindAllStringSubmatch(script, -1) {
		posts[call[1]] = call[2]
	}
	v := r.vwc(&problems)
	for i := range webhook.Webhooks {
		row := &webhook.Webhooks[i]
		name, ok := posts[row.Path]
		delete(posts, row.Path)
		if !ok {
			problems = append(problems, "the probe Job does not post to "+row.Path)
			continue
		}
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal([]byte(env[name]), &review); err != nil || review.Request == nil {
			problems = append(problems, fmt.Sprintf("%s: the probe's $%s is no AdmissionReview request (%v): %.80q", row.Path, name, err, env[name]))
			continue
		}
		req := review.Request
		if string(req.UID) != uid {
			problems = append(problems, fmt.Sprintf("%s: the probe's review has uid %q, its script waits for %q", row.Path, req.UID, uid))
		}
		resource := req.Resource.Resource
		if req.SubResource != "" {
			resource += "/" + req.SubResource
		}
		sent := slices.IndexFunc(row.Resources, func(res webhook.Resource) bool {
			return res.Group == req.Resource.Group && res.Version == req.Resource.Version && res.Resource == resource &&
				res.Kind.Group == req.Kind.Group && res.Kind.Version == req.Kind.Version && res.Kind.Kind == req.Kind.Kind
		})
		if sent < 0 {
			problems = append(problems, fmt.Sprintf("%s: the probe's review is of %s %s, which %s does not review", row.Path, resource, req.Kind.Kind, row.Name))
			continue
		}
		if !slices.Contains(row.OperationsOf(row.Resources[sent]), req.Operation) {
			problems = append(problems, fmt.Sprintf("%s: the probe's review is a %s, which %s does not review", row.Path, req.Operation, row.Name))
		}
		var selected []string
		w := hook(v, row.Name)
		if w != nil {
			selected, _ = namespacesSelected(w.NamespaceSelector)
		}
		if w == nil && row.Optional {
			continue // not rendered: any namespace will do for the probe
		}
		if (row.Namespaces == webhook.AnyNamespace) != (req.Namespace == "") || (req.Namespace != "" && !slices.Contains(selected, req.Namespace)) {
			problems = append(problems, fmt.Sprintf("%s: the probe's review is in namespace %q, the webhook selects %v", row.Path, req.Namespace, selected))
		}
	}
	for p := range posts {
		problems = append(problems, "the probe Job posts to "+p+", which is no path of the webhook table")
	}
	return problems
}
