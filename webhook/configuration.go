package webhook

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Webhook names: the audit log keys our annotations as "<name>/<key>".
const (
	WebhookPlans   = "plans.gpu-upgrade-gate.io"
	WebhookNodes   = "nodes.gpu-upgrade-gate.io"
	WebhookRecords = "records.gpu-upgrade-gate.io"
)

// ConfigurationOptions say how the API server reaches the webhook.
type ConfigurationOptions struct {
	Name string
	// ClientConfig returns the client config for a handler path (a Service
	// in a cluster, a URL in tests).
	ClientConfig      func(path string) admissionregistrationv1.WebhookClientConfig
	NodeFailurePolicy admissionregistrationv1.FailurePolicyType
	TimeoutSeconds    int32
}

// Configuration is the ValidatingWebhookConfiguration the chart renders:
// Plans fail closed in the SUC namespaces only; Node updates reach the
// webhook only for label changes or an uncordon on GPU nodes by identities
// that are neither kubelets nor exempt system controllers; record ConfigMaps
// only in the gate's namespace. Leases, endpoints and kube-system are never
// matched.
func Configuration(cfg *gate.Config, o ConfigurationOptions) *admissionregistrationv1.ValidatingWebhookConfiguration {
	none := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	equivalent := admissionregistrationv1.Equivalent
	timeout := o.TimeoutSeconds
	nodePolicy := o.NodeFailurePolicy
	namespaced, cluster := admissionregistrationv1.NamespacedScope, admissionregistrationv1.ClusterScope
	hook := func(name, path string, policy *admissionregistrationv1.FailurePolicyType, rule admissionregistrationv1.RuleWithOperations) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name: name, ClientConfig: o.ClientConfig(path), Rules: []admissionregistrationv1.RuleWithOperations{rule},
			FailurePolicy: policy, MatchPolicy: &equivalent, SideEffects: &none, TimeoutSeconds: &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}
	}
	rule := func(group, resource string, scope admissionregistrationv1.ScopeType, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.RuleWithOperations {
		return admissionregistrationv1.RuleWithOperations{Operations: ops, Rule: admissionregistrationv1.Rule{
			APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: []string{resource}, Scope: &scope}}
	}
	inNamespaces := func(ns ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: ns}}}
	}
	plans := hook(WebhookPlans, PathPlans, &fail, rule("upgrade.cattle.io", "plans", namespaced, admissionregistrationv1.Create, admissionregistrationv1.Update))
	plans.NamespaceSelector = inNamespaces(cfg.SUCNamespaces...)

	nodes := hook(WebhookNodes, PathNodes, &nodePolicy, rule("", "nodes", cluster, admissionregistrationv1.Update))
	nodes.MatchConditions = NodeMatchConditions(cfg)

	records := hook(WebhookRecords, PathRecords, &fail, rule("", "configmaps", namespaced, admissionregistrationv1.Create, admissionregistrationv1.Update))
	records.NamespaceSelector = inNamespaces(cfg.Namespace)
	records.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{qualification.ConfigMapLabel: "true"}}

	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{plans, nodes, records},
	}
}

// NodeMatchConditions keep Node traffic near zero: kubelet status and label
// writes, cordons, annotation and taint churn, non-GPU nodes and the exempt
// system controllers never leave the API server.
func NodeMatchConditions(cfg *gate.Config) []admissionregistrationv1.MatchCondition {
	var gpuKeys, users []string
	for _, v := range cfg.GPUVendors {
		for _, k := range []string{"pci-" + v, "pci-0300_" + v, "pci-0302_" + v} {
			gpuKeys = append(gpuKeys, fmt.Sprintf("'feature.node.kubernetes.io/%s.present'", k))
		}
	}
	gpuKeys = append(gpuKeys, "'nvidia.com/gpu.present'")
	for _, e := range cfg.Exemptions {
		for _, r := range e.Resources {
			if r == "nodes" && len(e.Groups) == 0 && len(e.MatchLabels) == 0 && len(e.Namespaces) == 0 {
				for _, u := range e.Users {
					users = append(users, "'"+u+"'")
				}
			}
		}
	}
	conds := []admissionregistrationv1.MatchCondition{
		{Name: "not-a-kubelet", Expression: "!('system:nodes' in request.userInfo.groups)"},
		{Name: "gpu-node", Expression: fmt.Sprintf("[%s].exists(k, k in object.metadata.?labels.orValue({}) || k in oldObject.metadata.?labels.orValue({}))", strings.Join(gpuKeys, ", "))},
		{Name: "labels-changed-or-uncordon", Expression: "object.metadata.?labels.orValue({}) != oldObject.metadata.?labels.orValue({}) || (oldObject.spec.?unschedulable.orValue(false) && !object.spec.?unschedulable.orValue(false))"},
	}
	if len(users) > 0 {
		conds = append(conds, admissionregistrationv1.MatchCondition{Name: "not-a-system-controller", Expression: fmt.Sprintf("!(request.userInfo.username in [%s])", strings.Join(users, ", "))})
	}
	return conds
}
