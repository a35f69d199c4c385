package gate

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// reachedAt is when the fixtures' upgraded nodes finished their SUC Job.
var reachedAt = testNow.Add(-2 * time.Hour)

// prove gives a node everything a proof asks: a completed SUC Job, a Ready
// validator Pod and a Succeeded allocation check after it, an hour ago; and
// the Job check Pods name as their controller, in the checks' namespace.
func prove(s *scenario, node string) {
	s.cluster.Proof.CheckJobs = []*batchv1.Job{{ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-upgrade-gate", Name: checkJob.Name, UID: checkJob.UID}}}
	s.cluster.Proof.UpgradeJobs = append(s.cluster.Proof.UpgradeJobs, upgradeJob(node, batchv1.JobComplete, reachedAt))
	s.cluster.Proof.Validators = append(s.cluster.Proof.Validators, validatorPod(node, corev1.ConditionTrue, reachedAt.Add(time.Minute)))
	s.cluster.Proof.AllocationChecks = append(s.cluster.Proof.AllocationChecks, allocationPod(node, corev1.PodSucceeded, reachedAt.Add(2*time.Minute)))
}

func upgradeJob(node string, cond batchv1.JobConditionType, at time.Time) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "system-upgrade", Name: "apply-gpu-v100-canary-on-" + node, Labels: map[string]string{upgradev1.LabelNode: node, upgradev1.LabelPlan: "gpu-v100-canary"}},
		Status:     batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}}},
	}
}

// validatorDaemonSet is the controller reference the DaemonSet controller
// puts on the GPU Operator's validator Pods.
var validatorDaemonSet = metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "nvidia-operator-validator",
	UID: "7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f", Controller: new(true), BlockOwnerDeletion: new(true)}

// validatorTemplate is the validator DaemonSet's Pod template as the GPU
// Operator writes it (an init container per validation, then the one that
// stays Ready); its Pods run these images.
var validatorTemplate = corev1.PodSpec{
	InitContainers: []corev1.Container{{Name: "driver-validation", Image: "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.3.3"}},
	Containers:     []corev1.Container{{Name: "nvidia-operator-validator", Image: "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.3.3"}},
}

// validatorDaemonSetRead is the validator DaemonSet as the gate reads it.
func validatorDaemonSetRead() *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-operator", Name: validatorDaemonSet.Name, UID: validatorDaemonSet.UID},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: *validatorTemplate.DeepCopy()}}}
}

func validatorPod(node string, ready corev1.ConditionStatus, at time.Time) *corev1.Pod {
	spec := *validatorTemplate.DeepCopy()
	spec.NodeName = node
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-operator", Name: "nvidia-operator-validator-" + node, Labels: map[string]string{"app": "nvidia-operator-validator"},
			OwnerReferences: []metav1.OwnerReference{validatorDaemonSet}},
		Spec: spec,
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.NewTime(at)}}},
	}
}

func allocationPod(node string, phase corev1.PodPhase, started time.Time) *corev1.Pod {
	st := metav1.NewTime(started)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-upgrade-gate", Name: "allocation-check-" + node, Labels: map[string]string{"gpu-upgrade-gate.io/allocation-check": "true"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "check",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}},
		Status: corev1.PodStatus{Phase: phase, StartTime: &st},
	}
}

// TestProof: each requirement, unmet, is named with the value seen; met, the
// node is proven; switched off, it is not checked.
func TestProof(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(s *scenario, n *corev1.Node)
		want   string // "" = proven
	}{
		{name: "every requirement met", mutate: func(*scenario, *corev1.Node) {}},
		{name: "not Ready", mutate: func(_ *scenario, n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }, want: "node Ready is False (want True)"},
		{name: "no validator Pod", mutate: func(s *scenario, _ *corev1.Node) { s.cluster.Proof.Validators = nil },
			want: "no validator Pod (namespace gpu-operator, app=nvidia-operator-validator) on the node"},
		{name: "validator on another node does not count", mutate: func(s *scenario, _ *corev1.Node) { s.cluster.Proof.Validators[0].Spec.NodeName = "gpu-v100-02" },
			want: "no validator Pod"},
		{name: "validator not Ready", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.Validators[0].Status.Conditions[0].Status = corev1.ConditionFalse
		}, want: "validator Pod gpu-operator/nvidia-operator-validator-gpu-v100-03 is not Ready (phase Running)"},
		{name: "allocatable below capacity", mutate: func(_ *scenario, n *corev1.Node) { n.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("6") },
			want: "allocatable nvidia.com/gpu 6 of 8"},
		{name: "zero GPUs", mutate: func(_ *scenario, n *corev1.Node) {
			n.Status.Allocatable["nvidia.com/gpu"], n.Status.Capacity["nvidia.com/gpu"] = resource.MustParse("0"), resource.MustParse("0")
		}, want: "allocatable nvidia.com/gpu 0 of 0"},
		{name: "no GPU resource at all", mutate: func(_ *scenario, n *corev1.Node) {
			delete(n.Status.Allocatable, "nvidia.com/gpu")
			delete(n.Status.Capacity, "nvidia.com/gpu")
		}, want: "no nvidia.com/ GPU resource in the node's capacity"},
		{name: "capacity disagrees with GFD's count", mutate: func(_ *scenario, n *corev1.Node) {
			n.Labels["nvidia.com/gpu.count"], n.Labels["nvidia.com/mig.strategy"] = "7", "none"
		},
			want: "capacity nvidia.com/gpu 8 but nvidia.com/gpu.count=7 (x1 replicas)"},
		{name: "time-sliced: count times replicas", mutate: func(_ *scenario, n *corev1.Node) {
			n.Labels["nvidia.com/gpu.count"], n.Labels["nvidia.com/gpu.replicas"], n.Labels["nvidia.com/mig.strategy"] = "2", "4", "none"
		}},
		{name: "MIG single strategy: count does not apply", mutate: func(_ *scenario, n *corev1.Node) {
			n.Labels["nvidia.com/gpu.count"], n.Labels["nvidia.com/mig.strategy"] = "1", "single"
		}},
		{name: "driver upgrade failed", mutate: func(_ *scenario, n *corev1.Node) { n.Labels[LabelDriverUpgradeState] = "upgrade-failed" },
			want: "label nvidia.com/gpu-driver-upgrade-state=upgrade-failed (want absent or upgrade-done)"},
		{name: "driver upgrade state absent", mutate: func(_ *scenario, n *corev1.Node) { delete(n.Labels, LabelDriverUpgradeState) }},
		{name: "GPU health condition True", mutate: func(_ *scenario, n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: "GpuXidError", Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(reachedAt)})
		}, want: "condition GpuXidError True since " + reachedAt.Format(time.RFC3339)},
		{name: "EKS accelerated hardware not ready", mutate: func(_ *scenario, n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: "AcceleratedHardwareReady", Status: corev1.ConditionFalse})
		}, want: "condition AcceleratedHardwareReady False"},
		{name: "health condition recovered restarts the soak", mutate: func(_ *scenario, n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: "GPUXIDErrors", Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(testNow.Add(-12 * time.Minute))})
		}, want: "soak 12m0s of 30m0s"},
		{name: "no allocation check", mutate: func(s *scenario, _ *corev1.Node) { s.cluster.Proof.AllocationChecks = nil },
			want: "no allocation check (gpu-upgrade-gate.io/allocation-check=true) Succeeded after " + reachedAt.Add(time.Minute).Format(time.RFC3339) + ": none on the node"},
		{name: "allocation check failed", mutate: func(s *scenario, _ *corev1.Node) { s.cluster.Proof.AllocationChecks[0].Status.Phase = corev1.PodFailed },
			want: "gpu-upgrade-gate/allocation-check-gpu-v100-03 is Failed"},
		{name: "allocation check before the upgrade", mutate: func(s *scenario, _ *corev1.Node) {
			st := metav1.NewTime(reachedAt.Add(-time.Hour))
			s.cluster.Proof.AllocationChecks[0].Status.StartTime = &st
		}, want: "started before the node reached its tuple"},
		{name: "allocation check that requested no GPU", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.AllocationChecks[0].Spec.Containers[0].Resources = corev1.ResourceRequirements{}
		}, want: "requests no GPU"},
		{name: "soak not elapsed", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.UpgradeJobs[0].Status.Conditions[0].LastTransitionTime = metav1.NewTime(testNow.Add(-12 * time.Minute))
			s.cluster.Proof.Validators[0].Status.Conditions[0].LastTransitionTime = metav1.NewTime(testNow.Add(-12 * time.Minute))
			st := metav1.NewTime(testNow.Add(-11 * time.Minute))
			s.cluster.Proof.AllocationChecks[0].Status.StartTime = &st
		}, want: "soak 12m0s of 30m0s"},
		{name: "its SUC Job completing after the allocation check voids it", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.UpgradeJobs[0].Status.Conditions[0].LastTransitionTime = metav1.NewTime(reachedAt.Add(5 * time.Minute))
		}, want: "started before the node reached its tuple"},
		{name: "another node's SUC Job completing later does not", mutate: func(s *scenario, _ *corev1.Node) {
			s.cluster.Proof.UpgradeJobs = append(s.cluster.Proof.UpgradeJobs, upgradeJob("gpu-v100-02", batchv1.JobComplete, reachedAt.Add(5*time.Minute)))
		}},
		{name: "a cordon after the allocation check voids it", mutate: func(_ *scenario, n *corev1.Node) {
			at := metav1.NewTime(reachedAt.Add(5 * time.Minute))
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintUnschedulable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &at})
		}, want: "started before the node reached its tuple"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			n := v100(t, "gpu-v100-03", tupleTarget)
			s.cluster.Nodes = append(s.cluster.Nodes, n)
			prove(s, "gpu-v100-03")
			tc.mutate(s, n)
			p := s.cfg.Prove(s.cluster, n, testNow)
			if tc.want == "" {
				assert.True(t, p.Proven(), "%v", p.Missing)
				return
			}
			require.False(t, p.Proven())
			assert.Contains(t, p.Missing[0], tc.want, "%v", p.Missing)
			// Switched off, the requirement is not checked.
			for _, r := range ProofRequirements {
				s.cfg.Proof.Off = []ProofRequirement{r}
				if off := s.cfg.Prove(s.cluster, n, testNow); len(off.Missing) == len(p.Missing)-1 {
					return
				}
			}
			t.Fatalf("no single requirement switched off removes %q", p.Missing[0])
		})
	}
}

// TestValidatorOwnership: a Pod counts as the node's validator only when the
// GPU Operator's validator DaemonSet controls it. One labelled as the
// validator by anyone else (here Pending, the attack of issue 24) neither
// un-proves a proven node nor proves one, and the proof names it.
func TestValidatorOwnership(t *testing.T) {
	forged := func(mut func(p *corev1.Pod)) *corev1.Pod {
		p := validatorPod("gpu-v100-03", corev1.ConditionFalse, testNow.Add(-time.Minute))
		p.Name, p.OwnerReferences, p.Status.Phase = "nvidia-operator-validator-forged", nil, corev1.PodPending
		if mut != nil {
			mut(p)
		}
		return p
	}
	owned := validatorPod("gpu-v100-03", corev1.ConditionTrue, reachedAt.Add(time.Minute))
	cases := []struct {
		name    string
		pods    []*corev1.Pod
		missing string // "" = proven
		ignored string // "" = none ignored
		// read is how the validator DaemonSet read: "" as it is, "gone"
		// (it does not exist), "denied" (the read failed).
		read string
	}{
		{name: "the DaemonSet's Pod proves the node", pods: []*corev1.Pod{owned}},
		{name: "a Pending Pod with no owner does not un-prove it", pods: []*corev1.Pod{owned, forged(nil)},
			ignored: "Pod gpu-operator/nvidia-operator-validator-forged carries the validator label (app=nvidia-operator-validator) but is not controlled by DaemonSet gpu-operator/nvidia-operator-validator (it has no controller): ignored"},
		{name: "a Ready Pod with no owner does not prove it", pods: []*corev1.Pod{forged(func(p *corev1.Pod) {
			p.Status.Phase, p.Status.Conditions[0].Status = corev1.PodRunning, corev1.ConditionTrue
		})}, missing: "no validator Pod (namespace gpu-operator, app=nvidia-operator-validator) on the node", ignored: "it has no controller"},
		{name: "controlled by another DaemonSet", pods: []*corev1.Pod{owned, forged(func(p *corev1.Pod) {
			ref := validatorDaemonSet
			ref.Name = "my-validator"
			p.OwnerReferences = []metav1.OwnerReference{ref}
		})}, ignored: "it has controller DaemonSet my-validator"},
		{name: "controlled by a ReplicaSet of that name", pods: []*corev1.Pod{owned, forged(func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "nvidia-operator-validator", UID: "u", Controller: new(true)}}
		})}, ignored: "it has controller ReplicaSet nvidia-operator-validator"},
		// Issue 25: the owner reference names the DaemonSet by kind and name,
		// which anyone who may create Pods in the namespace can write; only
		// the UID of the DaemonSet the gate read makes it its own.
		{name: "a Ready Pod naming the DaemonSet with another UID does not prove it", pods: []*corev1.Pod{forged(func(p *corev1.Pod) {
			ref := validatorDaemonSet
			ref.UID = "00000000-0000-4000-8000-000000000bad"
			p.OwnerReferences, p.Status.Phase, p.Status.Conditions[0].Status = []metav1.OwnerReference{ref}, corev1.PodRunning, corev1.ConditionTrue
		})}, missing: "no validator Pod (namespace gpu-operator, app=nvidia-operator-validator) on the node",
			ignored: "it has controller DaemonSet nvidia-operator-validator with UID 00000000-0000-4000-8000-000000000bad, not the DaemonSet's " + string(validatorDaemonSet.UID)},
		{name: "a Pending Pod naming the DaemonSet with another UID does not un-prove it", pods: []*corev1.Pod{owned, forged(func(p *corev1.Pod) {
			ref := validatorDaemonSet
			ref.UID = "00000000-0000-4000-8000-000000000bad"
			p.OwnerReferences = []metav1.OwnerReference{ref}
		})}, ignored: "with UID 00000000-0000-4000-8000-000000000bad"},
		{name: "the validator DaemonSet does not exist: no Pod proves the node", pods: []*corev1.Pod{owned}, read: "gone",
			missing: "no validator Pod counts: the validator DaemonSet gpu-operator/nvidia-operator-validator does not exist"},
		{name: "the validator DaemonSet cannot be read: no Pod proves the node", pods: []*corev1.Pod{owned}, read: "denied",
			missing: "no validator Pod counts: cannot read the validator DaemonSet gpu-operator/nvidia-operator-validator, whose UID says which validator Pods are its own: daemonsets.apps is forbidden"},
		// Issue 25: the DaemonSet's UID is carried by a Pod whose image was
		// changed in place (anyone who may update Pods in the namespace),
		// by an orphan the DaemonSet controller adopted and by a Pod
		// created with the UID copied; only the template's images, by
		// container name, make it the DaemonSet's validator.
		{name: "its own Pod with the image changed in place does not prove it", pods: []*corev1.Pod{withImages(owned, "nvidia-operator-validator", "busybox:always-ready")},
			missing: "no validator Pod (namespace gpu-operator, app=nvidia-operator-validator) on the node",
			ignored: "Pod gpu-operator/nvidia-operator-validator-gpu-v100-03 carries the validator label (app=nvidia-operator-validator) and DaemonSet gpu-operator/nvidia-operator-validator's UID as its controller, but its container nvidia-operator-validator runs image busybox:always-ready, not the DaemonSet's Pod template's nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.3.3 nor a release of nvcr.io/nvidia/cloud-native/gpu-operator-validator: ignored"},
		{name: "its own Pod still at the previous validator release (the operator's rollout of the DaemonSet under way) proves it", pods: []*corev1.Pod{withImages(owned, "nvidia-operator-validator", "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.3.1")}},
		{name: "the validator repository on another registry is not a release of it", pods: []*corev1.Pod{withImages(owned, "nvidia-operator-validator", "ghcr.io/attacker/cloud-native/gpu-operator-validator:v26.3.3")},
			missing: "no validator Pod (namespace gpu-operator", ignored: "runs image ghcr.io/attacker/cloud-native/gpu-operator-validator:v26.3.3, not"},
		{name: "an init container's image changed does not prove it", pods: []*corev1.Pod{withImages(owned, "driver-validation", "busybox")},
			missing: "no validator Pod (namespace gpu-operator", ignored: "its container driver-validation runs image busybox, not"},
		{name: "a Pod with the UID and a container the template lacks does not prove it", pods: []*corev1.Pod{func() *corev1.Pod {
			p := owned.DeepCopy()
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "sidecar", Image: "busybox"})
			return p
		}()}, missing: "no validator Pod (namespace gpu-operator", ignored: "its container sidecar is not in the DaemonSet's Pod template"},
		{name: "a Pod with the UID lacking a template container does not prove it", pods: []*corev1.Pod{func() *corev1.Pod {
			p := owned.DeepCopy()
			p.Spec.InitContainers = nil
			return p
		}()}, missing: "no validator Pod (namespace gpu-operator", ignored: "it lacks the DaemonSet's Pod template's container driver-validation"},
		{name: "its own Pod with the template's images, init containers kept among the containers (as the cache keeps them), proves it", pods: []*corev1.Pod{func() *corev1.Pod {
			p := owned.DeepCopy()
			p.Spec.Containers, p.Spec.InitContainers = append(p.Spec.InitContainers, p.Spec.Containers...), nil
			return p
		}()}},
		{name: "the DaemonSet named but not as controller", pods: []*corev1.Pod{owned, forged(func(p *corev1.Pod) {
			ref := validatorDaemonSet
			ref.Controller = nil
			p.OwnerReferences = []metav1.OwnerReference{ref}
		})}, ignored: "it has no controller"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			n := v100(t, "gpu-v100-03", tupleTarget)
			s.cluster.Nodes = append(s.cluster.Nodes, n)
			prove(s, "gpu-v100-03")
			s.cluster.Proof.Validators = nil
			facts := s.cfg.ProofFactsOf(tc.pods, nil)
			ds := validatorDaemonSetRead()
			switch tc.read {
			case "gone":
				s.cfg.OwnValidators(&facts, nil, nil)
			case "denied":
				s.cfg.OwnValidators(&facts, nil, errors.New("daemonsets.apps is forbidden"))
			default:
				s.cfg.OwnValidators(&facts, ds, nil)
			}
			s.cluster.Proof.Validators, s.cluster.Proof.Unowned = facts.Validators, facts.Unowned
			s.cluster.Proof.ValidatorDaemonSet, s.cluster.Proof.ValidatorDaemonSetUnreadable = facts.ValidatorDaemonSet, facts.ValidatorDaemonSetUnreadable
			p := s.cfg.Prove(s.cluster, n, testNow)
			if tc.missing == "" {
				assert.True(t, p.Proven(), "%v", p.Missing)
			} else {
				require.False(t, p.Proven())
				assert.Contains(t, p.Missing[0], tc.missing)
			}
			if tc.ignored == "" {
				assert.Empty(t, p.Ignored)
				return
			}
			require.Len(t, p.Ignored, 1)
			assert.Contains(t, p.Ignored[0], tc.ignored)
			var d Decision
			d.noteProof(s.cfg, p)
			assert.Contains(t, d.Warnings, "gpu-upgrade-gate: node gpu-v100-03: "+p.Ignored[0])
		})
	}
}

// withImages is p with container name running image.
func withImages(p *corev1.Pod, name, image string) *corev1.Pod {
	p = p.DeepCopy()
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == name {
				cs[i].Image = image
			}
		}
	}
	return p
}

// TestUnreadableValidatorDaemonSet: with the validator DaemonSet
// unreadable no Pod counts as a validator (issue 25): OwnValidators keeps
// none, and a proof given facts that still hold some (built another way)
// neither counts them nor dates the node by them.
func TestUnreadableValidatorDaemonSet(t *testing.T) {
	s := safeScenario(t)
	n := v100(t, "gpu-v100-03", tupleTarget)
	s.cluster.Nodes = append(s.cluster.Nodes, n)
	prove(s, "gpu-v100-03")
	late := validatorPod("gpu-v100-03", corev1.ConditionTrue, testNow.Add(-time.Minute))
	facts := s.cfg.ProofFactsOf([]*corev1.Pod{late}, nil)
	s.cfg.OwnValidators(&facts, nil, errors.New("daemonsets.apps is forbidden"))
	assert.Empty(t, facts.Validators, "no Pod is known to be the DaemonSet's")
	assert.Empty(t, facts.Unowned, "nor named as forged: its owner could not be checked")

	s.cluster.Proof.Validators = []*corev1.Pod{late}
	s.cluster.Proof.ValidatorDaemonSetUnreadable = facts.ValidatorDaemonSetUnreadable
	p := s.cfg.Prove(s.cluster, n, testNow)
	require.False(t, p.Proven())
	assert.Contains(t, p.Missing, "no validator Pod counts: "+facts.ValidatorDaemonSetUnreadable)
	assert.True(t, p.ReachedAt.Before(testNow.Add(-time.Minute)), "dated by the SUC Job, not the uncounted validator: %s", p.ReachedAt)

	s.cluster.Proof.ValidatorDaemonSetUnreadable = ""
	assert.Equal(t, testNow.Add(-time.Minute), s.cfg.Prove(s.cluster, n, testNow).ReachedAt, "a validator that counts dates the node")
}

// upgraded: gpu-v100-02 already runs the target tuple (SUC applied the
// canary Plan there); the Plan under review moves gpu-v100-01.
func upgraded(s *scenario) {
	setTuple(s.node("gpu-v100-02"), tupleTarget)
}

func TestPreviousNodeUnproven(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*scenario)
		want   []Code
		msg    string
	}{
		{name: "the previous node is proven: allowed", mutate: func(s *scenario) { upgraded(s); prove(s, "gpu-v100-02") }},
		{name: "no node at the destination yet: allowed", mutate: func(*scenario) {}},
		{name: "previous node without an allocation check", mutate: func(s *scenario) {
			upgraded(s)
			prove(s, "gpu-v100-02")
			s.cluster.Proof.AllocationChecks = nil
		}, want: []Code{CodePreviousNodeUnproven}, msg: "node gpu-v100-02 already runs the destination tuple of record v100-r580-canary-1 but is not proven: no allocation check"},
		{name: "previous node lost GPUs", mutate: func(s *scenario) {
			upgraded(s)
			prove(s, "gpu-v100-02")
			s.node("gpu-v100-02").Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("6")
		}, want: []Code{CodePreviousNodeUnproven}, msg: "allocatable nvidia.com/gpu 6 of 8"},
		{name: "previous node soaking", mutate: func(s *scenario) {
			upgraded(s)
			prove(s, "gpu-v100-02")
			s.req.Now = reachedAt.Add(12 * time.Minute)
		}, want: []Code{CodePreviousNodeUnproven}, msg: "soak 11m0s of 30m0s"},
		{name: "the requirement switched off: allowed, and the decision says so", mutate: func(s *scenario) {
			upgraded(s)
			prove(s, "gpu-v100-02")
			s.cluster.Proof.AllocationChecks = nil
			s.cfg.Proof.Off = []ProofRequirement{ProofAllocation}
		}},
		{name: "another hardware's node at its target does not count", mutate: func(s *scenario) {
			setTuple(s.node("gpu-h200-01"), tupleTarget)
		}},
		{name: "a rollback Plan is not held by nodes on the source", mutate: rollbackScenario},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			tc.mutate(s)
			d := s.decide()
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			assert.Contains(t, d.Message(), tc.msg)
			if tc.want == nil {
				return
			}
			assert.Equal(t, "gpu-v100-02=unproven", d.AuditAnnotations()[AuditProofs])
		})
	}
	t.Run("audit annotations name the proofs relied on and what was off", func(t *testing.T) {
		s := safeScenario(t)
		upgraded(s)
		prove(s, "gpu-v100-02")
		s.cfg.Proof.Off = []ProofRequirement{ProofSoak}
		d := s.decide()
		a := d.AuditAnnotations()
		assert.Equal(t, "gpu-v100-02=proven", a[AuditProofs])
		assert.Equal(t, "soak", a[AuditProofOff])
	})
	t.Run("the per-node step is held the same way", func(t *testing.T) {
		s := safeScenario(t)
		upgraded(s)
		r := PrepareNodeStep(s.cfg, s.cluster, s.req, "gpu-v100-01")
		d := r.Decide(nil, nil)
		assert.Equal(t, []Code{CodePreviousNodeUnproven}, d.Codes(), d.Message())
		prove(s, "gpu-v100-02")
		d = PrepareNodeStep(s.cfg, s.cluster, s.req, "gpu-v100-01").Decide(nil, nil)
		assert.True(t, d.Allowed, d.Message())
	})
}

func TestCanaryNotProvenNeedsProof(t *testing.T) {
	s := safeScenario(t)
	waveScenario(s)
	s.cluster.Proof = ProofFacts{}
	d := s.decide()
	assert.Contains(t, d.Codes(), CodeCanaryNotProven, d.Message())
	prove(s, "gpu-v100-03")
	d = s.decide()
	assert.True(t, d.Allowed, d.Message())
}

// completionScenario: gpu-v100-01 finished the canary Plan's Job and runs
// the target tuple, still cordoned; the update uncordons it and marks it
// done, as SUC's completion write does.
func completionScenario(t *testing.T) (*scenario, *corev1.Node, *corev1.Node) {
	s := safeScenario(t)
	s.cluster.Plans = []*upgradev1.Plan{s.req.Plan}
	old := s.node("gpu-v100-01")
	setTuple(old, tupleTarget)
	old.Spec.Unschedulable = true
	// A cordon handed over to the rollout: SUC's uncordon of a cordon it
	// did not make is TestCordonUncordon's.
	old.Annotations = map[string]string{AnnotationCordonHandover: "dave"}
	n := old.DeepCopy()
	n.Spec.Unschedulable = false
	n.Labels[upgradev1.LabelPlanName(s.req.Plan.Name)] = "0123abcd"
	return s, old, n
}

func TestUncordonBeforeProof(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(s *scenario, old, n *corev1.Node)
		want   []Code
		msg    string
		// suc, when set, is SUC's answer where it differs from a person's.
		suc []Code
	}{
		{name: "SUC's completion write without proof", want: []Code{CodeUncordonBeforeProof},
			msg: "node gpu-v100-01 runs the destination tuple of Plan system-upgrade/gpu-v100-canary (record v100-r580-canary-1) but is not proven, so it may not uncordon yet: no validator Pod"},
		{name: "proven: allowed", mutate: func(s *scenario, _, _ *corev1.Node) { prove(s, "gpu-v100-01") }},
		{name: "marking done alone (no cordon) without proof", mutate: func(_ *scenario, old, n *corev1.Node) {
			old.Spec.Unschedulable, n.Spec.Unschedulable = false, false
		}, want: []Code{CodeUncordonBeforeProof}, msg: "may not mark done (plan.upgrade.cattle.io/gpu-v100-canary)"},
		{name: "uncordon alone (SUC during postCompleteDelay) without proof", mutate: func(_ *scenario, old, n *corev1.Node) {
			n.Labels = old.Labels
		}, want: []Code{CodeUncordonBeforeProof}},
		{name: "a person's change of a node not at the Plan's destination: allowed (SUC's completion of it is not: TestCompletionShortOfDestination)", mutate: func(_ *scenario, old, n *corev1.Node) {
			setTuple(old, tupleSource)
			setTuple(n, tupleSource)
		}, suc: []Code{CodeUncordonBeforeProof}},
		{name: "opting out with disabled is not a completion", mutate: func(_ *scenario, old, n *corev1.Node) {
			n.Spec.Unschedulable = true
			n.Labels[upgradev1.LabelPlanName("gpu-v100-canary")] = "disabled"
		}},
		{name: "a cordon is not judged", mutate: func(_ *scenario, old, n *corev1.Node) {
			old.Spec.Unschedulable = false
			n.Spec.Unschedulable = true
			n.Labels = old.Labels
		}},
		{name: "a CPU node: allowed", mutate: func(s *scenario, old, n *corev1.Node) {
			c := cpuNode("gpu-v100-01")
			*old, *n = *c.DeepCopy(), *c.DeepCopy()
			old.Spec.Unschedulable = true
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, old, n := completionScenario(t)
			if tc.mutate != nil {
				tc.mutate(s, old, n)
			}
			req := NodeRequest{Node: n, OldNode: old, User: UserInfo{Name: "system:serviceaccount:system-upgrade:system-upgrade"}, Now: testNow}
			d := DecideCompletion(s.cfg, s.cluster, req)
			if tc.suc != nil {
				assert.ElementsMatch(t, tc.suc, d.Codes(), d.Message())
			} else {
				assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
				assert.Contains(t, d.Message(), tc.msg)
			}
			// A person's write of the same change is judged the same way by
			// the Node review, and a person's hash in SUC's plan label is
			// also SUC's fact written by someone else (rule_ownedfact.go).
			req.User = s.req.User
			pd := PrepareNode(s.cfg, s.cluster, req).Decide(nil, nil)
			want := tc.want
			key := upgradev1.LabelPlanName(s.req.Plan.Name)
			if v := n.Labels[key]; v != old.Labels[key] && v != upgradev1.LabelPlanValueDisabled && (s.cfg.IsGPUNode(n) || s.cfg.IsGPUNode(old)) {
				want = append(slices.Clone(want), CodeOwnedFactWritten)
			}
			assert.ElementsMatch(t, want, pd.Codes(), pd.Message())
		})
	}
}

// TestPreviousNodeUnprovenOnTheDriverPath: a node the operator already
// moved to the new driver is proven before the change reaches the others.
func TestPreviousNodeUnprovenOnTheDriverPath(t *testing.T) {
	s := safeDriverScenario(t)
	s.node("gpu-v100-02").Labels[labelDriverFull] = "580.130.00"
	d := s.decide()
	assert.Equal(t, []Code{CodePreviousNodeUnproven}, d.Codes(), d.Message())
	assert.Contains(t, d.Message(), "node gpu-v100-02 already runs the destination tuple of record v100-driver-580-130")
	prove(s.scenario, "gpu-v100-02")
	d = s.decide()
	assert.True(t, d.Allowed, d.Message())
	assert.Equal(t, "gpu-v100-02=proven", d.AuditAnnotations()[AuditProofs])
}

// TestProofFactsTakeSUCsJobsOnly: a Job counts as SUC's only with both
// labels SUC writes; the Job webhook reviews every write of one with the
// plan label, so one with the node label alone (written unreviewed) is
// not SUC's upgrade of that node.
func TestProofFactsTakeSUCsJobsOnly(t *testing.T) {
	suc := upgradeJob("gpu-v100-01", batchv1.JobComplete, testNow)
	nodeOnly := upgradeJob("gpu-v100-02", batchv1.JobComplete, testNow)
	delete(nodeOnly.Labels, upgradev1.LabelPlan)
	facts := DefaultConfig().ProofFactsOf(nil, []*batchv1.Job{suc, nodeOnly})
	assert.Equal(t, []*batchv1.Job{suc}, facts.UpgradeJobs)
}
