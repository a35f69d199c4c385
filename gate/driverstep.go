package gate

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// The GPU Operator's upgrade controller (NVIDIA k8s-operator-libs,
// pkg/upgrade) moves each node through the states of one label. The write
// that starts a node's driver reload is the move into pod-restart-required:
// ProcessPodRestartNodes then deletes the node's out-of-date driver Pod (or
// unblocks a driver waiting for a safe load), whichever way the node got
// there (ProcessDrainNodes with drain off, the drain manager after a drain,
// the restart-only shortcut from upgrade-required, the maintenance-operator
// requestor). Older requestor versions restart the Pod from
// post-maintenance-required instead. Refusing that write keeps the node in
// its current state; the controller retries it on its next reconcile.
const LabelDriverUpgradeState = "nvidia.com/gpu-driver-upgrade-state"

// DriverReloadStates are the states whose entry starts a driver reload.
var DriverReloadStates = []string{"pod-restart-required", "post-maintenance-required"}

// DriverInFlightStates are the states of a node whose driver reload has
// started and not finished (upgrade-failed included: its reload did not
// complete, and the controller moves it on once the driver Pod is Ready).
var DriverInFlightStates = []string{"pod-restart-required", "post-maintenance-required", "validation-required", "uncordon-required", "upgrade-failed"}

// maxDriverReloads is the budget: GPU nodes take a new driver one at a time,
// whatever the upgrade policy's maxParallelUpgrades says.
const maxDriverReloads = 1

var pathDriverState = field.NewPath("metadata", "labels").Key(LabelDriverUpgradeState)

// StartsDriverReload says whether a state label change starts a reload.
func StartsDriverReload(oldState, newState string) bool {
	return oldState != newState && slices.Contains(DriverReloadStates, newState)
}

// DriverRollout is what the operator is about to roll out to one node: the
// driver of the NVIDIADriver that selects it, or the ClusterPolicy's, and
// the ClusterPolicy's DCGM exporter.
type DriverRollout struct {
	// Object is "NVIDIADriver <name>" or "ClusterPolicy <name>"; its
	// annotation names the records.
	Object      string
	Annotations map[string]string
	// Driver and DCGM are the versions rolled out ("" DCGM: unchanged).
	Driver, DCGM         string
	DriverPath, DCGMPath *field.Path
	Policy               DriverUpgradePolicy
	// Missing names a fact that could not be read ("the ClusterPolicy",
	// "the NVIDIADriver that drives node n (none selects it)"), MissingErr
	// the failed read when there was one; the step is then refused.
	Missing    string
	MissingErr error
}

// DriverStep is the GPU Operator's move of one node into a reload state.
type DriverStep struct {
	Node               *corev1.Node
	OldState, NewState string
	Rollout            DriverRollout
	// InFlight are the nodes carrying one of DriverInFlightStates, listed
	// live (a cache a moment behind would let two reloads start at once).
	InFlight []*corev1.Node
	User     UserInfo
	Now      time.Time
}

// PrepareDriverStep reviews the step with the driver-path rules for that one
// node: records named by the rolling object, hardware, the node's tuple
// after the reload (its current kernel, RKE2 and operator; the new driver
// and DCGM) as a record's target, no unproven downgrade, no GPU holders
// left, and the budget. No exemption applies.
func PrepareDriverStep(cfg *Config, cl *Cluster, st DriverStep) *DriverReview {
	ro := st.Rollout
	f := cfg.FactsOf(st.Node)
	ch := DriverChange{Object: fmt.Sprintf("Node %s driver reload (%s %s -> %s, rolling out %s)", st.Node.Name, LabelDriverUpgradeState, quoteOrNone(st.OldState), st.NewState, quoteOrNone(ro.Object)),
		Annotations: ro.Annotations, OldDriver: f.Driver, NewDriver: ro.Driver, DriverPath: ro.DriverPath, DCGMPath: ro.DCGMPath,
		Policy: ro.Policy, PolicyPath: pathDriverState, Reload: true}
	r := &DriverReview{cfg: cfg, cl: cl, req: DriverRequest{Change: ch, User: st.User, Now: st.Now}, step: &st,
		changed: true, current: map[string]qualification.Tuple{}, records: map[string]RecordEntry{}}
	cur := f.Current(cl)
	if ro.DCGM != "" {
		r.req.Change.OldDCGM, r.req.Change.NewDCGM = cur.DCGMExporter, ro.DCGM
	}
	if !cfg.IsGPUNode(st.Node) {
		r.changed = false // the operator's drivers run on GPU nodes only
		return r
	}
	r.nameRecords()
	r.nodes, r.pending, r.current[f.Name], r.fresh = []NodeFacts{f}, []NodeFacts{f}, cur, map[string]bool{f.Name: true}
	return r
}

// budgetRule (review-level, per-node step): the rollout must be readable,
// and no other GPU node may be mid reload. It stands in for the policy rule:
// the controller honours maxParallelUpgrades by the states it writes, which
// is what the gate counts here, so a policy of 0 (unlimited) is held to one
// node too.
func (r *DriverReview) budgetRule(f *findings) {
	st := r.step
	if st.Rollout.Missing != "" {
		src, what := fromNode, st.Rollout.Missing
		if st.Rollout.MissingErr != nil {
			src, what = fromAPI, what+" (for node "+st.Node.Name+"'s driver reload)"
		}
		f.add(factsMissing(st.Node.Name, pathDriverState, what, src, st.Rollout.MissingErr))
	}
	var busy []string
	for _, n := range st.InFlight {
		if n.Name != st.Node.Name && r.cfg.IsGPUNode(n) && slices.Contains(DriverInFlightStates, n.Labels[LabelDriverUpgradeState]) {
			busy = append(busy, n.Name+" ("+n.Labels[LabelDriverUpgradeState]+")")
		}
	}
	if len(busy) >= maxDriverReloads {
		slices.Sort(busy)
		f.add(concurrencyNotSerial(st.Node.Name, pathDriverState, strings.Join(busy, ", "), concurrencyReloading))
	}
}
