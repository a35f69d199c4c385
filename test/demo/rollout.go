package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/controlplane"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// The health-gated rollout with the real system-upgrade-controller (issue
// 12 item 7; the e2e test TestSUCWaveWaitsForProof proves the same). SUC
// runs out of cluster against the demo's API server as its upstream
// manifests deploy it; what cannot run here (the Job's pod, the Job
// controller, the kubelet, nfd-master, the GPU Operator's validator) is
// written by the demo as each would write it.

// demoSoak is the proof's soak in the demo (30m by default), so the rollout
// fits in a minute or two.
const demoSoak = 5 * time.Second

// sucDeadline bounds each wait on SUC: after a refusal SUC retries after
// 5ms·2^n up to 30s between tries (lasso's default rate limiter).
const sucDeadline = 3 * time.Minute

var wave = []string{"gpu-v100-01", "gpu-v100-02"}

func (d *demo) rollout() {
	p := d.out
	p.section("The rollout, with the real system-upgrade-controller")
	p.blank()
	bin, archive, err := testenv.BuildSUC(d.ctx)
	if errors.Is(err, testenv.ErrNoSUCSource) {
		p.para("Skipped: " + err.Error() + ".")
		return
	}
	if err != nil {
		d.fail("build SUC", err.Error())
		return
	}

	p.cmd("ml$", "kubectl delete pod -n ml "+holderPod)
	holder := testenv.Holder(holderPod, "gpu-v100-02")
	if err := d.env.Admin.Delete(d.ctx, holder, client.GracePeriodSeconds(0)); err != nil {
		d.fail("delete the holder", err.Error())
		return
	}
	p.output(fmt.Sprintf("pod %q deleted", holderPod))
	p.dim("  the training job on gpu-v100-02 finished, so both idle V100 nodes at the source tuple can join the wave")

	canary := "gpu-v100-canary.yaml"
	d.runStep(stepSpec{
		title: "alice widens the canary Plan to a wave of two: gpu-v100-01 and gpu-v100-02",
		why: fmt.Sprintf("gpu-v100-03 is a proven canary at the target, so a wave of up to %d nodes (this demo's waveSize) in one zone may follow; "+
			"SUC takes them one at a time (concurrency 1), and the gate proves each before the next.", d.env.Config.WaveSize),
		expect: allowed(),
		do: func() result {
			return d.applyEdit(alice, canary, func(pl *upgradev1.Plan) { pl.Spec.NodeSelector = hostnames(wave...) })
		},
	})
	if d.ctx.Err() != nil || len(d.failures) > 0 {
		return
	}

	var first string
	var job *batchv1.Job
	d.sucStep("The real system-upgrade-controller starts and creates the Job for one node", func() []string {
		d.out.why("SUC v0.20.1, built from ../shared/thirdparty by `make suc`, runs as its upstream ServiceAccount and RBAC; the gate's Job guard reviews the start of each node's Job.")
		suc, err := d.env.StartSUC(d.ctx, bin, archive, filepath.Join(d.env.CP.WorkDir(), "suc"))
		if err != nil {
			return []string{err.Error()}
		}
		d.suc = suc
		d.out.dim("  SUC's log: " + suc.LogPath)
		err = d.until("SUC starts a node's Job", func() (bool, error) {
			first, job = d.runningJob()
			return job != nil, nil
		})
		if err != nil {
			return []string{err.Error()}
		}
		d.printRollout()
		return nil
	})
	if first == "" {
		return
	}
	second := wave[0]
	if first == wave[0] {
		second = wave[1]
	}

	d.sucStep("The Job upgrades "+first+" and completes; SUC's uncordon is refused", func() []string {
		d.out.why("SUC uncordons a node and marks it done the moment its Job completes; the node runs the target but nothing shows yet that its GPUs work, so the gate refuses that write (UncordonBeforeProof) and SUC retries on its own.")
		d.out.dim("  played here (no kubelet, Job controller or nfd-master runs): the Job's pod cordons " + first + " as SUC's ServiceAccount;")
		d.out.dim("  its kubelet and nfd-master report the target tuple; the Job controller marks the Job Complete")
		if err := d.env.CordonAsSUCJob(d.ctx, first); err != nil {
			return []string{err.Error()}
		}
		if err := d.env.MoveNodeTo(d.ctx, first, testenv.Target); err != nil {
			return []string{err.Error()}
		}
		if err := d.env.FinishJob(d.ctx, job, true); err != nil {
			return []string{err.Error()}
		}
		var refusedWrites []controlplane.AuditEvent
		err := d.until("SUC's completion write refused twice and the next node's Job refused", func() (bool, error) {
			writes, err := d.completionWrites(first)
			refusedWrites = writes
			if err != nil || len(writes) < 2 || !refusedAll(writes) {
				return false, err
			}
			starts, err := d.env.SUCReviews(webhook.WebhookJobs, "jobs")
			return slices.ContainsFunc(starts, func(e controlplane.AuditEvent) bool {
				return e.Annotations[webhook.WebhookJobs+"/nodes"] == second && e.Annotations[webhook.WebhookJobs+"/decision"] == "deny"
			}), err
		})
		if err != nil {
			return []string{err.Error()}
		}
		d.out.blank()
		d.out.line(fmt.Sprintf("    audit log: %d completion writes of %s by %s, each refused:", len(refusedWrites), first, testenv.SUCUser))
		d.printBlockers(refusedWrites[0].ResponseStatus.Message)
		d.out.blank()
		for _, l := range wrap("SUC's cache already shows "+first+" done (SUC edits its cached Node before writing), so it moves on and creates "+
			second+"'s Job; the Job guard refuses that too while "+first+" is unproven:", "    ", "    ", 100) {
			d.out.line(l)
		}
		starts, _ := d.env.SUCReviews(webhook.WebhookJobs, "jobs")
		for _, e := range starts {
			if e.Annotations[webhook.WebhookJobs+"/nodes"] == second && e.Annotations[webhook.WebhookJobs+"/decision"] == "deny" {
				d.printBlockers(e.ResponseStatus.Message)
				break
			}
		}
		d.printRollout()
		var problems []string
		if n := d.node(first); n == nil || !n.Spec.Unschedulable {
			problems = append(problems, first+" is not cordoned")
		}
		if _, j := d.runningJob(); j != nil && j.Labels[upgradev1.LabelNode] != first {
			problems = append(problems, "the Job of "+j.Labels[upgradev1.LabelNode]+" runs")
		}
		return problems
	})
	if d.ctx.Err() != nil || len(d.failures) > 0 {
		return
	}

	d.sucStep("The proof arrives; SUC uncordons "+first+" on its own retry and moves on to "+second, func() []string {
		d.out.why(fmt.Sprintf("proof (docs/proof.md): the GPU Operator's validator Pod on the node Ready, an allocation check that got a GPU Succeeded, "+
			"and both held for the soak (%s in this demo, 30m by default). Nobody touches SUC or its Plan.", demoSoak))
		d.out.dim("  played here: the validator Pod and the allocation-check Pod with the status their kubelet would write")
		proofAt := time.Now()
		if err := d.env.ProveUpgradedNode(d.ctx, first, proofAt); err != nil {
			return []string{err.Error()}
		}
		err := d.until("SUC uncordons "+first+" and starts "+second+"'s Job", func() (bool, error) {
			n := d.node(first)
			node, _ := d.runningJob()
			return n != nil && !n.Spec.Unschedulable && n.Labels[upgradev1.LabelPlanName("gpu-v100-canary")] != "" && node == second, nil
		})
		if err != nil {
			return []string{err.Error()}
		}
		writes, _ := d.completionWrites(first)
		d.out.blank()
		if i := slices.IndexFunc(writes, func(e controlplane.AuditEvent) bool { return !refused(e) }); i >= 0 {
			d.out.line(fmt.Sprintf("    audit log: after %d refusals, SUC's completion write of %s was allowed %s after the proof arrived (%s=%s)",
				i, first, writes[i].StageTimestamp.Sub(proofAt).Round(100*time.Millisecond),
				webhook.WebhookCompletions+"/"+gate.AuditProofs, writes[i].Annotations[webhook.WebhookCompletions+"/"+gate.AuditProofs]))
		}
		d.printRollout()
		return nil
	})
}

// sucStep is a step whose outcome is what SUC does; run returns what did
// not behave as the title says.
func (d *demo) sucStep(title string, run func() []string) {
	if d.ctx.Err() != nil {
		return
	}
	d.step++
	d.out.stepTitle(d.step, title)
	problems := run()
	if d.ctx.Err() != nil {
		return
	}
	if len(problems) == 0 {
		d.out.ok("as expected")
		return
	}
	for _, pr := range problems {
		d.out.bad("UNEXPECTED: " + pr)
	}
	d.failures = append(d.failures, fmt.Sprintf("step %d (%s): %s", d.step, title, strings.Join(problems, "; ")))
}

// until polls cond every 200ms for up to sucDeadline.
func (d *demo) until(what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(sucDeadline)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %s did not happen (SUC's log: %s)", sucDeadline, what, d.suc.LogPath)
		}
		select {
		case <-d.ctx.Done():
			return d.ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// runningJob is the wave's node whose Job SUC runs and the Job controller
// has not finished.
func (d *demo) runningJob() (string, *batchv1.Job) {
	var jobs batchv1.JobList
	if err := d.env.Admin.List(d.ctx, &jobs, client.InNamespace(sucNamespace), client.MatchingLabels{upgradev1.LabelPlan: "gpu-v100-canary"}); err != nil {
		return "", nil
	}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if gate.JobRuns(j.Spec) && j.Status.CompletionTime == nil && j.Status.Failed == 0 {
			return j.Labels[upgradev1.LabelNode], j
		}
	}
	return "", nil
}

func (d *demo) node(name string) *corev1.Node {
	var n corev1.Node
	if err := d.env.Admin.Get(d.ctx, client.ObjectKey{Name: name}, &n); err != nil {
		return nil
	}
	return &n
}

func (d *demo) completionWrites(node string) ([]controlplane.AuditEvent, error) {
	events, err := d.env.SUCReviews(webhook.WebhookCompletions, "nodes")
	return slices.DeleteFunc(events, func(e controlplane.AuditEvent) bool { return e.ObjectRef.Name != node }), err
}

func refused(e controlplane.AuditEvent) bool {
	return e.Annotations[webhook.WebhookCompletions+"/decision"] == "deny"
}

func refusedAll(events []controlplane.AuditEvent) bool {
	return !slices.ContainsFunc(events, func(e controlplane.AuditEvent) bool { return !refused(e) })
}

// printRollout shows the wave as `kubectl get` would: the Plan's
// status.applying, the Jobs, the two nodes.
func (d *demo) printRollout() {
	p := d.out
	var pl upgradev1.Plan
	if err := d.env.Admin.Get(d.ctx, client.ObjectKey{Namespace: sucNamespace, Name: "gpu-v100-canary"}, &pl); err != nil {
		d.fail("get the Plan", err.Error())
		return
	}
	p.blank()
	p.cmd(alice.prompt, "kubectl get plan gpu-v100-canary -n "+sucNamespace+" -o jsonpath='{.status.applying}'")
	p.output(fmt.Sprintf("%q", pl.Status.Applying))
	var jobs batchv1.JobList
	if err := d.env.Admin.List(d.ctx, &jobs, client.InNamespace(sucNamespace)); err != nil {
		d.fail("list Jobs", err.Error())
		return
	}
	p.cmd(alice.prompt, "kubectl get jobs -n "+sucNamespace+" -L "+upgradev1.LabelNode)
	tw := p.table()
	fmt.Fprintln(tw, "    NAME\tPARALLELISM\tSTATUS\tNODE")
	for _, j := range jobs.Items {
		status := "Running"
		switch {
		case j.Status.CompletionTime != nil:
			status = "Complete"
		case j.Status.Failed > 0:
			status = "Failed"
		case !gate.JobRuns(j.Spec):
			status = "Paused"
		}
		par := int32(1)
		if j.Spec.Parallelism != nil {
			par = *j.Spec.Parallelism
		}
		fmt.Fprintf(tw, "    %s\t%d\t%s\t%s\n", clip(j.Name, 40), par, status, j.Labels[upgradev1.LabelNode])
	}
	_ = tw.Flush()
	p.cmd(alice.prompt, "kubectl get nodes "+strings.Join(wave, " "))
	tw = p.table()
	fmt.Fprintln(tw, "    NAME\tSCHEDULABLE\tKERNEL\tRKE2 (KUBELET)\tDRIVER\tDONE (plan label)")
	for _, name := range wave {
		n := d.node(name)
		if n == nil {
			continue
		}
		sched := "yes"
		if n.Spec.Unschedulable {
			sched = "cordoned"
		}
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\t%s\n", name, sched, n.Status.NodeInfo.KernelVersion, n.Status.NodeInfo.KubeletVersion,
			n.Labels["nvidia.com/cuda.driver-version.full"], orDash(clip(n.Labels[upgradev1.LabelPlanName("gpu-v100-canary")], 12)))
	}
	_ = tw.Flush()
}

// printBlockers prints the "[Code] ..." lines of a denial, wrapped.
func (d *demo) printBlockers(msg string) {
	for _, l := range strings.Split(msg, "\n") {
		if i := strings.Index(l, "["); i >= 0 && codeRE.MatchString(l[i:]) {
			for _, w := range wrap(l, "      ", "        ", 100) {
				d.out.line(w)
			}
		}
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
