package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// InstallPlanGVK is OLM's InstallPlan, read as unstructured.
var InstallPlanGVK = schema.GroupVersionKind{Group: "operators.coreos.com", Version: "v1alpha1", Kind: "InstallPlan"}

// decideOperator reviews an upgrade of the GPU Operator itself: the image of
// its Deployment (as `helm upgrade` writes it), or the approval of an OLM
// InstallPlan that installs a new version (contract: driver.md). A new
// operator version is part of every GPU node's tuple at once.
func (s *Server) decideOperator(ctx context.Context, req admission.Request) (gate.Decision, error) {
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

// installPlanChange: approving (spec.approved false -> true) an InstallPlan
// that installs the operator's CSV "<gpuOperatorCSV>.v<version>" upgrades
// it to v<version>; other InstallPlans and edits change nothing.
func (s *Server) installPlanChange(req admission.Request, ch *gate.DriverChange) error {
	obj, old := &unstructured.Unstructured{}, &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(req.Object.Raw); err != nil {
		return fmt.Errorf("object: %w", err)
	}
	if err := old.UnmarshalJSON(req.OldObject.Raw); err != nil {
		return fmt.Errorf("oldObject: %w", err)
	}
	approved, _, _ := unstructured.NestedBool(obj.Object, "spec", "approved")
	wasApproved, _, _ := unstructured.NestedBool(old.Object, "spec", "approved")
	if !approved || wasApproved || obj.GetNamespace() != s.Config.GPUOperator.Namespace {
		return nil
	}
	csvs, _, err := unstructured.NestedStringSlice(obj.Object, "spec", "clusterServiceVersionNames")
	if err != nil {
		return fmt.Errorf("spec.clusterServiceVersionNames: %w", err)
	}
	for i, csv := range csvs {
		if v, ok := strings.CutPrefix(csv, s.Config.GPUOperatorCSV+".v"); ok {
			ch.Annotations, ch.NewOperator = obj.GetAnnotations(), "v"+v
			ch.OperatorPath = field.NewPath("spec", "clusterServiceVersionNames").Index(i)
		}
	}
	return nil
}
