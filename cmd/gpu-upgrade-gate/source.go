package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/snapshot"
)

// clusterFlags choose where check and inventory read the cluster: a saved
// List (--cluster) or the API server (--kubeconfig). Either way the loader
// reads what the webhook's caches hold (internal/loader).
type clusterFlags struct {
	cluster, kubeconfig, configMap string
}

const defaultConfigMap = "gpu-upgrade-gate-config"

func (c *clusterFlags) register(fs interface {
	StringVar(p *string, name, value, usage string)
}) {
	fs.StringVar(&c.cluster, "cluster", "", "v1 List of the cluster's state, saved with: "+snapshot.Recipe)
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "read the live cluster through this kubeconfig instead of a --cluster file: the objects the webhook's caches hold")
	fs.StringVar(&c.configMap, "config-map", defaultConfigMap, "with --kubeconfig and no --config: the chart's ConfigMap (key config.yaml) in --namespace that holds the webhook's config")
}

func (c *clusterFlags) check() error {
	if (c.cluster == "") == (c.kubeconfig == "") {
		return usagef("give exactly one of --cluster (a List saved with %s) and --kubeconfig", snapshot.Recipe)
	}
	return nil
}

// live is the --kubeconfig source, nil for --cluster.
func (c *clusterFlags) live() (*loader.Live, error) {
	if c.kubeconfig == "" {
		return nil, nil
	}
	l, err := loader.NewLive(c.kubeconfig)
	if err != nil {
		return nil, inputf("--kubeconfig %s: %v", c.kubeconfig, err)
	}
	return l, nil
}

// readConfig is the config a command judges with: the file path names,
// else (with --kubeconfig) the webhook's own from its ConfigMap, else the
// defaults.
func (c *clusterFlags) readConfig(ctx context.Context, live *loader.Live, path, namespace string, namespaceSet bool) (*gate.Config, error) {
	if live != nil && path == "" {
		return c.liveConfig(ctx, live, namespace)
	}
	return loadConfig(path, namespace, namespaceSet)
}

// liveConfig reads the webhook's config from its ConfigMap, as the chart
// mounts it for serve.
func (c *clusterFlags) liveConfig(ctx context.Context, live *loader.Live, namespace string) (*gate.Config, error) {
	var cm corev1.ConfigMap
	if err := live.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: c.configMap}, &cm); err != nil {
		return nil, inputf("--kubeconfig %s: the webhook's config, ConfigMap %s/%s (--config-map, --namespace): %v; or pass --config", c.kubeconfig, namespace, c.configMap, err)
	}
	data, ok := cm.Data["config.yaml"]
	if !ok {
		return nil, inputf("ConfigMap %s/%s has no key config.yaml; expected the chart's config ConfigMap, or pass --config", namespace, c.configMap)
	}
	cfg, err := gate.LoadConfig([]byte(data))
	if err != nil {
		return nil, inputf("ConfigMap %s/%s, key config.yaml: %v", namespace, c.configMap, err)
	}
	if cfg.Namespace != namespace {
		return nil, inputf("ConfigMap %s/%s: config namespace %q differs from the ConfigMap's; records are read only from the gate's own namespace", namespace, c.configMap, cfg.Namespace)
	}
	return cfg, nil
}

// source opens the cluster: the live source, or the parsed --cluster file
// (snap, for its checks) whose server version is version ("" infers it).
func (c *clusterFlags) source(live *loader.Live, version string) (loader.Source, *snapshot.Snapshot, error) {
	if live != nil {
		if version != "" {
			return fixedVersion{live, version}, nil, nil
		}
		return live, nil, nil
	}
	data, err := readInput("--cluster", c.cluster)
	if err != nil {
		return nil, nil, err
	}
	snap, err := snapshot.Parse(data)
	if err != nil {
		return nil, nil, inputf("--cluster %s: %v", c.cluster, err)
	}
	if len(snap.Nodes) == 0 {
		return nil, nil, inputf("--cluster %s holds no Node; save it with %s", c.cluster, snapshot.Recipe)
	}
	return snap.Source(version), snap, nil
}

// where names the source in errors.
func (c *clusterFlags) where() string {
	if c.kubeconfig != "" {
		return "--kubeconfig " + c.kubeconfig
	}
	return "--cluster " + c.cluster
}

// fixedVersion is a source whose API server version is given.
type fixedVersion struct {
	loader.Source
	version string
}

func (f fixedVersion) ServerVersion(context.Context) (string, error) { return f.version, nil }
