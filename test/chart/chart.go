// Package chart renders the Helm chart (charts/gpu-upgrade-gate) with the
// helm that `make helm` builds, and decodes every rendered object with the
// real API types: apps/v1, batch/v1, core/v1, admissionregistration/v1,
// policy/v1, rbac/v1, networking/v1 and cert-manager's v1. The NFD
// NodeFeatureRule and the Prometheus-operator ServiceMonitor and
// PrometheusRule, whose Go types this module does not import, decode as
// unstructured (hack/tools/promtool decodes the PrometheusRule with its real
// type); any other kind is an error, so a template that renders something
// unexpected fails loudly.
//
// The chart's tests live beside it; internal/testenv uses Render to install
// the chart's own webhook configuration, ServiceAccount and RBAC into the e2e
// control plane.
package chart

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Kinds decoded as unstructured: their API types live in modules this one
// does not depend on.
var (
	NodeFeatureRule = schema.GroupVersionKind{Group: "nfd.k8s-sigs.io", Version: "v1alpha1", Kind: "NodeFeatureRule"}
	ServiceMonitor  = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}
	PrometheusRule  = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "PrometheusRule"}
)

// Scheme holds every typed kind the chart may render.
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := certmanagerv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// Object is one rendered object and the template it came from.
type Object struct {
	Source string // e.g. gpu-upgrade-gate/templates/webhook.yaml
	client.Object
}

// Options of one render.
type Options struct {
	Release   string // default gpu-upgrade-gate
	Namespace string // default gpu-upgrade-gate
	// ValuesFiles are passed as --values, in order.
	ValuesFiles []string
	// Values are written to a temporary file and passed last (JSON is YAML).
	Values map[string]any
}

// RepoRoot is the repository root: the directory holding go.mod and charts/.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "charts", "gpu-upgrade-gate", "Chart.yaml")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root (go.mod with charts/gpu-upgrade-gate) not found above the working directory")
		}
		dir = parent
	}
}

// Dir is the chart's directory.
func Dir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "charts", "gpu-upgrade-gate"), nil
}

// Helm returns the helm binary: $GUG_HELM (the Makefile exports it), else the
// cache path hack/tools/helm/helm.sh --print-path names. It never builds.
func Helm() (string, error) {
	path := os.Getenv("GUG_HELM")
	if path == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		out, err := exec.Command(filepath.Join(root, "hack", "tools", "helm", "helm.sh"), "--print-path").Output()
		if err != nil {
			return "", fmt.Errorf("hack/tools/helm/helm.sh --print-path: %w", err)
		}
		path = strings.TrimSpace(string(out))
	}
	if fi, err := os.Stat(path); err != nil || fi.IsDir() {
		return "", fmt.Errorf("helm is not built at %s: run `make helm` (once; it builds helm from its Go module)", path)
	}
	return path, nil
}

// Template runs helm template and returns its output.
func Template(o Options) ([]byte, error) {
	helm, err := Helm()
	if err != nil {
		return nil, err
	}
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	if o.Release == "" {
		o.Release = "gpu-upgrade-gate"
	}
	if o.Namespace == "" {
		o.Namespace = "gpu-upgrade-gate"
	}
	args := []string{"template", o.Release, dir, "--namespace", o.Namespace}
	for _, f := range o.ValuesFiles {
		args = append(args, "--values", f)
	}
	if o.Values != nil {
		data, err := yaml.Marshal(o.Values)
		if err != nil {
			return nil, err
		}
		f, err := os.CreateTemp("", "gug-values-*.yaml")
		if err != nil {
			return nil, err
		}
		defer os.Remove(f.Name())
		if _, err := f.Write(data); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
		args = append(args, "--values", f.Name())
	}
	cmd := exec.Command(helm, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Render templates the chart and decodes every object.
func Render(o Options) ([]Object, error) {
	out, err := Template(o)
	if err != nil {
		return nil, err
	}
	return Decode(out)
}

// Decode splits a multi-document YAML stream and decodes each object
// strictly (unknown fields and duplicate keys are errors) into its API type.
func Decode(stream []byte) ([]Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var objs []Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		source := ""
		for _, line := range strings.Split(string(doc), "\n") {
			if s, ok := strings.CutPrefix(line, "# Source: "); ok {
				source = s
				break
			}
		}
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		if s := strings.TrimSpace(string(js)); s == "null" || s == "" {
			continue // comments only
		}
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(js, &tm); err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
		var obj client.Object
		switch {
		case gvk == NodeFeatureRule || gvk == ServiceMonitor || gvk == PrometheusRule:
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(js); err != nil {
				return nil, fmt.Errorf("%s: %w", source, err)
			}
			obj = u
		default:
			ro, err := Scheme.New(gvk)
			if err != nil {
				return nil, fmt.Errorf("%s: kind %s is not one the chart is expected to render: %w", source, gvk, err)
			}
			co, ok := ro.(client.Object)
			if !ok {
				return nil, fmt.Errorf("%s: %s is not an object", source, gvk)
			}
			if err := yaml.UnmarshalStrict(js, co); err != nil {
				return nil, fmt.Errorf("%s: %s %w", source, gvk.Kind, err)
			}
			obj = co
		}
		objs = append(objs, Object{Source: source, Object: obj})
	}
}

// Find returns the rendered objects of type T.
func Find[T client.Object](objs []Object) []T {
	var out []T
	for _, o := range objs {
		if t, ok := o.Object.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// FindUnstructured returns the unstructured objects of one kind.
func FindUnstructured(objs []Object, gvk schema.GroupVersionKind) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if u, ok := o.Object.(*unstructured.Unstructured); ok && u.GroupVersionKind() == gvk {
			out = append(out, u)
		}
	}
	return out
}
