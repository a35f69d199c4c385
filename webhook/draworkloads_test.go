package webhook

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/dra"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

const nvidiaDRAController = "system:serviceaccount:nvidia-dra-driver-gpu:nvidia-dra-driver-gpu-service-account-controller"

// workload is a kind's object in ns whose Pods run image, with the kubelet
// plugin's hostPath volume when hostPath.
func workload(kind, ns, name, image string, hostPath bool) *unstructured.Unstructured {
	spec := map[string]any{"containers": []any{map[string]any{"name": "plugin", "image": image}}}
	if hostPath {
		spec["volumes"] = []any{map[string]any{"name": "plugins-registry", "hostPath": map[string]any{"path": "/var/lib/kubelet/plugins_registry"}}}
	}
	apiVersion, body := "apps/v1", map[string]any{"template": map[string]any{"spec": spec}}
	switch kind {
	case "Pod":
		apiVersion, body = "v1", spec
	case "ReplicationController":
		apiVersion = "v1"
	case "Job":
		apiVersion = "batch/v1"
	case "CronJob":
		apiVersion, body = "batch/v1", map[string]any{"schedule": "@daily", "jobTemplate": map[string]any{"spec": body}}
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": body}}
}

func workloadReview(t *testing.T, op admissionv1.Operation, user string, obj, old *unstructured.Unstructured) admission.Request {
	t.Helper()
	raw := func(u *unstructured.Unstructured) runtime.RawExtension {
		if u == nil {
			return runtime.RawExtension{}
		}
		b, err := u.MarshalJSON()
		require.NoError(t, err)
		return runtime.RawExtension{Raw: b}
	}
	gvk := obj.GroupVersionKind()
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Namespace: obj.GetNamespace(), Name: obj.GetName(),
		Kind:   metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Object: raw(obj), OldObject: raw(old), UserInfo: authv1.UserInfo{Username: user}}}
}

// TestDRAWorkloadRunsTheDriver: a bare Pod, Deployment, Job or CronJob of a
// DRA driver's namespace running the configured plugin's image (read live)
// with a hostPath is refused (DRAPluginForged) at its Pod spec's field; the
// same kinds with another image, or the image without the node's
// filesystem, and the driver's configured controller are admitted; a read
// that fails is FactsMissing, and an object whose template is malformed an
// error naming the field, never an allow.
func TestDRAWorkloadRunsTheDriver(t *testing.T) {
	const ns = "nvidia-dra-driver-gpu"
	const image = "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"
	cfg := gate.DefaultConfig()
	cfg.DRADrivers = []dra.Driver{{Name: "gpu.nvidia.com", Namespace: ns, DaemonSet: "nvidia-dra-driver-gpu-kubelet-plugin", Controllers: []string{nvidiaDRAController}}}
	plugin := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nvidia-dra-driver-gpu-kubelet-plugin"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "gpus", Image: "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0"}}}}}}
	live := fake.NewClientBuilder().WithObjects(plugin).Build()
	failing := liveObjects{fail: map[string]bool{"list/*unstructured.UnstructuredList": true}}
	for _, tc := range []struct {
		name  string
		obj   *unstructured.Unstructured
		user  string
		live  client.Reader
		code  gate.Code // "": allowed
		field string
	}{
		{"a bare Pod with the driver's image and a hostPath", workload("Pod", ns, "x", image, true), "alice", live, gate.CodeDRAPluginForged, "spec.containers[0].image"},
		{"a Deployment", workload("Deployment", ns, "x", image, true), "alice", live, gate.CodeDRAPluginForged, "spec.template.spec.containers[0].image"},
		{"a Job", workload("Job", ns, "x", image, true), "alice", live, gate.CodeDRAPluginForged, "spec.template.spec.containers[0].image"},
		{"a ReplicationController", workload("ReplicationController", ns, "x", image, true), "alice", live, gate.CodeDRAPluginForged, "spec.template.spec.containers[0].image"},
		{"a CronJob", workload("CronJob", ns, "x", image, true), "alice", live, gate.CodeDRAPluginForged, "spec.jobTemplate.spec.template.spec.containers[0].image"},
		{"a Pod as another ServiceAccount of the namespace", workload("Pod", ns, "x", image, true), "system:serviceaccount:" + ns + ":default", live, gate.CodeDRAPluginForged, "spec.containers[0].image"},
		{"a Pod with another image", workload("Pod", ns, "x", "busybox:1.36", true), "alice", live, "", ""},
		{"a Deployment with another image", workload("Deployment", ns, "x", "busybox:1.36", true), "alice", live, "", ""},
		{"the driver's controller Deployment (no hostPath)", workload("Deployment", ns, "x", image, false), "alice", live, "", ""},
		{"the driver's configured controller", workload("Pod", ns, "x", image, true), nvidiaDRAController, live, "", ""},
		{"outside the drivers' namespaces, not even read", workload("Pod", "ml", "x", image, true), "alice", failing, "", ""},
		{"the plugins cannot be read", workload("Pod", ns, "x", "busybox:1.36", true), "alice", failing, gate.CodeFactsMissing, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{Config: cfg, Facts: &Facts{Config: cfg, Live: tc.live}}
			d, err := s.decideDRAWorkload(context.Background(), workloadReview(t, admissionv1.Create, tc.user, tc.obj, nil))
			require.NoError(t, err)
			if tc.code == "" {
				assert.True(t, d.Allowed, d.Message())
				return
			}
			require.Equal(t, []gate.Code{tc.code}, d.Codes(), d.Message())
			if tc.field != "" {
				assert.Equal(t, tc.field, d.Blockers[0].Err.Field)
			}
		})
	}
	t.Run("an update that keeps the template is admitted, one that adds the image refused", func(t *testing.T) {
		s := &Server{Config: cfg, Facts: &Facts{Config: cfg, Live: live}}
		forged := workload("Deployment", ns, "x", image, true)
		relabelled := forged.DeepCopy()
		relabelled.SetLabels(map[string]string{"team": "gpu"})
		d, err := s.decideDRAWorkload(context.Background(), workloadReview(t, admissionv1.Update, "alice", relabelled, forged))
		require.NoError(t, err)
		assert.True(t, d.Allowed, d.Message())
		d, err = s.decideDRAWorkload(context.Background(), workloadReview(t, admissionv1.Update, "alice", forged, workload("Deployment", ns, "x", "busybox:1.36", true)))
		require.NoError(t, err)
		assert.Equal(t, []gate.Code{gate.CodeDRAPluginForged}, d.Codes())
	})
	t.Run("a malformed template is an error naming the field", func(t *testing.T) {
		s := &Server{Config: cfg, Facts: &Facts{Config: cfg, Live: live}}
		bad := workload("Deployment", ns, "x", image, true)
		require.NoError(t, unstructured.SetNestedField(bad.Object, "not a template", "spec", "template"))
		_, err := s.decideDRAWorkload(context.Background(), workloadReview(t, admissionv1.Create, "alice", bad, nil))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "object: spec.template: expected a Pod template object")
		bad = workload("Pod", ns, "x", image, true)
		require.NoError(t, unstructured.SetNestedField(bad.Object, "busybox", "spec", "containers"))
		_, err = s.decideDRAWorkload(context.Background(), workloadReview(t, admissionv1.Create, "alice", bad, nil))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "object: spec: expected a Pod spec")
	})
}

// TestDRAWorkloadMatchConditions evaluates the DRA workload webhook's match
// conditions with the API server's CEL environment: the
// kube-controller-manager's Pod-writing controllers and kubelets never
// reach the gate, anyone else (kube-system's other ServiceAccounts too)
// does; a CREATE and a change of what the Pods run are sent, a Pod's
// labels, a workload's replicas or status are not; the configured
// controllers are exempt in their own driver's namespace only.
func TestDRAWorkloadMatchConditions(t *testing.T) {
	t.Run("not-a-pod-controller", func(t *testing.T) {
		prog := matchConditionProgram(t, WebhookDRAWorkloads, "not-a-pod-controller")
		for _, tc := range []struct {
			user   string
			groups []any
			sent   bool
		}{
			{"system:serviceaccount:kube-system:replicaset-controller", nil, false},
			{"system:serviceaccount:kube-system:job-controller", nil, false},
			{"system:serviceaccount:kube-system:statefulset-controller", nil, false},
			{"system:serviceaccount:kube-system:daemon-set-controller", nil, false},
			{"system:serviceaccount:kube-system:deployment-controller", nil, false},
			{"system:serviceaccount:kube-system:cronjob-controller", nil, false},
			{"system:serviceaccount:kube-system:replication-controller", nil, false},
			{"system:kube-controller-manager", nil, false},
			{"system:node:gpu-v100-01", []any{"system:nodes", "system:authenticated"}, false},
			{"alice", []any{"system:authenticated"}, true},
			{"system:serviceaccount:kube-system:default", []any{"system:serviceaccounts", "system:serviceaccounts:kube-system"}, true},
			{"system:serviceaccount:kube-system:generic-garbage-collector", nil, true},
		} {
			t.Run(tc.user, func(t *testing.T) {
				groups := tc.groups
				if groups == nil {
					groups = []any{}
				}
				out, _, err := prog.Eval(map[string]any{"request": map[string]any{"userInfo": map[string]any{"username": tc.user, "groups": groups}}})
				require.NoError(t, err)
				assert.Equal(t, tc.sent, out.Value())
			})
		}
	})
	t.Run("created-or-pods-change", func(t *testing.T) {
		prog := matchConditionProgram(t, WebhookDRAWorkloads, "created-or-pods-change")
		for _, tc := range []struct {
			name, kind, resource string
			edit                 func(u *unstructured.Unstructured)
			sent                 bool
		}{
			{"a Pod's image", "Pod", "pods", func(u *unstructured.Unstructured) {
				templated(u, "busybox:1.37", "spec", "containers", "image")
			}, true},
			{"an ephemeral container", "Pod", "pods", func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "debug", "image": "x:1"}}, "spec", "ephemeralContainers")
			}, true},
			{"a Pod's labels", "Pod", "pods", func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"a": "b"}) }, false},
			{"a Deployment's image", "Deployment", "deployments", func(u *unstructured.Unstructured) {
				templated(u, "busybox:1.37", "spec", "template", "spec", "containers", "image")
			}, true},
			{"a Deployment's rollout restart", "Deployment", "deployments", func(u *unstructured.Unstructured) {
				templated(u, map[string]any{"kubectl.kubernetes.io/restartedAt": "2026-12-02T06:00:00Z"}, "spec", "template", "metadata", "annotations")
			}, true},
			{"a Deployment's replicas", "Deployment", "deployments", func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, int64(3), "spec", "replicas")
			}, false},
			{"a Job's status", "Job", "jobs", func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, int64(1), "status", "active")
			}, false},
			{"a CronJob's Job template", "CronJob", "cronjobs", func(u *unstructured.Unstructured) {
				templated(u, "busybox:1.37", "spec", "jobTemplate", "spec", "template", "spec", "containers", "image")
			}, true},
			{"a CronJob's schedule", "CronJob", "cronjobs", func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "@hourly", "spec", "schedule")
			}, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				old := workload(tc.kind, "nvidia-dra-driver-gpu", "x", "busybox:1.36", true)
				cur := old.DeepCopy()
				tc.edit(cur)
				out, _, err := prog.Eval(map[string]any{"object": cur.Object, "oldObject": old.Object,
					"request": map[string]any{"operation": "UPDATE", "resource": map[string]any{"resource": tc.resource}}})
				require.NoError(t, err)
				assert.Equal(t, tc.sent, out.Value())
			})
		}
		out, _, err := prog.Eval(map[string]any{"object": workload("Pod", "n", "x", "x:1", false).Object, "oldObject": nil,
			"request": map[string]any{"operation": "CREATE", "resource": map[string]any{"resource": "pods"}}})
		require.NoError(t, err)
		assert.Equal(t, true, out.Value(), "CREATE")
	})
	t.Run("not-a-dra-driver-controller", func(t *testing.T) {
		cfg := gate.DefaultConfig()
		cfg.DRADrivers = []dra.Driver{
			{Name: "gpu.nvidia.com", Namespace: "nvidia-dra-driver-gpu", DaemonSet: "p", Controllers: []string{nvidiaDRAController}},
			{Name: "mig.nvidia.com", Namespace: "nvidia-dra-driver-gpu", DaemonSet: "m", Controllers: []string{nvidiaDRAController}},
			{Name: "hami-core-gpu.project-hami.io", Namespace: "hami", DaemonSet: "h", Controllers: []string{"o'brien"}},
		}
		cond := NotADRAControllerCondition(cfg)
		assert.Equal(t, "!((request.namespace + '/' + request.userInfo.username) in ['nvidia-dra-driver-gpu/"+nvidiaDRAController+"', 'hami/o\\'brien'])", cond)
		prog := celProgram(t, cond)
		for _, tc := range []struct {
			ns, user string
			sent     bool
		}{
			{"nvidia-dra-driver-gpu", nvidiaDRAController, false},
			{"hami", "o'brien", false},
			{"hami", nvidiaDRAController, true},
			{"nvidia-dra-driver-gpu", "system:serviceaccount:nvidia-dra-driver-gpu:default", true},
			{"nvidia-dra-driver-gpu", "alice", true},
		} {
			out, _, err := prog.Eval(map[string]any{"request": map[string]any{"namespace": tc.ns, "userInfo": map[string]any{"username": tc.user}}})
			require.NoError(t, err)
			assert.Equal(t, tc.sent, out.Value(), "%s in %s", tc.user, tc.ns)
		}
		assert.Equal(t, "!((request.namespace + '/' + request.userInfo.username) in [])", NotADRAControllerCondition(gate.DefaultConfig()), "none configured: everyone is judged")
	})
}

// TestOperatorDaemonSetDeletion: a person's DELETE of a DaemonSet of the
// GPU Operator's namespace is judged as the unload of every GPU node's
// driver: without the cluster's facts it is FactsMissing, never allowed; one
// of another namespace is admitted unread. (Refused for a GPU holder on the
// real fleet: test/e2e TestGPUOperatorDaemonSetDeletion.) The match
// condition leaves out the namespace controller and the garbage collector.
func TestOperatorDaemonSetDeletion(t *testing.T) {
	cfg := gate.DefaultConfig()
	s := &Server{Config: cfg, Facts: &Facts{Config: cfg, Live: fake.NewClientBuilder().Build()}}
	for _, tc := range []struct {
		ns   string
		code gate.Code
	}{
		{"gpu-operator", gate.CodeFactsMissing},
		{"ml", ""},
	} {
		t.Run(tc.ns, func(t *testing.T) {
			ds := daemonSet(tc.ns, "nvidia-driver-daemonset", nil, "nvcr.io/nvidia/driver:580.126.20")
			d, err := s.decideOperatorDaemonSet(context.Background(), daemonSetReview(t, admissionv1.Delete, ds, ds))
			require.NoError(t, err)
			if tc.code == "" {
				assert.True(t, d.Allowed, d.Message())
				return
			}
			assert.Equal(t, []gate.Code{tc.code}, d.Codes(), d.Message())
		})
	}
	prog := matchConditionProgram(t, WebhookOperatorDaemonSets, "not-a-system-controller")
	for user, sent := range map[string]bool{
		"system:serviceaccount:kube-system:namespace-controller":      false,
		"system:serviceaccount:kube-system:generic-garbage-collector": false,
		"system:kube-controller-manager":                              false,
		"alice":                                                       true,
		"system:serviceaccount:gpu-operator:default":                  true,
	} {
		out, _, err := prog.Eval(map[string]any{"request": map[string]any{"userInfo": map[string]any{"username": user}}})
		require.NoError(t, err)
		assert.Equal(t, sent, out.Value(), user)
	}
}
