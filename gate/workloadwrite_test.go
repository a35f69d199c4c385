package gate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/dra"
)

// TestDRAWorkloadForged: a bare Pod, Deployment, Job (and the other
// workload kinds) in a DRA driver's namespace whose Pods run the configured
// kubelet plugin's image with the node's filesystem in reach are refused
// (DRAPluginForged), whoever writes them but the driver's configured
// controllers; the neighbouring safe cases are allowed: the same kinds with
// another image, the driver's image without the node's filesystem (the
// driver's controller Deployment, as its Helm chart writes it), an update
// that keeps the template, the configured controller's write.
func TestDRAWorkloadForged(t *testing.T) {
	const ns = "nvidia-dra-driver-gpu"
	const image = "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"
	cfg := draConfig()
	plugin := podDaemonSet(ns, "nvidia-dra-driver-gpu-kubelet-plugin", "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0")
	alice := UserInfo{Name: "alice", Groups: []string{"platform-admins", "system:authenticated"}}
	podSA := UserInfo{Name: "system:serviceaccount:" + ns + ":default", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}}
	controller := UserInfo{Name: draController, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}}
	// template is a Pod template running image, with the kubelet plugin's
	// hostPaths when plugin.
	template := func(image string, reach func(*corev1.PodSpec)) *corev1.PodTemplateSpec {
		t := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "plugin", Image: image}}}}
		if reach != nil {
			reach(&t.Spec)
		}
		return t
	}
	hostPaths := func(s *corev1.PodSpec) {
		for _, p := range []string{"/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins"} {
			s.Volumes = append(s.Volumes, corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: p}}})
		}
	}
	privileged := func(s *corev1.PodSpec) {
		s.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr(true)}
	}
	hostPID := func(s *corev1.PodSpec) { s.HostPID = true }
	claim := func(s *corev1.PodSpec) {
		s.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "local-pv"}}}}
	}
	podOwn := func(s *corev1.PodSpec) {
		s.Volumes = []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
			{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}}}
	}
	podSpec := field.NewPath("spec")
	tmplSpec := field.NewPath("spec", "template", "spec")
	cronSpec := field.NewPath("spec", "jobTemplate", "spec", "template", "spec")
	write := func(kind string, path *field.Path, tmpl *corev1.PodTemplateSpec, user UserInfo) WorkloadWriteRequest {
		return WorkloadWriteRequest{Operation: OpCreate, Kind: kind, Namespace: ns, Name: "x", Template: tmpl, SpecPath: path, User: user}
	}
	update := func(r WorkloadWriteRequest, old *corev1.PodTemplateSpec) WorkloadWriteRequest {
		r.Operation, r.Old = OpUpdate, old
		return r
	}
	ephemeral := template("busybox:1.36", hostPaths)
	ephemeral.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: image}}}
	restarted := template(image, hostPaths)
	restarted.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-12-02T06:00:00Z"}
	cases := []struct {
		name  string
		req   WorkloadWriteRequest
		field string // refused at this field; "" allowed
	}{
		{"a bare Pod with the plugin's hostPaths", write("Pod", podSpec, template(image, hostPaths), alice), "spec.containers[0].image"},
		{"a Deployment's template with the plugin's hostPaths", write("Deployment", tmplSpec, template(image, hostPaths), alice), "spec.template.spec.containers[0].image"},
		{"a Job's template, privileged", write("Job", tmplSpec, template(image, privileged), alice), "spec.template.spec.containers[0].image"},
		{"a CronJob's template in the node's PID namespace", write("CronJob", cronSpec, template(image, hostPID), alice), "spec.jobTemplate.spec.template.spec.containers[0].image"},
		{"a StatefulSet's template", write("StatefulSet", tmplSpec, template(image, hostPaths), alice), "spec.template.spec.containers[0].image"},
		{"a ReplicaSet's template", write("ReplicaSet", tmplSpec, template(image, hostPaths), alice), "spec.template.spec.containers[0].image"},
		{"a ReplicationController's template", write("ReplicationController", tmplSpec, template(image, hostPaths), alice), "spec.template.spec.containers[0].image"},
		{"written by another ServiceAccount of the namespace (a Pod running as default)", write("Pod", podSpec, template(image, hostPaths), podSA), "spec.containers[0].image"},
		{"an update swaps another image for the plugin's", update(write("Deployment", tmplSpec, template(image, hostPaths), alice), template("quay.io/prometheus/node-exporter:v1.9.0", hostPaths)),
			"spec.template.spec.containers[0].image"},
		{"an update gives the driver's image the node's filesystem", update(write("Deployment", tmplSpec, template(image, hostPaths), alice), template(image, nil)),
			"spec.template.spec.containers[0].image"},
		{"a rollout restart of a Deployment that runs it", update(write("Deployment", tmplSpec, restarted, alice), template(image, hostPaths)),
			"spec.template.spec.containers[0].image"},
		{"an ephemeral container of the plugin's image", update(write("Pod", podSpec, ephemeral, alice), template("busybox:1.36", hostPaths)),
			"spec.ephemeralContainers[0].image"},
		{"safe: a bare Pod with another image", write("Pod", podSpec, template("quay.io/prometheus/node-exporter:v1.9.0", hostPaths), alice), ""},
		{"safe: a Deployment with another image", write("Deployment", tmplSpec, template("quay.io/prometheus/node-exporter:v1.9.0", hostPaths), alice), ""},
		{"safe: a Job with another image", write("Job", tmplSpec, template("busybox:1.36", privileged), alice), ""},
		{"a Pod with a claim (it may be bound to a node's directory)", write("Pod", podSpec, template(image, claim), alice), "spec.containers[0].image"},
		{"safe: the driver's image without the node's filesystem (its controller Deployment)", write("Deployment", tmplSpec, template(image, nil), alice), ""},
		{"safe: the driver's image with the Pod's own volumes only", write("Deployment", tmplSpec, template(image, podOwn), alice), ""},
		{"safe: the driver's configured controller", write("Pod", podSpec, template(image, hostPaths), controller), ""},
		{"safe: an update that keeps the template", update(write("Deployment", tmplSpec, template(image, hostPaths), alice), template(image, hostPaths)), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Plugins = []*appsv1.DaemonSet{plugin}
			d := DecideDRAWorkloadWrite(cfg, tc.req)
			if tc.field == "" {
				assert.True(t, d.Allowed, d.Message())
				return
			}
			require.Equal(t, []Code{CodeDRAPluginForged}, d.Codes(), d.Message())
			assert.Equal(t, tc.field, d.Blockers[0].Err.Field)
			assert.Contains(t, d.Message(), tc.req.Kind+" nvidia-dra-driver-gpu/x, written by \""+tc.req.User.Name+"\", runs ")
			assert.Contains(t, d.Message(), "the image of the DRA kubelet plugin DaemonSet nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin (config draDrivers), with the node's filesystem in reach")
		})
	}
	t.Run("safe: another driver's controller is no controller here, but another image is", func(t *testing.T) {
		other := UserInfo{Name: "system:serviceaccount:hami:hami-controller"}
		req := write("Pod", podSpec, template(image, hostPaths), other)
		req.Plugins = []*appsv1.DaemonSet{plugin}
		d := DecideDRAWorkloadWrite(cfg, req)
		assert.Equal(t, []Code{CodeDRAPluginForged}, d.Codes())
		req.Template = template("busybox:1.36", hostPaths)
		assert.True(t, DecideDRAWorkloadWrite(cfg, req).Allowed)
	})
}

// TestDRADriverControllersConfig: draDrivers[].controllers are usernames;
// a group (the namespace's ServiceAccounts, the exemption they replace), a
// malformed ServiceAccount username, an empty or spaced entry and a
// duplicate are refused naming the field and the value.
func TestDRADriverControllersConfig(t *testing.T) {
	for _, tc := range []struct {
		controller, want string // want: in the error; "" valid
	}{
		{draController, ""},
		{"system:kube-controller-manager", ""},
		{"cd-controller@corp.example", ""},
		{"system:serviceaccounts:nvidia-dra-driver-gpu", `draDrivers[0].controllers[0]: Invalid value: "system:serviceaccounts:nvidia-dra-driver-gpu": expected the username of one of the driver's controllers as the API server authenticates it, e.g. system:serviceaccount:nvidia-dra-driver-gpu:nvidia-dra-driver-gpu-service-account-controller: this is a group of users`},
		{"system:serviceaccount:nvidia-dra-driver-gpu", `draDrivers[0].controllers[0]: Invalid value: "system:serviceaccount:nvidia-dra-driver-gpu": expected the username`},
		{"system:serviceaccount:Bad_NS:controller", "a ServiceAccount's username is system:serviceaccount:<namespace>:<name>"},
		{"", `draDrivers[0].controllers[0]: Invalid value: "": expected the username of one of the driver's controllers as the API server authenticates it, e.g. system:serviceaccount:nvidia-dra-driver-gpu:nvidia-dra-driver-gpu-service-account-controller (empty)`},
		{" " + draController, "(no spaces)"},
	} {
		t.Run(tc.controller, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.DRADrivers = []dra.Driver{{Name: "gpu.nvidia.com", Namespace: "nvidia-dra-driver-gpu", DaemonSet: "nvidia-dra-driver-gpu-kubelet-plugin", Controllers: []string{tc.controller}}}
			errs := cfg.Validate()
			if tc.want == "" {
				assert.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1)
			assert.Contains(t, errs[0].Error(), tc.want)
		})
	}
	t.Run("a duplicate", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.DRADrivers = []dra.Driver{{Name: "gpu.nvidia.com", Namespace: "nvidia-dra-driver-gpu", DaemonSet: "p", Controllers: []string{draController, draController}}}
		errs := cfg.Validate()
		require.Len(t, errs, 1)
		assert.Contains(t, errs[0].Error(), `draDrivers[0].controllers[1]: Duplicate value: "`+draController+`"`)
	})
}
