package chart

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/precondition"
)

var defaultExemptions = gate.DefaultExemptions("gpu-operator", "node-feature-discovery")

func defaults() expect {
	return expect{
		namespace: "gpu-upgrade-gate", replicas: 2, nodePolicy: admissionregistrationv1.Fail, timeout: 5,
		sucNamespaces: []string{"system-upgrade"}, gpuVendors: []string{"10de"}, exemptions: defaultExemptions,
		taintControllers:           []string{"system:serviceaccount:karpenter:karpenter"},
		sucServiceAccounts:         []string{"system:serviceaccount:system-upgrade:system-upgrade"},
		gpuOperatorServiceAccounts: []string{"system:serviceaccount:gpu-operator:gpu-operator"},
		antiAffinity:               true, zoneSpread: true, priorityClassName: "system-cluster-critical", nfd: true,
		gpuOperator: [2]string{"gpu-operator", "gpu-operator"}, dcgm: [2]string{"gpu-operator", "nvidia-dcgm-exporter"},
	}
}

// variants: the default values and every file in ci/, with what each must
// render. A ci/ file without an entry here fails TestEveryCIFileIsChecked.
var variants = map[string]func(e *expect){
	"": func(*expect) {},
	"own-ca-values.yaml": func(e *expect) {
		e.ownCA, e.probeHook = true, true
	},
	"ignore-node-policy-values.yaml": func(e *expect) {
		e.nodePolicy, e.timeout = admissionregistrationv1.Ignore, 3
		e.sucNamespaces = []string{"system-upgrade", "cattle-system"}
		e.gpuVendors = []string{"10de", "1002"}
		e.taintControllers = []string{"system:serviceaccount:cluster-autoscaler:cluster-autoscaler-clusterapi-cluster-autoscaler", "system:serviceaccount:medik8s:self-node-remediation"}
		e.dra = true
		e.draPlugins = []string{"nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin", "hami-system/hami-dra-kubelet-plugin", "nvidia-dra-driver-gpu/nvidia-dra-driver-mig-kubelet-plugin"}
		e.draNamespaces = []string{"nvidia-dra-driver-gpu", "hami-system"}
		e.draControllers = []string{"nvidia-dra-driver-gpu/system:serviceaccount:nvidia-dra-driver-gpu:nvidia-dra-driver-gpu-service-account-controller",
			"hami-system/system:serviceaccount:hami-system:hami-dra-controller"}
		e.draClaimsNamespace, e.checksNamespace = "gpu-checks", "gpu-checks"
		e.gpuOperatorServiceAccounts = []string{"system:serviceaccount:gpu-operator:gpu-operator", "system:serviceaccount:gpu-operator:gpu-operator-dra"}
		// platform-bots is narrowed by labels: no match condition
		e.creationGates = []gate.CreationGate{
			{Name: "gpu-shared-creation", Kind: gate.GateDeploymentEnv, Namespace: "kube-dc", Object: "kube-dc-manager", Key: "GPU_SHARED_CREATION_ENABLED", Closed: "false"},
			{Name: "gpu-vm-creation", Kind: gate.GateDeploymentEnv, Namespace: "kube-dc", Object: "kube-dc-manager", Container: "manager", Key: "GPU_VM_CREATION_ENABLED", Closed: "false"},
			{Name: "batch-switch", Kind: gate.GateConfigMapKey, Namespace: "batch-platform", Object: "gpu-switches", Key: "creation", Closed: "off"},
		}
		e.preconditions = []precondition.Precondition{
			{Name: "ceph-health", Kind: precondition.KindCEL, CEL: &precondition.CEL{Group: "ceph.rook.io", Version: "v1", Resource: "cephclusters", Namespace: "rook-ceph"}},
			{Name: "snapshot-classes", Kind: precondition.KindCEL, CEL: &precondition.CEL{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotclasses"}},
		}
		e.exemptions = []gate.Exemption{{Name: "system-controllers", Resources: []string{"nodes"},
			Users: []string{"system:serviceaccount:system-upgrade:system-upgrade", "system:serviceaccount:gpu-operator:gpu-operator"},
			Facts: []string{gate.FactPlanLabels, gate.FactGPUOperatorState, gate.FactCordon}}}
	},
	"networkpolicy-servicemonitor-values.yaml": func(e *expect) {
		e.networkPolicy, e.serviceMonitor, e.deleteHook = true, true, true
		e.prometheusRule, e.dashboard = true, "monitoring"
		e.webhookFrom, e.clientCA = []string{"10.0.0.10/32", "10.0.0.11/32"}, "apiserver-webhook-client-ca"
		e.dcgm = [2]string{"gpu-monitoring", "dcgm-exporter"}
	},
	"out-of-cluster-values.yaml": func(e *expect) {
		e.url = "https://127.0.0.1:9443"
		e.extraDNSNames, e.ipAddresses = []string{"gate.example.internal"}, []string{"127.0.0.1"}
	},
	"one-replica-values.yaml": func(e *expect) {
		e.replicas, e.antiAffinity, e.zoneSpread, e.priorityClassName, e.nfd = 1, false, false, "", false
	},
}

type renderResult struct {
	out []byte
	err error
}

var renders sync.Map // file -> renderResult

// rawRender renders a variant once per test binary.
func rawRender(t *testing.T, file string) []byte {
	t.Helper()
	if v, ok := renders.Load(file); ok {
		r := v.(renderResult)
		require.NoError(t, r.err)
		return r.out
	}
	o := Options{}
	if file != "" {
		dir, err := Dir()
		require.NoError(t, err)
		o.ValuesFiles = []string{filepath.Join(dir, "ci", file)}
	}
	out, err := Template(o)
	renders.Store(file, renderResult{out, err})
	require.NoError(t, err)
	return out
}

func load(t *testing.T, file string) *rendered {
	t.Helper()
	objs, err := Decode(rawRender(t, file))
	require.NoError(t, err)
	e := defaults()
	variants[file](&e)
	return &rendered{objs: objs, e: e}
}

func variantName(file string) string {
	if file == "" {
		return "default"
	}
	return strings.TrimSuffix(file, ".yaml")
}

func TestEveryCIFileIsChecked(t *testing.T) {
	dir, err := Dir()
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(dir, "ci", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		_, ok := variants[filepath.Base(f)]
		assert.True(t, ok, "ci/%s has no expectations in variants", filepath.Base(f))
	}
	assert.Len(t, variants, len(files)+1)
}

// TestSafety decodes every object each variant renders with the real API
// types and checks the safety properties.
func TestSafety(t *testing.T) {
	for file := range variants {
		t.Run(variantName(file), func(t *testing.T) {
			r := load(t, file)
			for _, p := range r.check() {
				t.Error(p)
			}
		})
	}
}

// TestDecodeIsStrict: an unknown kind, an unknown field or a duplicate key is
// an error, not something silently dropped.
func TestDecodeIsStrict(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown kind":  "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: x\n",
		"unknown field": "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: x\nspec:\n  maxUnavailabe: 1\n",
		"duplicate key": "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: x\n  name: y\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Decode([]byte("---\n# Source: x.yaml\n" + doc))
			assert.Error(t, err)
		})
	}
	objs, err := Decode([]byte("---\n# comments only\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: x\n"))
	require.NoError(t, err)
	assert.Len(t, objs, 1)
}

// TestRenderRefusals: values that would make the chart unsafe do not render.
func TestRenderRefusals(t *testing.T) {
	cases := map[string]struct {
		namespace string
		values    map[string]any
		want      string
	}{
		"kube-system release": {namespace: "kube-system", want: "not kube-system"},
		"SUC namespace kube-system": {values: map[string]any{"config": map[string]any{"sucNamespaces": []string{"kube-system"}}},
			want: "sucNamespaces"},
		"DRA driver in kube-system": {values: map[string]any{"config": map[string]any{"draDrivers": []any{
			map[string]any{"name": "gpu.nvidia.com", "namespace": "kube-system", "daemonSet": "nvidia-dra-driver-gpu-kubelet-plugin"}}}},
			want: "draDrivers"},
		"NVIDIA's DRA driver without its controllers": {values: map[string]any{"config": map[string]any{"draDrivers": []any{
			map[string]any{"name": "gpu.nvidia.com", "namespace": "nvidia-dra-driver-gpu", "daemonSet": "nvidia-dra-driver-gpu-kubelet-plugin"}}}},
			want: "config.draDrivers[0] (gpu.nvidia.com) names no controllers"},
		"a DRA driver's controllers as the namespace's group": {values: map[string]any{"config": map[string]any{"draDrivers": []any{
			map[string]any{"name": "gpu.nvidia.com", "namespace": "nvidia-dra-driver-gpu", "daemonSet": "nvidia-dra-driver-gpu-kubelet-plugin",
				"controllers": []any{"system:serviceaccounts:nvidia-dra-driver-gpu"}}}}},
			want: "controllers"},
		"CEL precondition on every resource": {values: map[string]any{"config": map[string]any{"preconditions": []any{
			map[string]any{"name": "all", "kind": "cel", "cel": map[string]any{"version": "v1", "resource": "*", "expression": "true"}}}}},
			want: "resource"},
		"CEL precondition in every group": {values: map[string]any{"config": map[string]any{"preconditions": []any{
			map[string]any{"name": "all", "kind": "cel", "cel": map[string]any{"group": "*", "version": "v1", "resource": "cephclusters", "expression": "true"}}}}},
			want: "group"},
		"own CA without bundle": {values: map[string]any{"tls": map[string]any{"certManager": map[string]any{"enabled": false}, "secretName": "x"}},
			want: "caBundle"},
		"own CA without Secret": {values: map[string]any{"tls": map[string]any{"certManager": map[string]any{"enabled": false}, "caBundle": "-----BEGIN CERTIFICATE-----\n"}},
			want: "secretName"},
		"the GPU Operator's ServiceAccount not in the validator's namespace": {values: map[string]any{"config": map[string]any{"proof": map[string]any{"validator": map[string]any{"namespace": "nvidia-gpu-operator"}}}},
			want: "webhook.gpuOperatorServiceAccounts names no ServiceAccount of config.proof.validator.namespace \"nvidia-gpu-operator\""},
		"timeout 30":              {values: map[string]any{"webhook": map[string]any{"timeoutSeconds": 30}}, want: "timeoutSeconds"},
		"node policy bogus":       {values: map[string]any{"webhook": map[string]any{"nodeFailurePolicy": "Maybe"}}, want: "nodeFailurePolicy"},
		"PDB blocking drains":     {values: map[string]any{"podDisruptionBudget": map[string]any{"maxUnavailable": 0}}, want: "maxUnavailable"},
		"unknown value":           {values: map[string]any{"replicas": 3}, want: "replicas"},
		"unknown config key":      {values: map[string]any{"config": map[string]any{"namespace": "elsewhere"}}, want: "namespace"},
		"exemption for everyone":  {values: map[string]any{"config": map[string]any{"exemptions": []any{map[string]any{"name": "all", "resources": []string{"plans"}}}}}, want: "exemptions"},
		"vendor not hex":          {values: map[string]any{"config": map[string]any{"gpuVendors": []string{"NVDA"}}}, want: "gpuVendors"},
		"image digest not sha256": {values: map[string]any{"image": map[string]any{"digest": "latest"}}, want: "digest"},
		"NetworkPolicy without the API server's addresses": {values: map[string]any{"networkPolicy": map[string]any{"enabled": true}}, want: "webhookFromCIDRs"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Template(Options{Namespace: tc.namespace, Values: tc.values})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestChecksCanFail breaks one property at a time in a good render and
// expects the checks to say so: every assertion above can fail.
func TestChecksCanFail(t *testing.T) {
	dep := func(objs []Object) *appsv1.Deployment { return Find[*appsv1.Deployment](objs)[0] }
	ctr := func(objs []Object) *corev1.Container { return &dep(objs).Spec.Template.Spec.Containers[0] }
	pdb := func(objs []Object) *policyv1.PodDisruptionBudget { return Find[*policyv1.PodDisruptionBudget](objs)[0] }
	vwc := func(objs []Object) *admissionregistrationv1.ValidatingWebhookConfiguration {
		return Find[*admissionregistrationv1.ValidatingWebhookConfiguration](objs)[0]
	}
	wh := func(objs []Object, name string) *admissionregistrationv1.ValidatingWebhook {
		return hook(vwc(objs), name+".gpu-upgrade-gate.io")
	}
	cr := func(objs []Object) *rbacv1.ClusterRole {
		for _, c := range Find[*rbacv1.ClusterRole](objs) {
			if !isHook(c) {
				return c
			}
		}
		return nil
	}
	role := func(objs []Object, suffix string) *rbacv1.Role {
		for _, r := range Find[*rbacv1.Role](objs) {
			if strings.HasSuffix(r.Name, suffix) {
				return r
			}
		}
		return nil
	}
	cert := func(objs []Object, isCA bool) *certmanagerv1.Certificate {
		for _, c := range Find[*certmanagerv1.Certificate](objs) {
			if c.Spec.IsCA == isCA {
				return c
			}
		}
		return nil
	}
	// nfdRule returns a copy of rule A; setNFDRules writes rules back.
	nfdRule := func(objs []Object) map[string]any {
		rules, _, _ := unstructured.NestedSlice(FindUnstructured(objs, NodeFeatureRule)[0].Object, "spec", "rules")
		return rules[0].(map[string]any)
	}
	setNFDRules := func(objs []Object, rules []any) {
		_ = unstructured.SetNestedSlice(FindUnstructured(objs, NodeFeatureRule)[0].Object, rules, "spec", "rules")
	}
	ns := func(values ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: values}}}
	}
	cases := []struct {
		name, variant string
		mutate        func(objs []Object)
		want          string
	}{
		// PDB
		{"PDB minAvailable", "", func(o []Object) { pdb(o).Spec.MinAvailable = ptr.To(intstr.FromInt32(1)) }, "minAvailable"},
		{"PDB maxUnavailable 0", "", func(o []Object) { pdb(o).Spec.MaxUnavailable = ptr.To(intstr.FromInt32(0)) }, "maxUnavailable"},
		{"PDB maxUnavailable percent", "", func(o []Object) { pdb(o).Spec.MaxUnavailable = ptr.To(intstr.FromString("10%")) }, "maxUnavailable"},
		{"PDB unhealthy pods", "", func(o []Object) { pdb(o).Spec.UnhealthyPodEvictionPolicy = nil }, "unhealthyPodEvictionPolicy"},
		{"PDB selects nothing", "", func(o []Object) { pdb(o).Spec.Selector.MatchLabels = map[string]string{"x": "y"} }, "PDB selector"},
		{"no PDB", "", func(o []Object) {
			for i := range o {
				if _, ok := o[i].Object.(*policyv1.PodDisruptionBudget); ok {
					o[i].Object = &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "gpu-upgrade-gate", Annotations: map[string]string{"helm.sh/hook": "x"}}}
				}
			}
		}, "exactly one PodDisruptionBudget"},
		// Pod security and resources
		{"privilege escalation", "", func(o []Object) { ctr(o).SecurityContext.AllowPrivilegeEscalation = ptr.To(true) }, "allowPrivilegeEscalation"},
		{"writable root", "", func(o []Object) { ctr(o).SecurityContext.ReadOnlyRootFilesystem = nil }, "readOnlyRootFilesystem"},
		{"capability added", "", func(o []Object) { ctr(o).SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"} }, "capabilities"},
		{"privileged", "", func(o []Object) { ctr(o).SecurityContext.Privileged = ptr.To(true) }, "privileged"},
		{"root user", "", func(o []Object) { dep(o).Spec.Template.Spec.SecurityContext.RunAsNonRoot = nil }, "runAsNonRoot"},
		{"no seccomp", "", func(o []Object) { dep(o).Spec.Template.Spec.SecurityContext.SeccompProfile = nil }, "seccompProfile"},
		{"host network", "", func(o []Object) { dep(o).Spec.Template.Spec.HostNetwork = true }, "host namespaces"},
		{"no memory limit", "", func(o []Object) { delete(ctr(o).Resources.Limits, corev1.ResourceMemory) }, "memory limit"},
		{"no Go memory limit", "", func(o []Object) { ctr(o).Env = nil }, "GUG_MEMORY_LIMIT"},
		{"hook container root", "own-ca-values.yaml", func(o []Object) {
			Find[*batchv1.Job](o)[0].Spec.Template.Spec.Containers[0].SecurityContext.RunAsUser = ptr.To(int64(0))
		}, "may run as root"},
		// Deployment
		{"replicas", "", func(o []Object) { dep(o).Spec.Replicas = ptr.To(int32(1)) }, "replicas"},
		{"no anti-affinity", "", func(o []Object) { dep(o).Spec.Template.Spec.Affinity = nil }, "anti-affinity"},
		{"no zone spread", "", func(o []Object) { dep(o).Spec.Template.Spec.TopologySpreadConstraints = nil }, "zone spread"},
		{"no priority class", "", func(o []Object) { dep(o).Spec.Template.Spec.PriorityClassName = "" }, "priorityClassName"},
		{"readiness on healthz", "", func(o []Object) { ctr(o).ReadinessProbe.HTTPGet.Path = "/healthz" }, "readiness probe"},
		{"liveness on metrics port", "", func(o []Object) { ctr(o).LivenessProbe.HTTPGet.Port = intstr.FromInt32(8080) }, "liveness probe"},
		{"no readiness probe", "", func(o []Object) { ctr(o).ReadinessProbe = nil }, "readiness probe"},
		{"probe address drift", "", func(o []Object) { ctr(o).Args = append(ctr(o).Args, "--health-probe-bind-address=:9000") }, "health-probe-bind-address"},
		{"serve port drift", "", func(o []Object) { ctr(o).Ports[0].ContainerPort = 9444 }, "--port"},
		{"surge only", "", func(o []Object) { dep(o).Spec.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1)) }, "maxUnavailable 0"},
		{"config not from the ConfigMap", "", func(o []Object) { dep(o).Spec.Template.Spec.Volumes[0].ConfigMap.Name = "elsewhere" }, "--config"},
		{"TLS from another Secret", "", func(o []Object) { dep(o).Spec.Template.Spec.Volumes[1].Secret.SecretName = "other" }, "--cert-dir"},
		{"runs as default SA", "", func(o []Object) { dep(o).Spec.Template.Spec.ServiceAccountName = "default" }, "run as"},
		{"object in default namespace", "", func(o []Object) { dep(o).Namespace = "default" }, "release namespace"},
		{"Service targets metrics", "", func(o []Object) {
			for _, s := range Find[*corev1.Service](o) {
				s.Spec.Ports[0].TargetPort = intstr.FromString("metrics")
			}
		}, "targetPort"},
		// RBAC
		{"Secrets readable", "", func(o []Object) {
			cr(o).Rules = append(cr(o).Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
		}, "Secrets"},
		{"ConfigMaps cluster-wide", "", func(o []Object) {
			cr(o).Rules = append(cr(o).Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}})
		}, "/configmaps in cluster"},
		{"nodes writable", "", func(o []Object) { cr(o).Rules[0].Verbs = append(cr(o).Rules[0].Verbs, "patch") }, "may patch /nodes"},
		{"pods read one by one", "", func(o []Object) { cr(o).Rules[2].Verbs = append(cr(o).Rules[2].Verbs, "get") }, "may get /pods"},
		{"wildcard", "", func(o []Object) { cr(o).Rules[0].Resources = []string{"*"} }, "wildcard"},
		{"leases readable cluster-wide", "", func(o []Object) {
			cr(o).Rules = append(cr(o).Rules, rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get"}})
		}, "it reads them only in its own place"},
		{"endpoints readable", "", func(o []Object) {
			cr(o).Rules = append(cr(o).Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"endpoints"}, Verbs: []string{"get"}})
		}, "does not read"},
		{"any ConfigMap writable", "", func(o []Object) { role(o, "-halts").Rules[0].ResourceNames = []string{"gpu-upgrade-gate-config"} }, "resourceNames"},
		{"any Deployment", "", func(o []Object) { role(o, "-gpu-operator").Rules[0].ResourceNames = nil }, "resourceNames"},
		{"no plan access", "", func(o []Object) { cr(o).Rules = cr(o).Rules[:1] }, "cannot read upgrade.cattle.io/plans"},
		{"binding to a group", "", func(o []Object) {
			b := Find[*rbacv1.ClusterRoleBinding](o)[0]
			b.Subjects = append(b.Subjects, rbacv1.Subject{Kind: "Group", Name: "system:authenticated"})
		}, "only the chart's own ServiceAccounts"},
		{"hook deletes any webhook configuration", "networkpolicy-servicemonitor-values.yaml", func(o []Object) {
			for _, c := range Find[*rbacv1.ClusterRole](o) {
				if isHook(c) {
					c.Rules[0].ResourceNames = nil
				}
			}
		}, "a hook may only delete"},
		// Webhooks
		{"plans/status", "", func(o []Object) { wh(o, "plans").Rules[0].Resources = []string{"plans", "plans/status"} }, "never subresources"},
		{"nodes/status only", "", func(o []Object) { wh(o, "nodes").Rules[0].Resources = []string{"nodes/status"} }, "expected /v1 nodes,nodes/status"},
		{"nodes/status dropped", "", func(o []Object) { wh(o, "nodes").Rules[0].Resources = []string{"nodes"} }, "expected /v1 nodes,nodes/status"},
		{"plan status also on plans", "", func(o []Object) { wh(o, "planstatus").Rules[0].Resources = []string{"plans", "plans/status"} }, "planstatus.gpu-upgrade-gate.io: rule"},
		{"plan status fails open", "", func(o []Object) { wh(o, "planstatus").FailurePolicy = ptr.To(admissionregistrationv1.Ignore) }, "planstatus.gpu-upgrade-gate.io: failurePolicy"},
		{"plan status everywhere", "", func(o []Object) { wh(o, "planstatus").NamespaceSelector = nil }, "planstatus.gpu-upgrade-gate.io: a namespaced rule needs a namespaceSelector"},
		{"leases matched", "", func(o []Object) { wh(o, "records").Rules[0].Resources = []string{"configmaps", "leases"} }, "leases"},
		{"DELETE matched", "", func(o []Object) {
			wh(o, "plans").Rules[0].Operations = append(wh(o, "plans").Rules[0].Operations, admissionregistrationv1.Delete)
		}, "DELETE"},
		{"plans fail open", "", func(o []Object) { wh(o, "plans").FailurePolicy = ptr.To(admissionregistrationv1.Ignore) }, "failurePolicy"},
		{"records fail open", "", func(o []Object) { wh(o, "records").FailurePolicy = ptr.To(admissionregistrationv1.Ignore) }, "failurePolicy"},
		{"node policy not the value", "ignore-node-policy-values.yaml", func(o []Object) { wh(o, "nodes").FailurePolicy = ptr.To(admissionregistrationv1.Fail) }, "failurePolicy"},
		{"kube-system Plans", "", func(o []Object) { wh(o, "plans").NamespaceSelector = ns("system-upgrade", "kube-system") }, "kube-system"},
		{"Plans everywhere", "", func(o []Object) { wh(o, "plans").NamespaceSelector = nil }, "namespaceSelector"},
		{"records everywhere", "", func(o []Object) {
			wh(o, "records").NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: metav1.LabelSelectorOpExists}}}
		}, "namespaceSelector"},
		{"records unlabelled", "", func(o []Object) { wh(o, "records").ObjectSelector = nil }, "objectSelector"},
		{"timeout 30", "", func(o []Object) { wh(o, "nodes").TimeoutSeconds = ptr.To(int32(30)) }, "timeoutSeconds"},
		{"side effects", "", func(o []Object) {
			wh(o, "plans").SideEffects = ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun)
		}, "sideEffects"},
		{"v1beta1 reviews", "", func(o []Object) { wh(o, "nodes").AdmissionReviewVersions = []string{"v1", "v1beta1"} }, "admissionReviewVersions"},
		{"matchPolicy Exact", "", func(o []Object) { wh(o, "plans").MatchPolicy = ptr.To(admissionregistrationv1.Exact) }, "matchPolicy"},
		{"webhook dropped", "", func(o []Object) { vwc(o).Webhooks = vwc(o).Webhooks[:2] }, "no webhook records"},
		{"other Service", "", func(o []Object) { wh(o, "plans").ClientConfig.Service.Name = "other" }, "clientConfig.service"},
		{"kubelets reach the webhook", "", func(o []Object) { wh(o, "nodes").MatchConditions = wh(o, "nodes").MatchConditions[1:] }, "match conditions"},
		{"exempt user missing", "", func(o []Object) {
			mc := wh(o, "nodes").MatchConditions
			mc[3].Expression = strings.Replace(mc[3].Expression, "'system:serviceaccount:system-upgrade:system-upgrade'", "'someone-else'", 1)
		}, "match conditions"},
		{"exempt group missing", "", func(o []Object) {
			mc := wh(o, "nodes").MatchConditions
			mc[3].Expression = strings.Replace(mc[3].Expression, "'system:serviceaccounts:node-feature-discovery'", "'system:serviceaccounts:nfd'", 1)
		}, "match conditions"},
		{"GPU-node condition not the engine's", "", func(o []Object) {
			mc := wh(o, "nodes").MatchConditions
			mc[1].Expression = strings.Replace(mc[1].Expression, "'nvidia.com/gpu.product', ", "", 2)
		}, "match conditions"},
		{"taint changes never sent", "", func(o []Object) {
			mc := wh(o, "nodes").MatchConditions
			mc[2].Expression, _, _ = strings.Cut(mc[2].Expression, " || (!(request.userInfo")
		}, "match conditions"},
		{"a configured node-taint controller's taints sent", "ignore-node-policy-values.yaml", func(o []Object) {
			mc := wh(o, "nodes").MatchConditions
			mc[2].Expression = strings.ReplaceAll(mc[2].Expression, ", 'system:serviceaccount:medik8s:self-node-remediation'", "")
		}, "match conditions"},
		{"a person escapes by a key's spelling", "", func(o []Object) {
			mc := wh(o, "nodes").MatchConditions
			mc[2].Expression = strings.ReplaceAll(mc[2].Expression, "t.effect == 'NoExecute' && ", "t.effect == 'NoExecute' && !t.key.startsWith('node.kubernetes.io/') && ")
		}, "match conditions"},
		{"GPU-node condition on the new object only", "", func(o []Object) {
			mc := wh(o, "nodes").MatchConditions
			mc[1].Expression, _, _ = strings.Cut(mc[1].Expression, " || oldObject.metadata")
		}, "match conditions"},
		{"DRA plugins in kube-system", "ignore-node-policy-values.yaml", func(o []Object) {
			wh(o, "dradaemonsets").NamespaceSelector = ns("nvidia-dra-driver-gpu", "kube-system")
		}, "kube-system"},
		{"every DaemonSet of the DRA namespaces", "ignore-node-policy-values.yaml", func(o []Object) {
			wh(o, "dradaemonsets").MatchConditions = wh(o, "dradaemonsets").MatchConditions[1:]
		}, "the DRA plugin webhook must match only"},
		{"DRA plugin metadata edits sent", "ignore-node-policy-values.yaml", func(o []Object) {
			wh(o, "dradaemonsets").MatchConditions[1].Expression = "true"
		}, "the DRA plugin webhook must match only"},
		{"the DRA driver's controllers' DaemonSets sent", "ignore-node-policy-values.yaml", func(o []Object) {
			mc := wh(o, "dradaemonsets").MatchConditions
			mc[0].Expression, _, _ = strings.Cut(mc[0].Expression, " || (request.operation != 'DELETE'")
		}, "the DRA plugin webhook must match only"},
		{"every ServiceAccount of a DRA driver's namespace exempt again", "ignore-node-policy-values.yaml", func(o []Object) {
			mc := wh(o, "dradaemonsets").MatchConditions
			before, _, _ := strings.Cut(mc[0].Expression, " || (request.operation != 'DELETE'")
			mc[0].Expression = before + " || (request.operation != 'DELETE' && !(('system:serviceaccounts:' + request.namespace) in request.userInfo.groups))"
		}, "the DRA plugin webhook must match only"},
		{"the ReplicaSet controller's Pods sent to the DRA workload webhook", "ignore-node-policy-values.yaml", func(o []Object) {
			wh(o, "draworkloads").MatchConditions = wh(o, "draworkloads").MatchConditions[1:]
		}, "the DRA workload webhook must match only"},
		{"a DRA driver's controller exempt in every namespace", "ignore-node-policy-values.yaml", func(o []Object) {
			wh(o, "draworkloads").MatchConditions[3].Expression = "!(request.userInfo.username in ['system:serviceaccount:nvidia-dra-driver-gpu:nvidia-dra-driver-gpu-service-account-controller'])"
		}, "the DRA workload webhook must match only"},
		{"the garbage collector waits on the gate for the operator's DaemonSets", "", func(o []Object) {
			wh(o, "operatordaemonsets").MatchConditions = wh(o, "operatordaemonsets").MatchConditions[:1]
		}, "the operator DaemonSet webhook must match only"},
		{"the operator's DaemonSets deleted unreviewed", "", func(o []Object) {
			v := vwc(o)
			v.Webhooks = slices.DeleteFunc(v.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool {
				return w.Name == "operatordaemonsets.gpu-upgrade-gate.io"
			})
		}, "no webhook operatordaemonsets.gpu-upgrade-gate.io"},
		{"DRA workloads' deletes sent", "ignore-node-policy-values.yaml", func(o []Object) {
			wh(o, "draworkloads").Rules[0].Operations = append(wh(o, "draworkloads").Rules[0].Operations, admissionregistrationv1.Delete)
		}, "only CREATE and UPDATE"},
		{"the namespace controller waits on the gate", "ignore-node-policy-values.yaml", func(o []Object) {
			wh(o, "dradaemonsets").MatchConditions = wh(o, "dradaemonsets").MatchConditions[:3]
		}, "the DRA plugin webhook must match only"},
		{"DRA namespaces deleted unreviewed", "ignore-node-policy-values.yaml", func(o []Object) {
			v := vwc(o)
			v.Webhooks = slices.DeleteFunc(v.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool {
				return w.Name == "namespaces.gpu-upgrade-gate.io"
			})
		}, "no webhook namespaces.gpu-upgrade-gate.io"},
		{"every namespace's deletion sent", "ignore-node-policy-values.yaml", func(o []Object) {
			wh(o, "namespaces").NamespaceSelector = nil
		}, "namespaces.gpu-upgrade-gate.io: namespaces [], expected"},
		{"the GPU Operator's namespace deleted unreviewed", "", func(o []Object) {
			wh(o, "namespaces").NamespaceSelector.MatchExpressions[0].Values = []string{"nvidia-dra-driver-gpu"}
		}, "namespaces.gpu-upgrade-gate.io: namespaces [nvidia-dra-driver-gpu], expected [gpu-operator]"},
		{"the namespaces webhook left out without DRA drivers", "", func(o []Object) {
			v := vwc(o)
			v.Webhooks = slices.DeleteFunc(v.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool {
				return w.Name == "namespaces.gpu-upgrade-gate.io"
			})
		}, "no webhook namespaces.gpu-upgrade-gate.io"},
		{"the GPU Operator's validator write sent", "", func(o []Object) {
			wh(o, "validatordaemonset").MatchConditions = wh(o, "validatordaemonset").MatchConditions[:2]
		}, "the validator webhook must match only"},
		{"GPU Operator's DaemonSet write sent", "ignore-node-policy-values.yaml", func(o []Object) {
			wh(o, "dradaemonsets").MatchConditions = wh(o, "dradaemonsets").MatchConditions[:2]
		}, "the DRA plugin webhook must match only"},
		{"every ServiceAccount of the GPU Operator's namespace exempt from the DRA plugin webhook", "ignore-node-policy-values.yaml", func(o []Object) {
			wh(o, "dradaemonsets").MatchConditions[2].Expression = "!request.userInfo.username.startsWith('system:serviceaccount:gpu-operator:')"
		}, "the DRA plugin webhook must match only"},
		{"DRA plugin deletes not sent", "ignore-node-policy-values.yaml", func(o []Object) {
			wh(o, "dradaemonsets").Rules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
		}, "dradaemonsets.gpu-upgrade-gate.io: operations [CREATE UPDATE], expected [CREATE UPDATE DELETE]"},
		{"ResourceClaims read cluster-wide though the checks' namespace is set", "ignore-node-policy-values.yaml", func(o []Object) {
			c := cr(o)
			c.Rules = append(c.Rules, rbacv1.PolicyRule{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims"}, Verbs: []string{"list", "watch"}})
		}, "may read resource.k8s.io/resourceclaims in cluster"},
		{"check Jobs unreadable", "ignore-node-policy-values.yaml", func(o []Object) {
			role(o, "-checks").Rules = nil
		}, "cannot read batch/jobs in gpu-checks"},
		{"check Jobs read in another namespace", "ignore-node-policy-values.yaml", func(o []Object) {
			role(o, "-checks").Namespace = "ml"
		}, "namespace \"ml\""},
		{"DRA drivers' DaemonSets unreadable", "ignore-node-policy-values.yaml", func(o []Object) {
			r := role(o, "-dra")
			r.Rules = r.Rules[1:]
		}, "cannot read apps/daemonsets (dra)"},
		{"DRA plugin webhook without DRA drivers", "", func(o []Object) {
			w := vwc(o).Webhooks[0].DeepCopy()
			w.Name = "dradaemonsets.gpu-upgrade-gate.io"
			vwc(o).Webhooks = append(vwc(o).Webhooks, *w)
		}, "rendered without config.draDrivers"},
		// TLS
		{"no injection", "", func(o []Object) { vwc(o).Annotations = nil }, "inject-ca-from"},
		{"injection from the CA", "", func(o []Object) {
			vwc(o).Annotations["cert-manager.io/inject-ca-from"] = "gpu-upgrade-gate/" + cert(o, true).Name
		}, "inject-ca-from"},
		{"serving cert self-signed", "", func(o []Object) { cert(o, false).Spec.IssuerRef.Name = "gpu-upgrade-gate-selfsigned" }, "CA Issuer"},
		{"dnsNames short", "", func(o []Object) { cert(o, false).Spec.DNSNames = cert(o, false).Spec.DNSNames[:2] }, "dnsNames"},
		{"CA not a CA", "", func(o []Object) { cert(o, true).Spec.IsCA = false }, "CA Certificate"},
		{"renewBefore unset", "", func(o []Object) { cert(o, false).Spec.RenewBefore = nil }, "renewBefore"},
		{"own CA garbage", "own-ca-values.yaml", func(o []Object) { wh(o, "plans").ClientConfig.CABundle = []byte("not a pem") }, "caBundle"},
		// NodeFeatureRule
		{"labels template", "", func(o []Object) {
			r := nfdRule(o)
			r["labelsTemplate"] = "{{ range .pci.device }}pci-{{ .vendor }}_{{ .device }}.present=true\n{{ end }}\n"
			setNFDRules(o, []any{r})
		}, "labelsTemplate"},
		{"rule B", "", func(o []Object) {
			setNFDRules(o, []any{nfdRule(o), map[string]any{"name": "compat", "labels": map[string]any{"feature.node.kubernetes.io/pci-10de.present": "true"}}})
		}, "rule A only"},
		{"static labels", "", func(o []Object) {
			r := nfdRule(o)
			r["labels"] = map[string]any{"nvidia.com/gpu.present": "true"}
			setNFDRules(o, []any{r})
		}, "untouched"},
		{"vendor drift", "", func(o []Object) {
			r := nfdRule(o)
			_ = unstructured.SetNestedStringSlice(r["matchFeatures"].([]any)[0].(map[string]any), []string{"1002"}, "matchExpressions", "vendor", "value")
			setNFDRules(o, []any{r})
		}, "vendor"},
		// NetworkPolicy, ServiceMonitor, hooks
		{"webhook port behind a selector", "networkpolicy-servicemonitor-values.yaml", func(o []Object) {
			np := Find[*networkingv1.NetworkPolicy](o)[0]
			np.Spec.Ingress[0].From = append(np.Spec.Ingress[0].From, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}})
		}, "not an API server address"},
		{"webhook port open to any source", "networkpolicy-servicemonitor-values.yaml", func(o []Object) {
			Find[*networkingv1.NetworkPolicy](o)[0].Spec.Ingress[0].From = nil
		}, "webhook port to any source"},
		{"webhook port open to another address", "networkpolicy-servicemonitor-values.yaml", func(o []Object) {
			Find[*networkingv1.NetworkPolicy](o)[0].Spec.Ingress[0].From[0].IPBlock.CIDR = "0.0.0.0/0"
		}, "API server's addresses"},
		{"client CA not mounted", "networkpolicy-servicemonitor-values.yaml", func(o []Object) {
			for i, v := range dep(o).Spec.Template.Spec.Volumes {
				if v.ConfigMap != nil && v.ConfigMap.Name == "apiserver-webhook-client-ca" {
					dep(o).Spec.Template.Spec.Volumes[i].ConfigMap.Name = "other"
				}
			}
		}, "--client-ca"},
		{"metrics open to all", "networkpolicy-servicemonitor-values.yaml", func(o []Object) {
			Find[*networkingv1.NetworkPolicy](o)[0].Spec.Ingress[1].From = nil
		}, "metrics to any source"},
		{"no DNS", "networkpolicy-servicemonitor-values.yaml", func(o []Object) {
			np := Find[*networkingv1.NetworkPolicy](o)[0]
			np.Spec.Egress = np.Spec.Egress[1:]
		}, "DNS"},
		{"ServiceMonitor port", "networkpolicy-servicemonitor-values.yaml", func(o []Object) {
			sm := FindUnstructured(o, ServiceMonitor)[0]
			_ = unstructured.SetNestedSlice(sm.Object, []any{map[string]any{"port": "web"}}, "spec", "endpoints")
		}, "ServiceMonitor selects no Service"},
		// Events, alerts, dashboard
		{"events read", "", func(o []Object) {
			r := role(o, "-events")
			r.Rules[0].Verbs = append(r.Rules[0].Verbs, "list")
		}, "may list events.k8s.io/events"},
		{"no Events for Nodes", "", func(o []Object) {
			for _, r := range Find[*rbacv1.Role](o) {
				if strings.HasSuffix(r.Name, "-events") && r.Namespace == metav1.NamespaceDefault {
					r.Rules = nil
				}
			}
		}, "cannot create Events in default"},
		{"alert on another job", "networkpolicy-servicemonitor-values.yaml", func(o []Object) {
			pr := FindUnstructured(o, PrometheusRule)[0]
			groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
			rule := groups[0].(map[string]any)["rules"].([]any)[0].(map[string]any)
			rule["expr"] = "up == 0"
			_ = unstructured.SetNestedSlice(pr.Object, groups, "spec", "groups")
		}, "does not select the metrics Service's scrape"},
		{"alert without its runbook", "networkpolicy-servicemonitor-values.yaml", func(o []Object) {
			pr := FindUnstructured(o, PrometheusRule)[0]
			groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
			rule := groups[0].(map[string]any)["rules"].([]any)[1].(map[string]any)
			rule["annotations"].(map[string]any)["runbook_url"] = "https://example.com/"
			_ = unstructured.SetNestedSlice(pr.Object, groups, "spec", "groups")
		}, "does not point at its runbook section"},
		{"dashboard without the sidecar label", "networkpolicy-servicemonitor-values.yaml", func(o []Object) {
			for _, cm := range Find[*corev1.ConfigMap](o) {
				delete(cm.Labels, "grafana_dashboard")
			}
		}, "lack the sidecar's"},
		{"creation-gate Role reads a whole kind", "ignore-node-policy-values.yaml", func(o []Object) {
			role(o, "-creation-gates").Rules[0].ResourceNames = nil
		}, "names no configured creation gate"},
		{"precondition Role may write", "ignore-node-policy-values.yaml", func(o []Object) {
			r := role(o, "-preconditions")
			r.Rules[0].Verbs = append(r.Rules[0].Verbs, "update")
		}, "names no configured CEL precondition's resource"},
		{"precondition Role reads another resource", "ignore-node-policy-values.yaml", func(o []Object) {
			role(o, "-preconditions").Rules[0].Resources = []string{"cephobjectstores"}
		}, "names no configured CEL precondition's resource"},
		{"creation-gate Role may write", "ignore-node-policy-values.yaml", func(o []Object) {
			r := role(o, "-creation-gates")
			r.Rules[0].Verbs = append(r.Rules[0].Verbs, "update")
		}, "names no configured creation gate"},
		{"hook without deadline", "own-ca-values.yaml", func(o []Object) { Find[*batchv1.Job](o)[0].Spec.ActiveDeadlineSeconds = nil }, "activeDeadlineSeconds"},
		{"probe skips a path", "own-ca-values.yaml", func(o []Object) {
			c := &Find[*batchv1.Job](o)[0].Spec.Template.Spec.Containers[0]
			c.Command[len(c.Command)-1] = strings.Replace(c.Command[len(c.Command)-1], "probe /validate/nodes ", "true ", 1)
		}, "does not post to /validate/nodes"},
		{"probe posts another path's review", "own-ca-values.yaml", func(o []Object) {
			c := &Find[*batchv1.Job](o)[0].Spec.Template.Spec.Containers[0]
			c.Command[len(c.Command)-1] = strings.Replace(c.Command[len(c.Command)-1], `probe /validate/operator "$REVIEW_OPERATOR"`, `probe /validate/operator "$REVIEW_PLANS"`, 1)
		}, "/validate/operator: the probe's review is of plans Plan, which operator.gpu-upgrade-gate.io does not review"},
		{"probe review outside the webhook's namespaces", "own-ca-values.yaml", func(o []Object) {
			c := &Find[*batchv1.Job](o)[0].Spec.Template.Spec.Containers[0]
			for i := range c.Env {
				if c.Env[i].Name == "REVIEW_JOBS" {
					c.Env[i].Value = strings.ReplaceAll(c.Env[i].Value, `"namespace":"`, `"namespace":"kube-system-`)
				}
			}
		}, "/validate/jobs: the probe's review is in namespace \"kube-system-"},
		{"probe review for another uid", "own-ca-values.yaml", func(o []Object) {
			c := &Find[*batchv1.Job](o)[0].Spec.Template.Spec.Containers[0]
			for i := range c.Env {
				if c.Env[i].Name == "REVIEW_HALTS" {
					c.Env[i].Value = strings.Replace(c.Env[i].Value, `"uid":"`, `"uid":"x`, 1)
				}
			}
		}, "/validate/halts: the probe's review has uid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := load(t, tc.variant)
			require.Empty(t, r.check(), "the unmutated render must pass")
			tc.mutate(r.objs)
			problems := strings.Join(r.check(), "\n")
			assert.Contains(t, problems, tc.want, "the mutation went unnoticed")
		})
	}
}

func TestMain(m *testing.M) {
	if _, err := Helm(); err != nil {
		// A clear message instead of one failure per test.
		os.Stderr.WriteString("test/chart: " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Exit(m.Run())
}
