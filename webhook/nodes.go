package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// decideNode reviews a Node UPDATE (contract: nodes.md). The webhook
// configuration's match conditions already drop kubelet writes, cordons and
// changes that touch neither labels nor an uncordon.
func (s *Server) decideNode(ctx context.Context, req admission.Request) (gate.Decision, error) {
	n, old, err := decodeNodePair(req)
	if err != nil {
		return gate.Decision{}, err
	}
	if !s.Config.IsGPUNode(n) && !s.Config.IsGPUNode(old) {
		return gate.Decision{Allowed: true, Object: "Node " + n.Name}, nil
	}
	cl, err := s.Facts.Cluster(ctx)
	if err != nil {
		return gate.FactsUnavailable("Node "+n.Name, err), nil
	}
	r := gate.PrepareNode(s.Config, cl, gate.NodeRequest{Node: n, OldNode: old, User: userOf(req), Now: s.now()})
	holders, herr := s.Facts.RequestHolders(ctx, r.HolderNodes())
	return r.Decide(holders, herr), nil
}

// decideCompletion reviews SUC's completion write of a node (contract:
// completions.md): the chart sends only SUC's uncordons and plan-label
// completions of GPU nodes.
func (s *Server) decideCompletion(ctx context.Context, req admission.Request) (gate.Decision, error) {
	n, old, err := decodeNodePair(req)
	if err != nil {
		return gate.Decision{}, err
	}
	cl, err := s.Facts.Cluster(ctx)
	if err != nil {
		return gate.FactsUnavailable("Node "+n.Name, err), nil
	}
	d := gate.DecideCompletion(s.Config, cl, gate.NodeRequest{Node: n, OldNode: old, User: userOf(req), Now: s.now()})
	if !d.Allowed && !dryRun(req) && s.holds(WebhookCompletions) {
		// The Plans whose completion of the node this is: those upgrading
		// it, or whose done label the write sets.
		for _, p := range cl.Plans {
			key := upgradev1.LabelPlanPrefix + p.Name
			if slices.Contains(p.Status.Applying, n.Name) || n.Labels[key] != old.Labels[key] {
				s.events.held("CompleteUpgrade", p, n, d)
			}
		}
	}
	return d, nil
}

// nodeFields are the parts of a Node the rules read (what StripNode keeps,
// plus annotations for break-glass, plus the capacity's resource names). A
// GPU node's review is ~40 KB, mostly
// images, managed fields and status the rules never read; decoding only
// these fields allocates a sixth as much and takes two thirds the time.
// Fields outside them are skipped, not type-checked.
type nodeFields struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name            string            `json:"name"`
		UID             types.UID         `json:"uid"`
		ResourceVersion string            `json:"resourceVersion"`
		Labels          map[string]string `json:"labels"`
		Annotations     map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Unschedulable bool           `json:"unschedulable"`
		Taints        []corev1.Taint `json:"taints"`
	} `json:"spec"`
	Status struct {
		NodeInfo struct {
			KernelVersion  string `json:"kernelVersion"`
			KubeletVersion string `json:"kubeletVersion"`
		} `json:"nodeInfo"`
		// Capacity: every resource name (a GPU resource makes a GPU node,
		// gate/gpunode.go); only the nvidia.com/ quantities, which a proof
		// reads, are parsed. Allocatable: only the nvidia.com/ ones.
		Capacity    map[corev1.ResourceName]json.RawMessage `json:"capacity"`
		Allocatable map[corev1.ResourceName]json.RawMessage `json:"allocatable"`
		Conditions  []struct {
			Type               corev1.NodeConditionType `json:"type"`
			Status             corev1.ConditionStatus   `json:"status"`
			LastTransitionTime metav1.Time              `json:"lastTransitionTime"`
		} `json:"conditions"`
	} `json:"status"`
}

// decodeResources parses the nvidia.com/ quantities of a resource list, which
// a proof reads; with allNames it keeps every other name with a zero quantity.
func decodeResources(raw map[corev1.ResourceName]json.RawMessage, allNames bool) (corev1.ResourceList, error) {
	var out corev1.ResourceList
	for name, v := range raw {
		var q resource.Quantity
		if isProofResource(name) {
			if err := json.Unmarshal(v, &q); err != nil {
				return nil, fmt.Errorf("%s: %q: expected a quantity, e.g. \"8\"", name, qualification.Clip(string(v)))
			}
		} else if !allNames {
			continue
		}
		if out == nil {
			out = corev1.ResourceList{}
		}
		out[name] = q
	}
	return out, nil
}

// decodeNodePair decodes a Node UPDATE's object and oldObject, or takes
// them as the one-pass path decoded them (review.go).
func decodeNodePair(req admission.Request) (n, old *corev1.Node, err error) {
	n, ok := req.Object.Object.(*corev1.Node)
	old, okOld := req.OldObject.Object.(*corev1.Node)
	if ok && okOld && n != nil && old != nil {
		return n, old, nil
	}
	if n, err = decodeNode(req.Object.Raw); err != nil {
		return nil, nil, fmt.Errorf("object: %w", err)
	}
	if old, err = decodeNode(req.OldObject.Raw); err != nil {
		return nil, nil, fmt.Errorf("oldObject: %w", err)
	}
	return n, old, nil
}

// decodeNode decodes a review's Node into the fields the rules read and
// refuses a body whose kind is not v1 Node.
func decodeNode(raw []byte) (*corev1.Node, error) {
	// Unmarshal, not a Decoder: the Decoder copies the body into a buffer it
	// grows, and Raw is a single JSON value already.
	var f nodeFields
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &f); err != nil {
		// Field names match case-sensitively, as the API server's own
		// decoding and the one-pass path (review.go) do; encoding/json,
		// on the error path only, names the field and what it expects.
		var again nodeFields
		if jerr := json.Unmarshal(raw, &again); jerr != nil {
			return nil, jsonProblem(jerr)
		}
		return nil, err
	}
	return f.node()
}

// node is the Node the fields describe; an error names the field.
func (f *nodeFields) node() (*corev1.Node, error) {
	if gv, err := schema.ParseGroupVersion(f.APIVersion); err != nil || f.Kind != "Node" || gv.Group != "" {
		return nil, fmt.Errorf("body is apiVersion %q kind %q, expected v1 Node", f.APIVersion, f.Kind)
	}
	n := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: f.APIVersion, Kind: f.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: f.Metadata.Name, UID: f.Metadata.UID, ResourceVersion: f.Metadata.ResourceVersion, Labels: f.Metadata.Labels, Annotations: f.Metadata.Annotations},
		Spec:       corev1.NodeSpec{Unschedulable: f.Spec.Unschedulable, Taints: f.Spec.Taints},
		Status:     corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KernelVersion: f.Status.NodeInfo.KernelVersion, KubeletVersion: f.Status.NodeInfo.KubeletVersion}},
	}
	var err error
	if n.Status.Capacity, err = decodeResources(f.Status.Capacity, true); err != nil {
		return nil, fmt.Errorf("status.capacity: %w", err)
	}
	if n.Status.Allocatable, err = decodeResources(f.Status.Allocatable, false); err != nil {
		return nil, fmt.Errorf("status.allocatable: %w", err)
	}
	for _, c := range f.Status.Conditions {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime})
	}
	return n, nil
}
