package fleetgen

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Record names: one qualified record per hardware, "<hw>-r580", plus a stale
// one and a draft that predate the gate.
const (
	RecordStale = "v100-r570-stale"
	RecordDraft = "l40s-r595-draft"
)

// RecordName is the ConfigMap name of hardware hw's qualified record.
func RecordName(hw string) string { return hw + "-r580" }

func (g *generator) workloads() {
	labels := map[string]string{"app": "gpu-operator"}
	pod := func(name, image string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: image}}}}
	}
	op, dc := g.f.Config.GPUOperator, g.f.Config.DCGMExporter
	g.f.GPUOperator = &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: op.Name, Namespace: op.Namespace},
		Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: pod(op.Container, "nvcr.io/nvidia/gpu-operator:"+Source.GPUOperator)}}
	g.f.DCGMExporter = &appsv1.DaemonSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: dc.Name, Namespace: dc.Namespace},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: pod(dc.Container, "nvcr.io/nvidia/k8s/dcgm-exporter:"+Source.DCGMExporter)}}
	v := g.f.Config.Proof.Validator
	g.f.ValidatorDaemonSet = &appsv1.DaemonSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: v.DaemonSet, Namespace: v.Namespace, UID: ValidatorOwner.UID},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: pod("nvidia-operator-validator", "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.3.3")}}
}

// NewRecord is hardware hw's record Source -> Target, completed at completed.
func NewRecord(hw Hardware, completed time.Time) *qualification.Record {
	src := Source
	return &qualification.Record{APIVersion: qualification.APIVersionGate, Kind: qualification.Kind,
		ID: hw.Name + "-r580-canary-1", State: qualification.StateQualified, ApprovedBy: "bob",
		SourceRevision: "9f2c4e1a7b3d5c6e8f0a1b2c3d4e5f60718293a4",
		Hardware:       []string{hw.Identity}, Target: Target, Source: &src,
		Canary: qualification.Canary{CompletedAt: completed.UTC().Format(time.RFC3339), AllocationPassed: true, MonitoringPassed: true,
			RollbackPassed: true, Evidence: "https://change.example.com/CHG-" + hw.Name + "-0042"}}
}

// RecordConfigMap wraps a record in its ConfigMap in the gate's namespace.
func RecordConfigMap(name string, r *qualification.Record) *corev1.ConfigMap {
	data, err := yaml.Marshal(r)
	if err != nil {
		panic(err) // a Record always marshals
	}
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: NamespaceGate, Labels: map[string]string{qualification.ConfigMapLabel: "true"}},
		Data:       map[string]string{qualification.ConfigMapKey: string(data)}}
	// As the record webhook attested it: carol wrote it, bob approved it.
	// Written as one object (Apply) it models a record that predates the
	// webhook; through the webhook it takes two writes (testenv.WriteRecord).
	return qualification.Attest(cm, RecordAuthor, r.ApprovedBy)
}

// RecordAuthor wrote the fleet's records; their approvedBy approved them.
const RecordAuthor = "carol"

func (g *generator) records() {
	completed := g.f.Options.Now.Add(-48 * time.Hour)
	add := func(name string, r *qualification.Record) {
		g.f.Records[name] = r
		g.f.RecordConfigMaps = append(g.f.RecordConfigMaps, RecordConfigMap(name, r))
	}
	for _, hw := range Hardwares {
		add(RecordName(hw.Name), NewRecord(hw, completed))
	}
	stale := NewRecord(Hardwares[0], g.f.Options.Now.Add(-800*time.Hour))
	stale.ID = "v100-r570-canary-3"
	add(RecordStale, stale)
	draft := NewRecord(Hardwares[3], completed)
	draft.ID, draft.State, draft.Target.Driver = "l40s-r595-canary-1", "draft", "595.91.07"
	add(RecordDraft, draft)
}

func planMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: NamespaceSUC, Labels: map[string]string{"app.kubernetes.io/managed-by": "argocd", "platform.example.com/team": "platform"}}
}

var (
	rke2Image   = "rancher/rke2-upgrade"
	driverImage = "registry.example.com/platform/gpu-node-upgrade"
	notGPU      = []metav1.LabelSelectorRequirement{
		{Key: "nvidia.com/gpu.present", Operator: metav1.LabelSelectorOpDoesNotExist},
		{Key: "feature.node.kubernetes.io/pci-10de.present", Operator: metav1.LabelSelectorOpDoesNotExist},
	}
	gpuToleration = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
)

func in(key string, values ...string) metav1.LabelSelectorRequirement {
	return metav1.LabelSelectorRequirement{Key: key, Operator: metav1.LabelSelectorOpIn, Values: values}
}

func rke2Plan(name string, version string, sel ...metav1.LabelSelectorRequirement) *upgradev1.Plan {
	return &upgradev1.Plan{TypeMeta: metav1.TypeMeta{APIVersion: "upgrade.cattle.io/v1", Kind: "Plan"}, ObjectMeta: planMeta(name),
		Spec: upgradev1.PlanSpec{Concurrency: 1, Cordon: true, Version: version, ServiceAccountName: "system-upgrade",
			NodeSelector: &metav1.LabelSelector{MatchExpressions: sel},
			Upgrade:      &upgradev1.ContainerSpec{Image: rke2Image},
			Window:       &upgradev1.TimeWindowSpec{Days: []upgradev1.Day{"sa", "su"}, StartTime: "02:00", EndTime: "06:00", TimeZone: "Europe/Berlin"}}}
}

// GPUPlan is a serialized, cordoning RKE2 Plan for GPU nodes under record.
func GPUPlan(name, record string, sel ...metav1.LabelSelectorRequirement) *upgradev1.Plan {
	p := rke2Plan(name, Target.RKE2, sel...)
	p.Annotations = map[string]string{gate.AnnotationQualification: record, gate.AnnotationRequestedBy: Requester.Username}
	p.Spec.Tolerations = gpuToleration
	p.Spec.Prepare = &upgradev1.ContainerSpec{Image: rke2Image, Args: []string{"prepare", "rke2-server"}}
	return p
}

// HostnamePlan is GPUPlan selecting the named nodes.
func HostnamePlan(name, record string, nodes ...string) *upgradev1.Plan {
	return GPUPlan(name, record, in("kubernetes.io/hostname", nodes...))
}

// plans: 1 RKE2 server Plan and 9 agent Plans that leave GPU nodes out; per
// hardware a canary Plan per zone, two wave Plans per zone and a driver Plan.
func (g *generator) plans() {
	f := g.f
	f.Plans = append(f.Plans, rke2Plan("rke2-server", Target.RKE2, append([]metav1.LabelSelectorRequirement{in("node-role.kubernetes.io/control-plane", "true")}, notGPU...)...))
	for i := 1; i <= CPUPools; i++ {
		p := rke2Plan(fmt.Sprintf("rke2-agent-cpu-pool-%d", i), Target.RKE2, append([]metav1.LabelSelectorRequirement{
			in(LabelPool, fmt.Sprintf("cpu-pool-%d", i)),
			{Key: "node-role.kubernetes.io/control-plane", Operator: metav1.LabelSelectorOpDoesNotExist}}, notGPU...)...)
		p.Spec.Prepare = &upgradev1.ContainerSpec{Image: rke2Image, Args: []string{"prepare", "rke2-server"}}
		p.Spec.Drain = &upgradev1.DrainSpec{Force: true, IgnoreDaemonSets: ptr(true), DeleteEmptydirData: ptr(true)}
		f.Plans = append(f.Plans, p)
	}
	for _, hw := range Hardwares {
		for _, zone := range Zones {
			if ns := f.ByRole(hw.Name, zone, RoleCanaryPlan); len(ns) > 0 {
				f.Plans = append(f.Plans, HostnamePlan(fmt.Sprintf("gpu-%s-canary-%s", hw.Name, zone), RecordName(hw.Name), ns[0].Name))
			}
		}
		for _, zone := range Zones {
			for _, wave := range []Role{RoleWave1, RoleWave2} {
				f.Plans = append(f.Plans, GPUPlan(fmt.Sprintf("gpu-%s-%s-%s", hw.Name, zone, wave), RecordName(hw.Name),
					in(hw.PCILabel(), "true"), in("topology.kubernetes.io/zone", zone), in(LabelWave, string(wave))))
			}
		}
		if ns := f.ByRole(hw.Name, Zones[0], RoleDriverPlan); len(ns) > 0 {
			p := HostnamePlan(fmt.Sprintf("gpu-%s-driver", hw.Name), RecordName(hw.Name), ns[0].Name)
			p.Spec.Upgrade = &upgradev1.ContainerSpec{Image: driverImage, Env: []corev1.EnvVar{{Name: "DRIVER_VERSION", Value: Target.Driver}}}
			p.Spec.Version, p.Spec.Prepare = "r580-130", nil
			p.Spec.Drain = &upgradev1.DrainSpec{Force: true, IgnoreDaemonSets: ptr(true), DeleteEmptydirData: ptr(true)}
			f.Plans = append(f.Plans, p)
		}
	}
	g.applied()
}

// applied makes every Plan a finished earlier rollout, as SUC leaves it:
// status.latestHash the hash of the Plan at the source RKE2 version,
// Complete, and each GPU node it selects labelled
// plan.upgrade.cattle.io/<plan> with it (CPU nodes keep their labels: no
// rule reads theirs). No GPU rollout is in flight (RolloutInFlight), and a
// review of the Plan as written (the target version, a new hash) still
// selects them all.
func (g *generator) applied() {
	for _, p := range g.f.Plans {
		prev := p.DeepCopy()
		prev.Spec.Version = Source.RKE2
		hash, ok := gate.PredictHash(prev)
		if !ok {
			panic("fleet Plan " + p.Name + ": no predictable hash")
		}
		p.Status.LatestHash = hash
		p.Status.LatestVersion = strings.ReplaceAll(Source.RKE2, "+", "-")
		p.Status.Conditions = []upgradev1.GenericCondition{{Type: upgradev1.PlanComplete, Status: corev1.ConditionTrue, Reason: "Complete"}}
		names, err := gate.PendingNodes(p, g.f.Nodes)
		if err != nil {
			panic(fmt.Sprintf("fleet Plan %s: %v", p.Name, err))
		}
		for _, name := range names {
			if n := g.f.Node(name); g.f.Config.IsGPUNode(n) {
				n.Labels[upgradev1.LabelPlanName(p.Name)] = hash
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

// pods: a training Job's Pod on each hardware's holder node, and one on an
// A100 wave-2 node in zone-b, so that wave's Plan is refused (GPUHolders).
func (g *generator) pods() {
	var nodes []*corev1.Node
	for _, hw := range Hardwares {
		nodes = append(nodes, g.f.ByRole(hw.Name, "", RoleHolder)...)
	}
	if w := g.f.ByRole("a100", Zones[1], RoleWave2); len(w) > 0 {
		nodes = append(nodes, w[0])
	}
	for i, n := range nodes {
		job := fmt.Sprintf("train-%d", i)
		g.f.Pods = append(g.f.Pods, &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: job + "-0-" + g.hex(5), Namespace: NamespaceML, Labels: map[string]string{"job-name": job},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job, UID: types.UID(g.uuid()), Controller: ptr(true)}}},
			Spec: corev1.PodSpec{NodeName: n.Name, RestartPolicy: corev1.RestartPolicyNever, Tolerations: gpuToleration,
				Containers: []corev1.Container{{Name: "train", Image: "nvcr.io/nvidia/pytorch:25.01-py3",
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}}}})
	}
}
