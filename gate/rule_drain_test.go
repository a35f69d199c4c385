package gate

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// runningPod is a Ready Pod of a ReplicaSet on node, as the kubelet reports it.
func runningPod(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, Labels: map[string]string{"app": "db"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Controller: ptr(true)}}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
}

// fullBudget is a PodDisruptionBudget over app=db that allows no
// disruption, as the disruption controller reports it.
func fullBudget() *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "db", Generation: 1},
		Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
		Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 0, CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1}}
}

// TestDrainBlocked: a draining Plan whose pending GPU node runs a Pod SUC's
// kubectl drain cannot remove is named at admission (a warning; refused
// with drainCheck.deny), each blocker next to its neighbouring safe case.
func TestDrainBlocked(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(d *upgradev1.DrainSpec, p *corev1.Pod, b *policyv1.PodDisruptionBudget)
		want   string // "" = nothing named
	}{
		{name: "PDB allows no disruption", want: "PodDisruptionBudget ml/db allows no disruption (status.disruptionsAllowed 0, currentHealthy 1, desiredHealthy 1)"},
		{name: "PDB allows one", mutate: func(_ *upgradev1.DrainSpec, _ *corev1.Pod, b *policyv1.PodDisruptionBudget) {
			b.Status.DisruptionsAllowed = 1
		}},
		{name: "PDB of another namespace", mutate: func(_ *upgradev1.DrainSpec, _ *corev1.Pod, b *policyv1.PodDisruptionBudget) { b.Namespace = "other" }},
		{name: "PDB selecting other Pods", mutate: func(_ *upgradev1.DrainSpec, _ *corev1.Pod, b *policyv1.PodDisruptionBudget) {
			b.Spec.Selector.MatchLabels["app"] = "web"
		}},
		{name: "a Pending Pod is evicted whatever its budget", mutate: func(_ *upgradev1.DrainSpec, p *corev1.Pod, _ *policyv1.PodDisruptionBudget) {
			p.Status = corev1.PodStatus{Phase: corev1.PodPending}
		}},
		{name: "disableEviction deletes past budgets", mutate: func(d *upgradev1.DrainSpec, _ *corev1.Pod, _ *policyv1.PodDisruptionBudget) { d.DisableEviction = true }},
		{name: "an unready Pod under AlwaysAllow goes", mutate: func(_ *upgradev1.DrainSpec, p *corev1.Pod, b *policyv1.PodDisruptionBudget) {
			p.Status.Conditions = nil
			b.Spec.UnhealthyPodEvictionPolicy = ptr(policyv1.AlwaysAllow)
		}},
		{name: "an unready Pod under a budget not met stays", mutate: func(_ *upgradev1.DrainSpec, p *corev1.Pod, b *policyv1.PodDisruptionBudget) {
			p.Status.Conditions = nil
			b.Status.CurrentHealthy = 0
		}, want: "PodDisruptionBudget ml/db allows no disruption"},
		{name: "emptyDir with SUC's default --delete-emptydir-data", mutate: func(_ *upgradev1.DrainSpec, p *corev1.Pod, b *policyv1.PodDisruptionBudget) {
			b.Status.DisruptionsAllowed = 1
			p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}},
		{name: "emptyDir with deleteEmptydirData off", mutate: func(d *upgradev1.DrainSpec, p *corev1.Pod, b *policyv1.PodDisruptionBudget) {
			b.Status.DisruptionsAllowed = 1
			d.DeleteEmptydirData = ptr(false)
			p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}, want: "it has emptyDir volume scratch and spec.drain turns deleteEmptydirData off"},
		{name: "emptyDir with deleteLocalData off", mutate: func(d *upgradev1.DrainSpec, p *corev1.Pod, b *policyv1.PodDisruptionBudget) {
			b.Status.DisruptionsAllowed = 1
			d.DeleteLocalData = ptr(false)
			p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}, want: "it has emptyDir volume scratch"},
		{name: "hostPath does not stop a drain", mutate: func(d *upgradev1.DrainSpec, p *corev1.Pod, b *policyv1.PodDisruptionBudget) {
			b.Status.DisruptionsAllowed = 1
			d.DeleteEmptydirData = ptr(false)
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}}}}
		}},
		{name: "a Pod no controller owns", mutate: func(_ *upgradev1.DrainSpec, p *corev1.Pod, b *policyv1.PodDisruptionBudget) {
			b.Status.DisruptionsAllowed = 1
			p.OwnerReferences = nil
		}, want: "no controller owns it and spec.drain.force is not set"},
		{name: "a Pod no controller owns, with force", mutate: func(d *upgradev1.DrainSpec, p *corev1.Pod, b *policyv1.PodDisruptionBudget) {
			b.Status.DisruptionsAllowed = 1
			p.OwnerReferences, d.Force = nil, true
		}},
		{name: "a DaemonSet's Pod is skipped by default", mutate: func(_ *upgradev1.DrainSpec, p *corev1.Pod, _ *policyv1.PodDisruptionBudget) {
			p.OwnerReferences[0].Kind = "DaemonSet"
		}},
		{name: "a DaemonSet's Pod with ignoreDaemonSets off", mutate: func(d *upgradev1.DrainSpec, p *corev1.Pod, _ *policyv1.PodDisruptionBudget) {
			p.OwnerReferences[0].Kind = "DaemonSet"
			d.IgnoreDaemonSets = ptr(false)
		}, want: "it is a DaemonSet's Pod and spec.drain.ignoreDaemonSets is false"},
		{name: "outside spec.drain.podSelector", mutate: func(d *upgradev1.DrainSpec, _ *corev1.Pod, _ *policyv1.PodDisruptionBudget) {
			d.PodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"drain": "yes"}}
		}},
		{name: "SUC's own Pod", mutate: func(_ *upgradev1.DrainSpec, p *corev1.Pod, _ *policyv1.PodDisruptionBudget) {
			p.Labels[upgradev1.LabelController] = "system-upgrade-controller"
		}},
		{name: "a mirror Pod", mutate: func(_ *upgradev1.DrainSpec, p *corev1.Pod, _ *policyv1.PodDisruptionBudget) {
			p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
		}},
		{name: "a finished Pod", mutate: func(_ *upgradev1.DrainSpec, p *corev1.Pod, _ *policyv1.PodDisruptionBudget) {
			p.Status.Phase = corev1.PodSucceeded
		}},
	}
	for _, tc := range cases {
		for _, deny := range []bool{false, true} {
			name := tc.name + map[bool]string{false: "/warn", true: "/deny"}[deny]
			t.Run(name, func(t *testing.T) {
				s := safeScenario(t)
				s.cfg.DrainCheck.Deny = deny
				s.req.Plan.Spec.Drain = &upgradev1.DrainSpec{}
				p, b := runningPod("db-0", "gpu-v100-01"), fullBudget()
				if tc.mutate != nil {
					tc.mutate(s.req.Plan.Spec.Drain, p, b)
				}
				r := PreparePlan(s.cfg, s.cluster, s.req)
				require.Equal(t, []string{"gpu-v100-01"}, r.DrainNodes())
				r.SetDrainFacts(DrainFacts{Pods: map[string][]*corev1.Pod{"gpu-v100-01": {p}}, PDBs: []*policyv1.PodDisruptionBudget{b}})
				d := r.Decide(s.holders, nil)
				warnings := strings.Join(d.Warnings, "\n")
				switch {
				case tc.want == "":
					assert.True(t, d.Allowed, d.Message())
					assert.NotContains(t, warnings, "DrainBlocked")
				case deny:
					assert.Equal(t, []Code{CodeDrainBlocked}, d.Codes(), d.Message())
					assert.Contains(t, d.Message(), "node gpu-v100-01: Pod ml/db-0: "+tc.want)
				default:
					assert.True(t, d.Allowed, d.Message())
					assert.Contains(t, warnings, "[DrainBlocked] ")
					assert.Contains(t, warnings, "node gpu-v100-01: Pod ml/db-0: "+tc.want)
				}
			})
		}
	}
}

// TestDrainCheckReads: a Plan without a drain reads nothing; facts that
// cannot be read are a warning, and a refusal with drainCheck.deny.
func TestDrainCheckReads(t *testing.T) {
	s := safeScenario(t)
	assert.Empty(t, PreparePlan(s.cfg, s.cluster, s.req).DrainNodes(), "cordon only: SUC drains nothing")

	s.req.Plan.Spec.Drain = &upgradev1.DrainSpec{}
	r := PreparePlan(s.cfg, s.cluster, s.req)
	r.SetDrainFacts(DrainFacts{Err: errors.New("list pods: timeout")})
	d := r.Decide(s.holders, nil)
	assert.True(t, d.Allowed, d.Message())
	assert.Contains(t, strings.Join(d.Warnings, "\n"), "cannot be read (list pods: timeout)")

	s.cfg.DrainCheck.Deny = true
	d = PreparePlan(s.cfg, s.cluster, s.req).Decide(s.holders, nil)
	assert.Equal(t, []Code{CodeDrainBlocked}, d.Codes(), "not read: fail closed")
}

// TestDrainBlockedAtSUCStep: SUC's start of a node's Job is checked on that
// node.
func TestDrainBlockedAtSUCStep(t *testing.T) {
	s := safeStep(t)
	s.cfg.DrainCheck.Deny = true
	s.req.Plan.Spec.Drain = &upgradev1.DrainSpec{}
	st := PrepareSUCStep(s.cfg, s.cluster, SUCStepRequest{Object: "Job system-upgrade/apply-gpu-v100-canary-on-gpu-v100-01", Plan: s.req.Plan, Node: s.node, User: s.req.User, Now: s.req.Now})
	require.Equal(t, []string{s.node.Name}, st.DrainNodes())
	st.SetDrainFacts(DrainFacts{Pods: map[string][]*corev1.Pod{s.node.Name: {runningPod("db-0", s.node.Name)}}, PDBs: []*policyv1.PodDisruptionBudget{fullBudget()}})
	d := st.Decide(s.holders, nil)
	assert.Equal(t, []Code{CodeDrainBlocked}, d.Codes(), d.Message())
}

// TestDrainNodesAtSUCStep: the Plan write checks the drain of every pending
// node of its wave; SUC's start of one node's Job reads and judges that
// node's Pods only (its Job drains that node, and the others are judged at
// their own starts), so a blocker on another node of the wave neither is
// read for it nor holds it.
func TestDrainNodesAtSUCStep(t *testing.T) {
	for _, tc := range []struct {
		name    string
		blocked string // the node running a Pod the drain cannot evict
		want    []Code
	}{
		{name: "a blocker on the Job's own node holds its start", blocked: "gpu-v100-01", want: []Code{CodeDrainBlocked}},
		{name: "a blocker on another node of the wave does not", blocked: "gpu-v100-02"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := safeStep(t)
			s.cfg.DrainCheck.Deny = true
			s.req.Plan = canaryPlan("gpu-v100-01", "gpu-v100-02")
			s.req.Plan.Spec.Drain = &upgradev1.DrainSpec{}
			require.Equal(t, []string{"gpu-v100-01", "gpu-v100-02"}, PreparePlan(s.cfg, s.cluster, s.req).DrainNodes(), "the Plan write: the wave")
			st := PrepareSUCStep(s.cfg, s.cluster, SUCStepRequest{Object: "Job system-upgrade/apply-gpu-v100-canary-on-gpu-v100-01", Plan: s.req.Plan, Node: s.node, User: s.req.User, Now: s.req.Now})
			require.Equal(t, []string{"gpu-v100-01"}, st.DrainNodes(), "the Job start: its node")
			require.Equal(t, []string{"gpu-v100-01"}, st.HolderNodes(), "the same node as its holders (one listing feeds both)")
			st.SetDrainFacts(DrainFacts{Pods: map[string][]*corev1.Pod{tc.blocked: {runningPod("db-0", tc.blocked)}}, PDBs: []*policyv1.PodDisruptionBudget{fullBudget()}})
			d := st.Decide(s.holders, nil)
			assert.Equal(t, tc.want, d.Codes(), d.Message())
		})
	}
}

// TestDrainBlockedByTwoBudgets: the eviction API refuses a running Pod that
// two budgets cover, even when both allow a disruption; a second budget of
// another namespace covers nothing here.
func TestDrainBlockedByTwoBudgets(t *testing.T) {
	for _, tc := range []struct {
		name        string
		otherNS     string
		wantBlocked bool
	}{
		{name: "two budgets over the Pod", otherNS: "ml", wantBlocked: true},
		{name: "the second budget in another namespace", otherNS: "other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			s.cfg.DrainCheck.Deny = true
			s.req.Plan.Spec.Drain = &upgradev1.DrainSpec{}
			a, b := fullBudget(), fullBudget()
			a.Status.DisruptionsAllowed, b.Status.DisruptionsAllowed = 1, 1
			b.Name, b.Namespace = "db-too", tc.otherNS
			r := PreparePlan(s.cfg, s.cluster, s.req)
			r.SetDrainFacts(DrainFacts{Pods: map[string][]*corev1.Pod{"gpu-v100-01": {runningPod("db-0", "gpu-v100-01")}}, PDBs: []*policyv1.PodDisruptionBudget{a, b}})
			d := r.Decide(s.holders, nil)
			if !tc.wantBlocked {
				assert.True(t, d.Allowed, d.Message())
				return
			}
			assert.Equal(t, []Code{CodeDrainBlocked}, d.Codes(), d.Message())
			assert.Contains(t, d.Message(), "node gpu-v100-01: Pod ml/db-0: 2 PodDisruptionBudgets cover it (db, db-too), and the eviction API refuses a Pod more than one budget covers")
		})
	}
}
