package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// runChangeRecord prints the change record of one rollout (a stored Plan,
// or a driver change by its record), derived from the cluster state and the
// halt record (gate.ChangeRecord, docs/rollout.md#change-record).
func runChangeRecord(args []string, stdout, stderr io.Writer) int {
	var c clusterFlags
	var config, namespace, plan, record string
	var cm common
	fs := flagSet("change-record")
	fs.StringVar(&plan, "plan", "", "the rollout's Plan as namespace/name, as stored in the cluster")
	fs.StringVar(&record, "record", "", "for a GPU Operator driver change: the record ConfigMap (in --namespace) it was made under")
	c.register(fs)
	fs.StringVar(&config, "config", "", "the webhook's config file (default: with --kubeconfig the chart's ConfigMap, see --config-map; else the built-in defaults)")
	fs.StringVar(&namespace, "namespace", "gpu-upgrade-gate", "the gate's namespace, where records and the halt record are read")
	cm.register(fs)
	registerMaxInput(fs)
	if help, err := parseFlags(fs, args, false, stdout); help || err != nil {
		if err != nil {
			return fail(stderr, "change-record", err)
		}
		return exitAllowed
	}
	cr, err := changeRecord(&c, &cm, config, namespace, plan, record, fs.Changed("namespace"))
	if err != nil {
		return fail(stderr, "change-record", err)
	}
	if cm.output == "json" {
		writeJSON(stdout, cr)
	} else {
		fmt.Fprint(stdout, cr.Text())
	}
	return exitAllowed
}

func changeRecord(c *clusterFlags, cm *common, config, namespace, plan, record string, namespaceSet bool) (*gate.ChangeRecord, error) {
	now, err := cm.validate()
	if err != nil {
		return nil, err
	}
	if (plan == "") == (record == "") {
		return nil, usagef("give exactly one of --plan namespace/name (a SUC Plan) and --record name (a driver change's record)")
	}
	ns, name, ok := strings.Cut(plan, "/")
	if plan != "" && (!ok || ns == "" || name == "" || strings.Contains(name, "/")) {
		return nil, usagef("--plan %q: expected namespace/name, e.g. system-upgrade/gpu-v100-wave", qualification.Clip(plan))
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	live, err := c.live()
	if err != nil {
		return nil, err
	}
	cfg, err := c.readConfig(ctx, live, config, namespace, namespaceSet)
	if err != nil {
		return nil, err
	}
	src, _, err := c.source(live, "-")
	if err != nil {
		return nil, err
	}
	cl, err := loader.New(cfg, src).Cluster(ctx)
	if err != nil {
		return nil, inputf("%s: %v", c.where(), err)
	}
	subject := gate.ChangeSubject{Record: record}
	if plan != "" {
		var stored []string
		for _, p := range cl.Plans {
			if p.Namespace == ns && p.Name == name {
				subject.Plan = p
			}
			stored = append(stored, p.Namespace+"/"+p.Name)
		}
		if subject.Plan == nil {
			slices.Sort(stored)
			if len(stored) == 0 {
				stored = []string{"none"}
			}
			return nil, inputf("%s holds no Plan %s; Plans in the SUC namespaces: %s", c.where(), plan, qualification.Clip(strings.Join(stored, ", ")))
		}
	}
	cr, err := cfg.ChangeRecordOf(cl, subject, now)
	if err != nil {
		return nil, inputf("%v", err)
	}
	return cr, nil
}
