// Package snapshot reads a saved cluster state, the v1 List that Recipe
// prints (YAML or JSON), and is the loader's source for it (Source): the CLI
// then builds the engine's view exactly as the webhook builds it from its
// caches (internal/loader). Records also come from files.
package snapshot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// Recipe saves what the engine reads: every kind of object of the loader's
// Reads (internal/loader) and the Pods GPU holders are found among. It is
// the one spelling of the command (check's and inventory's help, their
// errors and docs/cli.md).
const Recipe = "kubectl get nodes,pods,deployments,daemonsets,configmaps,jobs,plans.upgrade.cattle.io -A -o json"

// RecoveryRecipe saves what recovery-plan reads: the nodes, the driver's
// Pods and DaemonSet, and the ResourceSlices.
const RecoveryRecipe = "kubectl get nodes,pods,daemonsets,resourceslices.resource.k8s.io -A -o json"

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
	Jobs        []*batchv1.Job
	Plans       []*upgradev1.Plan
	// ResourceSlices are read by the DRA recovery planner
	// (RecoveryRecipe), not by the engine.
	ResourceSlices []*resourcev1.ResourceSlice
	// ResourceClaims are read by proofs of DRA nodes (their allocation
	// checks' claims), in a List saved with resourceclaims.resource.k8s.io
	// and resourceslices.resource.k8s.io added to Recipe.
	ResourceClaims []*resourcev1.ResourceClaim
	// EtcdSnapshotFiles are RKE2's etcd snapshots (k3s.cattle.io/v1), in a
	// List saved with etcdsnapshotfiles.k3s.cattle.io added to Recipe (an
	// RKE2 cluster serves them; elsewhere kubectl refuses the type).
	EtcdSnapshotFiles []unstructured.Unstructured
	// NodeMaintenances are the maintenance operator's requests
	// (maintenance.nvidia.com/v1alpha1), in a List saved with
	// nodemaintenances.maintenance.nvidia.com added to Recipe (a cluster
	// that runs the maintenance operator serves them).
	NodeMaintenances []unstructured.Unstructured
	// Skipped counts the items of kinds the gate does not read, by
	// "apiVersion/kind".
	Skipped map[string]int
}

// Parse reads a v1 List (YAML or JSON). An item that does not decode is an
// error naming its index, kind and name, the field and the value seen.
//
// The List is decoded item by item, never converted whole: a JSON List is
// streamed, and a YAML List as kubectl prints it (items at column 0) is cut
// into its items, each converted alone. Memory is the input plus the decoded
// objects, not the many copies a whole-document conversion makes (a 10,000
// node List took 20-33 times its size).
func Parse(data []byte) (*Snapshot, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, errors.New("empty input; expected a v1 List as " + Recipe + " prints it")
	}
	s := &Snapshot{Skipped: map[string]int{}}
	each := func(i int, item []byte) error {
		if err := s.add(item); err != nil {
			return fmt.Errorf("items[%d]%s: %w", i, describeItem(item), err)
		}
		return nil
	}
	var err error
	if trimmed[0] == '{' {
		err = streamJSONList(data, each)
	} else if header, items, ok := splitYAMLList(data); ok {
		err = yamlList(header, items, each)
	} else {
		err = wholeList(data, each)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

const listExpected = "expected apiVersion v1, kind List (" + Recipe + "), got apiVersion %q, kind %q"

// streamJSONList decodes a JSON List's items one at a time.
func streamJSONList(data []byte, each func(int, []byte) error) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	bad := func(err error) error { return fmt.Errorf("expected a v1 List: %w", err) }
	if _, err := dec.Token(); err != nil {
		return bad(err)
	}
	var apiVersion, kind string
	n := 0
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return bad(err)
		}
		switch key {
		case "apiVersion", "kind":
			var v string
			if err := dec.Decode(&v); err != nil {
				return bad(fmt.Errorf("%s: %w", key, err))
			}
			if key == "kind" {
				kind = v
			} else {
				apiVersion = v
			}
		case "items":
			if t, err := dec.Token(); err != nil || t != json.Delim('[') {
				if t == nil && err == nil {
					continue // "items": null
				}
				return bad(fmt.Errorf("items: expected a list"))
			}
			for ; dec.More(); n++ {
				var item json.RawMessage
				if err := dec.Decode(&item); err != nil {
					return bad(fmt.Errorf("items[%d]: %w", n, err))
				}
				if err := each(n, item); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return bad(err)
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return bad(err)
			}
		}
	}
	if _, err := dec.Token(); err != nil {
		return bad(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad(fmt.Errorf("unexpected data after the List at offset %d", dec.InputOffset()))
	}
	if apiVersion != "v1" || kind != "List" {
		return fmt.Errorf(listExpected, apiVersion, kind)
	}
	return nil
}

// splitYAMLList cuts a YAML List laid out as kubectl prints it: top-level
// keys at column 0, "items:" followed by entries that start with "- " at
// column 0 and continue indented by two. ok is false for any other layout,
// which is then converted whole. The items are sub-slices of data with
// their first two columns still in place.
func splitYAMLList(data []byte) (header []byte, items [][]byte, ok bool) {
	inItems := false
	start := -1 // of the current item
	var hdr bytes.Buffer
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += off + 1
		}
		line := data[off:end]
		body := bytes.TrimRight(line, "\r\n")
		switch {
		case len(bytes.TrimSpace(body)) == 0, body[0] == '#':
			// blank or a comment: belongs to whatever surrounds it
		case string(body) == "---" || string(body) == "...":
			return nil, nil, false
		case inItems && (body[0] == '-' && (len(body) == 1 || body[1] == ' ')):
			if start >= 0 {
				items = append(items, data[start:off])
			}
			start = off
		case body[0] == ' ':
			if inItems {
				if start < 0 || !bytes.HasPrefix(body, []byte("  ")) {
					return nil, nil, false
				}
			} else {
				hdr.Write(line)
			}
		default: // a top-level key
			if start >= 0 {
				items = append(items, data[start:off])
				start = -1
			}
			inItems = false
			if k := bytes.TrimSpace(body); bytes.Equal(k, []byte("items:")) {
				inItems = true
			} else {
				hdr.Write(line)
				if !bytes.HasSuffix(hdr.Bytes(), []byte("\n")) {
					hdr.WriteByte('\n')
				}
			}
		}
		off = end
	}
	if start >= 0 {
		items = append(items, data[start:])
	}
	return hdr.Bytes(), items, true
}

// yamlList checks the header and converts each item alone.
func yamlList(header []byte, items [][]byte, each func(int, []byte) error) error {
	var list struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(header, &list); err != nil {
		return fmt.Errorf("not valid YAML or JSON: %w", err)
	}
	if list.APIVersion != "v1" || list.Kind != "List" {
		return fmt.Errorf(listExpected, list.APIVersion, list.Kind)
	}
	for i, item := range items {
		// Strip the entry's "- " and the two columns of indentation.
		var doc bytes.Buffer
		doc.Grow(len(item))
		for j, line := range bytes.SplitAfter(item, []byte("\n")) {
			if j == 0 {
				line = bytes.TrimPrefix(line[1:], []byte(" "))
			} else if len(line) >= 2 && line[0] == ' ' && line[1] == ' ' {
				line = line[2:]
			}
			doc.Write(line)
		}
		raw, err := yaml.YAMLToJSON(doc.Bytes())
		if err != nil {
			return fmt.Errorf("items[%d]: not valid YAML: %w", i, err)
		}
		if err := each(i, raw); err != nil {
			return err
		}
	}
	return nil
}

// wholeList converts a List of any other layout whole.
func wholeList(data []byte, each func(int, []byte) error) error {
	raw, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fmt.Errorf("not valid YAML or JSON: %w", err)
	}
	var list struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf("expected a v1 List: %w", err)
	}
	if list.APIVersion != "v1" || list.Kind != "List" {
		return fmt.Errorf(listExpected, list.APIVersion, list.Kind)
	}
	for i, item := range list.Items {
		if err := each(i, item); err != nil {
			return err
		}
	}
	return nil
}

// stripPod keeps what makes a Pod a GPU holder and names it, and what a
// proof reads of a validator or allocation-check Pod (labels, start time,
// condition states; gate/fleet/nodeproof.go): a cluster's Pods outnumber its Nodes
// tenfold.
func stripPod(p corev1.Pod) corev1.Pod {
	p.ManagedFields, p.Annotations = nil, nil
	conds := make([]corev1.PodCondition, 0, len(p.Status.Conditions))
	for _, c := range p.Status.Conditions {
		conds = append(conds, corev1.PodCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime})
	}
	// The claims' names tie a DRA allocation check to its ResourceClaims.
	p.Status = corev1.PodStatus{Phase: p.Status.Phase, StartTime: p.Status.StartTime, Conditions: conds,
		ResourceClaimStatuses: p.Status.ResourceClaimStatuses, ExtendedResourceClaimStatus: p.Status.ExtendedResourceClaimStatus}
	p.Spec.Volumes, p.Spec.Affinity, p.Spec.Tolerations = nil, nil, nil
	for _, set := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range set {
			c := &set[i]
			*c = corev1.Container{Name: c.Name, Image: c.Image, Resources: c.Resources, Env: c.Env}
		}
	}
	return p
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
		// Kept as the webhook caches them: the images, addresses and status
		// the rules never read were most of a snapshot's memory. Every taint
		// and annotation stays: the config that names the out-of-service
		// marks is read after the snapshot.
		stripped, _ := webhook.StripNodeKeepingMarks(n)
		s.Nodes = append(s.Nodes, stripped.(*corev1.Node))
	case "v1/Pod":
		var p corev1.Pod
		if err := decode(item, &p); err != nil {
			return err
		}
		s.Pods = append(s.Pods, stripPod(p))
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
	case "batch/v1/Job":
		j := &batchv1.Job{}
		if err := decode(item, j); err != nil {
			return err
		}
		// Kept as the webhook caches SUC's Jobs (labels, creation, finish).
		stripped, _ := webhook.StripJob(j)
		s.Jobs = append(s.Jobs, stripped.(*batchv1.Job))
	case upgradev1.SchemeGroupVersion.String() + "/" + upgradev1.PlanKind:
		p, err := upgradev1.DecodePlan(item)
		if err != nil {
			return err
		}
		s.Plans = append(s.Plans, p)
	case resourcev1.SchemeGroupVersion.String() + "/ResourceSlice":
		rs := &resourcev1.ResourceSlice{}
		if err := decode(item, rs); err != nil {
			return err
		}
		s.ResourceSlices = append(s.ResourceSlices, rs)
	case resourcev1.SchemeGroupVersion.String() + "/ResourceClaim":
		rc := &resourcev1.ResourceClaim{}
		if err := decode(item, rc); err != nil {
			return err
		}
		s.ResourceClaims = append(s.ResourceClaims, rc)
	case loader.ETCDSnapshotFileGVK.GroupVersion().String() + "/" + loader.ETCDSnapshotFileGVK.Kind:
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(item); err != nil {
			return err
		}
		s.EtcdSnapshotFiles = append(s.EtcdSnapshotFiles, u)
	case loader.NodeMaintenanceGVK.GroupVersion().String() + "/" + loader.NodeMaintenanceGVK.Kind:
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(item); err != nil {
			return err
		}
		s.NodeMaintenances = append(s.NodeMaintenances, u)
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
	f, err := openInput(path)
	if err != nil {
		return gate.RecordEntry{}, err
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil {
		return gate.RecordEntry{}, err
	} else if !info.Mode().IsRegular() {
		return gate.RecordEntry{}, fmt.Errorf("%w: it is %s, not a regular file; save the record to a file first", ErrInput, fileKind(info.Mode()))
	}
	data, err := io.ReadAll(io.LimitReader(f, qualification.MaxRecordBytes+1))
	if err != nil {
		return gate.RecordEntry{}, fmt.Errorf("%s: %w", path, err)
	}
	rec, err := qualification.Load(bytes.NewReader(data))
	var le *qualification.LoadError
	if err != nil && !errors.As(err, &le) {
		return gate.RecordEntry{}, fmt.Errorf("%s: %w", path, err)
	}
	if err != nil {
		err = fmt.Errorf("record file %s: %w", path, err)
	}
	// A file carries no attestation; its digest is what an approval of a
	// ConfigMap holding it byte for byte names.
	return gate.RecordEntry{Record: rec, Err: err, Attestation: qualification.Attestation{DataSHA256: qualification.DataSHA256(string(data))}}, nil
}

// KeepAttestation is the attestation of a ConfigMap (was) for a record file
// that stands for it (file): the author and approval stay, the digest is
// the file's, so the approval holds only for the data it approved.
func KeepAttestation(was, file qualification.Attestation) qualification.Attestation {
	was.DataSHA256 = file.DataSHA256
	return was
}
