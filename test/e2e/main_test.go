//go:build e2e

// Package e2e proves the product against a real kube-apiserver and etcd:
// every Plan and Node reason code through client.Create/Update, dry-run,
// audit annotations, warnings, match conditions, and failure behaviour.
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/dra"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

var (
	env *testenv.Env
	// now is the webhook's clock; records are dated against it.
	now = time.Now()
)

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	code, err := run(ctx, m)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		code = 1
	}
	os.Exit(code)
}

func run(ctx context.Context, m *testing.M) (int, error) {
	cfg := gate.DefaultConfig()
	cfg.WaveSize = 2
	// A short soak, so a test that plays a whole SUC wave can wait it out;
	// every other proof requirement keeps its default.
	cfg.Proof.Soak.Duration = 3 * time.Second
	// kube-dc's creation gates (issue 24 item 3), closed by setup for every
	// test but TestCreationGates, which opens one.
	cfg.CreationGates = kubeDCGates
	// NVIDIA's DRA driver (issue 25): nodes it shows nothing of are
	// proven by their extended resources as before (dra_test.go).
	cfg.DRADrivers = []dra.Driver{nvidiaDRA}
	// Declared preconditions (issue 27), holding for every test but
	// TestPreconditions: a storage health ConfigMap and the stub
	// Alertmanager on loopback.
	cfg.Preconditions = e2ePreconditions()
	defer alertStub.Close()
	var err error
	env, err = testenv.Start(ctx, testenv.Options{Config: cfg})
	if err != nil {
		return 1, err
	}
	defer env.Stop()
	defer stopSUC()
	if err := setup(ctx); err != nil {
		return 1, err
	}
	return m.Run(), nil
}

// The fleet: each node exists to trigger one rule, or to prove its neighbour
// safe case. V100 nodes run the source tuple unless said otherwise.
func fleet() []testenv.NodeSpec {
	v100 := func(name string, t qualification.Tuple, zone string, mut func(*corev1.Node)) testenv.NodeSpec {
		return testenv.NodeSpec{Name: name, Fixture: "node-v100.json", Tuple: t, Zone: zone, Mutate: mut}
	}
	at := func(f func(*qualification.Tuple)) qualification.Tuple { t := testenv.Source; f(&t); return t }
	return []testenv.NodeSpec{
		v100("gpu-v100-01", testenv.Source, "zone-a", nil),
		v100("gpu-v100-02", testenv.Source, "zone-a", nil),
		v100("gpu-v100-03", testenv.Target, "zone-a", nil), // the proven canary
		v100("gpu-v100-04", testenv.Source, "zone-b", nil),
		v100("gpu-v100-holder", testenv.Source, "zone-a", nil),
		v100("gpu-v100-nolabel", testenv.Source, "zone-a", func(n *corev1.Node) {
			delete(n.Labels, "feature.node.kubernetes.io/pci-10de_1db6_10de_124a.present")
		}),
		v100("gpu-v100-nodriver", testenv.Source, "zone-a", func(n *corev1.Node) {
			for k := range n.Labels {
				if len(k) > 15 && k[:15] == "nvidia.com/cuda" {
					delete(n.Labels, k)
				}
			}
		}),
		v100("gpu-v100-kernel133", at(func(t *qualification.Tuple) { t.Kernel = "6.8.0-133-generic" }), "zone-a", nil),
		v100("gpu-v100-rke2r2", at(func(t *qualification.Tuple) { t.RKE2 = "v1.36.1+rke2r2" }), "zone-a", nil),
		v100("gpu-v100-134", at(func(t *qualification.Tuple) { t.RKE2 = "v1.34.9+rke2r1" }), "zone-a", nil),
		v100("gpu-v100-137", at(func(t *qualification.Tuple) { t.RKE2 = "v1.37.2+rke2r1" }), "zone-a", nil),
		v100("gpu-v100-newdriver", at(func(t *qualification.Tuple) { t.Driver = "580.140.02" }), "zone-a", nil),
		v100("gpu-v100-mode", testenv.Source, "zone-a", func(n *corev1.Node) {
			n.Labels[gate.LabelWorkloadMode] = "pod-hami"
			n.Labels[gate.LabelExpectedWorkloadMode] = "pod-hami"
		}),
		{Name: "gpu-h200-01", Fixture: "node-h200.json", Tuple: testenv.Source, Zone: "zone-a"},
		{Name: "gpu-h200-02", Fixture: "node-h200.json", Tuple: testenv.Source, Zone: "zone-a"},
		{Name: "cpu-01", Tuple: testenv.Source, Zone: "zone-a"},
	}
}

func h200(r *qualification.Record) { r.Hardware = []string{"10de:2335/10de:18bf"} }
func kubeDC(r *qualification.Record) {
	r.APIVersion, r.Source = qualification.APIVersionKubeDC, nil
}

// setup creates the fleet. Records that the record webhook would refuse are
// created before the webhook configuration exists: they model records that
// predate the gate, which Plans must still refuse.
func setup(ctx context.Context) error {
	if err := env.Base(ctx); err != nil {
		return err
	}
	if err := env.CreateNodes(ctx, fleet()); err != nil {
		return err
	}
	fresh := now.Add(-48 * time.Hour)
	records := map[string]*qualification.Record{
		"v100-r580":    testenv.Record("v100-r580-canary-1", fresh),
		"v100-kubedc":  testenv.Record("v100-r580-kubedc", fresh, kubeDC),
		"v100-skew":    testenv.Record("v100-r138", fresh, kubeDC, func(r *qualification.Record) { r.Target.RKE2 = "v1.38.1+rke2r1" }),
		"h200-r580":    testenv.Record("h200-r580-canary-1", fresh, h200),
		"v100-stale":   testenv.Record("v100-stale", now.Add(-800*time.Hour)),
		"v100-expires": testenv.Record("v100-expires", now.Add(-700*time.Hour)),
	}
	if err := env.CreateRecords(ctx, records); err != nil {
		return err
	}
	// Records the record webhook refuses: written while the webhook is not
	// registered, as records that predate the gate would be.
	if err := env.UnregisterWebhook(ctx); err != nil {
		return err
	}
	bad := map[string]*qualification.Record{
		"v100-draft":      testenv.Record("v100-draft", fresh, func(r *qualification.Record) { r.State = "draft" }),
		"v100-incomplete": testenv.Record("v100-incomplete", fresh, func(r *qualification.Record) { r.Canary.RollbackPassed = false }),
		"v100-future":     testenv.Record("v100-future", now.Add(time.Hour)),
		"v100-badrev":     testenv.Record("v100-badrev", fresh, func(r *qualification.Record) { r.SourceRevision = "abc123" }),
	}
	if err := env.CreateRecords(ctx, bad); err != nil {
		return err
	}
	// A record written before approvals were attested: no annotations.
	legacy, err := env.RecordConfigMap("v100-legacy", testenv.Record("v100-legacy", fresh))
	if err != nil {
		return err
	}
	legacy.Annotations = nil
	if err := env.Admin.Create(ctx, legacy); err != nil {
		return err
	}
	if err := env.RegisterWebhook(ctx); err != nil {
		return err
	}
	if err := env.Admin.Create(ctx, testenv.Holder("train-0", "gpu-v100-holder")); err != nil {
		return err
	}
	// kube-dc's manager with both creation gates closed: new GPU workloads
	// wait while the fleet upgrades (no controller runs its Pods here).
	if err := env.Admin.Create(ctx, kubeDCManager("false", "false")); err != nil {
		return err
	}
	// The storage operator's health object, healthy (rook-ceph is created
	// with the chart's Role there).
	if err := env.Admin.Create(ctx, storageStatus("HEALTH_OK")); err != nil {
		return err
	}
	// The canary at the target is proven (docs/proof.md).
	if err := proveNode(ctx, "gpu-v100-03", now.Add(-2*time.Hour)); err != nil {
		return err
	}
	// Give the informers a moment to see the fleet.
	time.Sleep(2 * time.Second)
	return nil
}
