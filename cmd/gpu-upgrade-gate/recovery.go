package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/dra"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/snapshot"
)

// runRecoveryPlan is the seed's read-only stale DRA driver recovery
// planner: it prints at most one candidate Pod with every fact it relied
// on, or why there is none, and never deletes anything. Exit 0 with a
// candidate, 1 without.
func runRecoveryPlan(args []string, stdout, stderr io.Writer) int {
	var c clusterFlags
	var d dra.Driver
	var cm common
	var minUnready time.Duration
	fs := flagSet("recovery-plan")
	fs.StringVar(&c.cluster, "cluster", "", "v1 List of the cluster's state, saved with: "+snapshot.RecoveryRecipe)
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "read the live cluster through this kubeconfig instead of a --cluster file")
	fs.StringVar(&d.Name, "driver", "gpu.nvidia.com", "the DRA driver's name in ResourceSlices (spec.driver); HAMi's is hami-core-gpu.project-hami.io")
	fs.StringVar(&d.Namespace, "namespace", "nvidia-dra-driver-gpu", "the namespace of the driver's kubelet-plugin DaemonSet")
	fs.StringVar(&d.DaemonSet, "daemonset", "nvidia-dra-driver-gpu-kubelet-plugin", "the driver's kubelet-plugin DaemonSet")
	fs.DurationVar(&minUnready, "min-unready-age", dra.DefaultMinUnready, "how long a driver Pod must have been unready to be a candidate (at least 1m)")
	cm.register(fs)
	registerMaxInput(fs)
	if help, err := parseFlags(fs, args, false, stdout); help || err != nil {
		if err != nil {
			return fail(stderr, "recovery-plan", err)
		}
		return exitAllowed
	}
	plan, err := recoveryPlan(&c, d, minUnready, &cm)
	if err != nil {
		return fail(stderr, "recovery-plan", err)
	}
	if cm.output == "json" {
		writeJSON(stdout, plan)
	} else {
		writeRecoveryPlan(stdout, plan)
	}
	if plan.Candidate == nil {
		return exitDenied
	}
	return exitAllowed
}

func recoveryPlan(c *clusterFlags, d dra.Driver, minUnready time.Duration, cm *common) (*dra.RecoveryPlan, error) {
	now, err := cm.validate()
	if err != nil {
		return nil, err
	}
	if (c.cluster == "") == (c.kubeconfig == "") {
		return nil, usagef("give exactly one of --cluster (a List saved with %s) and --kubeconfig", snapshot.RecoveryRecipe)
	}
	// A bad bound is refused, never replaced by the default: a shorter one
	// would offer a driver Pod that is merely restarting.
	if minUnready < time.Minute {
		return nil, usagef("--min-unready-age %s is too short: at least 1m (the seed's bound is %s)", minUnready, dra.DefaultMinUnready)
	}
	// Each flag names what the driver entry of the config names.
	if errs := d.Validate(nil); len(errs) > 0 {
		flag := map[string]string{"name": "--driver", "namespace": "--namespace", "daemonSet": "--daemonset"}[errs[0].Field]
		return nil, usagef("%s %q: %s", flag, errs[0].BadValue, errs[0].Detail)
	}
	live, err := c.live()
	if err != nil {
		return nil, err
	}
	src, _, err := c.source(live, "-")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in, err := loader.New(gate.DefaultConfig(), src).Recovery(ctx, d, minUnready, now)
	if err != nil {
		return nil, inputf("%s: %v", c.where(), err)
	}
	return dra.PlanRecovery(in), nil
}

func writeRecoveryPlan(w io.Writer, p *dra.RecoveryPlan) {
	fmt.Fprintf(w, "driver %s, kubelet plugin DaemonSet %s/%s\n", p.Driver.Name, p.Driver.Namespace, p.Driver.DaemonSet)
	mark := func(c dra.Condition) string {
		if c.Holds {
			return "[PASS]"
		}
		return "[FAIL]"
	}
	fmt.Fprintf(w, "%s %s: %s\n", mark(p.DaemonSet), p.DaemonSet.Name, p.DaemonSet.Detail)
	for _, f := range p.Pods {
		fmt.Fprintf(w, "pod %s/%s on node %s:\n", f.Namespace, f.Pod, f.Node)
		for _, c := range f.Conditions[1:] { // the DaemonSet's is above
			fmt.Fprintf(w, "  %s %s: %s\n", mark(c), c.Name, c.Detail)
		}
	}
	for _, i := range p.Ignored {
		fmt.Fprintf(w, "ignored %s\n", i)
	}
	if p.Candidate == nil {
		fmt.Fprintf(w, "no safe stale-driver recovery candidate: %s; nothing was deleted\n", p.Why)
		return
	}
	fmt.Fprintf(w, "candidate: %s/%s on node %s, unready since %s\n", p.Candidate.Namespace, p.Candidate.Pod, p.Candidate.Node, p.Candidate.UnreadySince.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "Execute separately after review: %s\n", p.Command())
	fmt.Fprintln(w, "(recovery-plan never deletes; nothing was deleted)")
}
