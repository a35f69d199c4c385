package gate

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
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
const LabelDriverUpgradeState = fleet.LabelDriverUpgradeState

// DriverReloadStates are the states whose entry starts a driver reload.
var DriverReloadStates = []string{"pod-restart-required", "post-maintenance-required"}

// DriverStatesNotOut are the driver upgrade states of a node that is not
// out for its upgrade (fleet.DriverStatesNotOut): every other state counts
// against the disruption budget (rule_budget.go).
var DriverStatesNotOut = fleet.DriverStatesNotOut

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
	// InFlight are the nodes carrying a driver upgrade state not in
	// DriverStatesNotOut, listed live (a cache a moment behind would let
	// two reloads start at once); they replace the cached copies when the
	// budget counts.
	InFlight []*corev1.Node
	User     UserInfo
	Now      time.Time
}

// PrepareDriverStep reviews the step with the driver-path rules for that one
// node: records named by the rolling object, hardware, the node's tuple
// after the reload (its current kernel, RKE2 and operator; the new driver
// and DCGM) as a record's target, no unproven downgrade, no GPU holders
// left, the disruption budget and the maintenance windows. No exemption
// applies.
func PrepareDriverStep(cfg *Config, cl *Cluster, st DriverStep) *DriverReview {
	ro := st.Rollout
	f := cfg.FactsOf(st.Node)
	ch := DriverChange{Object: fmt.Sprintf("Node %s driver reload (%s %s -> %s, rolling out %s)", st.Node.Name, LabelDriverUpgradeState, fleet.QuoteOrNone(st.OldState), st.NewState, fleet.QuoteOrNone(ro.Object)),
		Annotations: ro.Annotations, OldDriver: f.Driver, NewDriver: ro.Driver, DriverPath: ro.DriverPath, DCGMPath: ro.DCGMPath,
		Policy: ro.Policy, PolicyPath: pathDriverState, Reload: true}
	r := &DriverReview{req: DriverRequest{Change: ch, User: st.User, Now: st.Now}, step: &st,
		changed: true, current: map[string]qualification.Tuple{}}
	r.driverBase(cfg, cl)
	cur := cl.Current(f)
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
