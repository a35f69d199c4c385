package loader

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// TestOperatorCSVsOf: only the package's CSVs count, with their phase and
// reason; another operator's CSV in the namespace is not the GPU Operator.
func TestOperatorCSVsOf(t *testing.T) {
	csv := func(name, phase, reason string) unstructured.Unstructured {
		return unstructured.Unstructured{Object: map[string]any{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
			"metadata": map[string]any{"name": name}, "status": map[string]any{"phase": phase, "reason": reason}}}
	}
	got := OperatorCSVsOf([]unstructured.Unstructured{
		csv("gpu-operator-certified.v26.3.4", "Installing", "InstallWaiting"),
		csv("gpu-operator-certified-extra.v1.0.0", "Failed", ""),
		csv("nfd.v4.18.0", "Succeeded", "InstallSucceeded"),
	}, "gpu-operator-certified")
	assert.Equal(t, gate.OperatorCSVs{Served: true, Items: []gate.OperatorCSV{{Name: "gpu-operator-certified.v26.3.4", Phase: "Installing", Reason: "InstallWaiting"}}}, got)
}

// TestOperatorDeployment: an unset spec.replicas is the API server's 1; a
// rollout the controller gave up on is read from its Progressing reason.
func TestOperatorDeployment(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 4},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 4, Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}}}
	var o gate.OperatorRollout
	OperatorDeployment(&o, d)
	assert.Equal(t, gate.OperatorRollout{Generation: 4, ObservedGeneration: 4, Desired: 1, Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, DeadlineExceeded: true}, o)
	d.Status.Conditions[0].Reason = "NewReplicaSetAvailable"
	three := int32(3)
	d.Spec.Replicas = &three
	o = gate.OperatorRollout{}
	OperatorDeployment(&o, d)
	assert.False(t, o.DeadlineExceeded)
	assert.Equal(t, int32(3), o.Desired)
}
