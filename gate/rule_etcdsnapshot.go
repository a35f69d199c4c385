package gate

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// EtcdSnapshotConfig is the built-in precondition of an RKE2 minor upgrade
// (issue 27): RKE2 cannot be downgraded, so the way back from a failed
// minor upgrade is an etcd restore, and a Plan that moves a GPU node's
// RKE2 minor needs a recent snapshot to restore from.
type EtcdSnapshotConfig struct {
	// Required: such a Plan needs a ready ETCDSnapshotFile no older than
	// MaxAge. A snapshot that cannot be read counts as none.
	Required bool `json:"required"`
	// MaxAge bounds the snapshot's age (status.creationTime) at admission.
	MaxAge metav1.Duration `json:"maxAge"`
}

// DefaultEtcdSnapshotConfig: required, one day.
func DefaultEtcdSnapshotConfig() EtcdSnapshotConfig {
	return EtcdSnapshotConfig{Required: true, MaxAge: metav1.Duration{Duration: 24 * time.Hour}}
}

func (c *EtcdSnapshotConfig) validate(path *field.Path) field.ErrorList {
	if c.Required && c.MaxAge.Duration <= 0 {
		return field.ErrorList{field.Invalid(path.Child("maxAge"), c.MaxAge.Duration.String(), "must be positive while etcdSnapshot.required is true, e.g. 24h")}
	}
	return nil
}

// RKE2MinorMove names a pending GPU node whose Kubernetes minor the Plan
// moves (its RKE2 minor), with both versions; ok is false when it moves
// none. The adapter reads the ETCDSnapshotFiles only for such a Plan
// (SetEtcdSnapshots).
func (r *PlanReview) RKE2MinorMove() (node string, from, to RKE2Version, ok bool) {
	want := r.rke2
	if want == "" && r.selErr == nil && len(r.pending) > 0 {
		// Before Decide (NeedsEtcdSnapshots): what transitions will set.
		rke2Plan := r.rke2Plan
		r.rke2Plan = r.isRKE2Plan()
		want, _ = r.rke2Target()
		r.rke2Plan = rke2Plan
	}
	if want == "" {
		return "", from, to, false
	}
	vs := r.versions()
	target, err := vs.ParseRKE2(want)
	if err != nil {
		return "", from, to, false // the version rule reports it
	}
	for _, n := range r.pending {
		cur, err := vs.ParseRKE2(n.RKE2)
		if err != nil {
			continue // the facts and version rules report it
		}
		if target.Major > cur.Major || (target.Major == cur.Major && target.Minor > cur.Minor) {
			return n.Name, cur, target, true
		}
	}
	return "", from, to, false
}

// etcdSnapshotChecked: the rule judges a Plan write and SUC's start of a
// node's Job (which a Node write that pulls a node into a Plan reaches too,
// so that path needs no read of its own).
func (r *PlanReview) etcdSnapshotChecked() bool {
	return (r.write || r.sucStep) && r.cfg.EtcdSnapshot.Required
}

// NeedsEtcdSnapshots says whether Decide reads the ETCDSnapshotFiles.
func (r *PlanReview) NeedsEtcdSnapshots() bool {
	if !r.etcdSnapshotChecked() {
		return false
	}
	_, _, _, ok := r.RKE2MinorMove()
	return ok
}

// SetEtcdSnapshots gives the review the ETCDSnapshotFiles the adapter read
// for it (in place of the cluster view's).
func (r *PlanReview) SetEtcdSnapshots(s EtcdSnapshots) { r.etcdSnapshots = &s }

// etcdSnapshotRule (Plans, review-level): a Plan write, and SUC's start of
// a node's Job, that moves a GPU node's RKE2 minor needs a ready
// ETCDSnapshotFile taken within etcdSnapshot.maxAge.
func etcdSnapshotRule(rv review, f *findings, _ *Decision) {
	r, ok := rv.(*PlanReview)
	if !ok || !r.etcdSnapshotChecked() {
		return
	}
	node, from, to, ok := r.RKE2MinorMove()
	if !ok {
		return
	}
	snaps := r.cl.EtcdSnapshots
	if r.etcdSnapshots != nil {
		snaps = *r.etcdSnapshots
	}
	maxAge := r.cfg.EtcdSnapshot.MaxAge.Duration
	var newest *EtcdSnapshot
	for i := range snaps.Items {
		s := &snaps.Items[i]
		// One dated ahead of the clock (beyond the records' skew) would
		// pass the age check for ever: the object has no status
		// subresource, so whoever may create it writes its creationTime.
		if !s.Usable() || s.CreatedAt.After(r.now.Add(r.cfg.ClockSkew.Duration)) {
			continue
		}
		if newest == nil || s.CreatedAt.After(newest.CreatedAt) {
			newest = s
		}
	}
	if snaps.Err == nil && !snaps.Served {
		f.warn("node %s moves from Kubernetes %d.%d to %d.%d and the cluster serves no ETCDSnapshotFile API (k3s.cattle.io/v1), so no etcd snapshot was checked: take one before the upgrade", node, from.Major, from.Minor, to.Major, to.Minor)
		return
	}
	if snaps.Err == nil && newest != nil && r.now.Sub(newest.CreatedAt) <= maxAge {
		return
	}
	f.add(etcdSnapshotStale(r.rke2Path, node, from, to, snaps, newest, maxAge, r.now))
}

// etcdSnapshotStale builds every EtcdSnapshotStale blocker.
func etcdSnapshotStale(path *field.Path, node string, from, to RKE2Version, snaps EtcdSnapshots, newest *EtcdSnapshot, maxAge time.Duration, now time.Time) Blocker {
	var seen string
	switch {
	case snaps.Err != nil:
		seen = "the ETCDSnapshotFiles cannot be read (" + qualification.Clip(snaps.Err.Error()) + "), which counts as none"
	case newest == nil:
		seen = fmt.Sprintf("no ready ETCDSnapshotFile exists (%d seen, none with status.readyToUse true, a creationTime not in the future and no error)", len(snaps.Items))
	default:
		seen = fmt.Sprintf("the newest ready ETCDSnapshotFile, %s (snapshot %s on node %s), was taken at %s, %s ago", newest.Name, newest.Snapshot, newest.Node,
			newest.CreatedAt.UTC().Format(time.RFC3339), now.Sub(newest.CreatedAt).Round(time.Second))
	}
	return forbidden(CodeEtcdSnapshotStale, "", path, "this Plan moves node %s from Kubernetes %d.%d to %d.%d (RKE2 %s), and an RKE2 minor upgrade cannot be undone except by an etcd restore: it needs a ready etcd snapshot taken within %s, but %s; take one first (`rke2 etcd-snapshot save` on a server node), or turn the precondition off (etcdSnapshot.required: false)",
		node, from.Major, from.Minor, to.Major, to.Minor, to, maxAge, seen)
}

// NeedsEtcdSnapshots says whether Decide reads the ETCDSnapshotFiles (a
// GPU node's step of a Plan that moves its RKE2 minor).
func (s *SUCStep) NeedsEtcdSnapshots() bool { return s.review != nil && s.review.NeedsEtcdSnapshots() }

// SetEtcdSnapshots gives the step the ETCDSnapshotFiles the adapter read.
func (s *SUCStep) SetEtcdSnapshots(snaps EtcdSnapshots) {
	if s.review != nil {
		s.review.SetEtcdSnapshots(snaps)
	}
}
