// Package precondition holds the declared preconditions of a GPU upgrade
// (issue 27 item 1): CEL expressions over objects the gate watches, and
// Prometheus or Alertmanager alerts. It is pure, as gate is: it compiles and
// evaluates expressions and reads alert lists handed to it; the webhook
// watches the objects and polls the alert source, and gate's rules judge the
// readings.
package precondition

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Precondition kinds.
const (
	KindCEL    = "cel"
	KindAlerts = "alerts"
)

var kinds = []string{KindCEL, KindAlerts}

// Precondition is one declared precondition: its name, what it reads and
// what "healthy" means.
type Precondition struct {
	// Name is what refusals, metrics and inventory call it.
	Name string `json:"name"`
	// Kind is cel or alerts.
	Kind string `json:"kind"`
	// Message says what a failure means and what to do; refusals quote it.
	Message string  `json:"message,omitempty"`
	CEL     *CEL    `json:"cel,omitempty"`
	Alerts  *Alerts `json:"alerts,omitempty"`
}

// CEL is a precondition over objects the gate watches: the expression sees
// them as `objects` (a list of the objects as JSON maps) and must return
// true for the precondition to hold. The language and its cost limits are
// ValidatingAdmissionPolicy's (cel.go).
type CEL struct {
	Group    string `json:"group,omitempty"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
	// Namespace narrows a namespaced resource to one namespace; empty:
	// every namespace (or a cluster-scoped resource).
	Namespace string `json:"namespace,omitempty"`
	// LabelSelector narrows the objects ("app=ceph,role!=test").
	LabelSelector string `json:"labelSelector,omitempty"`
	// Expression is CEL returning bool, e.g.
	// objects.all(o, o.status.phase == 'HEALTH_OK').
	Expression string `json:"expression"`
	// AllowEmpty lets the expression judge an empty set of objects. Off
	// (the default), no matching object is Unknown, which fails closed:
	// objects.all(...) holds over none, so deleting (or relabelling) the
	// watched objects would otherwise make the precondition hold.
	AllowEmpty bool `json:"allowEmpty,omitempty"`
}

// Where names the objects the precondition reads: resource.group/version,
// its namespace and label selector, e.g. "cephclusters.ceph.rook.io/v1 in
// rook-ceph (app=ceph)".
func (c *CEL) Where() string {
	where := c.Resource
	if c.Group != "" {
		where += "." + c.Group
	}
	where += "/" + c.Version
	if c.Namespace != "" {
		where += " in " + c.Namespace
	}
	if c.LabelSelector != "" {
		where += " (" + c.LabelSelector + ")"
	}
	return where
}

// GVR is the resource the precondition reads.
func (c *CEL) GVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: c.Group, Version: c.Version, Resource: c.Resource}
}

// Alerts is a precondition over the alerts of a Prometheus
// (/api/v1/alerts) or Alertmanager (/api/v2/alerts): it holds while no
// alert matching the matcher fires. Prometheus is the stronger source: its
// alerts are computed from its rules, while Alertmanager's are what
// clients POST, so whoever can POST to it can resolve a firing alert until
// Prometheus resends it (--rules.alert.resend-delay, 1m).
type Alerts struct {
	// URL is the alerts endpoint, e.g.
	// http://prometheus.monitoring:9090/api/v1/alerts or
	// http://alertmanager.monitoring:9093/api/v2/alerts. Redirects are
	// not followed.
	URL string `json:"url"`
	// AlertNames: an alert matches when its alertname is one of these
	// (empty: any name).
	AlertNames []string `json:"alertNames,omitempty"`
	// Labels: an alert matches only when it carries each of these labels
	// with exactly this value.
	Labels map[string]string `json:"labels,omitempty"`
	// PollInterval is how often each replica reads the source.
	PollInterval metav1.Duration `json:"pollInterval,omitempty"`
	// MaxAge: when the last successful read is older than this, the
	// precondition fails closed (PreconditionStale).
	MaxAge metav1.Duration `json:"maxAge,omitempty"`
}

// Defaults of an alerts precondition.
const (
	DefaultPollInterval = 30 * time.Second
	DefaultMaxAge       = 5 * time.Minute
)

// Interval is the poll interval, defaulted.
func (a *Alerts) Interval() time.Duration {
	if a.PollInterval.Duration > 0 {
		return a.PollInterval.Duration
	}
	return DefaultPollInterval
}

// Age is the maximum age of a reading, defaulted.
func (a *Alerts) Age() time.Duration {
	if a.MaxAge.Duration > 0 {
		return a.MaxAge.Duration
	}
	return DefaultMaxAge
}

// Validate reports every problem of the precondition, compiling its
// expression (a compile error or an estimated cost over the limit is one).
func (p *Precondition) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if msgs := validation.IsDNS1123Subdomain(p.Name); len(msgs) > 0 {
		errs = append(errs, field.Invalid(path.Child("name"), qualification.Clip(p.Name), "a name for refusals, metrics and inventory, e.g. ceph-health: "+msgs[0]))
	}
	switch p.Kind {
	case KindCEL:
		if p.Alerts != nil {
			errs = append(errs, field.Invalid(path.Child("alerts"), "set", "a cel precondition takes cel, not alerts"))
		}
		if p.CEL == nil {
			return append(errs, field.Required(path.Child("cel"), "the objects to read and the expression, e.g. {version: v1, resource: configmaps, namespace: rook-ceph, expression: \"objects.all(o, o.data.health == 'HEALTH_OK')\"}"))
		}
		errs = append(errs, p.CEL.validate(path.Child("cel"))...)
	case KindAlerts:
		if p.CEL != nil {
			errs = append(errs, field.Invalid(path.Child("cel"), "set", "an alerts precondition takes alerts, not cel"))
		}
		if p.Alerts == nil {
			return append(errs, field.Required(path.Child("alerts"), "the alerts endpoint and matcher, e.g. {url: http://prometheus.monitoring:9090/api/v1/alerts, alertNames: [GPUXidErrors]}"))
		}
		errs = append(errs, p.Alerts.validate(path.Child("alerts"))...)
	default:
		errs = append(errs, field.NotSupported(path.Child("kind"), qualification.Clip(p.Kind), kinds))
	}
	return errs
}

func (c *CEL) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Group != "" {
		if msgs := validation.IsDNS1123Subdomain(c.Group); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path.Child("group"), qualification.Clip(c.Group), "an API group, e.g. ceph.rook.io (empty: the core group): "+msgs[0]))
		}
	}
	if msgs := validation.IsDNS1123Label(c.Version); len(msgs) > 0 {
		errs = append(errs, field.Invalid(path.Child("version"), qualification.Clip(c.Version), "an API version, e.g. v1: "+msgs[0]))
	}
	if msgs := validation.IsDNS1123Label(c.Resource); len(msgs) > 0 || strings.ToLower(c.Resource) != c.Resource {
		errs = append(errs, field.Invalid(path.Child("resource"), qualification.Clip(c.Resource), "a resource's plural name, e.g. cephclusters"))
	}
	if c.Namespace != "" {
		if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path.Child("namespace"), qualification.Clip(c.Namespace), msgs[0]))
		}
	}
	if _, err := labels.Parse(c.LabelSelector); err != nil {
		errs = append(errs, field.Invalid(path.Child("labelSelector"), qualification.Clip(c.LabelSelector), "a label selector, e.g. app=rook-ceph: "+err.Error()))
	}
	if strings.TrimSpace(c.Expression) == "" {
		errs = append(errs, field.Required(path.Child("expression"), "a CEL expression over objects returning bool, e.g. objects.all(o, o.status.phase == 'Ready')"))
	} else if _, err := Compile(c.Expression); err != nil {
		errs = append(errs, field.Invalid(path.Child("expression"), qualification.Clip(c.Expression), err.Error()))
	}
	return errs
}

func (a *Alerts) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	u, err := url.Parse(a.URL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		errs = append(errs, field.Invalid(path.Child("url"), qualification.Clip(a.URL), "an http(s) URL of Alertmanager's /api/v2/alerts or Prometheus's /api/v1/alerts"))
	case !slices.ContainsFunc([]string{"/api/v2/alerts", "/api/v1/alerts"}, func(s string) bool { return strings.HasSuffix(u.Path, s) }):
		errs = append(errs, field.Invalid(path.Child("url"), qualification.Clip(a.URL), "the path must end in /api/v2/alerts (Alertmanager) or /api/v1/alerts (Prometheus)"))
	case u.User != nil:
		errs = append(errs, field.Invalid(path.Child("url"), "(redacted)", "credentials do not belong in the config file (it is a ConfigMap)"))
	}
	for i, n := range a.AlertNames {
		if strings.TrimSpace(n) == "" {
			errs = append(errs, field.Invalid(path.Child("alertNames").Index(i), n, "an alert name, e.g. GPUXidErrors"))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(a.Labels)) {
		if strings.TrimSpace(k) == "" {
			errs = append(errs, field.Invalid(path.Child("labels").Key(k), a.Labels[k], "a label name, e.g. severity"))
		}
	}
	if a.PollInterval.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("pollInterval"), a.PollInterval.Duration.String(), "must not be negative (0: 30s)"))
	}
	if a.MaxAge.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("maxAge"), a.MaxAge.Duration.String(), "must not be negative (0: 5m)"))
	} else if a.Age() <= a.Interval() {
		errs = append(errs, field.Invalid(path.Child("maxAge"), a.Age().String(), fmt.Sprintf("must be longer than pollInterval (%s), or every reading would be stale before the next", a.Interval())))
	}
	return errs
}
