package webhook

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// decideDRAWorkload reviews a CREATE or UPDATE of a bare Pod, or of a
// Deployment's, ReplicaSet's, StatefulSet's, Job's or CronJob's Pod
// template, in a DRA driver's namespace (contract: draworkloads.md): its
// Pods must not run a configured plugin's image with the node's filesystem
// in reach (DRAPluginForged). The plugins are read live, as for a
// DaemonSet there (decideDRADaemonSet).
func (s *Server) decideDRAWorkload(ctx context.Context, req admission.Request) (gate.Decision, error) {
	obj, old, err := decodePair(req)
	if err != nil {
		return gate.Decision{}, err
	}
	object := obj.GetKind() + " " + namespaced(obj)
	if req.Operation == admissionv1.Delete || !s.draNamespace(obj.GetNamespace()) {
		// Starts nothing; or outside the drivers' namespaces, which the
		// chart's namespaceSelector never sends.
		return gate.Decision{Allowed: true, Object: object}, nil
	}
	r := gate.WorkloadWriteRequest{Operation: string(req.Operation), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(), User: userOf(req)}
	if r.Template, r.SpecPath, err = podTemplate(obj, "object"); err != nil {
		return gate.Decision{}, err
	}
	if old != nil {
		if r.Old, _, err = podTemplate(old, "oldObject"); err != nil {
			return gate.Decision{}, err
		}
	}
	if r.Plugins, err = s.typedDRAPlugins(ctx, obj.GetNamespace()); err != nil {
		return gate.FactsUnavailable(object, err), nil
	}
	return gate.DecideDRAWorkloadWrite(s.Config, r), nil
}

// podTemplate is what u's Pods run, typed, and the path of its Pod spec: a
// Pod's own spec (without its metadata), a CronJob's Job's Pod template,
// another workload's Pod template. what names u in the error.
func podTemplate(u *unstructured.Unstructured, what string) (*corev1.PodTemplateSpec, *field.Path, error) {
	at, noun := []string{"spec", "template"}, "Pod template"
	switch u.GetKind() {
	case "Pod":
		at, noun = []string{"spec"}, "Pod spec"
	case "Deployment", "ReplicaSet", "ReplicationController", "StatefulSet", "Job":
	case "CronJob":
		at = []string{"spec", "jobTemplate", "spec", "template"}
	default:
		return nil, nil, fmt.Errorf("%s: kind %q runs no Pods this webhook reads, expected Pod, Deployment, ReplicaSet, ReplicationController, StatefulSet, Job or CronJob", what, u.GetKind())
	}
	path := field.NewPath(at[0], at[1:]...)
	m, found, err := unstructured.NestedMap(u.Object, at...)
	if err != nil || !found {
		return nil, nil, fmt.Errorf("%s: %s: expected a %s object, found none (%v)", what, path, noun, err)
	}
	t := &corev1.PodTemplateSpec{}
	into, spec := any(t), path.Child("spec")
	if u.GetKind() == "Pod" {
		into, spec = &t.Spec, path
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, into); err != nil {
		return nil, nil, fmt.Errorf("%s: %s: expected a %s: %w", what, path, noun, err)
	}
	return t, spec, nil
}
