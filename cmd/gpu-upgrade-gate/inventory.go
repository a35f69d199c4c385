package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/precondition"
)

// runInventory prints, per GPU node, its hardware, current tuple, covering
// record, target, readiness status, rollback method, holders and cordon.
func runInventory(args []string, stdout, stderr io.Writer) int {
	var c clusterFlags
	var config, namespace, now, output string
	fs := flagSet("inventory")
	c.register(fs)
	fs.StringVar(&config, "config", "", "the webhook's config file (default: with --kubeconfig the chart's ConfigMap, see --config-map; else the built-in defaults)")
	fs.StringVar(&namespace, "namespace", "gpu-upgrade-gate", "the gate's namespace, where record ConfigMaps are read")
	fs.StringVar(&now, "now", "", "as of this RFC 3339 time instead of the clock")
	fs.StringVarP(&output, "output", "o", "table", "output format: table, json or csv")
	registerMaxInput(fs)
	if help, err := parseFlags(fs, args, false, stdout); help || err != nil {
		if err != nil {
			return fail(stderr, "inventory", err)
		}
		return exitAllowed
	}
	inv, pre, err := inventory(&c, config, namespace, now, output, fs.Changed("namespace"))
	if err != nil {
		return fail(stderr, "inventory", err)
	}
	switch output {
	case "json":
		writeJSON(stdout, inv)
	case "csv":
		writeInventoryCSV(stdout, inv)
	default:
		writeInventoryTable(stdout, inv)
		for _, l := range pre {
			fmt.Fprintln(stdout, l)
		}
	}
	return exitAllowed
}

func inventory(c *clusterFlags, config, namespace, now, output string, namespaceSet bool) ([]gate.NodeInventory, []string, error) {
	read, err := nodeInventory(c, config, namespace, now, output, namespaceSet)
	if err != nil {
		return nil, nil, err
	}
	cfg, live := read.cfg, read.live
	var lines []string
	if cfg.OperatorRollout.Required {
		var op *gate.OperatorRollout
		if live != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			op = loader.ReadOperatorRollout(ctx, live.Client, cfg)
		}
		lines = append(lines, operatorRolloutLine(cfg, op))
	}
	if len(cfg.Preconditions) > 0 {
		var pre []*precondition.Reading
		if live != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			pre = live.Preconditions(ctx, cfg)
		}
		lines = append(lines, preconditionLines(cfg, pre, read.at)...)
	}
	return read.nodes, lines, nil
}

// operatorRolloutLine is the built-in operator-rollout precondition's state
// (OperatorRolloutUnfinished), as a driver change would read it now; op nil:
// not read (a file: the live read needs --kubeconfig).
func operatorRolloutLine(cfg *gate.Config, op *gate.OperatorRollout) string {
	what := fmt.Sprintf("PRECONDITION operator-rollout (builtin: Deployment %s/%s rolled out and its ClusterServiceVersions Succeeded, before a driver change)", cfg.GPUOperator.Namespace, cfg.GPUOperator.Name)
	switch {
	case op == nil:
		return what + ": not read: inventory reads it with --kubeconfig"
	case len(op.Unfinished()) > 0:
		return what + ": fails: " + strings.Join(op.Unfinished(), "; ")
	}
	return what + ": holds"
}

// preconditionLines: one line per declared precondition, its state as read
// here (read[i]; nil: not read here).
func preconditionLines(cfg *gate.Config, read []*precondition.Reading, at time.Time) []string {
	var out []string
	for i, p := range cfg.Preconditions {
		state, seen := "not read", "a file holds no watched objects: inventory reads CEL preconditions with --kubeconfig"
		switch {
		case p.Kind == precondition.KindAlerts:
			seen = "alert sources are polled by the webhook only: see its metric gpu_upgrade_gate_precondition_state"
		case i < len(read) && read[i] != nil:
			s, why := read[i].At(at)
			state, seen = string(s), why
		}
		out = append(out, fmt.Sprintf("PRECONDITION %s (%s): %s: %s", p.Name, gate.PreconditionReads(p), state, seen))
	}
	return out
}

// inventoryRead is what nodeInventory read: the GPU nodes' inventory, the
// config it read them under, the live client (nil for a file) the
// preconditions are read with, and the time they are judged at.
type inventoryRead struct {
	nodes []gate.NodeInventory
	cfg   *gate.Config
	live  *loader.Live
	at    time.Time
}

func nodeInventory(c *clusterFlags, config, namespace, now, output string, namespaceSet bool) (inventoryRead, error) {
	if output != "table" && output != "json" && output != "csv" {
		return inventoryRead{}, usagef("-o/--output %q is not supported: use table, json or csv", output)
	}
	if err := c.check(); err != nil {
		return inventoryRead{}, err
	}
	at, err := parseNow(now)
	if err != nil {
		return inventoryRead{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	live, err := c.live()
	if err != nil {
		return inventoryRead{}, err
	}
	cfg, err := c.readConfig(ctx, live, config, namespace, namespaceSet)
	if err != nil {
		return inventoryRead{}, err
	}
	// The inventory reads no API server version: "-" stands for it, so a
	// List without control-plane nodes still lists its GPU nodes.
	src, _, err := c.source(live, "-")
	if err != nil {
		return inventoryRead{}, err
	}
	load := loader.New(cfg, src)
	cl, err := load.Cluster(ctx)
	if err != nil {
		return inventoryRead{}, inputf("%s: %v", c.where(), err)
	}
	var gpu []string
	for _, n := range cl.Nodes {
		if cfg.IsGPUNode(n) {
			gpu = append(gpu, n.Name)
		}
	}
	holders, err := load.Holders(ctx, gpu)
	if err != nil {
		return inventoryRead{}, inputf("%s: %v", c.where(), err)
	}
	inv := gate.Inventory(cfg, cl, holders, at)
	if len(cfg.DRADrivers) > 0 {
		byNode, err := load.DRANodes(ctx, cfg.DRADrivers)
		if err != nil {
			return inventoryRead{}, inputf("%s: %v", c.where(), err)
		}
		for i := range inv {
			inv[i].DRA = byNode[inv[i].Node]
		}
	}
	return inventoryRead{nodes: inv, cfg: cfg, live: live, at: at}, nil
}

// inventoryColumns: one column per tuple component, from the component table.
var inventoryColumns = func() []string {
	cols := []string{"NODE", "HARDWARE"}
	for _, c := range gate.ComponentTable() {
		if !c.Optional { // the DRA driver: its column is DRA's
			cols = append(cols, strings.ToUpper(c.Flag))
		}
	}
	return append(cols, "RECORD", "AGE", "EXPIRES", "APPROVED", "TARGET", "STATUS", "PROOF", "ROLLBACK", "HOLDERS", "CORDONED", "DRA")
}()

func inventoryRow(n gate.NodeInventory) []string {
	record, age, expires, approved, target := "-", "-", "-", "-", "-"
	if n.Record != nil {
		record, age, expires, approved = n.Record.ID, n.Record.Age, n.Record.Expires, "no"
		if n.Record.ApprovedBy != "" {
			approved = n.Record.ApprovedBy
		}
	}
	if n.Target != nil {
		var diff []string
		for _, c := range gate.Components {
			if want := gate.TupleValue(*n.Target, c); !gate.SameComponent(c, gate.TupleValue(n.Current, c), want) {
				diff = append(diff, string(c)+"="+want)
			}
		}
		target = strings.Join(diff, " ")
		if target == "" {
			target = "(current)"
		}
	}
	holders := make([]string, len(n.Holders))
	for i, h := range n.Holders {
		holders[i] = h.String()
	}
	proof := orDash(n.Proof)
	if len(n.ProofMissing) > 0 {
		proof = "missing: " + strings.Join(n.ProofMissing, "; ")
	}
	hw := strings.Join(n.Hardware, ",")
	if hw == "" {
		hw = "<no identity label>"
	}
	row := []string{n.Node, hw}
	for _, c := range gate.ComponentTable() {
		if !c.Optional {
			row = append(row, c.Value(n.Current))
		}
	}
	var draState []string
	for _, s := range n.DRA {
		plugin := "no plugin Pod"
		if s.Plugin != "" {
			plugin = "plugin not Ready"
			if s.PluginReady {
				plugin = "plugin Ready"
			}
		}
		draState = append(draState, fmt.Sprintf("%s: %d devices in %d slices, %s", s.Driver, s.Devices, s.Slices, plugin))
	}
	return append(row, record, age, expires, approved, target, string(n.Status), proof, n.Rollback, orDash(strings.Join(holders, "; ")), fmt.Sprint(n.Cordoned), orDash(strings.Join(draState, "; ")))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func writeInventoryTable(w io.Writer, inv []gate.NodeInventory) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(inventoryColumns, "\t"))
	for _, n := range inv {
		fmt.Fprintln(tw, strings.Join(inventoryRow(n), "\t"))
	}
	tw.Flush()
	var halts []string
	for _, n := range inv {
		if n.Halt != "" && !slices.Contains(halts, n.Halt) {
			halts = append(halts, n.Halt)
		}
	}
	for _, h := range halts {
		fmt.Fprintln(w, "HALT: "+h)
	}
	var explained []string
	for _, n := range inv {
		if n.Record == nil {
			continue
		}
		for _, x := range n.Record.Explained {
			if line := "record " + n.Record.ID + ": explained deviation: " + x; !slices.Contains(explained, line) {
				explained = append(explained, line)
			}
		}
	}
	for _, x := range explained {
		fmt.Fprintln(w, x)
	}
}

func writeInventoryCSV(w io.Writer, inv []gate.NodeInventory) {
	cw := csv.NewWriter(w)
	_ = cw.Write(inventoryColumns)
	for _, n := range inv {
		_ = cw.Write(inventoryRow(n))
	}
	cw.Flush()
}
