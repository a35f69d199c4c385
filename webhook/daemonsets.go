package webhook

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// decideDRADaemonSet reviews a CREATE or UPDATE of a DaemonSet in a DRA
// driver's namespace that is no configured kubelet plugin (contract:
// dradaemonsets.md): it must not run a configured plugin's image
// (DRAPluginForged). The plugins are read live, by a list of the namespace
// (the chart's Role allows it): the DRA cache keeps their images too, but
// a copy written right after the plugin's own create or image change must
// be judged against that plugin, not the informer's older view of it.
func (s *Server) decideDRADaemonSet(ctx context.Context, req admission.Request, obj, old *unstructured.Unstructured) (gate.Decision, error) {
	object := "DaemonSet " + namespaced(obj)
	if req.Operation == admissionv1.Delete || !s.draNamespace(obj.GetNamespace()) {
		// Removes no driver the gate knows; or outside the drivers'
		// namespaces, which the chart's namespaceSelector never sends.
		return gate.Decision{Allowed: true, Object: object}, nil
	}
	r, err := daemonSetWrite(req, obj, old)
	if err != nil {
		return gate.Decision{}, err
	}
	if r.Plugins, err = s.typedDRAPlugins(ctx, obj.GetNamespace()); err != nil {
		return gate.FactsUnavailable(object, err), nil
	}
	return gate.DecideDRADaemonSetWrite(s.Config, r), nil
}

// typedDRAPlugins are the namespace's configured kubelet-plugin DaemonSets
// (draPlugins), typed: what both DRA webhooks compare a write with.
func (s *Server) typedDRAPlugins(ctx context.Context, ns string) ([]*appsv1.DaemonSet, error) {
	plugins, err := s.draPlugins(ctx, ns)
	if err != nil {
		return nil, err
	}
	out := make([]*appsv1.DaemonSet, 0, len(plugins))
	for _, u := range plugins {
		ds, err := typedDaemonSet(u, "DaemonSet "+namespaced(u))
		if err != nil {
			return nil, err
		}
		out = append(out, ds)
	}
	return out, nil
}

// typedDaemonSet converts a DaemonSet read as unstructured; what names
// where it came from in the error.
func typedDaemonSet(u *unstructured.Unstructured, what string) (*appsv1.DaemonSet, error) {
	ds := &appsv1.DaemonSet{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ds); err != nil {
		return nil, fmt.Errorf("%s: expected a DaemonSet: %w", what, err)
	}
	return ds, nil
}

// decideValidator reviews a CREATE or UPDATE of the GPU Operator's
// validator DaemonSet by anyone but the operator (contract:
// validatordaemonset.md; the match condition sends no other write).
func (s *Server) decideValidator(_ context.Context, req admission.Request) (gate.Decision, error) {
	obj, old, err := decodePair(req)
	if err != nil {
		return gate.Decision{}, err
	}
	r, err := daemonSetWrite(req, obj, old)
	if err != nil {
		return gate.Decision{}, err
	}
	return gate.DecideValidatorWrite(s.Config, r), nil
}

// daemonSetWrite is a DaemonSet's CREATE or UPDATE, typed (old nil for a
// CREATE).
func daemonSetWrite(req admission.Request, obj, old *unstructured.Unstructured) (gate.DaemonSetWriteRequest, error) {
	r := gate.DaemonSetWriteRequest{Operation: string(req.Operation), User: userOf(req)}
	var err error
	if r.DaemonSet, err = typedDaemonSet(obj, "object"); err != nil || old == nil {
		return r, err
	}
	r.Old, err = typedDaemonSet(old, "oldObject")
	return r, err
}
