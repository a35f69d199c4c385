package gate

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// TestRowsAppliedPerReview: the table is held to the code. For one
// representative request of each review, the rows the review applied (the
// dispatcher hears each, rowApplied) are exactly the rows whose Reviews name
// it, and so their codes are CodesOf it: a review that returned before the
// table, ran as another review, or applied a row its Reviews do not name
// fails here. TestNoReviewCallsARule holds the other side: no review calls a
// rule outside the table.
func TestRowsAppliedPerReview(t *testing.T) {
	cases := []struct {
		name    string
		reviews []Review // what the review runs as
		run     func(t *testing.T) Decision
	}{
		{"plan", []Review{ReviewPlan}, func(t *testing.T) Decision { return safeScenario(t).decide() }},
		{"node: a relabel that pulls the node into a Plan", []Review{ReviewNode}, func(t *testing.T) Decision {
			s := safeScenario(t)
			p := canaryPlan("gpu-v100-01")
			p.Spec.NodeSelector.MatchLabels = map[string]string{"pool": "canary"}
			s.cluster.Plans = []*upgradev1.Plan{p}
			n := s.node("gpu-v100-01")
			old := n.DeepCopy()
			n.Labels["pool"] = "canary"
			r := PrepareNode(s.cfg, s.cluster, NodeRequest{Node: n, OldNode: old, User: s.req.User, Now: testNow})
			require.Len(t, r.plans, 1, "the change pulls the node into the Plan")
			return r.Decide(nil, nil)
		}},
		{"node-taints: a person lifts a taint, nothing else", []Review{ReviewNodeTaints}, func(t *testing.T) Decision {
			s := safeScenario(t)
			n := s.node("gpu-v100-01")
			old := n.DeepCopy()
			old.Spec.Taints = []corev1.Taint{{Key: "example.com/dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}}
			return PrepareNode(s.cfg, s.cluster, NodeRequest{Node: n, OldNode: old, User: s.req.User, Now: testNow}).Decide(nil, nil)
		}},
		{"mode-step: nfd-master writes a mode label", []Review{ReviewModeStep}, func(t *testing.T) Decision {
			s := safeScenario(t)
			n := s.node("gpu-v100-01")
			old := n.DeepCopy()
			old.Spec.Unschedulable, n.Spec.Unschedulable = true, true
			modeTriple(n, "vm-passthrough", "vm-passthrough")
			return PrepareNode(s.cfg, s.cluster, NodeRequest{Node: n, OldNode: old, User: nfdMaster, Now: testNow}).Decide(nil, nil)
		}},
		{"driver", []Review{ReviewDriver}, func(t *testing.T) Decision { return safeDriverScenario(t).decide() }},
		{"operator", []Review{ReviewOperator}, func(t *testing.T) Decision {
			s := safeDriverScenario(t)
			s.change.OldOperator, s.change.NewOperator = "v26.3.3", "v26.3.4"
			return s.decide()
		}},
		{"driver-step", []Review{ReviewDriverStep}, func(t *testing.T) Decision {
			s := safeDriverStepScenario(t)
			return s.prepareDriverStep(s.step).Decide(nil, nil)
		}},
		{"suc-step", []Review{ReviewPlan, ReviewSUCStep}, func(t *testing.T) Decision { return safeStep(t).decide(nil) }},
		{"completion", []Review{ReviewCompletion}, func(t *testing.T) Decision {
			s := safeScenario(t)
			n := s.node("gpu-v100-01")
			old := n.DeepCopy()
			old.Spec.Unschedulable = true
			return DecideCompletion(s.cfg, s.cluster, NodeRequest{Node: n, OldNode: old, User: UserInfo{Name: "system:serviceaccount:system-upgrade:system-upgrade"}, Now: testNow})
		}},
		{"plan-status", []Review{ReviewPlanStatus}, func(t *testing.T) Decision {
			old, cur := &upgradev1.Plan{}, &upgradev1.Plan{}
			cur.Status.LatestHash = "9e1b"
			return JudgePlanStatus(DefaultConfig(), PlanStatusRequest{Object: "Plan system-upgrade/gpu", Old: old, New: cur, User: UserInfo{Name: "alice"}})
		}},
		{"record", []Review{ReviewRecord}, func(t *testing.T) Decision {
			return DecideRecord(DefaultConfig(), RecordRequest{ConfigMap: written(record()), User: UserInfo{Name: recordAuthor}, Now: testNow})
		}},
		{"halt-record", []Review{ReviewHaltRecord}, func(t *testing.T) Decision {
			cfg := DefaultConfig()
			return DecideHaltRecordWrite(cfg, HaltWriteRequest{Operation: OpCreate, New: haltCM(cfg, nil, nil), User: UserInfo{Name: "bob"}})
		}},
		{"subscription", []Review{ReviewSubscription}, func(t *testing.T) Decision {
			return DecideSubscription(DefaultConfig(), SubscriptionRequest{Object: "Subscription gpu-operator/gpu-operator-certified", Package: "gpu-operator-certified", Changed: true, User: UserInfo{Name: "alice"}})
		}},
		{"suc-job", []Review{ReviewSUCJob}, func(t *testing.T) Decision {
			j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "system-upgrade", Name: "apply-x", Labels: map[string]string{upgradev1.LabelPlan: "x"}}}
			return DecideSUCJobWrite(DefaultConfig(), SUCJobWriteRequest{Operation: OpCreate, Job: j, User: UserInfo{Name: "alice"}})
		}},
		{"plan-nudge", []Review{ReviewPlanNudge}, func(t *testing.T) Decision {
			p := &upgradev1.Plan{ObjectMeta: metav1.ObjectMeta{Namespace: "system-upgrade", Name: "gpu", Annotations: map[string]string{AnnotationNudge: "gpu-v100-01/9e1b"}}}
			return DecidePlanNudge(DefaultConfig(), PlanNudgeRequest{Operation: OpUpdate, Old: &upgradev1.Plan{}, New: p, User: UserInfo{Name: "alice"}})
		}},
		{"dra-daemonset", []Review{ReviewDRADaemonSet}, func(t *testing.T) Decision {
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "nvidia-dra-driver-gpu", Name: "x"}}
			return DecideDRADaemonSetWrite(DefaultConfig(), DaemonSetWriteRequest{Operation: OpCreate, DaemonSet: ds, User: UserInfo{Name: "alice"}})
		}},
		{"dra-workload", []Review{ReviewDRAWorkload}, func(t *testing.T) Decision {
			return DecideDRAWorkloadWrite(DefaultConfig(), WorkloadWriteRequest{Operation: OpCreate, Kind: "Pod", Namespace: "nvidia-dra-driver-gpu", Name: "x",
				Template: &corev1.PodTemplateSpec{}, SpecPath: field.NewPath("spec"), User: UserInfo{Name: "alice"}})
		}},
		{"validator", []Review{ReviewValidator}, func(t *testing.T) Decision {
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-operator", Name: "nvidia-operator-validator"}}
			return DecideValidatorWrite(DefaultConfig(), DaemonSetWriteRequest{Operation: OpCreate, DaemonSet: ds, User: UserInfo{Name: "alice"}})
		}},
		{"upgrade-check", []Review{ReviewUpgradeCheck}, func(t *testing.T) Decision {
			rec, err := qualification.Load(strings.NewReader(ucRecord))
			require.NoError(t, err)
			req := ucRequest()
			req.Record = RecordEntry{Record: rec}
			return UpgradeCheck(req)
		}},
		{"validate-record", []Review{ReviewValidateRecord}, func(t *testing.T) Decision {
			s := safeScenario(t)
			return ValidateRecord(s.cluster.Records["v100-r580"], s.cfg.freshness(testNow))
		}},
		{"admission", []Review{ReviewAdmission}, func(t *testing.T) Decision {
			return InvalidReview("Plan x/y", errors.New("object: not a Plan"))
		}},
	}
	seen := map[Review]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var applied []int
			rowApplied = func(kinds []Review, row int) {
				for _, k := range kinds {
					require.Contains(t, tc.reviews, k, "row %d applied as %s", row, k)
				}
				if !slices.Contains(applied, row) {
					applied = append(applied, row)
				}
			}
			t.Cleanup(func() { rowApplied = nil })
			d := tc.run(t)
			require.NotEmpty(t, applied, "%s ran no row: %s", tc.name, d.Message())
			var want []int
			for i, r := range ruleTable {
				if slices.ContainsFunc(r.Reviews, func(v Review) bool { return slices.Contains(tc.reviews, v) }) {
					want = append(want, i)
				}
			}
			slices.Sort(applied)
			assert.Equal(t, rowNames(want), rowNames(applied), "rows applied vs rows whose Reviews name %v", tc.reviews)
			var codes []Code
			for _, i := range applied {
				for _, c := range ruleTable[i].Codes {
					if !slices.Contains(codes, c) {
						codes = append(codes, c)
					}
				}
			}
			assert.Equal(t, CodesOf(tc.reviews...), codes)
			for _, r := range tc.reviews {
				seen[r] = true
			}
		})
	}
	for _, r := range []Review{ReviewPlan, ReviewNode, ReviewNodeTaints, ReviewModeStep, ReviewDriver, ReviewDriverStep, ReviewOperator, ReviewPlanStatus, ReviewRecord,
		ReviewUpgradeCheck, ReviewValidateRecord, ReviewCompletion, ReviewSUCStep, ReviewHaltRecord, ReviewSubscription, ReviewSUCJob, ReviewPlanNudge, ReviewAdmission,
		ReviewDRADaemonSet, ReviewValidator, ReviewDRAWorkload} {
		assert.True(t, seen[r], "no representative request of review %s", r)
	}
}

func rowNames(rows []int) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = ruleTable[r].Name + ":" + string(ruleTable[r].Codes[0])
	}
	return out
}

// TestNoReviewCallsARule: the functions the table names (Apply, Judge) are
// called by the dispatcher only: nothing outside the rule files (rule_*.go,
// where a row's function calls its file's helpers) names them, so a review
// cannot apply a rule the table does not list for it, nor in another order.
func TestNoReviewCallsARule(t *testing.T) {
	fset := token.NewFileSet()
	rulesFile, err := parser.ParseFile(fset, "rules.go", nil, 0)
	require.NoError(t, err)
	named := map[string]bool{}
	ast.Inspect(rulesFile, func(n ast.Node) bool {
		if kv, ok := n.(*ast.KeyValueExpr); ok {
			if key, ok := kv.Key.(*ast.Ident); ok && (key.Name == "Apply" || key.Name == "Judge") {
				if fn, ok := kv.Value.(*ast.Ident); ok {
					named[fn.Name] = true
				}
			}
		}
		return true
	})
	require.Contains(t, named, "holdersRow")
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") || strings.HasPrefix(file, "rule_") || file == "rules.go" {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && named[id.Name] {
				t.Errorf("%s names rule %s: a review applies rules only through the table (applyTable)", fset.Position(id.Pos()), id.Name)
			}
			return true
		})
	}
	// The holder row is the table's last: the listing it waits for
	// overlaps every other rule.
	assert.Equal(t, "holders", ruleTable[len(ruleTable)-1].Name)
}
