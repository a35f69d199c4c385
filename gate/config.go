package gate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/dra"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/precondition"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Well-known names the rules read.
const (
	// AnnotationQualification on a Plan names the record ConfigMap.
	AnnotationQualification = fleet.AnnotationQualification
	// AnnotationBreakGlass on a Plan or Node carries the reason for an
	// emergency override; honoured only for the break-glass group.
	AnnotationBreakGlass = "gpu-upgrade-gate.io/break-glass"
	// AnnotationRollback on a Plan says it moves nodes from the record's
	// target back to its source (a proven rollback).
	AnnotationRollback = fleet.AnnotationRollback

	LabelZone = fleet.LabelZone
)

// WorkloadRef points at the Deployment or DaemonSet whose image tag is the
// cluster-wide version of a tuple component.
type WorkloadRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Container is the container whose image counts; empty means the first.
	Container string `json:"container,omitempty"`
}

// Exemption lets a configured system identity through, visibly: the decision
// names it in the audit annotations.
type Exemption struct {
	// Name is what the audit annotation says.
	Name string `json:"name"`
	// Resources the exemption applies to: "plans", "nodes".
	Resources []string `json:"resources"`
	// Users and Groups: the requester must match one of them (at least one
	// is required: exemptions are by identity).
	Users  []string `json:"users,omitempty"`
	Groups []string `json:"groups,omitempty"`
	// Namespaces and MatchLabels only narrow a Plan exemption (e.g. Rancher's
	// ServiceAccount, for its Plans in cattle-system labelled
	// rancher-managed=true); an exemption without users or groups is refused.
	Namespaces  []string          `json:"namespaces,omitempty"`
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	// Facts are what the identity may write on a Node (the ownership
	// table's names, gate/ownership.go): required with "nodes". A Node
	// write by the identity that changes only these facts is let through
	// unreviewed; one that changes any other fact of the table is reviewed
	// as anyone's (issue 22: SUC's ServiceAccount, which any Plan's Job may
	// run as, writes plan labels and cordons, not GPU mode labels).
	Facts []string `json:"facts,omitempty"`
}

// Config is the engine's configuration: the same file serves the webhook
// (--config) and the CLI.
type Config struct {
	// Namespace is the gate's own namespace: the only place records are read.
	Namespace string `json:"namespace"`
	// SUCNamespaces are where SUC reads Plans; Plans elsewhere are inert.
	SUCNamespaces []string `json:"sucNamespaces"`
	// WaveSize is how many pending GPU nodes one Plan may hold.
	WaveSize int `json:"waveSize"`
	// MaxCanaryAge bounds the record's evidence age (ceiling 2160h).
	MaxCanaryAge metav1.Duration `json:"maxCanaryAge"`
	// ClockSkew is how far in the future completedAt may lie.
	ClockSkew metav1.Duration `json:"clockSkew"`
	// ExpiryWarning: warn when the record expires within this window.
	ExpiryWarning metav1.Duration `json:"expiryWarning"`
	// GPUVendors are the PCI vendor IDs whose devices make a GPU node.
	GPUVendors []string `json:"gpuVendors"`
	// RKE2Images are upgrade image repositories that make a Plan an RKE2
	// Plan, on any registry (mirrors count); an entry that names a registry
	// matches that registry only.
	RKE2Images   []string    `json:"rke2Images"`
	GPUOperator  WorkloadRef `json:"gpuOperator"`
	DCGMExporter WorkloadRef `json:"dcgmExporter"`
	Exemptions   []Exemption `json:"exemptions,omitempty"`
	// BreakGlassGroup may use the break-glass annotation; empty disables it.
	BreakGlassGroup string `json:"breakGlassGroup,omitempty"`
	// RequireRequester: a GPU Plan's CREATE, and an UPDATE that starts a
	// new rollout, must carry gpu-upgrade-gate.io/requested-by
	// (rule_requester.go).
	RequireRequester bool `json:"requireRequester"`

	// GPUOperatorCSV is the name of the GPU Operator's OLM
	// ClusterServiceVersions before ".v<version>": approving an InstallPlan
	// that installs one upgrades the operator.
	GPUOperatorCSV string `json:"gpuOperatorCSV"`
	// GPUOperatorPackage is the GPU Operator's OLM package (a Subscription's
	// spec.name): its Subscription must say installPlanApproval: Manual
	// (rule_subscription.go).
	GPUOperatorPackage string `json:"gpuOperatorPackage"`
	// AllowAutomaticOperatorApproval admits that Subscription with
	// Automatic approval. It gives up the review of GPU Operator upgrades
	// through OLM: OLM creates each new version's InstallPlan approved, and
	// the chart then does not send OLM's creation of it to the gate
	// (webhook/operator.md).
	AllowAutomaticOperatorApproval bool `json:"allowAutomaticOperatorApproval"`
	// GPURuntimeClasses are RuntimeClass names whose Pods hold GPUs with or
	// without a GPU resource (the GPU Operator's "nvidia").
	GPURuntimeClasses []string `json:"gpuRuntimeClasses"`
	// DRADrivers are the DRA drivers through which GPU nodes offer their
	// GPUs (ResourceSlices) and the DaemonSets that run their kubelet
	// plugins; a node they publish devices for is proven through them
	// (fleet/proof_dra.go), and inventory shows each node's slices and plugin Pod.
	DRADrivers []dra.Driver `json:"draDrivers,omitempty"`
	// Proof says what proves an upgraded node (fleet/nodeproof.go).
	Proof ProofConfig `json:"proof"`
	// ApproverAliases map a record's approvedBy text to the username the
	// API server authenticates that approver as (e.g. bob:
	// bob@corp.example); without an entry the two must be equal.
	ApproverAliases map[string]string `json:"approverAliases,omitempty"`
	// Budget bounds the GPU nodes out for an upgrade at once (rule_budget.go).
	Budget BudgetConfig `json:"budget"`
	// Windows are the maintenance windows (rule_window.go).
	Windows WindowsConfig `json:"windows"`
	// Halts says where halts are kept and when a node that has not come
	// back halts its rollout (rule_halt.go).
	Halts HaltConfig `json:"halts"`
	// OutOfService names the marks that take a GPU node out besides its
	// cordon (nodestate.go).
	OutOfService OutOfServiceConfig `json:"outOfService"`
	// NodeMaintenance: other requestors' NodeMaintenances count their GPU
	// nodes out for the budget (nodemaintenance.go).
	NodeMaintenance NodeMaintenanceConfig `json:"nodeMaintenance"`
	// RequireMover: a person's Node write that pulls a GPU node into a GPU
	// Plan must carry gpu-upgrade-gate.io/moved-by with their username
	// (rule_movedby.go).
	RequireMover bool `json:"requireMover"`
	// Separation is who may apply what a record qualifies
	// (rule_selfapproved.go): two-person (anyone but its approver) or
	// three-person (neither its author nor its approver).
	Separation Separation `json:"separation"`
	// Enforcement says what the webhooks do with a write the rules would
	// deny: refuse it, or admit it and report it (enforcement.go).
	Enforcement EnforcementConfig `json:"enforcement"`
	// CreationGates must read their closed value before a GPU mode
	// transition or a GPU upgrade starts (fleet/creationgate.go); none by default.
	CreationGates []CreationGate `json:"creationGates,omitempty"`
	// EtcdSnapshot: a Plan that moves a GPU node's RKE2 minor needs a
	// recent ready etcd snapshot (rule_etcdsnapshot.go).
	EtcdSnapshot EtcdSnapshotConfig `json:"etcdSnapshot"`
	// OperatorRollout: a driver change waits for the GPU Operator's own
	// rollout to finish (rule_operatorrollout.go).
	OperatorRollout OperatorRolloutConfig `json:"operatorRollout"`
	// DrainCheck: what a Plan whose drain cannot finish gets, a warning or
	// (deny) a refusal (rule_drain.go).
	DrainCheck DrainCheckConfig `json:"drainCheck"`
	// Preconditions are declared health checks (CEL over watched objects,
	// Prometheus or Alertmanager alerts) that must hold before a GPU
	// node's upgrade starts and before an upgraded node completes
	// (rule_precondition.go); none by default.
	Preconditions []precondition.Precondition `json:"preconditions,omitempty"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() *Config {
	return &Config{
		Namespace:         "gpu-upgrade-gate",
		SUCNamespaces:     []string{"system-upgrade"},
		WaveSize:          1,
		MaxCanaryAge:      metav1.Duration{Duration: qualification.DefaultMaxAge},
		ClockSkew:         metav1.Duration{Duration: qualification.DefaultClockSkew},
		ExpiryWarning:     metav1.Duration{Duration: 72 * time.Hour},
		GPUVendors:        []string{"10de"},
		RKE2Images:        []string{"rancher/rke2-upgrade"},
		GPUOperator:       WorkloadRef{Namespace: "gpu-operator", Name: "gpu-operator", Container: "gpu-operator"},
		DCGMExporter:      WorkloadRef{Namespace: "gpu-operator", Name: "nvidia-dcgm-exporter", Container: "nvidia-dcgm-exporter"},
		Exemptions:        DefaultExemptions("gpu-operator", "node-feature-discovery"),
		BreakGlassGroup:   "gpu-upgrade-gate:break-glass",
		RequireRequester:  true,
		GPURuntimeClasses: []string{"nvidia"},

		GPUOperatorCSV: "gpu-operator-certified",
		Proof:          DefaultProofConfig(),
		Budget:         DefaultBudgetConfig(),
		Windows:        DefaultWindowsConfig(),
		Halts:          DefaultHaltConfig(),
		OutOfService:   DefaultOutOfServiceConfig(),
		RequireMover:   true,
		Separation:     SeparationTwoPerson,
		Enforcement:    DefaultEnforcementConfig(),

		GPUOperatorPackage: "gpu-operator-certified",
		EtcdSnapshot:       DefaultEtcdSnapshotConfig(),
		OperatorRollout:    DefaultOperatorRolloutConfig(),
	}
}

// DefaultExemptions keep the system controllers of a usual install away from
// the Node webhook (its match conditions never send their writes) for the
// facts each owns (gate/ownership.go), by identity: SUC's ServiceAccount
// (SUC's controller and every Job that runs as it: plan labels and the
// cordon), every ServiceAccount of the GPU Operator's namespace (the
// operator, its bundled NFD and every operand: driver upgrade controller, MIG
// manager, GFD, ...) and of NFD's own namespace (nfd-master under whatever
// name its chart gives it, which also publishes GFD's labels). Namespace
// groups rather than names: the charts name their ServiceAccounts after the
// release (NFD's chart: "<release>-node-feature-discovery"; the GPU
// Operator's bundled NFD: "node-feature-discovery"), and an operand the next
// version adds is covered without a config change. A write by one of them
// that changes a fact it does not own is reviewed as anyone's. NFD's list
// holds the mode labels because kube-dc switches modes through a
// NodeFeatureRule that nfd-master applies: a mode label is a Step fact, so
// nfd-master's write of one is judged as a per-node mode step (ReviewModeStep)
// and its other writes stay unreviewed. The per-node steps the gate guards on purpose are separate
// webhooks that no exemption reaches.
func DefaultExemptions(gpuOperatorNamespace, nfdNamespace string) []Exemption {
	return []Exemption{{
		Name:      "suc",
		Resources: []string{"nodes"},
		Users:     []string{serviceaccount.MakeUsername("system-upgrade", "system-upgrade")},
		Facts:     []string{FactPlanLabels, FactCordon},
	}, {
		Name:      "gpu-operator",
		Resources: []string{"nodes"},
		Groups:    []string{serviceaccount.MakeNamespaceGroupName(gpuOperatorNamespace)},
		Facts:     []string{FactNFDLabels, FactGFDLabels, FactGPUOperatorState, FactGPUOperatorInput, FactCordon},
	}, {
		Name:      "nfd",
		Resources: []string{"nodes"},
		Groups:    []string{serviceaccount.MakeNamespaceGroupName(nfdNamespace)},
		Facts:     []string{FactNFDLabels, FactGFDLabels, FactModeLabels},
	}}
}

// LoadConfig reads a YAML config strictly: an unknown key (matched case by
// case), a duplicate key, a wrong type or a bad value is an error naming the
// key, never silently a default. Keys the file leaves out take the defaults.
func LoadConfig(data []byte) (*Config, error) {
	cfg := DefaultConfig()
	if len(bytes.TrimSpace(data)) > 0 {
		js, err := yaml.YAMLToJSONStrict(data)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(js, &keys); err != nil || keys == nil {
			return nil, fmt.Errorf("config: expected a YAML mapping of settings, e.g. \"waveSize: 1\"")
		}
		// Decode key by key into a zero Config, so an error names its key and
		// a list in the file replaces the default list instead of merging into it.
		// The proof, budget, windows, halts and enforcement sections start
		// from their defaults, so a file that sets one of their keys keeps
		// the others.
		file := &Config{Proof: DefaultProofConfig(), Budget: DefaultBudgetConfig(), Windows: DefaultWindowsConfig(), Halts: DefaultHaltConfig(), Enforcement: DefaultEnforcementConfig()}
		for _, k := range sortedKeys(keys) {
			one, _ := json.Marshal(map[string]json.RawMessage{k: keys[k]})
			strict, err := sigsjson.UnmarshalStrict(one, file)
			if err != nil {
				return nil, fmt.Errorf("config: %s: %w", k, err)
			}
			if len(strict) > 0 {
				return nil, fmt.Errorf("config: %w", strict[0])
			}
		}
		fileV, cfgV := reflect.ValueOf(file).Elem(), reflect.ValueOf(cfg).Elem()
		for i := 0; i < fileV.NumField(); i++ {
			key, _, _ := strings.Cut(fileV.Type().Field(i).Tag.Get("json"), ",")
			if _, set := keys[key]; set {
				cfgV.Field(i).Set(fileV.Field(i))
			}
		}
	}
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("config: %w", errs.ToAggregate())
	}
	return cfg, nil
}

var pciVendorRE = regexp.MustCompile(`^[0-9a-f]{4}$`)

// Validate reports every configuration problem at once.
func (c *Config) Validate() field.ErrorList {
	var errs field.ErrorList
	if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
		errs = append(errs, field.Invalid(field.NewPath("namespace"), c.Namespace, msgs[0]))
	}
	if len(c.SUCNamespaces) == 0 {
		errs = append(errs, field.Required(field.NewPath("sucNamespaces"), "at least one namespace where SUC reads Plans"))
	}
	for i, ns := range c.SUCNamespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, field.Invalid(field.NewPath("sucNamespaces").Index(i), ns, msgs[0]))
		}
	}
	if c.WaveSize < 1 {
		errs = append(errs, field.Invalid(field.NewPath("waveSize"), c.WaveSize, "must be 1 or more (1 means one canary at a time)"))
	}
	if age := c.MaxCanaryAge.Duration; age <= 0 || age > qualification.MaxAgeCeiling {
		errs = append(errs, field.Invalid(field.NewPath("maxCanaryAge"), age.String(), fmt.Sprintf("must be above 0 and at most %s", qualification.MaxAgeCeiling)))
	}
	if skew := c.ClockSkew.Duration; skew < 0 || skew > qualification.MaxClockSkew {
		errs = append(errs, field.Invalid(field.NewPath("clockSkew"), skew.String(), fmt.Sprintf("must be between 0 and %s", qualification.MaxClockSkew)))
	}
	if c.ExpiryWarning.Duration < 0 {
		errs = append(errs, field.Invalid(field.NewPath("expiryWarning"), c.ExpiryWarning.Duration.String(), "must not be negative"))
	}
	if len(c.GPUVendors) == 0 {
		errs = append(errs, field.Required(field.NewPath("gpuVendors"), "at least one PCI vendor ID, e.g. 10de"))
	}
	for i, v := range c.GPUVendors {
		switch {
		case !pciVendorRE.MatchString(v):
			errs = append(errs, field.Invalid(field.NewPath("gpuVendors").Index(i), v, "expected 4 lower-case hex digits, e.g. 10de"))
		case isClass(v):
			errs = append(errs, field.Invalid(field.NewPath("gpuVendors").Index(i), v, "is a PCI display class (0300, 0302), not a vendor ID; NFD labels could not tell the two apart"))
		}
	}
	if len(c.RKE2Images) == 0 {
		errs = append(errs, field.Required(field.NewPath("rke2Images"), "at least one upgrade image repository, e.g. rancher/rke2-upgrade"))
	}
	for i, e := range c.RKE2Images {
		if img, err := ParseImage(e); err != nil || img.Tag != "" || img.Digest != "" {
			errs = append(errs, field.Invalid(field.NewPath("rke2Images").Index(i), e, "expected an image repository without tag or digest, e.g. rancher/rke2-upgrade (any registry) or registry.example.com/rancher/rke2-upgrade (that registry only)"))
		}
	}
	errs = append(errs, c.GPUOperator.validate(field.NewPath("gpuOperator"))...)
	if msgs := validation.IsDNS1123Subdomain(c.GPUOperatorCSV); len(msgs) > 0 {
		errs = append(errs, field.Invalid(field.NewPath("gpuOperatorCSV"), c.GPUOperatorCSV, msgs[0]+" (the CSV name before .v<version>, e.g. gpu-operator-certified)"))
	}
	if msgs := validation.IsDNS1123Subdomain(c.GPUOperatorPackage); len(msgs) > 0 {
		errs = append(errs, field.Invalid(field.NewPath("gpuOperatorPackage"), c.GPUOperatorPackage, msgs[0]+" (the OLM package a Subscription names in spec.name, e.g. gpu-operator-certified)"))
	}
	errs = append(errs, c.DCGMExporter.validate(field.NewPath("dcgmExporter"))...)
	for i, e := range c.Exemptions {
		errs = append(errs, e.validate(field.NewPath("exemptions").Index(i))...)
	}
	errs = append(errs, c.EtcdSnapshot.validate(field.NewPath("etcdSnapshot"))...)
	names := map[string]bool{}
	for i, g := range c.CreationGates {
		path := field.NewPath("creationGates").Index(i)
		errs = append(errs, g.Validate(path)...)
		if names[g.Name] {
			errs = append(errs, field.Duplicate(path.Child("name"), g.Name))
		}
		names[g.Name] = true
	}
	names = map[string]bool{}
	for i := range c.Preconditions {
		path := field.NewPath("preconditions").Index(i)
		errs = append(errs, c.Preconditions[i].Validate(path)...)
		if names[c.Preconditions[i].Name] {
			errs = append(errs, field.Duplicate(path.Child("name"), c.Preconditions[i].Name))
		}
		names[c.Preconditions[i].Name] = true
	}
	for i, rc := range c.GPURuntimeClasses {
		if msgs := validation.IsDNS1123Subdomain(rc); len(msgs) > 0 {
			errs = append(errs, field.Invalid(field.NewPath("gpuRuntimeClasses").Index(i), rc, "expected a RuntimeClass name, e.g. nvidia: "+msgs[0]))
		}
	}
	for i, d := range c.DRADrivers {
		errs = append(errs, d.Validate(field.NewPath("draDrivers").Index(i))...)
	}
	errs = append(errs, c.Proof.Validate(field.NewPath("proof"))...)
	errs = append(errs, c.OutOfService.Validate(field.NewPath("outOfService"))...)
	errs = append(errs, c.NodeMaintenance.validate(field.NewPath("nodeMaintenance"))...)
	for _, k := range slices.Sorted(maps.Keys(c.ApproverAliases)) {
		if v := c.ApproverAliases[k]; strings.TrimSpace(k) == "" || strings.TrimSpace(v) == "" || strings.TrimSpace(v) != v {
			errs = append(errs, field.Invalid(field.NewPath("approverAliases").Key(k), v, "expected a record's approvedBy text mapped to a username exactly as the API server authenticates it, e.g. bob: bob@corp.example"))
		}
	}
	errs = append(errs, c.Budget.validate(field.NewPath("budget"))...)
	errs = append(errs, c.Windows.validate(field.NewPath("windows"))...)
	errs = append(errs, c.Halts.validate(field.NewPath("halts"))...)
	if !slices.Contains(separations, c.Separation) {
		errs = append(errs, field.NotSupported(field.NewPath("separation"), qualification.Clip(string(c.Separation)), separations))
	}
	errs = append(errs, c.Enforcement.validate(field.NewPath("enforcement"))...)
	return errs
}

func (w WorkloadRef) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if msgs := validation.IsDNS1123Label(w.Namespace); len(msgs) > 0 {
		errs = append(errs, field.Invalid(path.Child("namespace"), w.Namespace, msgs[0]))
	}
	if msgs := validation.IsDNS1123Subdomain(w.Name); len(msgs) > 0 {
		errs = append(errs, field.Invalid(path.Child("name"), w.Name, msgs[0]))
	}
	return errs
}

var exemptResources = []string{"plans", "nodes"}

func (e Exemption) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if e.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), "the name the audit annotation shows"))
	}
	if len(e.Resources) == 0 {
		errs = append(errs, field.Required(path.Child("resources"), `one or more of "plans", "nodes"`))
	}
	for i, r := range e.Resources {
		if !slices.Contains(exemptResources, r) {
			errs = append(errs, field.NotSupported(path.Child("resources").Index(i), r, exemptResources))
		}
	}
	for i, u := range e.Users {
		if strings.TrimSpace(u) == "" {
			errs = append(errs, field.Invalid(path.Child("users").Index(i), u, "an authenticated user name, e.g. system:serviceaccount:system-upgrade:system-upgrade"))
		}
	}
	for i, g := range e.Groups {
		if strings.TrimSpace(g) == "" {
			errs = append(errs, field.Invalid(path.Child("groups").Index(i), g, "a group name, e.g. system:serviceaccounts:gpu-operator"))
		}
	}
	nodes := slices.Contains(e.Resources, "nodes")
	if nodes && len(e.Facts) == 0 {
		// An exemption of a whole identity let any Job that runs as SUC's
		// ServiceAccount switch a busy GPU node's mode unreviewed (issue 22):
		// an old entry without facts is refused rather than read either as
		// the whole identity again or as none (which would send every write
		// of a system controller to the gate).
		errs = append(errs, field.Required(path.Child("facts"), fmt.Sprintf("the facts this identity may write on Nodes, one or more of %s (docs/ownership.md), e.g. [%s, %s] for SUC's ServiceAccount; an exemption no longer lets a whole identity write anything", strings.Join(ExemptibleFacts(), ", "), FactPlanLabels, FactCordon)))
	}
	if !nodes && len(e.Facts) > 0 {
		errs = append(errs, field.Invalid(path.Child("facts"), e.Facts, `facts apply to Node writes only: add "nodes" to resources or drop facts`))
	}
	for i, f := range e.Facts {
		if !slices.Contains(ExemptibleFacts(), f) {
			errs = append(errs, field.NotSupported(path.Child("facts").Index(i), f, ExemptibleFacts()))
		}
	}
	if len(e.Users) == 0 && len(e.Groups) == 0 {
		// Labels and namespaces are written by whoever writes the object: an
		// exemption keyed on them alone is one any Plan writer can claim.
		what := "an exemption that matches everyone would disable the gate"
		if len(e.MatchLabels) > 0 || len(e.Namespaces) > 0 {
			what = "matchLabels and namespaces only narrow an exemption: anyone who may write the object can set them, so an exemption needs the identity (users or groups) it lets through"
		}
		errs = append(errs, field.Required(path.Child("users"), "users or groups: "+what))
	}
	return errs
}

// matches says whether the exemption covers this request.
func (e Exemption) matches(resource string, user UserInfo, namespace string, labels map[string]string) bool {
	if !slices.Contains(e.Resources, resource) {
		return false
	}
	ok := slices.Contains(e.Users, user.Name)
	for _, g := range user.Groups {
		ok = ok || slices.Contains(e.Groups, g)
	}
	if !ok {
		return false // identity first: never labels alone (validate)
	}
	if len(e.Namespaces) > 0 && !slices.Contains(e.Namespaces, namespace) {
		return false
	}
	for k, v := range e.MatchLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// exemption returns the name of the first exemption that matches, or "".
func (c *Config) exemption(resource string, user UserInfo, namespace string, labels map[string]string) string {
	for _, e := range c.Exemptions {
		if e.matches(resource, user, namespace, labels) {
			return e.Name
		}
	}
	return ""
}

// nodeExemption judges a Node write by its writer's exemptions: the name of
// the first one that lists every fact the write changes ("" when none), and
// the facts all of them let the writer write (the owner of which may write
// it, for OwnedFactWritten). A write that changes a Step fact (the mode
// labels) is never exempt: when an exemption lists every fact it changes,
// step names that exemption and the write is judged as the per-node step
// (ReviewModeStep). A write that changes a fact outside every matching
// exemption is reviewed as anyone's, as the Node webhook's match condition
// sends it (NodeExemptCondition).
func (c *Config) nodeExemption(user UserInfo, n, old *corev1.Node) (name string, own []string, step string) {
	var changed []string
	computed, stepping := false, false
	for _, e := range c.Exemptions {
		if !e.matches("nodes", user, "", n.Labels) {
			continue
		}
		if !computed {
			changed, computed = changedFacts(n, old), true
			stepping = slices.ContainsFunc(changed, isStep)
		}
		if name == "" && step == "" && !slices.ContainsFunc(changed, func(f string) bool { return !slices.Contains(e.Facts, f) }) {
			if stepping {
				step = e.Name
			} else {
				name = e.Name
			}
		}
		own = append(own, e.Facts...)
	}
	return name, own, step
}

// UserInfo is the requester as the API server authenticated it.
type UserInfo struct {
	Name   string
	Groups []string
}

// MinBreakGlassReason is how many non-space characters a break-glass
// reason needs (e.g. "INC-9"): the reason is what the audit log keeps.
const MinBreakGlassReason = 5

// finish settles a decision from its findings. A denial is turned into an
// allow when the requester may and did break glass on this very write (the
// request adds the annotation or changes its reason: one that stays on the
// object from an earlier write overrides nothing, or it would silently
// override every later edit), and never over a code the rule table marks
// NoBreakGlass (a halt). The overridden codes stay in the decision (and so
// in the audit log), with a warning.
func (c *Config) finish(d Decision, f findings, user UserInfo, annotations, oldAnnotations map[string]string) Decision {
	f.settle(&d)
	reason, was := annotations[AnnotationBreakGlass], oldAnnotations[AnnotationBreakGlass]
	if reason == "" || c.BreakGlassGroup == "" {
		return d
	}
	switch {
	case reason == was:
		d.Warnings = append(d.Warnings, fmt.Sprintf("gpu-upgrade-gate: the %s annotation (%q) is left from an earlier write and overrides nothing: this write is judged normally; to break glass again, set a new reason", AnnotationBreakGlass, qualification.Clip(reason)))
		return d
	case d.Allowed || !slices.Contains(user.Groups, c.BreakGlassGroup):
		return d
	case nonSpace(reason) < MinBreakGlassReason:
		d.Warnings = append(d.Warnings, fmt.Sprintf("gpu-upgrade-gate: break-glass not honoured: metadata.annotations[%s] %q has %d non-space characters, expected at least %d (e.g. an incident number and why)", AnnotationBreakGlass, qualification.Clip(reason), nonSpace(reason), MinBreakGlassReason))
		return d
	}
	unbreakable := NoBreakGlassCodes()
	if held := slices.DeleteFunc(d.Codes(), func(c Code) bool { return !slices.Contains(unbreakable, c) }); len(held) > 0 {
		d.Warnings = append(d.Warnings, fmt.Sprintf("gpu-upgrade-gate: break-glass not honoured: it does not override %s (each blocker says what ends it); the write stays denied", codeList(held)))
		return d
	}
	d.Allowed, d.BreakGlass = true, reason
	d.Warnings = append(d.Warnings, fmt.Sprintf("gpu-upgrade-gate: break-glass by %s (%q) overrode %d blocker(s) for this write only: %s", user.Name, qualification.Clip(reason), len(d.Blockers), codeList(d.Codes())))
	return d
}

func nonSpace(s string) int {
	n := 0
	for _, r := range s {
		if !unicode.IsSpace(r) {
			n++
		}
	}
	return n
}
