package webhook

import (
	"flag"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

var update = flag.Bool("update", false, "rewrite testdata/metrics.txt (TestMetricNames) and the docs generated from the rule and webhook tables (TestCodeDocsAreGenerated)")

// metricsList is the gate's metric names, which the chart's dashboard and
// alerts are checked against (hack/tools/promtool, with Prometheus's parser).
const metricsList = "testdata/metrics.txt"

// TestMetricNames: testdata/metrics.txt lists exactly the metrics the gate
// registers on the registry /metrics serves (histograms with their series
// names). Run with -update after adding a metric.
func TestMetricNames(t *testing.T) {
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	var names []string
	for _, c := range gateCollectors {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fq.FindStringSubmatch(d.String())
			require.NotNil(t, m, "descriptor %s", d)
			names = append(names, m[1])
			if _, ok := c.(*prometheus.HistogramVec); ok {
				names = append(names, m[1]+"_bucket", m[1]+"_sum", m[1]+"_count")
			}
		}
	}
	slices.Sort(names)
	got := strings.Join(names, "\n") + "\n"
	if *update {
		require.NoError(t, os.WriteFile(metricsList, []byte(got), 0o644))
	}
	want, err := os.ReadFile(metricsList)
	require.NoError(t, err)
	assert.Equal(t, string(want), got, "%s is stale: go test ./webhook/ -run TestMetricNames -update", metricsList)
	// Every one is served: a family appears once a series is set.
	for _, name := range []string{"gpu_upgrade_gate_system_denials_total", "gpu_upgrade_gate_rollout_halted", "gpu_upgrade_gate_node_proof"} {
		assert.Contains(t, names, name)
	}
}

func systemDenied(t *testing.T, resource, identity string, code gate.Code) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, systemDenials.WithLabelValues(resource, identity, string(code)).Write(&m))
	return m.GetCounter().GetValue()
}

// TestSystemDenials: a system controller's denial is counted, outside the
// per-node steps the gate holds on purpose; a person's never is.
func TestSystemDenials(t *testing.T) {
	deny := gate.Decision{Blockers: []gate.Blocker{{Code: gate.CodeGPUIdentityRemoved, Err: field.Forbidden(field.NewPath("metadata"), "x")}}}
	for _, tc := range []struct {
		name, resource, identity string
		d                        gate.Decision
		counted                  bool
	}{
		{"NFD denied on a Node", "nodes", gate.IdentityExempt, deny, true},
		{"a kubelet denied", "nodes", gate.IdentityKubelet, deny, true},
		{"a person denied", "nodes", "", deny, false},
		{"NFD allowed", "nodes", gate.IdentityExempt, gate.Decision{Allowed: true}, false},
		{"SUC's Job start held (on purpose)", "jobs", gate.IdentitySUC, deny, false},
		{"SUC's completion held (on purpose)", "completions", gate.IdentitySUC, deny, false},
		{"the GPU Operator's driver step held (on purpose)", "driver-step", gate.IdentityExempt, deny, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := systemDenied(t, tc.resource, tc.identity, gate.CodeGPUIdentityRemoved)
			observe(tc.resource, "", tc.identity, tc.d, tc.d.Allowed, time.Millisecond)
			after := systemDenied(t, tc.resource, tc.identity, gate.CodeGPUIdentityRemoved)
			if tc.counted {
				assert.Equal(t, before+1, after)
			} else {
				assert.Equal(t, before, after)
			}
		})
	}
}

func TestUnprovenWait(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	reached := now.Add(-95 * time.Minute)
	for _, tc := range []struct {
		name string
		n    gate.NodeInventory
		want float64
	}{
		{"unproven since it reached its tuple", gate.NodeInventory{Proof: "unproven", ReachedAt: reached}, 95 * 60},
		{"proven", gate.NodeInventory{Proof: "proven", ReachedAt: reached}, 0},
		{"not at its target", gate.NodeInventory{ReachedAt: reached}, 0},
		{"no time known", gate.NodeInventory{Proof: "unproven"}, 0},
		{"a clock ahead of the cluster's", gate.NodeInventory{Proof: "unproven", ReachedAt: now.Add(time.Minute)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, unprovenWait(tc.n, now))
		})
	}
}
