package tools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/template"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"sigs.k8s.io/yaml"
)

// A rules unit-test file in promtool's format (`promtool test rules`):
// rule_files, evaluation_interval, and tests of input_series and
// alert_rule_test. The same file runs unchanged under promtool (make
// promtool; GUG_PROMTOOL). This runner evaluates it with Prometheus's own
// pieces: the rule files loaded by rulefmt, the series parsed by the PromQL
// parser's series notation, every alert expression evaluated by the PromQL
// engine at each evaluation step, and its annotations expanded by
// Prometheus's template package; an alert is pending while its expression
// has a result for its labels and fires once that has held for its `for`,
// as Prometheus's rule manager does. It avoids the rules and tsdb packages,
// whose imports (the remote-write and service-discovery clients of every
// cloud) cost a fresh machine's `make test` far more than the engine.
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
	p := parser.NewParser(parser.Options{})
	var series []storage.Series
	for _, in := range tc.InputSeries {
		l, values, err := p.ParseSeriesDesc(in.Series + " " + in.Values)
		if err != nil {
			return []error{fmt.Errorf("input series %s %s: %w", in.Series, in.Values, err)}
		}
		var samples []chunks.Sample
		for i, v := range values {
			if !v.Omitted {
				samples = append(samples, floatSample{t: int64(i) * time.Duration(tc.Interval).Milliseconds(), f: v.Value})
			}
		}
		series = append(series, storage.NewListSeries(l, samples))
	}
	db := storage.QueryableFunc(func(_, _ int64) (storage.Querier, error) {
		return &storage.MockQuerier{SelectMockFunction: func(_ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
			out := &listSeriesSet{}
			for _, s := range series {
				if matchAll(ms, s.Labels()) {
					out.series = append(out.series, s)
				}
			}
			slices.SortFunc(out.series, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
			return out
		}}, nil
	})
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute,
		EnableAtModifier: true, EnableNegativeOffset: true, Parser: p})
	var alerts []*alertRule
	var errs []error
	for _, file := range ruleFiles {
		groups, es := rulefmt.ParseFile(file, false, model.UTF8Validation, p, promslog.NewNopLogger())
		for _, e := range es {
			errs = append(errs, e)
		}
		if groups == nil {
			continue
		}
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				if r.Alert != "" {
					alerts = append(alerts, &alertRule{rule: r, active: map[uint64]*activeAlert{}})
				}
			}
		}
	}
	if errs != nil {
		return errs
	}
	byName := map[string]*alertRule{}
	for _, a := range alerts {
		byName[a.rule.Alert] = a
	}
	var last model.Duration
	for _, a := range tc.AlertRuleTests {
		if byName[a.Alertname] == nil {
			errs = append(errs, fmt.Errorf("alert_rule_test names %q, which no rule file defines", a.Alertname))
		}
		last = max(last, a.EvalTime)
	}
	start := time.Unix(0, 0).UTC()
	ctx := context.Background()
	for ts := start; !ts.After(start.Add(time.Duration(last))); ts = ts.Add(every) {
		for _, a := range alerts {
			if err := a.eval(ctx, engine, db, ts); err != nil {
				return append(errs, fmt.Errorf("rule %s at %s: %w", a.rule.Alert, ts.Sub(start), err))
			}
		}
		// An eval_time is checked against the evaluation at or just before it.
		for _, a := range tc.AlertRuleTests {
			at := start.Add(time.Duration(a.EvalTime))
			if at.Before(ts) || !at.Before(ts.Add(every)) || byName[a.Alertname] == nil {
				continue
			}
			got := byName[a.Alertname].firing()
			var want []string
			for _, e := range a.ExpAlerts {
				l := labels.NewBuilder(labels.FromMap(e.ExpLabels)).Set(labels.AlertName, a.Alertname).Labels()
				want = append(want, alertString(l, labels.FromMap(e.ExpAnnotations)))
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				errs = append(errs, fmt.Errorf("alert %s at %s:\n  want %q\n   got %q", a.Alertname, time.Duration(a.EvalTime), want, got))
			}
		}
	}
	return errs
}

// alertRule is one alerting rule and its active alerts by label set.
type alertRule struct {
	rule   rulefmt.Rule
	active map[uint64]*activeAlert
}

type activeAlert struct {
	labels, annotations labels.Labels
	activeAt            time.Time
	firing              bool
}

// eval runs the rule once at ts: each result is an alert, pending since it
// first appeared and firing once that is at least the rule's for ago;
// alerts without a result are resolved.
func (a *alertRule) eval(ctx context.Context, engine *promql.Engine, db storage.Queryable, ts time.Time) error {
	q, err := engine.NewInstantQuery(ctx, db, nil, a.rule.Expr, ts)
	if err != nil {
		return err
	}
	defer q.Close()
	res := q.Exec(ctx)
	if res.Err != nil {
		return res.Err
	}
	vec, err := res.Vector()
	if err != nil {
		return err
	}
	seen := map[uint64]bool{}
	for _, s := range vec {
		lb := labels.NewBuilder(s.Metric).Del(labels.MetricName)
		for k, v := range a.rule.Labels {
			lb.Set(k, v)
		}
		lb.Set(labels.AlertName, a.rule.Alert)
		l := lb.Labels()
		data := template.AlertTemplateData(s.Metric.Map(), map[string]string{}, "", s)
		var ann []string
		for k, text := range a.rule.Annotations {
			e := template.NewTemplateExpander(ctx, templateDefs+text,
				"__alert_"+a.rule.Alert, data, model.Time(timestamp(ts)), nil, nil, nil)
			v, err := e.Expand()
			if err != nil {
				return fmt.Errorf("annotation %s: %w", k, err)
			}
			ann = append(ann, k, v)
		}
		h := l.Hash()
		seen[h] = true
		act, ok := a.active[h]
		if !ok {
			act = &activeAlert{activeAt: ts}
			a.active[h] = act
		}
		act.labels, act.annotations = l, labels.FromStrings(ann...)
		act.firing = ts.Sub(act.activeAt) >= time.Duration(a.rule.For)
	}
	for h := range a.active {
		if !seen[h] {
			delete(a.active, h)
		}
	}
	return nil
}

func (a *alertRule) firing() []string {
	var out []string
	for _, act := range a.active {
		if act.firing {
			out = append(out, alertString(act.labels, act.annotations))
		}
	}
	slices.Sort(out)
	return out
}

func timestamp(t time.Time) int64 { return t.UnixMilli() }

// templateDefs are the variables Prometheus gives alert templates.
const templateDefs = "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"

func matchAll(ms []*labels.Matcher, l labels.Labels) bool {
	for _, m := range ms {
		if !m.Matches(l.Get(m.Name)) {
			return false
		}
	}
	return true
}

// listSeriesSet iterates a list of series.
type listSeriesSet struct {
	series []storage.Series
	next   int
}

func (s *listSeriesSet) Next() bool                      { s.next++; return s.next <= len(s.series) }
func (s *listSeriesSet) At() storage.Series              { return s.series[s.next-1] }
func (*listSeriesSet) Err() error                        { return nil }
func (*listSeriesSet) Warnings() annotations.Annotations { return nil }

// floatSample is one input sample.
type floatSample struct {
	t int64
	f float64
}

func (s floatSample) T() int64                    { return s.t }
func (floatSample) ST() int64                     { return 0 }
func (s floatSample) F() float64                  { return s.f }
func (floatSample) H() *histogram.Histogram       { return nil }
func (floatSample) FH() *histogram.FloatHistogram { return nil }
func (floatSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s floatSample) Copy() chunks.Sample         { return s }

func alertString(l, annotations labels.Labels) string {
	return l.String() + " " + annotations.String()
}
