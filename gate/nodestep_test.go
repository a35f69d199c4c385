package gate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// stepScenario is SUC about to start the canary Plan's Job on one node.
type stepScenario struct {
	*scenario
	node *corev1.Node
}

func safeStep(t *testing.T) *stepScenario {
	s := safeScenario(t)
	s.req.User = UserInfo{Name: "system:serviceaccount:system-upgrade:system-upgrade", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:system-upgrade"}}
	return &stepScenario{scenario: s, node: s.node("gpu-v100-01")}
}

func (s *stepScenario) decide(holdersErr error) Decision {
	st := PrepareSUCStep(s.cfg, s.cluster, SUCStepRequest{Object: "Job system-upgrade/apply-gpu-v100-canary-on-" + s.node.Name, Plan: s.req.Plan, Node: s.node, User: s.req.User, Now: s.req.Now})
	return st.Decide(s.holders, holdersErr)
}

func TestNodeStepRules(t *testing.T) {
	holder := []Holder{{Namespace: "ml", Pod: "train-0", Owner: "Job/train", Resources: []string{"nvidia.com/gpu"}}}
	cases := []struct {
		name      string
		mutate    func(*stepScenario)
		holderErr error
		want      []Code // nil: allowed
	}{
		{name: "safe node of a safe Plan starts", mutate: func(*stepScenario) {}},
		{name: "GPUHolders: a holder scheduled after the Plan was admitted", mutate: func(s *stepScenario) { s.holders["gpu-v100-01"] = holder }, want: []Code{CodeGPUHolders}},
		{name: "holders on another node do not stop this one", mutate: func(s *stepScenario) { s.holders["gpu-v100-02"] = holder }},
		{name: "FactsMissing: holders cannot be listed", holderErr: errors.New("connection refused"), want: []Code{CodeFactsMissing}},
		{name: "node at the destination tuple (no plan label) still waits for its holders", mutate: func(s *stepScenario) {
			setTuple(s.node, tupleTarget)
			s.holders["gpu-v100-01"] = holder
		}, want: []Code{CodeGPUHolders}},
		{name: "node at the destination tuple without holders starts", mutate: func(s *stepScenario) { setTuple(s.node, tupleTarget) }},
		{name: "a CPU node's Job is not judged", mutate: func(s *stepScenario) {
			s.node = s.scenario.node("cpu-01")
			s.req.Plan = canaryPlan("cpu-01")
			s.req.Plan.Annotations = nil
			s.req.Plan.Spec.Concurrency = 5
		}},
		{name: "GPU node labelled into a CPU Plan after admission", mutate: func(s *stepScenario) {
			s.req.Plan = canaryPlan()
			s.req.Plan.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "batch"}}
			s.req.Plan.Annotations = nil
			s.req.Plan.Spec.Concurrency, s.req.Plan.Spec.Cordon = 10, false
			s.scenario.node("cpu-01").Labels["pool"] = "batch"
			s.node.Labels["pool"] = "batch"
		}, want: []Code{CodeMixedPlan, CodeConcurrencyNotSerial, CodeCordonRequired, CodeRecordMissing}},
		{name: "the live node counts, not the cached copy: a label the cache has not seen yet", mutate: func(s *stepScenario) {
			s.req.Plan.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "late"}}
			s.node = s.node.DeepCopy()
			s.node.Labels["pool"] = "late"
			s.holders["gpu-v100-01"] = holder
		}, want: []Code{CodeGPUHolders}},
		{name: "stripped identity: GPU capacity only, every GPU label removed", mutate: func(s *stepScenario) {
			// Every label the GPU-node definition reads (gpunode.go), GFD's
			// driver version among them.
			for k := range s.node.Labels {
				if strings.HasPrefix(k, "feature.node.kubernetes.io/pci-") || strings.HasPrefix(k, "nvidia.com/") {
					delete(s.node.Labels, k)
				}
			}
			require.False(t, s.cfg.IsGPUNode(&corev1.Node{ObjectMeta: s.node.ObjectMeta}), "the labels alone must no longer say GPU")
		}, want: []Code{CodeHardwareUnknown, CodeFactsMissing}},
		{name: "HardwareNotQualified: an H200 under the V100 record", mutate: func(s *stepScenario) {
			s.node = s.scenario.node("gpu-h200-01")
			s.req.Plan = canaryPlan("gpu-h200-01")
		}, want: []Code{CodeHardwareNotQualified}},
		{name: "MinorSkip against this node's kubelet", mutate: func(s *stepScenario) { s.node.Status.NodeInfo.KubeletVersion = "v1.34.9+rke2r1" }, want: []Code{CodeSourceMismatch, CodeMinorSkip}},
		{name: "RKE2Downgrade against this node's kubelet", mutate: func(s *stepScenario) { s.node.Status.NodeInfo.KubeletVersion = "v1.37.2+rke2r1" }, want: []Code{CodeSourceMismatch, CodeRKE2Downgrade}},
		{name: "VersionSkew: the node would pass the API server", mutate: func(s *stepScenario) { s.cluster.ServerVersion = "v1.35.3+rke2r3" }, want: []Code{CodeVersionSkew}},
		{name: "EvidenceStale: the record aged since the Plan was admitted", mutate: func(s *stepScenario) { s.req.Now = completedAt.Add(721 * time.Hour) }, want: []Code{CodeEvidenceStale}},
		{name: "RecordMissing: the record was deleted after admission", mutate: func(s *stepScenario) { delete(s.cluster.Records, "v100-r580") }, want: []Code{CodeRecordMissing}},
		{name: "FactsMissing: the node lost its driver label", mutate: func(s *stepScenario) {
			for k := range s.node.Labels {
				if strings.HasPrefix(k, "nvidia.com/cuda.driver") {
					delete(s.node.Labels, k)
				}
			}
		}, want: []Code{CodeFactsMissing}},
		{name: "exemptions never apply to the step", mutate: func(s *stepScenario) {
			s.cfg.Exemptions = append(s.cfg.Exemptions, Exemption{Name: "suc", Resources: []string{"plans", "nodes"}, Users: []string{s.req.User.Name}, Facts: ExemptibleFacts()})
			s.holders["gpu-v100-01"] = holder
		}, want: []Code{CodeGPUHolders}},
		{name: "FactsMissing: the Plan no longer selects the node SUC chose", mutate: func(s *stepScenario) { s.req.Plan = canaryPlan("gpu-v100-02") }, want: []Code{CodeFactsMissing}},
		{name: "FactsMissing: the node lost its hostname label (SUC selects by it)", mutate: func(s *stepScenario) { delete(s.node.Labels, upgradev1.LabelHostname) }, want: []Code{CodeFactsMissing}},
		{name: "FactsMissing: the node opted out after SUC chose it", mutate: func(s *stepScenario) {
			s.node.Labels[upgradev1.LabelPlanPrefix+s.req.Plan.Name] = upgradev1.LabelPlanValueDisabled
		}, want: []Code{CodeFactsMissing}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeStep(t)
			if tc.mutate != nil {
				tc.mutate(s)
			}
			d := s.decide(tc.holderErr)
			assert.ElementsMatch(t, tc.want, d.Codes(), d.Message())
			assert.Equal(t, tc.want == nil, d.Allowed)
			assert.Equal(t, []string{s.node.Name}, d.Nodes)
			assert.Empty(t, d.Exemption)
			for _, b := range d.Blockers {
				assert.Equal(t, "system-upgrade/"+s.req.Plan.Name, b.Plan, "each blocker names the Plan")
				assert.True(t, strings.HasPrefix(b.Message(), "Plan system-upgrade/"+s.req.Plan.Name+": ["+string(b.Code)+"] "), b.Message())
			}
			if !d.Allowed {
				assert.True(t, strings.HasPrefix(d.Message(), "Job system-upgrade/apply-gpu-v100-canary-on-"+s.node.Name+" is denied by gpu-upgrade-gate"), d.Message())
			}
		})
	}
}

// A device plugin's resource in capacity makes a GPU node, whatever labels
// are left (the kubelet reports it; the caches strip capacity, the per-node
// step reads the Node live).
func TestGPUCapacityMakesAGPUNode(t *testing.T) {
	cfg := DefaultConfig()
	n := cpuNode("cpu-01")
	n.Status.Capacity = corev1.ResourceList{"cpu": resource.MustParse("80")}
	assert.False(t, cfg.IsGPUNode(n))
	n.Status.Capacity["nvidia.com/gpu"] = resource.MustParse("8")
	assert.True(t, cfg.IsGPUNode(n))
	assert.True(t, cfg.FactsOf(n).GPU)
}

func TestJobStarts(t *testing.T) {
	job := func(parallelism *int32, suspend *bool) *batchv1.Job {
		return &batchv1.Job{Spec: batchv1.JobSpec{Parallelism: parallelism, Suspend: suspend}}
	}
	zero, one, two := ptr(int32(0)), ptr(int32(1)), ptr(int32(2))
	yes, no := ptr(true), ptr(false)
	cases := []struct {
		name     string
		old, job *batchv1.Job
		want     bool
	}{
		{"SUC creates its Job paused", nil, job(zero, nil), false},
		{"a Job created running (node already in status.applying)", nil, job(one, nil), true},
		{"a Job created with the default parallelism", nil, job(nil, nil), true},
		{"a Job created suspended", nil, job(one, yes), false},
		{"SUC raises parallelism 0 -> 1", job(zero, nil), job(one, nil), true},
		{"parallelism 0 -> 2", job(zero, nil), job(two, nil), true},
		{"resume: suspend true -> false", job(one, yes), job(one, no), true},
		{"a running Job's labels change", job(one, nil), job(one, nil), false},
		{"a running Job's parallelism 1 -> 2 (already started)", job(one, nil), job(two, nil), false},
		{"pausing: 1 -> 0", job(one, nil), job(zero, nil), false},
		{"a paused Job stays paused", job(zero, nil), job(zero, nil), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, JobStarts(tc.old, tc.job))
		})
	}
}

func TestStepFactsMissing(t *testing.T) {
	path := field.NewPath("metadata", "labels").Key(upgradev1.LabelNode)
	d := StepFactsMissing("Job system-upgrade/apply-x", "gpu-v100-01", "Node gpu-v100-01", path, errors.New(`nodes "gpu-v100-01" not found`))
	assert.False(t, d.Allowed)
	assert.Equal(t, []Code{CodeFactsMissing}, d.Codes())
	assert.Equal(t, []string{"gpu-v100-01"}, d.Nodes)
	assert.Contains(t, d.Message(), `[FactsMissing] Node gpu-v100-01 cannot be read (nodes "gpu-v100-01" not found); the gate never allows what it cannot check`)
	assert.Equal(t, "metadata.labels[upgrade.cattle.io/node]", d.Blockers[0].Err.Field)

	d = StepFactsMissing("Job system-upgrade/apply-x", "", "the Job's node (label upgrade.cattle.io/node)", path, errors.New("the label is absent"))
	assert.False(t, d.Allowed)
	assert.Contains(t, d.Message(), "[FactsMissing] the Job's node (label upgrade.cattle.io/node) cannot be read (the label is absent)")
	assert.Empty(t, d.Nodes)
}

func ptr[T any](v T) *T { return &v }

// TestSUCStepOnCachedVersion: when the Node read live is the very version
// the cache holds (UID and resourceVersion), the step judges the cache's
// copy without a view of the fleet with it swapped in; any other version
// (a write the cache has not seen, a node re-created under the name) is
// judged as read live. The Plan selects pool=late: the cache's copy says
// pool=early, the live one pool=late and runs a holder, so judging the
// cache's copy of another version would answer FactsMissing (not selected)
// where the live node's answer is GPUHolders.
func TestSUCStepOnCachedVersion(t *testing.T) {
	holder := []Holder{{Namespace: "ml", Pod: "train-0", Owner: "Job/train", Resources: []string{"nvidia.com/gpu"}}}
	for _, tc := range []struct {
		name     string
		live     func(n *corev1.Node) // the live read, from a copy of the cache's
		wantView bool
		want     []Code // nil: allowed
	}{
		{"the cache's own version: no view", func(n *corev1.Node) {}, false, []Code{CodeFactsMissing}},
		{"a newer version: judged as read live", func(n *corev1.Node) { n.ResourceVersion, n.Labels["pool"] = "6", "late" }, true, []Code{CodeGPUHolders}},
		{"the node re-created under its name: judged as read live", func(n *corev1.Node) { n.UID, n.Labels["pool"] = "uid-new", "late" }, true, []Code{CodeGPUHolders}},
		{"no resourceVersion: judged as read live", func(n *corev1.Node) { n.ResourceVersion, n.Labels["pool"] = "", "late" }, true, []Code{CodeGPUHolders}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := safeStep(t)
			s.req.Plan.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "late"}}
			cached := s.node
			cached.UID, cached.ResourceVersion, cached.Labels["pool"] = "uid-1", "5", "early"
			live := cached.DeepCopy()
			tc.live(live)
			s.holders["gpu-v100-01"] = holder
			st := PrepareSUCStep(s.cfg, s.cluster, SUCStepRequest{Object: "Job system-upgrade/apply-gpu-v100-canary-on-gpu-v100-01", Plan: s.req.Plan, Node: live, User: s.req.User, Now: s.req.Now})
			require.NotNil(t, st.review)
			assert.Equal(t, tc.wantView, st.review.cl.Index.IsView(), "a view of the fleet with the live node")
			d := st.Decide(s.holders, nil)
			assert.Equal(t, tc.want, d.Codes(), d.Message())
		})
	}
}
