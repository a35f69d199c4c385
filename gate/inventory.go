package gate

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/dra"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// InventoryStatus says how ready a GPU node is for its next upgrade.
type InventoryStatus string

const (
	StatusAtTarget         InventoryStatus = "at-target"         // runs its record's target tuple
	StatusQualified        InventoryStatus = "qualified"         // a usable record covers its hardware and current tuple
	StatusStale            InventoryStatus = "stale"             // the covering record is stale, unqualified or invalid
	StatusNoRecord         InventoryStatus = "no-record"         // no record covers its hardware and current tuple
	StatusHardwareMismatch InventoryStatus = "hardware-mismatch" // records cover some of its GPUs, not its whole identity set
	StatusHolders          InventoryStatus = "holders"           // qualified, but GPU workloads run on it
	StatusNotApproved      InventoryStatus = "not-approved"      // the covering record has no attested approval
)

// InventoryStatuses lists every status, for metrics that must show zeros.
var InventoryStatuses = []InventoryStatus{StatusAtTarget, StatusQualified, StatusStale, StatusNoRecord, StatusHardwareMismatch, StatusHolders, StatusNotApproved}

// InventoryRecord is the record that covers a node.
type InventoryRecord struct {
	ConfigMap string `json:"configMap"`
	ID        string `json:"id"`
	Age       string `json:"age"`
	Expires   string `json:"expires,omitempty"`
	// Approval is the record's attested approval (approvalState);
	// ApprovedBy the attested approver when the approval stands.
	Approval   string `json:"approval"`
	ApprovedBy string `json:"approvedBy,omitempty"`
	// Explained are the record's canary checks outside their threshold
	// that it explains.
	Explained []string `json:"explained,omitempty"`
}

// NodeInventory is one GPU node's line in the version inventory platform
// guides ask for: current and target versions, support source, validation
// status and rollback method.
type NodeInventory struct {
	Node     string               `json:"node"`
	Hardware []string             `json:"hardware"`
	Current  qualification.Tuple  `json:"current"`
	Record   *InventoryRecord     `json:"record,omitempty"`
	Target   *qualification.Tuple `json:"target,omitempty"`
	Status   InventoryStatus      `json:"status"`
	Rollback string               `json:"rollback"`
	Holders  []Holder             `json:"holders,omitempty"`
	// DRA is what each configured DRA driver shows of the node (its
	// slices' devices, its kubelet-plugin Pod); the CLI reads it.
	DRA      []dra.NodeState `json:"dra,omitempty"`
	Cordoned bool            `json:"cordoned"`
	// Proof is "proven" or "unproven" for a node at its record's target
	// (docs/proof.md), empty otherwise; ProofMissing says what is missing.
	Proof        string   `json:"proof,omitempty"`
	ProofMissing []string `json:"proofMissing,omitempty"`
	// ReachedAt is when a node at its record's target reached it (the
	// proof's clock), for how long it has waited unproven.
	ReachedAt time.Time `json:"-"`
	// Halt is the halt that holds the rollout of the node's hardware
	// (docs/proof.md#halts), empty when none does.
	Halt string `json:"halt,omitempty"`
}

// Inventory lists every GPU node of the cluster, sorted by name. holders may
// be nil (the webhook's metric does not list Pods).
func Inventory(cfg *Config, cl *Cluster, holders map[string][]Holder, now time.Time) []NodeInventory {
	fresh := qualification.Freshness{Now: now, MaxAge: cfg.MaxCanaryAge.Duration, ClockSkew: cfg.ClockSkew.Duration}
	var out []NodeInventory
	for _, n := range cl.Nodes {
		if !cfg.IsGPUNode(n) {
			continue
		}
		f := cfg.FactsOf(n)
		inv := NodeInventory{Node: f.Name, Hardware: f.Identities, Current: cl.Current(f), Cordoned: f.Unschedulable,
			Holders: holders[f.Name], Rollback: "not proven"}
		name, rec := coveringEntry(cl.Records, f.Identities, inv.Current, fresh)
		approval := ""
		if rec != nil {
			approval = cfg.unapproved(rec, cl.Records[name].Attestation)
		}
		switch {
		case rec == nil && overlaps(cl.Records, f.Identities):
			inv.Status = StatusHardwareMismatch
		case rec == nil:
			inv.Status = StatusNoRecord
		default:
			inv.Record = &InventoryRecord{ConfigMap: name, ID: rec.ID, Approval: cfg.approvalState(rec, cl.Records[name].Attestation), Explained: rec.ExplainedDeviations()}
			if at, err := rec.CompletedAt(); err == nil {
				inv.Record.Age = age(now.Sub(at))
				inv.Record.Expires = at.Add(cfg.MaxCanaryAge.Duration).UTC().Format(time.RFC3339)
			}
			if approval == "" {
				inv.Record.ApprovedBy = cl.Records[name].Attestation.ApprovedBy
			}
			target := rec.Target
			inv.Target = &target
			if rec.Source != nil && rec.Canary.RollbackPassed {
				inv.Rollback = "proven by record source"
			}
			switch {
			case SameTuple(inv.Current, rec.Target):
				inv.Status = StatusAtTarget
				p := cfg.Prove(cl, n, now)
				inv.Proof, inv.ProofMissing, inv.ReachedAt = p.State(), p.Missing, p.ReachedAt
			case len(qualification.Check(rec, fresh)) > 0:
				inv.Status = StatusStale
			case approval != "":
				inv.Status = StatusNotApproved
			case len(inv.Holders) > 0:
				inv.Status = StatusHolders
			default:
				inv.Status = StatusQualified
			}
		}
		inv.Halt = cl.Halts.Describe(f.Identities)
		out = append(out, inv)
	}
	slices.SortFunc(out, func(a, b NodeInventory) int { return strings.Compare(a.Node, b.Node) })
	return out
}

// coveringEntry picks the record for a node: same hardware set, and either
// the node already runs its target or (when it has a source) runs its
// source. A usable record wins over an unusable one, then the newest.
func coveringEntry(records map[string]RecordEntry, ids []string, cur qualification.Tuple, fresh qualification.Freshness) (string, *qualification.Record) {
	var bestName string
	var best *qualification.Record
	var bestUsable bool
	var bestAt time.Time
	for _, name := range sortedKeys(records) {
		rec := records[name].Record
		if rec == nil || len(ids) == 0 || !slices.Equal(rec.NormalizedHardware(), ids) {
			continue
		}
		if rec.Source != nil && !SameTuple(cur, *rec.Source) && !SameTuple(cur, rec.Target) {
			continue
		}
		usable := len(qualification.Check(rec, fresh)) == 0
		at, _ := rec.CompletedAt()
		if best == nil || (usable && !bestUsable) || (usable == bestUsable && at.After(bestAt)) {
			bestName, best, bestUsable, bestAt = name, rec, usable, at
		}
	}
	return bestName, best
}

// overlaps: some record covers part of the node's identity set (a node with
// mixed GPUs, or a record written for a subset).
func overlaps(records map[string]RecordEntry, ids []string) bool {
	for _, e := range records {
		if e.Record == nil || slices.Equal(e.Record.NormalizedHardware(), ids) {
			continue
		}
		for _, h := range e.Record.NormalizedHardware() {
			if slices.Contains(ids, h) {
				return true
			}
		}
	}
	return false
}

// age reads like kubectl's: 9d22h, 5h, or "future".
func age(d time.Duration) string {
	if d < 0 {
		return "future"
	}
	d = d.Round(time.Hour)
	if days := d / (24 * time.Hour); days > 0 {
		return fmt.Sprintf("%dd%dh", days, (d%(24*time.Hour))/time.Hour)
	}
	return fmt.Sprintf("%dh", d/time.Hour)
}
