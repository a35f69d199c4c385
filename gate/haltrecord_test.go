package gate

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

const keyV100 = "10de_1db6_10de_124a"

var gateSA = "system:serviceaccount:gpu-upgrade-gate:gpu-upgrade-gate"

func haltV100() Halt {
	return Halt{Hardware: []string{hwV100}, Node: "gpu-v100-01", Signal: "SUC Job system-upgrade/apply-x failed (BackoffLimitExceeded)",
		SeenAt: testNow.Add(-time.Hour), Plan: "system-upgrade/gpu-v100-canary", Record: "v100-r580-canary-1", RequestedBy: "alice"}
}

// halted is the scenario with the V100 rollout halted.
func halted(s *scenario) {
	s.cluster.Halts = HaltRecord{Halts: map[string]Halt{keyV100: haltV100()}}
}

func haltCM(cfg *Config, data map[string]string, annotations map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Halts.ConfigMap, Annotations: annotations}, Data: data}
}

func codesOf(d Decision) []Code { return d.Codes() }

// TestRolloutHaltedPlans: a forward Plan of halted hardware is refused,
// naming the node, the signal and when it was seen; the rollback Plan, other
// hardware and a Plan that moves nothing are not; a halt record that does
// not parse refuses every forward Plan; SUC's per-node step is refused too.
func TestRolloutHaltedPlans(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(s *scenario)
		want   string // "" = not RolloutHalted
	}{
		{name: "not halted", mutate: func(*scenario) {}},
		{name: "halted: the next Plan is refused", mutate: halted,
			want: "[RolloutHalted] the rollout of hardware 10de:1db6/10de:124a is halted: node gpu-v100-01: SUC Job system-upgrade/apply-x failed (BackoffLimitExceeded) (seen 2026-11-21T11:00:00Z, Plan system-upgrade/gpu-v100-canary, record v100-r580-canary-1); no node of this hardware moves forward until the halt is cleared (break glass does not override a halt): roll node gpu-v100-01 back"},
		{name: "halted: the clear hint names who may clear", mutate: halted,
			want: "then someone other than alice clears the halt: kubectl annotate configmap -n gpu-upgrade-gate gpu-upgrade-gate-halts gpu-upgrade-gate.io/clear-10de_1db6_10de_124a=\"<reason>\""},
		{name: "halted: the record's rollback Plan stays allowed", mutate: func(s *scenario) {
			halted(s)
			s.req.Plan.Annotations[AnnotationRollback] = "true"
			setTuple(s.node("gpu-v100-01"), tupleTarget)
		}},
		{name: "another hardware's halt does not hold V100", mutate: func(s *scenario) {
			h := haltV100()
			h.Hardware = []string{hwH200}
			s.cluster.Halts = HaltRecord{Halts: map[string]Halt{h.HardwareKey(): h}}
		}},
		{name: "the halt record does not parse: fail closed", mutate: func(s *scenario) {
			s.cluster.Halts = HaltRecord{Err: errors.New(`data[halt.x]: Invalid value: "nonsense"`)}
		}, want: "[RolloutHalted] halt record gpu-upgrade-gate/gpu-upgrade-gate-halts cannot be read: data[halt.x]: Invalid value: \"nonsense\"; until it can, every forward move of GPU hardware is refused; if it is missing, create it empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			tc.mutate(s)
			d := s.decide()
			if tc.want == "" {
				assert.NotContains(t, codesOf(d), CodeRolloutHalted, d.Message())
				return
			}
			require.Contains(t, codesOf(d), CodeRolloutHalted)
			assert.Contains(t, d.Message(), tc.want)
			if s.cluster.Halts.Err == nil {
				assert.Equal(t, keyV100+"@gpu-v100-01", d.AuditAnnotations()[AuditHalts])
			}
		})
	}

	t.Run("SUC's per-node step is refused", func(t *testing.T) {
		s := safeScenario(t)
		halted(s)
		step := PrepareSUCStep(s.cfg, s.cluster, SUCStepRequest{Object: "Job system-upgrade/apply-gpu-v100-canary-on-gpu-v100-02", Plan: s.req.Plan, Node: s.node("gpu-v100-01"), User: UserInfo{Name: sucUserName}, Now: testNow})
		d := step.Decide(nil, nil)
		assert.Contains(t, codesOf(d), CodeRolloutHalted)
	})
}

const sucUserName = "system:serviceaccount:system-upgrade:system-upgrade"

// TestRolloutHaltedDriver: a driver change that reloads halted hardware is
// refused; the driver step of that hardware too.
func TestRolloutHaltedDriver(t *testing.T) {
	for _, halt := range []bool{false, true} {
		t.Run(map[bool]string{false: "not halted", true: "halted"}[halt], func(t *testing.T) {
			s := safeDriverScenario(t)
			if halt {
				halted(s.scenario)
			}
			d := s.decide()
			assert.Equal(t, halt, contains(codesOf(d), CodeRolloutHalted), d.Message())
		})
	}
}

func contains(cs []Code, c Code) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

// TestHaltUncordon: the failed node stays cordoned until it is back on the
// record's source and proven; another node's uncordon is not the halt's.
func TestHaltUncordon(t *testing.T) {
	cases := []struct {
		name   string
		node   string
		mutate func(s *scenario, n *corev1.Node)
		want   string
	}{
		{name: "the failed node at the target", node: "gpu-v100-01", mutate: func(_ *scenario, n *corev1.Node) { setTuple(n, tupleTarget) },
			want: "node gpu-v100-01 failed its upgrade (SUC Job system-upgrade/apply-x failed (BackoffLimitExceeded)) and is not back on record v100-r580-canary-1's source tuple"},
		{name: "the failed node on the source, unproven", node: "gpu-v100-01", mutate: func(*scenario, *corev1.Node) {},
			want: "it is back on the source tuple but not proven: no validator Pod"},
		{name: "the failed node on the source and proven", node: "gpu-v100-01", mutate: func(s *scenario, _ *corev1.Node) { prove(s, "gpu-v100-01") }},
		{name: "another node of the hardware", node: "gpu-v100-02", mutate: func(*scenario, *corev1.Node) {}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			halted(s)
			n := s.node(tc.node)
			tc.mutate(s, n)
			old := n.DeepCopy()
			old.Spec.Unschedulable = true
			d := DecideCompletion(s.cfg, s.cluster, NodeRequest{Node: n, OldNode: old, User: UserInfo{Name: "carol"}, Now: testNow})
			if tc.want == "" {
				assert.NotContains(t, codesOf(d), CodeRolloutHalted, d.Message())
				return
			}
			require.Contains(t, codesOf(d), CodeRolloutHalted)
			assert.Contains(t, d.Message(), tc.want)
		})
	}
}

// TestParseHaltRecord: a record round-trips; nonsense is an error naming
// the key.
func TestParseHaltRecord(t *testing.T) {
	cfg := DefaultConfig()
	rec := HaltRecord{Halts: map[string]Halt{keyV100: haltV100()}}
	got := cfg.ParseHaltRecord(haltCM(cfg, rec.Data(), map[string]string{ClearAnnotation(keyV100): "rolled back, INC-7"}))
	require.NoError(t, got.Err)
	assert.Equal(t, haltV100(), got.Halts[keyV100])
	assert.Equal(t, "rolled back, INC-7", got.Clears[keyV100])
	for name, data := range map[string]map[string]string{
		"not JSON":      {"halt." + keyV100: "halted!"},
		"unknown field": {"halt." + keyV100: `{"hardware":["10de:1db6/10de:124a"],"node":"n","signal":"s","seenAt":"2026-11-21T11:00:00Z","severity":"high"}`},
		"wrong key":     {"halt.10de_2335_10de_18bf": `{"hardware":["10de:1db6/10de:124a"],"node":"n","signal":"s","seenAt":"2026-11-21T11:00:00Z"}`},
		"no node":       {"halt." + keyV100: `{"hardware":["10de:1db6/10de:124a"],"signal":"s","seenAt":"2026-11-21T11:00:00Z"}`},
		"unknown key":   {"note": "hello"},
	} {
		t.Run(name, func(t *testing.T) {
			r := cfg.ParseHaltRecord(haltCM(cfg, data, nil))
			require.Error(t, r.Err)
			for k := range data {
				assert.Contains(t, r.Err.Error(), "data["+k+"]")
			}
		})
	}
	t.Run("immutable", func(t *testing.T) {
		cm := haltCM(cfg, rec.Data(), nil)
		cm.Immutable = new(true)
		r := cfg.ParseHaltRecord(cm)
		require.Error(t, r.Err, "an immutable record can never be written: it fails closed")
		assert.Contains(t, r.Err.Error(), "immutable: Forbidden: the halt record is immutable, so the gate cannot write it")
		cm.Immutable = new(false)
		require.NoError(t, cfg.ParseHaltRecord(cm).Err)
	})
	assert.Equal(t, "gpu-upgrade-gate.io/clear-"+keyV100, ClearAnnotation(keyV100))
	long := ClearAnnotation(HardwareKey([]string{hwH200, hwV100, "10de:20b0/10de:1450"}))
	assert.LessOrEqual(t, len(long)-len("gpu-upgrade-gate.io/"), 63)
}

// TestKeepHalts: a failure becomes a halt that outlives its signal; a
// cleared halt leaves, and the same signal still visible does not halt
// again until it is gone; a record that fails closed is left alone.
func TestKeepHalts(t *testing.T) {
	s := safeScenario(t)
	s.cluster.Plans = []*upgradev1.Plan{s.req.Plan}
	s.req.Plan.Annotations[AnnotationRequestedBy] = "alice"
	failed := upgradeJob("gpu-v100-01", batchv1.JobFailed, testNow.Add(-time.Minute))
	s.cluster.Proof.UpgradeJobs = []*batchv1.Job{failed}

	rec, changes := KeepHalts(s.cfg, s.cluster, HaltRecord{}, testNow)
	require.Len(t, changes, 1)
	assert.Contains(t, changes[0], "halted "+keyV100)
	assert.Equal(t, "alice", rec.Halts[keyV100].RequestedBy)

	// The Job is deleted by its TTL, the node looks fine: the halt stays.
	s.cluster.Proof.UpgradeJobs = nil
	rec, changes = KeepHalts(s.cfg, s.cluster, rec, testNow.Add(time.Hour))
	assert.Empty(t, changes)
	assert.Contains(t, rec.Halts, keyV100)

	// Cleared while the failed Job is still there: it leaves and does not
	// come back for the same signal.
	s.cluster.Proof.UpgradeJobs = []*batchv1.Job{failed}
	rec.Clears = map[string]string{keyV100: "rolled back, INC-7"}
	rec, changes = KeepHalts(s.cfg, s.cluster, rec, testNow.Add(2*time.Hour))
	assert.NotContains(t, rec.Halts, keyV100, "%v", changes)
	assert.Equal(t, "rolled back, INC-7", rec.Cleared[keyV100].Reason)
	rec, _ = KeepHalts(s.cfg, s.cluster, rec, testNow.Add(3*time.Hour))
	assert.NotContains(t, rec.Halts, keyV100, "the cleared signal, still visible, halts nothing")

	// The signal goes, then a failure again: it halts again.
	s.cluster.Proof.UpgradeJobs = nil
	rec, _ = KeepHalts(s.cfg, s.cluster, rec, testNow.Add(4*time.Hour))
	assert.Empty(t, rec.Cleared)
	s.cluster.Proof.UpgradeJobs = []*batchv1.Job{failed}
	rec, _ = KeepHalts(s.cfg, s.cluster, rec, testNow.Add(5*time.Hour))
	assert.Contains(t, rec.Halts, keyV100)

	broken := HaltRecord{Err: errors.New("nonsense")}
	got, changes := KeepHalts(s.cfg, s.cluster, broken, testNow)
	assert.Empty(t, changes)
	assert.Equal(t, broken, got)
}

// TestHaltRecordWrites: only the gate adds halts; only a person other than
// the requester clears one, with a reason; a halt leaves only by the gate
// after that; a repair of an entry that is not a halt is allowed; the record
// is deleted only empty.
func TestHaltRecordWrites(t *testing.T) {
	cfg := DefaultConfig()
	held := (&HaltRecord{Halts: map[string]Halt{keyV100: haltV100()}}).Data()
	unattested := haltV100()
	unattested.RequestedBy = ""
	unattestedData := (&HaltRecord{Halts: map[string]Halt{keyV100: unattested}}).Data()
	moved := haltV100()
	moved.MovedBy = "carol"
	movedData := (&HaltRecord{Halts: map[string]Halt{keyV100: moved}}).Data()
	clear := func(reason string) map[string]string { return map[string]string{ClearAnnotation(keyV100): reason} }
	meta := func(cm *corev1.ConfigMap, mut func(*corev1.ConfigMap)) *corev1.ConfigMap { mut(cm); return cm }
	labelled := func(chart string) func(*corev1.ConfigMap) {
		return func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{"helm.sh/chart": chart} }
	}
	owned := func(cm *corev1.ConfigMap) {
		cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "gpu-upgrade-gate", UID: "u"}}
	}
	bob, alice := UserInfo{Name: "bob"}, UserInfo{Name: "alice"}
	cases := []struct {
		name     string
		op       string
		old, new *corev1.ConfigMap
		user     UserInfo
		want     string // "" = allowed
	}{
		{name: "helm creates it empty", op: OpCreate, new: haltCM(cfg, nil, nil), user: bob},
		{name: "the gate adds a halt", op: OpUpdate, old: haltCM(cfg, nil, nil), new: haltCM(cfg, held, nil), user: UserInfo{Name: gateSA}},
		{name: "a person adds a halt", op: OpUpdate, old: haltCM(cfg, nil, nil), new: haltCM(cfg, held, nil), user: bob,
			want: "only the gate's own ServiceAccount adds or changes halt entries"},
		{name: "a person removes a halt", op: OpUpdate, old: haltCM(cfg, held, nil), new: haltCM(cfg, nil, nil), user: bob,
			want: "this write removes the halt of hardware " + keyV100},
		{name: "the gate removes a halt nobody cleared", op: OpUpdate, old: haltCM(cfg, held, nil), new: haltCM(cfg, nil, nil), user: UserInfo{Name: gateSA},
			want: "a halt is cleared only by annotation"},
		{name: "the gate removes a cleared halt", op: OpUpdate, old: haltCM(cfg, held, clear("rolled back, INC-7")), new: haltCM(cfg, nil, nil), user: UserInfo{Name: gateSA}},
		{name: "a second person clears", op: OpUpdate, old: haltCM(cfg, held, nil), new: haltCM(cfg, held, clear("rolled back, INC-7")), user: bob},
		{name: "the requester clears", op: OpUpdate, old: haltCM(cfg, held, nil), new: haltCM(cfg, held, clear("rolled back, INC-7")), user: alice,
			want: "alice requested the failed rollout (Plan system-upgrade/gpu-v100-canary) and may not clear its halt"},
		{name: "who moved the node into the Plan clears (issue 22 attack 6)", op: OpUpdate, old: haltCM(cfg, movedData, nil), new: haltCM(cfg, movedData, clear("rolled back, INC-7")), user: UserInfo{Name: "carol"},
			want: "carol moved node gpu-v100-01 into the failed rollout (Plan system-upgrade/gpu-v100-canary) and may not clear its halt"},
		{name: "a third person clears a halt with a mover", op: OpUpdate, old: haltCM(cfg, movedData, nil), new: haltCM(cfg, movedData, clear("rolled back, INC-7")), user: bob},
		{name: "a clear without a reason", op: OpUpdate, old: haltCM(cfg, held, nil), new: haltCM(cfg, held, clear("ok")), user: bob,
			want: "the reason \"ok\" has 2 non-space characters"},
		{name: "the gate clears its own halt", op: OpUpdate, old: haltCM(cfg, held, nil), new: haltCM(cfg, held, clear("rolled back, INC-7")), user: UserInfo{Name: gateSA},
			want: "only a person clears a halt"},
		{name: "a clear of no halt", op: OpUpdate, old: haltCM(cfg, nil, nil), new: haltCM(cfg, nil, clear("rolled back, INC-7")), user: bob,
			want: "names no kept halt (halts: none)"},
		{name: "unattested requester: a person outside break-glass", op: OpUpdate, old: haltCM(cfg, unattestedData, nil), new: haltCM(cfg, unattestedData, clear("rolled back, INC-7")), user: bob,
			want: "only a member of the break-glass group"},
		{name: "unattested requester: break-glass clears", op: OpUpdate, old: haltCM(cfg, unattestedData, nil), new: haltCM(cfg, unattestedData, clear("rolled back, INC-7")),
			user: UserInfo{Name: "carol", Groups: []string{cfg.BreakGlassGroup}}},
		{name: "a person repairs an entry that is not a halt", op: OpUpdate, old: haltCM(cfg, map[string]string{"halt.x": "nonsense"}, nil), new: haltCM(cfg, nil, nil), user: bob},
		{name: "a person adds an unknown key", op: OpUpdate, old: haltCM(cfg, nil, nil), new: haltCM(cfg, map[string]string{"note": "hi"}, nil), user: bob,
			want: "key \"note\" is neither halt.<hardware key> nor cleared.<hardware key>"},
		{name: "delete while a halt is held", op: OpDelete, old: haltCM(cfg, held, nil), user: bob, want: "it is deleted only when empty"},
		{name: "delete empty", op: OpDelete, old: haltCM(cfg, nil, nil), user: bob},
		{name: "immutable set by a person", op: OpUpdate, old: haltCM(cfg, held, nil), new: meta(haltCM(cfg, held, nil), func(cm *corev1.ConfigMap) { cm.Immutable = new(true) }), user: bob,
			want: "immutable: true would stop the gate writing the halt record"},
		{name: "immutable set by the gate", op: OpUpdate, old: haltCM(cfg, nil, nil), new: meta(haltCM(cfg, nil, nil), func(cm *corev1.ConfigMap) { cm.Immutable = new(true) }), user: UserInfo{Name: gateSA},
			want: "leave immutable unset"},
		{name: "created immutable", op: OpCreate, new: meta(haltCM(cfg, nil, nil), func(cm *corev1.ConfigMap) { cm.Immutable = new(true) }), user: bob, want: "immutable: true"},
		{name: "immutable: false is harmless", op: OpUpdate, old: haltCM(cfg, nil, nil), new: meta(haltCM(cfg, nil, nil), func(cm *corev1.ConfigMap) { cm.Immutable = new(false) }), user: bob},
		{name: "binaryData added", op: OpUpdate, old: haltCM(cfg, nil, nil), new: meta(haltCM(cfg, nil, nil), func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"blob": {1}} }), user: UserInfo{Name: gateSA},
			want: "binaryData holds blob"},
		{name: "a label changed", op: OpUpdate, old: meta(haltCM(cfg, held, nil), labelled("v1")), new: meta(haltCM(cfg, held, nil), labelled("v2")), user: bob,
			want: `label helm.sh/chart changes from "v1" to "v2"`},
		{name: "a label added by the gate", op: OpUpdate, old: haltCM(cfg, nil, nil), new: meta(haltCM(cfg, nil, nil), labelled("v1")), user: UserInfo{Name: gateSA},
			want: `label helm.sh/chart changes from "" to "v1"`},
		{name: "the chart creates it labelled", op: OpCreate, new: meta(haltCM(cfg, nil, map[string]string{"helm.sh/resource-policy": "keep"}), labelled("v1")), user: bob},
		{name: "an owner reference added", op: OpUpdate, old: haltCM(cfg, held, nil), new: meta(haltCM(cfg, held, nil), owned), user: bob,
			want: "ownerReferences [Deployment gpu-upgrade-gate]: an owner's deletion would delete the halt record"},
		{name: "created with an owner", op: OpCreate, new: meta(haltCM(cfg, nil, nil), owned), user: bob, want: "the halt record has no owner"},
		{name: "an owner reference removed", op: OpUpdate, old: meta(haltCM(cfg, nil, nil), owned), new: haltCM(cfg, nil, nil), user: bob, want: "ownerReferences removed"},
		{name: "a finalizer added", op: OpUpdate, old: haltCM(cfg, nil, nil), new: meta(haltCM(cfg, nil, nil), func(cm *corev1.ConfigMap) { cm.Finalizers = []string{"example.com/hold"} }), user: bob,
			want: "finalizers [example.com/hold]: the halt record keeps none"},
		{name: "another annotation added", op: OpUpdate, old: haltCM(cfg, held, nil), new: haltCM(cfg, held, map[string]string{"note": "x"}), user: bob,
			want: `annotation note changes from "" to "x": only clear annotations`},
		{name: "a person removes a clear annotation it set", op: OpUpdate, old: haltCM(cfg, held, clear("rolled back, INC-7")), new: haltCM(cfg, held, nil), user: bob},
		{name: "delete an immutable record holding a halt", op: OpDelete, old: meta(haltCM(cfg, held, nil), func(cm *corev1.ConfigMap) { cm.Immutable = new(true) }), user: bob},
		{name: "another ConfigMap", op: OpUpdate, old: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: "other"}},
			new: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: "other"}, Data: map[string]string{"halt.x": "y"}}, user: bob},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideHaltRecordWrite(cfg, HaltWriteRequest{Operation: tc.op, Old: tc.old, New: tc.new, User: tc.user, Self: gateSA})
			if tc.want == "" {
				assert.True(t, d.Allowed, d.Message())
				return
			}
			require.False(t, d.Allowed)
			assert.Equal(t, []Code{CodeRolloutHalted}, d.Codes())
			assert.Contains(t, d.Message(), tc.want)
		})
	}
}

// TestRequesterMismatch: requested-by must name the writer whenever the
// write sets it or changes the spec under it.
func TestRequesterMismatch(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(s *scenario)
		want   bool
	}{
		{name: "absent, not required", mutate: func(s *scenario) {
			s.cfg.RequireRequester = false
			delete(s.req.Plan.Annotations, AnnotationRequestedBy)
		}},
		{name: "the writer", mutate: func(s *scenario) { s.req.Plan.Annotations[AnnotationRequestedBy] = "alice" }},
		{name: "someone else", mutate: func(s *scenario) { s.req.Plan.Annotations[AnnotationRequestedBy] = "bob" }, want: true},
		{name: "unchanged on an update that keeps the spec", mutate: func(s *scenario) {
			s.req.Plan.Annotations[AnnotationRequestedBy] = "bob"
			s.req.Operation, s.req.OldPlan = "UPDATE", s.req.Plan.DeepCopy()
		}},
		{name: "unchanged on an update that changes the spec", mutate: func(s *scenario) {
			s.req.Plan.Annotations[AnnotationRequestedBy] = "bob"
			s.req.Operation, s.req.OldPlan = "UPDATE", s.req.Plan.DeepCopy()
			s.req.OldPlan.Spec.Version = "v1.36.0+rke2r1"
		}, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			tc.mutate(s)
			d := s.decide()
			assert.Equal(t, tc.want, contains(d.Codes(), CodeRequesterMismatch), d.Message())
			if tc.want {
				assert.Contains(t, d.Message(), `[RequesterMismatch] annotation gpu-upgrade-gate.io/requested-by is "bob" but this write is from "alice"; set it to "alice"`)
			}
		})
	}
}

// TestRequesterMissing (requireRequester, the default): a GPU Plan's
// CREATE, and an UPDATE that changes its spec or drops the annotation, must
// carry requested-by; an existing Plan without it that an edit leaves as it
// is keeps working, and so does a Plan with no GPU node.
func TestRequesterMissing(t *testing.T) {
	absent := func(s *scenario) { delete(s.req.Plan.Annotations, AnnotationRequestedBy) }
	update := func(s *scenario, mod func(old *upgradev1.Plan)) {
		s.req.Operation, s.req.OldPlan = "UPDATE", s.req.Plan.DeepCopy()
		mod(s.req.OldPlan)
	}
	cases := []struct {
		name   string
		mutate func(s *scenario)
		want   string // "" = not RequesterMissing
	}{
		{name: "a CREATE without it", mutate: absent,
			want: `[RequesterMissing] a GPU Plan is created without annotation gpu-upgrade-gate.io/requested-by, which names who asked for the rollout (a halt of it may not be cleared by them); add it with your username: metadata.annotations: {gpu-upgrade-gate.io/requested-by: "alice"}`},
		{name: "a CREATE with it", mutate: func(*scenario) {}},
		{name: "a CREATE without it, not required", mutate: func(s *scenario) { absent(s); s.cfg.RequireRequester = false }},
		{name: "a CREATE without it that selects no GPU node", mutate: func(s *scenario) {
			absent(s)
			s.req.Plan.Spec.NodeSelector.MatchExpressions[0].Values = []string{"cpu-01"}
		}},
		{name: "an UPDATE that changes the spec, without it", mutate: func(s *scenario) {
			absent(s)
			update(s, func(old *upgradev1.Plan) { old.Spec.Version = "v1.36.0+rke2r1" })
		}, want: "[RequesterMissing] this update changes the GPU Plan's spec (a new rollout) without annotation gpu-upgrade-gate.io/requested-by, which names"},
		{name: "an UPDATE that drops it", mutate: func(s *scenario) {
			update(s, func(*upgradev1.Plan) {})
			absent(s)
		}, want: "[RequesterMissing] this update removes annotation gpu-upgrade-gate.io/requested-by, which names"},
		{name: "an existing Plan without it, relabelled: keeps working", mutate: func(s *scenario) {
			absent(s)
			update(s, func(old *upgradev1.Plan) { old.Labels = map[string]string{"team": "ml"} })
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			tc.mutate(s)
			d := s.decide()
			if tc.want == "" {
				assert.NotContains(t, d.Codes(), CodeRequesterMissing, d.Message())
				return
			}
			assert.Contains(t, d.Codes(), CodeRequesterMissing)
			assert.Contains(t, d.Message(), tc.want)
			assert.False(t, d.Allowed)
		})
	}
	t.Run("config: requireRequester", func(t *testing.T) {
		cfg, err := LoadConfig([]byte("requireRequester: false\n"))
		require.NoError(t, err)
		assert.False(t, cfg.RequireRequester)
		cfg, err = LoadConfig([]byte("waveSize: 1\n"))
		require.NoError(t, err)
		assert.True(t, cfg.RequireRequester, "the default")
		_, err = LoadConfig([]byte("requireRequester: sometimes\n"))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "config: requireRequester: ")
	})
}

// TestInventoryShowsHalts: the nodes of halted hardware name the halt; a
// halt record that fails closed is shown on every GPU node.
func TestInventoryShowsHalts(t *testing.T) {
	s := safeScenario(t)
	halted(s)
	byNode := map[string]NodeInventory{}
	for _, n := range Inventory(s.cfg, s.cluster, nil, testNow) {
		byNode[n.Node] = n
	}
	assert.Contains(t, byNode["gpu-v100-02"].Halt, "10de:1db6/10de:124a halted: node gpu-v100-01: SUC Job system-upgrade/apply-x failed")
	assert.Empty(t, byNode["gpu-h200-01"].Halt)
	s.cluster.Halts = HaltRecord{Name: "gpu-upgrade-gate/gpu-upgrade-gate-halts", Err: errors.New("data[note]: Unsupported value")}
	for _, n := range Inventory(s.cfg, s.cluster, nil, testNow) {
		assert.Contains(t, n.Halt, "every rollout halted: halt record gpu-upgrade-gate/gpu-upgrade-gate-halts cannot be read", n.Node)
	}
}

// TestBreakGlassDoesNotOverrideAHalt (issue 12 item 3): a halt ends only by
// its audited clear, so break glass on a write that a halt denies leaves it
// denied, naming the clear; on the neighbouring codes it is still honoured.
func TestBreakGlassDoesNotOverrideAHalt(t *testing.T) {
	breakGlass := func(s *scenario) {
		s.req.User.Groups = append(s.req.User.Groups, s.cfg.BreakGlassGroup)
		s.req.Plan.Annotations[AnnotationBreakGlass] = "INC-4711 driver hotfix"
		s.req.Plan.Spec.Concurrency = 5 // ConcurrencyNotSerial, which break glass overrides
	}
	cases := []struct {
		name    string
		mutate  func(s *scenario)
		allowed bool
	}{
		{name: "halted hardware: refused", mutate: func(s *scenario) { halted(s); breakGlass(s) }},
		{name: "a halt seen now, not yet recorded: refused", mutate: func(s *scenario) {
			stored := canaryPlan("gpu-v100-01")
			s.cluster.Plans = []*upgradev1.Plan{stored}
			s.cluster.Proof.UpgradeJobs = []*batchv1.Job{upgradeJob("gpu-v100-01", batchv1.JobFailed, testNow.Add(-time.Minute))}
			s.req.Plan = canaryPlan("gpu-v100-02")
			s.req.Plan.Name = "gpu-v100-next"
			breakGlass(s)
		}},
		{name: "requested-by someone else: refused", mutate: func(s *scenario) {
			breakGlass(s)
			s.req.Plan.Annotations[AnnotationRequestedBy] = "bob"
		}},
		{name: "another hardware halted: the neighbouring code is overridden", mutate: func(s *scenario) {
			h := haltV100()
			h.Hardware = []string{hwH200}
			s.cluster.Halts = HaltRecord{Halts: map[string]Halt{h.HardwareKey(): h}}
			breakGlass(s)
		}, allowed: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			tc.mutate(s)
			d := s.decide()
			require.Equal(t, tc.allowed, d.Allowed, d.Message())
			warnings := strings.Join(d.Warnings, "\n")
			if tc.allowed {
				assert.Equal(t, "INC-4711 driver hotfix", d.BreakGlass)
				assert.Equal(t, []Code{CodeConcurrencyNotSerial}, d.Codes())
				assert.Contains(t, warnings, "overrode 1 blocker(s) for this write only: ConcurrencyNotSerial")
				return
			}
			assert.Empty(t, d.BreakGlass)
			assert.Contains(t, d.Codes(), CodeConcurrencyNotSerial, "every blocker is still reported")
			assert.Contains(t, warnings, "break-glass not honoured: it does not override ")
			if slices.Contains(d.Codes(), CodeRolloutHalted) {
				assert.Contains(t, d.Message(), "(break glass does not override a halt)")
				assert.Contains(t, d.Message(), "clears the halt: kubectl annotate configmap -n gpu-upgrade-gate gpu-upgrade-gate-halts gpu-upgrade-gate.io/clear-10de_1db6_10de_124a=\"<reason>\"")
			}
		})
	}

	t.Run("the failed node's uncordon with break glass: refused", func(t *testing.T) {
		s := safeScenario(t)
		halted(s)
		n := s.node("gpu-v100-01")
		old := n.DeepCopy()
		old.Spec.Unschedulable = true
		n.Annotations = map[string]string{AnnotationBreakGlass: "INC-4711 uncordon"}
		d := PrepareNode(s.cfg, s.cluster, NodeRequest{Node: n, OldNode: old, User: UserInfo{Name: "carol", Groups: []string{s.cfg.BreakGlassGroup}}, Now: testNow}).Decide(nil, nil)
		require.False(t, d.Allowed, d.Message())
		assert.Equal(t, []Code{CodeRolloutHalted}, d.Codes())
		assert.Contains(t, strings.Join(d.Warnings, "\n"), "it does not override RolloutHalted")
	})
}

// TestRequesterOtherSpellings: what else names (or hides) a requester. An
// empty requested-by names nobody and is refused like another user's name;
// the key spelled in another case is another annotation, so the Plan has
// none and its create is refused; the writer's own name passes.
func TestRequesterOtherSpellings(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(s *scenario)
		want   Code // "" = neither requester code
	}{
		{name: "empty value", mutate: func(s *scenario) { s.req.Plan.Annotations[AnnotationRequestedBy] = "" }, want: CodeRequesterMismatch},
		{name: "the key in another case", mutate: func(s *scenario) {
			delete(s.req.Plan.Annotations, AnnotationRequestedBy)
			s.req.Plan.Annotations["gpu-upgrade-gate.io/Requested-By"] = "alice"
		}, want: CodeRequesterMissing},
		{name: "the writer's own name", mutate: func(s *scenario) { s.req.Plan.Annotations[AnnotationRequestedBy] = "alice" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			tc.mutate(s)
			d := s.decide()
			codes := d.Codes()
			if tc.want == "" {
				assert.NotContains(t, codes, CodeRequesterMismatch, d.Message())
				assert.NotContains(t, codes, CodeRequesterMissing, d.Message())
				return
			}
			assert.Contains(t, codes, tc.want, d.Message())
			assert.False(t, d.Allowed)
		})
	}
}
