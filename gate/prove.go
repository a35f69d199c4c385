package gate

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
)

// Proof of an upgraded node is package fleet's (fleet/nodeproof.go,
// proof_dra.go, nodechecks.go; docs/proof.md): the names gate's rules and
// its callers (the loader, the CLI, the fleet generator) know it by.

// The proof's vocabulary (fleet's).
type (
	ProofRequirement  = fleet.ProofRequirement
	ProofConfig       = fleet.ProofConfig
	PodSelector       = fleet.PodSelector
	ValidatorSelector = fleet.ValidatorSelector
	HealthCondition   = fleet.HealthCondition
	NodeProof         = fleet.NodeProof
	NodeCheck         = fleet.NodeCheck
	CheckFailure      = fleet.CheckFailure
)

const (
	ProofReady       = fleet.ProofReady
	ProofValidator   = fleet.ProofValidator
	ProofResources   = fleet.ProofResources
	ProofDriverState = fleet.ProofDriverState
	ProofHealth      = fleet.ProofHealth
	ProofAllocation  = fleet.ProofAllocation
	ProofSoak        = fleet.ProofSoak
	// LabelCheck on a check Pod names its kind; TaintUnschedulable is the
	// cordon's taint (fleet's).
	LabelCheck         = fleet.LabelCheck
	TaintUnschedulable = fleet.TaintUnschedulable
)

// ProofRequirements lists every requirement, in the order proofs report them.
var ProofRequirements = fleet.ProofRequirements

// DefaultProofConfig is fleet's.
func DefaultProofConfig() ProofConfig { return fleet.DefaultProofConfig() }

// ProofFactsOf picks the proof facts from Pods and Jobs listed some other
// way (fleet's ProofConfig.FactsOf).
func (c *Config) ProofFactsOf(pods []*corev1.Pod, jobs []*batchv1.Job) ProofFacts {
	return c.Proof.FactsOf(pods, jobs)
}

// OwnValidators completes the proof facts with the validator DaemonSet as
// read (fleet's ProofConfig.OwnValidators).
func (c *Config) OwnValidators(f *ProofFacts, ds *appsv1.DaemonSet, err error) {
	c.Proof.OwnValidators(f, ds, err)
}

// Prove is one node's proof at now (fleet's Prover.Prove), over cl's facts
// and view: the name gate's rules and tests know it by (nothing outside
// gate proves a node).
func (c *Config) Prove(cl *Cluster, n *corev1.Node, now time.Time) NodeProof {
	pr := c.prover(cl)
	return pr.Prove(n, now)
}

// prover is the proof of cl's nodes under c.
func (c *Config) prover(cl *Cluster) fleet.Prover {
	pr := fleet.Prover{Config: &c.Proof, DRADrivers: c.DRADrivers, Facts: &cl.Proof, View: cl.fleetView()}
	if len(c.Proof.Checks) > 0 {
		pr.Vendors, pr.Records = c.GPUVendors, cl.Records
		pr.GPUOperator, pr.DCGMExporter = clusterVersions(cl)
	}
	return pr
}

// ownValidatorsOn are the node's validator Pods OwnValidators kept
// (fleet's Prover.OwnValidatorsOn).
func (cl *Cluster) ownValidatorsOn(node string) []*corev1.Pod {
	pr := fleet.Prover{Facts: &cl.Proof, View: cl.fleetView()}
	return pr.OwnValidatorsOn(node)
}
