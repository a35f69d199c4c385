package gate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

func nudgePlan(annotations map[string]string) *upgradev1.Plan {
	p := &upgradev1.Plan{ObjectMeta: metav1.ObjectMeta{Namespace: "system-upgrade", Name: "gpu-v100", Annotations: annotations}}
	p.Spec.Concurrency = 1
	p.Spec.Version = "v1.36.1+rke2r1"
	p.Status.LatestHash = "9e1b5f0c2d7a8b3e4f"
	return p
}

// TestNudgeForged: only the gate's ServiceAccount sets or changes the nudge
// annotation on a Plan, and that ServiceAccount changes nothing else; the
// neighbouring safe cases (the gate's nudge alone, a person's Plan write
// that leaves the nudge alone or removes it) are allowed.
func TestNudgeForged(t *testing.T) {
	alice := UserInfo{Name: "alice"}
	self := UserInfo{Name: gateSA}
	nudged := func(v string) *upgradev1.Plan { return nudgePlan(map[string]string{AnnotationNudge: v}) }
	respec := nudged("gpu-v100-02/9e1b5f0c2d7a")
	respec.Spec.Concurrency = 2
	relabel := nudged("gpu-v100-02/9e1b5f0c2d7a")
	relabel.Labels = map[string]string{"team": "ml"}
	reannotate := nudged("gpu-v100-02/9e1b5f0c2d7a")
	reannotate.Annotations[AnnotationQualification] = "v100-r580"
	cases := []struct {
		name      string
		req       PlanNudgeRequest
		nudgeOnly bool // NudgeWrite
		want      string
	}{
		{name: "a person sets the nudge", req: PlanNudgeRequest{Operation: OpUpdate, Old: nudgePlan(nil), New: nudged("gpu-v100-01/9e1b"), User: alice, Self: gateSA},
			nudgeOnly: true, want: `"alice" sets it to "gpu-v100-01/9e1b": annotation gpu-upgrade-gate.cattle.io/nudge is the gate's alone`},
		{name: "a person changes it", req: PlanNudgeRequest{Operation: OpUpdate, Old: nudged("gpu-v100-01/9e1b5f0c2d7a"), New: nudged("gpu-v100-02/9e1b5f0c2d7a"), User: alice, Self: gateSA},
			nudgeOnly: true, want: `"alice" sets it to "gpu-v100-02/9e1b5f0c2d7a"`},
		{name: "a person creates a Plan with it", req: PlanNudgeRequest{Operation: OpCreate, New: nudged("gpu-v100-01/9e1b"), User: alice, Self: gateSA},
			nudgeOnly: true, want: `"alice" sets it`},
		{name: "the gate changes the spec too", req: PlanNudgeRequest{Operation: OpUpdate, Old: nudged("gpu-v100-01/9e1b5f0c2d7a"), New: respec, User: self, Self: gateSA},
			nudgeOnly: true, want: `the gate's own ServiceAccount "` + gateSA + `" writes spec`},
		{name: "the gate changes a label", req: PlanNudgeRequest{Operation: OpUpdate, Old: nudged("gpu-v100-01/9e1b5f0c2d7a"), New: relabel, User: self, Self: gateSA},
			nudgeOnly: true, want: "writes label team"},
		{name: "the gate changes another annotation", req: PlanNudgeRequest{Operation: OpUpdate, Old: nudged("gpu-v100-01/9e1b5f0c2d7a"), New: reannotate, User: self, Self: gateSA},
			nudgeOnly: true, want: "writes annotation " + AnnotationQualification},
		{name: "the gate creates a Plan", req: PlanNudgeRequest{Operation: OpCreate, New: nudgePlan(nil), User: self, Self: gateSA},
			nudgeOnly: true, want: "writes a new Plan"},
		{name: "safe: the gate's nudge alone", req: PlanNudgeRequest{Operation: OpUpdate, Old: nudged("gpu-v100-01/9e1b5f0c2d7a"), New: nudged("gpu-v100-02/9e1b5f0c2d7a"), User: self, Self: gateSA},
			nudgeOnly: true},
		{name: "safe: the gate's first nudge", req: PlanNudgeRequest{Operation: OpUpdate, Old: nudgePlan(nil), New: nudged("gpu-v100-01/9e1b5f0c2d7a"), User: self, Self: gateSA},
			nudgeOnly: true},
		{name: "safe: a person's edit that keeps the nudge", req: PlanNudgeRequest{Operation: OpUpdate, Old: nudged("gpu-v100-01/9e1b5f0c2d7a"), New: relabel, User: alice, Self: gateSA}},
		{name: "safe: a person removes it", req: PlanNudgeRequest{Operation: OpUpdate, Old: nudged("gpu-v100-01/9e1b5f0c2d7a"), New: nudgePlan(nil), User: alice, Self: gateSA}},
		{name: "safe: the gate's identity unknown, a person's plain edit", req: PlanNudgeRequest{Operation: OpUpdate, Old: nudgePlan(nil), New: nudgePlan(nil), User: alice}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "safe: a person's edit that keeps the nudge" {
				tc.req.Old = nudged("gpu-v100-02/9e1b5f0c2d7a")
			}
			require.Equal(t, tc.nudgeOnly, NudgeWrite(tc.req), "NudgeWrite")
			d := DecidePlanNudge(DefaultConfig(), tc.req)
			if tc.want == "" {
				assert.True(t, d.Allowed, d.Message())
				return
			}
			assert.Equal(t, []Code{CodeNudgeForged}, d.Codes(), d.Message())
			assert.Contains(t, d.Message(), tc.want)
			t.Log(d.Message())
		})
	}
}

// TestCompletionNudges: a Plan is nudged when SUC's completion of a node
// lands (the node's plan label becomes the Plan's latestHash), once per
// node and hash; not for another Plan's label, an opt-out, a label already
// there, a Plan outside the SUC namespaces, or a Plan whose digest would
// hash the nudge.
func TestCompletionNudges(t *testing.T) {
	cfg := DefaultConfig()
	node := func(labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-v100-01", Labels: labels}}
	}
	key := upgradev1.LabelPlanName("gpu-v100")
	hash := nudgePlan(nil).Status.LatestHash
	done := node(map[string]string{key: hash})
	cases := []struct {
		name     string
		plan     *upgradev1.Plan
		old, cur *corev1.Node
		want     string // the nudge's value, "" for none
	}{
		{name: "SUC's completion lands", plan: nudgePlan(nil), old: node(nil), cur: done, want: "gpu-v100-01/9e1b5f0c2d7a"},
		{name: "over an older hash", plan: nudgePlan(nil), old: node(map[string]string{key: "0ld"}), cur: done, want: "gpu-v100-01/9e1b5f0c2d7a"},
		{name: "another node nudged before", plan: nudgePlan(map[string]string{AnnotationNudge: "gpu-v100-02/9e1b5f0c2d7a"}), old: node(nil), cur: done, want: "gpu-v100-01/9e1b5f0c2d7a"},
		{name: "already nudged for it", plan: nudgePlan(map[string]string{AnnotationNudge: "gpu-v100-01/9e1b5f0c2d7a"}), old: node(nil), cur: done},
		{name: "the label was there", plan: nudgePlan(nil), old: done, cur: done},
		{name: "opt-out", plan: nudgePlan(nil), old: node(nil), cur: node(map[string]string{key: "disabled"})},
		{name: "another Plan's label", plan: nudgePlan(nil), old: node(nil), cur: node(map[string]string{upgradev1.LabelPlanName("other"): hash})},
		{name: "no hash yet", plan: func() *upgradev1.Plan { p := nudgePlan(nil); p.Status.LatestHash = ""; return p }(), old: node(nil), cur: node(map[string]string{key: ""})},
		{name: "outside the SUC namespaces", plan: func() *upgradev1.Plan { p := nudgePlan(nil); p.Namespace = "ml"; return p }(), old: node(nil), cur: done},
		{name: "its digest hashes its annotations", plan: nudgePlan(map[string]string{upgradev1.AnnotationDigest: "spec.upgrade.envs, metadata.annotations"}), old: node(nil), cur: done},
		{name: "its digest names other fields", plan: nudgePlan(map[string]string{upgradev1.AnnotationDigest: "spec.upgrade.envs"}), old: node(nil), cur: done, want: "gpu-v100-01/9e1b5f0c2d7a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := CompletionNudges(cfg, []*upgradev1.Plan{tc.plan}, tc.old, tc.cur)
			if tc.want == "" {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			assert.Same(t, tc.plan, got[0].Plan)
			assert.Equal(t, tc.want, got[0].Value)
		})
	}
}
