package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// InstallPlanGVK is OLM's InstallPlan, read as unstructured.
var InstallPlanGVK = schema.GroupVersionKind{Group: "operators.coreos.com", Version: "v1alpha1", Kind: "InstallPlan"}

// SubscriptionGVK is OLM's Subscription, read as unstructured.
var SubscriptionGVK = schema.GroupVersionKind{Group: "operators.coreos.com", Version: "v1alpha1", Kind: "Subscription"}

// decideOperator reviews an upgrade of the GPU Operator itself: the image of
// its Deployment (as `helm upgrade` writes it), or the approval of an OLM
// InstallPlan that installs a new version (contract: operator.md); and the
// Subscription that says whether OLM approves such InstallPlans itself. A
// new operator version is part of every GPU node's tuple at once.
func (s *Server) decideOperator(ctx context.Context, req admission.Request) (gate.Decision, error) {
	if req.Kind.Kind == SubscriptionGVK.Kind {
		return s.decideSubscription(req)
	}
	ch := gate.DriverChange{Object: req.Kind.Kind + " " + objectName(req), Operation: string(req.Operation)}
	var err error
	switch req.Kind.Kind {
	case "Deployment":
		err = s.deploymentChange(req, &ch)
	case InstallPlanGVK.Kind:
		err = s.installPlanChange(req, &ch)
	}
	if err != nil {
		return gate.Decision{}, err
	}
	if ch.NewOperator == "" && ch.OldOperator == "" {
		return gate.Decision{Allowed: true, Object: ch.Object}, nil // not the operator, or no approval
	}
	cl, err := s.Facts.Cluster(ctx)
	if err != nil {
		return gate.FactsUnavailable(ch.Object, err), nil
	}
	if req.Operation == admissionv1.Create || req.Kind.Kind == InstallPlanGVK.Kind {
		// These move the operator from what runs now.
		ch.OldOperator, _ = gate.ImageVersion(strings.SplitN(cl.GPUOperatorImage, "@", 2)[0])
	}
	if ch.OldOperator == ch.NewOperator {
		return gate.Decision{Allowed: true, Object: ch.Object}, nil
	}
	ch.PolicyPath = pathCPUpgradePolicy
	ch.Policy, ch.PolicyErr = s.clusterPolicy(ctx)
	r := gate.PrepareDriver(s.Config, cl, gate.DriverRequest{Change: ch, User: userOf(req), Now: s.now()})
	return r.Decide(nil, nil), nil
}

// deploymentChange reads the operator container's image tag before and
// after (a CREATE moves it from what runs now: nothing, after a deletion);
// other Deployments in the namespace change nothing.
func (s *Server) deploymentChange(req admission.Request, ch *gate.DriverChange) error {
	decode := func(raw []byte, what string) (*appsv1.Deployment, error) {
		d := &appsv1.Deployment{}
		if err := json.Unmarshal(raw, d); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if k := d.GroupVersionKind(); k.Group != "apps" || k.Kind != "Deployment" {
			return nil, fmt.Errorf("%s: body is apiVersion %q kind %q, expected apps/v1 Deployment", what, k.GroupVersion(), k.Kind)
		}
		return d, nil
	}
	obj, err := decode(req.Object.Raw, "object")
	if err != nil {
		return err
	}
	ref := s.Config.GPUOperator
	if obj.Namespace != ref.Namespace || obj.Name != ref.Name {
		return nil
	}
	ch.Annotations = obj.Annotations
	ch.NewOperator, ch.OperatorPath = operatorVersion(obj, ref.Container)
	if req.Operation == admissionv1.Update {
		old, err := decode(req.OldObject.Raw, "oldObject")
		if err != nil {
			return err
		}
		ch.OldOperator, _ = operatorVersion(old, ref.Container)
	}
	return nil
}

func operatorVersion(d *appsv1.Deployment, container string) (string, *field.Path) {
	for i, c := range d.Spec.Template.Spec.Containers {
		if container == "" || c.Name == container {
			// The tag is the release; a digest beside it says which build.
			v, _ := gate.ImageVersion(strings.SplitN(c.Image, "@", 2)[0])
			return v, field.NewPath("spec", "template", "spec", "containers").Index(i).Child("image")
		}
	}
	return "", field.NewPath("spec", "template", "spec", "containers")
}

// installPlanChange: an InstallPlan that installs the operator's CSV
// "<gpuOperatorCSV>.v<version>" upgrades it to v<version> once approved:
// its approval (spec.approved false -> true), its creation already approved
// (OLM under automatic approval: approved at creation is an approval), and
// an approved plan whose operator CSV changes. Other InstallPlans, those
// not approved, and edits of an approved plan that keep its operator CSV
// change nothing.
func (s *Server) installPlanChange(req admission.Request, ch *gate.DriverChange) error {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(req.Object.Raw); err != nil {
		return fmt.Errorf("object: %w", err)
	}
	approved, _, err := unstructured.NestedBool(obj.Object, "spec", "approved")
	if err != nil {
		return fmt.Errorf("spec.approved: %w", err)
	}
	if !approved || obj.GetNamespace() != s.Config.GPUOperator.Namespace {
		return nil
	}
	v, i, err := s.operatorCSV(obj)
	if err != nil || v == "" {
		return err
	}
	if req.Operation == admissionv1.Update {
		old := &unstructured.Unstructured{}
		if err := old.UnmarshalJSON(req.OldObject.Raw); err != nil {
			return fmt.Errorf("oldObject: %w", err)
		}
		wasApproved, _, _ := unstructured.NestedBool(old.Object, "spec", "approved")
		// An unreadable old list counts as another CSV: judged.
		if oldV, _, err := s.operatorCSV(old); wasApproved && err == nil && oldV == v {
			return nil // approved before, for this very version: reviewed then
		}
	}
	ch.Annotations, ch.NewOperator = obj.GetAnnotations(), v
	ch.OperatorPath = field.NewPath("spec", "clusterServiceVersionNames").Index(i)
	return nil
}

// operatorCSV is the operator version ("v<version>") the InstallPlan
// installs and its index in spec.clusterServiceVersionNames ("" when it
// installs none); the last one counts, as OLM installs them all.
func (s *Server) operatorCSV(obj *unstructured.Unstructured) (string, int, error) {
	csvs, _, err := unstructured.NestedStringSlice(obj.Object, "spec", "clusterServiceVersionNames")
	if err != nil {
		return "", 0, fmt.Errorf("spec.clusterServiceVersionNames: %w", err)
	}
	v, at := "", 0
	for i, csv := range csvs {
		if rest, ok := strings.CutPrefix(csv, s.Config.GPUOperatorCSV+".v"); ok {
			v, at = "v"+rest, i
		}
	}
	return v, at, nil
}

// decideSubscription reduces a Subscription write to its package and
// approval (gate.DecideSubscription); spec.source and sourceNamespace do
// not matter: any catalog's GPU Operator is the GPU Operator.
func (s *Server) decideSubscription(req admission.Request) (gate.Decision, error) {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(req.Object.Raw); err != nil {
		return gate.Decision{}, fmt.Errorf("object: %w", err)
	}
	sr := gate.SubscriptionRequest{Object: "Subscription " + objectName(req), User: userOf(req), Changed: true}
	var err error
	if sr.Package, _, err = unstructured.NestedString(obj.Object, "spec", "name"); err != nil {
		return gate.Decision{}, fmt.Errorf("spec.name: %w", err)
	}
	if sr.Approval, sr.ApprovalSet, err = unstructured.NestedString(obj.Object, "spec", "installPlanApproval"); err != nil {
		return gate.Decision{}, fmt.Errorf("spec.installPlanApproval: %w", err)
	}
	if req.Operation == admissionv1.Update {
		old := &unstructured.Unstructured{}
		if err := old.UnmarshalJSON(req.OldObject.Raw); err != nil {
			return gate.Decision{}, fmt.Errorf("oldObject: %w", err)
		}
		sr.Changed = !equality.Semantic.DeepEqual(obj.Object["spec"], old.Object["spec"])
	}
	return gate.DecideSubscription(s.Config, sr), nil
}
