package loader

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// Live reads from the API server: each Read is a List with the row's
// namespaces and selectors (the webhook's caches are configured with the
// same), or a Get of its named object.
type Live struct {
	Client    client.Reader
	Discovery discovery.DiscoveryInterface
	// Dynamic lists the resources of CEL preconditions (Preconditions).
	Dynamic dynamic.Interface
}

// NewLive is a Live source through a kubeconfig file ("" : the usual
// lookup, $KUBECONFIG or ~/.kube/config, or in-cluster).
func NewLive(kubeconfig string) (*Live, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	restCfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, err
	}
	return NewLiveFor(restCfg)
}

// NewLiveFor is a Live source through restCfg.
func NewLiveFor(restCfg *rest.Config) (*Live, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := upgradev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	return &Live{Client: c, Discovery: disc, Dynamic: dyn}, nil
}

// Read lists (or gets) r's objects.
func (l *Live) Read(ctx context.Context, r Read) ([]client.Object, error) {
	if r.Name != "" {
		obj := r.Object.DeepCopyObject().(client.Object)
		err := l.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespaces[0], Name: r.Name}, obj)
		if client.IgnoreNotFound(err) != nil {
			return nil, err
		}
		if err != nil {
			return nil, nil
		}
		return []client.Object{obj}, nil
	}
	namespaces := r.Namespaces
	if namespaces == nil {
		namespaces = []string{""}
	}
	var out []client.Object
	for _, ns := range namespaces {
		list := r.NewList()
		opts := []client.ListOption{client.InNamespace(ns)}
		if r.Label != nil {
			opts = append(opts, client.MatchingLabelsSelector{Selector: r.Label})
		}
		if r.Field != nil {
			opts = append(opts, client.MatchingFieldsSelector{Selector: r.Field})
		}
		if err := l.Client.List(ctx, list, opts...); err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			obj, ok := it.(client.Object)
			if !ok {
				return nil, fmt.Errorf("%s: unexpected item %T", r.What, it)
			}
			out = append(out, obj)
		}
	}
	return out, nil
}

// ServerVersion asks the API server.
func (l *Live) ServerVersion(context.Context) (string, error) {
	v, err := l.Discovery.ServerVersion()
	if err != nil {
		return "", fmt.Errorf("the API server's version: %w", err)
	}
	return v.GitVersion, nil
}
