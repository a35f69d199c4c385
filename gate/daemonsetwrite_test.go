package gate

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/dra"
)

// draController is NVIDIA's ComputeDomain controller as its Helm chart
// names its ServiceAccount (release nvidia-dra-driver-gpu).
const draController = "system:serviceaccount:nvidia-dra-driver-gpu:nvidia-dra-driver-gpu-service-account-controller"

// draConfig configures NVIDIA's DRA driver, its controller named, and
// another driver (HAMi's) with a controller of its own.
func draConfig() *Config {
	cfg := DefaultConfig()
	cfg.DRADrivers = []dra.Driver{
		{Name: "gpu.nvidia.com", Namespace: "nvidia-dra-driver-gpu", DaemonSet: "nvidia-dra-driver-gpu-kubelet-plugin", Controllers: []string{draController}},
		{Name: "hami-core-gpu.project-hami.io", Namespace: "hami", DaemonSet: "hami-dra-kubelet-plugin", Controllers: []string{"system:serviceaccount:hami:hami-controller"}},
	}
	return cfg
}

func podDaemonSet(ns, name string, images ...string) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	ds.Spec.Template.Labels = map[string]string{"app": name}
	for _, image := range images {
		ds.Spec.Template.Spec.Containers = append(ds.Spec.Template.Spec.Containers, corev1.Container{Name: "c", Image: image})
	}
	return ds
}

// TestDRAPluginForged: a DaemonSet of a DRA driver's namespace that is no
// configured kubelet plugin may not run a configured plugin's image (any tag
// or digest, in any container); the neighbouring safe cases (another image,
// the plugin itself, the driver's configured controller, an update that
// keeps the template, no plugin to compare with) are allowed; another
// ServiceAccount of the namespace is judged like anyone.
func TestDRAPluginForged(t *testing.T) {
	const ns = "nvidia-dra-driver-gpu"
	cfg := draConfig()
	plugin := podDaemonSet(ns, "nvidia-dra-driver-gpu-kubelet-plugin", "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0", "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0")
	alice := UserInfo{Name: "alice", Groups: []string{"platform-admins", "system:authenticated"}}
	controller := UserInfo{Name: draController, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}}
	podSA := UserInfo{Name: "system:serviceaccount:" + ns + ":default", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}}
	otherDriver := UserInfo{Name: "system:serviceaccount:hami:hami-controller", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:hami"}}
	copyOf := podDaemonSet(ns, "dra-driver-copy", "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1")
	withInit := podDaemonSet(ns, "dra-driver-init", "busybox:1.36")
	withInit.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "nvcr.io/nvidia/k8s-dra-driver-gpu@sha256:" + strings.Repeat("ab", 32)}}
	exporter := podDaemonSet(ns, "node-exporter", "quay.io/prometheus/node-exporter:v1.9.0")
	restarted := copyOf.DeepCopy()
	restarted.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-12-02T06:00:00Z"}
	relabelled := copyOf.DeepCopy()
	relabelled.Labels = map[string]string{"team": "gpu"}
	swapped := exporter.DeepCopy()
	swapped.Spec.Template.Spec.Containers[0].Image = "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0"
	cases := []struct {
		name  string
		req   DaemonSetWriteRequest
		field string // refused at this field; "" allowed
	}{
		{"another DaemonSet runs the plugin's image at another tag", DaemonSetWriteRequest{Operation: OpCreate, DaemonSet: copyOf, User: alice},
			"spec.template.spec.containers[0].image"},
		{"as an init container, pinned by digest", DaemonSetWriteRequest{Operation: OpCreate, DaemonSet: withInit, User: alice},
			"spec.template.spec.initContainers[0].image"},
		{"an update swaps another image for the plugin's", DaemonSetWriteRequest{Operation: OpUpdate, Old: exporter, DaemonSet: swapped, User: alice},
			"spec.template.spec.containers[0].image"},
		{"a rollout restart of a copy that runs it", DaemonSetWriteRequest{Operation: OpUpdate, Old: copyOf, DaemonSet: restarted, User: alice},
			"spec.template.spec.containers[0].image"},
		{"safe: another image", DaemonSetWriteRequest{Operation: OpCreate, DaemonSet: exporter, User: alice}, ""},
		{"safe: the configured plugin itself (judged on the driver path)", DaemonSetWriteRequest{Operation: OpCreate, DaemonSet: plugin, User: alice}, ""},
		{"safe: the driver's configured controller", DaemonSetWriteRequest{Operation: OpCreate, DaemonSet: copyOf, User: controller}, ""},
		{"another ServiceAccount of the namespace (a Pod running as default)", DaemonSetWriteRequest{Operation: OpCreate, DaemonSet: copyOf, User: podSA},
			"spec.template.spec.containers[0].image"},
		{"another driver's controller", DaemonSetWriteRequest{Operation: OpCreate, DaemonSet: copyOf, User: otherDriver},
			"spec.template.spec.containers[0].image"},
		{"safe: an update that keeps the Pod template", DaemonSetWriteRequest{Operation: OpUpdate, Old: copyOf, DaemonSet: relabelled, User: alice}, ""},
		{"the plugin's repository through a mirror's prefix", DaemonSetWriteRequest{Operation: OpCreate, DaemonSet: podDaemonSet(ns, "dra-driver-mirror", "harbor.corp/nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"), User: alice},
			"spec.template.spec.containers[0].image"},
		{"the plugin's repository on another registry", DaemonSetWriteRequest{Operation: OpCreate, DaemonSet: podDaemonSet(ns, "dra-driver-ghcr", "ghcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1"), User: alice},
			"spec.template.spec.containers[0].image"},
		{"safe: another repository of the same last name", DaemonSetWriteRequest{Operation: OpCreate, DaemonSet: podDaemonSet(ns, "x", "registry.example.com/forks/k8s-dra-driver-gpu:v1"), User: alice}, ""},
		{"safe: an image that does not parse runs nothing", DaemonSetWriteRequest{Operation: OpCreate, DaemonSet: podDaemonSet(ns, "x", "NVCR.io/Nvidia/K8s-Dra-Driver-Gpu:v1"), User: alice}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Plugins = []*appsv1.DaemonSet{plugin}
			d := DecideDRADaemonSetWrite(cfg, tc.req)
			if tc.field == "" {
				assert.True(t, d.Allowed, d.Message())
				return
			}
			require.Equal(t, []Code{CodeDRAPluginForged}, d.Codes(), d.Message())
			assert.Equal(t, tc.field, d.Blockers[0].Err.Field)
			assert.Contains(t, d.Message(), `written by "`+tc.req.User.Name+`"`)
			assert.Contains(t, d.Message(), "the image of the DRA kubelet plugin DaemonSet nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin (config draDrivers), under another name")
		})
	}
	t.Run("the plugin's digest under another name", func(t *testing.T) {
		digest := "@sha256:" + strings.Repeat("cd", 32)
		pinned := podDaemonSet(ns, "nvidia-dra-driver-gpu-kubelet-plugin", "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0"+digest)
		d := DecideDRADaemonSetWrite(cfg, DaemonSetWriteRequest{Operation: OpCreate, DaemonSet: podDaemonSet(ns, "agent", "registry.example.com/tools/agent"+digest), User: alice,
			Plugins: []*appsv1.DaemonSet{pinned}})
		require.Equal(t, []Code{CodeDRAPluginForged}, d.Codes(), d.Message())
		assert.True(t, DecideDRADaemonSetWrite(cfg, DaemonSetWriteRequest{Operation: OpCreate, DaemonSet: podDaemonSet(ns, "agent", "registry.example.com/tools/agent@sha256:"+strings.Repeat("ef", 32)), User: alice,
			Plugins: []*appsv1.DaemonSet{pinned}}).Allowed, "another digest")
	})
	t.Run("safe: no plugin DaemonSet there names the driver's image", func(t *testing.T) {
		assert.True(t, DecideDRADaemonSetWrite(cfg, DaemonSetWriteRequest{Operation: OpCreate, DaemonSet: copyOf, User: alice}).Allowed)
	})
}

// TestValidatorForged: the GPU Operator's validator DaemonSet is created,
// or its Pods' spec or labels changed, by the operator only (the webhook's
// match condition leaves the operator's writes out); a rollout restart, and
// another DaemonSet, are allowed.
func TestValidatorForged(t *testing.T) {
	cfg := DefaultConfig()
	alice := UserInfo{Name: "alice"}
	validator := podDaemonSet("gpu-operator", "nvidia-operator-validator", "nvcr.io/nvidia/gpu-operator:v25.3.0")
	faked := validator.DeepCopy()
	faked.Spec.Template.Spec.Containers[0].Image = "registry.example.com/always-ready:1"
	relabelled := validator.DeepCopy()
	relabelled.Spec.Template.Labels["app"] = "other"
	restarted := validator.DeepCopy()
	restarted.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-12-02T06:00:00Z"}
	cases := []struct {
		name, want string // want: the refusal's verb and field; "" allowed
		req        DaemonSetWriteRequest
	}{
		{"created by someone but the operator", `"alice" creates DaemonSet gpu-operator/nvidia-operator-validator`, DaemonSetWriteRequest{Operation: OpCreate, DaemonSet: validator, User: alice}},
		{"its Pods' image changed", `"alice" changes the Pod template of DaemonSet gpu-operator/nvidia-operator-validator`, DaemonSetWriteRequest{Operation: OpUpdate, Old: validator, DaemonSet: faked, User: alice}},
		{"its Pods' labels changed", `"alice" changes the Pod template of`, DaemonSetWriteRequest{Operation: OpUpdate, Old: validator, DaemonSet: relabelled, User: alice}},
		{"safe: a rollout restart", "", DaemonSetWriteRequest{Operation: OpUpdate, Old: validator, DaemonSet: restarted, User: alice}},
		{"safe: another DaemonSet of the namespace", "", DaemonSetWriteRequest{Operation: OpCreate, DaemonSet: podDaemonSet("gpu-operator", "nvidia-dcgm-exporter", "x:1"), User: alice}},
		{"safe: its name in another namespace", "", DaemonSetWriteRequest{Operation: OpCreate, DaemonSet: podDaemonSet("ml", "nvidia-operator-validator", "x:1"), User: alice}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideValidatorWrite(cfg, tc.req)
			if tc.want == "" {
				assert.True(t, d.Allowed, d.Message())
				return
			}
			require.Equal(t, []Code{CodeValidatorForged}, d.Codes(), d.Message())
			assert.Contains(t, d.Message(), tc.want)
			assert.Contains(t, d.Message(), "only the GPU Operator may (its ServiceAccounts, the chart's webhook.gpuOperatorServiceAccounts)")
		})
	}
}

// TestValidatorSection (issue 25): a ClusterPolicy write that changes
// spec.validator is judged, since the exempt GPU Operator writes the
// validator DaemonSet from it: an image outside proof.validator.repository,
// or WITH_WORKLOAD switched false, is ValidatorForged; a version change
// within the repository (the operator's own upgrade), a mirror of it and
// the operator's default (no image named) are allowed.
func TestValidatorSection(t *testing.T) {
	img := field.NewPath("spec", "validator", "version")
	cases := []struct {
		name    string
		section *ValidatorSection
		driver  bool   // the write changes the driver too (qualified)
		want    string // "" = allowed
	}{
		{name: "a version change within the repository", section: &ValidatorSection{Image: "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.3.4", ImagePath: img}},
		{name: "by digest within the repository", section: &ValidatorSection{Image: "nvcr.io/nvidia/cloud-native/gpu-operator-validator@sha256:" + strings.Repeat("a", 64), ImagePath: img}},
		{name: "the operator's default image", section: &ValidatorSection{}},
		{name: "another repository", section: &ValidatorSection{Image: "docker.io/mallory/always-ready:v26.3.4", ImagePath: img},
			want: `[ValidatorForged] "alice" gives the GPU Operator's validator (ClusterPolicy cluster-policy) the image docker.io/mallory/always-ready:v26.3.4, not of the validator's repository nvcr.io/nvidia/cloud-native/gpu-operator-validator (config proof.validator.repository)`},
		{name: "the same image name on another registry", section: &ValidatorSection{Image: "evil.example.com/nvidia/cloud-native/gpu-operator-validator:v26.3.3", ImagePath: img},
			want: "not of the validator's repository"},
		{name: "an unparsable image", section: &ValidatorSection{Image: "nvcr.io/NVIDIA/x:v1", ImagePath: img}, want: "not of the validator's repository"},
		{name: "another repository beside a qualified driver change", driver: true, section: &ValidatorSection{Image: "docker.io/mallory/always-ready:v26.3.4", ImagePath: img},
			want: "not of the validator's repository"},
		{name: "a qualified driver change beside a version change within the repository", driver: true, section: &ValidatorSection{Image: "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.3.4", ImagePath: img}},
		{name: "the workload switched off", section: &ValidatorSection{WorkloadOff: []*field.Path{field.NewPath("spec", "validator", "plugin", "env").Index(0).Child("value")}},
			want: `[ValidatorForged] "alice" switches the GPU Operator's validator's GPU workload off (ClusterPolicy cluster-policy, WITH_WORKLOAD false)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeDriverScenario(t)
			if !tc.driver {
				s.change.NewDriver, s.change.Annotations, s.change.Policy = s.change.OldDriver, nil, DriverUpgradePolicy{}
			}
			s.change.Validator = tc.section
			d := s.decide()
			if tc.want == "" {
				assert.True(t, d.Allowed, "%v", d.Message())
				return
			}
			assert.Equal(t, []Code{CodeValidatorForged}, d.Codes())
			assert.Contains(t, d.Message(), tc.want)
		})
	}
}

// TestValidatorRepositoryConfig: proof.validator.repository is a repository
// without tag or digest; anything else is refused naming the field.
func TestValidatorRepositoryConfig(t *testing.T) {
	for _, tc := range []struct{ repo, want string }{
		{"nvcr.io/nvidia/cloud-native/gpu-operator-validator", ""},
		{"registry.corp:5000/nvidia/gpu-operator-validator", ""},
		{"nvidia/cloud-native/gpu-operator-validator", ""},
		{"", "proof.validator.repository"},
		{"nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.3.3", "proof.validator.repository"},
		{"NVCR.io/Bad Name", "proof.validator.repository"},
	} {
		t.Run(tc.repo, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Proof.Validator.Repository = tc.repo
			errs := cfg.Validate()
			if tc.want == "" {
				assert.Empty(t, errs)
				return
			}
			require.NotEmpty(t, errs)
			assert.Contains(t, errs.ToAggregate().Error(), tc.want)
		})
	}
}
