package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/dra"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/snapshot"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/precondition"
)

// draState is a DRA GPU cluster as recovery-plan reads it: two GPU nodes,
// the NVIDIA DRA driver's kubelet-plugin DaemonSet (1 of 2 ready), its Pod
// on gpu-dra-01 unready for 15 minutes and that node publishing no device,
// gpu-dra-02's Pod Ready with 8 devices. Every seed condition holds for
// plugin-a; each variant breaks one. The objects are written as the
// DaemonSet controller, the kubelet and the DRA driver would write them.
type draState struct {
	nodes  []*corev1.Node
	ds     *appsv1.DaemonSet
	pods   []*corev1.Pod
	slices []*resourcev1.ResourceSlice
}

var draDriver = dra.Driver{Name: "gpu.nvidia.com", Namespace: "nvidia-dra-driver-gpu", DaemonSet: "nvidia-dra-driver-gpu-kubelet-plugin"}

func newDRAState(now time.Time, dsUID string) *draState {
	s := &draState{}
	for _, n := range []string{"gpu-dra-01", "gpu-dra-02"} {
		s.nodes = append(s.nodes, &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: n},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now.Add(-24 * time.Hour)), Reason: "KubeletReady"}}}})
	}
	labels := map[string]string{"app.kubernetes.io/name": "nvidia-dra-driver-gpu", "app.kubernetes.io/component": "kubelet-plugin"}
	s.ds = &appsv1.DaemonSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: draDriver.Namespace, Name: draDriver.DaemonSet, UID: types.UID(dsUID)},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "plugin", Image: "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.0"}}}}},
		Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, CurrentNumberScheduled: 2, NumberReady: 1, NumberAvailable: 1}}
	for _, p := range []struct {
		name, node string
		ready      corev1.ConditionStatus
		since      time.Time
	}{{"plugin-a", "gpu-dra-01", corev1.ConditionFalse, now.Add(-15 * time.Minute)}, {"plugin-b", "gpu-dra-02", corev1.ConditionTrue, now.Add(-2 * time.Hour)}} {
		yes := true
		s.pods = append(s.pods, &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Namespace: draDriver.Namespace, Name: p.name, Labels: labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: s.ds.Name, UID: s.ds.UID, Controller: &yes}}},
			Spec: corev1.PodSpec{NodeName: p.node, Containers: s.ds.Spec.Template.Spec.Containers},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: p.ready, LastTransitionTime: metav1.NewTime(p.since)}}}})
	}
	s.slices = append(s.slices, draSlice("gpu-dra-02", 8))
	return s
}

func draSlice(node string, devices int) *resourcev1.ResourceSlice {
	rs := &resourcev1.ResourceSlice{TypeMeta: metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu.nvidia.com"},
		Spec: resourcev1.ResourceSliceSpec{Driver: draDriver.Name, NodeName: &node,
			Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}}}
	for i := range devices {
		rs.Spec.Devices = append(rs.Spec.Devices, resourcev1.Device{Name: "gpu-" + string(rune('0'+i))})
	}
	return rs
}

// draVariants: the state as it is (a candidate), then one per seed
// condition missing, with the condition that fails.
var draVariants = []struct {
	name   string
	failed string // "" : plugin-a is the candidate
	mutate func(s *draState, now time.Time)
}{
	{"all four conditions hold", "", func(*draState, time.Time) {}},
	{"DaemonSet not degraded", dra.CondDriverDegraded, func(s *draState, _ time.Time) {
		s.ds.Status.NumberReady, s.ds.Status.NumberAvailable = 2, 2
	}},
	{"Pod unready for only 9 minutes", dra.CondStalePod, func(s *draState, now time.Time) {
		s.pods[0].Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-9 * time.Minute))
	}},
	{"node not Ready", dra.CondNodeReady, func(s *draState, _ time.Time) {
		s.nodes[0].Status.Conditions[0].Status, s.nodes[0].Status.Conditions[0].Reason = corev1.ConditionUnknown, "NodeStatusUnknown"
	}},
	{"node still publishes a device", dra.CondInventoryEmpty, func(s *draState, _ time.Time) {
		s.slices = append(s.slices, draSlice("gpu-dra-01", 1))
	}},
}

func (s *draState) objects() []client.Object {
	var out []client.Object
	for _, n := range s.nodes {
		out = append(out, n)
	}
	out = append(out, s.ds)
	for _, p := range s.pods {
		out = append(out, p)
	}
	for _, rs := range s.slices {
		out = append(out, rs)
	}
	return out
}

// TestRecoveryPlanOnSnapshot: recovery-plan on a List saved as
// snapshot.RecoveryRecipe prints the candidate only when all four seed
// conditions hold, and names the failing one otherwise.
func TestRecoveryPlanOnSnapshot(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, v := range draVariants {
		t.Run(v.name, func(t *testing.T) {
			s := newDRAState(now, "8d2a-uid")
			v.mutate(s, now)
			list := map[string]any{"apiVersion": "v1", "kind": "List", "items": s.objects()}
			data, err := json.Marshal(list)
			require.NoError(t, err)
			file := filepath.Join(t.TempDir(), "dra.json")
			require.NoError(t, os.WriteFile(file, data, 0o600))
			r := runCLI("recovery-plan", "--now", now.Format(time.RFC3339), "--cluster", file)
			requireRecoveryOutcome(t, v.failed, draDriver.Namespace, "gpu-dra-01", r)
		})
	}
	t.Run("a bad bound is refused, not replaced", func(t *testing.T) {
		r := runCLI("recovery-plan", "--cluster", "x.json", "--min-unready-age", "0s")
		assert.Equal(t, exitUsage, r.code)
		assert.Contains(t, r.stderr, "--min-unready-age 0s is too short: at least 1m")
	})
}

// requireRecoveryOutcome holds a recovery-plan run to the variant.
func requireRecoveryOutcome(t *testing.T, failed, namespace, node string, r result) {
	t.Helper()
	if failed == "" {
		assert.Equal(t, exitAllowed, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		assert.Contains(t, r.stdout, "candidate: "+namespace+"/plugin-a on node "+node)
		assert.Contains(t, r.stdout, "Execute separately after review: kubectl -n "+namespace+" delete pod plugin-a --wait=false")
		for _, c := range []string{dra.CondDriverDegraded, dra.CondStalePod, dra.CondNodeReady, dra.CondInventoryEmpty} {
			assert.Contains(t, r.stdout, "[PASS] "+c+":")
		}
		return
	}
	assert.Equal(t, exitDenied, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "[FAIL] "+failed+":")
	assert.Contains(t, r.stdout, "no safe stale-driver recovery candidate")
	assert.NotContains(t, r.stdout, "delete pod")
}

// TestRecoveryRecipeIsOneCommand: recovery-plan's help and docs/cli.md give
// snapshot.RecoveryRecipe as it is, and it saves every kind the planner
// reads (loader.DRAReadsOf and the Nodes).
func TestRecoveryRecipeIsOneCommand(t *testing.T) {
	kinds := strings.Split(strings.Fields(snapshot.RecoveryRecipe)[2], ",")
	for _, kind := range []string{"nodes", "pods", "daemonsets", "resourceslices.resource.k8s.io"} {
		assert.Contains(t, kinds, kind)
	}
	doc, err := os.ReadFile("../../docs/cli.md")
	require.NoError(t, err)
	assert.Contains(t, string(doc), snapshot.RecoveryRecipe)
	r := runCLI("recovery-plan", "--help")
	require.Equal(t, exitAllowed, r.code)
	assert.Contains(t, r.stdout, snapshot.RecoveryRecipe)
}

// TestInventoryShowsDRANodes: with a DRA driver configured, inventory
// shows each GPU node's devices in the driver's slices and its
// kubelet-plugin Pod (issue 25 item 3).
func TestInventoryShowsDRANodes(t *testing.T) {
	data, err := os.ReadFile(ex + "cluster/snapshot.yaml")
	require.NoError(t, err)
	js, err := sigsyaml.YAMLToJSON(data)
	require.NoError(t, err)
	var list map[string]any
	require.NoError(t, json.Unmarshal(js, &list))
	s := newDRAState(time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC), "8d2a-uid")
	s.pods[1].Spec.NodeName = "gpu-h200-01"
	s.slices[0] = draSlice("gpu-h200-01", 8)
	for _, o := range []client.Object{s.ds, s.pods[1], s.slices[0]} {
		raw, err := json.Marshal(o)
		require.NoError(t, err)
		var item any
		require.NoError(t, json.Unmarshal(raw, &item))
		list["items"] = append(list["items"].([]any), item)
	}
	out, err := json.Marshal(list)
	require.NoError(t, err)
	dir := t.TempDir()
	cluster, config := filepath.Join(dir, "cluster.json"), filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cluster, out, 0o600))
	require.NoError(t, os.WriteFile(config, []byte("draDrivers:\n- {name: gpu.nvidia.com, namespace: nvidia-dra-driver-gpu, daemonSet: nvidia-dra-driver-gpu-kubelet-plugin}\n"), 0o600))

	r := runCLI("inventory", now, "--cluster", cluster, "--config", config)
	require.Equal(t, exitAllowed, r.code, r.stderr)
	var h200 string
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, "gpu-h200-01 ") {
			h200 = line
		}
	}
	assert.True(t, strings.HasSuffix(h200, "gpu.nvidia.com: 8 devices in 1 slices, plugin Ready"), h200)
	assert.Contains(t, r.stdout, "\ngpu-v100-01 ", "nodes without DRA are listed as before")

	r = runCLI("inventory", now, "--cluster", cluster)
	require.Equal(t, exitAllowed, r.code, r.stderr)
	assert.NotContains(t, r.stdout, "gpu.nvidia.com", "no driver configured: nothing read")
}

// TestInventoryShowsPreconditions: inventory lists each declared
// precondition with its state: a CEL one evaluated over what it lists
// live, one it cannot read from a file said so, an alerts one pointed at
// the webhook's metric (issue 27 item 3).
func TestInventoryShowsPreconditions(t *testing.T) {
	cfg, err := gate.LoadConfig([]byte(`preconditions:
- {name: ceph-health, kind: cel, cel: {group: ceph.rook.io, version: v1, resource: cephclusters, namespace: rook-ceph, expression: "size(objects) > 0 && objects.all(o, o.status.ceph.health == 'HEALTH_OK')"}}
- {name: gpu-alerts, kind: alerts, alerts: {url: "http://alertmanager.monitoring:9093/api/v2/alerts", alertNames: [GPUXidErrors]}}
`))
	require.NoError(t, err)
	prog, err := precondition.Compile(cfg.Preconditions[0].CEL.Expression)
	require.NoError(t, err)
	warn, _ := precondition.ReadCEL(cfg.Preconditions[0], prog, []any{map[string]any{"status": map[string]any{"ceph": map[string]any{"health": "HEALTH_WARN"}}}}, nil, precondition.RuntimeBudget)
	at := time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC)
	assert.Equal(t, []string{
		"PRECONDITION ceph-health (cel over cephclusters.ceph.rook.io/v1 in rook-ceph: size(objects) > 0 && objects.all(o, o.status.ceph.health == 'HEALTH_OK')): fails: the expression returned false over 1 object(s)",
		"PRECONDITION gpu-alerts (alerts at http://alertmanager.monitoring:9093/api/v2/alerts: alertname in [GPUXidErrors]): not read: alert sources are polled by the webhook only: see its metric gpu_upgrade_gate_precondition_state",
	}, preconditionLines(cfg, []*precondition.Reading{&warn, nil}, at))
	assert.Contains(t, preconditionLines(cfg, nil, at)[0], "ceph-health (cel over cephclusters.ceph.rook.io/v1 in rook-ceph: size(objects) > 0 && objects.all(o, o.status.ceph.health == 'HEALTH_OK')): not read: a file holds no watched objects")
}

// TestOperatorRolloutLine: inventory's line for the built-in
// operator-rollout precondition says holds, fails (with what is not
// finished) or not read.
func TestOperatorRolloutLine(t *testing.T) {
	cfg := gate.DefaultConfig()
	done := &gate.OperatorRollout{Deployment: "gpu-operator/gpu-operator", Generation: 2, ObservedGeneration: 2, Desired: 1, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	moving := *done
	moving.Replicas = 2
	for _, tc := range []struct {
		name string
		op   *gate.OperatorRollout
		want string
	}{
		{"rolled out", done, ": holds"},
		{"an old replica left", &moving, ": fails: Deployment gpu-operator/gpu-operator: 1 old replica(s) pending termination"},
		{"a file", nil, ": not read: inventory reads it with --kubeconfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := operatorRolloutLine(cfg, tc.op)
			assert.True(t, strings.HasPrefix(line, "PRECONDITION operator-rollout (builtin: Deployment "), line)
			assert.Contains(t, line, tc.want)
		})
	}
}
