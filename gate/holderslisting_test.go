package gate_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
)

// TestDecideListingIsDecide: the webhook lists the holders while the rule
// table runs (DecideListing; the holder row is the table's last, so it
// waits for the listing only there); its decision must be Decide's, with
// the holders at hand, blocker for blocker and warning for warning, in
// order, for every Plan write of the fleet, whatever the listing answers.
func TestDecideListingIsDecide(t *testing.T) {
	f := benchFleet()
	cl := f.Cluster(nil)
	now := benchDay.Add(time.Hour)
	everything := fleetgen.GPUPlan("gpu-everything", fleetgen.RecordName("v100"))
	everything.Spec.NodeSelector.MatchExpressions = nil
	var reqs []gate.PlanRequest
	for _, p := range append(append([]*upgradev1.Plan(nil), f.Plans...), everything) {
		reqs = append(reqs, gate.PlanRequest{Operation: "CREATE", Plan: p, Now: now})
		bumped := p.DeepCopy()
		bumped.Labels = map[string]string{"platform.example.com/revision": "r2"}
		reqs = append(reqs, gate.PlanRequest{Operation: "UPDATE", Plan: bumped, OldPlan: p, Now: now})
	}
	users := []gate.UserInfo{{Name: "alice", Groups: []string{"platform-admins"}}, {Name: "system:serviceaccount:kube-system:generic-garbage-collector"}}
	listings := []struct {
		name    string
		holders func(nodes []string) map[string][]gate.Holder
		err     error
	}{
		{"the fleet's holders", f.Holders, nil},
		{"a holder on every node", func(nodes []string) map[string][]gate.Holder {
			out := map[string][]gate.Holder{}
			for _, n := range nodes {
				out[n] = []gate.Holder{{Namespace: "ml", Pod: "train-" + n, Owner: "Job/train", Resources: []string{"nvidia.com/gpu"}}}
			}
			return out
		}, nil},
		{"the listing failed", func([]string) map[string][]gate.Holder { return nil }, errors.New("list Pods: connection refused")},
	}
	denied, held := 0, 0
	for _, l := range listings {
		t.Run(l.name, func(t *testing.T) {
			for _, u := range users {
				for _, req := range reqs {
					req.User = u
					one := gate.PreparePlan(f.Config, cl, req)
					holders := l.holders(one.HolderNodes())
					want := one.Decide(holders, l.err)
					split := gate.PreparePlan(f.Config, cl, req)
					// The listing, in flight meanwhile as the webhook's is.
					listed := make(chan map[string][]gate.Holder, 1)
					go func() { listed <- l.holders(split.HolderNodes()) }()
					calls := 0
					got := split.DecideListing(func() (map[string][]gate.Holder, error) {
						calls++
						return <-listed, l.err
					})
					what := fmt.Sprintf("%s %s by %s", req.Operation, req.Plan.Name, u.Name)
					// The sentences first: a difference shows short.
					require.Equal(t, want.Message(), got.Message(), what)
					require.Equal(t, want.Warnings, got.Warnings, what)
					require.True(t, reflect.DeepEqual(want, got), what)
					require.LessOrEqual(t, calls, 1, "the listing is waited for once: %s", what)
					if !want.Allowed {
						denied++
					}
					// The holder row runs last: its blockers come after every
					// other rule's.
					codes := want.Codes()
					if i := slices.Index(codes, gate.CodeGPUHolders); i >= 0 {
						require.Equal(t, len(codes)-1, i, "%s: %v", what, codes)
						held++
					}
				}
			}
		})
	}
	// The comparison saw the holder rule speak.
	require.NotZero(t, held)
	require.NotZero(t, denied)
}
