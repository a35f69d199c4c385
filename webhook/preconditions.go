package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/precondition"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Preconditions reads the declared preconditions for the reviews, which
// never wait on them: each CEL precondition's objects are watched by a
// dynamic informer of their own and the expressions evaluated once per
// event of those informers; each alerts precondition is polled in the
// background, its last reading kept in memory.
//
// Every replica polls its alert sources, rather than the leader alone:
// a review is answered by whichever replica the API server calls, from
// that replica's memory, and a leader-only poller would leave the others
// without a reading (failing every upgrade closed) or make them read one
// the leader writes into the cluster, an object whoever may write it could
// forge to "no alerts" and one more write path to guard. The poll is a
// read-only GET every pollInterval, so N replicas cost N small reads.
//
// An object watch that fails, or has not synced, makes only its own
// precondition unknown (fails closed for the reviews that read it), never
// every webhook: the objects may live in another team's namespace.
type Preconditions struct {
	list   []precondition.Precondition
	cel    []*celWatch  // at the precondition's index; nil for alerts
	alerts []*alertPoll // at the precondition's index; nil for cel
	health watchHealth
	evals  snapshot[[]precondition.Reading]
}

// celWatch is a CEL precondition's informer and compiled expression.
type celWatch struct {
	prog *precondition.Program
	inf  toolscache.SharedIndexInformer
}

// alertPoll is an alerts precondition's poller and its last reading.
type alertPoll struct {
	p      precondition.Precondition
	client *http.Client
	last   atomic.Pointer[precondition.Reading]
}

// maxAlertsBody bounds a source's answer (an Alertmanager with thousands
// of alerts answers a few MiB).
const maxAlertsBody = 16 << 20

var (
	preconditionState = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gpu_upgrade_gate_precondition_state",
		Help: "For each precondition, 1 for its state (holds, fails, unknown, stale) and 0 for the others; anything but holds holds GPU upgrades. Declared ones (kind cel or alerts: PreconditionFailed, PreconditionUnknown, PreconditionStale) are set at each inventory refresh; built-in ones (kind builtin) after each review that checked them: operator-rollout (OperatorRolloutUnfinished, also each inventory refresh), drain (DrainBlocked), etcd-snapshot (EtcdSnapshotStale). No series until first checked.",
	}, []string{"precondition", "kind", "state"})
	preconditionRead = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gpu_upgrade_gate_precondition_last_read_timestamp_seconds",
		Help: "For each alerts precondition, when this replica last read its source in full (Unix seconds; 0: never); older than its maxAge, it fails closed (PreconditionStale).",
	}, []string{"precondition"})
)

func init() { register(preconditionState, preconditionRead) }

// NewPreconditions compiles the configured preconditions and makes their
// informers and pollers (started by Start).
func NewPreconditions(restCfg *rest.Config, cfg *gate.Config) (*Preconditions, error) {
	p := &Preconditions{list: cfg.Preconditions, cel: make([]*celWatch, len(cfg.Preconditions)), alerts: make([]*alertPoll, len(cfg.Preconditions))}
	var dyn dynamic.Interface
	for i, pc := range cfg.Preconditions {
		switch pc.Kind {
		case precondition.KindCEL:
			prog, err := precondition.Compile(pc.CEL.Expression)
			if err != nil {
				return nil, fmt.Errorf("preconditions[%d] (%s): %w", i, pc.Name, err)
			}
			if dyn == nil {
				var err error
				if dyn, err = dynamic.NewForConfig(restCfg); err != nil {
					return nil, err
				}
			}
			sel := pc.CEL.LabelSelector
			inf := dynamicinformer.NewFilteredDynamicInformer(dyn, pc.CEL.GVR(), pc.CEL.Namespace, 0, toolscache.Indexers{},
				func(o *metav1.ListOptions) { o.LabelSelector = sel }).Informer()
			what := "precondition " + pc.Name
			if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *toolscache.Reflector, err error) {
				p.health.fail(what, err)
				toolscache.DefaultWatchErrorHandler(ctx, r, err)
			}); err != nil {
				return nil, err
			}
			// What the expression reads is the object; managedFields is
			// the API server's bookkeeping (and most of its size).
			if err := inf.SetTransform(func(o any) (any, error) {
				if u, ok := o.(*unstructured.Unstructured); ok {
					u.SetManagedFields(nil)
				}
				return o, nil
			}); err != nil {
				return nil, err
			}
			p.cel[i] = &celWatch{prog: prog, inf: inf}
		case precondition.KindAlerts:
			p.alerts[i] = &alertPoll{p: pc, client: alertClient(pc.Alerts.Interval())}
		}
	}
	var infs []toolscache.SharedIndexInformer
	for _, w := range p.cel {
		if w != nil {
			infs = append(infs, w.inf)
		}
	}
	if err := p.evals.watchInformers(infs...); err != nil {
		return nil, err
	}
	return p, nil
}

// Start runs the informers and the pollers until ctx ends.
func (p *Preconditions) Start(ctx context.Context) error {
	for _, w := range p.cel {
		if w != nil {
			go w.inf.RunWithContext(ctx)
		}
	}
	for _, a := range p.alerts {
		if a != nil {
			go a.run(ctx)
		}
	}
	<-ctx.Done()
	return nil
}

// NeedLeaderElection: every replica reads (see Preconditions).
func (p *Preconditions) NeedLeaderElection() bool { return false }

// Readings are the preconditions as read now, in the config's order.
func (p *Preconditions) Readings() []precondition.Reading {
	evals, _ := p.evals.get(func(*[]precondition.Reading) ([]precondition.Reading, error) { return p.evaluate() })
	out := make([]precondition.Reading, len(p.list))
	for i, pc := range p.list {
		switch {
		case p.cel[i] != nil:
			out[i] = evals[i]
			if err := p.health.freshFor("precondition " + pc.Name); err != nil {
				out[i] = precondition.Reading{Precondition: pc, State: precondition.Unknown, Seen: err.Error()}
			}
		case p.alerts[i] != nil:
			out[i] = precondition.Reading{Precondition: pc}
			if r := p.alerts[i].last.Load(); r != nil {
				out[i] = *r
			}
		}
	}
	return out
}

// evaluate evaluates every CEL precondition over its informer's store,
// within one runtime budget (ValidatingAdmissionPolicy's for its
// expressions together). It fails (and so is not kept) while an informer
// has not synced, so the first event after the sync is not needed to
// judge again.
func (p *Preconditions) evaluate() ([]precondition.Reading, error) {
	var unsynced error
	read := precondition.ReadCELs(p.list, func(i int) (*precondition.Program, []any, error) {
		w := p.cel[i]
		if !w.inf.HasSynced() {
			unsynced = errors.New("not synced")
			return w.prog, nil, fmt.Errorf("its watch of %s has not synced: is the resource served, and may the gate list and watch it?", p.list[i].CEL.GVR().String())
		}
		items := w.inf.GetStore().List()
		objs := make([]any, 0, len(items))
		for _, it := range items {
			if u, ok := it.(*unstructured.Unstructured); ok {
				objs = append(objs, u.Object)
			}
		}
		return w.prog, objs, nil
	})
	out := make([]precondition.Reading, len(p.list))
	for i, r := range read {
		if r != nil {
			out[i] = *r
		}
	}
	return out, unsynced
}

// alertClient reads an alert source without following redirects: a 3xx
// could point the gate at another host's endpoint, one that says "no
// alerts" (fetch refuses the 3xx answer itself).
func alertClient(interval time.Duration) *http.Client {
	return &http.Client{Timeout: min(interval, 10*time.Second),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// run polls the source every interval, the first time at once.
func (a *alertPoll) run(ctx context.Context) {
	for {
		a.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(a.p.Alerts.Interval()):
		}
	}
}

// poll reads the source once and keeps the reading.
func (a *alertPoll) poll(ctx context.Context) {
	body, err := a.fetch(ctx)
	prev := precondition.Reading{}
	if r := a.last.Load(); r != nil {
		prev = *r
	}
	r := precondition.ReadAlerts(a.p, prev, body, err, time.Now())
	a.last.Store(&r)
	if !r.ReadAt.IsZero() {
		preconditionRead.WithLabelValues(a.p.Name).Set(float64(r.ReadAt.Unix()))
	} else {
		preconditionRead.WithLabelValues(a.p.Name).Set(0)
	}
}

func (a *alertPoll) fetch(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.p.Alerts.URL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAlertsBody+1))
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return nil, fmt.Errorf("GET %s answered HTTP %d redirecting to %q, which the gate does not follow (it could point at an endpoint that says \"no alerts\"): set alerts.url to the source's own endpoint",
			a.p.Alerts.URL, resp.StatusCode, qualification.Clip(resp.Header.Get("Location")))
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("GET %s answered HTTP %d", a.p.Alerts.URL, resp.StatusCode)
	}
	if len(body) > maxAlertsBody {
		return nil, fmt.Errorf("the answer exceeds %d bytes", maxAlertsBody)
	}
	return body, nil
}

// exportPreconditions sets the state gauge of each precondition at now.
func exportPreconditions(readings []precondition.Reading, now time.Time, set func(*prometheus.GaugeVec, float64, ...string)) {
	for _, r := range readings {
		state, _ := r.At(now)
		setPreconditionState(set, r.Precondition.Name, r.Precondition.Kind, state)
	}
}

// setPreconditionState sets a precondition's state gauge: 1 for state, 0
// for the others.
func setPreconditionState(set func(*prometheus.GaugeVec, float64, ...string), name, kind string, state precondition.State) {
	for _, s := range precondition.States {
		set(preconditionState, boolGauge(s == state), name, kind, string(s))
	}
}

// builtinState is a built-in precondition's state: it holds unless unmet.
func builtinState(unmet bool) precondition.State {
	if unmet {
		return precondition.Fails
	}
	return precondition.Holds
}

// watchInformers is watch for client-go informers (the dynamic ones).
func (s *snapshot[T]) watchInformers(infs ...toolscache.SharedIndexInformer) error {
	out := make([]cache.Informer, len(infs))
	for i, inf := range infs {
		out[i] = inf
	}
	return s.watch(out...)
}
