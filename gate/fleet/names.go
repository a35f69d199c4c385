package fleet

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/dra"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// The names gate reads the parsers, the tuple and image references by,
// until its callers read fleet (package doc, step 1).

// Same, Compare and Parse are the component's comparison and parser over
// its values (the table's functions, for gate's rules), through the
// caller's memo (nil: parse every time).
func (s *ComponentSpec) Same(vs *Versions, a, b string) bool { return s.same(vs, a, b) }
func (s *ComponentSpec) Compare(vs *Versions, a, b string) (int, error) {
	return s.compare(vs, a, b)
}
func (s *ComponentSpec) Parse(vs *Versions, v string) error { return s.parse(vs, v) }

// Required: every tuple names the component.
func (s *ComponentSpec) Required() bool { return s.required() }

// TupleDiff, QuoteOrNone, SameTrimmed and MatchesRepository are
// the tuple's and the image references' helpers gate's rules share.
// TupleDiff parses through the caller's memo (nil: none).
func TupleDiff(vs *Versions, have, want qualification.Tuple, exact bool) []string {
	return tupleDiff(vs, have, want, exact)
}
func QuoteOrNone(s string) string                    { return quoteOrNone(s) }
func SameTrimmed(a, b string) bool                   { return sameTrimmed(a, b) }
func MatchesRepository(img Image, entry string) bool { return matchesRepository(img, entry) }

// The node and Pod readers and the DRA plugin's helpers the proof shares
// with gate's rules.
func NodeCondition(n *corev1.Node, t corev1.NodeConditionType) corev1.NodeCondition {
	return condition(n, t)
}
func PodCondition(p *corev1.Pod, t corev1.PodConditionType) corev1.PodCondition {
	return podCondition(p, t)
}
func Later(a, b time.Time) time.Time                             { return later(a, b) }
func PodsOnNode(pods []*corev1.Pod, node string) []*corev1.Pod   { return podsOn(pods, node) }
func DaemonSetSelects(ds *appsv1.DaemonSet, n *corev1.Node) bool { return daemonSetSelects(ds, n) }
func PluginOf(d dra.Driver, ds *appsv1.DaemonSet, p *corev1.Pod) bool {
	return pluginOf(d, ds, p)
}
func NamesPluginDaemonSet(d dra.Driver, p *corev1.Pod) bool { return namesPluginDaemonSet(d, p) }
