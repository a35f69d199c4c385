package gate

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// A Node write can install a DRA driver as surely as a widened DaemonSet:
// a label added that a configured kubelet-plugin DaemonSet's scheduling
// selects, or a taint it does not tolerate removed, makes the DaemonSet
// controller create its plugin Pod on the node. Judged as the widened
// DaemonSet is (DRAScheduling.widened): the node takes the DaemonSet's
// version, which a loaded, approved and qualified record for its hardware
// must name for the tuple it runs. And it can unload one as surely as a
// narrowed DaemonSet: a label the scheduling selects on removed, or a
// NoExecute taint it does not tolerate added, makes the controller delete
// the plugin Pod, so GPU holders there block it (holdersRule). The Node
// webhook sends a taint write that can do either (a NoExecute taint added,
// a NoSchedule or NoExecute one lifted) by anyone but the system and the
// configured node-taint controllers, whatever its key
// (webhook.NodeChangeConditionFor); written alone, it is judged by these
// rules only (ReviewNodeTaints). The exempt system controllers (NFD's
// labels, the GPU Operator's) never reach these rules (PrepareNode returns
// first), so they never wait on them.

// draInstall is one configured DRA driver a Node write installs on the node.
type draInstall struct {
	daemonSet string // namespace/name
	version   string
}

// draInstalls: the configured DRA drivers whose cached plugin DaemonSet the
// write makes schedule on the node (schedulesOn after, not before) and
// that runs no plugin Pod of it there yet. And the reverse: a write that
// stops a plugin DaemonSet running on the node (runsOn before, not after: a
// label it selects on removed, a NoExecute taint it does not tolerate
// added) makes the DaemonSet controller delete its Pod there, unloading
// the driver as a narrowed DaemonSet does (DRAScheduling.narrowed): an
// unload the holders row judges.
func (r *NodeReview) draInstalls() {
	n, old := r.req.Node, r.req.OldNode
	facts := &r.cl.Proof.DRA
	for _, d := range r.cfg.DRADrivers {
		ds := facts.DaemonSet(d.Namespace, d.DaemonSet)
		if ds != nil && runsOn(ds, old) && !runsOn(ds, n) {
			if len(r.modeDiff) > 0 {
				continue // a GPU mode change holds the node's holders already (modeRules): once
			}
			nf := r.cfg.FactsOf(n)
			t := newTransition(r.cfg, nf, r.cl.Current(nf), nil, false)
			t.Path, t.Unload, t.CheckHolders = pathNodeLabels, true, true
			what := "labels"
			if fleet.DaemonSetSelects(ds, n) { // still selected: a NoExecute taint it does not tolerate
				t.Path, what = pathNodeTaints, "taints"
			}
			t.Unscheduled = "the node's " + what + " (which DaemonSet " + d.Namespace + "/" + d.DaemonSet + "'s scheduling reads)"
			r.unloads = append(r.unloads, t)
			continue
		}
		if ds == nil || !schedulesOn(ds, n) || schedulesOn(ds, old) ||
			slices.ContainsFunc(fleet.PodsOnNode(facts.PluginPods, n.Name), func(p *corev1.Pod) bool { return fleet.PluginOf(d, ds, p) }) {
			continue
		}
		var images []string
		for _, c := range ds.Spec.Template.Spec.Containers {
			images = append(images, c.Image)
		}
		v, _ := DRADriverVersion(images, ds.Labels[LabelVersion])
		r.installs = append(r.installs, draInstall{daemonSet: d.Namespace + "/" + d.DaemonSet, version: v})
	}
}

var (
	pathNodeLabels = field.NewPath("metadata", "labels")
	pathNodeTaints = field.NewPath("spec", "taints")
)

// draInstallRule (ReviewNode): each DRA driver the write installs on the
// node needs a usable record for the node's hardware whose target is the
// tuple the node runs with that DRA driver version. Which DaemonSets could
// not be read fails closed: then any write may install one.
func draInstallRule(rv review, f *findings, _ *Decision) {
	r, ok := rv.(*NodeReview)
	if !ok || !r.gpu {
		return
	}
	n := r.req.Node
	if why := r.cl.Proof.DRA.DaemonSetsUnreadable; why != "" && len(r.cfg.DRADrivers) > 0 {
		f.add(factsMissing(n.Name, pathNodeLabels, "the DRA drivers' kubelet-plugin DaemonSets this write may make schedule on node "+n.Name, fromAPI, fmt.Errorf("%s", why)))
		return
	}
	if len(r.installs) == 0 {
		return
	}
	nf := r.cfg.FactsOf(n)
	fresh := r.cfg.freshness(r.now)
	for _, in := range r.installs {
		want := r.cl.Current(nf)
		want.DRADriver = in.version
		var others []string
		found := false
		for _, name := range sortedKeys(r.cl.Records) {
			e := r.cl.Records[name]
			rec := e.Record
			if !r.cfg.stands(e) || len(qualification.Check(rec, fresh)) > 0 || !slices.Equal(rec.NormalizedHardware(), nf.Identities) {
				continue
			}
			if strings.TrimSpace(rec.Target.DRADriver) != "" && SameTuple(want, rec.Target) {
				found = true
				break
			}
			others = append(others, rec.ID+" ("+strings.Join(fleet.TupleDiff(nil, want, rec.Target, false), ", ")+quoteIfNoDRA(rec)+")")
		}
		switch {
		case found:
		case len(others) == 0:
			f.add(recordMissing(r.cfg, pathNodeLabels, "", missingDRAInstall, n.Name, in.daemonSet, qualification.Clip(fleet.QuoteOrNone(in.version)), want.String()))
		default:
			f.add(targetNotQualified(n.Name, pathNodeLabels, nil, targetDRAInstall, in.daemonSet, qualification.Clip(in.version), want.String(), strings.Join(others, "; ")))
		}
	}
}

// quoteIfNoDRA says a record names no DRA driver (which qualifies no
// install of one).
func quoteIfNoDRA(rec *qualification.Record) string {
	if strings.TrimSpace(rec.Target.DRADriver) == "" {
		return "; it names no DRA driver version"
	}
	return ""
}
