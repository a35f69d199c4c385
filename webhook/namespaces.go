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

// decideNamespace reviews the DELETE of a namespace GPU drivers run in
// (contract: namespaces.md). The namespace controller then deletes every
// Pod in it on every node (a DaemonSet's own deletion may be refused, the
// Pods go regardless) and nothing is created again there. The GPU
// Operator's namespace is judged as the unload of every GPU node's driver
// (gate.DriverChange.OperatorNamespace); a DRA driver's, each plugin
// DaemonSet there as its DELETE is (a plugin DaemonSet that is not there
// unloads nothing the gate knows). A namespace that is both is the
// operator's: every GPU node covers the plugin's.
func (s *Server) decideNamespace(ctx context.Context, req admission.Request) (gate.Decision, error) {
	ns, _, err := decodePair(req)
	if err != nil {
		return gate.Decision{}, err
	}
	object := "Namespace " + ns.GetName()
	if slices.Contains(OperatorNamespaces(s.Config), ns.GetName()) {
		return s.judgeDriverChange(ctx, req, gate.DriverChange{Object: object, Annotations: ns.GetAnnotations(),
			Operation: string(admissionv1.Delete), OperatorNamespace: true, PolicyPath: pathUpgradePolicy})
	}
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

// decideOperatorDaemonSet reviews a person's DELETE of a DaemonSet of the
// GPU Operator's namespace (contract: operatordaemonsets.md): the driver,
// device plugin or DCGM exporter goes from every GPU node at once, judged
// as the namespace's deletion is (OperatorNamespace: GPU holders, a rollout
// in flight, the rollback annotation on the DaemonSet honoured).
func (s *Server) decideOperatorDaemonSet(ctx context.Context, req admission.Request) (gate.Decision, error) {
	ds, _, err := decodePair(req)
	if err != nil {
		return gate.Decision{}, err
	}
	object := "DaemonSet " + namespaced(ds)
	if req.Operation != admissionv1.Delete || !slices.Contains(OperatorNamespaces(s.Config), ds.GetNamespace()) {
		return gate.Decision{Allowed: true, Object: object}, nil // the chart sends no other
	}
	return s.judgeDriverChange(ctx, req, gate.DriverChange{Object: object, Annotations: ds.GetAnnotations(),
		Operation: string(admissionv1.Delete), OperatorNamespace: true, PolicyPath: pathUpgradePolicy})
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
