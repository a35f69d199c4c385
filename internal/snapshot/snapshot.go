// Package snapshot turns a saved cluster state into the engine's input, so the
// CLI decides offline exactly as the webhook decides from its caches. The
// state is the v1 List that
//
//	kubectl get nodes,pods,deployments,daemonsets,configmaps -A -o yaml
//
// prints (YAML or JSON); records also come from files.
package snapshot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// LabelControlPlane marks the nodes whose kubelet version stands in for the
// API server's when no version is given.
const LabelControlPlane = "node-role.kubernetes.io/control-plane"

// Snapshot is the cluster state of one List, by kind. Items of other kinds
// are counted in Skipped and otherwise ignored.
type Snapshot struct {
	Nodes       []*corev1.Node
	Pods        []corev1.Pod
	Deployments []appsv1.Deployment
	DaemonSets  []appsv1.DaemonSet
	ConfigMaps  []corev1.ConfigMap
	Plans       []*upgradev1.Plan
	// Skipped counts the items of kinds the gate does not read, by
	// "apiVersion/kind".
	Skipped map[string]int
}

// Parse reads a v1 List (YAML or JSON). An item that does not decode is an
// error naming its index, kind and name, the field and the value seen.
func Parse(data []byte) (*Snapshot, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("empty input; expected a v1 List as kubectl get nodes,pods,deployments,daemonsets,configmaps -A -o yaml prints it")
	}
	raw, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("not valid YAML or JSON: %w", err)
	}
	var list struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("expected a v1 List: %w", err)
	}
	if list.APIVersion != "v1" || list.Kind != "List" {
		return nil, fmt.Errorf("expected apiVersion v1, kind List (kubectl get ... -o yaml), got apiVersion %q, kind %q", list.APIVersion, list.Kind)
	}
	s := &Snapshot{Skipped: map[string]int{}}
	for i, item := range list.Items {
		if err := s.add(item); err != nil {
			return nil, fmt.Errorf("items[%d]%s: %w", i, describeItem(item), err)
		}
	}
	return s, nil
}

type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"metadata"`
}

func describeItem(item json.RawMessage) string {
	var tm typeMeta
	if json.Unmarshal(item, &tm) != nil || tm.Kind == "" {
		return ""
	}
	name := tm.Metadata.Name
	if tm.Metadata.Namespace != "" {
		name = tm.Metadata.Namespace + "/" + name
	}
	return fmt.Sprintf(" (%s %s)", tm.Kind, name)
}

func (s *Snapshot) add(item json.RawMessage) error {
	var tm typeMeta
	if err := json.Unmarshal(item, &tm); err != nil {
		return fmt.Errorf("expected an object with apiVersion and kind: %w", err)
	}
	switch tm.APIVersion + "/" + tm.Kind {
	case "v1/Node":
		n := &corev1.Node{}
		if err := decode(item, n); err != nil {
			return err
		}
		s.Nodes = append(s.Nodes, n)
	case "v1/Pod":
		var p corev1.Pod
		if err := decode(item, &p); err != nil {
			return err
		}
		s.Pods = append(s.Pods, p)
	case "apps/v1/Deployment":
		var d appsv1.Deployment
		if err := decode(item, &d); err != nil {
			return err
		}
		s.Deployments = append(s.Deployments, d)
	case "apps/v1/DaemonSet":
		var d appsv1.DaemonSet
		if err := decode(item, &d); err != nil {
			return err
		}
		s.DaemonSets = append(s.DaemonSets, d)
	case "v1/ConfigMap":
		var cm corev1.ConfigMap
		if err := decode(item, &cm); err != nil {
			return err
		}
		s.ConfigMaps = append(s.ConfigMaps, cm)
	case upgradev1.SchemeGroupVersion.String() + "/" + upgradev1.PlanKind:
		p, err := upgradev1.DecodePlan(item)
		if err != nil {
			return err
		}
		s.Plans = append(s.Plans, p)
	default:
		if tm.Kind == "" {
			return errors.New("the item has no kind")
		}
		s.Skipped[tm.APIVersion+"/"+tm.Kind]++
	}
	return nil
}

// decode unmarshals one item; a type error names the field and quotes the
// value seen, so a hand-edited snapshot can be fixed.
func decode(item json.RawMessage, into any) error {
	err := json.Unmarshal(item, into)
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err
	}
	var generic any
	_ = json.Unmarshal(item, &generic)
	seen := "a JSON " + te.Value
	if v, ok := lookup(generic, strings.Split(te.Field, "."), te.Value); ok {
		b, _ := json.Marshal(v)
		if len(b) > 80 {
			b = append(b[:80], "..."...)
		}
		seen = string(b)
	}
	return fmt.Errorf("field %s: expected %s, got %s", te.Field, te.Type, seen)
}

// lookup follows a field path of an UnmarshalTypeError (which leaves out list
// indices) to the first value of JSON kind want.
func lookup(v any, path []string, want string) (any, bool) {
	if list, ok := v.([]any); ok {
		for _, e := range list {
			if found, ok := lookup(e, path, want); ok {
				return found, true
			}
		}
		return nil, false
	}
	if len(path) == 0 || (len(path) == 1 && path[0] == "") {
		return v, jsonKind(v) == want
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	next, ok := m[path[0]]
	if !ok {
		return nil, false
	}
	return lookup(next, path[1:], want)
}

func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "null"
}

// ServerVersion stands in for the API server's version: the lowest kubelet
// version among control-plane nodes (label node-role.kubernetes.io/control-plane).
// It fails when there is none or one cannot be read.
func (s *Snapshot) ServerVersion() (string, error) {
	var lowest string
	var low gate.KubeVersion
	for _, n := range s.Nodes {
		if _, ok := n.Labels[LabelControlPlane]; !ok {
			continue
		}
		v := n.Status.NodeInfo.KubeletVersion
		kv, err := gate.ParseKube(v)
		if err != nil {
			return "", fmt.Errorf("control-plane node %s: status.nodeInfo.kubeletVersion: %w", n.Name, err)
		}
		if lowest == "" || kubeLess(kv, low) {
			lowest, low = v, kv
		}
	}
	if lowest == "" {
		return "", fmt.Errorf("no node is labelled %s, so the API server version cannot be inferred", LabelControlPlane)
	}
	return lowest, nil
}

func kubeLess(a, b gate.KubeVersion) bool {
	return slices.Compare([]int{a.Major, a.Minor, a.Patch}, []int{b.Major, b.Minor, b.Patch}) < 0
}

// Records loads the labelled record ConfigMaps of namespace, as the webhook
// reads them; one that does not load is kept with its error.
func Records(cms []corev1.ConfigMap, namespace string) map[string]gate.RecordEntry {
	out := map[string]gate.RecordEntry{}
	for i := range cms {
		cm := &cms[i]
		if cm.Namespace != namespace || cm.Labels[qualification.ConfigMapLabel] != "true" {
			continue
		}
		rec, err := qualification.FromConfigMap(cm)
		out[cm.Name] = gate.RecordEntry{Record: rec, Err: err}
	}
	return out
}

// RecordFile is one record file loaded from LoadRecords.
type RecordFile struct {
	// Name is the ConfigMap the file stands for: its base name without
	// .yaml, .yml or .json.
	Name  string
	Path  string
	Entry gate.RecordEntry
}

var recordExts = []string{".yaml", ".yml", ".json"}

// LoadRecords reads a record file, or every .yaml/.yml/.json file of a
// directory (not its subdirectories), where file NAME.yaml stands for
// ConfigMap NAME. A file that does not load is kept with its error; only a
// file or directory that cannot be read is an error.
func LoadRecords(path string) ([]RecordFile, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	files := []string{path}
	if info.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, err
		}
		files = nil
		for _, e := range entries {
			if !e.IsDir() && slices.Contains(recordExts, filepath.Ext(e.Name())) {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%s holds no record file (*.yaml, *.yml, *.json)", path)
		}
	}
	var out []RecordFile
	seen := map[string]string{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
		if other, dup := seen[name]; dup {
			return nil, fmt.Errorf("%s and %s both stand for ConfigMap %s; keep one", other, f, name)
		}
		seen[name] = f
		entry, err := LoadRecordFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, RecordFile{Name: name, Path: f, Entry: entry})
	}
	return out, nil
}

// LoadRecordFile loads one record file. A record that does not load is
// returned as the entry's Err (naming the file); the error is only for a
// file that cannot be read.
func LoadRecordFile(path string) (gate.RecordEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return gate.RecordEntry{}, err
	}
	defer f.Close()
	rec, err := qualification.Load(f)
	var le *qualification.LoadError
	if err != nil && !errors.As(err, &le) {
		return gate.RecordEntry{}, fmt.Errorf("%s: %w", path, err)
	}
	if err != nil {
		err = fmt.Errorf("record file %s: %w", path, err)
	}
	return gate.RecordEntry{Record: rec, Err: err}, nil
}

// WorkloadImage returns the image of the referenced container of spec: the
// container named ref.Container, or the first one when the name is empty.
// "" when there is no such container, which the engine reports as a
// missing fact.
func WorkloadImage(ref gate.WorkloadRef, spec corev1.PodSpec) string {
	for i, c := range spec.Containers {
		if (ref.Container == "" && i == 0) || c.Name == ref.Container {
			return c.Image
		}
	}
	return ""
}

// Images returns the GPU Operator Deployment's and the DCGM exporter
// DaemonSet's images, as the config names them; "" for a workload that is
// not in the snapshot.
func (s *Snapshot) Images(cfg *gate.Config) (gpuOperator, dcgmExporter string) {
	for _, d := range s.Deployments {
		if d.Namespace == cfg.GPUOperator.Namespace && d.Name == cfg.GPUOperator.Name {
			gpuOperator = WorkloadImage(cfg.GPUOperator, d.Spec.Template.Spec)
		}
	}
	for _, d := range s.DaemonSets {
		if d.Namespace == cfg.DCGMExporter.Namespace && d.Name == cfg.DCGMExporter.Name {
			dcgmExporter = WorkloadImage(cfg.DCGMExporter, d.Spec.Template.Spec)
		}
	}
	return gpuOperator, dcgmExporter
}

// Cluster builds the engine's view: the nodes, the Plans of the SUC
// namespaces, the record ConfigMaps of the gate's namespace and the two
// workload images. ServerVersion is left to the caller.
func (s *Snapshot) Cluster(cfg *gate.Config) *gate.Cluster {
	cl := &gate.Cluster{Nodes: s.Nodes, Records: Records(s.ConfigMaps, cfg.Namespace)}
	for _, p := range s.Plans {
		if slices.Contains(cfg.SUCNamespaces, p.Namespace) {
			cl.Plans = append(cl.Plans, p)
		}
	}
	cl.GPUOperatorImage, cl.DCGMExporterImage = s.Images(cfg)
	return cl
}

// PodsByNode groups the Pods by spec.nodeName; unscheduled Pods are left out.
func (s *Snapshot) PodsByNode() map[string][]corev1.Pod {
	out := map[string][]corev1.Pod{}
	for _, p := range s.Pods {
		if p.Spec.NodeName != "" {
			out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p)
		}
	}
	return out
}

// Holders lists the GPU holders of each named node, as the webhook lists
// them live for the nodes a review asks about.
func (s *Snapshot) Holders(nodes []string) map[string][]gate.Holder {
	byNode := s.PodsByNode()
	out := make(map[string][]gate.Holder, len(nodes))
	for _, n := range nodes {
		if hs := gate.HoldersOf(byNode[n]); len(hs) > 0 {
			out[n] = hs
		}
	}
	return out
}
