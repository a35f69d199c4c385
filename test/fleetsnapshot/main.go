// Command fleetsnapshot writes internal/fleetgen's fleet as the v1 List that
// snapshot.Recipe saves (as YAML; its Plans, records and the chart's empty
// halt record included), for measuring the CLI on realistic snapshots (docs/performance.md):
//
//	go run ./test/fleetsnapshot -nodes 10000 -o /tmp/fleet-10k.yaml
//	go run ./test/fleetsnapshot -nodes 10000 -copies 10 -o /tmp/fleet-100k.yaml
//
// Items are written one at a time, so a 100,000-node List does not need the
// memory of the whole document; -copies repeats every Node under new names
// (name-cN), so the generator holds only -nodes of them.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
)

func main() {
	nodes := flag.Int("nodes", 10000, "nodes fleetgen generates (a fifth are GPU nodes)")
	copies := flag.Int("copies", 1, "write every Node this many times, copies after the first named <name>-c<N>")
	seed := flag.Uint64("seed", 1, "fleetgen seed")
	out := flag.String("o", "", "output file (default stdout)")
	flag.Parse()
	w := io.Writer(os.Stdout)
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			fail(err)
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	if err := write(bw, fleetgen.Generate(fleetgen.Options{Seed: *seed, Nodes: *nodes, Kubelet: true}), *copies); err != nil {
		fail(err)
	}
	if err := bw.Flush(); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "fleetsnapshot:", err)
	os.Exit(1)
}

func write(w io.Writer, f *fleetgen.Fleet, copies int) error {
	if _, err := io.WriteString(w, "apiVersion: v1\nitems:\n"); err != nil {
		return err
	}
	item := func(o any) error {
		data, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		// As kubectl prints a List: "- " before the first line, two spaces
		// before the others.
		for i, line := range bytes.SplitAfter(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
			prefix := "  "
			if i == 0 {
				prefix = "- "
			}
			if _, err := io.WriteString(w, prefix); err != nil {
				return err
			}
			if _, err := w.Write(line); err != nil {
				return err
			}
		}
		_, err = io.WriteString(w, "\n")
		return err
	}
	for c := range copies {
		for _, n := range f.Nodes {
			n := n.DeepCopy()
			n.Kind, n.APIVersion = "Node", "v1"
			if c > 0 {
				n.Name = fmt.Sprintf("%s-c%d", n.Name, c)
				n.Labels[corev1.LabelHostname] = n.Name
			}
			if err := item(n); err != nil {
				return err
			}
		}
	}
	for _, p := range f.Pods {
		p.Kind, p.APIVersion = "Pod", "v1"
		if err := item(p); err != nil {
			return err
		}
	}
	f.GPUOperator.Kind, f.GPUOperator.APIVersion = "Deployment", "apps/v1"
	f.DCGMExporter.Kind, f.DCGMExporter.APIVersion = "DaemonSet", "apps/v1"
	for _, o := range []any{f.GPUOperator, f.DCGMExporter} {
		if err := item(o); err != nil {
			return err
		}
	}
	for _, cm := range f.RecordConfigMaps {
		cm.Kind, cm.APIVersion = "ConfigMap", "v1"
		if err := item(cm); err != nil {
			return err
		}
	}
	// The halt record, empty, as the chart creates it: without it GPU Plans
	// fail closed, in check as in the webhook.
	halts := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: f.Config.Namespace, Name: f.Config.Halts.ConfigMap}}
	if err := item(halts); err != nil {
		return err
	}
	for _, p := range f.Plans {
		p.Kind, p.APIVersion = "Plan", "upgrade.cattle.io/v1"
		if err := item(p); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "kind: List\nmetadata:\n  resourceVersion: \"\"\n")
	return err
}
