package gate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// The fixtures model a V100 pool moving from source to target, an H200 node,
// and CPU nodes. The V100 fixture node runs the source tuple.
var (
	hwV100 = "10de:1db6/10de:124a"
	hwH200 = "10de:2335/10de:18bf"

	tupleSource = qualification.Tuple{Kernel: "6.8.0-134-generic", RKE2: "v1.35.3+rke2r3", Driver: "580.126.20", GPUOperator: "v26.3.3", DCGMExporter: "4.5.3-4.8.2-distroless"}
	tupleTarget = qualification.Tuple{Kernel: "6.8.0-135-generic", RKE2: "v1.36.1+rke2r1", Driver: "580.130.00", GPUOperator: "v26.3.3", DCGMExporter: "4.5.3-4.8.2-distroless"}

	completedAt = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	testNow     = completedAt.Add(24 * time.Hour)
)

func loadNode(t testing.TB, file string) *corev1.Node {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "nodes", file))
	require.NoError(t, err)
	var n corev1.Node
	require.NoError(t, json.Unmarshal(data, &n))
	return &n
}

// v100 is a V100 node called name running tuple t.
func v100(t testing.TB, name string, tu qualification.Tuple) *corev1.Node {
	n := loadNode(t, "node-v100.json")
	rename(n, name)
	setTuple(n, tu)
	return n
}

func h200(t testing.TB, name string) *corev1.Node {
	n := loadNode(t, "node-h200.json")
	rename(n, name)
	setTuple(n, tupleSource)
	return n
}

func cpuNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
			"feature.node.kubernetes.io/pci-1a03_2000_1a03_2000.present": "true",
		}},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KernelVersion: tupleSource.Kernel, KubeletVersion: tupleSource.RKE2},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

func rename(n *corev1.Node, name string) {
	n.Name = name
	n.Labels["kubernetes.io/hostname"] = name
}

func setTuple(n *corev1.Node, tu qualification.Tuple) {
	n.Status.NodeInfo.KernelVersion = tu.Kernel
	n.Status.NodeInfo.KubeletVersion = tu.RKE2
	n.Labels["feature.node.kubernetes.io/kernel-version.full"] = tu.Kernel
	n.Labels["nvidia.com/cuda.driver-version.full"] = tu.Driver
}

func record(mod ...func(*qualification.Record)) *qualification.Record {
	src := tupleSource
	r := &qualification.Record{
		APIVersion: qualification.APIVersionGate, Kind: qualification.Kind,
		ID: "v100-r580-canary-1", State: "qualified", ApprovedBy: "bob",
		SourceRevision: "0123456789abcdef0123456789abcdef01234567",
		Hardware:       []string{hwV100},
		Target:         tupleTarget,
		Source:         &src,
		Canary: qualification.Canary{CompletedAt: completedAt.Format(time.RFC3339),
			AllocationPassed: true, MonitoringPassed: true, RollbackPassed: true, Evidence: "change-record-42"},
	}
	for _, m := range mod {
		m(r)
	}
	return r
}

// kubeDC drops the source tuple, as records of the anchor's apiVersion have none.
func kubeDC(r *qualification.Record) {
	r.APIVersion = qualification.APIVersionKubeDC
	r.Source = nil
}

func canaryPlan(nodes ...string) *upgradev1.Plan {
	return &upgradev1.Plan{
		TypeMeta: metav1.TypeMeta{APIVersion: "upgrade.cattle.io/v1", Kind: "Plan"},
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-v100-canary", Namespace: "system-upgrade",
			Annotations: map[string]string{AnnotationQualification: "v100-r580", AnnotationRequestedBy: "alice"}},
		Spec: upgradev1.PlanSpec{
			Concurrency: 1, Cordon: true, Version: "v1.36.1+rke2r1",
			ServiceAccountName: "system-upgrade",
			NodeSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "kubernetes.io/hostname", Operator: metav1.LabelSelectorOpIn, Values: nodes}}},
			Upgrade: &upgradev1.ContainerSpec{Image: "rancher/rke2-upgrade"},
			Window:  openWindow(),
		},
	}
}

// openWindow is a maintenance window open all week, so a fixture Plan
// carries one (WindowInvalid) without its tests depending on the clock.
func openWindow() *upgradev1.TimeWindowSpec {
	return &upgradev1.TimeWindowSpec{Days: upgradev1.AllDays(), StartTime: "00:00", EndTime: "23:59:59", TimeZone: "UTC"}
}

// scenario is one review's whole input; tests mutate a safe one.
type scenario struct {
	t       testing.TB
	cfg     *Config
	cluster *Cluster
	req     PlanRequest
	holders map[string][]Holder
	// holdersErr is what listing the holders failed with (nil: it worked).
	holdersErr error
	// operatorRollout is what the adapter reads live of the GPU Operator's
	// own rollout for a driver review (nil: not read).
	operatorRollout *OperatorRollout
}

// prepareDriver prepares a driver change as the adapter does, with the
// operator's rollout it reads for it.
func (s *scenario) prepareDriver(req DriverRequest) *DriverReview {
	r := PrepareDriver(s.cfg, s.cluster, req)
	r.SetOperatorRollout(s.operatorRollout)
	return r
}

// prepareDriverStep is prepareDriver for the per-node driver step.
func (s *scenario) prepareDriverStep(st DriverStep) *DriverReview {
	r := PrepareDriverStep(s.cfg, s.cluster, st)
	r.SetOperatorRollout(s.operatorRollout)
	return r
}

func safeScenario(t testing.TB) *scenario {
	return &scenario{
		t:   t,
		cfg: DefaultConfig(),
		cluster: &Cluster{
			Nodes:             []*corev1.Node{v100(t, "gpu-v100-01", tupleSource), v100(t, "gpu-v100-02", tupleSource), h200(t, "gpu-h200-01"), cpuNode("cpu-01")},
			Records:           map[string]RecordEntry{"v100-r580": approved(record())},
			ServerVersion:     "v1.36.2+rke2r1",
			GPUOperatorImage:  "nvcr.io/nvidia/gpu-operator:v26.3.3",
			DCGMExporterImage: "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless",
		},
		operatorRollout: rolledOutOperator(),
		req:             PlanRequest{Operation: "CREATE", Plan: canaryPlan("gpu-v100-01"), User: UserInfo{Name: "alice", Groups: []string{"platform"}}, Now: testNow},
		holders:         map[string][]Holder{},
	}
}

func (s *scenario) node(name string) *corev1.Node {
	for _, n := range s.cluster.Nodes {
		if n.Name == name {
			return n
		}
	}
	panic("no node " + name)
}

// writer makes user the Plan's writer, named by its requested-by.
func (s *scenario) writer(user string) {
	s.req.User.Name = user
	s.req.Plan.Annotations[AnnotationRequestedBy] = user
}

func (s *scenario) decide() Decision {
	r := PreparePlan(s.cfg, s.cluster, s.req)
	return r.Decide(s.holders, nil)
}

// recordAuthor wrote the fixtures' records; their approvedBy, bob,
// approved them (as the record webhook attests in a cluster).
const recordAuthor = "carol"

// approved is rec as a record ConfigMap that carol wrote and rec's
// approvedBy approved, through the record webhook.
func approved(rec *qualification.Record) RecordEntry {
	cm := qualification.Attest(recordConfigMap(rec), recordAuthor, rec.ApprovedBy)
	return RecordEntry{Record: rec, Attestation: qualification.AttestationOf(cm)}
}

// written is rec in its ConfigMap as carol wrote it, not yet approved.
func written(rec *qualification.Record) *corev1.ConfigMap {
	return qualification.Attest(recordConfigMap(rec), recordAuthor, "")
}

// recordConfigMap is rec in its ConfigMap, without annotations.
func recordConfigMap(rec *qualification.Record) *corev1.ConfigMap {
	data, err := yaml.Marshal(rec)
	if err != nil {
		panic(err)
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "v100-r580", Namespace: "gpu-upgrade-gate", Labels: map[string]string{qualification.ConfigMapLabel: "true"}},
		Data: map[string]string{qualification.ConfigMapKey: string(data)}}
}
