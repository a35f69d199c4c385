package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// GroupName is the API group of SUC Plans.
	GroupName = "upgrade.cattle.io"
	// Version is the only (served and storage) version of the group.
	Version = "v1"

	// PlanResource is the plural resource name of Plans.
	PlanResource = "plans"
	// PlanKind is the kind of a Plan.
	PlanKind = "Plan"
	// PlanListKind is the kind of a list of Plans.
	PlanListKind = "PlanList"
)

// Labels and annotations SUC reads or writes.
const (
	// LabelPlanPrefix prefixes the per-plan node label plan.upgrade.cattle.io/<plan-name>.
	// On a node it holds the status.latestHash last applied there; the value
	// LabelPlanValueDisabled opts the node out of the Plan. Use LabelPlanName to build the key.
	LabelPlanPrefix = "plan." + GroupName + "/"
	// LabelPlanValueDisabled is the plan.upgrade.cattle.io/<plan> node label value that opts a node out.
	LabelPlanValueDisabled = "disabled"
	// LabelHostname is the node label SUC requires on selected nodes; status.applying holds its values
	// and Jobs are pinned to nodes by it.
	LabelHostname = "kubernetes.io/hostname"

	// LabelController is set on Jobs and their pods to the controller name.
	LabelController = GroupName + "/controller"
	// LabelNode is set on Jobs and their pods to the node name (not the hostname label).
	LabelNode = GroupName + "/node"
	// LabelPlan is set on Jobs and their pods to the Plan name.
	LabelPlan = GroupName + "/plan"
	// LabelVersion is set on Jobs and their pods to status.latestVersion.
	LabelVersion = GroupName + "/version"
	// LabelExclusive is set on Jobs and their pods to "true" or "false" (spec.exclusive).
	LabelExclusive = GroupName + "/exclusive"

	// AnnotationDigest lists extra comma-separated spec paths (e.g. spec.upgrade.envs) that SUC
	// folds into status.latestHash.
	AnnotationDigest = GroupName + "/digest"
	// AnnotationTTLSecondsAfterFinished is set on Jobs.
	AnnotationTTLSecondsAfterFinished = GroupName + "/ttl-seconds-after-finished"
)

// LabelPlanName returns the per-plan node label key plan.upgrade.cattle.io/<plan>.
func LabelPlanName(plan string) string {
	return LabelPlanPrefix + plan
}

var (
	// SchemeGroupVersion is the group version used to register these objects.
	SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

	// SchemeBuilder collects the functions that add this group's types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds Plan and PlanList to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource takes an unqualified resource and returns a group-qualified GroupResource.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

// Kind takes an unqualified kind and returns a group-qualified GroupKind.
func Kind(kind string) schema.GroupKind {
	return SchemeGroupVersion.WithKind(kind).GroupKind()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&Plan{},
		&PlanList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
