package gate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadConfig(t *testing.T) {
	t.Run("empty file gives the defaults", func(t *testing.T) {
		cfg, err := LoadConfig(nil)
		require.NoError(t, err)
		assert.Equal(t, DefaultConfig(), cfg)
		assert.Equal(t, 720*time.Hour, cfg.MaxCanaryAge.Duration)
		assert.Equal(t, 1, cfg.WaveSize)
	})
	t.Run("values override defaults", func(t *testing.T) {
		cfg, err := LoadConfig([]byte("waveSize: 4\nmaxCanaryAge: 1000h\nsucNamespaces: [system-upgrade, cattle-system]\n"))
		require.NoError(t, err)
		assert.Equal(t, 4, cfg.WaveSize)
		assert.Equal(t, 1000*time.Hour, cfg.MaxCanaryAge.Duration)
		assert.Equal(t, []string{"system-upgrade", "cattle-system"}, cfg.SUCNamespaces)
		assert.Equal(t, "gpu-upgrade-gate", cfg.Namespace)
	})
	t.Run("one proof key keeps the other proof defaults", func(t *testing.T) {
		cfg, err := LoadConfig([]byte("proof: {soak: 10m, disabled: [soak]}\n"))
		require.NoError(t, err)
		assert.Equal(t, 10*time.Minute, cfg.Proof.Soak.Duration)
		assert.Equal(t, []ProofRequirement{ProofSoak}, cfg.Proof.Off)
		assert.Equal(t, DefaultProofConfig().Validator, cfg.Proof.Validator)
		assert.Equal(t, DefaultProofConfig().HealthConditions, cfg.Proof.HealthConditions)
	})
	t.Run("separation and enforcement", func(t *testing.T) {
		cfg, err := LoadConfig(nil)
		require.NoError(t, err)
		assert.Equal(t, SeparationTwoPerson, cfg.Separation)
		assert.True(t, cfg.Enforcement.Enforcing())
		cfg, err = LoadConfig([]byte("separation: three-person\nenforcement: {webhooks: {plans.gpu-upgrade-gate.io: audit}}\n"))
		require.NoError(t, err)
		assert.Equal(t, SeparationThreePerson, cfg.Separation)
		assert.Equal(t, EnforcementEnforce, cfg.Enforcement.Mode, "a per-webhook mode keeps the gate-wide default")
		assert.Equal(t, EnforcementAudit, cfg.Enforcement.For("plans.gpu-upgrade-gate.io"))
		assert.Equal(t, EnforcementEnforce, cfg.Enforcement.For("jobs.gpu-upgrade-gate.io"))
		assert.False(t, cfg.Enforcement.Enforcing())
		cfg, err = LoadConfig([]byte("enforcement: {mode: warn, webhooks: {jobs.gpu-upgrade-gate.io: enforce}}\n"))
		require.NoError(t, err)
		assert.Equal(t, EnforcementWarn, cfg.Enforcement.For("plans.gpu-upgrade-gate.io"))
		assert.Equal(t, EnforcementEnforce, cfg.Enforcement.For("jobs.gpu-upgrade-gate.io"))
	})
	t.Run("approver aliases", func(t *testing.T) {
		cfg, err := LoadConfig([]byte("approverAliases: {m.novak: m.novak@corp.example}\n"))
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"m.novak": "m.novak@corp.example"}, cfg.ApproverAliases)
	})
	refused := []struct{ name, yaml, want string }{
		{"unknown key", "wavesize: 2\n", `unknown field "wavesize"`},
		{"zero max age", "maxCanaryAge: 0s\n", "maxCanaryAge: Invalid value: \"0s\""},
		{"negative max age", "maxCanaryAge: -1h\n", "maxCanaryAge"},
		{"max age above ceiling", "maxCanaryAge: 2161h\n", "at most 2160h0m0s"},
		{"bad duration", "maxCanaryAge: soon\n", "maxCanaryAge"},
		{"negative skew", "clockSkew: -1m\n", "clockSkew"},
		{"wave size 0", "waveSize: 0\n", "waveSize: Invalid value: 0"},
		{"bad vendor", "gpuVendors: [10DE]\n", "gpuVendors[0]"},
		{"bad runtime class", "gpuRuntimeClasses: [\"Nvidia GPU\"]\n", "gpuRuntimeClasses[0]"},
		{"no SUC namespaces", "sucNamespaces: []\n", "sucNamespaces: Required"},
		{"bad namespace", "namespace: Gate_NS\n", "namespace: Invalid value: \"Gate_NS\""},
		{"exemption matching everyone", "exemptions: [{name: all, resources: [plans]}]\n", "exemptions[0].users: Required value"},
		{"exemption by labels without an identity", "exemptions: [{name: rancher, resources: [plans], namespaces: [cattle-system], matchLabels: {rancher-managed: \"true\"}}]\n", "matchLabels and namespaces only narrow an exemption"},
		{"exemption with an empty user", "exemptions: [{name: x, resources: [nodes], users: [\"\"]}]\n", "exemptions[0].users[0]: Invalid value"},
		{"vendor that reads as a display class", "gpuVendors: [\"0302\"]\n", "gpuVendors[0]: Invalid value: \"0302\": is a PCI display class"},
		{"exemption for an unknown resource", "exemptions: [{name: x, resources: [pods], users: [u]}]\n", "exemptions[0].resources[0]: Unsupported value: \"pods\""},
		{"wrong type", "waveSize: two\n", "waveSize"},
		{"RKE2 image with a tag", "rke2Images: [rancher/rke2-upgrade:v1.36.1-rke2r1]\n", "rke2Images[0]: Invalid value: \"rancher/rke2-upgrade:v1.36.1-rke2r1\": expected an image repository without tag"},
		{"RKE2 image that does not parse", "rke2Images: [Rancher/RKE2]\n", "rke2Images[0]"},
		{"unknown proof key", "proof: {sok: 1m}\n", `unknown field "proof.sok"`},
		{"unknown proof requirement", "proof: {disabled: [allocations]}\n", `proof.disabled[0]: Unsupported value: "allocations"`},
		{"empty validator selector", "proof: {validator: {selector: \"\"}}\n", "proof.validator.selector: Required"},
		{"bad allocation selector", "proof: {allocationCheck: {selector: \"a in (b\"}}\n", "proof.allocationCheck.selector: Invalid value"},
		{"bad health status", "proof: {healthConditions: [{type: X, unhealthyStatus: maybe}]}\n", "proof.healthConditions[0].unhealthyStatus: Unsupported value"},
		{"negative soak", "proof: {soak: -1m}\n", "proof.soak"},
		{"approver alias to a blank username", "approverAliases: {bob: \" \"}\n", "approverAliases[bob]: Invalid value"},
		{"approver alias with spaces around the username", "approverAliases: {bob: \"bob@corp.example \"}\n", "approverAliases[bob]"},
		{"approver aliases not a map", "approverAliases: [bob]\n", "approverAliases"},
		{"unknown separation", "separation: two\n", `separation: Unsupported value: "two": supported values: "two-person", "three-person"`},
		{"unknown enforcement mode", "enforcement: {mode: dryrun}\n", `enforcement.mode: Unsupported value: "dryrun": supported values: "enforce", "warn", "audit"`},
		{"unknown per-webhook mode", "enforcement: {webhooks: {jobs.gpu-upgrade-gate.io: disabled}}\n", `enforcement.webhooks[jobs.gpu-upgrade-gate.io]: Unsupported value: "disabled"`},
		{"per-webhook mode keyed by a path", "enforcement: {webhooks: {/validate/jobs: audit}}\n", `enforcement.webhooks[/validate/jobs]: Invalid value: "/validate/jobs": expected a webhook name of the gate`},
		{"unknown enforcement key", "enforcement: {modes: audit}\n", `unknown field "enforcement.modes"`},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig([]byte(tc.yaml))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
