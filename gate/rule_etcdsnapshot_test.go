package gate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestEtcdSnapshotRule: the safe scenario's Plan moves gpu-v100-01 from
// RKE2 1.35 to 1.36, so it needs a ready snapshot taken within maxAge
// (24h) wherever the cluster serves ETCDSnapshotFiles.
func TestEtcdSnapshotRule(t *testing.T) {
	fresh := EtcdSnapshot{Name: "local-etcd-snapshot-server-1-1", Snapshot: "etcd-snapshot-server-1-1", Node: "server-1", CreatedAt: testNow.Add(-time.Hour), ReadyToUse: true}
	with := func(mod func(*EtcdSnapshot)) EtcdSnapshot { s := fresh; mod(&s); return s }
	served := func(items ...EtcdSnapshot) func(*scenario) {
		return func(s *scenario) { s.cluster.EtcdSnapshots = EtcdSnapshots{Served: true, Items: items} }
	}
	cases := []struct {
		name    string
		mutate  func(*scenario)
		stale   bool
		message string // a part of the blocker's message
	}{
		{name: "EtcdSnapshotStale: none", mutate: served(), stale: true, message: "no ready ETCDSnapshotFile exists (0 seen"},
		{name: "a fresh ready snapshot allows", mutate: served(fresh)},
		{name: "a snapshot exactly maxAge old allows", mutate: served(with(func(s *EtcdSnapshot) { s.CreatedAt = testNow.Add(-24 * time.Hour) }))},
		{name: "EtcdSnapshotStale: older than maxAge", mutate: served(with(func(s *EtcdSnapshot) { s.CreatedAt = testNow.Add(-30 * time.Hour) })), stale: true,
			message: "the newest ready ETCDSnapshotFile, local-etcd-snapshot-server-1-1 (snapshot etcd-snapshot-server-1-1 on node server-1), was taken at 2026-11-20T06:00:00Z, 30h0m0s ago"},
		{name: "EtcdSnapshotStale: not readyToUse", mutate: served(with(func(s *EtcdSnapshot) { s.ReadyToUse = false })), stale: true, message: "1 seen"},
		{name: "EtcdSnapshotStale: error set", mutate: served(with(func(s *EtcdSnapshot) { s.Error = "upload to s3 failed" })), stale: true, message: "1 seen"},
		{name: "EtcdSnapshotStale: no creationTime", mutate: served(with(func(s *EtcdSnapshot) { s.CreatedAt = time.Time{} })), stale: true, message: "1 seen"},
		{name: "EtcdSnapshotStale: dated ahead of the clock", mutate: served(with(func(s *EtcdSnapshot) { s.CreatedAt = testNow.Add(48 * time.Hour) })), stale: true, message: "1 seen"},
		{name: "a snapshot within the clock skew ahead allows", mutate: served(with(func(s *EtcdSnapshot) { s.CreatedAt = testNow.Add(time.Minute) }))},
		{name: "the newest ready one counts, not the newest", mutate: served(with(func(s *EtcdSnapshot) { s.CreatedAt = testNow.Add(-30 * time.Hour) }),
			with(func(s *EtcdSnapshot) { s.Name, s.ReadyToUse = "failed", false })), stale: true, message: "30h0m0s ago"},
		{name: "EtcdSnapshotStale: unreadable counts as none", mutate: func(s *scenario) {
			s.cluster.EtcdSnapshots = EtcdSnapshots{Served: true, Err: errors.New("etcdsnapshotfiles.k3s.cattle.io is forbidden")}
		}, stale: true, message: "cannot be read (etcdsnapshotfiles.k3s.cattle.io is forbidden)"},
		{name: "a longer maxAge allows an older snapshot", mutate: func(s *scenario) {
			served(with(func(s *EtcdSnapshot) { s.CreatedAt = testNow.Add(-30 * time.Hour) }))(s)
			s.cfg.EtcdSnapshot.MaxAge = metav1.Duration{Duration: 48 * time.Hour}
		}},
		{name: "a patch-level RKE2 move needs no snapshot", mutate: func(s *scenario) {
			served()(s)
			useRecord(kubeDC)(s)
			s.node("gpu-v100-01").Status.NodeInfo.KubeletVersion = "v1.36.0+rke2r1"
		}},
		{name: "required: false turns it off", mutate: func(s *scenario) { served()(s); s.cfg.EtcdSnapshot.Required = false }},
		{name: "a cluster without the ETCDSnapshotFile API is not checked", mutate: func(*scenario) {}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := safeScenario(t)
			tc.mutate(s)
			d := s.decide()
			var msgs []string
			for _, b := range d.Blockers {
				if b.Code == CodeEtcdSnapshotStale {
					msgs = append(msgs, b.Err.Error())
				}
			}
			if !tc.stale {
				assert.Empty(t, msgs)
				return
			}
			require.Len(t, msgs, 1, "%+v", d.Blockers)
			assert.Contains(t, msgs[0], tc.message)
			assert.Contains(t, msgs[0], "node gpu-v100-01 from Kubernetes 1.35 to 1.36")
			assert.Contains(t, msgs[0], "rke2 etcd-snapshot save")
		})
	}
}

// TestEtcdSnapshotsSetForTheReview: what the adapter reads for the review
// stands in for the cluster view's, and only a Plan write that moves a
// minor asks for it.
func TestEtcdSnapshotsSetForTheReview(t *testing.T) {
	s := safeScenario(t)
	s.cluster.EtcdSnapshots = EtcdSnapshots{Served: true}
	r := PreparePlan(s.cfg, s.cluster, s.req)
	require.True(t, r.NeedsEtcdSnapshots())
	r.SetEtcdSnapshots(EtcdSnapshots{Served: true, Items: []EtcdSnapshot{{Name: "a", CreatedAt: testNow.Add(-time.Minute), ReadyToUse: true}}})
	d := r.Decide(s.holders, nil)
	assert.True(t, d.Allowed, "%+v", d.Blockers)

	s.cfg.EtcdSnapshot.Required = false
	assert.False(t, PreparePlan(s.cfg, s.cluster, s.req).NeedsEtcdSnapshots())
}

// TestEtcdSnapshotWarnsWithoutTheAPI: a minor move in a cluster that
// serves no ETCDSnapshotFile API is admitted with a warning saying so.
func TestEtcdSnapshotWarnsWithoutTheAPI(t *testing.T) {
	d := safeScenario(t).decide()
	require.True(t, d.Allowed, "%+v", d.Blockers)
	assert.Contains(t, strings.Join(d.Warnings, "\n"), "serves no ETCDSnapshotFile API")
}

func TestEtcdSnapshotConfigValidates(t *testing.T) {
	c := DefaultConfig()
	c.EtcdSnapshot.MaxAge = metav1.Duration{}
	errs := c.Validate()
	require.Len(t, errs, 1)
	assert.Equal(t, "etcdSnapshot.maxAge", errs[0].Field)
	c.EtcdSnapshot.Required = false
	assert.Empty(t, c.Validate())
}

// TestEtcdSnapshotAtSUCStep: SUC's start of a GPU node's Job that moves its
// RKE2 minor is held without a recent ready snapshot, whatever path pulled
// the node into the Plan (a Node write reaches this step too), and starts
// with one the adapter read for the step.
func TestEtcdSnapshotAtSUCStep(t *testing.T) {
	s := safeStep(t)
	s.cluster.EtcdSnapshots = EtcdSnapshots{Served: true}
	prepare := func() *SUCStep {
		return PrepareSUCStep(s.cfg, s.cluster, SUCStepRequest{Object: "Job system-upgrade/apply-gpu-v100-canary-on-gpu-v100-01", Plan: s.req.Plan, Node: s.node, User: s.req.User, Now: s.req.Now})
	}
	st := prepare()
	require.True(t, st.NeedsEtcdSnapshots())
	d := st.Decide(s.holders, nil)
	assert.Contains(t, codesOf(d), CodeEtcdSnapshotStale)

	st = prepare()
	st.SetEtcdSnapshots(EtcdSnapshots{Served: true, Items: []EtcdSnapshot{{Name: "fresh", CreatedAt: testNow.Add(-time.Hour), ReadyToUse: true}}})
	d = st.Decide(s.holders, nil)
	assert.NotContains(t, codesOf(d), CodeEtcdSnapshotStale)
	assert.True(t, d.Allowed, "%+v", d.Blockers)
}
