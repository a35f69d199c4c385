package loader

import (
	"context"
	"errors"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Source returns the objects of a Read.
type Source interface {
	// Read returns the objects r selects, each of r.Object's type, shared
	// with the source (read only). A named object that does not exist is
	// no object, not an error.
	Read(ctx context.Context, r Read) ([]client.Object, error)
	// ServerVersion is the API server's gitVersion.
	ServerVersion(ctx context.Context) (string, error)
}

// EtcdSnapshotSource is a Source that holds RKE2's ETCDSnapshotFiles
// itself (a saved List): they are no Read row, as no informer caches them.
type EtcdSnapshotSource interface {
	EtcdSnapshots() gate.EtcdSnapshots
}

// Loader builds the engine's view from a Source, part by part: the
// webhook builds each part once per informer event (webhook/facts.go), the
// CLI all at once (Cluster). It keeps parsed records and converted Plan
// selectors by resourceVersion, so a loader kept for a process's life
// parses each once per change.
type Loader struct {
	Config *gate.Config
	Source Source
	Reads  Reads

	records   recordCache
	selectors selectorCache
}

// New is a loader of cfg's reads from src.
func New(cfg *gate.Config, src Source) *Loader {
	return &Loader{Config: cfg, Source: src, Reads: ReadsOf(cfg)}
}

// Cluster is every part of the engine's view, read now.
func (l *Loader) Cluster(ctx context.Context) (*gate.Cluster, error) {
	cl := &gate.Cluster{}
	var err error
	if cl.ServerVersion, err = l.Source.ServerVersion(ctx); err != nil {
		return nil, err
	}
	if cl.Nodes, err = l.Nodes(ctx); err != nil {
		return nil, err
	}
	if cl.Plans, cl.PlanSelectors, err = l.Plans(ctx); err != nil {
		return nil, err
	}
	if cl.Records, err = l.Records(ctx); err != nil {
		return nil, err
	}
	if cl.GPUOperatorImage, cl.DCGMExporterImage, err = l.Images(ctx); err != nil {
		return nil, err
	}
	cl.Versions = gate.VersionsOf(cl.GPUOperatorImage, cl.DCGMExporterImage)
	if cl.Proof, err = l.Proof(ctx); err != nil {
		return nil, err
	}
	cl.Halts, _ = l.HaltRecord(ctx) // a failed read fails closed in the record
	cl.CreationGates = l.CreationGates(ctx)
	// RKE2's etcd snapshots: listed live, or the saved List's (the webhook
	// lists them itself for the one review that needs them).
	switch src := l.Source.(type) {
	case *Live:
		cl.EtcdSnapshots = ReadEtcdSnapshots(ctx, src.Client)
	case EtcdSnapshotSource:
		cl.EtcdSnapshots = src.EtcdSnapshots()
	}
	// Other requestors' maintenance: listed live, or the saved List's (the
	// webhook watches them where served). One that cannot be read fails
	// closed only the moves that consume the budget
	// (Cluster.NodeMaintenancesErr), not the whole view.
	switch src := l.Source.(type) {
	case *Live:
		cl.NodeMaintenances, cl.NodeMaintenancesErr = ReadNodeMaintenances(ctx, src.Client, src.Discovery)
	case NodeMaintenanceSource:
		cl.NodeMaintenances, cl.NodeMaintenancesErr = src.NodeMaintenances()
	}
	cl.View = gate.NewFleetView(cl) // once per snapshot, from every part it reads
	return cl, nil
}

// read returns r's objects as T.
func read[T client.Object](ctx context.Context, src Source, r Read) ([]T, error) {
	objs, err := src.Read(ctx, r)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// Nodes are every Node.
func (l *Loader) Nodes(ctx context.Context) ([]*corev1.Node, error) {
	nodes, err := read[*corev1.Node](ctx, l.Source, l.Reads.Nodes)
	if err != nil {
		return nil, fmt.Errorf("list Nodes: %w", err)
	}
	return nodes, nil
}

// Plans are the SUC namespaces' Plans and, at the same index, their
// converted selectors (nil for one that does not convert: the engine then
// converts it and skips it, as it would any invalid selector).
func (l *Loader) Plans(ctx context.Context) ([]*upgradev1.Plan, []*gate.PlanSelector, error) {
	plans, err := read[*upgradev1.Plan](ctx, l.Source, l.Reads.Plans)
	if err != nil {
		return nil, nil, fmt.Errorf("list Plans: %w", err)
	}
	sels := make([]*gate.PlanSelector, len(plans))
	for i, p := range plans {
		sels[i] = l.selectors.get(p)
	}
	return plans, sels, nil
}

// Records are the record ConfigMaps by name, each loaded or with the
// reason it did not load.
func (l *Loader) Records(ctx context.Context) (map[string]gate.RecordEntry, error) {
	cms, err := read[*corev1.ConfigMap](ctx, l.Source, l.Reads.Records)
	if err != nil {
		return nil, fmt.Errorf("list record ConfigMaps: %w", err)
	}
	out := make(map[string]gate.RecordEntry, len(cms))
	for _, cm := range cms {
		out[cm.Name] = l.records.load(cm)
	}
	return out, nil
}

// Images are the GPU Operator Deployment's and the DCGM exporter
// DaemonSet's images; "" for a workload or container that is not there
// (the engine then reports FactsMissing).
func (l *Loader) Images(ctx context.Context) (gpuOperator, dcgmExporter string, err error) {
	ops, err := read[*appsv1.Deployment](ctx, l.Source, l.Reads.GPUOperator)
	if err != nil {
		return "", "", getError(l.Config.GPUOperator, err)
	}
	for _, d := range ops {
		gpuOperator = WorkloadImage(l.Config.GPUOperator, d.Spec.Template.Spec)
	}
	exporters, err := read[*appsv1.DaemonSet](ctx, l.Source, l.Reads.DCGMExporter)
	if err != nil {
		return "", "", getError(l.Config.DCGMExporter, err)
	}
	for _, d := range exporters {
		dcgmExporter = WorkloadImage(l.Config.DCGMExporter, d.Spec.Template.Spec)
	}
	return gpuOperator, dcgmExporter, nil
}

func getError(ref gate.WorkloadRef, err error) error {
	return fmt.Errorf("get %s/%s: %w", ref.Namespace, ref.Name, err)
}

// WorkloadImage is the image of the referenced container of spec: the
// container named ref.Container, or the first one when the name is empty;
// "" when there is no such container.
func WorkloadImage(ref gate.WorkloadRef, spec corev1.PodSpec) string {
	for i, c := range spec.Containers {
		if (ref.Container == "" && i == 0) || c.Name == ref.Container {
			return c.Image
		}
	}
	return ""
}

// Proof are the objects proofs read: the validator and allocation-check
// Pods and SUC's Jobs.
func (l *Loader) Proof(ctx context.Context) (gate.ProofFacts, error) {
	var pods []*corev1.Pod
	for _, r := range []Read{l.Reads.Validators, l.Reads.AllocationChecks} {
		got, err := read[*corev1.Pod](ctx, l.Source, r)
		if err != nil {
			return gate.ProofFacts{}, fmt.Errorf("proof Pods: %w", err)
		}
		pods = append(pods, got...)
	}
	jobs, err := read[*batchv1.Job](ctx, l.Source, l.Reads.UpgradeJobs)
	if err != nil {
		return gate.ProofFacts{}, fmt.Errorf("SUC Jobs: %w", err)
	}
	// ProofFactsOf sorts them into validators and checks (a Pod could be
	// both).
	out := l.Config.ProofFactsOf(pods, jobs)
	// The validator DaemonSet's UID: a read that fails leaves no validator
	// Pod counting (the proofs say why), not the review failing.
	dss, err := read[*appsv1.DaemonSet](ctx, l.Source, l.Reads.ValidatorDaemonSet)
	var ds *appsv1.DaemonSet
	if len(dss) > 0 {
		ds = dss[0]
	}
	l.Config.OwnValidators(&out, ds, err)
	if r := l.Reads.CheckJobs; r.Object != nil {
		if out.CheckJobs, err = read[*batchv1.Job](ctx, l.Source, r); err != nil {
			return gate.ProofFacts{}, fmt.Errorf("%s: %w", r.What, err)
		}
	}
	if out.DRA, err = l.draProof(ctx); err != nil {
		return gate.ProofFacts{}, err
	}
	return out, nil
}

// HaltRecord is the parsed halt record. One that is missing or cannot be
// read fails closed (gate.HaltRecord.Err); err is set only when the read
// failed, so that a caller keeping the record reads it again.
func (l *Loader) HaltRecord(ctx context.Context) (gate.HaltRecord, error) {
	cms, err := read[*corev1.ConfigMap](ctx, l.Source, l.Reads.HaltRecord)
	if err != nil {
		return l.Config.MissingHaltRecord(err), err
	}
	if len(cms) == 0 {
		return l.Config.MissingHaltRecord(errors.New("the ConfigMap does not exist")), nil
	}
	return l.Config.ParseHaltRecord(cms[0]), nil
}

// CreationGates are the configured creation gates as read, in the config's
// order; one that cannot be read carries why (it counts as open).
func (l *Loader) CreationGates(ctx context.Context) []gate.GateReading {
	if len(l.Config.CreationGates) == 0 {
		return nil
	}
	out := make([]gate.GateReading, len(l.Config.CreationGates))
	for i, g := range l.Config.CreationGates {
		if i >= len(l.Reads.CreationGates) {
			out[i] = gate.GateReading{Gate: g, Err: errors.New("the loader has no read of it")}
			continue
		}
		objs, err := l.Source.Read(ctx, l.Reads.CreationGates[i])
		switch {
		case err != nil:
			out[i] = gate.GateReading{Gate: g, Err: fmt.Errorf("read %s/%s: %w", g.Namespace, g.Object, err)}
		case g.Kind == gate.GateConfigMapKey:
			var cm *corev1.ConfigMap
			for _, o := range objs {
				cm, _ = o.(*corev1.ConfigMap)
			}
			out[i] = gate.ReadConfigMapGate(g, cm)
		default:
			var spec *corev1.PodSpec
			for _, o := range objs {
				if d, ok := o.(*appsv1.Deployment); ok {
					spec = &d.Spec.Template.Spec
				}
			}
			out[i] = gate.ReadDeploymentGate(g, spec)
		}
	}
	return out
}

// Holders are the GPU holders of each named node that has any, from the
// Pods on it (HolderPods). The webhook lists its own, live and shared
// between reviews (webhook/facts.go, Facts.Holders).
func (l *Loader) Holders(ctx context.Context, nodes []string) (map[string][]gate.Holder, error) {
	out := make(map[string][]gate.Holder, len(nodes))
	for _, n := range nodes {
		pods, err := read[*corev1.Pod](ctx, l.Source, HolderPods(n))
		if err != nil {
			return nil, fmt.Errorf("list Pods on %s: %w", n, err)
		}
		vals := make([]corev1.Pod, len(pods))
		for i, p := range pods {
			vals[i] = *p
		}
		if hs := l.Config.HoldersOf(vals); len(hs) > 0 {
			out[n] = hs
		}
	}
	return out, nil
}

// recordCache keeps parsed records by ConfigMap name and resourceVersion, so
// a record is parsed once per change, not once per review.
type recordCache struct {
	mu      sync.Mutex
	entries map[string]cachedRecord
}

type cachedRecord struct {
	uid, resourceVersion string
	entry                gate.RecordEntry
}

func (c *recordCache) load(cm *corev1.ConfigMap) gate.RecordEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[cm.Name]; ok && e.uid == string(cm.UID) && e.resourceVersion == cm.ResourceVersion && cm.ResourceVersion != "" {
		return e.entry
	}
	rec, err := qualification.FromConfigMap(cm)
	entry := gate.RecordEntry{Record: rec, Err: err, Attestation: qualification.AttestationOf(cm)}
	if c.entries == nil {
		c.entries = map[string]cachedRecord{}
	}
	c.entries[cm.Name] = cachedRecord{uid: string(cm.UID), resourceVersion: cm.ResourceVersion, entry: entry}
	return entry
}

// selectorCache keeps each stored Plan's converted selector per UID and
// resourceVersion: converting validates every key and value, which would
// otherwise dominate a Node review.
type selectorCache struct {
	mu sync.Mutex
	m  map[types.UID]cachedSelector
}

type cachedSelector struct {
	resourceVersion string
	sel             *gate.PlanSelector
}

// get returns nil for a Plan whose selector does not convert.
func (c *selectorCache) get(p *upgradev1.Plan) *gate.PlanSelector {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[p.UID]; ok && e.resourceVersion == p.ResourceVersion && p.ResourceVersion != "" {
		return e.sel
	}
	sel, err := gate.NewPlanSelector(p)
	if err != nil {
		return nil
	}
	if c.m == nil || len(c.m) > 4096 {
		c.m = map[types.UID]cachedSelector{} // deleted Plans never pile up
	}
	c.m[p.UID] = cachedSelector{resourceVersion: p.ResourceVersion, sel: sel}
	return sel
}
