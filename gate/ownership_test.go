package gate

import (
	goflag "flag"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

var updateDocs = goflag.Bool("update", false, "rewrite docs/ownership.md's generated table from the ownership table")

// Identities as the API server authenticates them.
var (
	sucSA   = UserInfo{Name: "system:serviceaccount:system-upgrade:system-upgrade", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:system-upgrade", "system:authenticated"}}
	nfdSA   = UserInfo{Name: "system:serviceaccount:node-feature-discovery:nfd-node-feature-discovery", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:node-feature-discovery", "system:authenticated"}}
	opSA    = UserInfo{Name: "system:serviceaccount:gpu-operator:gpu-operator", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:gpu-operator", "system:authenticated"}}
	migSA   = UserInfo{Name: "system:serviceaccount:gpu-operator:nvidia-mig-manager", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:gpu-operator", "system:authenticated"}}
	aliceID = UserInfo{Name: "alice", Groups: []string{"platform", "system:authenticated"}}
)

const madeUpPCI = "feature.node.kubernetes.io/pci-10de_0000_10de_0000.present"

// TestOwnedFactWritten (issue 22 item 1, attacks 2, 5, 7): for each owned
// fact family, its owner's write is let through (exempt, named) and anyone
// else's is refused, naming the fact, the value, the owner and what to do
// instead; inputs stay judged by the rules that read them; a CPU-only node's
// labels are nobody's business.
func TestOwnedFactWritten(t *testing.T) {
	for _, tc := range []struct {
		name      string
		node      string // default gpu-v100-01, cordoned, no holders
		user      UserInfo
		mutate    func(old, n *corev1.Node)
		want      []Code
		exemption string
		detail    []string // in the OwnedFactWritten blocker
	}{
		// NFD's labels (attack 2).
		{name: "a person adds a made-up second NVIDIA PCI identity", user: aliceID,
			mutate: func(_, n *corev1.Node) { n.Labels[madeUpPCI] = "true" },
			want:   []Code{CodeOwnedFactWritten}, detail: []string{madeUpPCI, `set to "true"`, "nfd-labels", "exemption nfd (groups system:serviceaccounts:node-feature-discovery)", "NodeFeatureRule"}},
		{name: "nfd-master writes the same label", user: nfdSA,
			mutate: func(_, n *corev1.Node) { n.Labels[madeUpPCI] = "true" }, exemption: "nfd"},
		{name: "a person adds GPU identity to a CPU node", node: "cpu-01", user: aliceID,
			mutate: func(_, n *corev1.Node) { n.Labels["feature.node.kubernetes.io/pci-10de.present"] = "true" },
			want:   []Code{CodeOwnedFactWritten}, detail: []string{"feature.node.kubernetes.io/pci-10de.present"}},
		{name: "a person changes NFD's kernel label", user: aliceID,
			mutate: func(_, n *corev1.Node) { n.Labels[labelKernelFull] = "6.8.0-200-generic" },
			want:   []Code{CodeOwnedFactWritten}, detail: []string{"changed from", "6.8.0-200-generic"}},
		// GFD's labels (attack 5): published by nfd-master.
		{name: "a person overwrites GFD's driver version", user: aliceID,
			mutate: func(_, n *corev1.Node) { n.Labels[labelDriverFull] = "999.1.2" },
			want:   []Code{CodeOwnedFactWritten}, detail: []string{labelDriverFull, "gfd-labels", "let GFD rewrite it"}},
		{name: "nfd-master writes GFD's driver version", user: nfdSA,
			mutate: func(_, n *corev1.Node) { n.Labels[labelDriverFull] = "580.126.20" }, exemption: "nfd"},
		{name: "the GPU Operator's bundled NFD writes it", user: opSA,
			mutate: func(_, n *corev1.Node) { n.Labels[labelDriverFull] = "580.126.20" }, exemption: "gpu-operator"},
		// The GPU Operator's state labels.
		{name: "a person sets the driver upgrade state", user: aliceID,
			mutate: func(_, n *corev1.Node) { n.Labels[LabelDriverUpgradeState] = "upgrade-required" },
			want:   []Code{CodeOwnedFactWritten}, detail: []string{"gpu-operator-state", "exemption gpu-operator"}},
		{name: "the MIG manager writes mig.config.state", user: migSA,
			mutate: func(_, n *corev1.Node) { n.Labels["nvidia.com/mig.config.state"] = "success" }, exemption: "gpu-operator"},
		// SUC's plan labels.
		{name: "a person marks a node done for a Plan", user: aliceID,
			mutate: func(_, n *corev1.Node) { n.Labels[upgradev1.LabelPlanName("rke2")] = "0123abcd" },
			want:   []Code{CodeOwnedFactWritten}, detail: []string{"suc-plan-labels", "ask SUC through the Plan"}},
		{name: "a person opts a node out of a Plan (SUC's documented right)", user: aliceID,
			mutate: func(_, n *corev1.Node) { n.Labels[upgradev1.LabelPlanName("rke2")] = "disabled" }},
		{name: "a person opts it back in", user: aliceID,
			mutate: func(old, n *corev1.Node) { old.Labels[upgradev1.LabelPlanName("rke2")] = "disabled" }},
		{name: "a person removes a done label (SUC selects the node again)", user: aliceID,
			mutate: func(old, n *corev1.Node) { old.Labels[upgradev1.LabelPlanName("rke2")] = "0123abcd" }},
		{name: "SUC's controller marks it done", user: sucSA,
			mutate: func(_, n *corev1.Node) { n.Labels[upgradev1.LabelPlanName("rke2")] = "0123abcd" }, exemption: "suc"},
		{name: "SUC's Job cordons it", user: sucSA,
			mutate: func(old, n *corev1.Node) { old.Spec.Unschedulable, n.Spec.Unschedulable = false, true }, exemption: "suc"},
		// The kubelet's hostname label.
		{name: "a person rewrites kubernetes.io/hostname", user: aliceID,
			mutate: func(_, n *corev1.Node) { n.Labels[upgradev1.LabelHostname] = "elsewhere" },
			want:   []Code{CodeOwnedFactWritten}, detail: []string{"hostname", "no configured exemption lists hostname"}},
		// Attack 7: SUC's ServiceAccount (any Plan's Job runs as it) writes a
		// mode label of a busy, schedulable GPU node: the mode rules judge it.
		{name: "SUC's ServiceAccount switches a schedulable node's mode", user: sucSA,
			mutate: func(old, n *corev1.Node) {
				old.Spec.Unschedulable, n.Spec.Unschedulable = false, false
				n.Labels[LabelWorkloadConfig] = "vm-passthrough"
			}, want: []Code{CodeModeChangeNotCordoned, CodeModeLabelsInconsistent}},
		{name: "SUC's ServiceAccount adds a PCI identity", user: sucSA,
			mutate: func(_, n *corev1.Node) { n.Labels[madeUpPCI] = "true" }, want: []Code{CodeOwnedFactWritten}},
		{name: "SUC's plan label and a mode label in one write: reviewed whole", user: sucSA,
			mutate: func(old, n *corev1.Node) {
				old.Spec.Unschedulable, n.Spec.Unschedulable = false, false
				n.Labels[upgradev1.LabelPlanName("rke2")] = "0123abcd"
				n.Labels[LabelExpectedWorkloadMode] = "vm-passthrough"
			}, want: []Code{CodeModeChangeNotCordoned}},
		{name: "a GPU Operator operand writes a mode label: judged", user: opSA,
			mutate: func(old, n *corev1.Node) {
				old.Spec.Unschedulable, n.Spec.Unschedulable = false, false
				n.Labels[LabelExpectedWorkloadMode] = "vm-passthrough"
			}, want: []Code{CodeModeChangeNotCordoned}},
		// Inputs stay people's, judged by the mode rules, never the new code.
		{name: "a person's mig.config on a GPU node", user: aliceID,
			mutate: func(_, n *corev1.Node) { n.Labels["nvidia.com/mig.config"] = "all-1g.10gb" }},
		{name: "a person's gpu.deploy opt-out", user: aliceID,
			mutate: func(_, n *corev1.Node) { n.Labels["nvidia.com/gpu.deploy.dcgm-exporter"] = "false" }},
		{name: "a person's mode change on an uncordoned node: the mode rule", user: aliceID,
			mutate: func(old, n *corev1.Node) {
				old.Spec.Unschedulable, n.Spec.Unschedulable = false, false
				n.Labels[LabelExpectedWorkloadMode] = "vm-passthrough"
			}, want: []Code{CodeModeChangeNotCordoned}},
		// Labels outside the table are nobody's.
		{name: "a person's team label", user: aliceID, mutate: func(_, n *corev1.Node) { n.Labels["team"] = "ml" }},
		{name: "a CPU node's NFD labels are not guarded", node: "cpu-01", user: aliceID,
			mutate: func(_, n *corev1.Node) { n.Labels[labelKernelFull] = "6.8.0-200-generic"; n.Labels["team"] = "ml" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, old, _ := nodeScenario(t)
			if tc.node != "" {
				old = s.node(tc.node)
			}
			n := old.DeepCopy()
			tc.mutate(old, n)
			s.req.User = tc.user
			d := decideNode(s, old, n)
			assert.Equal(t, tc.want, d.Codes(), "%s %v", d.Message(), changedLabels(n, old))
			assert.Equal(t, len(tc.want) == 0, d.Allowed)
			assert.Equal(t, tc.exemption, d.AuditAnnotations()[AuditExemption])
			for _, b := range d.Blockers {
				if b.Code == CodeOwnedFactWritten {
					for _, s := range tc.detail {
						assert.Contains(t, b.Err.Detail, s)
					}
				}
			}
		})
	}
}

// TestOwnershipTableKeys: no label key belongs to two facts, so an
// exemption's facts and the match condition agree on every key.
func TestOwnershipTableKeys(t *testing.T) {
	for _, k := range []string{madeUpPCI, labelKernelFull, labelDriverFull, "nvidia.com/cuda.driver.major", "nvidia.com/gpu.product",
		"nvidia.com/mig-1g.10gb.count", labelGPUPresent, LabelDriverUpgradeState, "nvidia.com/mig.config.state", "nvidia.com/mig.config",
		"nvidia.com/gpu.deploy.driver", LabelWorkloadConfig, LabelWorkloadMode, "plan.upgrade.cattle.io/rke2", upgradev1.LabelHostname} {
		var in []string
		for _, f := range ownershipTable {
			if f.Name != "" && f.matchesKey(k) {
				in = append(in, f.Name)
			}
		}
		assert.Len(t, in, 1, "%s is in %v", k, in)
	}
	for _, g := range GFDLabels {
		assert.Equal(t, FactGFDLabels, factOfLabel(g).Name, g)
	}
	assert.Nil(t, factOfLabel("team"))
	assert.Nil(t, factOfLabel("nvidia.com/device-plugin.config"), "an input outside the table")
}

// TestExemptionFactsValidated: a Node exemption needs facts the table
// knows; an old whole-identity Node exemption is refused, naming the field;
// a Plan exemption needs none.
func TestExemptionFactsValidated(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"whole-identity Node exemption (the old default)", "exemptions:\n- name: system-controllers\n  resources: [nodes]\n  users: [system:serviceaccount:system-upgrade:system-upgrade]\n",
			[]string{"exemptions[0].facts: Required value", "suc-plan-labels", "no longer lets a whole identity"}},
		{"unknown fact", "exemptions:\n- name: suc\n  resources: [nodes]\n  users: [x]\n  facts: [everything]\n",
			[]string{`exemptions[0].facts[0]: Unsupported value: "everything"`, `"cordon"`}},
		{"facts on a Plan exemption", "exemptions:\n- name: rancher\n  resources: [plans]\n  users: [x]\n  facts: [cordon]\n",
			[]string{"exemptions[0].facts", "facts apply to Node writes only"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig([]byte(tc.yaml))
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	t.Run("a Plan exemption without facts and a Node one with facts load", func(t *testing.T) {
		cfg, err := LoadConfig([]byte("exemptions:\n- name: rancher\n  resources: [plans]\n  users: [x]\n- name: suc\n  resources: [nodes]\n  users: [bob]\n  facts: [suc-plan-labels, cordon]\n"))
		require.NoError(t, err, "%v", err)
		assert.Equal(t, []string{FactPlanLabels, FactCordon}, cfg.Exemptions[1].Facts)
	})
	assert.Empty(t, DefaultConfig().Validate())
}

// TestNodeExemptCondition: the match condition sends an exempt identity's
// write exactly when it changes a fact outside its exemption; its text is
// checked by test/chart and evaluated by the real API server in e2e.
func TestNodeExemptCondition(t *testing.T) {
	cond := DefaultConfig().NodeExemptCondition()
	assert.Equal(t, 3, strings.Count(cond, "(!(request.userInfo."), "one clause per default exemption")
	assert.Contains(t, cond, "k == 'nvidia.com/gpu.workload.config'", "SUC's clause names the mode labels it may not write")
	assert.Empty(t, (&Config{Exemptions: []Exemption{{Name: "bots", Resources: []string{"nodes"}, Groups: []string{"bots"}, MatchLabels: map[string]string{"pool": "a"}, Facts: []string{FactCordon}}}}).NodeExemptCondition(),
		"an exemption narrowed by labels is the engine's")
	all := (&Config{Exemptions: []Exemption{{Name: "all", Resources: []string{"nodes"}, Users: []string{"u"}, Facts: ExemptibleFacts()}}}).NodeExemptCondition()
	assert.NotContains(t, all, "|| false)", "the step facts send a write even of an exemption that lists every fact")
	assert.Contains(t, all, "k == 'kube-dc.com/gpu.workload-mode'", "a mode label write is a step: it reaches the webhook even when listed")
	none := (&Config{Exemptions: []Exemption{{Name: "all", Resources: []string{"nodes"}, Users: []string{"u"}, Facts: slices.DeleteFunc(ExemptibleFacts(), isStep)}}}).NodeExemptCondition()
	assert.Contains(t, none, "k == 'kube-dc.com/gpu.workload-mode'", "not listed, the mode labels are reviewed as before")
}

// TestOwnershipDocIsGenerated: docs/ownership.md's table is the ownership
// table's (go test ./gate -run TestOwnershipDocIsGenerated -update).
func TestOwnershipDocIsGenerated(t *testing.T) {
	const path, begin, end = "../docs/ownership.md", "<!-- ownership table: generated from gate/ownership.go -->\n", "<!-- end of ownership table -->\n"
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	doc := string(data)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	require.True(t, i >= 0 && j > i, "%s needs the markers %q and %q", path, begin, end)
	want := doc[:i+len(begin)] + OwnershipMarkdown() + doc[j:]
	if *updateDocs {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
		doc = want
	}
	assert.Equal(t, want, doc, "%s is not what gate/ownership.go renders: run go test ./gate -run TestOwnershipDocIsGenerated -update", path)
	for _, f := range ExemptibleFacts() {
		assert.Contains(t, doc, "`"+f+"`")
	}
}
