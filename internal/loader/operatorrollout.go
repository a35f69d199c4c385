package loader

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// ClusterServiceVersionGVK is OLM's record of an installed operator
// version (operators.coreos.com/v1alpha1, namespaced), read as
// unstructured: the gate takes no OLM dependency for three fields.
var ClusterServiceVersionGVK = schema.GroupVersionKind{Group: "operators.coreos.com", Version: "v1alpha1", Kind: "ClusterServiceVersion"}

// OperatorRolloutTimeout bounds the live reads on a driver change; a
// slower answer counts as unreadable (fail closed).
const OperatorRolloutTimeout = 3 * time.Second

// ReadOperatorRollout reads the GPU Operator's own rollout through r, live:
// its Deployment (config gpuOperator) and the ClusterServiceVersions of
// gpuOperatorCSV in its namespace. A cluster without OLM reads as CSVs not
// served; any other failure is the reading's Err (fail closed).
func ReadOperatorRollout(ctx context.Context, r client.Reader, cfg *gate.Config) *gate.OperatorRollout {
	ctx, cancel := context.WithTimeout(ctx, OperatorRolloutTimeout)
	defer cancel()
	ref := cfg.GPUOperator
	out := &gate.OperatorRollout{Deployment: ref.Namespace + "/" + ref.Name}
	d := &appsv1.Deployment{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, d); err != nil {
		out.Err = fmt.Errorf("get deployments.apps %s: %w", out.Deployment, err)
	} else {
		OperatorDeployment(out, d)
	}
	out.CSV = readOperatorCSVs(ctx, r, ref.Namespace, cfg.GPUOperatorCSV)
	return out
}

// OperatorDeployment copies what the rule reads of d's rollout into o.
func OperatorDeployment(o *gate.OperatorRollout, d *appsv1.Deployment) {
	o.Generation, o.ObservedGeneration = d.Generation, d.Status.ObservedGeneration
	o.Desired = 1 // the API server's default for an unset spec.replicas
	if d.Spec.Replicas != nil {
		o.Desired = *d.Spec.Replicas
	}
	o.Replicas, o.UpdatedReplicas, o.ReadyReplicas, o.AvailableReplicas = d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas
	for _, c := range d.Status.Conditions {
		// The Deployment controller's reason for a rollout it gave up on
		// (k8s.io/kubectl's rollout status fails on it too).
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			o.DeadlineExceeded = true
		}
	}
}

func readOperatorCSVs(ctx context.Context, r client.Reader, namespace, name string) gate.OperatorCSVs {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(ClusterServiceVersionGVK.GroupVersion().WithKind(ClusterServiceVersionGVK.Kind + "List"))
	err := r.List(ctx, list, client.InNamespace(namespace))
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return gate.OperatorCSVs{}
	case err != nil:
		return gate.OperatorCSVs{Served: true, Err: fmt.Errorf("list clusterserviceversions.operators.coreos.com in %s: %w", namespace, err)}
	}
	return OperatorCSVsOf(list.Items, name)
}

// OperatorCSVsOf keeps the CSVs of the package (named "<name>.v<version>"),
// with their phase and reason.
func OperatorCSVsOf(items []unstructured.Unstructured, name string) gate.OperatorCSVs {
	out := gate.OperatorCSVs{Served: true}
	for i := range items {
		u := &items[i]
		if !strings.HasPrefix(u.GetName(), name+".v") {
			continue
		}
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		reason, _, _ := unstructured.NestedString(u.Object, "status", "reason")
		out.Items = append(out.Items, gate.OperatorCSV{Name: u.GetName(), Phase: phase, Reason: reason})
	}
	return out
}
