package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// The fleet's tuples: V100 nodes move from Source to Target.
var (
	Source = qualification.Tuple{Kernel: "6.8.0-134-generic", RKE2: "v1.35.3+rke2r3", Driver: "580.126.20", GPUOperator: "v26.3.3", DCGMExporter: "4.5.3-4.8.2-distroless"}
	Target = qualification.Tuple{Kernel: "6.8.0-135-generic", RKE2: "v1.36.1+rke2r1", Driver: "580.130.00", GPUOperator: "v26.3.3", DCGMExporter: "4.5.3-4.8.2-distroless"}
)

// NodeSpec is one node of the fleet.
type NodeSpec struct {
	Name     string
	Fixture  string // node-v100.json, node-h200.json, or "" for a CPU node
	Tuple    qualification.Tuple
	Zone     string
	Cordoned bool
	// Mutate adjusts labels or status for a scenario.
	Mutate func(*corev1.Node)
}

// NewNode builds a realistic Node from a fixture: labels as NFD and GFD
// publish them, status as a kubelet reports it.
func NewNode(root string, s NodeSpec) (*corev1.Node, error) {
	n := &corev1.Node{}
	if s.Fixture != "" {
		data, err := os.ReadFile(filepath.Join(root, "testdata", "nodes", s.Fixture))
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, n); err != nil {
			return nil, err
		}
		n.Labels["nvidia.com/cuda.driver-version.full"] = s.Tuple.Driver
	} else {
		n.Labels = map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletReady"}}
	}
	n.Name, n.UID, n.ResourceVersion, n.CreationTimestamp = s.Name, "", "", metav1.Time{}
	n.Labels["kubernetes.io/hostname"] = s.Name
	n.Labels["feature.node.kubernetes.io/kernel-version.full"] = s.Tuple.Kernel
	if s.Zone != "" {
		n.Labels["topology.kubernetes.io/zone"] = s.Zone
	}
	n.Spec.ProviderID = "rke2://" + s.Name
	n.Spec.Unschedulable = s.Cordoned
	n.Status.NodeInfo.KernelVersion = s.Tuple.Kernel
	n.Status.NodeInfo.KubeletVersion = s.Tuple.RKE2
	if s.Mutate != nil {
		s.Mutate(n)
	}
	return n, nil
}

// CreateNodes creates the nodes with their status (as a kubelet would).
func (e *Env) CreateNodes(ctx context.Context, specs []NodeSpec) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	for _, s := range specs {
		n, err := NewNode(root, s)
		if err != nil {
			return err
		}
		status := n.Status
		if err := e.Admin.Create(ctx, n); err != nil {
			return fmt.Errorf("create node %s: %w", s.Name, err)
		}
		n.Status = status
		if err := e.Admin.Status().Update(ctx, n); err != nil {
			return fmt.Errorf("node %s status: %w", s.Name, err)
		}
	}
	return nil
}

// Record returns a qualified V100 record completed at `completed`.
func Record(id string, completed time.Time, mod ...func(*qualification.Record)) *qualification.Record {
	src := Source
	r := &qualification.Record{APIVersion: qualification.APIVersionGate, Kind: qualification.Kind, ID: id, State: "qualified",
		ApprovedBy: "bob", SourceRevision: "9f2c4e1a7b3d5c6e8f0a1b2c3d4e5f60718293a4",
		Hardware: []string{"10de:1db6/10de:124a"}, Target: Target, Source: &src,
		Canary: qualification.Canary{CompletedAt: completed.UTC().Format(time.RFC3339), AllocationPassed: true, MonitoringPassed: true, RollbackPassed: true, Evidence: "change-record-42"}}
	for _, m := range mod {
		m(r)
	}
	return r
}

// The identities of the fixtures' records: carol, who ran the canary,
// writes each record; bob, its approvedBy, approves it; alice applies the
// Plans (two-person rule: neither wrote nor approved the record).
const (
	RecordAuthor   = "carol"
	RecordApprover = "bob"
	// PlatformAdmins is the group of alice, bob and carol (Base binds it).
	PlatformAdmins = "platform-admins"
)

// RecordConfigMap wraps a record in its ConfigMap in the gate's namespace,
// as its author (RecordAuthor) writes it: annotated with the author, not yet
// approved.
func (e *Env) RecordConfigMap(name string, r *qualification.Record) (*corev1.ConfigMap, error) {
	data, err := yaml.Marshal(r)
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Config.Namespace, Labels: map[string]string{qualification.ConfigMapLabel: "true"},
			Annotations: map[string]string{qualification.AnnotationAuthor: RecordAuthor}},
		Data: map[string]string{qualification.ConfigMapKey: string(data)},
	}, nil
}

// As is a client that impersonates user in groups (platform-admins when
// none are given), as `kubectl --as` does.
func (e *Env) As(user string, groups ...string) (client.Client, error) {
	if len(groups) == 0 {
		groups = []string{PlatformAdmins}
	}
	return client.New(e.CP.ConfigFor(user, groups...), client.Options{Scheme: e.Scheme})
}

// CreateRecords creates a record ConfigMap for each record, by name, the
// attested way through the API server: RecordAuthor writes it, then the
// record's approvedBy approves exactly its data (WriteRecord).
func (e *Env) CreateRecords(ctx context.Context, records map[string]*qualification.Record) error {
	author, err := e.As(RecordAuthor)
	if err != nil {
		return err
	}
	for name, r := range records {
		cm, err := e.RecordConfigMap(name, r)
		if err != nil {
			return err
		}
		approver, err := e.As(r.ApprovedBy)
		if err != nil {
			return err
		}
		if err := WriteRecord(ctx, author, approver, r.ApprovedBy, cm); err != nil {
			return fmt.Errorf("record %s: %w", name, err)
		}
	}
	return nil
}

// WriteRecord creates cm as author (cm's author annotation must name that
// identity), then approves its data as approver, whose username is by
// (Approve). Approval annotations in cm are dropped from the create: the
// record webhook refuses an approval in the write that creates the data.
func WriteRecord(ctx context.Context, author, approver client.Client, by string, cm *corev1.ConfigMap) error {
	cm = cm.DeepCopy()
	delete(cm.Annotations, qualification.AnnotationApprovedBy)
	delete(cm.Annotations, qualification.AnnotationApprovedSHA256)
	if err := author.Create(ctx, cm); err != nil {
		return fmt.Errorf("create as its author: %w", err)
	}
	return Approve(ctx, approver, cm, by)
}

// Approve annotates record cm's approval as approver (whose username is by)
// for the data cm holds, as `kubectl annotate --overwrite` does.
func Approve(ctx context.Context, approver client.Client, cm *corev1.ConfigMap, by string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		qualification.AnnotationApprovedBy:     by,
		qualification.AnnotationApprovedSHA256: qualification.DataSHA256(cm.Data[qualification.ConfigMapKey]),
	}}})
	if err != nil {
		return err
	}
	target := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name}}
	if err := approver.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("approve as %s: %w", by, err)
	}
	return nil
}

// Base creates what every cluster of the fleet has: namespaces, the GPU
// Operator Deployment and DCGM exporter DaemonSet (objects only: no kubelet
// runs them), and RBAC for the people of the scenarios: alice, bob and
// carol are platform engineers (group platform-admins); carol writes
// records, bob approves them.
func (e *Env) Base(ctx context.Context) error {
	for _, ns := range append([]string{e.Config.Namespace, e.Config.GPUOperator.Namespace, "ml"}, e.Config.SUCNamespaces...) {
		if err := client.IgnoreAlreadyExists(e.Admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})); err != nil {
			return err
		}
	}
	labels := map[string]string{"app": "gpu-operator"}
	pod := func(name, image string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: image}}}}
	}
	op, dc := e.Config.GPUOperator, e.Config.DCGMExporter
	objs := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: op.Name, Namespace: op.Namespace},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: pod(op.Container, "nvcr.io/nvidia/gpu-operator:"+Source.GPUOperator)}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: dc.Name, Namespace: dc.Namespace},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: pod(dc.Container, "nvcr.io/nvidia/k8s/dcgm-exporter:"+Source.DCGMExporter)}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "platform-admin"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"upgrade.cattle.io"}, Resources: []string{"plans"}, Verbs: []string{"*"}},
			{APIGroups: []string{""}, Resources: []string{"nodes", "configmaps", "pods"}, Verbs: []string{"*"}},
			{APIGroups: []string{"nvidia.com"}, Resources: []string{"clusterpolicies", "nvidiadrivers"}, Verbs: []string{"*"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "platform-admins"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "platform-admin"},
			Subjects: []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "platform-admins"}}},
	}
	// The validator DaemonSet: its Pods count only with its UID, which the
	// API server assigns (ValidatorOwner takes it).
	v := e.Config.Proof.Validator
	validators := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: v.DaemonSet, Namespace: v.Namespace},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: pod("validator", "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.3.3")}}
	// Only the GPU Operator creates it (webhook/validatordaemonset.md): as
	// its ServiceAccount, which the chart's webhook.gpuOperatorServiceAccounts
	// names by default.
	operatorSA := "system:serviceaccount:" + op.Namespace + ":gpu-operator"
	objs = append(objs,
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: v.Namespace, Name: "gpu-operator-validator"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"create"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: v.Namespace, Name: "gpu-operator-validator"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "gpu-operator-validator"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "gpu-operator", Namespace: op.Namespace}}})
	for _, o := range objs {
		if err := e.Admin.Create(ctx, o); err != nil {
			return fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	operatorGroups := []string{"system:serviceaccounts", "system:serviceaccounts:" + op.Namespace, "system:authenticated"}
	if err := e.WaitGranted(ctx, operatorSA, operatorGroups, authorizationv1.ResourceAttributes{Namespace: v.Namespace, Verb: "create", Group: "apps", Resource: "daemonsets"}); err != nil {
		return err
	}
	operator, err := e.clientAs(operatorSA, operatorGroups...)
	if err != nil {
		return err
	}
	if err := operator.Create(ctx, validators); err != nil {
		return fmt.Errorf("create DaemonSet %s as the GPU Operator: %w", v.DaemonSet, err)
	}
	ValidatorOwner.UID = validators.UID
	return e.OperatorRollout(ctx, 1, 1, 1)
}

// OperatorRollout writes the GPU Operator Deployment's status as the
// Deployment controller would (no kube-controller-manager runs here): its
// spec observed, replicas Pods of which updated are of the current
// template and ready are ready and available. OperatorRollout(ctx, 1, 1, 1)
// is a finished rollout of one replica.
func (e *Env) OperatorRollout(ctx context.Context, replicas, updated, ready int32) error {
	op := e.Config.GPUOperator
	var d appsv1.Deployment
	if err := e.Admin.Get(ctx, client.ObjectKey{Namespace: op.Namespace, Name: op.Name}, &d); err != nil {
		return err
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: replicas, UpdatedReplicas: updated,
		ReadyReplicas: ready, AvailableReplicas: ready, UnavailableReplicas: replicas - ready}
	if err := e.Admin.Status().Update(ctx, &d); err != nil {
		return fmt.Errorf("write the status of Deployment %s/%s: %w", op.Namespace, op.Name, err)
	}
	return nil
}

// Holder is a Pod that holds a GPU on node (it stays Pending: no kubelet
// runs, which still counts, as a scheduled Pod about to start does).
func Holder(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml"}, Spec: corev1.PodSpec{NodeName: node,
		Containers: []corev1.Container{{Name: "train", Image: "nvcr.io/nvidia/pytorch:25.01-py3",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}}}}
}

// ProofPods are a Ready validator Pod and a Succeeded allocation check on
// node (docs/proof.md), the validator Ready since readyAt and the check
// started a minute later.
func ProofPods(node string, readyAt time.Time) []*corev1.Pod {
	gpu := corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}
	return []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "nvidia-operator-validator-" + node, Namespace: "gpu-operator", Labels: map[string]string{"app": "nvidia-operator-validator"},
			OwnerReferences: []metav1.OwnerReference{ValidatorOwner}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "validator", Image: "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.3.3"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: readyAt},
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(readyAt)}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "allocation-check-" + node, Namespace: "gpu-upgrade-gate", Labels: map[string]string{"gpu-upgrade-gate.io/allocation-check": "true"}},
			Spec:   corev1.PodSpec{NodeName: node, RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "check", Image: "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04", Resources: gpu}}},
			Status: corev1.PodStatus{Phase: corev1.PodSucceeded, StartTime: &metav1.Time{Time: readyAt.Add(time.Minute)}}},
	}
}

// ProveNode creates the proof Pods of node with their status, as the
// kubelet would write it (no kubelet runs here).
func (e *Env) ProveNode(ctx context.Context, node string, readyAt time.Time) error {
	return e.writePods(ctx, ProofPods(node, readyAt))
}

// ValidatorOwner is the controller reference the DaemonSet controller puts
// on the GPU Operator's validator Pods (only those count in a proof): the
// DaemonSet the environment creates, whose UID it takes then (no
// DaemonSet controller or garbage collector runs here).
var ValidatorOwner = metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "nvidia-operator-validator",
	UID: "7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f", Controller: new(true), BlockOwnerDeletion: new(true)}
