package gate

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

// The ownership table (issue 22 item 1): every fact on a Node the gate
// reads, who may write it, and what to do instead. A Node write by anyone
// else that changes an owned fact of a GPU node (or adds GPU identity to a
// node) is refused (OwnedFactWritten, rule_ownedfact.go). Owner identities
// are not in this table but in the configuration: an exemption pairs an
// identity with the facts it may write (Exemption.Facts), so a cluster that
// runs NFD or the GPU Operator under other names configures them.
// docs/ownership.md is rendered from this table (TestOwnershipDocIsGenerated).

// Fact names an exemption may list (Exemption.Facts).
const (
	FactNFDLabels        = "nfd-labels"
	FactGFDLabels        = "gfd-labels"
	FactGPUOperatorState = "gpu-operator-state"
	FactGPUOperatorInput = "gpu-operator-inputs"
	FactModeLabels       = "mode-labels"
	FactPlanLabels       = "suc-plan-labels"
	FactHostname         = "hostname"
	FactCordon           = "cordon"
)

// Fact is one row of the ownership table.
type Fact struct {
	// Name is what an exemption's facts list; "" for the rows the Node
	// webhook never sees (the kubelet's status, taints), which the table
	// documents but no exemption can name.
	Name string
	// Field is where the fact lives on the Node.
	Field string
	// Owner is who writes it on its normal path.
	Owner string
	// Input: a documented input people set; the rules that read it judge a
	// write of it (Judged), never OwnedFactWritten.
	Input bool
	// Step: a write of it is a per-node step the gate guards on purpose, so
	// an exemption that lists it lets the identity write it but never lets
	// the write through unreviewed: the write reaches the Node webhook and
	// is judged as that step (ReviewModeStep for the mode labels: nfd-master
	// applying kube-dc's NodeFeatureRule, issue 24 item 3).
	Step bool
	// Judged says what judges a write by anyone but the owner.
	Judged string
	// Instead is what to do instead of writing it.
	Instead string
	// Source cites the owner's docs or source (reference/ summarises them).
	Source string
	// Label keys of the fact: exact keys and key prefixes.
	keys, prefixes []string
	// field: the fact is spec.unschedulable, not labels.
	field bool
}

// gfdKeys are the labels GPU Feature Discovery publishes (labels.md 3.1);
// nfd-master writes them from GFD's NodeFeature object.
var (
	gfdKeys = []string{
		"nvidia.com/gpu.count", "nvidia.com/gpu.product", "nvidia.com/gpu.memory", "nvidia.com/gpu.family",
		"nvidia.com/gpu.machine", "nvidia.com/gpu.mode", "nvidia.com/gpu.replicas", "nvidia.com/gpu.sharing-strategy",
		"nvidia.com/gpu.clique", "nvidia.com/gpu.multiprocessors", "nvidia.com/mig.capable", "nvidia.com/mps.capable",
		"nvidia.com/mig.strategy", "nvidia.com/vgpu.present", "nvidia.com/gfd.timestamp",
	}
	gfdPrefixes = []string{
		"nvidia.com/cuda.", "nvidia.com/gpu.compute.", "nvidia.com/gpu.slices.", "nvidia.com/gpu.engines.",
		"nvidia.com/mig-", "nvidia.com/vgpu.host-driver-",
	}
)

// ownershipTable is the table, in the order docs/ownership.md shows it.
var ownershipTable = []Fact{
	{
		Name: FactNFDLabels, Field: "metadata.labels[feature.node.kubernetes.io/*]: the PCI identity labels pci-<class>_<vendor>_<device>...present, kernel-version.*, every other NFD label",
		Owner:    "NFD: nfd-master, from nfd-worker's NodeFeature objects and NodeFeatureRules (the GPU Operator's bundled NFD too)",
		Judged:   "OwnedFactWritten on GPU nodes and on a write that adds GPU identity; GPUIdentityRemoved when a person removes a GPU identity label",
		Instead:  "change NFD's configuration (deviceLabelFields) or a NodeFeatureRule and let nfd-master write it",
		Source:   "NFD v0.19.0 source/pci/pci.go (label format), pkg/nfd-master/nfd-master.go (nfd-master alone patches node labels, keeps its own in the nfd.node.kubernetes.io/feature-labels annotation and never removes a label it did not write); reference/labels.md 0 and 1",
		prefixes: []string{nfdPrefix},
	},
	{
		Name: FactGFDLabels, Field: "metadata.labels[nvidia.com/cuda.*, gpu.count, gpu.product, gpu.memory, gpu.family, gpu.compute.*, mig.capable, mig.strategy, mig-<profile>.*, gfd.timestamp, ...]",
		Owner:   "GPU Feature Discovery (a GPU Operator operand), published through NFD: nfd-master writes them from GFD's NodeFeature",
		Judged:  "OwnedFactWritten on GPU nodes; GPUIdentityRemoved when a person removes one",
		Instead: "let GFD rewrite it (it relabels every 60 s, GFD_SLEEP_INTERVAL); change the driver through the GPU Operator instead",
		Source:  "NVIDIA/k8s-device-plugin internal/lm/{nvml,resource,machine-type,mig-strategy,timestamp}.go, docs/gpu-feature-discovery/README.md; gpu-operator assets/gpu-feature-discovery/0500_daemonset.yaml; reference/labels.md 3.1",
		keys:    gfdKeys, prefixes: gfdPrefixes,
	},
	{
		Name: FactGPUOperatorState, Field: "metadata.labels[nvidia.com/gpu.present, nvidia.com/gpu-driver-upgrade-state, nvidia.com/mig.config.state]",
		Owner:   "the GPU Operator and its operands: the operator (gpu.present), its driver upgrade controller (gpu-driver-upgrade-state), the MIG manager (mig.config.state)",
		Judged:  "OwnedFactWritten on GPU nodes; the driver-step webhook also judges any move into pod-restart-required",
		Instead: "change the ClusterPolicy or NVIDIADriver (driver.upgradePolicy) or the node's nvidia.com/mig.config, and let the GPU Operator move the state",
		Source:  "gpu-operator controllers/state_manager.go (labelGPUNodes); k8s-operator-libs pkg/upgrade/consts.go, upgrade_state.go; mig-parted pkg/mig/reconfigure/reconfigure.go; reference/labels.md 3.2, 3.3",
		keys:    []string{labelGPUPresent, LabelDriverUpgradeState, "nvidia.com/mig.config.state"},
	},
	{
		Name: FactGPUOperatorInput, Field: "metadata.labels[nvidia.com/gpu.deploy.*, nvidia.com/mig.config]",
		Owner:   "people (documented inputs of the GPU Operator); the operator and MIG manager also write them (defaults: mig.config=all-disabled, pause markers paused-for-*)",
		Input:   true,
		Judged:  "the Node review's Plan rules (a label that pulls the node into a Plan); no ownership check: they are people's",
		Instead: "-",
		Source:  "GPU Operator docs gpu-operator-mig.html (nvidia.com/mig.config), getting-started.html (nvidia.com/gpu.deploy.<operand>=false); gpu-operator controllers/state_manager.go; reference/labels.md 3.2",
		keys:    []string{"nvidia.com/mig.config"}, prefixes: []string{"nvidia.com/gpu.deploy."},
	},
	{
		Name: FactModeLabels, Field: "metadata.labels[" + strings.Join(ModeLabels, ", ") + "]",
		Owner:   "people (the GPU Operator's documented workload-config input and kube-dc's mode triple); kube-dc's NodeFeatureRule through nfd-master",
		Input:   true,
		Step:    true,
		Judged:  "the mode rules (ModeChangeNotCordoned, GPUHolders, ModeUnsupported, ModeLabelsInconsistent, UncordonDuringTransition) and the creation gates (CreationGateOpen), whoever writes them: an exemption that lists mode-labels (nfd-master's) does not let the write through unreviewed, it makes it a per-node mode step judged by those rules alone; refused, nfd-master retries until the node is cordoned and free (webhook/nodes.md)",
		Instead: "-",
		Source:  "GPU Operator docs gpu-operator-kubevirt.html (nvidia.com/gpu.workload.config: container, vm-passthrough, vm-vgpu; the operator only reads it); reference/labels.md 3.2",
		keys:    ModeLabels,
	},
	{
		Name: FactPlanLabels, Field: "metadata.labels[plan.upgrade.cattle.io/<plan>]",
		Owner:    "SUC's controller (<plan>=<latestHash> when the node's Job completed); people may set or remove the value disabled (SUC's documented opt-out)",
		Judged:   "OwnedFactWritten for any other value on GPU nodes; SUC's own completion write is a per-node step (completions webhook)",
		Instead:  "ask SUC through the Plan (its nodeSelector, version); to take a node out of a Plan set plan.upgrade.cattle.io/<plan>=disabled",
		Source:   "SUC v0.20.1 pkg/upgrade/handle_batch.go (sets the label on Job completion), pkg/upgrade/plan/plan.go (disabled opts a node out); reference/suc.md",
		prefixes: []string{upgradev1.LabelPlanPrefix},
	},
	{
		Name: FactHostname, Field: "metadata.labels[kubernetes.io/hostname]",
		Owner:   "the kubelet (system:node:<name>), at registration; SUC maps status.applying back to nodes through it",
		Judged:  "OwnedFactWritten on GPU nodes",
		Instead: "re-register the node (the kubelet's --hostname-override); never relabel it",
		Source:  "kubernetes pkg/kubelet/kubelet_node_status.go (initialNode sets kubernetes.io/hostname); plugin/pkg/admission/noderestriction (kubelets may set it); SUC v0.20.1 pkg/upgrade/plan/plan.go (status.applying holds its values)",
		keys:    []string{upgradev1.LabelHostname},
	},
	{
		Name: FactCordon, Field: "spec.unschedulable",
		Owner:   "people; SUC (its Job's cordon or drain container, its controller's uncordon after a completed Job); the GPU Operator's driver upgrade controller; health agents",
		Input:   true,
		Judged:  "an uncordon of a GPU node is reviewed (UncordonBeforeProof, UncordonDuringTransition, RolloutHalted); who cordoned is issue 22 item 3",
		Instead: "-",
		Source:  "SUC v0.20.1 pkg/upgrade/job/job.go (kubectl cordon or drain in the Job), handle_batch.go (uncordon); k8s-operator-libs pkg/upgrade/cordon_manager.go",
		field:   true,
	},
	{
		Field:   "metadata.labels[topology.kubernetes.io/zone, node-role.kubernetes.io/control-plane]",
		Owner:   "the kubelet or cloud node controller (zone), the distribution's installer (control-plane role), people on bare metal",
		Input:   true,
		Judged:  "not reviewed on their own: a zone read by CrossFailureDomain, a role read to order RKE2 Plans",
		Instead: "-",
		Source:  "kubernetes staging/src/k8s.io/api/core/v1/well_known_labels.go; plugin/pkg/admission/noderestriction (kubelets may set the zone)",
	},
	{
		Field:   "spec.taints (node.kubernetes.io/unschedulable's timeAdded; out-of-service and health taints)",
		Owner:   "the node lifecycle and cloud controllers (node.kubernetes.io/*, node.cloudprovider.kubernetes.io/*), autoscalers, health agents and people",
		Input:   true,
		Judged:  "by who writes, not by the key: the kubelets', kube-system's ServiceAccounts', the kube-controller-manager's, RKE2's and k3s's cloud controller manager's, the exempt identities' and webhook.nodeTaintControllers' taint writes never reach the Node webhook; anyone else's NoExecute taint added or NoSchedule/NoExecute taint lifted does, whatever its key (node.kubernetes.io/ and the out-of-service taints included), judged by the DRA plugin's install and unload alone (webhook/nodes.md)",
		Instead: "-",
		Source:  "kubernetes pkg/controller/nodelifecycle (TaintNodesByCondition)",
	},
	{
		Field:   "status.nodeInfo (kernelVersion, kubeletVersion), status.capacity and allocatable (nvidia.com/* from the device plugin), status.conditions (Ready; GPU health conditions)",
		Owner:   "the kubelet (system:node:<name>, through nodes/status; extended resources from device plugins); node-problem-detector or NVSentinel for health conditions",
		Input:   false,
		Judged:  "not reviewed by the gate: the Node authorizer lets a kubelet write only its own Node and NodeRestriction limits what it may change; anyone else needs nodes/status in RBAC",
		Instead: "-",
		Source:  "kubernetes plugin/pkg/auth/authorizer/node, plugin/pkg/admission/noderestriction; pkg/kubelet/nodestatus/setters.go",
	},
}

// Ownership returns the ownership table (a copy), in order.
func Ownership() []Fact { return slices.Clone(ownershipTable) }

// StepFacts are the names of the facts whose write is a per-node step even
// by an identity whose exemption lists them (Fact.Step), in table order.
func StepFacts() []string {
	var out []string
	for _, f := range ownershipTable {
		if f.Step {
			out = append(out, f.Name)
		}
	}
	return out
}

// isStep says whether the fact name is a Step fact.
func isStep(name string) bool {
	for _, f := range ownershipTable {
		if f.Name == name {
			return f.Step
		}
	}
	return false
}

// ExemptibleFacts are the fact names an exemption may list, in table order.
func ExemptibleFacts() []string {
	var out []string
	for _, f := range ownershipTable {
		if f.Name != "" {
			out = append(out, f.Name)
		}
	}
	return out
}

// matchesKey says whether label key k is one of the fact's.
func (f *Fact) matchesKey(k string) bool {
	if slices.Contains(f.keys, k) {
		return true
	}
	for _, p := range f.prefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// factOfLabel is the table row of label key k, nil when the table has none.
func factOfLabel(k string) *Fact {
	for i := range ownershipTable {
		if f := &ownershipTable[i]; f.Name != "" && !f.field && f.matchesKey(k) {
			return f
		}
	}
	return nil
}

// changedLabels are the label keys a write sets, changes or removes, sorted.
// The old labels are walked only when some of them are gone: a node has ~60
// labels, and a Node review reads this once (NodeReview.changed).
func changedLabels(n, old *corev1.Node) []string {
	var out []string
	kept := 0
	for k, v := range n.Labels {
		was, ok := old.Labels[k]
		if ok {
			kept++
		}
		if !ok || was != v {
			out = append(out, k)
		}
	}
	if kept < len(old.Labels) {
		for k := range old.Labels {
			if _, ok := n.Labels[k]; !ok {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

// changedFacts are the names of the table's facts a Node write changes
// (labels, and spec.unschedulable either way), sorted, once each.
func changedFacts(n, old *corev1.Node) []string {
	var out []string
	for _, k := range changedLabels(n, old) {
		if f := factOfLabel(k); f != nil {
			out = append(out, f.Name)
		}
	}
	if n.Spec.Unschedulable != old.Spec.Unschedulable {
		out = append(out, FactCordon)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// factKeyCEL is the fact's label keys as a CEL predicate over the variable
// k, for the Node webhook's match conditions.
func (f *Fact) factKeyCEL() string {
	var parts []string
	for _, k := range f.keys {
		parts = append(parts, "k == "+celQuote(k))
	}
	for _, p := range f.prefixes {
		parts = append(parts, "k.startsWith("+celQuote(p)+")")
	}
	return strings.Join(parts, " || ")
}

// changesOutsideCEL is the CEL expression "the write changes a fact not in
// facts, or a step fact": a label of another fact of the table or of a Step
// fact set, changed or removed, or an uncordon when facts lack cordon. It is
// what sends an exempt identity's write to the Node webhook after all.
func changesOutsideCEL(facts []string) string {
	var keys []string
	for _, f := range ownershipTable {
		if f.Name != "" && !f.field && (!slices.Contains(facts, f.Name) || f.Step) {
			keys = append(keys, f.factKeyCEL())
		}
	}
	var parts []string
	if len(keys) > 0 {
		p := "(" + strings.Join(keys, " || ") + ")"
		parts = append(parts,
			"object.metadata.?labels.orValue({}).exists(k, "+p+" && (!(k in oldObject.metadata.?labels.orValue({})) || oldObject.metadata.labels[k] != object.metadata.labels[k]))",
			"oldObject.metadata.?labels.orValue({}).exists(k, "+p+" && !(k in object.metadata.?labels.orValue({})))")
	}
	if !slices.Contains(facts, FactCordon) {
		parts = append(parts, "(oldObject.spec.?unschedulable.orValue(false) && !object.spec.?unschedulable.orValue(false))")
	}
	if len(parts) == 0 {
		return "false"
	}
	return strings.Join(parts, " || ")
}

// NodeExemptCondition is the CEL expression of the Node webhook's
// "not-a-system-controller" match condition, "" when no exemption applies to
// Nodes unnarrowed: a write reaches the webhook unless an exemption's
// identity made it and it changes only facts that exemption lists. An
// exemption narrowed by namespaces or matchLabels is left to the engine.
// The chart's template builds the same string (test/chart holds them equal).
func (c *Config) NodeExemptCondition() string {
	var conds []string
	for _, e := range c.Exemptions {
		if !slices.Contains(e.Resources, "nodes") || len(e.MatchLabels) > 0 || len(e.Namespaces) > 0 {
			continue
		}
		var who []string
		if len(e.Users) > 0 {
			who = append(who, "request.userInfo.username in ["+celQuoteList(e.Users)+"]")
		}
		if len(e.Groups) > 0 {
			who = append(who, "request.userInfo.groups.exists(g, g in ["+celQuoteList(e.Groups)+"])")
		}
		conds = append(conds, "(!("+strings.Join(who, " || ")+") || "+changesOutsideCEL(e.Facts)+")")
	}
	return strings.Join(conds, " && ")
}

// FactKeyCEL is the CEL predicate over k of each exemptible label fact, by
// name: the chart's generated templates/_ownership.tpl.
func FactKeyCEL() map[string]string {
	out := map[string]string{}
	for i := range ownershipTable {
		if f := &ownershipTable[i]; f.Name != "" && !f.field {
			out[f.Name] = f.factKeyCEL()
		}
	}
	return out
}

// ownersOf names the configured identities that may write fact, for a
// message: "exemption nfd (groups system:serviceaccounts:node-feature-discovery)".
func (c *Config) ownersOf(fact string) string {
	var out []string
	for _, e := range c.Exemptions {
		if !slices.Contains(e.Resources, "nodes") || !slices.Contains(e.Facts, fact) {
			continue
		}
		var who []string
		if len(e.Users) > 0 {
			who = append(who, "users "+strings.Join(e.Users, ", "))
		}
		if len(e.Groups) > 0 {
			who = append(who, "groups "+strings.Join(e.Groups, ", "))
		}
		out = append(out, fmt.Sprintf("exemption %s (%s)", e.Name, strings.Join(who, "; ")))
	}
	if len(out) == 0 {
		return "no configured exemption lists " + fact
	}
	return strings.Join(out, "; ")
}

// OwnershipMarkdown renders the table for docs/ownership.md.
func OwnershipMarkdown() string {
	var b strings.Builder
	b.WriteString("| fact (exemption name) | where | owner | judged | instead | source |\n|---|---|---|---|---|---|\n")
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	for _, f := range ownershipTable {
		name := "-"
		if f.Name != "" {
			name = "`" + f.Name + "`"
		}
		if f.Input {
			name += " (input)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", name, cell(f.Field), cell(f.Owner), cell(f.Judged), cell(f.Instead), cell(f.Source))
	}
	return b.String()
}
