package tools

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The chart's PrometheusRule and dashboard, checked with the real types
// and parser: test/chart (the main module) cannot import them.

// root is the repository root, two levels up.
var root = func() string { r, _ := filepath.Abs("../../.."); return r }()

// observability renders the chart with the PrometheusRule and dashboard on
// and returns them, decoded strictly with their real types.
var observability = sync.OnceValues(func() (*rendered, error) {
	helm := os.Getenv("GUG_HELM")
	if helm == "" {
		out, err := exec.Command(filepath.Join(root, "hack", "tools", "helm", "helm.sh"), "--print-path").Output()
		if err != nil {
			return nil, err
		}
		helm = strings.TrimSpace(string(out))
	}
	cmd := exec.Command(helm, "template", "gpu-upgrade-gate", filepath.Join(root, "charts", "gpu-upgrade-gate"), "--namespace", "gpu-upgrade-gate",
		"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.dashboard.enabled=true")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, errors.New(helm + " template: " + err.Error() + ": " + stderr.String() + " (run `make helm`)")
	}
	r := &rendered{}
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		var tm struct{ Kind string }
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, err
		}
		switch tm.Kind {
		case monitoringv1.PrometheusRuleKind:
			r.rule = &monitoringv1.PrometheusRule{}
			if err := yaml.UnmarshalStrict(doc, r.rule); err != nil {
				return nil, errors.New("PrometheusRule: " + err.Error())
			}
		case "ConfigMap":
			cm := &corev1.ConfigMap{}
			if err := yaml.UnmarshalStrict(doc, cm); err != nil {
				return nil, err
			}
			if strings.HasSuffix(cm.Name, "-dashboard") {
				r.dashboard = cm
			}
		}
	}
	if r.rule == nil || r.dashboard == nil {
		return nil, errors.New("the chart rendered no PrometheusRule or no dashboard ConfigMap with them enabled")
	}
	return r, nil
})

type rendered struct {
	rule      *monitoringv1.PrometheusRule
	dashboard *corev1.ConfigMap
}

func render(t *testing.T) *rendered {
	t.Helper()
	r, err := observability()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// gateMetrics are the names the gate registers (webhook/testdata/metrics.txt,
// kept equal to the registry by the main module's TestMetricNames), and the
// series Prometheus itself adds to every scrape.
func gateMetrics(t *testing.T) map[string]bool {
	data, err := os.ReadFile(filepath.Join(root, "webhook", "testdata", "metrics.txt"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{"up": true}
	for _, n := range strings.Fields(string(data)) {
		names[n] = true
	}
	return names
}

// metricNames are the metric names an expression selects; an error for a
// selector that names no metric (it could match anything).
func metricNames(expr parser.Expr) ([]string, error) {
	var names []string
	var err error
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if vs.Name == "" {
			err = errors.New("selector " + vs.String() + " names no metric")
			return nil
		}
		names = append(names, vs.Name)
		return nil
	})
	return names, err
}

func checkExpr(t *testing.T, where, expr string, known map[string]bool) {
	t.Helper()
	for _, p := range exprProblems(where, expr, known) {
		t.Error(p)
	}
}

// exprProblems: expr must parse, and name only known metrics.
func exprProblems(where, expr string, known map[string]bool) []string {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return []string{fmt.Sprintf("%s: %q does not parse: %v", where, expr, err)}
	}
	var problems []string
	names, err := metricNames(e)
	if err != nil {
		problems = append(problems, fmt.Sprintf("%s: %v", where, err))
	}
	for _, n := range names {
		if !known[n] {
			problems = append(problems, fmt.Sprintf("%s: %q names metric %s, which the gate does not export (webhook/testdata/metrics.txt)", where, expr, n))
		}
	}
	return problems
}

// TestPrometheusRule: the rendered PrometheusRule decodes with
// prometheus-operator's type, loads as a Prometheus rule file, and every
// alert's expression parses and names only the gate's metrics and up.
func TestPrometheusRule(t *testing.T) {
	r, known := render(t), gateMetrics(t)
	n := 0
	for _, g := range r.rule.Spec.Groups {
		for _, rule := range g.Rules {
			n++
			t.Run(rule.Alert, func(t *testing.T) {
				if rule.Alert == "" || rule.Record != "" {
					t.Errorf("only alerts expected, got %+v", rule)
				}
				checkExpr(t, rule.Alert, rule.Expr.String(), known)
				if rule.Labels["severity"] == "" || rule.Annotations["runbook_url"] == "" || rule.Annotations["summary"] == "" {
					t.Errorf("severity, summary and runbook_url are required: %v %v", rule.Labels, rule.Annotations)
				}
			})
		}
	}
	if n < 8 {
		t.Errorf("%d alerts, expected the 8 of docs/install.md", n)
	}
	if _, errs := rulefmt.Parse(ruleFile(t, r), false, model.UTF8Validation, parser.NewParser(parser.Options{}), promslog.NewNopLogger()); len(errs) > 0 {
		t.Errorf("the rules do not load as a Prometheus rule file: %v", errs)
	}
}

// ruleFile is the PrometheusRule's spec as the operator hands it to
// Prometheus: a rule file.
func ruleFile(t *testing.T, r *rendered) []byte {
	data, err := yaml.Marshal(r.rule.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// grafanaVariable is a dashboard variable in a query.
var grafanaVariable = regexp.MustCompile(`\$\{?\w+\}?`)

// TestDashboard: every query of the dashboard parses (Grafana's variables
// replaced by values of their kind) and names only the gate's metrics.
func TestDashboard(t *testing.T) {
	r, known := render(t), gateMetrics(t)
	if r.dashboard.Labels["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard lacks the sidecar's label: %v", r.dashboard.Labels)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(r.dashboard.Data["gpu-upgrade-gate.json"]), &d); err != nil {
		t.Fatal(err)
	}
	values := map[string]string{"$job": "gpu-upgrade-gate-metrics", "$__rate_interval": "5m", "$__range": "6h"}
	n := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			n++
			expr := grafanaVariable.ReplaceAllStringFunc(tg.Expr, func(v string) string {
				if s, ok := values[strings.NewReplacer("{", "", "}", "").Replace(v)]; ok {
					return s
				}
				t.Errorf("panel %q: unknown variable %s in %q", p.Title, v, tg.Expr)
				return v
			})
			checkExpr(t, "panel "+p.Title, expr, known)
		}
	}
	if n == 0 {
		t.Fatal("the dashboard has no queries")
	}
	// What the issue asks the dashboard to show.
	all := r.dashboard.Data["gpu-upgrade-gate.json"]
	for _, m := range []string{"gpu_upgrade_gate_decisions_total", "gpu_upgrade_gate_decision_duration_seconds_bucket", "gpu_upgrade_gate_node_status",
		"gpu_upgrade_gate_node_proof", "gpu_upgrade_gate_rollout_halted", "gpu_upgrade_gate_record_expiry_timestamp_seconds"} {
		if !strings.Contains(all, m) {
			t.Errorf("the dashboard does not show %s", m)
		}
	}
}

// TestCheckExprCanFail: the name check catches a metric the gate does not
// export and a selector without a name.
func TestCheckExprCanFail(t *testing.T) {
	known := gateMetrics(t)
	for _, expr := range []string{`rate(gpu_upgrade_gate_decision_total[5m])`, `{job="x"}`, `sum(`} {
		if len(exprProblems("probe", expr, known)) == 0 {
			t.Errorf("%q passed the check", expr)
		}
	}
	if p := exprProblems("probe", `sum by (code) (rate(gpu_upgrade_gate_decisions_total[5m]))`, known); len(p) > 0 {
		t.Errorf("a good expression fails: %v", p)
	}
	names, _ := metricNames(mustParse(t, `gpu_upgrade_gate_ready == 1 or up`))
	if !slices.Equal(names, []string{"gpu_upgrade_gate_ready", "up"}) {
		t.Errorf("names %v", names)
	}
}

func mustParse(t *testing.T, s string) parser.Expr {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(s)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestAlerts runs test/alerts/alerts.test.yaml (promtool's format) against
// the chart's rules: each alert fires on the series that should fire it
// and stays silent on its healthy neighbour.
func TestAlerts(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), ruleFile(t, render(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join(root, "test", "alerts", "alerts.test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "alerts.test.yaml")
	if err := os.WriteFile(file, tests, 0o644); err != nil {
		t.Fatal(err)
	}
	runRuleTests(t, file)
	// promtool itself, when it is at hand (GUG_PROMTOOL), runs the same file.
	if p := os.Getenv("GUG_PROMTOOL"); p != "" {
		out, err := exec.Command(p, "test", "rules", file).CombinedOutput()
		if err != nil {
			t.Errorf("promtool test rules: %v\n%s", err, out)
		}
	}
}
