package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/snapshot"
)

type checkFlags struct {
	common
	clusterFlags
	plan, records, user, config, serverVersion, namespace string
	groups                                                []string
}

// planResult is one Plan's answer; Ignored is set for a Plan the webhook
// would never see.
type planResult struct {
	decision gate.Decision
	ignored  string
}

// runCheck gives the webhook's decision offline for each Plan of --plan.
func runCheck(args []string, stdout, stderr io.Writer) int {
	var f checkFlags
	fs := flagSet("check")
	fs.StringVar(&f.plan, "plan", "", "file with one or more upgrade.cattle.io/v1 Plans (YAML or JSON; required)")
	f.clusterFlags.register(fs)
	fs.StringVar(&f.records, "records", "", "record file, or directory of them; file NAME.yaml stands for ConfigMap NAME and replaces one of that name in --cluster")
	fs.StringVar(&f.user, "user", "", "the user applying the Plans (two-person rule: must not be the record's attested approver, nor under separation: three-person its author)")
	fs.StringArrayVar(&f.groups, "group", nil, "a group of that user, as the API server authenticates it (repeat the flag): decides break glass and group exemptions as the webhook does")
	fs.StringVar(&f.config, "config", "", "the webhook's config file (default: with --kubeconfig the chart's ConfigMap, see --config-map; else the built-in defaults)")
	fs.StringVar(&f.serverVersion, "server-version", "", "the API server's version (default: with --kubeconfig the API server's; else the lowest kubelet version of the List's control-plane nodes)")
	fs.StringVar(&f.namespace, "namespace", "gpu-upgrade-gate", "the gate's namespace, where record ConfigMaps are read (must equal the config's)")
	f.common.register(fs)
	registerMaxInput(fs)
	if help, err := parseFlags(fs, args, false, stdout); help || err != nil {
		if err != nil {
			return fail(stderr, "check", err)
		}
		return exitAllowed
	}
	results, err := check(&f, fs, stderr)
	if err != nil {
		return fail(stderr, "check", err)
	}
	status := exitAllowed
	if f.output == "json" {
		out := make([]jsonDecision, len(results))
		for i, r := range results {
			out[i] = toJSON(r.decision, styleWhere)
			out[i].Object = r.decision.Object
			if r.ignored != "" {
				out[i].Warnings = append(out[i].Warnings, r.ignored)
			}
		}
		writeJSON(stdout, out)
	}
	for i, r := range results {
		if !r.decision.Allowed {
			status = exitDenied
		}
		if f.output == "text" {
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			writeCheckText(stdout, r)
		}
	}
	return status
}

func check(f *checkFlags, fs *pflag.FlagSet, stderr io.Writer) ([]planResult, error) {
	now, err := f.validate()
	if err != nil {
		return nil, err
	}
	if !fs.Changed("plan") {
		return nil, usagef("required flag --plan not set")
	}
	if err := f.clusterFlags.check(); err != nil {
		return nil, err
	}
	if f.serverVersion != "" {
		if _, err := gate.ParseKube(f.serverVersion); err != nil {
			return nil, usagef("--server-version: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	live, err := f.live()
	if err != nil {
		return nil, err
	}
	cfg, err := f.readConfig(ctx, live, f.config, f.namespace, fs.Changed("namespace"))
	if err != nil {
		return nil, err
	}
	data, err := readInput("--plan", f.plan)
	if err != nil {
		return nil, err
	}
	plans, err := upgradev1.DecodePlansYAML(data)
	if err != nil {
		return nil, inputf("--plan %s: %v", f.plan, err)
	}
	if len(plans) == 0 {
		return nil, inputf("--plan %s holds no Plan", f.plan)
	}
	for _, p := range plans {
		if p.Namespace == "" {
			return nil, inputf("--plan %s: Plan %s has no metadata.namespace; set it, since the webhook decides by namespace", f.plan, p.Name)
		}
	}
	src, _, err := f.source(live, f.serverVersion)
	if err != nil {
		return nil, err
	}
	load := loader.New(cfg, src)
	cl, err := load.Cluster(ctx)
	if err != nil {
		if live == nil {
			return nil, inputf("--cluster %s: %v; pass --server-version (kubectl version prints it)", f.cluster, err)
		}
		return nil, inputf("%s: %v", f.where(), err)
	}
	if f.records != "" {
		files, err := snapshot.LoadRecords(f.records)
		if err != nil {
			return nil, unreadable("--records", f.records, err)
		}
		for _, rf := range files {
			if cm, ok := cl.Records[rf.Name]; ok {
				fmt.Fprintf(stderr, "note: record file %s replaces ConfigMap %s/%s of the cluster (its attested author and approval kept: they hold only if the file is its data byte for byte)\n", rf.Path, cfg.Namespace, rf.Name)
				rf.Entry.Attestation = snapshot.KeepAttestation(cm.Attestation, rf.Entry.Attestation)
			}
			cl.Records[rf.Name] = rf.Entry
		}
	}

	results := make([]planResult, 0, len(plans))
	for _, p := range plans {
		object := "Plan " + p.Namespace + "/" + p.Name
		if !slices.Contains(cfg.SUCNamespaces, p.Namespace) {
			results = append(results, planResult{
				decision: gate.Decision{Object: object, Allowed: true},
				ignored:  fmt.Sprintf("ignored: %s is outside the SUC namespaces (%s); the webhook never sees it and SUC never runs it", object, strings.Join(cfg.SUCNamespaces, ", ")),
			})
			continue
		}
		review := gate.PreparePlan(cfg, cl, gate.PlanRequest{Operation: "CREATE", Plan: p, User: gate.UserInfo{Name: f.user, Groups: f.groups}, Now: now})
		holders, herr := load.Holders(ctx, review.HolderNodes())
		results = append(results, planResult{decision: review.Decide(holders, herr)})
	}
	return results, nil
}

// loadConfig reads --config over the defaults and settles the namespace
// (namespaceSet: --namespace was given).
func loadConfig(path, namespace string, namespaceSet bool) (*gate.Config, error) {
	cfg := gate.DefaultConfig()
	if path != "" {
		data, err := readInput("--config", path)
		if err != nil {
			return nil, err
		}
		if cfg, err = gate.LoadConfig(data); err != nil {
			return nil, inputf("--config %s: %v", path, err)
		}
		if namespaceSet && namespace != cfg.Namespace {
			return nil, usagef("--namespace %q differs from namespace %q in --config %s; records are read only from the gate's own namespace: drop --namespace or fix the config", namespace, cfg.Namespace, path)
		}
		return cfg, nil
	}
	if msgs := validation.IsDNS1123Label(namespace); len(msgs) > 0 {
		return nil, usagef("--namespace %q: %s", namespace, msgs[0])
	}
	cfg.Namespace = namespace
	return cfg, nil
}

func writeCheckText(w io.Writer, r planResult) {
	d := r.decision
	verdict := "ALLOW"
	if !d.Allowed {
		verdict = "DENY"
	}
	fmt.Fprintf(w, "%s %s\n", verdict, d.Object)
	if r.ignored != "" {
		fmt.Fprintf(w, "  %s\n", r.ignored)
		return
	}
	writeBlockers(w, d, "  ", styleWhere)
	for _, warn := range d.Warnings {
		fmt.Fprintf(w, "  warning: %s\n", warn)
	}
	if len(d.Nodes) > 0 {
		fmt.Fprintf(w, "  pending GPU nodes: %s\n", strings.Join(d.Nodes, ", "))
	}
	fmt.Fprintf(w, "  record: %s\n", recordLine(d.Record))
}
