// Package fleetgen generates a realistic, deterministic GPU fleet for the
// benchmarks, the load generator and the scale tests: Nodes labelled as NFD
// and GPU Feature Discovery label them (about 60 labels each) with the status a
// kubelet publishes (conditions, nodeInfo, ~40 images), the SUC Plans a
// platform team runs (RKE2 server and agent Plans that leave GPU nodes out,
// GPU canary, wave and driver Plans), the qualification records of each GPU
// hardware, the GPU Operator and DCGM exporter workloads, and a few Pods that
// hold GPUs.
//
// The same Options (seed included) always give the same fleet, so a load
// generator can compute the decisions it expects for a fleet that a scale test
// created in a real API server.
package fleetgen

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Options size the fleet. The zero value is the fleet: 5,000 Nodes,
// 1,000 of them GPU nodes of 4 hardware identities across 3 zones, 50 Plans.
type Options struct {
	// Seed picks the random details (drift, cordons, image sizes, digests).
	Seed uint64
	// Nodes is the total node count (default 5000); GPUNodes of them are GPU
	// nodes (default Nodes/5).
	Nodes, GPUNodes int
	// Now dates the records (canary completed two days before). Zero: the
	// start of today, UTC, so two runs on the same day generate equal records.
	Now time.Time
	// Kubelet adds what a kubelet and the node's agents publish beyond labels:
	// ~40 images, the five conditions, addresses, capacity, annotations,
	// taints. The engine reads none of it; the API server stores it and sends
	// it in every Node review, and the webhook's informer receives it.
	Kubelet bool
	// Validators gives every GPU node a Ready GPU Operator validator Pod, as
	// the operator runs one on each (the canaries always have one): the
	// proof facts a real fleet's webhook caches.
	Validators bool
}

// Zones are the failure domains; nodes are spread round-robin.
var Zones = []string{"zone-a", "zone-b", "zone-c"}

// Namespaces the fleet uses.
const (
	NamespaceSUC      = "system-upgrade"
	NamespaceGate     = "gpu-upgrade-gate"
	NamespaceOperator = "gpu-operator"
	NamespaceML       = "ml"
	// LabelWave puts a GPU node into an upgrade wave; the wave Plans select it.
	LabelWave = "kube-dc.com/upgrade-wave"
	// LabelPool is the node pool, which the RKE2 agent Plans select.
	LabelPool = "node.kubernetes.io/pool"
	// LabelRack is a label people change that no Plan selects.
	LabelRack = "kube-dc.com/rack"
)

// The fleet's tuples: every GPU node runs Source except the canaries, which
// run Target; records qualify Source -> Target per hardware.
var (
	Source = qualification.Tuple{Kernel: "6.8.0-134-generic", RKE2: "v1.35.3+rke2r3", Driver: "580.126.20", GPUOperator: "v26.3.3", DCGMExporter: "4.5.3-4.8.2-distroless"}
	Target = qualification.Tuple{Kernel: "6.8.0-135-generic", RKE2: "v1.36.1+rke2r1", Driver: "580.130.00", GPUOperator: "v26.3.3", DCGMExporter: "4.5.3-4.8.2-distroless"}
	// Drifted is a kernel some GPU nodes run by mistake (neither tuple).
	Drifted = "6.8.0-133-generic"
	// ServerVersion is the API server the fleet belongs to (the local
	// control plane's kube-apiserver).
	ServerVersion = "v1.37.2"
)

// Fleet is one generated cluster state.
type Fleet struct {
	Options Options
	Config  *gate.Config
	Nodes   []*corev1.Node
	// GPU lists the GPU nodes by hardware name, in name order.
	GPU map[string][]*corev1.Node
	// Roles of the GPU nodes by name.
	Roles map[string]Role
	Plans []*upgradev1.Plan
	// Records by ConfigMap name; RecordConfigMaps holds them as stored.
	Records          map[string]*qualification.Record
	RecordConfigMaps []*corev1.ConfigMap
	GPUOperator      *appsv1.Deployment
	DCGMExporter     *appsv1.DaemonSet
	// ValidatorDaemonSet controls the validator Pods (ValidatorOwner's UID).
	ValidatorDaemonSet *appsv1.DaemonSet
	// Pods are GPU holders (training Jobs' Pods) bound to a few GPU nodes.
	Pods []*corev1.Pod
	// ProofPods prove the canaries (validator and allocation-check Pods).
	ProofPods []*corev1.Pod

	byName map[string]*corev1.Node
}

// Generate builds the fleet described by o.
func Generate(o Options) *Fleet {
	if o.Nodes == 0 {
		o.Nodes = 5000
	}
	if o.GPUNodes == 0 {
		o.GPUNodes = o.Nodes / 5
	}
	if o.GPUNodes > o.Nodes-ControlPlaneNodes {
		o.GPUNodes = o.Nodes - ControlPlaneNodes
	}
	if o.Now.IsZero() {
		o.Now = time.Now().UTC().Truncate(24 * time.Hour)
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	cfg := gate.DefaultConfig()
	// A 1,000-GPU-node fleet upgrades in waves of up to 4 nodes of one zone,
	// after a canary of the same hardware runs the target.
	cfg.WaveSize = 4
	// Its seeded cordoned and NotReady GPU nodes (about 1.5%) are out
	// (issue 22: cordoned for any reason, NotReady): a budget above them,
	// so its reviews judge every rule rather than stop at the budget.
	cfg.Budget.MaxUnavailable = 100
	f := &Fleet{Options: o, Config: cfg, GPU: map[string][]*corev1.Node{}, Roles: map[string]Role{}, Records: map[string]*qualification.Record{}, byName: map[string]*corev1.Node{}}
	// Kubelet details draw from their own stream, so Options.Kubelet never
	// changes the labels, roles or Pods of a seed's fleet.
	krng := rand.New(rand.NewPCG(o.Seed^0x5851f42d4c957f2d, o.Seed))
	g := &generator{f: f, rng: rng, krng: krng, images: newImageCatalogue(krng)}
	g.nodes()
	g.workloads()
	g.records()
	g.plans()
	g.pods()
	return f
}

// Node returns the fleet's node called name, or nil.
func (f *Fleet) Node(name string) *corev1.Node { return f.byName[name] }

// Cluster is the engine's view of the fleet, as the webhook's caches hold it
// (transform, when set, is applied to each node, e.g. webhook.StripNode).
func (f *Fleet) Cluster(transform func(*corev1.Node) *corev1.Node) *gate.Cluster {
	cl := &gate.Cluster{
		ServerVersion:     ServerVersion,
		Records:           map[string]gate.RecordEntry{},
		GPUOperatorImage:  f.GPUOperator.Spec.Template.Spec.Containers[0].Image,
		DCGMExporterImage: f.DCGMExporter.Spec.Template.Spec.Containers[0].Image,
	}
	for _, n := range f.Nodes {
		if transform != nil {
			n = transform(n)
		}
		cl.Nodes = append(cl.Nodes, n)
	}
	cl.Versions = gate.VersionsOf(cl.GPUOperatorImage, cl.DCGMExporterImage) // as the webhook keeps them
	cl.Proof = f.Config.ProofFactsOf(f.ProofPods, nil)
	f.Config.OwnValidators(&cl.Proof, f.ValidatorDaemonSet, nil)
	cl.Index = gate.NewNodeIndex(f.Config, cl.Nodes, nil) // as the webhook keeps it
	// Stored Plans carry a UID and resourceVersion, as in the informer, and
	// their converted selectors, as the webhook keeps them.
	for i, p := range f.Plans {
		p = p.DeepCopy()
		p.UID = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
		p.ResourceVersion = strconv.Itoa(1000 + i)
		sel, err := gate.NewPlanSelector(p)
		if err != nil {
			panic(fmt.Sprintf("fleet Plan %s: %v", p.Name, err))
		}
		cl.Plans = append(cl.Plans, p)
		cl.PlanSelectors = append(cl.PlanSelectors, sel)
	}
	for _, cm := range f.RecordConfigMaps {
		rec, err := qualification.FromConfigMap(cm)
		cl.Records[cm.Name] = gate.RecordEntry{Record: rec, Err: err, Attestation: qualification.AttestationOf(cm)}
	}
	cl.View = gate.NewFleetView(cl) // as the webhook keeps it, from every part it reads
	return cl
}

// Holders are the GPU holders of each named node, as the webhook would list
// them from the API server.
func (f *Fleet) Holders(nodes []string) map[string][]gate.Holder {
	out := make(map[string][]gate.Holder, len(nodes))
	for _, n := range nodes {
		var pods []corev1.Pod
		for _, p := range f.Pods {
			if p.Spec.NodeName == n {
				pods = append(pods, *p)
			}
		}
		out[n] = f.Config.HoldersOf(pods)
	}
	return out
}

type generator struct {
	f      *Fleet
	rng    *rand.Rand
	krng   *rand.Rand
	images *imageCatalogue
}

func (g *generator) hex(n int) string {
	const digits = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = digits[g.rng.IntN(16)]
	}
	return string(b)
}

func (g *generator) uuid() string {
	h := g.hex(32)
	return fmt.Sprintf("%s-%s-%s-%s-%s", h[:8], h[8:12], h[12:16], h[16:20], h[20:])
}
