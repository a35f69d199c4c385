package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
)

// Options are the serving settings of `gpu-upgrade-gate serve`.
type Options struct {
	Host, CertDir          string
	Port                   int
	MetricsAddr, ProbeAddr string // "0" disables
	// PprofAddr serves net/http/pprof ("" or "0": off), to profile the
	// webhook under load.
	PprofAddr string
	// VersionRefresh is how often the API server is probed: its version is
	// re-read, and a failed probe makes reviews fail closed until the caches
	// have had time to catch up (default 2s).
	VersionRefresh time.Duration
	// ReviewBudget bounds the review bytes in flight (0: DefaultReviewBudget).
	ReviewBudget int64
	// ReviewReadTimeout bounds reading one review body (0:
	// DefaultReviewReadTimeout); PerSourceRequests the requests in flight
	// from one source address (0: DefaultPerSourceRequests).
	ReviewReadTimeout time.Duration
	PerSourceRequests int
	// ClientCA, when set, is a PEM bundle file: only clients presenting a
	// certificate it signed (the API server, configured with an
	// --admission-control-config-file kubeconfig) are answered.
	ClientCA string
	// LeaderElection elects the one replica that keeps the halt record
	// (a Lease in the gate's namespace); the webhooks serve on every replica.
	LeaderElection bool
	// HaltInterval is how often the leader turns the halt loop; 0 runs no
	// loop (halts already kept are still enforced).
	HaltInterval time.Duration
	// BenchNoop also serves PathBenchNoop, for benchmarks only.
	BenchNoop bool
	// NoPlanNudge turns the Plan nudge off (planNudger): SUC then moves a
	// wave at its own backoff after each completion the gate held.
	NoPlanNudge bool
}

// NewManager wires the webhook server, the informer caches the rules read,
// the health checks and the version refresher.
func NewManager(restCfg *rest.Config, cfg *gate.Config, opts Options) (manager.Manager, *Server, error) {
	if errs := CheckEnforcement(cfg); len(errs) > 0 {
		return nil, nil, fmt.Errorf("config: %w", errs.ToAggregate())
	}
	restCfg = rest.CopyConfig(restCfg)
	if restCfg.QPS == 0 && restCfg.RateLimiter == nil {
		// As controller-runtime's GetConfig does: no client-side rate limit;
		// the API server's priority and fairness governs. client-go's default
		// (5/s, burst 10) queued the live GPU-holder listings of a burst of
		// reviews for seconds, past the webhook's timeout.
		restCfg.QPS = -1
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	if err := upgradev1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	facts := &Facts{Config: cfg}
	tlsOpts := []func(*tls.Config){func(c *tls.Config) {
		c.MinVersion = tls.VersionTLS12
		c.NextProtos = []string{"http/1.1"} // HTTP/2 off (Rapid Reset)
	}}
	if opts.ClientCA != "" {
		pool, err := loadClientCA(opts.ClientCA)
		if err != nil {
			return nil, nil, err
		}
		// Verified if given at the TLS layer (the readiness check dials
		// without one); reviewLimiter refuses a request without one.
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.ClientCAs, c.ClientAuth = pool, tls.VerifyClientCertIfGiven })
	}
	var certs *certwatcher.CertWatcher
	if opts.CertDir != "" {
		// Our own watcher of the same files, handed to the webhook server,
		// so the certificate it presents is the one whose expiry is exported.
		w, err := servingCertWatcher(opts.CertDir)
		if err != nil {
			return nil, nil, fmt.Errorf("serving certificate: %w", err)
		}
		certs = w
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.GetCertificate = certs.GetCertificate })
	}
	self, err := whoAmI(restCfg)
	if err != nil {
		return nil, nil, err
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                        scheme,
		LeaderElection:                opts.LeaderElection,
		LeaderElectionID:              "gpu-upgrade-gate-halts",
		LeaderElectionNamespace:       cfg.Namespace,
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cacheOptions(cfg, facts),
		Metrics:                       metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress:        opts.ProbeAddr,
		PprofBindAddress:              opts.PprofAddr,
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: opts.Host, Port: opts.Port, CertDir: opts.CertDir, TLSOpts: tlsOpts,
		}),
	})
	if err != nil {
		return nil, nil, err
	}
	if certs != nil {
		if err := mgr.Add(certs); err != nil {
			return nil, nil, err
		}
	}
	facts.Cache, facts.Live = mgr.GetCache(), mgr.GetAPIReader()
	// A cache holds one selector per type: the allocation checks (any
	// namespace, their own label) get a cache of their own, and with
	// proof.checks the Jobs of their namespace (the check Pods' controllers).
	allocationObjects := map[client.Object]cache.ByObject{&corev1.Pod{}: allocationChecks(cfg)}
	checkJobs := loader.ReadsOf(cfg).CheckJobs
	if checkJobs.Object != nil {
		allocationObjects[checkJobs.Object] = cache.ByObject{Transform: StripJob, Namespaces: map[string]cache.Config{checkJobs.Namespaces[0]: {}}}
	}
	if facts.Allocations, err = cache.New(restCfg, cache.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper(),
		DefaultWatchErrorHandler: facts.watches.failedWatch,
		ByObject:                 allocationObjects}); err != nil {
		return nil, nil, fmt.Errorf("allocation-check cache: %w", err)
	}
	if err := mgr.Add(facts.Allocations); err != nil {
		return nil, nil, err
	}
	// The halt record and the validator DaemonSet, by name: a cache of
	// their own (the record cache selects by the records' label, the main
	// cache's DaemonSets are the DCGM exporter's).
	validatorDS := byObject(loader.ReadsOf(cfg).ValidatorDaemonSet)
	validatorDS.Transform = StripValidatorDaemonSet
	if facts.Halts, err = cache.New(restCfg, cache.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper(),
		DefaultWatchErrorHandler: facts.watches.failedWatch,
		ByObject: map[client.Object]cache.ByObject{&corev1.ConfigMap{}: byObject(loader.ReadsOf(cfg).HaltRecord),
			&appsv1.DaemonSet{}: validatorDS}}); err != nil {
		return nil, nil, fmt.Errorf("halt record cache: %w", err)
	}
	if err := mgr.Add(facts.Halts); err != nil {
		return nil, nil, err
	}
	// Each creation gate's object, by name: a cache of its own, outside
	// the caches every review waits for (Facts.Gates).
	gateCaches := []cache.Cache{mgr.GetCache(), facts.Allocations, facts.Halts}
	facts.Gates = map[string]cache.Cache{}
	for _, r := range loader.ReadsOf(cfg).CreationGates {
		c, err := cache.New(restCfg, cache.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper(),
			DefaultWatchErrorHandler: func(ctx context.Context, rf *toolscache.Reflector, err error) {
				facts.gateWatches.fail(r.What, err)
				toolscache.DefaultWatchErrorHandler(ctx, rf, err)
			}, DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{r.Object: byObject(r)}})
		if err != nil {
			return nil, nil, fmt.Errorf("%s cache: %w", r.What, err)
		}
		if err := mgr.Add(c); err != nil {
			return nil, nil, err
		}
		if _, err := c.GetInformer(context.Background(), r.Object); err != nil {
			return nil, nil, fmt.Errorf("informer for %s: %w", r.What, err)
		}
		facts.Gates[r.What] = c
	}
	if len(cfg.Preconditions) > 0 {
		if facts.Preconditions, err = NewPreconditions(restCfg, cfg); err != nil {
			return nil, nil, fmt.Errorf("preconditions: %w", err)
		}
		if err := mgr.Add(facts.Preconditions); err != nil {
			return nil, nil, err
		}
	}
	s := &Server{Config: cfg, Facts: facts, Log: ctrl.Log.WithName("decision"), ReviewBudget: opts.ReviewBudget, ReviewReadTimeout: opts.ReviewReadTimeout, PerSourceRequests: opts.PerSourceRequests, requireClientCert: opts.ClientCA != "", Self: self}
	s.events = newHoldEvents(mgr.GetEventRecorder("gpu-upgrade-gate"), s.now)
	ctx := context.Background()
	for _, obj := range []client.Object{&corev1.Node{}, &upgradev1.Plan{}, &corev1.ConfigMap{}, &appsv1.Deployment{}, &appsv1.DaemonSet{}, &corev1.Pod{}, &batchv1.Job{}} {
		// Registering the informers now makes the manager start and sync them
		// before it reports ready.
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return nil, nil, fmt.Errorf("informer for %T: %w", obj, err)
		}
	}
	if _, err := facts.Allocations.GetInformer(ctx, &corev1.Pod{}); err != nil {
		return nil, nil, fmt.Errorf("informer for allocation checks: %w", err)
	}
	if _, err := facts.Halts.GetInformer(ctx, &corev1.ConfigMap{}); err != nil {
		return nil, nil, fmt.Errorf("informer for the halt record: %w", err)
	}
	if _, err := facts.Halts.GetInformer(ctx, &appsv1.DaemonSet{}); err != nil {
		return nil, nil, fmt.Errorf("informer for the validator DaemonSet: %w", err)
	}
	nodeInformer, err := mgr.GetCache().GetInformer(ctx, &corev1.Node{})
	if err != nil {
		return nil, nil, fmt.Errorf("informer for Nodes: %w", err)
	}
	if err := facts.WatchNodes(nodeInformer); err != nil {
		return nil, nil, fmt.Errorf("watch Nodes: %w", err)
	}
	// Each other part of the engine's view is rebuilt only on its own
	// informers' events (Facts.Cluster).
	informerOf := func(c cache.Cache, obj client.Object) cache.Informer {
		if err == nil {
			var inf cache.Informer
			if inf, err = c.GetInformer(ctx, obj); err == nil {
				return inf
			}
			err = fmt.Errorf("informer for %T: %w", obj, err)
		}
		return nil
	}
	plans, recordCMs := informerOf(mgr.GetCache(), &upgradev1.Plan{}), informerOf(mgr.GetCache(), &corev1.ConfigMap{})
	operator, exporter := informerOf(mgr.GetCache(), &appsv1.Deployment{}), informerOf(mgr.GetCache(), &appsv1.DaemonSet{})
	haltCM := informerOf(facts.Halts, &corev1.ConfigMap{})
	if err != nil {
		return nil, nil, err
	}
	if err := errors.Join(facts.WatchPlans(plans), facts.WatchRecords(recordCMs), facts.WatchImages(operator, exporter), facts.WatchHaltRecord(haltCM)); err != nil {
		return nil, nil, fmt.Errorf("watch the engine's facts: %w", err)
	}
	podInformer, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, nil, fmt.Errorf("informer for Pods: %w", err)
	}
	// Every informer proofFacts reads: the validator Pods, the allocation
	// checks and SUC's Jobs.
	allocInformer, err := facts.Allocations.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, nil, fmt.Errorf("informer for allocation checks: %w", err)
	}
	jobInformer, err := mgr.GetCache().GetInformer(ctx, &batchv1.Job{})
	if err != nil {
		return nil, nil, fmt.Errorf("informer for Jobs: %w", err)
	}
	draInformers, err := newDRACache(ctx, mgr, restCfg, scheme, cfg, facts)
	if err != nil {
		return nil, nil, err
	}
	if facts.DRA != nil {
		gateCaches = append(gateCaches, facts.DRA)
	}
	if err := newMaintenanceCache(mgr, restCfg, scheme, facts, maintenanceProbe); err != nil {
		return nil, nil, err
	}
	proofInformers := append([]cache.Informer{podInformer, allocInformer, jobInformer}, draInformers...)
	if checkJobs.Object != nil {
		inf, err := facts.Allocations.GetInformer(ctx, checkJobs.Object)
		if err != nil {
			return nil, nil, fmt.Errorf("informer for %s: %w", checkJobs.What, err)
		}
		proofInformers = append(proofInformers, inf)
	}
	if err := facts.WatchProof(proofInformers...); err != nil {
		return nil, nil, fmt.Errorf("watch proof facts: %w", err)
	}
	if si, ok := podInformer.(toolscache.SharedIndexInformer); ok {
		facts.PodsSeen = si.LastSyncResourceVersion
	}
	disc, err := discovery.NewDiscoveryClientForConfig(restCfg)
	if err != nil {
		return nil, nil, err
	}
	if err := mgr.Add(&syncer{facts: facts, caches: gateCaches, disc: disc, every: opts.VersionRefresh}); err != nil {
		return nil, nil, err
	}
	if err := mgr.Add(&inventoryExporter{server: s, every: time.Minute}); err != nil {
		return nil, nil, err
	}
	if opts.HaltInterval > 0 {
		if err := mgr.Add(&haltKeeper{server: s, writer: mgr.GetClient(), every: opts.HaltInterval, log: ctrl.Log.WithName("halts")}); err != nil {
			return nil, nil, err
		}
		if err := mgr.Add(&haltWriter{server: s, writer: mgr.GetClient(), every: opts.HaltInterval, log: ctrl.Log.WithName("halts")}); err != nil {
			return nil, nil, err
		}
	}
	if !opts.NoPlanNudge {
		if err := mgr.Add(&planNudger{nodes: nodeInformer, plans: mgr.GetCache(), writer: mgr.GetClient(), cfg: cfg, log: ctrl.Log.WithName("nudge")}); err != nil {
			return nil, nil, err
		}
	}
	s.Register(mgr.GetWebhookServer())
	if opts.BenchNoop {
		mgr.GetWebhookServer().Register(PathBenchNoop, benchNoop())
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, nil, err
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return nil, nil, err
	}
	if err := mgr.AddReadyzCheck("facts", func(*http.Request) error { return facts.ready() }); err != nil {
		return nil, nil, err
	}
	return mgr, s, nil
}

// cacheOptions keep the caches to what the rules read, each kind as the
// loader's Reads select it (loader.ReadsOf: Plans and SUC's Jobs in the SUC
// namespaces, record ConfigMaps of the gate's namespace only, the two
// workloads by name, the validator Pods by their label), stripped: Nodes to
// labels, cordon, conditions, GPU resources and nodeInfo. The allocation
// checks and the halt record have caches of their own (NewManager), from
// the same table.
func cacheOptions(cfg *gate.Config, facts *Facts) cache.Options {
	reads := loader.ReadsOf(cfg)
	with := func(r loader.Read, transform toolscache.TransformFunc) cache.ByObject {
		b := byObject(r)
		b.Transform = transform
		return b
	}
	return cache.Options{
		DefaultWatchErrorHandler: facts.watches.failedWatch,
		DefaultTransform:         cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			reads.Nodes.Object:        with(reads.Nodes, StripNodeFor(cfg)),
			reads.Plans.Object:        byObject(reads.Plans),
			reads.Records.Object:      byObject(reads.Records),
			reads.GPUOperator.Object:  byObject(reads.GPUOperator),
			reads.DCGMExporter.Object: byObject(reads.DCGMExporter),
			// One namespace by field selector, not Namespaces: a cluster-wide
			// informer keeps a plain store the reviews read without copying.
			reads.Validators.Object:  with(reads.Validators, StripPod),
			reads.UpgradeJobs.Object: with(reads.UpgradeJobs, StripJob),
		},
	}
}

// allocationChecks configures the allocation checks' cache.
func allocationChecks(cfg *gate.Config) cache.ByObject {
	b := byObject(loader.ReadsOf(cfg).AllocationChecks)
	b.Transform = StripPod
	return b
}

// namespaceField selects one namespace, or every namespace for "".
func namespaceField(ns string) fields.Selector {
	if ns == "" {
		return fields.Everything()
	}
	return fields.OneTermEqualSelector("metadata.namespace", ns)
}

// asIs returns obj itself when strip would give an equal copy: the informers
// stream their initial lists (client-go's WatchList), and the reflector strips
// each object into its temporary store, then the informer's queue strips them
// again on Replace (client-go's RealFIFO expects objects not yet transformed);
// without this both copies are live at once (37 MiB of Nodes at 5,000 nodes).
// An object as the API server sends it differs from its stripped copy early
// (its creation time, managed fields), so the comparison stops soon.
func asIs(obj any, strip func(any) (any, error)) (any, error) {
	out, err := strip(obj)
	if err != nil || !reflect.DeepEqual(out, obj) {
		return out, err
	}
	return obj, nil
}

// StripValidatorDaemonSet keeps the validator DaemonSet's identity (its UID
// and its Pod template's container images), which its Pods must carry
// to count (gate.Config.OwnValidators).
func StripValidatorDaemonSet(obj any) (any, error) {
	return asIs(obj, func(obj any) (any, error) {
		ds, ok := obj.(*appsv1.DaemonSet)
		if !ok {
			return obj, nil
		}
		out := &appsv1.DaemonSet{TypeMeta: ds.TypeMeta,
			ObjectMeta: metav1.ObjectMeta{Name: ds.Name, Namespace: ds.Namespace, UID: ds.UID, ResourceVersion: ds.ResourceVersion}}
		// Its Pods count only running its template's images, by container
		// name (gate/fleet's templateMismatch); init containers kept among the
		// containers, as StripPod keeps a Pod's.
		for _, cs := range [][]corev1.Container{ds.Spec.Template.Spec.InitContainers, ds.Spec.Template.Spec.Containers} {
			for _, c := range cs {
				out.Spec.Template.Spec.Containers = append(out.Spec.Template.Spec.Containers, corev1.Container{Name: c.Name, Image: c.Image})
			}
		}
		return out, nil
	})
}

// StripPod keeps what a proof reads of a validator or allocation-check Pod.
func StripPod(obj any) (any, error) { return asIs(obj, stripPod) }

func stripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		TypeMeta:   p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion, Labels: p.Labels, DeletionTimestamp: p.DeletionTimestamp},
		// The claims tie a DRA allocation check to its ResourceClaims.
		Spec: corev1.PodSpec{NodeName: p.Spec.NodeName, ResourceClaims: p.Spec.ResourceClaims},
		Status: corev1.PodStatus{Phase: p.Status.Phase, StartTime: p.Status.StartTime, Conditions: p.Status.Conditions,
			ResourceClaimStatuses: p.Status.ResourceClaimStatuses, ExtendedResourceClaimStatus: p.Status.ExtendedResourceClaimStatus},
	}
	// The controller reference says whether the validator DaemonSet owns the
	// Pod (gate.ValidatorSelector); the other owner references are not read.
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		out.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			// The image: a validator Pod counts only running its
			// DaemonSet template's (gate.Config.OwnValidators).
			out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Image: c.Image, Resources: c.Resources})
		}
	}
	// A check Pod's result is its containers' termination messages (the
	// kubelet bounds each to 4096 bytes); other Pods keep none.
	if p.Labels[gate.LabelCheck] != "" {
		for _, cs := range p.Status.ContainerStatuses {
			kept := corev1.ContainerStatus{Name: cs.Name}
			if t := cs.State.Terminated; t != nil {
				kept.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Message: t.Message, FinishedAt: t.FinishedAt}
			}
			out.Status.ContainerStatuses = append(out.Status.ContainerStatuses, kept)
		}
	}
	return out, nil
}

// StripJob keeps SUC's Job labels, its creation (a halt dates an upgrade by
// it), whether it runs or ran (the budget counts a node whose Job started:
// parallelism, suspend and the pod counts, gate.JobRuns) and its finish
// conditions.
func StripJob(obj any) (any, error) { return asIs(obj, stripJob) }

func stripJob(obj any) (any, error) {
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return obj, nil
	}
	return &batchv1.Job{TypeMeta: j.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: j.Name, Namespace: j.Namespace, UID: j.UID, ResourceVersion: j.ResourceVersion, Labels: j.Labels, CreationTimestamp: j.CreationTimestamp},
		// Parallelism and suspend say whether SUC started the Job (gate.JobRuns).
		Spec:   batchv1.JobSpec{Parallelism: j.Spec.Parallelism, Suspend: j.Spec.Suspend},
		Status: batchv1.JobStatus{Conditions: j.Status.Conditions, CompletionTime: j.Status.CompletionTime, Active: j.Status.Active, Succeeded: j.Status.Succeeded, Failed: j.Status.Failed}}, nil
}

// StripNode keeps only what the rules read, so 5,000 cached Nodes stay small:
// no images, addresses, annotations or managed fields; of the capacity only
// the nvidia.com/ resources, of the taints only the cordon's, of the
// conditions Ready and the configured GPU-health ones. The labels,
// most of what is left, are interned: the same keys and most values repeat
// on every node, and JSON decoding gives each node its own copies (at 5,000
// nodes, 44 MiB of live heap without, 29 MiB with).
func StripNode(obj any) (any, error) { return asIs(obj, nodeStripper(gate.DefaultConfig())) }

// StripNodeFor is StripNode that also keeps what cfg names of the node's
// rollout state (gate/nodestate.go): the configured out-of-service taints,
// the health agents' annotations, the gate's moved-by and cordon-handover
// annotations, and the field manager of spec.unschedulable (one entry,
// without its field set) from the managed fields.
func StripNodeFor(cfg *gate.Config) func(any) (any, error) {
	strip := nodeStripper(cfg)
	return func(obj any) (any, error) { return asIs(obj, strip) }
}

// StripNodeKeepingMarks is StripNode that keeps every taint and annotation:
// for a snapshot read before the config is known (check), so whatever
// out-of-service marks the config names are still there to be read.
func StripNodeKeepingMarks(obj any) (any, error) {
	return asIs(obj, func(obj any) (any, error) { return stripNode(obj, nil, nil, nil) })
}

func nodeStripper(cfg *gate.Config) func(any) (any, error) {
	taints := slices.Concat([]string{gate.TaintUnschedulable}, cfg.OutOfService.Taints)
	annotations := slices.Concat([]string{gate.AnnotationMovedBy, gate.AnnotationCordonHandover}, cfg.OutOfService.Annotations)
	// The conditions the rules read: Ready, and the configured GPU-health
	// ones (a kubelet and its agents write a dozen; most nodes are CPU
	// nodes, of which only Ready is read).
	conditions := []corev1.NodeConditionType{corev1.NodeReady}
	for _, h := range cfg.Proof.HealthConditions {
		conditions = append(conditions, corev1.NodeConditionType(h.Type))
	}
	return func(obj any) (any, error) { return stripNode(obj, taints, annotations, conditions) }
}

// stripNode keeps the taints, annotations and conditions named (nil: all).
func stripNode(obj any, taints, annotations []string, conditions []corev1.NodeConditionType) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	labels := make(map[string]string, len(n.Labels))
	for k, v := range n.Labels {
		labels[intern(k)] = intern(v)
	}
	out := &corev1.Node{
		TypeMeta:   n.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: labels},
		Spec:       corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable},
		// The versions repeat across the fleet: interned, as the labels.
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KernelVersion: intern(n.Status.NodeInfo.KernelVersion), KubeletVersion: intern(n.Status.NodeInfo.KubeletVersion)}},
	}
	kept := 0
	for _, c := range n.Status.Conditions {
		if conditions == nil || slices.Contains(conditions, c.Type) {
			kept++
		}
	}
	if kept > 0 {
		// The conditions the rules read, without their text: sized exactly
		// (append's doubling left 8 slots for 5, ~2 MiB at 5,000 nodes),
		// their type and status interned.
		out.Status.Conditions = make([]corev1.NodeCondition, 0, kept)
		for _, c := range n.Status.Conditions {
			if conditions == nil || slices.Contains(conditions, c.Type) {
				out.Status.Conditions = append(out.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeConditionType(intern(string(c.Type))), Status: corev1.ConditionStatus(intern(string(c.Status))), LastTransitionTime: c.LastTransitionTime})
			}
		}
	}
	for _, t := range n.Spec.Taints {
		if taints == nil || slices.Contains(taints, t.Key) {
			out.Spec.Taints = append(out.Spec.Taints, t)
		}
	}
	if annotations == nil {
		annotations = slices.Collect(maps.Keys(n.Annotations))
	}
	for _, k := range annotations {
		if v, ok := n.Annotations[k]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	if n.Spec.Unschedulable {
		for _, m := range n.ManagedFields {
			if m.FieldsV1 != nil && bytes.Contains(m.FieldsV1.GetRawBytes(), []byte(`"f:unschedulable"`)) {
				out.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: m.Manager, Operation: m.Operation, Time: m.Time}}
			}
		}
	}
	out.Status.Capacity, out.Status.Allocatable = extendedResources(n.Status.Capacity), gpuResources(n.Status.Allocatable)
	return out, nil
}

// intern returns the copy of s that every cached object shares.
func intern(s string) string { return fleetStrings.intern(s) }

// extendedResources keeps a capacity's extended resources (a "/" in the
// name): their names make a GPU node (gate/gpunode.go); only the nvidia.com/
// quantities are kept, which a proof reads (gate/fleet/nodeproof.go).
func extendedResources(l corev1.ResourceList) corev1.ResourceList {
	var out corev1.ResourceList
	for k, v := range l {
		if !strings.Contains(string(k), "/") {
			continue
		}
		if out == nil {
			out = corev1.ResourceList{}
		}
		if !isProofResource(k) {
			v = resource.Quantity{}
		}
		out[corev1.ResourceName(intern(string(k)))] = v
	}
	return out
}

// gpuResources keeps the nvidia.com/ resources of an allocatable list, with
// their quantities (a proof compares them with the capacity).
func gpuResources(l corev1.ResourceList) corev1.ResourceList {
	var out corev1.ResourceList
	for k, v := range l {
		if isProofResource(k) {
			if out == nil {
				out = corev1.ResourceList{}
			}
			out[corev1.ResourceName(intern(string(k)))] = v
		}
	}
	return out
}

// isProofResource says whether a proof reads the quantity of resource k.
func isProofResource(k corev1.ResourceName) bool {
	return strings.HasPrefix(string(k), "nvidia.com/")
}

// syncer marks the facts ready once the caches have synced and the API
// server's version is known, then keeps the version fresh.
type syncer struct {
	facts  *Facts
	caches []cache.Cache
	disc   discovery.ServerVersionInterface
	every  time.Duration
}

func (s *syncer) Start(ctx context.Context) error {
	for _, c := range s.caches {
		if !c.WaitForCacheSync(ctx) {
			return errors.New("caches did not sync")
		}
	}
	releaseSyncGarbage()
	every := s.every
	if every <= 0 {
		every = 2 * time.Second
	}
	for {
		if v, err := s.disc.ServerVersion(); err != nil {
			s.facts.watches.fail("the API server", err)
		} else {
			s.facts.SetServerVersion(v.GitVersion)
			s.facts.synced.Store(true)
		}
		ready.Set(boolGauge(s.facts.ready() == nil))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// releaseSyncGarbage returns the caches' start-up garbage to the OS, once.
// The informers stream their initial lists (client-go's WatchList, on by
// default since 1.35), but each object is decoded whole before its transform
// strips it: ~340 MB allocated at 5,000 nodes, and the heap, let grow to twice
// what was live at the busiest moment of the sync, stays mapped (167-177 MiB
// RSS synced, 2.5x the 45 MiB then live). A forced collection and release
// costs one collection's CPU; afterwards the heap grows only as the caches and
// reviews need (GOGC, or the limit setMemoryLimit gives).
func releaseSyncGarbage() { debug.FreeOSMemory() }

// NeedLeaderElection: every replica serves.
func (s *syncer) NeedLeaderElection() bool { return false }

// whoAmI is the username the API server authenticates the gate as (a
// SelfSubjectReview, which every authenticated user may create): the one
// writer the halt record's webhook lets add halts.
func whoAmI(restCfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("who am I (SelfSubjectReview): %w", err)
	}
	return r.Status.UserInfo.Username, nil
}
