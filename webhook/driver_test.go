package webhook

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

func policy(spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": map[string]any{"name": "cluster-policy"}, "spec": spec}}
}

// TestDriverVersion: the version the operator rolls out is the version
// field, else the image's tag (the operator then takes the image as the
// whole reference); a digest stays a digest, which no record matches.
func TestDriverVersion(t *testing.T) {
	for _, tc := range []struct {
		name   string
		driver map[string]any
		want   string
		path   string
	}{
		{"version field", map[string]any{"repository": "nvcr.io/nvidia", "image": "driver", "version": "580.130.00"}, "580.130.00", "spec.driver.version"},
		{"image with a tag, no version", map[string]any{"image": "nvcr.io/nvidia/driver:580.140.02-ubuntu24.04"}, "580.140.02", "spec.driver.image"},
		{"image with a digest", map[string]any{"image": "nvcr.io/nvidia/driver@sha256:" + strings.Repeat("ab", 32)}, "sha256:" + strings.Repeat("ab", 32), "spec.driver.image"},
		{"an unreadable reference is its own version (VersionInvalid later)", map[string]any{"image": "nvcr.io/nvidia/driver:bad tag"}, "nvcr.io/nvidia/driver:bad tag", "spec.driver.image"},
		{"neither", map[string]any{"image": "driver"}, "", "spec.driver.version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, p := driverVersion(policy(map[string]any{"driver": tc.driver}), "spec", "driver")
			assert.Equal(t, tc.want, v)
			assert.Equal(t, tc.path, p.String())
		})
	}
	v, _ := imageVersion(policy(map[string]any{"dcgmExporter": map[string]any{"image": "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless"}}), "spec", "dcgmExporter")
	assert.Equal(t, "4.5.3-4.8.2-distroless", v, "a DCGM exporter tag is its version, dashes and all")
}

// TestSameExcept: every driver field but the version and the policy
// reloads the driver, including fields the gate has never heard of.
func TestSameExcept(t *testing.T) {
	base := map[string]any{"version": "580.126.20", "repository": "nvcr.io/nvidia", "kernelModuleType": "auto", "upgradePolicy": map[string]any{"autoUpgrade": true}}
	with := func(k string, v any) *unstructured.Unstructured {
		d := runtime.DeepCopyJSON(base)
		if v == nil {
			delete(d, k)
		} else {
			d[k] = v
		}
		return policy(map[string]any{"driver": d})
	}
	old := policy(map[string]any{"driver": runtime.DeepCopyJSON(base)})
	for _, tc := range []struct {
		name string
		obj  *unstructured.Unstructured
		same bool
	}{
		{"version only", with("version", "580.130.00"), true},
		{"policy only", with("upgradePolicy", map[string]any{"autoUpgrade": false}), true},
		{"repository", with("repository", "registry.example.com/mirror"), false},
		{"kernelModuleType", with("kernelModuleType", "open"), false},
		{"a field removed", with("kernelModuleType", nil), false},
		{"an unknown field", with("somethingNew", "x"), false},
	} {
		assert.Equal(t, tc.same, sameExcept(tc.obj, old, []string{"spec", "driver"}, "version", "upgradePolicy"), tc.name)
	}
}

func installPlanRequest(t *testing.T, ns string, approved, wasApproved bool, csvs ...any) admission.Request {
	t.Helper()
	ip := func(a bool) runtime.RawExtension {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
			"metadata": map[string]any{"name": "install-abcde", "namespace": ns, "annotations": map[string]any{gate.AnnotationQualification: "v100-op"}},
			"spec":     map[string]any{"approval": "Manual", "approved": a, "clusterServiceVersionNames": csvs}}}
		raw, err := u.MarshalJSON()
		require.NoError(t, err)
		return runtime.RawExtension{Raw: raw}
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update, Object: ip(approved), OldObject: ip(wasApproved)}}
}

// TestInstallPlanChange: only the approval (false -> true) of an InstallPlan
// for the operator's CSV, in its namespace, is an operator upgrade.
func TestInstallPlanChange(t *testing.T) {
	s := &Server{Config: gate.DefaultConfig()}
	for _, tc := range []struct {
		name string
		req  admission.Request
		want string
	}{
		{"approval of the operator's CSV", installPlanRequest(t, "gpu-operator", true, false, "nfd.v4.17.0", "gpu-operator-certified.v26.6.0"), "v26.6.0"},
		{"already approved", installPlanRequest(t, "gpu-operator", true, true, "gpu-operator-certified.v26.6.0"), ""},
		{"not approved", installPlanRequest(t, "gpu-operator", false, false, "gpu-operator-certified.v26.6.0"), ""},
		{"another operator", installPlanRequest(t, "gpu-operator", true, false, "nfd.v4.17.0"), ""},
		{"another namespace", installPlanRequest(t, "openshift-nfd", true, false, "gpu-operator-certified.v26.6.0"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ch gate.DriverChange
			require.NoError(t, s.installPlanChange(tc.req, &ch))
			assert.Equal(t, tc.want, ch.NewOperator)
			if tc.want != "" {
				assert.Equal(t, "v100-op", ch.Annotations[gate.AnnotationQualification])
				assert.Equal(t, "spec.clusterServiceVersionNames[1]", ch.OperatorPath.String())
			}
		})
	}
	var ch gate.DriverChange
	err := s.installPlanChange(installPlanRequest(t, "gpu-operator", true, false, int64(3)), &ch)
	assert.ErrorContains(t, err, "spec.clusterServiceVersionNames", "a malformed list is a bad request, never an allow")
}

// withCSVs rewrites one side of an InstallPlan review: its approval and CSVs.
func withCSVs(t *testing.T, raw runtime.RawExtension, approved any, csvs ...any) runtime.RawExtension {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, u.UnmarshalJSON(raw.Raw))
	u.Object["spec"] = map[string]any{"approval": "Automatic", "approved": approved, "clusterServiceVersionNames": csvs}
	out, err := u.MarshalJSON()
	require.NoError(t, err)
	return runtime.RawExtension{Raw: out}
}

// TestInstallPlanCreatedApproved: an InstallPlan created already approved
// (OLM under automatic approval) is an approval, and so is an approved
// plan whose operator CSV changes; created unapproved, or edited keeping
// its CSV, it moves nothing.
func TestInstallPlanCreatedApproved(t *testing.T) {
	s := &Server{Config: gate.DefaultConfig()}
	create := func(approved bool, csvs ...any) admission.Request {
		req := installPlanRequest(t, "gpu-operator", approved, false, csvs...)
		req.Operation, req.OldObject = admissionv1.Create, runtime.RawExtension{}
		return req
	}
	update := func(oldApproved bool, oldCSV string, newCSV string) admission.Request {
		req := installPlanRequest(t, "gpu-operator", true, oldApproved)
		req.Object = withCSVs(t, req.Object, true, newCSV)
		req.OldObject = withCSVs(t, req.OldObject, oldApproved, oldCSV)
		return req
	}
	for _, tc := range []struct {
		name string
		req  admission.Request
		want string
	}{
		{"created approved: OLM's automatic approval", create(true, "gpu-operator-certified.v26.6.0"), "v26.6.0"},
		{"created unapproved: waits for a person", create(false, "gpu-operator-certified.v26.6.0"), ""},
		{"created approved, another operator", create(true, "nfd.v4.17.0"), ""},
		{"approved plan whose operator CSV changes", update(true, "gpu-operator-certified.v26.3.3", "gpu-operator-certified.v26.6.0"), "v26.6.0"},
		{"approved plan edited, same CSV", update(true, "gpu-operator-certified.v26.6.0", "gpu-operator-certified.v26.6.0"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ch gate.DriverChange
			require.NoError(t, s.installPlanChange(tc.req, &ch))
			assert.Equal(t, tc.want, ch.NewOperator)
		})
	}
	req := create(true, "gpu-operator-certified.v26.6.0")
	req.Object = withCSVs(t, req.Object, "yes", "gpu-operator-certified.v26.6.0")
	var ch gate.DriverChange
	assert.ErrorContains(t, s.installPlanChange(req, &ch), "spec.approved", "an approval that is not a boolean is a bad request, never an allow")
}

func subscriptionRequest(t *testing.T, op admissionv1.Operation, pkg string, approval any, old map[string]any) admission.Request {
	t.Helper()
	raw := func(spec map[string]any) runtime.RawExtension {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
			"metadata": map[string]any{"name": "gpu-operator-certified", "namespace": "gpu-operator"}, "spec": spec}}
		b, err := u.MarshalJSON()
		require.NoError(t, err)
		return runtime.RawExtension{Raw: b}
	}
	spec := map[string]any{"name": pkg, "channel": "v26.3", "source": "certified-operators", "sourceNamespace": "openshift-marketplace"}
	if approval != nil {
		spec["installPlanApproval"] = approval
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Namespace: "gpu-operator", Name: "gpu-operator-certified",
		Kind: metav1.GroupVersionKind{Group: "operators.coreos.com", Version: "v1alpha1", Kind: "Subscription"}, Object: raw(spec)}}
	if old != nil {
		req.OldObject = raw(old)
	}
	return req
}

// TestDecideSubscription: the adapter reads the package and approval, and
// judges a spec change only; the rule itself is gate's
// (TestOperatorAutoApproval).
func TestDecideSubscription(t *testing.T) {
	s := &Server{Config: gate.DefaultConfig()}
	manual := map[string]any{"name": "gpu-operator-certified", "channel": "v26.3", "source": "certified-operators", "sourceNamespace": "openshift-marketplace", "installPlanApproval": "Manual"}
	automatic := map[string]any{"name": "gpu-operator-certified", "channel": "v26.3", "source": "certified-operators", "sourceNamespace": "openshift-marketplace", "installPlanApproval": "Automatic"}
	for _, tc := range []struct {
		name    string
		req     admission.Request
		refused bool
	}{
		{"created without installPlanApproval", subscriptionRequest(t, admissionv1.Create, "gpu-operator-certified", nil, nil), true},
		{"created Automatic", subscriptionRequest(t, admissionv1.Create, "gpu-operator-certified", "Automatic", nil), true},
		{"created Manual", subscriptionRequest(t, admissionv1.Create, "gpu-operator-certified", "Manual", nil), false},
		{"another package, Automatic", subscriptionRequest(t, admissionv1.Create, "nfd", "Automatic", nil), false},
		{"switched from Manual to Automatic", subscriptionRequest(t, admissionv1.Update, "gpu-operator-certified", "Automatic", manual), true},
		{"switched from Automatic to Manual", subscriptionRequest(t, admissionv1.Update, "gpu-operator-certified", "Manual", automatic), false},
		{"Automatic, spec unchanged (a label written)", subscriptionRequest(t, admissionv1.Update, "gpu-operator-certified", "Automatic", automatic), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := s.decideOperator(context.Background(), tc.req)
			require.NoError(t, err)
			assert.Equal(t, !tc.refused, d.Allowed, d.Message())
			if tc.refused {
				assert.Equal(t, []gate.Code{gate.CodeOperatorAutoApproval}, d.Codes())
				assert.Equal(t, "Subscription gpu-operator/gpu-operator-certified", d.Object)
			}
		})
	}
	_, err := s.decideOperator(context.Background(), subscriptionRequest(t, admissionv1.Create, "gpu-operator-certified", int64(1), nil))
	assert.ErrorContains(t, err, "spec.installPlanApproval", "a value that is not a string is a bad request, never an allow")
}

// TestValidatorSection: a ClusterPolicy's spec.validator is read as the GPU
// Operator composes its image (repository/image:version, @ for a digest,
// image alone without repository and version, none when empty), and
// WITH_WORKLOAD counts as switched off only where an UPDATE sets it false
// and it was not (NVIDIA's chart creates it false for the plugin).
func TestValidatorSection(t *testing.T) {
	env := func(v string) []any { return []any{map[string]any{"name": "WITH_WORKLOAD", "value": v}} }
	nvidia := map[string]any{"repository": "nvcr.io/nvidia/cloud-native", "image": "gpu-operator-validator", "version": "v26.3.3"}
	with := func(m map[string]any, k string, v any) map[string]any {
		out := runtime.DeepCopyJSON(m)
		out[k] = v
		return out
	}
	for _, tc := range []struct {
		name        string
		old, new    map[string]any // old nil: a CREATE
		image, path string
		off         []string
	}{
		{"composed", nil, nvidia, "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.3.3", "spec.validator.version", nil},
		{"by digest", nil, with(nvidia, "version", "sha256:"+strings.Repeat("ab", 32)), "nvcr.io/nvidia/cloud-native/gpu-operator-validator@sha256:" + strings.Repeat("ab", 32), "spec.validator.version", nil},
		{"image alone", nil, map[string]any{"image": "docker.io/mallory/always-ready:1"}, "docker.io/mallory/always-ready:1", "spec.validator.image", nil},
		{"none: the operator's default", nil, map[string]any{}, "", "spec.validator.image", nil},
		{"created with the plugin's workload off (NVIDIA's chart default)", nil, with(nvidia, "plugin", map[string]any{"env": env("false")}), "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.3.3", "spec.validator.version", nil},
		{"the cuda workload switched off", with(nvidia, "cuda", map[string]any{"env": env("true")}), with(nvidia, "cuda", map[string]any{"env": env("false")}),
			"nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.3.3", "spec.validator.version", []string{"spec.validator.cuda.env[0].value"}},
		{"the plugin's workload added off", nvidia, with(nvidia, "plugin", map[string]any{"env": env("0")}),
			"nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.3.3", "spec.validator.version", []string{"spec.validator.plugin.env[0].value"}},
		{"the plugin's workload already off, version bumped", with(nvidia, "plugin", map[string]any{"env": env("false")}), with(with(nvidia, "version", "v26.3.4"), "plugin", map[string]any{"env": env("false")}),
			"nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.3.4", "spec.validator.version", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var old *unstructured.Unstructured
			if tc.old != nil {
				old = policy(map[string]any{"validator": tc.old})
			}
			got := validatorSection(policy(map[string]any{"validator": tc.new}), old)
			assert.Equal(t, tc.image, got.Image)
			assert.Equal(t, tc.path, got.ImagePath.String())
			var off []string
			for _, p := range got.WorkloadOff {
				off = append(off, p.String())
			}
			assert.Equal(t, tc.off, off)
		})
	}
}
