package gate

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// OperatorRolloutConfig is the built-in precondition of a driver change
// (issue 27): the GPU Operator's own last change has finished. The
// operator's version fact is its Deployment's spec image, so without it a
// driver change could start while the operator that is to roll it out is
// itself still being replaced (an old and a new controller both
// reconciling, or a new one that never becomes ready).
type OperatorRolloutConfig struct {
	// Required: a driver change and the per-node driver step need the
	// operator's Deployment rolled out and, where OLM installed it, its
	// ClusterServiceVersion Succeeded. A Deployment that cannot be read
	// counts as unfinished.
	Required bool `json:"required"`
}

// DefaultOperatorRolloutConfig: required.
func DefaultOperatorRolloutConfig() OperatorRolloutConfig {
	return OperatorRolloutConfig{Required: true}
}

// OperatorRollout is the GPU Operator's own rollout as the adapter read it
// (live) for a driver change: its Deployment (config gpuOperator) and the
// OLM ClusterServiceVersions of its package in its namespace.
type OperatorRollout struct {
	// Deployment is "<namespace>/<name>".
	Deployment string
	// Err says why the Deployment could not be read (not found included):
	// the precondition then fails closed.
	Err error
	// Generation is metadata.generation; ObservedGeneration, Replicas (the
	// status count), UpdatedReplicas, ReadyReplicas and AvailableReplicas
	// the Deployment controller's status; Desired is spec.replicas (1 when
	// unset, as the API server defaults it).
	Generation, ObservedGeneration                                       int64
	Desired, Replicas, UpdatedReplicas, ReadyReplicas, AvailableReplicas int32
	// DeadlineExceeded: the Progressing condition reads
	// ProgressDeadlineExceeded (the controller gave up on the rollout).
	DeadlineExceeded bool
	// CSV is what OLM says of the operator.
	CSV OperatorCSVs
}

// OperatorCSVs are the GPU Operator's ClusterServiceVersions (config
// gpuOperatorCSV, ".v<version>") in its namespace. Served is false where
// the cluster serves no OLM API (a Helm install): the CSV check is then
// skipped, as it is when OLM is there but installed no such CSV. Err says
// why a list failed, which fails closed.
type OperatorCSVs struct {
	Served bool
	Items  []OperatorCSV
	Err    error
}

// OperatorCSV is one ClusterServiceVersion: its name, status.phase and
// status.reason.
type OperatorCSV struct {
	Name, Phase, Reason string
}

// csvSucceeded is OLM's phase of an installed, healthy operator.
const csvSucceeded = "Succeeded"

// Unfinished says what about the rollout is not finished, empty when it
// has finished: kubectl rollout status's reading of a Deployment
// (k8s.io/kubectl/pkg/polymorphichelpers/rollout_status.go,
// DeploymentStatusViewer), plus every replica ready, and every CSV of the
// package Succeeded.
func (o *OperatorRollout) Unfinished() []string {
	if o.Err != nil {
		return []string{"Deployment " + o.Deployment + " cannot be read (" + qualification.Clip(o.Err.Error()) + "), which counts as unfinished"}
	}
	var out []string
	d := "Deployment " + o.Deployment
	switch {
	case o.ObservedGeneration < o.Generation:
		out = append(out, fmt.Sprintf("%s: the Deployment controller has not observed its spec yet (status.observedGeneration %d < metadata.generation %d)", d, o.ObservedGeneration, o.Generation))
	case o.DeadlineExceeded:
		out = append(out, fmt.Sprintf("%s: its rollout exceeded its progress deadline (condition Progressing: ProgressDeadlineExceeded)", d))
	case o.UpdatedReplicas < o.Desired:
		out = append(out, fmt.Sprintf("%s: %d of %d replicas updated (status.updatedReplicas)", d, o.UpdatedReplicas, o.Desired))
	case o.Replicas > o.UpdatedReplicas:
		out = append(out, fmt.Sprintf("%s: %d old replica(s) pending termination (status.replicas %d, updatedReplicas %d)", d, o.Replicas-o.UpdatedReplicas, o.Replicas, o.UpdatedReplicas))
	case o.AvailableReplicas < o.UpdatedReplicas:
		out = append(out, fmt.Sprintf("%s: %d of %d updated replicas available (status.availableReplicas)", d, o.AvailableReplicas, o.UpdatedReplicas))
	case o.ReadyReplicas < o.Desired:
		out = append(out, fmt.Sprintf("%s: %d of %d replicas ready (status.readyReplicas)", d, o.ReadyReplicas, o.Desired))
	}
	switch c := o.CSV; {
	case c.Err != nil:
		out = append(out, "its ClusterServiceVersions cannot be read ("+qualification.Clip(c.Err.Error())+"), which counts as unfinished")
	default:
		for _, csv := range c.Items {
			if csv.Phase != csvSucceeded {
				s := fmt.Sprintf("ClusterServiceVersion %s is in phase %s, not Succeeded", csv.Name, fleet.QuoteOrNone(csv.Phase))
				if csv.Reason != "" {
					s += " (reason " + csv.Reason + ")"
				}
				out = append(out, s)
			}
		}
	}
	return out
}

// operatorRolloutChecked: a driver change that reloads or moves nodes, and
// the per-node driver step, while the precondition is on.
func (r *DriverReview) operatorRolloutChecked() bool {
	return r.cfg.OperatorRollout.Required && len(r.pending) > 0 && (r.step != nil || !r.operatorUpgrade())
}

// NeedsOperatorRollout says whether Decide reads the GPU Operator's own
// rollout (SetOperatorRollout).
func (r *DriverReview) NeedsOperatorRollout() bool { return r.changed && r.operatorRolloutChecked() }

// SetOperatorRollout gives the review the operator's rollout the adapter
// read live for it: the one source the rule reads (the cluster view has no
// copy, as it is read only for the reviews that need it).
func (r *DriverReview) SetOperatorRollout(o *OperatorRollout) { r.operatorRollout = o }

// operatorRolloutRule (driver path and step, review-level): the GPU
// Operator's own rollout has finished before it rolls out a driver.
func operatorRolloutRule(rv review, f *findings, _ *Decision) {
	r, ok := rv.(*DriverReview)
	if !ok || !r.operatorRolloutChecked() {
		return
	}
	o := r.operatorRollout
	if o == nil {
		// The adapter did not read it: fail closed.
		o = &OperatorRollout{Deployment: r.cfg.GPUOperator.Namespace + "/" + r.cfg.GPUOperator.Name, Err: fmt.Errorf("not read for this review")}
	}
	if seen := o.Unfinished(); len(seen) > 0 {
		path, object := r.req.Change.DriverPath, r.req.Change.Object
		if r.step != nil {
			path, object = pathDriverState, r.step.Rollout.Object+" on node "+r.step.Node.Name
		}
		f.add(operatorRolloutUnfinished(path, object, seen))
	}
}

// operatorRolloutUnfinished builds every OperatorRolloutUnfinished blocker.
func operatorRolloutUnfinished(path *field.Path, object string, seen []string) Blocker {
	return forbidden(CodeOperatorRolloutUnfinished, "", path, "the GPU Operator's own rollout has not finished, so it may not roll out a driver change (%s) yet: %s; wait until its Deployment is rolled out (`kubectl rollout status`: every replica updated, ready and available, no old replica left) and, where OLM installed it, its ClusterServiceVersion reads Succeeded, then retry (the operator retries its per-node step on its own), or turn the precondition off (operatorRollout.required: false)",
		object, strings.Join(seen, "; "))
}
