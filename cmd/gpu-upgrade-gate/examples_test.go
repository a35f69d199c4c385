package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/snapshot"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// recordFiles maps each plain record of the examples to its text.
func recordFiles(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(ex + "records/*.yaml")
	require.NoError(t, err)
	require.Len(t, paths, 3)
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		out[strings.TrimSuffix(filepath.Base(p), ".yaml")] = string(b)
	}
	return out
}

func exampleSnapshot(t *testing.T) *snapshot.Snapshot {
	t.Helper()
	data, err := os.ReadFile(exSnapshot)
	require.NoError(t, err)
	s, err := snapshot.Parse(data)
	require.NoError(t, err)
	return s
}

// TestExampleRecordsAgree: the plain records, their ConfigMap manifests and
// the ConfigMaps of the snapshot hold the same text, so every walkthrough
// path decides on the same record.
func TestExampleRecordsAgree(t *testing.T) {
	files := recordFiles(t)
	inSnapshot := map[string]string{}
	for _, cm := range exampleSnapshot(t).ConfigMaps {
		if cm.Namespace == "gpu-upgrade-gate" && cm.Labels[qualification.ConfigMapLabel] == "true" {
			inSnapshot[cm.Name] = cm.Data[qualification.ConfigMapKey]
		}
	}
	assert.Equal(t, files, inSnapshot, "cluster/snapshot.yaml record ConfigMaps")
	for name, text := range files {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(ex + "records/configmaps/" + name + ".yaml")
			require.NoError(t, err)
			var cm corev1.ConfigMap
			require.NoError(t, yaml.UnmarshalStrict(b, &cm))
			assert.Equal(t, "ConfigMap", cm.Kind)
			assert.Equal(t, name, cm.Name)
			assert.Equal(t, "gpu-upgrade-gate", cm.Namespace)
			assert.Equal(t, map[string]string{qualification.ConfigMapLabel: "true"}, cm.Labels)
			assert.Equal(t, text, cm.Data[qualification.ConfigMapKey])
			rec, err := qualification.FromConfigMap(&cm)
			require.NoError(t, err)
			assert.Equal(t, name+"-1", rec.ID, "the id follows the ConfigMap name")
		})
	}
}

func TestExampleConfigIsTheDefaults(t *testing.T) {
	data, err := os.ReadFile(config)
	require.NoError(t, err)
	cfg, err := gate.LoadConfig(data)
	require.NoError(t, err)
	assert.Equal(t, gate.DefaultConfig(), cfg)
	// Every key is written out, not left to the defaults.
	var keys map[string]any
	require.NoError(t, yaml.Unmarshal(data, &keys))
	def, err := json.Marshal(gate.DefaultConfig())
	require.NoError(t, err)
	var want map[string]any
	require.NoError(t, json.Unmarshal(def, &want))
	for k := range want {
		assert.Contains(t, keys, k)
	}
}

func loadFixture(t *testing.T, name string) *corev1.Node {
	t.Helper()
	b, err := os.ReadFile("../../testdata/nodes/" + name)
	require.NoError(t, err)
	var n corev1.Node
	require.NoError(t, json.Unmarshal(b, &n))
	return &n
}

// TestExampleNodesFromFixtures: GPU nodes keep the fixtures' labels; only the
// name, zone and, for the node at target, the kernel and driver differ. Their
// facts are the records' tuples.
func TestExampleNodesFromFixtures(t *testing.T) {
	s := exampleSnapshot(t)
	cfg := gate.DefaultConfig()
	cl, err := loader.New(cfg, s.Source("")).Cluster(context.Background())
	require.NoError(t, err)
	recs := map[string]*qualification.Record{}
	for name, text := range recordFiles(t) {
		r, err := qualification.Parse([]byte(text))
		require.NoError(t, err)
		recs[name] = r
	}
	v100, h200 := recs["v100-kernel-rke2-canary"], recs["h200-rke2-driver-canary"]
	changed := []string{"kubernetes.io/hostname", "feature.node.kubernetes.io/kernel-version.full", "nvidia.com/cuda.driver"}
	for _, tc := range []struct {
		node, fixture string
		tuple         qualification.Tuple
		hardware      []string
	}{
		{"gpu-v100-01", "node-v100.json", *v100.Source, v100.NormalizedHardware()},
		{"gpu-v100-02", "node-v100.json", *v100.Source, v100.NormalizedHardware()},
		{"gpu-v100-03", "node-v100.json", v100.Target, v100.NormalizedHardware()},
		{"gpu-h200-01", "node-h200.json", *h200.Source, h200.NormalizedHardware()},
	} {
		t.Run(tc.node, func(t *testing.T) {
			var n *corev1.Node
			for _, m := range s.Nodes {
				if m.Name == tc.node {
					n = m
				}
			}
			require.NotNil(t, n)
			fix := loadFixture(t, tc.fixture)
			for k, v := range fix.Labels {
				keep := true
				for _, c := range changed {
					keep = keep && !strings.HasPrefix(k, c)
				}
				if keep {
					assert.Equal(t, v, n.Labels[k], "label %s", k)
				}
			}
			f := cfg.FactsOf(n)
			assert.True(t, f.GPU)
			assert.True(t, f.Ready)
			assert.Equal(t, tc.hardware, f.Identities)
			assert.True(t, gate.SameTuple(cl.Current(f), tc.tuple), "%s runs %v, want %v", tc.node, cl.Current(f), tc.tuple)
		})
	}
	for _, n := range s.Nodes {
		if !strings.HasPrefix(n.Name, "gpu-") {
			assert.False(t, cfg.IsGPUNode(n), "%s is a CPU node", n.Name)
		}
	}
}

func TestExamplePlans(t *testing.T) {
	paths, err := filepath.Glob(ex + "plans/*.yaml")
	require.NoError(t, err)
	require.Len(t, paths, 6)
	records := recordFiles(t)
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			plans, err := upgradev1.DecodePlansYAML(b)
			require.NoError(t, err)
			for _, plan := range plans {
				assert.Equal(t, "system-upgrade", plan.Namespace)
				if name, ok := plan.Annotations[gate.AnnotationQualification]; ok {
					assert.Contains(t, records, name, "the annotation names an example record")
				}
			}
		})
	}
}

func TestExampleNodeFeatureRule(t *testing.T) {
	b, err := os.ReadFile(ex + "nodefeaturerule.yaml")
	require.NoError(t, err)
	var nfr struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Rules []struct {
				Name           string            `json:"name"`
				LabelsTemplate string            `json:"labelsTemplate"`
				Labels         map[string]string `json:"labels"`
				MatchFeatures  []struct {
					Feature          string `json:"feature"`
					MatchExpressions map[string]struct {
						Op    string   `json:"op"`
						Value []string `json:"value"`
					} `json:"matchExpressions"`
				} `json:"matchFeatures"`
			} `json:"rules"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.UnmarshalStrict(b, &nfr))
	assert.Equal(t, "nfd.k8s-sigs.io/v1alpha1", nfr.APIVersion)
	assert.Equal(t, "NodeFeatureRule", nfr.Kind)
	require.Len(t, nfr.Spec.Rules, 1, "rule A only: deviceLabelFields stay as they are, so pci-10de.present needs no compat rule")
	r := nfr.Spec.Rules[0]
	assert.Contains(t, r.LabelsTemplate, "pci-{{ .vendor }}_{{ .device }}_{{ .subsystem_vendor }}_{{ .subsystem_device }}.present=true")
	assert.Empty(t, r.Labels)
	require.Len(t, r.MatchFeatures, 1)
	assert.Equal(t, "pci.device", r.MatchFeatures[0].Feature)
	assert.Equal(t, []string{"10de"}, r.MatchFeatures[0].MatchExpressions["vendor"].Value)
	assert.Equal(t, []string{"0300", "0302"}, r.MatchFeatures[0].MatchExpressions["class"].Value)
}
