package webhook

import (
	"context"
	"fmt"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// decideDRADaemonSet reviews a CREATE or UPDATE of a DaemonSet in a DRA
// driver's namespace that is no configured kubelet plugin (contract:
// dradaemonsets.md): it must not run a configured plugin's image
// (DRAPluginForged). The plugins are read live (the cache keeps no images),
// by a list of the namespace, which the chart's Role allows.
func (s *Server) decideDRADaemonSet(ctx context.Context, req admission.Request, obj, old *unstructured.Unstructured) (gate.Decision, error) {
	object := "DaemonSet " + namespaced(obj)
	if req.Operation == admissionv1.Delete || !s.draNamespace(obj.GetNamespace()) {
		// Removes no driver the gate knows; or outside the drivers'
		// namespaces, which the chart's namespaceSelector never sends.
		return gate.Decision{Allowed: true, Object: object}, nil
	}
	r := gate.DaemonSetWriteRequest{Operation: string(req.Operation), User: userOf(req)}
	var err error
	if r.DaemonSet, err = typedDaemonSet(obj, "object"); err != nil {
		return gate.Decision{}, err
	}
	if old != nil {
		if r.Old, err = typedDaemonSet(old, "oldObject"); err != nil {
			return gate.Decision{}, err
		}
	}
	plugins, err := s.draPlugins(ctx, obj.GetNamespace())
	if err != nil {
		return gate.FactsUnavailable(object, err), nil
	}
	for _, u := range plugins {
		ds, err := typedDaemonSet(u, "DaemonSet "+namespaced(u))
		if err != nil {
			return gate.FactsUnavailable(object, err), nil
		}
		r.Plugins = append(r.Plugins, ds)
	}
	return gate.DecideDRADaemonSetWrite(s.Config, r), nil
}

// decideDRANamespace reviews the DELETE of a configured DRA driver's
// namespace (contract: dranamespaces.md): the namespace controller then
// deletes the kubelet-plugin Pods on every node (its DaemonSet's own
// deletion may be refused, the Pods go regardless), so each plugin
// DaemonSet there is judged as its DELETE is. A plugin DaemonSet that is
// not there unloads nothing the gate knows.
func (s *Server) decideDRANamespace(ctx context.Context, req admission.Request) (gate.Decision, error) {
	ns, _, err := decodePair(req)
	if err != nil {
		return gate.Decision{}, err
	}
	object := "Namespace " + ns.GetName()
	if !s.draNamespace(ns.GetName()) {
		return gate.Decision{Allowed: true, Object: object}, nil // the chart sends no other
	}
	plugins, err := s.draPlugins(ctx, ns.GetName())
	if err != nil {
		return gate.FactsUnavailable(object, err), nil
	}
	d := gate.Decision{Allowed: true, Object: object}
	for _, ds := range plugins {
		drv, _ := s.draDaemonSet(ds)
		ch := gate.DriverChange{Object: object + " (DRA kubelet plugin DaemonSet " + namespaced(ds) + ")", Annotations: ns.GetAnnotations(),
			Operation: string(admissionv1.Delete), PolicyPath: pathUpgradePolicy}
		if err := draPluginChange(&ch, drv, ds, ds, admissionv1.Delete); err != nil {
			return gate.FactsUnavailable(object, fmt.Errorf("DaemonSet %s: %w", namespaced(ds), err)), nil
		}
		if d, err = s.judgeDriverChange(ctx, req, ch); err != nil || !d.Allowed {
			return d, err // the first plugin that may not go
		}
	}
	return d, nil
}

// draPlugins reads, live, the configured kubelet-plugin DaemonSets of a DRA
// driver's namespace that exist (one list of the namespace).
func (s *Server) draPlugins(ctx context.Context, ns string) ([]*unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("DaemonSetList"))
	if err := s.Facts.Live.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("list daemonsets.apps in namespace %s (the DRA kubelet plugins): %w", ns, err)
	}
	var out []*unstructured.Unstructured
	for i := range list.Items {
		u := &list.Items[i]
		u.SetGroupVersionKind(daemonSetGVK)
		if _, ok := s.draDaemonSet(u); ok {
			out = append(out, u)
		}
	}
	return out, nil
}

// draNamespace says whether ns is a configured DRA driver's namespace.
func (s *Server) draNamespace(ns string) bool {
	return slices.Contains(DRADriverNamespaces.Of(s.Config), ns)
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
	r := gate.DaemonSetWriteRequest{Operation: string(req.Operation), User: userOf(req)}
	if r.DaemonSet, err = typedDaemonSet(obj, "object"); err != nil {
		return gate.Decision{}, err
	}
	if old != nil {
		if r.Old, err = typedDaemonSet(old, "oldObject"); err != nil {
			return gate.Decision{}, err
		}
	}
	return gate.DecideValidatorWrite(s.Config, r), nil
}
