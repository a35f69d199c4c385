package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// The change record of the demo's wave (issue 26 item 3): what
// `gpu-upgrade-gate change-record` prints, built the same way (the loader
// reads the cluster as the webhook's caches hold it; gate.ChangeRecordOf
// derives the record), and checked to show every field.

// waveRecordChecks gives the demo's record the typed canary results its
// canary measured (docs/proof.md), so the change record has figures.
func waveRecordChecks(r *qualification.Record) {
	passed := true
	nccl, ncclBase, ncclDev := 182.4, 185.0, 5.0
	gemm, gemmBase, gemmDev := 13.9, 14.1, 5.0
	r.Canary.Checks = []qualification.CanaryCheck{
		{Kind: "dcgm-diag", Level: 3, Passed: &passed},
		{Kind: "nccl-allreduce", Value: &nccl, Unit: "GB/s", Baseline: &ncclBase, MaxDeviationPercent: &ncclDev},
		{Kind: "gemm", Value: &gemm, Unit: "TFLOPS", Baseline: &gemmBase, MaxDeviationPercent: &gemmDev},
	}
}

func (d *demo) changeRecordStep() {
	const plan = sucNamespace + "/gpu-v100-canary"
	d.sucStep("The change record of the wave: every field the seed asks a change to keep", func() []string {
		d.out.why("objective and requester, version diff, the record (compatibility source), canary scope and figures, each node's proof, " +
			"the observation window, the rollback trigger, and the failure with its clear: derived from the Plan, the record, the nodes and the halt record, " +
			"nothing stored for it (docs/rollout.md#change-record).")
		d.out.cmd(alice.prompt, "gpu-upgrade-gate change-record --kubeconfig "+d.env.CP.Kubeconfig()+" --config <the webhook's config> --plan "+plan)
		live, err := loader.NewLiveFor(d.env.CP.RESTConfig())
		if err != nil {
			return []string{err.Error()}
		}
		cl, err := loader.New(d.env.Config, live).Cluster(d.ctx)
		if err != nil {
			return []string{err.Error()}
		}
		subject := gate.ChangeSubject{}
		for _, p := range cl.Plans {
			if p.Namespace+"/"+p.Name == plan {
				subject.Plan = p
			}
		}
		if subject.Plan == nil {
			return []string{"Plan " + plan + " is not stored"}
		}
		cr, err := d.env.Config.ChangeRecordOf(cl, subject, time.Now())
		if err != nil {
			return []string{err.Error()}
		}
		d.out.output(strings.TrimRight(cr.Text(), "\n"))
		var problems []string
		for _, f := range cr.EmptyFields() {
			problems = append(problems, fmt.Sprintf("the change record's %s is empty", f))
		}
		return problems
	})
}
