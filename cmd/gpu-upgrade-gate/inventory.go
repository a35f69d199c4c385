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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/snapshot"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// runInventory prints, per GPU node, its hardware, current tuple, covering
// record, target, readiness status, rollback method, holders and cordon.
func runInventory(args []string, stdout, stderr io.Writer) int {
	var cluster, kubeconfig, config, namespace, now, output string
	fs := flagSet("inventory")
	fs.StringVar(&cluster, "cluster", "", "v1 List snapshot (kubectl get nodes,pods,deployments,daemonsets,configmaps -A -o yaml)")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "read the live cluster through this kubeconfig instead of a snapshot")
	fs.StringVar(&config, "config", "", "the webhook's config file (default: the built-in defaults)")
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
	inv, err := inventory(cluster, kubeconfig, config, namespace, now, output, fs.Changed("namespace"))
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
	}
	return exitAllowed
}

func inventory(cluster, kubeconfig, config, namespace, now, output string, namespaceSet bool) ([]gate.NodeInventory, error) {
	if output != "table" && output != "json" && output != "csv" {
		return nil, usagef("-o/--output %q is not supported: use table, json or csv", output)
	}
	if (cluster == "") == (kubeconfig == "") {
		return nil, usagef("give exactly one of --cluster and --kubeconfig")
	}
	at, err := parseNow(now)
	if err != nil {
		return nil, err
	}
	cfg, err := loadConfig(config, namespace, namespaceSet)
	if err != nil {
		return nil, err
	}
	var snap *snapshot.Snapshot
	if cluster != "" {
		data, err := readInput("--cluster", cluster)
		if err != nil {
			return nil, err
		}
		if snap, err = snapshot.Parse(data); err != nil {
			return nil, inputf("--cluster %s: %v", cluster, err)
		}
	} else if snap, err = liveSnapshot(kubeconfig, cfg); err != nil {
		return nil, inputf("--kubeconfig %s: %v", kubeconfig, err)
	}
	cl := snap.Cluster(cfg)
	var gpu []string
	for _, n := range cl.Nodes {
		if cfg.IsGPUNode(n) {
			gpu = append(gpu, n.Name)
		}
	}
	return gate.Inventory(cfg, cl, snap.Holders(cfg, gpu), at), nil
}

// liveSnapshot reads what a snapshot file would hold: all Nodes, the Pods of
// GPU nodes, the two workloads and the record ConfigMaps.
func liveSnapshot(path string, cfg *gate.Config) (*snapshot.Snapshot, error) {
	restCfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	c, err := client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	snap := &snapshot.Snapshot{}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return nil, err
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		snap.Nodes = append(snap.Nodes, n)
		if !cfg.IsGPUNode(n) {
			continue
		}
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.MatchingFields{"spec.nodeName": n.Name}); err != nil {
			return nil, err
		}
		snap.Pods = append(snap.Pods, pods.Items...)
	}
	var dep appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: cfg.GPUOperator.Namespace, Name: cfg.GPUOperator.Name}, &dep); client.IgnoreNotFound(err) != nil {
		return nil, err
	} else if err == nil {
		snap.Deployments = append(snap.Deployments, dep)
	}
	var ds appsv1.DaemonSet
	if err := c.Get(ctx, client.ObjectKey{Namespace: cfg.DCGMExporter.Namespace, Name: cfg.DCGMExporter.Name}, &ds); client.IgnoreNotFound(err) != nil {
		return nil, err
	} else if err == nil {
		snap.DaemonSets = append(snap.DaemonSets, ds)
	}
	var cms corev1.ConfigMapList
	if err := c.List(ctx, &cms, client.InNamespace(cfg.Namespace), client.MatchingLabels{qualification.ConfigMapLabel: "true"}); err != nil {
		return nil, err
	}
	snap.ConfigMaps = cms.Items
	var halts corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.Halts.ConfigMap}, &halts); client.IgnoreNotFound(err) != nil {
		return nil, fmt.Errorf("the halt record: %w", err)
	} else if err == nil {
		snap.ConfigMaps = append(snap.ConfigMaps, halts)
	}
	return snap, nil
}

// inventoryColumns: one column per tuple component, from the component table.
var inventoryColumns = func() []string {
	cols := []string{"NODE", "HARDWARE"}
	for _, c := range gate.ComponentTable() {
		cols = append(cols, strings.ToUpper(c.Flag))
	}
	return append(cols, "RECORD", "AGE", "EXPIRES", "APPROVED", "TARGET", "STATUS", "PROOF", "ROLLBACK", "HOLDERS", "CORDONED")
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
		row = append(row, c.Value(n.Current))
	}
	return append(row, record, age, expires, approved, target, string(n.Status), proof, n.Rollback, orDash(strings.Join(holders, "; ")), fmt.Sprint(n.Cordoned))
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
}

func writeInventoryCSV(w io.Writer, inv []gate.NodeInventory) {
	cw := csv.NewWriter(w)
	_ = cw.Write(inventoryColumns)
	for _, n := range inv {
		_ = cw.Write(inventoryRow(n))
	}
	cw.Flush()
}
