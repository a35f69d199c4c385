package gate

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// kubeDCGates are kube-dc's two creation gates, kept as its manager
// Deployment's environment.
var kubeDCGates = []CreationGate{
	{Name: "gpu-shared-creation", Kind: GateDeploymentEnv, Namespace: "kube-dc", Object: "kube-dc-manager", Key: "GPU_SHARED_CREATION_ENABLED", Closed: "false"},
	{Name: "gpu-vm-creation", Kind: GateDeploymentEnv, Namespace: "kube-dc", Object: "kube-dc-manager", Key: "GPU_VM_CREATION_ENABLED", Closed: "false"},
}

// withGates configures kube-dc's gates on s, each read with the value given
// ("" for closed).
func withGates(s *scenario, shared, vm string) {
	s.cfg.CreationGates = kubeDCGates
	spec := &corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Env: []corev1.EnvVar{
		{Name: "GPU_SHARED_CREATION_ENABLED", Value: or(shared, "false")}, {Name: "GPU_VM_CREATION_ENABLED", Value: or(vm, "false")}}}}}
	s.cluster.CreationGates = []GateReading{ReadDeploymentGate(kubeDCGates[0], spec), ReadDeploymentGate(kubeDCGates[1], spec)}
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// TestCreationGateOpen (issue 24 item 3): a mode transition and every start
// of a GPU upgrade are refused while a configured creation gate is open or
// unreadable; closed gates, and writes that start neither, are allowed.
func TestCreationGateOpen(t *testing.T) {
	for _, tc := range []struct {
		name   string
		decide func(t *testing.T, gates func(*scenario)) Decision
	}{
		{"a Plan that moves GPU nodes", func(t *testing.T, gates func(*scenario)) Decision {
			s := safeScenario(t)
			gates(s)
			return s.decide()
		}},
		{"SUC's Job start on a GPU node", func(t *testing.T, gates func(*scenario)) Decision {
			s := safeStep(t)
			gates(s.scenario)
			return s.decide(nil)
		}},
		{"a driver change", func(t *testing.T, gates func(*scenario)) Decision {
			s := safeDriverScenario(t)
			gates(s.scenario)
			return s.decide()
		}},
		{"the driver's per-node step", func(t *testing.T, gates func(*scenario)) Decision {
			s := safeDriverStepScenario(t)
			gates(s.scenario)
			return s.prepareDriverStep(s.step).Decide(nil, nil)
		}},
		{"a person's mode change", func(t *testing.T, gates func(*scenario)) Decision {
			s, old, n := nodeScenario(t)
			gates(s)
			n.Labels[LabelExpectedWorkloadMode] = "vm-passthrough"
			return decideNode(s, old, n)
		}},
		{"nfd-master's mode step", func(t *testing.T, gates func(*scenario)) Decision {
			s, old, n := nodeScenario(t)
			gates(s)
			modeTriple(n, "vm-passthrough", "vm-passthrough")
			return PrepareNode(s.cfg, s.cluster, NodeRequest{Node: n, OldNode: old, User: nfdMaster, Now: s.req.Now}).Decide(s.holders, nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			closed := tc.decide(t, func(s *scenario) { withGates(s, "", "") })
			require.True(t, closed.Allowed, "both gates closed: %s", closed.Message())
			none := tc.decide(t, func(*scenario) {})
			require.True(t, none.Allowed, "no gates configured (the default): %s", none.Message())

			open := tc.decide(t, func(s *scenario) { withGates(s, "", "true") })
			assert.Equal(t, []Code{CodeCreationGateOpen}, open.Codes(), open.Message())
			assert.Contains(t, open.Message(), `creation gate gpu-vm-creation (Deployment kube-dc/kube-dc-manager its first container env GPU_VM_CREATION_ENABLED) reads "true", expected "false" (closed)`)
			assert.Contains(t, open.Message(), "kubectl -n kube-dc set env deployment/kube-dc-manager GPU_VM_CREATION_ENABLED=false")
			assert.NotContains(t, open.Message(), "gpu-shared-creation", "a closed gate is not named")

			unread := tc.decide(t, func(s *scenario) {
				withGates(s, "", "")
				s.cluster.CreationGates[0] = GateReading{Gate: kubeDCGates[0], Err: errors.New("deployments.apps is forbidden")}
			})
			assert.Equal(t, []Code{CodeCreationGateOpen}, unread.Codes(), unread.Message())
			assert.Contains(t, unread.Message(), "cannot be read (deployments.apps is forbidden), which counts as open")

			notRead := tc.decide(t, func(s *scenario) { withGates(s, "", ""); s.cluster.CreationGates = nil })
			assert.Equal(t, []Code{CodeCreationGateOpen}, notRead.Codes(), "a gate its source did not read is open: %s", notRead.Message())
		})
	}
	t.Run("a Node write that starts neither is allowed with the gates open", func(t *testing.T) {
		s, old, n := nodeScenario(t)
		withGates(s, "true", "true")
		n.Labels["team"] = "ml"
		d := decideNode(s, old, n)
		assert.True(t, d.Allowed, d.Message())
	})
}

func TestReadCreationGates(t *testing.T) {
	dep := CreationGate{Name: "g", Kind: GateDeploymentEnv, Namespace: "kube-dc", Object: "m", Container: "manager", Key: "K", Closed: "false"}
	spec := func(env ...corev1.EnvVar) *corev1.PodSpec {
		return &corev1.PodSpec{Containers: []corev1.Container{{Name: "sidecar", Env: []corev1.EnvVar{{Name: "K", Value: "false"}}}, {Name: "manager", Env: env}}}
	}
	for _, tc := range []struct {
		name   string
		got    GateReading
		closed bool
		err    string
	}{
		{"closed", ReadDeploymentGate(dep, spec(corev1.EnvVar{Name: "K", Value: "false"})), true, ""},
		{"open", ReadDeploymentGate(dep, spec(corev1.EnvVar{Name: "K", Value: "true"})), false, ""},
		{"the last entry wins, as in the container", ReadDeploymentGate(dep, spec(corev1.EnvVar{Name: "K", Value: "false"}, corev1.EnvVar{Name: "K", Value: "True"})), false, ""},
		{"missing env counts as open", ReadDeploymentGate(dep, spec()), false, "container manager has no env K"},
		{"valueFrom is not followed", ReadDeploymentGate(dep, spec(corev1.EnvVar{Name: "K", ValueFrom: &corev1.EnvVarSource{}})), false, "valueFrom"},
		{"no Deployment", ReadDeploymentGate(dep, nil), false, "does not exist"},
		{"no such container", ReadDeploymentGate(CreationGate{Kind: GateDeploymentEnv, Container: "x", Key: "K", Closed: "false"}, spec()), false, `no container "x"`},
		{"ConfigMap closed", ReadConfigMapGate(CreationGate{Kind: GateConfigMapKey, Key: "k", Closed: "off"}, &corev1.ConfigMap{Data: map[string]string{"k": "off"}}), true, ""},
		{"ConfigMap key missing", ReadConfigMapGate(CreationGate{Kind: GateConfigMapKey, Key: "k", Closed: "off"}, &corev1.ConfigMap{}), false, "no key k"},
		{"no ConfigMap", ReadConfigMapGate(CreationGate{Kind: GateConfigMapKey, Key: "k", Closed: "off"}, nil), false, "does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.closed, tc.got.Closed())
			if tc.err != "" {
				require.Error(t, tc.got.Err)
				assert.Contains(t, tc.got.Err.Error(), tc.err)
			}
		})
	}
}

func TestCreationGatesConfig(t *testing.T) {
	cfg, err := LoadConfig([]byte("creationGates:\n- {name: gpu-shared-creation, kind: DeploymentEnv, namespace: kube-dc, object: kube-dc-manager, key: GPU_SHARED_CREATION_ENABLED, closed: \"false\"}\n"))
	require.NoError(t, err)
	assert.Equal(t, kubeDCGates[:1], cfg.CreationGates)
	assert.Empty(t, DefaultConfig().CreationGates, "no gates by default: existing installs do not change")
	_, err = LoadConfig([]byte("creationGates:\n- {name: g, kind: Env, namespace: kube-dc, object: m, key: K}\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `creationGates[0].kind: Unsupported value: "Env"`)
	assert.Contains(t, err.Error(), "creationGates[0].closed: Required value")
}
