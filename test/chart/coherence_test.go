package chart

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// configOf loads the engine configuration the chart renders, exactly as
// `serve --config` does.
func configOf(t *testing.T, objs []Object) (*gate.Config, string) {
	t.Helper()
	var problems []string
	d := only(Find[*appsv1.Deployment](objs), "Deployment", &problems)
	require.Empty(t, problems)
	cfgPath, ok := flag(d.Spec.Template.Spec.Containers[0].Args, "config")
	require.True(t, ok, "serve has no --config")
	// The ConfigMap of the volume mounted where --config points.
	var volume, cmName string
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		if m.MountPath == filepath.Dir(cfgPath) {
			volume = m.Name
		}
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil && v.Name == volume {
			cmName = v.ConfigMap.Name
		}
	}
	for _, cm := range Find[*corev1.ConfigMap](objs) {
		if cm.Name == cmName {
			data, ok := cm.Data[filepath.Base(cfgPath)]
			require.True(t, ok, "ConfigMap %s has no key %s", cm.Name, filepath.Base(cfgPath))
			cfg, err := gate.LoadConfig([]byte(data))
			require.NoError(t, err, "the rendered configuration does not load:\n%s", data)
			return cfg, data
		}
	}
	t.Fatalf("no ConfigMap %s", cmName)
	return nil, ""
}

// TestCoherence: the chart and the binary agree. Every webhook path the chart
// renders is one the server registers, under the names the audit log keys
// on; the configuration ConfigMap loads strictly; and every selector, Role
// and NodeFeatureRule vendor follows from that configuration.
func TestCoherence(t *testing.T) {
	// The names and paths of the webhook table, which is what the server
	// registers (TestWebhookTable).
	for file := range variants {
		t.Run(variantName(file), func(t *testing.T) {
			r := load(t, file)
			cfg, _ := configOf(t, r.objs)
			served := map[string]string{} // an optional row only where its namespaces are configured
			for i := range webhook.Webhooks {
				if w := &webhook.Webhooks[i]; w.Rendered(cfg) {
					served[w.Name] = w.Path
				}
			}
			assert.Equal(t, r.e.namespace, cfg.Namespace, "the configuration's namespace is the release namespace")
			var problems []string
			v := only(Find[*admissionregistrationv1.ValidatingWebhookConfiguration](r.objs), "ValidatingWebhookConfiguration", &problems)
			require.Empty(t, problems)
			rendered := map[string]string{}
			for _, w := range v.Webhooks {
				if r.e.url != "" {
					require.NotNil(t, w.ClientConfig.URL, w.Name)
					rendered[w.Name] = strings.TrimPrefix(*w.ClientConfig.URL, r.e.url)
					continue
				}
				require.NotNil(t, w.ClientConfig.Service, w.Name)
				require.NotNil(t, w.ClientConfig.Service.Path, w.Name)
				rendered[w.Name] = *w.ClientConfig.Service.Path
			}
			assert.Equal(t, served, rendered, "webhook names and paths: chart vs the webhook table")

			plans, _ := namespacesSelected(hook(v, webhook.WebhookPlans).NamespaceSelector)
			assert.Equal(t, cfg.SUCNamespaces, plans, "Plan webhook namespaces vs config sucNamespaces")
			if w := hook(v, webhook.WebhookDRAPlugins); w != nil {
				ns, _ := namespacesSelected(w.NamespaceSelector)
				assert.Equal(t, webhook.DRADriverNamespaces.Of(cfg), ns, "DRA plugin webhook namespaces vs config draDrivers")
				assert.Equal(t, r.e.draNamespaces, ns, "each namespace once")
				// The drivers' configured controllers, as the engine reads them.
				assert.Contains(t, w.MatchConditions[0].Expression, " || (request.operation != 'DELETE' && "+webhook.NotADRAControllerCondition(cfg)+")",
					"DRA plugin webhook's exempt controllers vs config draDrivers[].controllers")
			}
			if w := hook(v, webhook.WebhookDRAWorkloads); w != nil {
				ns, _ := namespacesSelected(w.NamespaceSelector)
				assert.Equal(t, webhook.DRADriverNamespaces.Of(cfg), ns, "DRA workload webhook namespaces vs config draDrivers")
				require.Len(t, w.MatchConditions, 4)
				assert.Equal(t, webhook.NotADRAControllerCondition(cfg), w.MatchConditions[3].Expression,
					"DRA workload webhook's exempt controllers vs config draDrivers[].controllers")
			}
			deletions, _ := namespacesSelected(hook(v, webhook.WebhookNamespaces).NamespaceSelector)
			assert.Equal(t, webhook.DriverNamespaces.Of(cfg), deletions, "namespaces webhook namespaces vs config gpuOperator, proof.validator and draDrivers")
			jobs, _ := namespacesSelected(hook(v, webhook.WebhookJobs).NamespaceSelector)
			assert.Equal(t, cfg.SUCNamespaces, jobs, "Job webhook namespaces vs config sucNamespaces")
			assert.Equal(t, expectedJobMatchConditions(cfg.SUCNamespaces), hook(v, webhook.WebhookJobs).MatchConditions,
				"Job match conditions vs config sucNamespaces")
			status, _ := namespacesSelected(hook(v, webhook.WebhookPlanStatus).NamespaceSelector)
			assert.Equal(t, cfg.SUCNamespaces, status, "Plan status webhook namespaces vs config sucNamespaces")
			assert.Equal(t, expectedPlanStatusMatchConditions(cfg.SUCNamespaces), hook(v, webhook.WebhookPlanStatus).MatchConditions,
				"Plan status match conditions vs config sucNamespaces")
			records, _ := namespacesSelected(hook(v, webhook.WebhookRecords).NamespaceSelector)
			assert.Equal(t, []string{cfg.Namespace}, records, "record webhook namespace vs config namespace")

			assert.Equal(t, expectedNodeMatchConditions(cfg.GPUVendors, cfg.Exemptions, r.e.taintControllers), hook(v, webhook.WebhookNodes).MatchConditions,
				"Node match conditions vs config gpuVendors (the engine's GPU-node definition), unnarrowed Node exemptions and webhook.nodeTaintControllers")
			assert.Equal(t, expectedCompletionMatchConditions(cfg.GPUVendors, r.e.sucServiceAccounts), hook(v, webhook.WebhookCompletions).MatchConditions,
				"completion match conditions vs config gpuVendors and webhook.sucServiceAccounts")

			// The workload Roles name exactly the configured workloads.
			names, gates := map[string][]string{}, []string{}
			for _, ro := range Find[*rbacv1.Role](r.objs) {
				if strings.HasSuffix(ro.Name, "-dra") {
					continue // the DRA drivers' namespaces' DaemonSets, checked by checkRBAC
				}
				if strings.HasSuffix(ro.Name, "-creation-gates") {
					for _, rule := range ro.Rules {
						gates = append(gates, ro.Namespace+"/"+strings.Join(rule.Resources, ",")+"/"+strings.Join(rule.ResourceNames, ","))
					}
					continue
				}
				for _, rule := range ro.Rules {
					for _, res := range rule.Resources {
						if res == "deployments" || res == "daemonsets" {
							names[res] = append(names[res], ro.Namespace+"/"+strings.Join(rule.ResourceNames, ","))
						}
					}
				}
			}
			assert.Equal(t, []string{cfg.GPUOperator.Namespace + "/" + cfg.GPUOperator.Name}, names["deployments"])
			assert.ElementsMatch(t, []string{cfg.DCGMExporter.Namespace + "/" + cfg.DCGMExporter.Name,
				cfg.Proof.Validator.Namespace + "/" + cfg.Proof.Validator.DaemonSet}, names["daemonsets"], "the DCGM exporter's and the validator DaemonSet, by name")
			// The creation-gate Roles name exactly the configured gates' objects.
			var want []string
			for _, g := range cfg.CreationGates {
				res := "deployments"
				if g.Kind == gate.GateConfigMapKey {
					res = "configmaps"
				}
				want = append(want, g.Namespace+"/"+res+"/"+g.Object)
			}
			assert.ElementsMatch(t, want, gates, "creation-gate Roles vs config creationGates")

			if nfr := FindUnstructured(r.objs, NodeFeatureRule); len(nfr) == 1 {
				rules, _, _ := unstructured.NestedSlice(nfr[0].Object, "spec", "rules")
				vendors := rules[0].(map[string]any)["matchFeatures"].([]any)[0].(map[string]any)["matchExpressions"].(map[string]any)["vendor"].(map[string]any)["value"]
				var got []string
				for _, x := range vendors.([]any) {
					got = append(got, x.(string))
				}
				assert.Equal(t, cfg.GPUVendors, got, "NodeFeatureRule vendors vs config gpuVendors")
			}
		})
	}
}

// TestValuesSchemaCoversConfig: config in values.schema.json has exactly the
// keys of gate.Config except namespace (the release namespace), so a key
// added to the engine is added to the chart too.
func TestValuesSchemaCoversConfig(t *testing.T) {
	dir, err := Dir()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(dir, "values.schema.json"))
	require.NoError(t, err)
	var schema struct {
		Properties map[string]struct {
			Properties map[string]any `json:"properties"`
		} `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(data, &schema))
	var inSchema []string
	for k := range schema.Properties["config"].Properties {
		inSchema = append(inSchema, k)
	}
	sort.Strings(inSchema)
	var inConfig []string
	ct := reflect.TypeFor[gate.Config]()
	for i := 0; i < ct.NumField(); i++ {
		if k, _, _ := strings.Cut(ct.Field(i).Tag.Get("json"), ","); k != "namespace" {
			inConfig = append(inConfig, k)
		}
	}
	sort.Strings(inConfig)
	assert.Equal(t, inConfig, inSchema)
}

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// TestServeAcceptsTheChartsArgs runs the real binary with the Deployment's
// args, the rendered config file and a missing kubeconfig: serve must parse
// every flag and load the configuration, and stop only at the kubeconfig.
func TestServeAcceptsTheChartsArgs(t *testing.T) {
	buildOnce.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "gug-chart-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "gpu-upgrade-gate")
		cmd := exec.Command("go", "build", "-o", binary, "./cmd/gpu-upgrade-gate")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = &buildError{err, string(out)}
		}
	})
	require.NoError(t, buildErr)
	for file := range variants {
		t.Run(variantName(file), func(t *testing.T) {
			r := load(t, file)
			_, data := configOf(t, r.objs)
			tmp := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(tmp, "config.yaml"), []byte(data), 0o600))
			d := Find[*appsv1.Deployment](r.objs)[0]
			var args []string
			for _, a := range d.Spec.Template.Spec.Containers[0].Args {
				switch {
				case strings.HasPrefix(a, "--config="):
					a = "--config=" + filepath.Join(tmp, "config.yaml")
				case strings.HasPrefix(a, "--cert-dir="):
					a = "--cert-dir=" + tmp
				}
				args = append(args, a)
			}
			args = append(args, "--kubeconfig="+filepath.Join(tmp, "no-such-kubeconfig"))
			cmd := exec.Command(binary, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			require.Error(t, err)
			assert.Contains(t, stderr.String(), "serve: kubeconfig:", "serve must get past its flags and --config: %s", stderr.String())
		})
	}
}

// registrations records the paths webhook.Server.Register serves.
type registrations struct {
	ctrlwebhook.Server
	paths []string
}

func (r *registrations) Register(path string, _ http.Handler) { r.paths = append(r.paths, path) }

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string {
	return "go build ./cmd/gpu-upgrade-gate: " + e.err.Error() + "\n" + e.out
}
