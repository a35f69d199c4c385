package fleet

import (
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Checks per upgraded node (issue 26 item 2, docs/proof.md "Checks per
// node"): besides the allocation check, the config may name check kinds
// (a DCGM diagnostic, an NCCL all-reduce, a GEMM, ...) each upgraded GPU
// node must pass before it counts as proven. A check Pod is picked by the
// allocation check's selector (one cache, one watch) and declares its kind
// in LabelCheck; its result is the JSON its container leaves as its
// termination message, which only the kubelet writes into the Pod's status.
// A measured figure is compared with the baseline the node's record holds
// for that kind (its hardware, the tuple the node runs); a figure beyond
// the record's allowed deviation is a failure that halts the rollout.

// LabelCheck on a check Pod names its kind.
const LabelCheck = "gpu-upgrade-gate.io/check"

// NodeCheck is one check kind every upgraded GPU node must pass
// (proof.checks): the record's kind vocabulary; a dcgm-diag check names the
// lowest DCGM level that counts (a higher level runs the lower ones' tests).
type NodeCheck struct {
	Kind  string `json:"kind"`
	Level int    `json:"level,omitempty"`
}

// String names the check as the record's canary.checks do.
func (nc NodeCheck) String() string {
	return qualification.CanaryCheck{Kind: nc.Kind, Level: nc.Level}.CheckName()
}

// validateNodeChecks checks proof.checks (path); a check's figure can halt
// a rollout, so with any check the allocation check's namespace must be set:
// in every namespace, a tenant's Job could report a figure that halts it.
func validateNodeChecks(p *ProofConfig, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	checks := p.Checks
	if len(checks) > 0 && p.AllocationCheck.Namespace == "" {
		errs = append(errs, field.Required(path.Child("allocationCheck", "namespace"),
			"proof.checks is set and a check's figure can halt a rollout: name the namespace only the platform team writes to, where the check Jobs run (e.g. gpu-upgrade-gate)"))
	}
	path = path.Child("checks")
	seen := map[string]bool{}
	for i, nc := range checks {
		p := path.Index(i)
		if why := qualification.ValidCheckKind(nc.Kind); why != "" {
			errs = append(errs, field.Invalid(p.Child("kind"), qualification.Clip(nc.Kind), why))
			continue
		}
		switch {
		case nc.Kind == "dcgm-diag" && (nc.Level < 1 || nc.Level > 4):
			errs = append(errs, field.Invalid(p.Child("level"), nc.Level, "a dcgm-diag check names the lowest DCGM diagnostic level that counts, 1 to 4"))
		case nc.Kind != "dcgm-diag" && nc.Level != 0:
			errs = append(errs, field.Forbidden(p.Child("level"), "only a dcgm-diag check has a level"))
		case seen[nc.Kind]:
			errs = append(errs, field.Duplicate(p.Child("kind"), nc.Kind))
		}
		seen[nc.Kind] = true
	}
	return errs
}

// CheckFailure is a check result on a node that failed: a figure beyond
// the record's allowed deviation, or a pass/fail check that did not pass.
// Signal names the Pod, the kind, the figure and the baseline; At is when
// the check's container finished.
type CheckFailure struct {
	Signal string
	At     time.Time
}

// nodeCheckProof judges the configured checks of node n, which reached
// its tuple at reached: a Missing entry per check that did not pass, the
// failures among them, and the results that passed (for the decisions and
// the change record).
func (pr *Prover) nodeCheckProof(n *corev1.Node, reached time.Time) (missing []string, failures []CheckFailure, passes []string) {
	var pods []*corev1.Pod
	for _, p := range pr.View.PodsOn(AllocationCheckPods, n.Name) {
		if p.Labels[LabelCheck] != "" {
			pods = append(pods, p)
		}
	}
	recs := pr.nodeRecords(n)
	for _, want := range pr.Config.Checks {
		passed, notes, failed := false, []string(nil), []CheckFailure(nil)
		for _, pod := range pods {
			if pod.Labels[LabelCheck] != want.Kind {
				continue
			}
			ok, note, fail := judgeCheckPod(pod, pr.Facts.CheckJobs, want, recs, reached)
			passed = passed || ok
			switch {
			case ok:
				passes = append(passes, note)
			case note != "":
				notes = append(notes, note)
			}
			if fail != nil {
				failed = append(failed, *fail)
			}
		}
		switch {
		case len(failed) > 0:
			// A failure counts even beside a later pass: re-running a check
			// until it passes is what the record's explanation is for.
			slices.SortFunc(failed, func(a, b CheckFailure) int { return strings.Compare(a.Signal, b.Signal) })
			for _, f := range failed {
				missing = append(missing, "check "+want.String()+" failed: "+f.Signal)
			}
			failures = append(failures, failed...)
		case !passed:
			detail := "none on the node"
			if len(notes) > 0 {
				slices.Sort(notes)
				detail = nodeList(notes)
			}
			missing = append(missing, fmt.Sprintf("no %s check (Pod labelled %s=%s, controlled by a Job) passed after %s: %s", want, LabelCheck, want.Kind, Stamp(reached), detail))
		}
	}
	return missing, failures, passes
}

// nodeRecords are the loaded records of the node's hardware whose target
// (or source, for a node rolled back) is the tuple the node runs: their
// canary.checks hold its baselines.
func (pr *Prover) nodeRecords(n *corev1.Node) []*qualification.Record {
	f := FactsOf(pr.Vendors, n)
	cur := f.Tuple(pr.GPUOperator, pr.DCGMExporter)
	var out []*qualification.Record
	for _, name := range sortedKeys(pr.Records) {
		e := pr.Records[name]
		if e.Err != nil || e.Record == nil || !slices.Equal(e.Record.NormalizedHardware(), f.Identities) {
			continue
		}
		if SameTuple(cur, e.Record.Target) || (e.Record.Source != nil && SameTuple(cur, *e.Record.Source)) {
			out = append(out, e.Record)
		}
	}
	return out
}

// judgeCheckPod judges one check Pod of want's kind: whether it passes
// (the note then says its result), else a note saying why it does not
// count, or its failure. Its controller must be one of jobs, by UID: a Pod
// that merely names a Job (anyone who may create Pods in the checks'
// namespace could) is not counted.
func judgeCheckPod(pod *corev1.Pod, jobs []*batchv1.Job, want NodeCheck, recs []*qualification.Record, reached time.Time) (bool, string, *CheckFailure) {
	name := pod.Namespace + "/" + qualification.Clip(pod.Name)
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != "Job" || !strings.HasPrefix(ref.APIVersion, "batch/") {
		return false, name + " is not controlled by a Job: not counted", nil
	}
	if !slices.ContainsFunc(jobs, func(j *batchv1.Job) bool {
		return j.Namespace == pod.Namespace && j.Name == ref.Name && j.UID == ref.UID
	}) {
		return false, fmt.Sprintf("%s names Job %s as its controller, but no Job of that name and UID is in %s: not counted", name, qualification.Clip(ref.Name), pod.Namespace), nil
	}
	if pod.Status.StartTime == nil || pod.Status.StartTime.Time.Before(reached) {
		return false, name + " started before the node reached its tuple", nil
	}
	msg, finished, why := terminationMessage(pod)
	if why != "" {
		return false, fmt.Sprintf("%s is %s: %s", name, quoteOrNone(string(pod.Status.Phase)), why), nil
	}
	res, err := qualification.ParseCheckResult(field.NewPath("terminationMessage"), msg)
	switch {
	case err != nil:
		return false, name + ": " + err.Error() + ": not counted", nil
	case res.Kind != want.Kind:
		return false, fmt.Sprintf("%s reports kind %q but is labelled %s=%s: not counted", name, qualification.Clip(res.Kind), LabelCheck, want.Kind), nil
	case res.Level < want.Level:
		return false, fmt.Sprintf("%s ran %s, below the required level %d: not counted", name, res.CheckName(), want.Level), nil
	}
	succeeded := pod.Status.Phase == corev1.PodSucceeded
	if res.Passed != nil {
		if !*res.Passed {
			return false, "", &CheckFailure{Signal: fmt.Sprintf("check Pod %s: %s did not pass", name, res.CheckName()), At: finished}
		}
		if !succeeded {
			return false, fmt.Sprintf("%s reports %s passed but is %s: not counted", name, res.CheckName(), quoteOrNone(string(pod.Status.Phase))), nil
		}
		return true, fmt.Sprintf("check Pod %s: %s passed", name, res.CheckName()), nil
	}
	var baselines, within []string
	compared := false
	for _, rec := range recs {
		for _, b := range rec.Canary.Checks {
			if b.Kind != res.Kind || b.Value == nil || b.Baseline == nil {
				continue
			}
			if b.Unit != res.Unit {
				baselines = append(baselines, fmt.Sprintf("record %s's baseline is in %s, the Pod reports %s", rec.ID, b.Unit, qualification.Clip(res.Unit)))
				continue
			}
			compared = true
			node := b
			node.Value, node.Explanation = res.Value, ""
			if _, outside := node.Deviation(); outside {
				return false, "", &CheckFailure{Signal: fmt.Sprintf("check Pod %s: %s (baseline of record %s)", name, node.Summary(), rec.ID), At: finished}
			}
			within = append(within, fmt.Sprintf("%s (baseline of record %s)", node.Summary(), rec.ID))
		}
	}
	switch {
	case !compared && len(baselines) > 0:
		return false, name + ": " + strings.Join(baselines, "; ") + ": not counted", nil
	case !compared:
		return false, fmt.Sprintf("%s reports %s %s, but no record of the node's hardware and tuple holds a measured %s baseline in canary.checks: not counted", name, res.CheckName(), formatCheckValue(res), res.Kind), nil
	case !succeeded:
		return false, fmt.Sprintf("%s reports %s within the baseline but is %s: not counted", name, formatCheckValue(res), quoteOrNone(string(pod.Status.Phase))), nil
	}
	return true, fmt.Sprintf("check Pod %s: %s", name, strings.Join(within, "; ")), nil
}

func formatCheckValue(r qualification.CheckResult) string {
	return fmt.Sprintf("%g %s", *r.Value, r.Unit)
}

// terminationMessage is the result a check Pod's container left: the one
// non-empty termination message among its terminated containers, and when
// that container finished; why says what is wrong otherwise.
func terminationMessage(pod *corev1.Pod) (msg string, finished time.Time, why string) {
	var found []corev1.ContainerStatus
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && strings.TrimSpace(t.Message) != "" {
			found = append(found, cs)
		}
	}
	switch len(found) {
	case 0:
		return "", time.Time{}, "no container left a termination message (the result)"
	case 1:
		t := found[0].State.Terminated
		return t.Message, t.FinishedAt.Time, ""
	}
	names := make([]string, 0, len(found))
	for _, cs := range found {
		names = append(names, cs.Name)
	}
	return "", time.Time{}, "several containers left a termination message (" + strings.Join(names, ", ") + "), so which is the result is not known: not counted"
}
