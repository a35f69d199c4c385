package webhook

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// The GPU Operator's resources, read as unstructured: their Go module is not
// a dependency, and fields a newer operator adds must not break decoding.
var (
	ClusterPolicyGVK = schema.GroupVersionKind{Group: "nvidia.com", Version: "v1", Kind: "ClusterPolicy"}
	NVIDIADriverGVK  = schema.GroupVersionKind{Group: "nvidia.com", Version: "v1alpha1", Kind: "NVIDIADriver"}
)

var pathUpgradePolicy = field.NewPath("spec", "driver", "upgradePolicy")

// decideDriver reviews an UPDATE of a ClusterPolicy or an NVIDIADriver
// (contract: driver.md).
func (s *Server) decideDriver(ctx context.Context, req admission.Request) (gate.Decision, error) {
	obj, old := &unstructured.Unstructured{}, &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(req.Object.Raw); err != nil {
		return gate.Decision{}, fmt.Errorf("object: %w", err)
	}
	if err := old.UnmarshalJSON(req.OldObject.Raw); err != nil {
		return gate.Decision{}, fmt.Errorf("oldObject: %w", err)
	}
	if obj.GroupVersionKind().GroupKind() != old.GroupVersionKind().GroupKind() {
		return gate.Decision{}, fmt.Errorf("object is %s but oldObject is %s", obj.GroupVersionKind(), old.GroupVersionKind())
	}
	ch := gate.DriverChange{Object: obj.GetKind() + " " + obj.GetName(), Annotations: obj.GetAnnotations(), PolicyPath: pathUpgradePolicy}
	switch obj.GroupVersionKind().GroupKind() {
	case ClusterPolicyGVK.GroupKind():
		ch.OldDriver, ch.NewDriver = str(old, "spec", "driver", "version"), str(obj, "spec", "driver", "version")
		ch.OldDCGM, ch.NewDCGM = str(old, "spec", "dcgmExporter", "version"), str(obj, "spec", "dcgmExporter", "version")
		ch.DriverPath, ch.DCGMPath = field.NewPath("spec", "driver", "version"), field.NewPath("spec", "dcgmExporter", "version")
		ch.Policy = upgradePolicy(obj)
	case NVIDIADriverGVK.GroupKind():
		ch.OldDriver, ch.NewDriver = str(old, "spec", "version"), str(obj, "spec", "version")
		ch.DriverPath = field.NewPath("spec", "version")
		sel, _, err := unstructured.NestedStringMap(obj.Object, "spec", "nodeSelector")
		if err != nil {
			return gate.Decision{}, fmt.Errorf("object: spec.nodeSelector: %w", err)
		}
		ch.NodeSelector = sel
		if ch.NodeSelector == nil {
			ch.NodeSelector = map[string]string{}
		}
		// The operator applies the ClusterPolicy's upgrade policy to
		// NVIDIADriver rollouts too.
		if ch.OldDriver != ch.NewDriver {
			ch.PolicyPath = field.NewPath("ClusterPolicy", "spec", "driver", "upgradePolicy")
			ch.Policy, ch.PolicyErr = s.clusterPolicy(ctx)
		}
	default:
		return gate.Decision{}, fmt.Errorf("kind %s is not a GPU Operator driver resource", obj.GroupVersionKind())
	}
	cl, err := s.Facts.Cluster(ctx)
	if err != nil {
		return gate.FactsUnavailable(ch.Object, err), nil
	}
	r := gate.PrepareDriver(s.Config, cl, gate.DriverRequest{Change: ch, User: userOf(req), Now: s.now()})
	holders, herr := s.Facts.Holders(ctx, r.HolderNodes())
	return r.Decide(holders, herr), nil
}

// clusterPolicy reads the upgrade policy live: driver changes are rare, and
// a cache of the operator's CRDs would make the gate depend on them being
// installed. A read failure is FactsMissing (naming the read); no
// ClusterPolicy at all leaves the policy absent, which denies.
func (s *Server) clusterPolicy(ctx context.Context) (gate.DriverUpgradePolicy, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(ClusterPolicyGVK.GroupVersion().WithKind("ClusterPolicyList"))
	if err := s.Facts.Live.List(ctx, list); err != nil {
		return gate.DriverUpgradePolicy{}, fmt.Errorf("list clusterpolicies.nvidia.com: %w", err)
	}
	if len(list.Items) == 0 {
		return gate.DriverUpgradePolicy{}, nil
	}
	return upgradePolicy(&list.Items[0]), nil
}

func upgradePolicy(cp *unstructured.Unstructured) gate.DriverUpgradePolicy {
	p, found, err := unstructured.NestedMap(cp.Object, "spec", "driver", "upgradePolicy")
	if err != nil || !found {
		return gate.DriverUpgradePolicy{}
	}
	auto, _, _ := unstructured.NestedBool(p, "autoUpgrade")
	maxPar, _, _ := unstructured.NestedInt64(p, "maxParallelUpgrades")
	drain, _, _ := unstructured.NestedBool(p, "drain", "enable")
	return gate.DriverUpgradePolicy{Present: true, AutoUpgrade: auto, MaxParallelUpgrades: maxPar, DrainEnabled: drain}
}

func str(u *unstructured.Unstructured, path ...string) string {
	v, _, _ := unstructured.NestedString(u.Object, path...)
	return v
}

// DriverHandler serves ClusterPolicy and NVIDIADriver updates on one path.
func (s *Server) DriverHandler() *handler {
	return &handler{resource: "driver", decide: s.decideDriver, log: s.Log.WithName("driver"),
		contract: "driver.md", reviews: []gate.Review{gate.ReviewDriver, gate.ReviewAdmission},
		kinds: []schema.GroupVersionKind{ClusterPolicyGVK, NVIDIADriverGVK},
		gvrs:  []schema.GroupVersionResource{ClusterPolicyGVK.GroupVersion().WithResource("clusterpolicies"), NVIDIADriverGVK.GroupVersion().WithResource("nvidiadrivers")},
		ops:   []admissionv1.Operation{admissionv1.Update}}
}
