package gate

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// WorkloadWriteRequest is a CREATE or UPDATE, in a DRA driver's namespace,
// of anything else that runs Pods: a bare Pod (its ephemeral containers
// too), or a Deployment, ReplicaSet, ReplicationController, StatefulSet,
// Job or CronJob by its Pod template (DecideDRAWorkloadWrite).
type WorkloadWriteRequest struct {
	// Operation is OpCreate or OpUpdate.
	Operation string
	// Kind is the object's kind (Pod, Deployment, ...); Namespace and Name
	// name it.
	Kind, Namespace, Name string
	// Template is what its Pods run (a bare Pod's spec, without metadata:
	// a Pod's labels restart nothing), found at SpecPath in the object
	// (spec, spec.template.spec, spec.jobTemplate.spec.template.spec); Old
	// is the template before an UPDATE, nil for a CREATE.
	Template, Old *corev1.PodTemplateSpec
	SpecPath      *field.Path
	User          UserInfo
	// Plugins are the configured kubelet-plugin DaemonSets of the
	// namespace, as for a DaemonSet (DaemonSetWriteRequest.Plugins).
	Plugins []*appsv1.DaemonSet
}

// DecideDRAWorkloadWrite reviews a write of a Pod, or of a workload's Pod
// template, in a DRA driver's namespace (DRAPluginForged).
func DecideDRAWorkloadWrite(cfg *Config, req WorkloadWriteRequest) Decision {
	d := Decision{Object: req.Kind + " " + req.Namespace + "/" + req.Name}
	var f findings
	r := &workloadReview{req: req}
	r.kinds, r.cfg, r.user = kindsDRAWorkload, cfg, req.User
	applyTable(r, &f, &d)
	f.settle(&d)
	return d
}

type workloadReview struct {
	reviewBase
	req WorkloadWriteRequest
}

// podWrite is what DRAPluginForged reads of a write of anything that runs
// Pods in a DRA driver's namespace, a DaemonSet or another workload.
type podWrite struct {
	kind, namespace, name string
	spec                  *corev1.PodSpec
	specPath              *field.Path
	// kept: an UPDATE that leaves the Pod template as it was starts no
	// Pod anew.
	kept    bool
	plugins []*appsv1.DaemonSet
}

func (r *workloadReview) podWrite() podWrite {
	q := r.req
	return podWrite{kind: q.Kind, namespace: q.Namespace, name: q.Name, spec: &q.Template.Spec, specPath: q.SpecPath,
		kept: q.Old != nil && equality.Semantic.DeepEqual(*q.Old, *q.Template), plugins: q.Plugins}
}

func (r *daemonSetReview) podWrite() podWrite {
	ds := r.req.DaemonSet
	return podWrite{kind: "DaemonSet", namespace: ds.Namespace, name: ds.Name, spec: &ds.Spec.Template.Spec,
		specPath: field.NewPath("spec", "template", "spec"), kept: r.templateKept(), plugins: r.req.Plugins}
}

// reachesNode: a Pod that can reach the node's filesystem, where a kubelet
// plugin registers (a socket in the kubelet's plugins_registry, wherever
// its --root-dir puts it): a volume of any kind but the Pod's own
// (emptyDir, configMap, secret, projected, downwardAPI), so a hostPath, and
// a claim or CSI volume that may be bound to a node's directory too; a
// privileged container; or the node's PID namespace. The driver's
// controller Deployment, which runs the driver's image too, needs none of
// them.
func reachesNode(spec *corev1.PodSpec) bool {
	podOwn := func(v corev1.Volume) bool {
		s := v.VolumeSource
		return s.EmptyDir != nil || s.ConfigMap != nil || s.Secret != nil || s.Projected != nil || s.DownwardAPI != nil
	}
	if spec.HostPID || slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return !podOwn(v) }) {
		return true
	}
	privileged := func(sc *corev1.SecurityContext) bool { return sc != nil && sc.Privileged != nil && *sc.Privileged }
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		if privileged(c.SecurityContext) {
			return true
		}
	}
	for _, c := range spec.EphemeralContainers {
		if privileged(c.SecurityContext) {
			return true
		}
	}
	return false
}

// draController: user is one of the configured controllers of a DRA
// driver of namespace ns (config draDrivers[].controllers).
func (c *Config) draController(ns, user string) bool {
	for _, d := range c.DRADrivers {
		if d.Namespace == ns && slices.Contains(d.Controllers, user) {
			return true
		}
	}
	return false
}
