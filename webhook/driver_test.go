package webhook

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
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
