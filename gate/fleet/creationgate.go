package fleet

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Creation gates (issue 24 item 3): the switches a platform keeps to stop
// new GPU workloads being created (kube-dc: GPU_SHARED_CREATION_ENABLED and
// GPU_VM_CREATION_ENABLED in its manager Deployment's environment). A mode
// transition or a GPU upgrade starts only while every configured gate reads
// its closed value: otherwise a new holder can land on the node between the
// holder check and the step (gate/rule_creationgate.go).

// Creation gate kinds.
const (
	GateDeploymentEnv = "DeploymentEnv"
	GateConfigMapKey  = "ConfigMapKey"
)

// CreationGate is one configured gate: where it is kept and the value that
// means closed.
type CreationGate struct {
	// Name is what messages call it ("gpu-shared-creation").
	Name string `json:"name"`
	// Kind is DeploymentEnv (an environment variable of a Deployment's
	// container) or ConfigMapKey (a key of a ConfigMap's data).
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	// Name of the Deployment or ConfigMap.
	Object string `json:"object"`
	// Container (DeploymentEnv): the container whose environment holds it;
	// empty means the first container.
	Container string `json:"container,omitempty"`
	// Key is the environment variable (DeploymentEnv) or data key
	// (ConfigMapKey).
	Key string `json:"key"`
	// Closed is the exact value that means closed (kube-dc: "false"); any
	// other value, a missing key or object, or one that cannot be read is
	// open.
	Closed string `json:"closed"`
}

// Where names the gate's place for a message: "Deployment kube-dc/manager
// container manager env GPU_SHARED_CREATION_ENABLED".
func (g CreationGate) Where() string {
	if g.Kind == GateConfigMapKey {
		return fmt.Sprintf("ConfigMap %s/%s key %s", g.Namespace, g.Object, g.Key)
	}
	c := "its first container"
	if g.Container != "" {
		c = "container " + g.Container
	}
	return fmt.Sprintf("Deployment %s/%s %s env %s", g.Namespace, g.Object, c, g.Key)
}

// HowToClose is the command that closes the gate.
func (g CreationGate) HowToClose() string {
	if g.Kind == GateConfigMapKey {
		return fmt.Sprintf("kubectl -n %s patch configmap %s --type merge -p '{\"data\":{%q:%q}}'", g.Namespace, g.Object, g.Key, g.Closed)
	}
	c := ""
	if g.Container != "" {
		c = " -c " + g.Container
	}
	return fmt.Sprintf("kubectl -n %s set env deployment/%s%s %s=%s (or through the Git overlay that owns it)", g.Namespace, g.Object, c, g.Key, g.Closed)
}

// Validate checks the configured gate (gate.Config's creationGates).
func (g CreationGate) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if g.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), "a name for messages, e.g. gpu-shared-creation"))
	}
	switch g.Kind {
	case GateDeploymentEnv, GateConfigMapKey:
	default:
		errs = append(errs, field.NotSupported(path.Child("kind"), g.Kind, []string{GateDeploymentEnv, GateConfigMapKey}))
	}
	if msgs := validation.IsDNS1123Label(g.Namespace); len(msgs) > 0 {
		errs = append(errs, field.Invalid(path.Child("namespace"), g.Namespace, msgs[0]))
	}
	if msgs := validation.IsDNS1123Subdomain(g.Object); len(msgs) > 0 {
		errs = append(errs, field.Invalid(path.Child("object"), g.Object, "the Deployment's or ConfigMap's name: "+msgs[0]))
	}
	if g.Key == "" {
		errs = append(errs, field.Required(path.Child("key"), "the environment variable or data key, e.g. GPU_SHARED_CREATION_ENABLED"))
	}
	if g.Container != "" && g.Kind != GateDeploymentEnv {
		errs = append(errs, field.Invalid(path.Child("container"), g.Container, "only a DeploymentEnv gate names a container"))
	}
	if g.Closed == "" {
		errs = append(errs, field.Required(path.Child("closed"), `the value that means closed, e.g. "false"`))
	}
	return errs
}

// GateReading is a creation gate as read: its value, or why it could not
// be read (which counts as open).
type GateReading struct {
	Gate  CreationGate
	Value string
	Err   error
}

// Closed says whether the reading is the gate's closed value.
func (r GateReading) Closed() bool { return r.Err == nil && r.Value == r.Gate.Closed }

// ReadDeploymentGate reads a DeploymentEnv gate from its Deployment's pod
// template (nil: the Deployment does not exist). A value from valueFrom
// cannot be read here and counts as open.
func ReadDeploymentGate(g CreationGate, spec *corev1.PodSpec) GateReading {
	r := GateReading{Gate: g}
	if spec == nil {
		r.Err = fmt.Errorf("the Deployment does not exist")
		return r
	}
	for i, c := range spec.Containers {
		if (g.Container != "" || i != 0) && c.Name != g.Container {
			continue
		}
		if !hasEnv(c.Env, g.Key) {
			r.Err = fmt.Errorf("container %s has no env %s", c.Name, g.Key)
			return r
		}
		return readLast(r, c.Env, g.Key)
	}
	r.Err = fmt.Errorf("the Deployment has no container %q", g.Container)
	return r
}

// readLast takes the last entry of key in env (the one the container gets).
func readLast(r GateReading, env []corev1.EnvVar, key string) GateReading {
	for _, e := range env {
		if e.Name != key {
			continue
		}
		if e.ValueFrom != nil {
			r.Value, r.Err = "", fmt.Errorf("env %s is set from valueFrom, which the gate does not follow: set it as a plain value", key)
		} else {
			r.Value, r.Err = e.Value, nil
		}
	}
	return r
}

// ReadConfigMapGate reads a ConfigMapKey gate (nil: the ConfigMap does not
// exist).
func ReadConfigMapGate(g CreationGate, cm *corev1.ConfigMap) GateReading {
	r := GateReading{Gate: g}
	if cm == nil {
		r.Err = fmt.Errorf("the ConfigMap does not exist")
		return r
	}
	v, ok := cm.Data[g.Key]
	if !ok {
		r.Err = fmt.Errorf("the ConfigMap has no key %s", g.Key)
	}
	r.Value = v
	return r
}

func hasEnv(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}
