package tools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"sigs.k8s.io/yaml"
)

// A rules unit-test file in promtool's format (`promtool test rules`):
// rule_files, evaluation_interval, and tests of input_series and
// alert_rule_test. The same file runs unchanged under promtool. This runner
// evaluates it with Prometheus's own pieces, as promtool does: the series
// loaded by promqltest's lazy loader, the rule files loaded and evaluated
// by the rules package step by step, the firing alerts compared with the
// expected ones at each eval_time. It exists because building promtool
// itself costs a fresh machine's `make test` more than it can spare
// (README; it links every service discovery and remote-write client).
type ruleTestFile struct {
	RuleFiles          []string       `json:"rule_files"`
	EvaluationInterval model.Duration `json:"evaluation_interval"`
	Tests              []ruleTest     `json:"tests"`
}

type ruleTest struct {
	Name        string         `json:"name"`
	Interval    model.Duration `json:"interval"`
	InputSeries []struct {
		Series string `json:"series"`
		Values string `json:"values"`
	} `json:"input_series"`
	AlertRuleTests []alertTest `json:"alert_rule_test"`
}

type alertTest struct {
	EvalTime  model.Duration `json:"eval_time"`
	Alertname string         `json:"alertname"`
	ExpAlerts []expAlert     `json:"exp_alerts"`
}

type expAlert struct {
	ExpLabels      map[string]string `json:"exp_labels"`
	ExpAnnotations map[string]string `json:"exp_annotations"`
}

// runRuleTests runs every test of file; rule files are relative to it.
func runRuleTests(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleTestFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if f.EvaluationInterval == 0 {
		f.EvaluationInterval = model.Duration(time.Minute)
	}
	var ruleFiles []string
	for _, rf := range f.RuleFiles {
		ruleFiles = append(ruleFiles, filepath.Join(filepath.Dir(file), rf))
	}
	if len(f.Tests) == 0 {
		t.Fatalf("%s has no tests", file)
	}
	for _, tc := range f.Tests {
		t.Run(tc.Name, func(t *testing.T) {
			for _, err := range tc.run(time.Duration(f.EvaluationInterval), ruleFiles) {
				t.Error(err)
			}
		})
	}
}

func (tc ruleTest) run(every time.Duration, ruleFiles []string) []error {
	if tc.Interval == 0 {
		tc.Interval = model.Duration(every)
	}
	var load strings.Builder
	fmt.Fprintf(&load, "load %s\n", time.Duration(tc.Interval))
	for _, s := range tc.InputSeries {
		fmt.Fprintf(&load, "  %s %s\n", s.Series, s.Values)
	}
	p := parser.NewParser(parser.Options{})
	suite, err := promqltest.NewLazyLoader(load.String(), promqltest.LazyLoaderOpts{EnableAtModifier: true, EnableNegativeOffset: true, Parser: p})
	if err != nil {
		return []error{err}
	}
	defer suite.Close()
	suite.SubqueryInterval = every
	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:    rules.EngineQueryFunc(suite.QueryEngine(), suite.Storage()),
		AppendableV2: suite.Storage(),
		Context:      context.Background(),
		NotifyFunc:   func(context.Context, string, ...*rules.Alert) {},
		Parser:       p,
	})
	groups, errs := m.LoadGroups(time.Duration(tc.Interval), labels.EmptyLabels(), "", nil, false, ruleFiles...)
	if errs != nil {
		return errs
	}
	alertNames := map[string]bool{}
	for _, g := range groups {
		for _, r := range g.Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok {
				ar.SetRestored(true) // as after a restart's restore: the ALERTS series are written
				alertNames[ar.Name()] = true
			}
		}
	}
	var last model.Duration
	for _, a := range tc.AlertRuleTests {
		if !alertNames[a.Alertname] {
			errs = append(errs, fmt.Errorf("alert_rule_test names %q, which no rule file defines", a.Alertname))
		}
		last = max(last, a.EvalTime)
	}
	start := time.Unix(0, 0).UTC()
	for ts := start; !ts.After(start.Add(time.Duration(last))); ts = ts.Add(every) {
		suite.WithSamplesTill(ts, func(err error) {
			if err != nil {
				errs = append(errs, err)
				return
			}
			for _, g := range groups {
				g.Eval(suite.Context(), ts)
				for _, r := range g.Rules() {
					if r.LastError() != nil {
						errs = append(errs, fmt.Errorf("rule %s at %s: %w", r.Name(), ts.Sub(start), r.LastError()))
					}
				}
			}
		})
		// An eval_time is checked against the evaluation at or just before it.
		for _, a := range tc.AlertRuleTests {
			at := start.Add(time.Duration(a.EvalTime))
			if at.Before(ts) || !at.Before(ts.Add(every)) {
				continue
			}
			var got, want []string
			for _, g := range groups {
				for _, r := range g.Rules() {
					ar, ok := r.(*rules.AlertingRule)
					if !ok || ar.Name() != a.Alertname {
						continue
					}
					for _, al := range ar.ActiveAlerts() {
						if al.State == rules.StateFiring {
							got = append(got, alertString(al.Labels, al.Annotations))
						}
					}
				}
			}
			for _, e := range a.ExpAlerts {
				l := labels.FromMap(e.ExpLabels)
				l = labels.NewBuilder(l).Set(labels.AlertName, a.Alertname).Labels()
				want = append(want, alertString(l, labels.FromMap(e.ExpAnnotations)))
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				errs = append(errs, fmt.Errorf("alert %s at %s:\n  want %q\n   got %q", a.Alertname, time.Duration(a.EvalTime), want, got))
			}
		}
	}
	return errs
}

func alertString(l, annotations labels.Labels) string {
	return l.String() + " " + annotations.String()
}

// TestRuleTestsCanFail: the runner reports an alert that fires unexpected,
// one that does not fire, one with other annotations, and an unknown name.
func TestRuleTestsCanFail(t *testing.T) {
	dir := t.TempDir()
	rules := "groups:\n  - name: g\n    rules:\n      - alert: Always\n        expr: vector(1)\n        annotations: {summary: s}\n"
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "rules.yaml")
	for name, tc := range map[string]ruleTest{
		"fires unexpected":  {AlertRuleTests: alertTests("Always", nil)},
		"wrong annotations": {AlertRuleTests: alertTests("Always", map[string]string{"summary": "other"})},
		"unknown alert":     {AlertRuleTests: alertTests("Never", nil)},
	} {
		if errs := tc.run(time.Minute, []string{file}); len(errs) == 0 {
			t.Errorf("%s: no error", name)
		}
	}
	if errs := (ruleTest{AlertRuleTests: alertTests("Always", map[string]string{"summary": "s"})}).run(time.Minute, []string{file}); len(errs) > 0 {
		t.Errorf("the right expectation fails: %v", errs)
	}
}

// alertTests expects alert at 1m: firing with annotations, or silent (nil).
func alertTests(alert string, annotations map[string]string) []alertTest {
	a := alertTest{EvalTime: model.Duration(time.Minute), Alertname: alert}
	if annotations != nil {
		a.ExpAlerts = []expAlert{{ExpAnnotations: annotations}}
	}
	return []alertTest{a}
}
