package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Condition types the SUC controller writes into Plan.Status.Conditions.
const (
	// PlanLatestResolved indicates that the latest version as per the spec has been determined
	// (reason Version when spec.version is set, Channel when resolved from spec.channel, Error
	// when neither is set).
	PlanLatestResolved = "LatestResolved"
	// PlanSpecValidated indicates that the controller's own validation accepted the spec. It is
	// only set after admission; Jobs are generated only when it and PlanLatestResolved are True.
	PlanSpecValidated = "Validated"
	// PlanComplete indicates that the latest version of the plan has completed on all selected nodes.
	PlanComplete = "Complete"
)

// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.upgrade.image`
// +kubebuilder:printcolumn:name="Channel",type=string,JSONPath=`.spec.channel`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="Complete",type=string,JSONPath=`.status.conditions[?(@.type=='Complete')].status`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.message!='')].message`
// +kubebuilder:printcolumn:name="Applying",type=string,JSONPath=`.status.applying`,priority=10
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Plan represents a set of Jobs to apply an upgrade (or other operation) to set of Nodes.
//
// Plans are namespaced; the controller only acts on Plans in its own namespace
// (SYSTEM_UPGRADE_CONTROLLER_NAMESPACE, system-upgrade upstream).
type Plan struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PlanSpec   `json:"spec,omitempty"`
	Status PlanStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// PlanList is a list of Plans.
type PlanList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Plan `json:"items"`
}

// PlanSpec represents the user-configurable details of a Plan.
type PlanSpec struct {
	// The maximum number of concurrent nodes to apply this update on.
	// Per Plan only (no cluster-wide limit). Omitted, 0 or negative: no node is ever selected
	// and the Plan goes Complete without doing anything. Nodes already in status.applying are
	// kept even when concurrency is lowered.
	Concurrency int64 `json:"concurrency,omitempty"`
	// Sets ActiveDeadlineSeconds on Jobs generated to apply this Plan.
	// If the Job does not complete within this time, the Plan will stop processing until it is updated to trigger a redeploy.
	// If set to 0, Jobs have no deadline. If not set, the controller default value is used.
	JobActiveDeadlineSecs *int64 `json:"jobActiveDeadlineSecs,omitempty"`
	// Select which nodes this plan can be applied to.
	// nil (omitted/null) selects NO node; an empty selector ({}) selects EVERY node.
	// The controller further requires the kubernetes.io/hostname label and excludes nodes whose
	// label plan.upgrade.cattle.io/<plan> is "disabled" or already equals status.latestHash.
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	// The service account for the pod to use. As with normal pods, if not specified the default service account from the namespace will be assigned.
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// A URL that returns HTTP 302 with the last path element of the value returned in the Location header assumed to be an image tag (after munging "+" to "-").
	// Ignored (not polled) when Version is set.
	Channel string `json:"channel,omitempty"`
	// Providing a value for version will prevent polling/resolution of the channel if specified.
	// Version wins over Channel; status.latestVersion is Version with "+" replaced by "-".
	// Changing the resolved version mid-rollout deletes in-flight Jobs.
	Version string `json:"version,omitempty"`
	// Secrets to be mounted into the Job Pod.
	Secrets []SecretSpec `json:"secrets,omitempty"`
	// Specify which node taints should be tolerated by pods applying the upgrade.
	// Anything specified here is appended to the default of:
	// - `{key: node.kubernetes.io/unschedulable, effect: NoSchedule, operator: Exists}`
	// No other taint (e.g. nvidia.com/gpu) is tolerated unless listed here.
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// Jobs for exclusive plans cannot be run alongside any other exclusive plan.
	// This is pod anti-affinity per node, not cluster-wide serialisation.
	Exclusive bool `json:"exclusive,omitempty"`
	// A time window in which to execute Jobs for this Plan.
	// Jobs will not be generated outside this time window, but may continue executing into the window once started.
	Window *TimeWindowSpec `json:"window,omitempty"`
	// The prepare init container, if specified, is run before cordon/drain which is run before the upgrade container.
	Prepare *ContainerSpec `json:"prepare,omitempty"`
	// The upgrade container; must be specified.
	Upgrade *ContainerSpec `json:"upgrade"`
	// If Cordon is true, the node is cordoned before the upgrade container is run.
	// If drain is specified, the value for cordon is ignored, and the node is cordoned.
	// If neither drain nor cordon are specified and the node is marked as schedulable=false it will not be marked as schedulable=true when the Job completes.
	Cordon bool `json:"cordon,omitempty"`
	// Configuration for draining nodes prior to upgrade. If left unspecified, no drain will be performed.
	// A non-nil Drain implies cordon.
	Drain *DrainSpec `json:"drain,omitempty"`
	// Image Pull Secrets, used to pull images for the Job.
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// Time after a Job for one Node is complete before a new Job will be created for the next Node.
	PostCompleteDelay *metav1.Duration `json:"postCompleteDelay,omitempty"`
	// Priority Class Name of Job, if specified.
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// Label key-value pairs to apply to a node when the job for this plan completes successfully.
	// Values may contain `$(LATEST_HASH)` or `$(LATEST_VERSION)`, which will be expanded from the plan status.
	PostCompleteLabels map[string]string `json:"postCompleteLabels,omitempty"`
}

// PlanStatus represents the resulting state from processing Plan events.
// Only the controller writes it (plans/status subresource).
type PlanStatus struct {
	// `LatestResolved` indicates that the latest version as per the spec has been determined.
	// `Validated` indicates that the plan spec has been validated.
	// `Complete` indicates that the latest version of the plan has completed on all selected nodes. If any Jobs for the Plan fail to complete, this condition will remain false, and the reason and message will reflect the source of the error.
	// +optional
	// +patchMergeKey=type
	// +patchStrategy=merge
	// +listType=map
	// +listMapKey=type
	Conditions []GenericCondition `json:"conditions,omitempty"`

	// The latest version, as resolved from .spec.version, or the channel server ("+" munged to "-").
	LatestVersion string `json:"latestVersion,omitempty"`
	// The hash of the most recently applied plan .spec.
	LatestHash string `json:"latestHash,omitempty"`
	// List of Node names that the Plan is currently being applied on.
	// The values are the nodes' kubernetes.io/hostname label values (node name only as a
	// fallback), ordered by node name; they differ from node names where the label does.
	Applying []string `json:"applying,omitempty"`
}

// ContainerSpec is a simplified container template spec, used to configure the prepare and upgrade
// containers of the Job Pod.
type ContainerSpec struct {
	// Image name. If the tag is omitted, the value from .status.latestVersion will be used.
	// +kubebuilder:validation:Required
	Image   string   `json:"image"`
	Command []string `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	// Env is serialised as "envs" (not "env").
	Env             []corev1.EnvVar         `json:"envs,omitempty"`
	EnvFrom         []corev1.EnvFromSource  `json:"envFrom,omitempty"`
	Volumes         []VolumeSpec            `json:"volumes,omitempty"`
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`
}

// VolumeSpec is a HostPath volume to mount into the pod.
type VolumeSpec struct {
	// Name of the Volume as it will appear within the Pod spec.
	// +kubebuilder:validation:Required
	Name string `json:"name"`
	// Path on the host to mount.
	// +kubebuilder:validation:Required
	Source string `json:"source"`
	// Path to mount the Volume at within the Pod.
	// +kubebuilder:validation:Required
	Destination string `json:"destination"`
}

// DrainSpec encapsulates kubectl drain parameters minus node/pod selectors. See:
// - https://kubernetes.io/docs/tasks/administer-cluster/safely-drain-node/
// - https://kubernetes.io/docs/reference/generated/kubectl/kubectl-commands#drain
type DrainSpec struct {
	// If a string, this is passed through directly to the `kubectl drain` command.
	// If an int, this represents the duration as a count of nanoseconds, and will be converted to a duration string when passed to the `kubectl drain` command.
	// An int is an int32, i.e. at most ~2.1s; larger integers pass the CRD but fail to decode.
	Timeout                  *intstr.IntOrString   `json:"timeout,omitempty"`
	GracePeriod              *int32                `json:"gracePeriod,omitempty"`
	DeleteLocalData          *bool                 `json:"deleteLocalData,omitempty"`
	DeleteEmptydirData       *bool                 `json:"deleteEmptydirData,omitempty"`
	IgnoreDaemonSets         *bool                 `json:"ignoreDaemonSets,omitempty"`
	Force                    bool                  `json:"force,omitempty"`
	DisableEviction          bool                  `json:"disableEviction,omitempty"`
	SkipWaitForDeleteTimeout int                   `json:"skipWaitForDeleteTimeout,omitempty"`
	PodSelector              *metav1.LabelSelector `json:"podSelector,omitempty"`
}

// SecretSpec describes a Secret to be mounted for prepare/upgrade containers.
type SecretSpec struct {
	// Secret name
	// +kubebuilder:validation:Required
	Name string `json:"name"`
	// Path to mount the Secret volume within the Pod.
	// +kubebuilder:validation:Required
	Path string `json:"path"`
	// If set to true, the Secret contents will not be hashed, and changes to the Secret will not trigger new application of the Plan.
	IgnoreUpdates bool `json:"ignoreUpdates,omitempty"`
	// Mode to mount the Secret volume with.
	// +kubebuilder:validation:Optional
	DefaultMode *int32 `json:"defaultMode,omitempty"`
}

// Day is a day of the week in a TimeWindowSpec: "0".."6" (Sunday first) or the
// English name, its 2- or 3-letter abbreviation, in lower case.
// +kubebuilder:validation:Enum={"0","su","sun","sunday","1","mo","mon","monday","2","tu","tue","tuesday","3","we","wed","wednesday","4","th","thu","thursday","5","fr","fri","friday","6","sa","sat","saturday"}
type Day string

// TimeWindowSpec describes a time window in which a Plan should be processed.
type TimeWindowSpec struct {
	// Days that this time window is valid for
	// +kubebuilder:validation:MinItems=1
	Days []Day `json:"days,omitempty"`
	// Start of the time window.
	StartTime string `json:"startTime,omitempty"`
	// End of the time window.
	EndTime string `json:"endTime,omitempty"`
	// Time zone for the time window; if not specified UTC will be used.
	TimeZone string `json:"timeZone,omitempty"`
}

// GenericCondition mirrors github.com/rancher/wrangler/v3/pkg/genericcondition.GenericCondition,
// the condition type SUC uses in PlanStatus.
type GenericCondition struct {
	// Type of cluster condition.
	Type string `json:"type"`
	// Status of the condition, one of True, False, Unknown.
	Status corev1.ConditionStatus `json:"status"`
	// The last time this condition was updated (RFC3339 string).
	LastUpdateTime string `json:"lastUpdateTime,omitempty"`
	// Last time the condition transitioned from one status to another (RFC3339 string).
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
	// The reason for the condition's last transition.
	Reason string `json:"reason,omitempty"`
	// Human-readable message indicating details about last transition
	Message string `json:"message,omitempty"`
}
