package webhook

import (
	"context"
	"fmt"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

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
