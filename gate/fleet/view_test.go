package fleet

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

func job(name, node, plan string) *batchv1.Job {
	l := map[string]string{}
	if node != "" {
		l[upgradev1.LabelNode] = node
	}
	if plan != "" {
		l[upgradev1.LabelPlan] = plan
	}
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "cattle-system", Labels: l}}
}

func TestViewSUCJobs(t *testing.T) {
	a1, a2 := job("a1", "gpu-a", "drivers"), job("a2", "gpu-a", "kernel")
	orphan := job("a3", "gpu-a", "") // names no Plan: not SUC's Job for the node
	b := job("b1", "gpu-b", "drivers")
	noNode := job("x", "", "drivers")
	v := NewView(ViewInputs{UpgradeJobs: []*batchv1.Job{a1, orphan, b, a2, noNode}}, neverLive)
	for _, tc := range []struct {
		node      string
		suc, byNd []*batchv1.Job
	}{
		{"gpu-a", []*batchv1.Job{a1, a2}, []*batchv1.Job{a1, orphan, a2}},
		{"gpu-b", []*batchv1.Job{b}, []*batchv1.Job{b}},
		{"gpu-c", nil, nil},
		{"", []*batchv1.Job{noNode}, []*batchv1.Job{noNode}},
	} {
		t.Run("node "+tc.node, func(t *testing.T) {
			assert.Equal(t, tc.suc, v.SUCJobsFor(tc.node), "in list order, only those naming a Plan")
			assert.Equal(t, tc.byNd, v.UpgradeJobsByNode()[tc.node])
		})
	}
}

func TestViewBuiltFrom(t *testing.T) {
	a, b := job("a", "gpu-a", "p"), job("b", "gpu-b", "p")
	jobs := []*batchv1.Job{a, b}
	halts := map[string]Halt{"10de:1db5": {Node: "gpu-a", Signal: "Job failed"}}
	in := func(jobs []*batchv1.Job, halts map[string]Halt) ViewInputs {
		return ViewInputs{UpgradeJobs: jobs, Halts: halts}
	}
	v := NewView(in(jobs, halts), neverLive)
	for _, tc := range []struct {
		name  string
		jobs  []*batchv1.Job
		halts map[string]Halt
		want  bool
	}{
		{"the same list", jobs, halts, true},
		{"a copy, pointer for pointer", []*batchv1.Job{a, b}, halts, true},
		{"one Job fewer", jobs[:1], halts, false},
		{"another object for a Job", []*batchv1.Job{a, job("b", "gpu-b", "p")}, halts, false},
		{"none", nil, halts, false},
		{"another halt record, the same halts", jobs, map[string]Halt{"10de:1db5": {Node: "gpu-a", Signal: "Job failed"}}, false},
		{"no halt record", jobs, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, v.BuiltFrom(in(tc.jobs, tc.halts)))
		})
	}
	assert.True(t, NewView(ViewInputs{}, neverLive).BuiltFrom(ViewInputs{}))
}

// TestViewBuiltFromHaltScopeInputs: what halt detection's scope reads (the
// index, Plans, selectors, records, images) keys the view too; a view of
// other such parts shares the Jobs and the parse memo (NextView), one of
// other Jobs shares nothing.
func TestViewBuiltFromHaltScopeInputs(t *testing.T) {
	plan := &upgradev1.Plan{}
	sel, err := NewPlanSelector(plan)
	assert.NoError(t, err)
	base := ViewInputs{UpgradeJobs: []*batchv1.Job{job("a", "gpu-a", "p")}, Index: NewNodeIndex(basisOnly{}, nil, nil), Plans: []*upgradev1.Plan{plan},
		PlanSelectors: []*PlanSelector{sel}, Records: map[string]RecordEntry{}, GPUOperatorImage: "op:v25.3.0", DCGMExporterImage: "dcgm:4.2.3"}
	v := NewView(base, neverLive)
	for _, tc := range []struct {
		name   string
		change func(in *ViewInputs)
	}{
		{"another index", func(in *ViewInputs) { in.Index = NewNodeIndex(basisOnly{}, nil, nil) }},
		{"another Plan object", func(in *ViewInputs) { in.Plans = []*upgradev1.Plan{{}} }},
		{"a Plan fewer", func(in *ViewInputs) { in.Plans = nil }},
		{"another selector", func(in *ViewInputs) { in.PlanSelectors = []*PlanSelector{nil} }},
		{"another record map, the same records", func(in *ViewInputs) { in.Records = map[string]RecordEntry{} }},
		{"another GPU Operator image", func(in *ViewInputs) { in.GPUOperatorImage = "op:v25.10.0" }},
		{"another DCGM exporter image", func(in *ViewInputs) { in.DCGMExporterImage = "dcgm:4.3.0" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base
			tc.change(&in)
			assert.False(t, v.BuiltFrom(in))
			next := NextView(v, in, neverLive)
			assert.NotSame(t, v, next)
			assert.True(t, next.BuiltFrom(in))
			assert.Same(t, v.Versions(), next.Versions(), "the Jobs are the same: their parts and the memo are shared")
			assert.Equal(t, v.SUCJobsFor("gpu-a"), next.SUCJobsFor("gpu-a"))
		})
	}
	assert.Same(t, v, NextView(v, base, neverLive), "built from these: itself")
	other := base
	other.UpgradeJobs = nil
	assert.NotSame(t, v.Versions(), NextView(v, other, neverLive).Versions(), "other Jobs: a new view")
}

// basisOnly classifies nothing as GPU: the index of these tests is empty.
type basisOnly struct{}

func (basisOnly) IsGPUNode(*corev1.Node) bool    { return false }
func (basisOnly) FactsOf(*corev1.Node) NodeFacts { return NodeFacts{} }
func (basisOnly) NodeMayHalt(*corev1.Node) bool  { return false }
func (basisOnly) NodeDown(*corev1.Node) bool     { return false }
func (basisOnly) IndexBasis() Basis              { return Basis{} }

func neverLive(*batchv1.Job) bool { return false }

func TestViewLiveJobs(t *testing.T) {
	done, run1, run2 := job("a1", "gpu-a", "drivers"), job("a2", "gpu-a", "kernel"), job("a3", "gpu-a", "rke2")
	orphan := job("o", "gpu-b", "") // live, but names no Plan: not SUC's Job for the node
	b := job("b1", "gpu-b", "drivers")
	live := map[*batchv1.Job]bool{run1: true, run2: true, orphan: true}
	v := NewView(ViewInputs{UpgradeJobs: []*batchv1.Job{done, orphan, run1, b, run2}}, func(j *batchv1.Job) bool { return live[j] })
	assert.Equal(t, []*batchv1.Job{orphan, run1, run2}, v.LiveJobs(), "every live Job, in list order")
	for _, tc := range []struct {
		node string
		want *batchv1.Job
	}{
		{"gpu-a", run1}, // the first live one, not the finished one before it
		{"gpu-b", nil},  // its only live Job names no Plan
		{"gpu-c", nil},
	} {
		t.Run("node "+tc.node, func(t *testing.T) {
			assert.Same(t, tc.want, v.LiveSUCJob(tc.node))
		})
	}
}

// TestViewPodsOn: the proof facts' Pods by node, in list order, without
// those being deleted; a view of other Pods is another view, one of the
// same Pods shares the index (NextView).
func TestViewPodsOn(t *testing.T) {
	pod := func(name, node string, deleting bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	v1, v2, gone, v3 := pod("v1", "gpu-a", false), pod("v2", "gpu-a", false), pod("v-gone", "gpu-a", true), pod("v3", "gpu-b", false)
	u, c := pod("u", "gpu-a", false), pod("c", "gpu-b", false)
	in := ViewInputs{Validators: []*corev1.Pod{v2, gone, v3, v1}, Unowned: []*corev1.Pod{u}, AllocationChecks: []*corev1.Pod{c}}
	v := NewView(in, neverLive)
	for _, tc := range []struct {
		which ProofPods
		node  string
		want  []*corev1.Pod
	}{
		{ValidatorPods, "gpu-a", []*corev1.Pod{v2, v1}},
		{ValidatorPods, "gpu-b", []*corev1.Pod{v3}},
		{ValidatorPods, "gpu-c", nil},
		{UnownedPods, "gpu-a", []*corev1.Pod{u}},
		{UnownedPods, "gpu-b", nil},
		{AllocationCheckPods, "gpu-b", []*corev1.Pod{c}},
		{AllocationCheckPods, "gpu-a", nil},
	} {
		t.Run(fmt.Sprintf("%d on %s", tc.which, tc.node), func(t *testing.T) {
			assert.Equal(t, tc.want, v.PodsOn(tc.which, tc.node))
		})
	}
	other := in
	other.Validators = []*corev1.Pod{v1}
	assert.False(t, v.BuiltFrom(other), "other validators: not this view")
	assert.Equal(t, []*corev1.Pod{v1}, NextView(v, other, neverLive).PodsOn(ValidatorPods, "gpu-a"))
	samePods := in
	samePods.Plans = []*upgradev1.Plan{{}}
	assert.Same(t, v.pods, NextView(v, samePods, neverLive).pods, "the same Pods: the index is shared")
}
