package fleet

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
)

// ProofFacts are the objects a proof reads besides the Node: the adapter
// caches them by label, so they are few.
type ProofFacts struct {
	// Validators are the Pods the validator selector picks that the
	// validator DaemonSet controls; Unowned the ones it picks that it does
	// not (ignored, and named in the proof of their node).
	Validators, Unowned []*corev1.Pod
	// ValidatorDaemonSet is the validator DaemonSet as read: a validator
	// Pod counts only with its UID in its controller reference
	// (ProofConfig.OwnValidators). ValidatorDaemonSetUnreadable says why
	// it is not there (it does not exist, or could not be read): no
	// validator Pod then proves a node or halts a rollout, and Validators
	// is empty. The loader sets one of them; facts
	// built without it (tests of other rules) leave the Pods as
	// ProofConfig.FactsOf sorted them.
	ValidatorDaemonSet           *appsv1.DaemonSet
	ValidatorDaemonSetUnreadable string
	// AllocationChecks are the Pods the allocation-check selector picks.
	AllocationChecks []*corev1.Pod
	// UpgradeJobs are SUC's Jobs (label upgrade.cattle.io/node).
	UpgradeJobs []*batchv1.Job
	// CheckJobs are the Jobs of the allocation checks' namespace, read only
	// with proof.checks: a check Pod counts only when its controller
	// reference carries the UID of one of them (nodechecks.go).
	CheckJobs []*batchv1.Job
	// DRA: what proofs of DRA nodes read (proof_dra.go).
	DRA DRAProofFacts
}

// DRAProofFacts are what proofs of DRA nodes read; empty unless the config
// names DRA drivers.
type DRAProofFacts struct {
	// DaemonSets are the DaemonSets of the drivers' namespaces: a driver's
	// kubelet-plugin DaemonSet says which nodes it serves (its scheduling),
	// which outlasts a crashed plugin and its withdrawn slices, and is the
	// one controller whose Pods count as its plugin (by UID).
	DaemonSets []*appsv1.DaemonSet
	// DaemonSetsUnreadable says why the DaemonSets could not be read ("" :
	// they were): which nodes are DRA nodes is then unknown, and every GPU
	// node stays unproven.
	DaemonSetsUnreadable string
	// PluginPods are the Pods of the drivers' namespaces; only those a
	// driver's DaemonSet controls count as its kubelet plugin.
	PluginPods []*corev1.Pod
	// Slices are the ResourceSlices, Claims the ResourceClaims of the
	// allocation checks' namespace (every namespace when it is not set).
	Slices []*resourcev1.ResourceSlice
	Claims []*resourcev1.ResourceClaim
	// Unreadable says why Slices and Claims could not be read (the API
	// server does not serve resource.k8s.io/v1); "" when they were. A node
	// running a driver's plugin then stays unproven.
	Unreadable string
}

// DaemonSet is a driver's kubelet-plugin DaemonSet, by namespace and name,
// among those read (nil: not read).
func (f *DRAProofFacts) DaemonSet(namespace, name string) *appsv1.DaemonSet {
	for _, ds := range f.DaemonSets {
		if ds.Namespace == namespace && ds.Name == name {
			return ds
		}
	}
	return nil
}
