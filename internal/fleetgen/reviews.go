package fleetgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Webhook paths (webhook.Path*; repeated here so the webhook's own tests
// can use the fleet).
const (
	PathPlans   = "/validate/plans"
	PathNodes   = "/validate/nodes"
	PathRecords = "/validate/records"
)

// Review kinds.
const (
	KindPlan   = "plan"
	KindNode   = "node"
	KindRecord = "record"
)

// UIDPlaceholder is the request UID in every Review body; senders overwrite
// it (same length) so each request has its own UID, as the API server's do.
const UIDPlaceholder = "00000000-0000-0000-0000-000000000000"

// Review is one recorded AdmissionReview and the decision the engine gives
// it for the fleet's state.
type Review struct {
	// Name says what it is, e.g. "node/join-wave/gpu-v100-0100".
	Name string
	Kind string
	// Scenario is the second part of Name, e.g. "join-wave".
	Scenario string
	Path     string
	Body     []byte
	// Allowed and Codes are the expected decision.
	Allowed bool
	Codes   []gate.Code
	// Record is the record ConfigMap a Plan review depends on, if any.
	Record string
	// Holders are the nodes whose Pods the webhook lists for this review.
	Holders int
}

// Requester is who the reviews come from: a platform engineer, neither a
// kubelet nor an exempt controller.
var Requester = authenticationv1.UserInfo{Username: "alice", Groups: []string{"platform-admins", "system:authenticated"}}

// Reviews records the fleet's AdmissionReviews, as the API server would send
// them: Plan CREATE (every Plan, re-applied) and UPDATE (a GitOps label
// bump), Node label UPDATEs of GPU nodes (a rack relabel, joining a wave, a
// GPU mode change cordoned and not, an uncordon), record ConfigMap CREATEs.
// Node bodies carry the whole stored Node (images, conditions, managed
// fields): what the API server sends is the object, not a diff. now is the
// webhook's clock for the expected decisions.
func (f *Fleet) Reviews(now time.Time) []Review {
	cl := f.Cluster(nil)
	var out []Review
	stored := map[string]*upgradev1.Plan{}
	for _, p := range cl.Plans {
		stored[p.Name] = p
	}
	for _, p := range f.Plans {
		out = append(out, f.planReview(cl, now, "create", admissionv1.Create, p, nil))
		if strings.HasPrefix(p.Name, "gpu-") {
			np := stored[p.Name].DeepCopy()
			np.Labels["platform.example.com/revision"] = "r2"
			out = append(out, f.planReview(cl, now, "update", admissionv1.Update, np, stored[p.Name]))
		}
	}
	for _, hw := range Hardwares {
		for zi, zone := range Zones {
			plain := f.ByRole(hw.Name, zone, RolePlain)
			for i, n := range plain {
				if i >= 12 {
					break
				}
				switch i % 6 {
				case 0, 1, 2:
					out = append(out, f.nodeReview(cl, now, "relabel", n, func(c *corev1.Node) { c.Labels[LabelRack] = fmt.Sprintf("%s-r%02d", zone, 41+i) }))
				case 3:
					out = append(out, f.nodeReview(cl, now, "join-wave", n, joinWave(RoleWave2)))
				case 4:
					out = append(out, f.nodeReview(cl, now, "join-full-wave", n, joinWave(RoleWave1)))
				case 5:
					out = append(out, f.nodeReview(cl, now, "mode-uncordoned", n, setMode("vm-passthrough")))
				}
			}
			if zi == 0 {
				for _, n := range f.ByRole(hw.Name, "", RoleCordoned) {
					out = append(out, f.nodeReview(cl, now, "mode-cordoned", n, setMode("vm-passthrough")))
					out = append(out, f.nodeReview(cl, now, "uncordon", n, func(c *corev1.Node) { c.Spec.Unschedulable = false }))
				}
			}
		}
	}
	for _, cm := range f.RecordConfigMaps {
		out = append(out, f.recordReview(now, cm))
	}
	return out
}

// joinWave labels a node into a wave, naming the requester as who moves
// it (gpu-upgrade-gate.io/moved-by, in the same write: MovedByMissing).
func joinWave(w Role) func(c *corev1.Node) {
	return func(c *corev1.Node) {
		c.Labels[LabelWave] = string(w)
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[gate.AnnotationMovedBy] = Requester.Username
	}
}

// PlanReview records one Plan CREATE (old nil) or UPDATE with the decision
// for the fleet's state now.
func (f *Fleet) PlanReview(p, old *upgradev1.Plan, now time.Time) Review {
	op, scenario := admissionv1.Create, "create"
	if old != nil {
		op, scenario = admissionv1.Update, "update"
	}
	return f.planReview(f.Cluster(nil), now, scenario, op, p, old)
}

// AddRecord adds a record ConfigMap to the fleet (a record written later).
func (f *Fleet) AddRecord(name string, r *qualification.Record) *corev1.ConfigMap {
	cm := RecordConfigMap(name, r)
	f.Records[name] = r
	f.RecordConfigMaps = append(f.RecordConfigMaps, cm)
	return cm
}

func setMode(mode string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Labels[gate.LabelWorkloadMode], n.Labels[gate.LabelExpectedWorkloadMode], n.Labels[gate.LabelWorkloadConfig] = mode, mode, mode
	}
}

// Select returns the reviews of the given kinds and, when scenarios are
// given, of those scenarios only.
func Select(rs []Review, kinds []string, scenarios ...string) []Review {
	var out []Review
	for _, r := range rs {
		if slices.Contains(kinds, r.Kind) && (len(scenarios) == 0 || slices.Contains(scenarios, r.Scenario)) {
			out = append(out, r)
		}
	}
	return out
}

func (f *Fleet) planReview(cl *gate.Cluster, now time.Time, scenario string, op admissionv1.Operation, p, old *upgradev1.Plan) Review {
	req := gate.PlanRequest{Operation: string(op), Plan: p, OldPlan: old, User: gate.UserInfo{Name: Requester.Username, Groups: Requester.Groups}, Now: now}
	pr := gate.PreparePlan(f.Config, cl, req)
	d := pr.Decide(f.Holders(pr.HolderNodes()), nil)
	r := Review{Name: KindPlan + "/" + scenario + "/" + p.Name, Kind: KindPlan, Scenario: scenario, Path: PathPlans,
		Allowed: d.Allowed, Codes: d.Codes(), Record: p.Annotations[gate.AnnotationQualification], Holders: len(pr.HolderNodes())}
	r.Body = review(admissionv1.AdmissionRequest{
		Kind:     metav1.GroupVersionKind{Group: "upgrade.cattle.io", Version: "v1", Kind: "Plan"},
		Resource: metav1.GroupVersionResource{Group: "upgrade.cattle.io", Version: "v1", Resource: "plans"},
		Name:     p.Name, Namespace: p.Namespace, Operation: op,
	}, p, old)
	return r
}

func (f *Fleet) nodeReview(cl *gate.Cluster, now time.Time, scenario string, n *corev1.Node, mod func(*corev1.Node)) Review {
	old := f.stored(n)
	c := old.DeepCopy()
	mod(c)
	req := gate.NodeRequest{Node: c, OldNode: old, User: gate.UserInfo{Name: Requester.Username, Groups: Requester.Groups}, Now: now}
	nr := gate.PrepareNode(f.Config, cl, req)
	d := nr.Decide(f.Holders(nr.HolderNodes()), nil)
	r := Review{Name: KindNode + "/" + scenario + "/" + n.Name, Kind: KindNode, Scenario: scenario, Path: PathNodes,
		Allowed: d.Allowed, Codes: d.Codes(), Holders: len(nr.HolderNodes())}
	r.Body = review(admissionv1.AdmissionRequest{
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "nodes"},
		Name:     n.Name, Operation: admissionv1.Update,
	}, c, old)
	return r
}

func (f *Fleet) recordReview(now time.Time, cm *corev1.ConfigMap) Review {
	// The record as its author creates it: written by the requester, not
	// yet approved (an approval is a write of its own).
	cm = cm.DeepCopy()
	cm.Annotations = map[string]string{qualification.AnnotationAuthor: Requester.Username}
	d := gate.DecideRecord(f.Config, gate.RecordRequest{ConfigMap: cm, User: gate.UserInfo{Name: Requester.Username, Groups: Requester.Groups}, Now: now})
	r := Review{Name: KindRecord + "/create/" + cm.Name, Kind: KindRecord, Scenario: "create", Path: PathRecords, Allowed: d.Allowed, Codes: d.Codes()}
	r.Body = review(admissionv1.AdmissionRequest{
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		Name:     cm.Name, Namespace: cm.Namespace, Operation: admissionv1.Create,
	}, cm, nil)
	return r
}

// stored is a node as the API server stores and sends it: with a UID, a
// resourceVersion, a creation time and the managed fields of the agents that
// wrote it.
func (f *Fleet) stored(n *corev1.Node) *corev1.Node {
	s := n.DeepCopy()
	s.UID = types.UID(fmt.Sprintf("5c0f%04x-6f0e-4f43-9d7a-%012x", len(n.Name), fnv(n.Name)))
	s.ResourceVersion = fmt.Sprint(100000 + fnv(n.Name)%900000)
	s.CreationTimestamp = metav1.NewTime(f.Options.Now.Add(-240 * 24 * time.Hour))
	s.ManagedFields = managedFields(s, f.Options.Now)
	return s
}

func fnv(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h & 0xffffffffffff
}

// managedFields models the field owners of a GPU node: the kubelet (its
// labels and status), nfd-master (the feature and GFD labels), the
// controller-manager (podCIDR, TTL annotation) and calico (annotations,
// NetworkUnavailable).
func managedFields(n *corev1.Node, now time.Time) []metav1.ManagedFieldsEntry {
	set := func(keys []string) string {
		var b bytes.Buffer
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kj, _ := json.Marshal("f:" + k)
			b.Write(kj)
			b.WriteString(":{}")
		}
		return b.String()
	}
	var kubeletLabels, nfdLabels []string
	for k := range n.Labels {
		if strings.HasPrefix(k, "feature.node.kubernetes.io/") || strings.HasPrefix(k, "nvidia.com/") {
			nfdLabels = append(nfdLabels, k)
		} else {
			kubeletLabels = append(kubeletLabels, k)
		}
	}
	slices.Sort(kubeletLabels)
	slices.Sort(nfdLabels)
	t := metav1.NewTime(now.Add(-time.Hour))
	entry := func(manager, sub string, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &t,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields), Subresource: sub}
	}
	conds := `"f:conditions":{"k:{\"type\":\"DiskPressure\"}":{"f:lastHeartbeatTime":{}},"k:{\"type\":\"MemoryPressure\"}":{"f:lastHeartbeatTime":{}},"k:{\"type\":\"PIDPressure\"}":{"f:lastHeartbeatTime":{}},"k:{\"type\":\"Ready\"}":{"f:lastHeartbeatTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{}}}`
	return []metav1.ManagedFieldsEntry{
		entry("kubelet", "", `{"f:metadata":{"f:annotations":{".":{},"f:volumes.kubernetes.io/controller-managed-attach-detach":{}},"f:labels":{".":{},`+set(kubeletLabels)+`}},"f:spec":{"f:providerID":{}}}`),
		entry("kube-controller-manager", "", `{"f:metadata":{"f:annotations":{"f:node.alpha.kubernetes.io/ttl":{}}},"f:spec":{"f:podCIDR":{},"f:podCIDRs":{".":{},"v:\"`+n.Spec.PodCIDR+`\"":{}}}}`),
		entry("nfd-master", "", `{"f:metadata":{"f:annotations":{"f:nfd.node.kubernetes.io/feature-labels":{}},"f:labels":{`+set(nfdLabels)+`}}}`),
		entry("calico-node", "status", `{"f:metadata":{"f:annotations":{"f:projectcalico.org/IPv4Address":{},"f:projectcalico.org/IPv4VXLANTunnelAddr":{}}},"f:status":{"f:conditions":{"k:{\"type\":\"NetworkUnavailable\"}":{".":{},"f:lastHeartbeatTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{},"f:type":{}}}}}`),
		entry("kubelet", "status", `{"f:status":{"f:allocatable":{"f:ephemeral-storage":{},"f:nvidia.com/gpu":{}},"f:capacity":{"f:nvidia.com/gpu":{}},`+conds+`,"f:images":{},"f:nodeInfo":{"f:bootID":{},"f:containerRuntimeVersion":{},"f:kernelVersion":{},"f:kubeletVersion":{},"f:osImage":{}}}}`),
	}
}

func review(req admissionv1.AdmissionRequest, obj, old runtime.Object) []byte {
	req.UID = UIDPlaceholder
	req.RequestKind, req.RequestResource = &req.Kind, &req.Resource
	req.UserInfo = Requester
	req.DryRun = new(bool)
	raw := func(o runtime.Object) runtime.RawExtension {
		data, err := json.Marshal(o)
		if err != nil {
			panic(err)
		}
		return runtime.RawExtension{Raw: data}
	}
	req.Object = raw(obj)
	if old != nil && !isNil(old) {
		req.OldObject = raw(old)
		req.Options = runtime.RawExtension{Raw: []byte(`{"kind":"UpdateOptions","apiVersion":"meta.k8s.io/v1","fieldManager":"kubectl-label"}`)}
	} else {
		req.Options = runtime.RawExtension{Raw: []byte(`{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1","fieldManager":"kubectl-client-side-apply","fieldValidation":"Strict"}`)}
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: &req})
	if err != nil {
		panic(err)
	}
	return body
}

func isNil(o runtime.Object) bool {
	switch v := o.(type) {
	case *upgradev1.Plan:
		return v == nil
	case *corev1.Node:
		return v == nil
	}
	return false
}
