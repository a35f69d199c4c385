package snapshot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
)

const examples = "../../deploy/examples/"

func TestParseExampleSnapshot(t *testing.T) {
	data, err := os.ReadFile(examples + "cluster/snapshot.yaml")
	require.NoError(t, err)
	s, err := Parse(data)
	require.NoError(t, err)
	assert.Len(t, s.Nodes, 9)
	assert.Len(t, s.Pods, 6)
	assert.Len(t, s.Deployments, 1)
	assert.Len(t, s.DaemonSets, 2) // the DCGM exporter and the validator DaemonSet
	assert.Len(t, s.ConfigMaps, 6)
	assert.Empty(t, s.Skipped)

	v, err := s.ServerVersion()
	require.NoError(t, err)
	assert.Equal(t, "v1.36.2+rke2r1", v)

	cfg := gate.DefaultConfig()
	load := loader.New(cfg, s.Source(""))
	cl, err := load.Cluster(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "nvcr.io/nvidia/gpu-operator:v26.3.3", cl.GPUOperatorImage)
	assert.Equal(t, "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless", cl.DCGMExporterImage)
	assert.ElementsMatch(t, []string{"h200-rke2-driver-canary", "v100-kernel-rke2-canary", "v100-kernel-rke2-kubedc"}, keys(cl.Records),
		"only the labelled ConfigMaps of the gate's namespace are records (not kube-root-ca.crt, not ml-team/anything-goes)")
	for name, e := range cl.Records {
		assert.NoError(t, e.Err, name)
	}

	hs, err := load.Holders(context.Background(), []string{"gpu-v100-01", "gpu-v100-02", "cpu-01"})
	require.NoError(t, err)
	assert.Equal(t, map[string][]gate.Holder{"gpu-v100-02": {{Namespace: "ml-team", Pod: "resnet50-train-8xk2q", Owner: "Job/resnet50-train", Resources: []string{"nvidia.com/gpu"}}}}, hs,
		"the finished smoke test and the DCGM exporter on gpu-v100-01 hold no GPU")
	onNode, err := s.Source("").Read(context.Background(), loader.HolderPods("gpu-v100-01"))
	require.NoError(t, err)
	assert.Len(t, onNode, 2)
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestParse(t *testing.T) {
	item := func(s string) string {
		return "apiVersion: v1\nkind: List\nitems:\n" + s
	}
	for _, tc := range []struct {
		name string
		in   string
		err  []string // substrings; nil = success
		chk  func(*testing.T, *Snapshot)
	}{
		{name: "JSON", in: `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}]}`,
			chk: func(t *testing.T, s *Snapshot) { assert.Equal(t, "n1", s.Nodes[0].Name) }},
		{name: "empty list", in: item(" []\n"), chk: func(t *testing.T, s *Snapshot) { assert.Empty(t, s.Nodes) }},
		{name: "other kinds are skipped and counted", in: item("- apiVersion: v1\n  kind: Service\n  metadata: {name: web}\n- apiVersion: v1\n  kind: Service\n  metadata: {name: db}\n"),
			chk: func(t *testing.T, s *Snapshot) { assert.Equal(t, map[string]int{"v1/Service": 2}, s.Skipped) }},
		{name: "Plans are read", in: item("- apiVersion: upgrade.cattle.io/v1\n  kind: Plan\n  metadata: {name: p, namespace: system-upgrade}\n  spec: {concurrency: 1, upgrade: {image: rancher/rke2-upgrade}}\n"),
			chk: func(t *testing.T, s *Snapshot) {
				require.Len(t, s.Plans, 1)
				assert.EqualValues(t, 1, s.Plans[0].Spec.Concurrency)
			}},
		{name: "empty input", in: "  \n", err: []string{"empty input"}},
		{name: "not YAML", in: "items: [\n", err: []string{"not valid YAML"}},
		{name: "a single Node is not a List", in: "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n", err: []string{`got apiVersion "v1", kind "Node"`}},
		{name: "NodeList is not what kubectl -o yaml prints", in: "apiVersion: v1\nkind: NodeList\nitems: []\n", err: []string{`kind "NodeList"`}},
		{name: "item without kind", in: item("- metadata: {name: x}\n"), err: []string{"items[0]", "no kind"}},
		{name: "bad Node field names item, field and value", in: item("- apiVersion: v1\n  kind: Node\n  metadata: {name: n1}\n  spec: {unschedulable: \"yes\"}\n"),
			err: []string{"items[0] (Node n1)", "spec.unschedulable", `"yes"`}},
		{name: "bad value inside a list", in: item("- apiVersion: v1\n  kind: Pod\n  metadata: {name: p, namespace: ns}\n  spec:\n    containers:\n    - name: a\n      ports: [{containerPort: \"http\"}]\n"),
			err: []string{"items[0] (Pod ns/p)", "containerPort", `"http"`}},
		{name: "bad Plan uses the Plan decoder", in: item("- apiVersion: upgrade.cattle.io/v1\n  kind: Plan\n  metadata: {name: p, namespace: system-upgrade}\n  spec: {concurrency: three}\n"),
			err: []string{"items[0] (Plan system-upgrade/p)", "spec.concurrency", `"three"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.in))
			if tc.err != nil {
				require.Error(t, err)
				for _, w := range tc.err {
					assert.Contains(t, err.Error(), w)
				}
				return
			}
			require.NoError(t, err)
			tc.chk(t, s)
		})
	}
}

func node(name, kubelet string, controlPlane bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	if controlPlane {
		n.Labels[LabelControlPlane] = ""
	}
	n.Status.NodeInfo.KubeletVersion = kubelet
	return n
}

func TestServerVersion(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []*corev1.Node
		want  string
		err   string
	}{
		{"lowest control-plane kubelet, numerically", []*corev1.Node{node("a", "v1.36.10+rke2r1", true), node("b", "v1.36.9+rke2r2", true), node("w", "v1.35.0+rke2r1", false)}, "v1.36.9+rke2r2", ""},
		{"minor before patch", []*corev1.Node{node("a", "v1.35.12+rke2r1", true), node("b", "v1.36.1+rke2r1", true)}, "v1.35.12+rke2r1", ""},
		{"no control plane", []*corev1.Node{node("w", "v1.36.1+rke2r1", false)}, "", "no node is labelled node-role.kubernetes.io/control-plane"},
		{"unreadable kubelet version", []*corev1.Node{node("a", "v1.36.1+rke2r1", true), node("b", "", true)}, "", "control-plane node b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := (&Snapshot{Nodes: tc.nodes}).ServerVersion()
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, v)
		})
	}
}

func TestRecords(t *testing.T) {
	rec, err := os.ReadFile(examples + "records/v100-kernel-rke2-kubedc.yaml")
	require.NoError(t, err)
	cm := func(ns, name, label string, data map[string]string) corev1.ConfigMap {
		c := corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
		if label != "" {
			c.Labels = map[string]string{"gpu-upgrade-gate.io/qualification": label}
		}
		return c
	}
	good := map[string]string{"qualification.yaml": string(rec)}
	s := &Snapshot{ConfigMaps: []corev1.ConfigMap{
		cm("gpu-upgrade-gate", "good", "true", good),
		cm("gpu-upgrade-gate", "unlabelled", "", good),
		cm("gpu-upgrade-gate", "label-false", "false", good),
		cm("tenant", "planted", "true", good),
		cm("gpu-upgrade-gate", "wrong-key", "true", map[string]string{"record.yaml": string(rec)}),
		cm("gpu-upgrade-gate", "bad", "true", map[string]string{"qualification.yaml": strings.Replace(string(rec), "rollbackPassed: true", "rollbackPassed: yes", 1)}),
	}}
	got, err := loader.New(gate.DefaultConfig(), s.Source("-")).Records(context.Background())
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"good", "wrong-key", "bad"}, keys(got))
	assert.NoError(t, got["good"].Err)
	assert.NotNil(t, got["good"].Record)
	assert.ErrorContains(t, got["wrong-key"].Err, `no data key "qualification.yaml"`)
	assert.ErrorContains(t, got["bad"].Err, `"yes" is not a boolean`)
}

func TestLoadRecords(t *testing.T) {
	t.Run("directory of the examples", func(t *testing.T) {
		files, err := LoadRecords(examples + "records")
		require.NoError(t, err)
		var names []string
		for _, f := range files {
			names = append(names, f.Name)
			assert.NoError(t, f.Entry.Err)
		}
		assert.Equal(t, []string{"h200-rke2-driver-canary", "v100-kernel-rke2-canary", "v100-kernel-rke2-kubedc"}, names, "sorted; the configmaps/ subdirectory is not read")
	})
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	t.Run("a record that does not load is kept with its error", func(t *testing.T) {
		p := write("one/broken.yaml", "id: [\n")
		files, err := LoadRecords(p)
		require.NoError(t, err)
		require.Len(t, files, 1)
		assert.Equal(t, "broken", files[0].Name)
		assert.ErrorContains(t, files[0].Entry.Err, "record file "+p)
	})
	t.Run("two files for one ConfigMap", func(t *testing.T) {
		write("dup/a.yaml", "x")
		write("dup/a.yml", "x")
		_, err := LoadRecords(filepath.Join(dir, "dup"))
		assert.ErrorContains(t, err, "both stand for ConfigMap a")
	})
	t.Run("directory without records", func(t *testing.T) {
		write("none/README.md", "x")
		_, err := LoadRecords(filepath.Join(dir, "none"))
		assert.ErrorContains(t, err, "holds no record file")
	})
	t.Run("missing path", func(t *testing.T) {
		_, err := LoadRecords(filepath.Join(dir, "nosuch"))
		assert.ErrorIs(t, err, os.ErrNotExist)
	})
}

func TestWorkloadImage(t *testing.T) {
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "sidecar", Image: "busybox"}, {Name: "gpu-operator", Image: "nvcr.io/nvidia/gpu-operator:v26.3.3"}}}
	assert.Equal(t, "nvcr.io/nvidia/gpu-operator:v26.3.3", loader.WorkloadImage(gate.WorkloadRef{Container: "gpu-operator"}, spec))
	assert.Equal(t, "busybox", loader.WorkloadImage(gate.WorkloadRef{}, spec), "no container name: the first")
	assert.Empty(t, loader.WorkloadImage(gate.WorkloadRef{Container: "operator"}, spec), "a named container that is not there is a missing fact, not the first container")
	assert.Empty(t, loader.WorkloadImage(gate.WorkloadRef{}, corev1.PodSpec{}))

	op, dcgm, err := loader.New(gate.DefaultConfig(), (&Snapshot{}).Source("-")).Images(context.Background())
	require.NoError(t, err)
	assert.Empty(t, op)
	assert.Empty(t, dcgm)
}

// TestSourceSelectsAsTheCaches: the List's Plans and Jobs are read, and
// each Read selects from them as the webhook's caches select from the
// cluster: SUC's Jobs (by their node and plan labels) and Plans of the SUC
// namespaces only, the halt record by name.
func TestSourceSelectsAsTheCaches(t *testing.T) {
	item := func(apiVersion, kind, ns, name, labels string) string {
		return fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":{"namespace":%q,"name":%q,"labels":{%s}}}`, apiVersion, kind, ns, name, labels)
	}
	list := `{"apiVersion":"v1","kind":"List","items":[` + strings.Join([]string{
		`{"apiVersion":"v1","kind":"Node","metadata":{"name":"gpu-1"}}`,
		item("batch/v1", "Job", "system-upgrade", "apply-gpu-on-gpu-1", `"upgrade.cattle.io/node":"gpu-1","upgrade.cattle.io/plan":"gpu"`),
		item("batch/v1", "Job", "system-upgrade", "unlabelled", ``),
		item("batch/v1", "Job", "ml-team", "train", `"upgrade.cattle.io/node":"gpu-1","upgrade.cattle.io/plan":"gpu"`),
		item("upgrade.cattle.io/v1", "Plan", "system-upgrade", "gpu", ``),
		item("upgrade.cattle.io/v1", "Plan", "elsewhere", "gpu", ``),
		item("v1", "ConfigMap", "gpu-upgrade-gate", "gpu-upgrade-gate-halts", ``),
	}, ",") + `]}`
	s, err := Parse([]byte(list))
	require.NoError(t, err)
	assert.Len(t, s.Jobs, 3, "the parser keeps Jobs")
	assert.Empty(t, s.Skipped)

	cfg := gate.DefaultConfig()
	load := loader.New(cfg, s.Source("v1.36.2+rke2r1"))
	cl, err := load.Cluster(context.Background())
	require.NoError(t, err)
	require.Len(t, cl.Proof.UpgradeJobs, 1)
	assert.Equal(t, "apply-gpu-on-gpu-1", cl.Proof.UpgradeJobs[0].Name)
	require.Len(t, cl.Plans, 1)
	assert.Equal(t, "system-upgrade", cl.Plans[0].Namespace)
	assert.NoError(t, cl.Halts.Err)
	assert.Equal(t, "v1.36.2+rke2r1", cl.ServerVersion)

	s.ConfigMaps = nil
	cl, err = load.Cluster(context.Background())
	require.NoError(t, err)
	assert.EqualError(t, cl.Halts.Err, "the ConfigMap does not exist", "a List without the halt record fails closed, as the webhook does")
}
