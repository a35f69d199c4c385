package webhook

import (
	"context"
	"maps"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// Webhook names, as the API server knows them: it keys our audit annotations
// as "<name>/<key>" and prefixes denials with `admission webhook "<name>"
// denied the request`.
const (
	WebhookPlans              = "plans.gpu-upgrade-gate.io"
	WebhookNodes              = "nodes.gpu-upgrade-gate.io"
	WebhookCompletions        = "completions.gpu-upgrade-gate.io"
	WebhookRecords            = "records.gpu-upgrade-gate.io"
	WebhookHalts              = "halts.gpu-upgrade-gate.io"
	WebhookDriver             = "driver.gpu-upgrade-gate.io"
	WebhookDriverStep         = "driverstep.gpu-upgrade-gate.io"
	WebhookOperator           = "operator.gpu-upgrade-gate.io"
	WebhookJobs               = "jobs.gpu-upgrade-gate.io"
	WebhookPlanStatus         = "planstatus.gpu-upgrade-gate.io"
	WebhookDRAPlugins         = "dradaemonsets.gpu-upgrade-gate.io"
	WebhookNamespaces         = "namespaces.gpu-upgrade-gate.io"
	WebhookValidator          = "validatordaemonset.gpu-upgrade-gate.io"
	WebhookDRAWorkloads       = "draworkloads.gpu-upgrade-gate.io"
	WebhookOperatorDaemonSets = "operatordaemonsets.gpu-upgrade-gate.io"
)

// Paths the handlers are served on.
const (
	PathPlans              = "/validate/plans"
	PathNodes              = "/validate/nodes"
	PathCompletions        = "/validate/completions"
	PathRecords            = "/validate/records"
	PathHalts              = "/validate/halts"
	PathDriver             = "/validate/driver"
	PathDriverStep         = "/validate/driver-step"
	PathOperator           = "/validate/operator"
	PathJobs               = "/validate/jobs"
	PathPlanStatus         = "/validate/plan-status"
	PathDRAPlugins         = "/validate/dra-daemonsets"
	PathNamespaces         = "/validate/namespaces"
	PathValidator          = "/validate/validator-daemonset"
	PathDRAWorkloads       = "/validate/dra-workloads"
	PathOperatorDaemonSets = "/validate/operator-daemonsets"
)

// Webhook is one row of the webhook table: what the API server sends to one
// path and what answers it there. The server registers exactly these rows
// (handlers), and the chart's `webhooks:` entries are generated from them
// (templates/_webhooks.tpl, test/chart TestWebhooksTemplateIsGenerated).
type Webhook struct {
	Name, Path string
	// Metric is the resource label of the webhook's metrics and log lines.
	Metric string
	// Resources are what it reviews, each with the one kind it holds;
	// "nodes/status" is the status subresource, reviewed like the Node.
	Resources []Resource
	// Operations reviewed (a Resource may narrow them).
	Operations []admissionv1.Operation
	Scope      admissionregistrationv1.ScopeType
	// Reviews are the engine reviews decide runs; Contract (a file next to
	// this one) lists exactly their codes (TestCodeDocsAreGenerated generates the list).
	Reviews  []gate.Review
	Contract string
	decide   func(*Server, context.Context, admission.Request) (gate.Decision, error)

	// The rest is the chart's entry. FailurePolicy, unless the operator
	// sets it with the values key FailurePolicyValue.
	FailurePolicy      admissionregistrationv1.FailurePolicyType
	FailurePolicyValue string
	Namespaces         Namespaces
	// Optional: the chart renders the entry only when its Namespaces are
	// configured (a list value that may be empty); without them nothing is
	// there to review.
	Optional        bool
	ObjectSelector  *metav1.LabelSelector
	MatchConditions []MatchCondition
	// Why is the chart's comment above the entry: what reaches it, and why
	// it fails the way it does.
	Why string
}

// Resource is one resource a webhook reviews and the kind it must carry.
type Resource struct {
	schema.GroupVersionResource
	Kind schema.GroupVersionKind
	// Operations narrow the webhook's for this resource (nil: all of them).
	Operations []admissionv1.Operation
}

// Namespaces a namespaced webhook matches; the chart fills them in from
// its values.
type Namespaces string

const (
	AnyNamespace         Namespaces = ""
	SUCNamespaces        Namespaces = "config.sucNamespaces"
	ReleaseNamespace     Namespaces = "the release namespace"
	GPUOperatorNamespace Namespaces = "config.gpuOperator.namespace"
	// DRADriverNamespaces are the namespaces of the configured DRA drivers'
	// kubelet-plugin DaemonSets (config draDrivers), each once.
	DRADriverNamespaces Namespaces = "config.draDrivers"
	// DriverNamespaces are the namespaces GPU drivers run in, each once:
	// the GPU Operator's (config gpuOperator.namespace, and its validator's,
	// config proof.validator.namespace, the same unless configured apart)
	// and the DRA drivers' (DRADriverNamespaces).
	DriverNamespaces Namespaces = "config.gpuOperator.namespace, config.proof.validator.namespace and config.draDrivers"
	// ValidatorNamespace is the GPU Operator's validator DaemonSet's
	// (config proof.validator.namespace).
	ValidatorNamespace Namespaces = "config.proof.validator.namespace"
)

// Of names the namespaces in a configuration (nil: any).
func (n Namespaces) Of(cfg *gate.Config) []string {
	switch n {
	case SUCNamespaces:
		return cfg.SUCNamespaces
	case ReleaseNamespace:
		return []string{cfg.Namespace}
	case GPUOperatorNamespace:
		return []string{cfg.GPUOperator.Namespace}
	case ValidatorNamespace:
		return []string{cfg.Proof.Validator.Namespace}
	case DRADriverNamespaces:
		ns := []string{}
		for _, d := range cfg.DRADrivers {
			if !slices.Contains(ns, d.Namespace) {
				ns = append(ns, d.Namespace)
			}
		}
		return ns
	case DriverNamespaces:
		ns := OperatorNamespaces(cfg)
		for _, d := range DRADriverNamespaces.Of(cfg) {
			if !slices.Contains(ns, d) {
				ns = append(ns, d)
			}
		}
		return ns
	}
	return nil
}

// OperatorNamespaces are the GPU Operator's namespaces, each once: its
// own and its validator's (where the operator runs its operands); an
// unset validator namespace adds none.
func OperatorNamespaces(cfg *gate.Config) []string {
	ns := []string{cfg.GPUOperator.Namespace}
	if v := cfg.Proof.Validator.Namespace; v != "" && v != ns[0] {
		ns = append(ns, v)
	}
	return ns
}

// Rendered says whether the chart renders the row's entry for cfg.
func (w *Webhook) Rendered(cfg *gate.Config) bool {
	return !w.Optional || len(w.Namespaces.Of(cfg)) > 0
}

// MatchCondition is one CEL match condition of a webhook: CEL as it stands,
// or the chart template (in _helpers.tpl) that renders it from values.
type MatchCondition struct {
	Name     string
	CEL      string
	Template string
	// Optional: left out when Template renders nothing.
	Optional bool
	// Folded: written as a folded block (>-), one clause a line as CEL (or
	// the template) breaks it; a line indented further keeps its break.
	Folded bool
}

// OperationsOf are the operations reviewed on r.
func (w *Webhook) OperationsOf(r Resource) []admissionv1.Operation {
	if r.Operations != nil {
		return r.Operations
	}
	return w.Operations
}

var (
	opCreate, opUpdate, opDelete = admissionv1.Create, admissionv1.Update, admissionv1.Delete
	nodeGVK                      = corev1.SchemeGroupVersion.WithKind("Node")
	configMapGVK                 = corev1.SchemeGroupVersion.WithKind("ConfigMap")
	planGVK                      = upgradev1.SchemeGroupVersion.WithKind("Plan")
	namespaceGVK                 = corev1.SchemeGroupVersion.WithKind("Namespace")
	podGVK                       = corev1.SchemeGroupVersion.WithKind("Pod")
)

func resourceOf(gv schema.GroupVersion, res string, kind schema.GroupVersionKind) Resource {
	return Resource{GroupVersionResource: gv.WithResource(res), Kind: kind}
}

// nodeResources are Nodes and their status subresource: a label changed
// through either is the same write to the gate.
func nodeResources() []Resource {
	return []Resource{resourceOf(corev1.SchemeGroupVersion, "nodes", nodeGVK), resourceOf(corev1.SchemeGroupVersion, "nodes/status", nodeGVK)}
}

// namespaceController is the namespace controller's identity, as
// kube-controller-manager runs it with --use-service-account-credentials
// (kubeadm's default); without it, it shares system:kube-controller-manager
// with the garbage collector, whose deletes stay judged.
const namespaceController = "system:serviceaccount:kube-system:namespace-controller"

// garbageCollectors delete an object whose owner is gone: the
// kube-controller-manager's garbage collector, under its own ServiceAccount
// or the kube-controller-manager's identity.
var garbageCollectors = []string{"system:serviceaccount:kube-system:generic-garbage-collector", "system:kube-controller-manager"}

// podControllers are the kube-controller-manager's controllers that write
// Pods, ReplicaSets or Jobs from a template (Kubernetes' bootstrap RBAC
// policy binds each to the ServiceAccount of its name in kube-system, which
// it runs as with --use-service-account-credentials), and the
// kube-controller-manager's own identity without it. What they write
// follows a template that was judged when it was written.
var podControllers = []string{
	"system:kube-controller-manager",
	"system:serviceaccount:kube-system:daemon-set-controller",
	"system:serviceaccount:kube-system:deployment-controller",
	"system:serviceaccount:kube-system:replicaset-controller",
	"system:serviceaccount:kube-system:replication-controller",
	"system:serviceaccount:kube-system:statefulset-controller",
	"system:serviceaccount:kube-system:job-controller",
	"system:serviceaccount:kube-system:cronjob-controller",
}

// NotADRAControllerCondition is the match condition the chart's
// gug.notADRAController renders for cfg (test/chart holds them equal): the
// write is by none of the DRA drivers' configured controllers
// (config.draDrivers[].controllers) in their own driver's namespace, each
// matched as <namespace>/<username>.
func NotADRAControllerCondition(cfg *gate.Config) string {
	var q []string
	for _, d := range cfg.DRADrivers {
		for _, c := range d.Controllers {
			if l := celString(d.Namespace + "/" + c); !slices.Contains(q, l) {
				q = append(q, l)
			}
		}
	}
	return "!((request.namespace + '/' + request.userInfo.username) in [" + strings.Join(q, ", ") + "])"
}

// celString is a CEL string literal of s, as the chart's gug.celString
// quotes it.
func celString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// celNotAPodController: the write is by none of podControllers, nor by a
// kubelet (the mirror Pod of a static Pod, from a file on its node).
func celNotAPodController() string {
	q := make([]string, len(podControllers))
	for i, u := range podControllers {
		q[i] = "'" + u + "'"
	}
	return "!(request.userInfo.username in [" + strings.Join(q, ", ") + "]) && !('system:nodes' in request.userInfo.groups)"
}

// celUncordon: the write uncordons the node.
const celUncordon = "(oldObject.spec.?unschedulable.orValue(false) && !object.spec.?unschedulable.orValue(false))"

// celAnnotationChanged: the write sets, changes or removes annotation key.
func celAnnotationChanged(key string) string {
	return "object.metadata.?annotations.orValue({})[?'" + key + "'].orValue('') != oldObject.metadata.?annotations.orValue({})[?'" + key + "'].orValue('')"
}

// celSystemTaintWriter: the write is Kubernetes' own, by identity: a
// ServiceAccount of kube-system (the kube-controller-manager's controllers
// with --use-service-account-credentials, kubeadm's default: the
// node-lifecycle controller's condition taints, the taint-eviction
// controller; the cloud controllers' uninitialized and shutdown taints; a
// cluster autoscaler installed there; a Pod that can run as one of them is
// already cluster-admin), or a control-plane component authenticated by
// the cluster's client CA: the kube-controller-manager as its own user, and
// RKE2's and k3s's cloud controller manager, which lifts
// node.cloudprovider.kubernetes.io/uninitialized from every joining node
// as the user rke2-cloud-controller-manager (k3s-cloud-controller-manager),
// no ServiceAccount. The kubelets never reach the webhook at all
// (not-a-kubelet), nor do the exempt system controllers' taint writes
// (not-a-system-controller).
const celSystemTaintWriter = "request.userInfo.username.startsWith('system:serviceaccount:kube-system:') || request.userInfo.username in ['system:kube-controller-manager', 'rke2-cloud-controller-manager', 'k3s-cloud-controller-manager']"

// NodeChangeCondition is the Node webhook's "labels-taints-or-uncordon"
// match condition for the configured node-taint controllers outside
// kube-system (the chart's webhook.nodeTaintControllers, usernames).
func NodeChangeCondition(taintControllers []string) string {
	q := make([]string, len(taintControllers))
	for i, u := range taintControllers {
		q[i] = "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(u) + "'"
	}
	return NodeChangeConditionFor(strings.Join(q, ", "))
}

// NodeChangeConditionFor builds it with taintControllers, the body of a CEL
// list of string literals, spliced in; the chart's generated
// templates/_nodechange.tpl passes a Helm expression listing
// webhook.nodeTaintControllers (test/chart writes and checks it). A write is
// sent when it changes labels, uncordons, changes the moved-by or
// cordon-handover annotation, or changes a taint that can start or stop a
// DaemonSet's Pod on the node: adds a NoExecute taint (the DaemonSet
// controller deletes a Pod that does not tolerate it) or lifts a
// NoSchedule or NoExecute one (it creates one there), each compared as
// key, effect and value. A NoSchedule taint added keeps every running Pod,
// and PreferNoSchedule binds no DaemonSet Pod: never sent. Which taint
// writes stay away is decided by who writes, never by the key: the system's
// (celSystemTaintWriter) and the configured node-taint controllers'
// (autoscalers, health agents) never wait on the gate for a taint, while a
// person's is sent whatever its key says, node.kubernetes.io/ and the
// configured out-of-service taints included: a made-up
// node.kubernetes.io/ key, or the out-of-service taint on a live node,
// evicts the DRA kubelet plugin like any NoExecute taint.
func NodeChangeConditionFor(taintControllers string) string {
	in := func(obj string) string {
		return "[t.key, t.effect, t.?value.orValue('')] in " + obj + ".spec.?taints.orValue([]).map(o, [o.key, o.effect, o.?value.orValue('')])"
	}
	added := "object.spec.?taints.orValue([]).exists(t, t.effect == 'NoExecute' && !(" + in("oldObject") + "))"
	lifted := "oldObject.spec.?taints.orValue([]).exists(t, t.effect in ['NoSchedule', 'NoExecute'] && !(" + in("object") + "))"
	byPerson := "!(" + celSystemTaintWriter + " || request.userInfo.username in [" + taintControllers + "])"
	return "object.metadata.?labels.orValue({}) != oldObject.metadata.?labels.orValue({}) || " + celUncordon + " || " + celAnnotationChanged(gate.AnnotationMovedBy) + " || " + celAnnotationChanged(gate.AnnotationCordonHandover) +
		" || (" + byPerson + " && (" + added + " || " + lifted + "))"
}

// Webhooks is the webhook table, in the chart's order.
var Webhooks = []Webhook{{
	Name: WebhookPlans, Path: PathPlans, Metric: "plans", Contract: "plans.md",
	Reviews:   []gate.Review{gate.ReviewPlan, gate.ReviewPlanNudge, gate.ReviewAdmission},
	decide:    (*Server).decidePlan,
	Resources: []Resource{resourceOf(upgradev1.SchemeGroupVersion, "plans", planGVK)}, Operations: []admissionv1.Operation{opCreate, opUpdate},
	Scope: admissionregistrationv1.NamespacedScope, Namespaces: SUCNamespaces, FailurePolicy: admissionregistrationv1.Fail,
	Why: "Plans, in the SUC namespaces only; fail closed.",
}, {
	Name: WebhookNodes, Path: PathNodes, Metric: "nodes", Contract: "nodes.md",
	Reviews:    []gate.Review{gate.ReviewNode, gate.ReviewNodeTaints, gate.ReviewModeStep, gate.ReviewPlan, gate.ReviewAdmission},
	decide:     (*Server).decideNode,
	Resources:  nodeResources(),
	Operations: []admissionv1.Operation{opUpdate}, Scope: admissionregistrationv1.ClusterScope,
	MatchConditions: []MatchCondition{
		{Name: "not-a-kubelet", CEL: "!('system:nodes' in request.userInfo.groups)"},
		{Name: "gpu-node", Template: "gug.gpuNodeCondition"},
		{Name: "labels-taints-or-uncordon", Template: "gug.nodeChangeCondition"},
		{Name: "not-a-system-controller", Template: "gug.nodeExemptCondition", Optional: true},
	},
	FailurePolicy: admissionregistrationv1.Fail, FailurePolicyValue: "webhook.nodeFailurePolicy",
	Why: "Label changes, uncordons and taint changes that can start or stop a DaemonSet's Pod\n" +
		"of GPU nodes by people (nodes/status too: a label changed through the status\n" +
		"subresource is reviewed like one changed through the Node); kubelets and the exempt\n" +
		"system controllers never reach it, nor do the system's and the configured node-taint\n" +
		"controllers' taint writes. Failure policy a value.",
}, {
	Name: WebhookCompletions, Path: PathCompletions, Metric: "completions", Contract: "completions.md",
	Reviews:    []gate.Review{gate.ReviewCompletion, gate.ReviewAdmission},
	decide:     (*Server).decideCompletion,
	Resources:  nodeResources(),
	Operations: []admissionv1.Operation{opUpdate}, Scope: admissionregistrationv1.ClusterScope,
	MatchConditions: []MatchCondition{
		{Name: "suc-service-account", Template: "gug.sucServiceAccount"},
		{Name: "gpu-node", Template: "gug.gpuNodeCondition"},
		{Name: "uncordon-or-marked-done", CEL: celUncordon + " || object.metadata.?labels.orValue({}).exists(k, k.startsWith('plan.upgrade.cattle.io/') && object.metadata.labels[k] != 'disabled' && oldObject.metadata.?labels.orValue({})[?k].orValue('') != object.metadata.labels[k])"},
	},
	FailurePolicy: admissionregistrationv1.Fail,
	Why: "SUC's completion write (webhook/completions.md): only SUC's uncordon or\n" +
		"plan-label completion of a GPU node reaches it (nodes/status too: a plan label\n" +
		"set through the status subresource marks the node done like one set through\n" +
		"the Node); every other SUC write keeps the Node webhook's exemption and never\n" +
		"waits on the gate.",
}, {
	Name: WebhookRecords, Path: PathRecords, Metric: "configmaps", Contract: "records.md",
	Reviews:   []gate.Review{gate.ReviewRecord, gate.ReviewAdmission},
	decide:    (*Server).decideRecord,
	Resources: []Resource{resourceOf(corev1.SchemeGroupVersion, "configmaps", configMapGVK)}, Operations: []admissionv1.Operation{opCreate, opUpdate},
	Scope: admissionregistrationv1.NamespacedScope, Namespaces: ReleaseNamespace,
	ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"gpu-upgrade-gate.io/qualification": "true"}},
	FailurePolicy:  admissionregistrationv1.Fail,
	Why:            "Qualification record ConfigMaps, in the release namespace only; fail closed.",
}, {
	Name: WebhookHalts, Path: PathHalts, Metric: "halts", Contract: "halts.md",
	Reviews:   []gate.Review{gate.ReviewHaltRecord, gate.ReviewAdmission},
	decide:    (*Server).decideHaltRecord,
	Resources: []Resource{resourceOf(corev1.SchemeGroupVersion, "configmaps", configMapGVK)}, Operations: []admissionv1.Operation{opCreate, opUpdate, opDelete},
	Scope: admissionregistrationv1.NamespacedScope, Namespaces: ReleaseNamespace,
	MatchConditions: []MatchCondition{{Name: "halt-record", Template: "gug.haltRecordWrite"}},
	FailurePolicy:   admissionregistrationv1.Fail,
	Why: "The halt record (webhook/halts.md): every write of that one ConfigMap,\n" +
		"its deletion too, so a halt leaves it only by a reviewed clear.",
}, {
	Name: WebhookDriver, Path: PathDriver, Metric: "driver", Contract: "driver.md",
	Reviews: []gate.Review{gate.ReviewDriver, gate.ReviewAdmission},
	decide:  (*Server).decideDriver,
	Resources: []Resource{
		{GroupVersionResource: ClusterPolicyGVK.GroupVersion().WithResource("clusterpolicies"), Kind: ClusterPolicyGVK},
		{GroupVersionResource: NVIDIADriverGVK.GroupVersion().WithResource("nvidiadrivers"), Kind: NVIDIADriverGVK},
		{GroupVersionResource: GPUClusterGVK.GroupVersion().WithResource("gpuclusters"), Kind: GPUClusterGVK},
	},
	Operations: []admissionv1.Operation{opCreate, opUpdate, opDelete}, Scope: admissionregistrationv1.ClusterScope,
	MatchConditions: []MatchCondition{{Name: "driver-spec-changed", Folded: true, CEL: `request.operation != 'UPDATE' ||
(request.resource.resource == 'clusterpolicies' ?
  (object.?spec.?driver.orValue({}) != oldObject.?spec.?driver.orValue({}) ||
   object.?spec.?dcgmExporter.orValue({}) != oldObject.?spec.?dcgmExporter.orValue({}) ||
   object.?spec.?validator.orValue({}) != oldObject.?spec.?validator.orValue({})) :
 request.resource.resource == 'gpuclusters' ?
  object.?spec.?draDriver.orValue({}) != oldObject.?spec.?draDriver.orValue({}) :
  object.?spec.orValue({}) != oldObject.?spec.orValue({}))`}},
	FailurePolicy: admissionregistrationv1.Fail,
	Why: "The GPU Operator's driver path (webhook/driver.md): ClusterPolicy and NVIDIADriver\n" +
		"writes. CREATE and DELETE too: a new NVIDIADriver (or a ClusterPolicy deleted and\n" +
		"created again) loads a driver, a deleted one unloads it. An UPDATE reaches the\n" +
		"gate only when what runs on GPU nodes changes: the ClusterPolicy's driver or DCGM\n" +
		"exporter section (any field, so one a newer operator adds is judged too), its\n" +
		"validator section (the operator writes the validator DaemonSet from it), or an\n" +
		"NVIDIADriver's spec. The operator's own writes (status, finalizers, labels) never\n" +
		"do. A GPUCluster's DRA driver section too (its CREATE and DELETE: it loads\n" +
		"and removes the DRA driver). Deleting this webhook configuration still always\n" +
		"breaks glass.",
}, {
	Name: WebhookDriverStep, Path: PathDriverStep, Metric: "driver-step", Contract: "driverstep.md",
	Reviews:    []gate.Review{gate.ReviewDriverStep, gate.ReviewAdmission},
	decide:     (*Server).decideDriverStep,
	Resources:  nodeResources(),
	Operations: []admissionv1.Operation{opUpdate}, Scope: admissionregistrationv1.ClusterScope,
	MatchConditions: []MatchCondition{{Name: "driver-reload-starts", Folded: true, CEL: `object.metadata.?labels[?'nvidia.com/gpu-driver-upgrade-state'].orValue('') in ['pod-restart-required', 'post-maintenance-required'] &&
object.metadata.?labels[?'nvidia.com/gpu-driver-upgrade-state'].orValue('') != oldObject.metadata.?labels[?'nvidia.com/gpu-driver-upgrade-state'].orValue('')`}},
	FailurePolicy: admissionregistrationv1.Fail,
	Why: "The GPU Operator's per-node driver step: its upgrade controller moving a\n" +
		"node's nvidia.com/gpu-driver-upgrade-state label into pod-restart-required\n" +
		"(or post-maintenance-required) is the write after which it deletes that\n" +
		"node's driver Pod. Only that transition is sent, by whoever writes it, so\n" +
		"every other write of the operator, kubelets and people stays away. A\n" +
		"refusal keeps the node where it is; the operator retries on its own.",
}, {
	Name: WebhookOperator, Path: PathOperator, Metric: "operator", Contract: "operator.md",
	Reviews: []gate.Review{gate.ReviewOperator, gate.ReviewSubscription, gate.ReviewAdmission},
	decide:  (*Server).decideOperator,
	Resources: []Resource{
		resourceOf(appsv1.SchemeGroupVersion, "deployments", appsv1.SchemeGroupVersion.WithKind("Deployment")),
		resourceOf(InstallPlanGVK.GroupVersion(), "installplans", InstallPlanGVK),
		resourceOf(SubscriptionGVK.GroupVersion(), "subscriptions", SubscriptionGVK),
	},
	Operations: []admissionv1.Operation{opCreate, opUpdate}, Scope: admissionregistrationv1.NamespacedScope, Namespaces: GPUOperatorNamespace,
	MatchConditions: []MatchCondition{
		{Name: "operator-version-changes", Template: "gug.operatorVersionChanges", Folded: true},
		{Name: "not-olm", Template: "gug.notOLM", Optional: true},
	},
	FailurePolicy: admissionregistrationv1.Fail,
	Why: "An upgrade of the GPU Operator itself, in its namespace only: a new image\n" +
		"of its Deployment (helm upgrade; or the Deployment deleted and created\n" +
		"again), or the approval of an OLM InstallPlan for its CSV, at its creation\n" +
		"too (OLM creates it approved under automatic approval); and the spec of a\n" +
		"Subscription of its OLM package, which must say installPlanApproval: Manual.\n" +
		"OLM's own Deployment write after an approved InstallPlan stays away (the\n" +
		"approval was the reviewed step), and so does its creation of an approved\n" +
		"InstallPlan when config.allowAutomaticOperatorApproval gives that review up.",
}, {
	Name: WebhookJobs, Path: PathJobs, Metric: "jobs", Contract: "jobs.md",
	Reviews:   []gate.Review{gate.ReviewPlan, gate.ReviewSUCStep, gate.ReviewSUCJob, gate.ReviewAdmission},
	decide:    (*Server).decideJob,
	Resources: []Resource{resourceOf(batchv1.SchemeGroupVersion, "jobs", batchv1.SchemeGroupVersion.WithKind("Job"))}, Operations: []admissionv1.Operation{opCreate, opUpdate},
	Scope: admissionregistrationv1.NamespacedScope, Namespaces: SUCNamespaces,
	ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: upgradev1.LabelPlan, Operator: metav1.LabelSelectorOpExists}}},
	MatchConditions: []MatchCondition{
		{Name: "suc-starts-or-another-writes", Template: "gug.sucJobWrite"},
	},
	FailurePolicy: admissionregistrationv1.Fail,
	Why: "The per-node guard on SUC's upgrade Jobs (webhook/jobs.md). SUC creates each\n" +
		"node's Job paused (parallelism 0) and raises parallelism once the node is in\n" +
		"the Plan's status.applying; that write (or a Job created running) is the\n" +
		"moment a node's upgrade starts, and the only Job write sent here: Jobs SUC\n" +
		"labels with its Plan, in the SUC namespaces, written by a ServiceAccount of a\n" +
		"SUC namespace, starting now. SUC's paused creates, relabels and deletes, and\n" +
		"the Job controller's status writes, never wait on the gate. Anyone else's\n" +
		"create, relabel or start of a Job with SUC's labels is sent too and refused\n" +
		"(SUCJobForged): the gate reads such a Job as SUC's upgrade of its node. Fail:\n" +
		"while the gate is down, a node's upgrade stays paused and SUC retries.",
}, {
	Name: WebhookPlanStatus, Path: PathPlanStatus, Metric: "plans/status", Contract: "planstatus.md",
	Reviews:   []gate.Review{gate.ReviewPlanStatus, gate.ReviewAdmission},
	decide:    (*Server).decidePlanStatus,
	Resources: []Resource{resourceOf(upgradev1.SchemeGroupVersion, "plans/status", planGVK)}, Operations: []admissionv1.Operation{opUpdate},
	Scope: admissionregistrationv1.NamespacedScope, Namespaces: SUCNamespaces,
	MatchConditions: []MatchCondition{
		{Name: "not-suc", Template: "gug.notSUC"},
		{Name: "changes-status", CEL: "object.?status.?applying.orValue([]) != oldObject.?status.?applying.orValue([]) || object.?status.?conditions.orValue([]) != oldObject.?status.?conditions.orValue([]) || object.?status.?latestHash.orValue('') != oldObject.?status.?latestHash.orValue('') || object.?status.?latestVersion.orValue('') != oldObject.?status.?latestVersion.orValue('')"},
	},
	FailurePolicy: admissionregistrationv1.Fail,
	Why: "A Plan's status (webhook/planstatus.md) is SUC's record of its rollout, and\n" +
		"the gate relies on each of its four fields, so nobody but SUC may change it:\n" +
		"writes by anyone but a ServiceAccount of a SUC namespace that change applying,\n" +
		"conditions, latestHash or latestVersion. Fail: while the gate is down, only SUC\n" +
		"can change a Plan's status.",
}, {
	Name: WebhookDRAPlugins, Path: PathDRAPlugins, Metric: "dra-daemonsets", Contract: "dradaemonsets.md",
	Reviews:   []gate.Review{gate.ReviewDriver, gate.ReviewDRADaemonSet, gate.ReviewAdmission},
	decide:    (*Server).decideDriver,
	Resources: []Resource{resourceOf(appsv1.SchemeGroupVersion, "daemonsets", daemonSetGVK)}, Operations: []admissionv1.Operation{opCreate, opUpdate, opDelete},
	Scope: admissionregistrationv1.NamespacedScope, Namespaces: DRADriverNamespaces, Optional: true,
	MatchConditions: []MatchCondition{
		{Name: "dra-kubelet-plugin-or-another-daemonset", Template: "gug.draPluginOrAnotherDaemonSet"},
		// The whole Pod template: any change of it replaces the plugin Pod
		// on every node. updateStrategy, minReadySeconds and the like
		// restart nothing themselves.
		{Name: "created-deleted-or-template-changes", Folded: true, CEL: `request.operation != 'UPDATE' ||
object.spec.template != oldObject.spec.template ||
object.metadata.?labels[?'` + gate.LabelVersion + `'].orValue('') != oldObject.metadata.?labels[?'` + gate.LabelVersion + `'].orValue('')`},
		{Name: "not-gpu-operator", Template: "gug.notGPUOperator"},
		// The namespace controller deletes the plugin of a namespace whose
		// deletion the namespaces webhook judged, and deletes its Pods
		// whatever we answer: judged again, it would only hold the
		// namespace Terminating.
		{Name: "not-the-namespace-controller", CEL: "request.operation != 'DELETE' || request.userInfo.username != '" + namespaceController + "'"},
	},
	FailurePolicy: admissionregistrationv1.Fail,
	Why: "A DRA driver's kubelet plugin (webhook/dradaemonsets.md): the configured\n" +
		"draDrivers' DaemonSets, in their namespaces only, when one is created or\n" +
		"deleted, its Pod template changes in any field (the DaemonSet controller then\n" +
		"replaces the plugin on every node: an image is a new release, anything else\n" +
		"a restart; scheduling that no longer selects a node removes the driver\n" +
		"there), or its app.kubernetes.io/version label changes; and any other\n" +
		"DaemonSet created or whose Pod template changes there, which must not run\n" +
		"the driver's image, unless written by one of the driver's configured\n" +
		"controllers (config.draDrivers[].controllers; any other ServiceAccount of\n" +
		"the namespace is judged). The DaemonSet controller's status and the\n" +
		"writes of the GPU Operator's own ServiceAccounts\n" +
		"(webhook.gpuOperatorServiceAccounts, after its reviewed GPUCluster) and the\n" +
		"namespace controller's deletes (after the reviewed deletion of the namespace)\n" +
		"never reach the gate. Not rendered without config.draDrivers. Fail: while the\n" +
		"gate is down, the plugin DaemonSet can be neither changed nor deleted.",
}, {
	Name: WebhookNamespaces, Path: PathNamespaces, Metric: "namespaces", Contract: "namespaces.md",
	Reviews:   []gate.Review{gate.ReviewDriver, gate.ReviewAdmission},
	decide:    (*Server).decideNamespace,
	Resources: []Resource{resourceOf(corev1.SchemeGroupVersion, "namespaces", namespaceGVK)}, Operations: []admissionv1.Operation{opDelete},
	// A Namespace's own labels are what a namespaceSelector matches (its
	// kubernetes.io/metadata.name is its name), a DELETE's too.
	Scope: admissionregistrationv1.ClusterScope, Namespaces: DriverNamespaces,
	FailurePolicy: admissionregistrationv1.Fail,
	Why: "The deletion of a namespace GPU drivers run in (webhook/namespaces.md): the\n" +
		"namespace controller then deletes every Pod there on every node, and nothing\n" +
		"is created again in a terminating namespace. The GPU Operator's namespace\n" +
		"(config.gpuOperator.namespace, config.proof.validator.namespace) is judged\n" +
		"as the unload of every GPU node's driver, a DRA driver's (config.draDrivers)\n" +
		"as its plugin DaemonSet's deletion: held while their nodes hold GPUs or a\n" +
		"rollout is in flight. No other namespace's deletion reaches the gate. Fail:\n" +
		"while the gate is down, they stay.",
}, {
	Name: WebhookValidator, Path: PathValidator, Metric: "validator-daemonset", Contract: "validatordaemonset.md",
	Reviews:   []gate.Review{gate.ReviewValidator, gate.ReviewAdmission},
	decide:    (*Server).decideValidator,
	Resources: []Resource{resourceOf(appsv1.SchemeGroupVersion, "daemonsets", daemonSetGVK)}, Operations: []admissionv1.Operation{opCreate, opUpdate},
	Scope: admissionregistrationv1.NamespacedScope, Namespaces: ValidatorNamespace,
	MatchConditions: []MatchCondition{
		{Name: "validator-daemonset", Template: "gug.validatorDaemonSet"},
		{Name: "created-or-its-pods-change", CEL: "request.operation == 'CREATE' || object.spec.template.spec != oldObject.spec.template.spec || " +
			"object.spec.template.?metadata.?labels.orValue({}) != oldObject.spec.template.?metadata.?labels.orValue({})"},
		{Name: "not-gpu-operator", Template: "gug.notGPUOperator"},
	},
	FailurePolicy: admissionregistrationv1.Fail,
	Why: "The GPU Operator's validator DaemonSet (webhook/validatordaemonset.md): a\n" +
		"validator Pod proves a node when that DaemonSet's UID controls it, so only\n" +
		"the GPU Operator creates it or changes what its Pods run. Anyone else's\n" +
		"CREATE, or UPDATE of its Pods' spec or labels, is sent and refused; the\n" +
		"operator's own ServiceAccounts (webhook.gpuOperatorServiceAccounts) never\n" +
		"reach the gate, nor does kubectl rollout restart. Fail: while the gate is\n" +
		"down, only the GPU Operator writes it.",
}, {
	Name: WebhookDRAWorkloads, Path: PathDRAWorkloads, Metric: "dra-workloads", Contract: "draworkloads.md",
	Reviews: []gate.Review{gate.ReviewDRAWorkload, gate.ReviewAdmission},
	decide:  (*Server).decideDRAWorkload,
	Resources: []Resource{
		resourceOf(corev1.SchemeGroupVersion, "pods", podGVK),
		// The legacy ReplicaSet: it still runs Pods from a template.
		resourceOf(corev1.SchemeGroupVersion, "replicationcontrollers", corev1.SchemeGroupVersion.WithKind("ReplicationController")),
		// An ephemeral container is added to a running Pod through this
		// subresource alone.
		{GroupVersionResource: corev1.SchemeGroupVersion.WithResource("pods/ephemeralcontainers"), Kind: podGVK, Operations: []admissionv1.Operation{opUpdate}},
		resourceOf(appsv1.SchemeGroupVersion, "deployments", appsv1.SchemeGroupVersion.WithKind("Deployment")),
		resourceOf(appsv1.SchemeGroupVersion, "replicasets", appsv1.SchemeGroupVersion.WithKind("ReplicaSet")),
		resourceOf(appsv1.SchemeGroupVersion, "statefulsets", appsv1.SchemeGroupVersion.WithKind("StatefulSet")),
		resourceOf(batchv1.SchemeGroupVersion, "jobs", batchv1.SchemeGroupVersion.WithKind("Job")),
		resourceOf(batchv1.SchemeGroupVersion, "cronjobs", batchv1.SchemeGroupVersion.WithKind("CronJob")),
	},
	Operations: []admissionv1.Operation{opCreate, opUpdate},
	Scope:      admissionregistrationv1.NamespacedScope, Namespaces: DRADriverNamespaces, Optional: true,
	MatchConditions: []MatchCondition{
		{Name: "not-a-pod-controller", CEL: celNotAPodController()},
		// What the Pods run: a Pod's spec (its labels restart nothing), a
		// CronJob's Job template, another workload's Pod template.
		{Name: "created-or-pods-change", Folded: true, CEL: `request.operation == 'CREATE' ||
(request.resource.resource == 'pods' ? object.spec != oldObject.spec :
 request.resource.resource == 'cronjobs' ? object.spec.jobTemplate != oldObject.spec.jobTemplate :
 object.spec.template != oldObject.spec.template)`},
		{Name: "not-gpu-operator", Template: "gug.notGPUOperator"},
		{Name: "not-a-dra-driver-controller", Template: "gug.notADRAController"},
	},
	FailurePolicy: admissionregistrationv1.Fail,
	Why: "Anything else that runs Pods in a DRA driver's namespace (webhook/draworkloads.md):\n" +
		"a bare Pod (an ephemeral container added too), a Deployment, ReplicaSet,\n" +
		"ReplicationController, StatefulSet, Job or CronJob, created or its Pod template\n" +
		"changed, which must not run the driver's image with the node's filesystem in\n" +
		"reach (a second kubelet plugin). The kube-controller-manager's controllers\n" +
		"(their Pods follow a template judged here) and kubelets (static Pods) never\n" +
		"reach the gate, nor do the GPU Operator's own ServiceAccounts and the driver's\n" +
		"configured controllers (config.draDrivers[].controllers). Not rendered without\n" +
		"config.draDrivers. Fail: while the gate is down, only they run Pods there.",
}, {
	Name: WebhookOperatorDaemonSets, Path: PathOperatorDaemonSets, Metric: "operator-daemonsets", Contract: "operatordaemonsets.md",
	Reviews:   []gate.Review{gate.ReviewDriver, gate.ReviewAdmission},
	decide:    (*Server).decideOperatorDaemonSet,
	Resources: []Resource{resourceOf(appsv1.SchemeGroupVersion, "daemonsets", daemonSetGVK)}, Operations: []admissionv1.Operation{opDelete},
	Scope: admissionregistrationv1.NamespacedScope, Namespaces: GPUOperatorNamespace,
	MatchConditions: []MatchCondition{
		{Name: "not-gpu-operator", Template: "gug.notGPUOperator"},
		// The namespace controller deletes them in a namespace whose
		// deletion the namespaces webhook judged; the garbage collector
		// after their owner (the ClusterPolicy or NVIDIADriver, whose
		// deletion the driver webhook judged).
		{Name: "not-a-system-controller", CEL: "!(request.userInfo.username in ['" + namespaceController + "', '" + strings.Join(garbageCollectors, "', '") + "'])"},
	},
	FailurePolicy: admissionregistrationv1.Fail,
	Why: "A DaemonSet of the GPU Operator's namespace deleted by a person\n" +
		"(webhook/operatordaemonsets.md): its driver, device plugin or DCGM exporter\n" +
		"DaemonSet deleted unloads that operand from every GPU node at once, judged\n" +
		"as the namespace's deletion is (GPU holders, a rollout in flight). The GPU\n" +
		"Operator's own ServiceAccounts, the namespace controller and the garbage\n" +
		"collector never reach the gate. Fail: while the gate is down, they stay.",
}}

// CheckEnforcement refuses a per-webhook mode for a name that is none of
// the table's webhooks: a misspelt name would leave its webhook in the
// gate-wide mode, perhaps not enforcing where enforcement was meant.
func CheckEnforcement(cfg *gate.Config) field.ErrorList {
	known := make([]string, len(Webhooks))
	for i := range Webhooks {
		known[i] = Webhooks[i].Name
	}
	slices.Sort(known)
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(cfg.Enforcement.Webhooks)) {
		if !slices.Contains(known, name) {
			errs = append(errs, field.NotSupported(field.NewPath("enforcement", "webhooks").Key(name), name, known))
		}
	}
	return errs
}
