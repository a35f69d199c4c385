package loader

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/dra"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// draSource answers every read with nothing, but ResourceSlices and
// ResourceClaims with slicesErr (nil: one slice), and DaemonSets with
// daemonSetsErr (nil: the plugin's).
type draSource struct{ slicesErr, daemonSetsErr error }

func (s draSource) Read(_ context.Context, r Read) ([]client.Object, error) {
	switch r.Object.(type) {
	case *appsv1.DaemonSet:
		if s.daemonSetsErr != nil {
			return nil, s.daemonSetsErr
		}
		return []client.Object{&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "nvidia-dra-driver-gpu", Name: "nvidia-dra-driver-gpu-kubelet-plugin"}}}, nil
	case *resourcev1.ResourceSlice, *resourcev1.ResourceClaim:
		if s.slicesErr != nil {
			return nil, s.slicesErr
		}
		if _, ok := r.Object.(*resourcev1.ResourceSlice); ok {
			return []client.Object{&resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "gpu-01-gpu.nvidia.com"}}}, nil
		}
	case *corev1.Pod:
		if len(r.Namespaces) == 1 && r.Namespaces[0] == "nvidia-dra-driver-gpu" {
			return []client.Object{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "nvidia-dra-driver-gpu", Name: "plugin"}}}, nil
		}
	}
	return nil, nil
}

func (draSource) ServerVersion(context.Context) (string, error) { return "v1.37.2", nil }

// TestDRAProofReads: DRA facts are read only with DRA drivers configured;
// an API server that does not serve resource.k8s.io/v1 is named in the
// facts (DRA nodes stay unproven) rather than failing every review, and any
// other read error fails.
func TestDRAProofReads(t *testing.T) {
	withDRA := gate.DefaultConfig()
	withDRA.DRADrivers = []dra.Driver{{Name: "gpu.nvidia.com", Namespace: "nvidia-dra-driver-gpu", DaemonSet: "nvidia-dra-driver-gpu-kubelet-plugin"}}
	notServed := &meta.NoKindMatchError{GroupKind: resourcev1.SchemeGroupVersion.WithKind("ResourceSlice").GroupKind(), SearchedVersions: []string{"v1"}}
	cases := []struct {
		name       string
		cfg        *gate.Config
		src        draSource
		slices     int
		unreadable string
		// dsUnreadable: why the DaemonSets could not be read, named in the
		// facts (every GPU node unproven), not an error.
		dsUnreadable string
		err          string
	}{
		{name: "no DRA drivers: nothing read", cfg: gate.DefaultConfig(), src: draSource{slicesErr: errors.New("must not be read")}},
		{name: "served", cfg: withDRA, slices: 1},
		{name: "not served: named, not an error", cfg: withDRA, src: draSource{slicesErr: notServed}, unreadable: "the API server does not serve resource.k8s.io/v1"},
		{name: "another error fails", cfg: withDRA, src: draSource{slicesErr: errors.New("forbidden")}, err: "ResourceSlices and ResourceClaims: forbidden"},
		{name: "DaemonSets unreadable: named, not an error", cfg: withDRA, src: draSource{daemonSetsErr: errors.New("daemonsets.apps is forbidden")}, slices: 1,
			dsUnreadable: "daemonsets.apps is forbidden"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := New(tc.cfg, tc.src).Proof(context.Background())
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Len(t, got.DRA.Slices, tc.slices)
			if tc.unreadable == "" {
				assert.Empty(t, got.DRA.Unreadable)
			} else {
				assert.Contains(t, got.DRA.Unreadable, tc.unreadable)
			}
			assert.Equal(t, tc.dsUnreadable, got.DRA.DaemonSetsUnreadable)
			if len(tc.cfg.DRADrivers) > 0 {
				assert.Len(t, got.DRA.PluginPods, 1, "the drivers' namespaces' Pods are read")
				assert.Len(t, got.DRA.DaemonSets, map[bool]int{true: 1}[tc.dsUnreadable == ""], "the drivers' namespaces' DaemonSets are read")
			}
		})
	}
}

// jobSource answers a read of Jobs in the checks' namespace with one Job,
// and fails any other Job read (SUC's are read by their labels).
type jobSource struct{ draSource }

func (s jobSource) Read(ctx context.Context, r Read) ([]client.Object, error) {
	if _, ok := r.Object.(*batchv1.Job); ok && r.Label == nil {
		if len(r.Namespaces) != 1 || r.Namespaces[0] != "gpu-checks" {
			return nil, errors.New("check Jobs read outside the checks' namespace")
		}
		return []client.Object{&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-checks", Name: "nccl", UID: "u-1"}}}, nil
	}
	return s.draSource.Read(ctx, r)
}

// TestCheckJobsRead: with proof.checks the Jobs of the checks' namespace
// are read (the check Pods' controllers, by UID); without, none.
func TestCheckJobsRead(t *testing.T) {
	cfg := gate.DefaultConfig()
	got, err := New(cfg, jobSource{}).Proof(context.Background())
	require.NoError(t, err)
	assert.Empty(t, got.CheckJobs)

	cfg.Proof.Checks, cfg.Proof.AllocationCheck.Namespace = []gate.NodeCheck{{Kind: "nccl-allreduce"}}, "gpu-checks"
	got, err = New(cfg, jobSource{}).Proof(context.Background())
	require.NoError(t, err)
	require.Len(t, got.CheckJobs, 1)
	assert.Equal(t, "u-1", string(got.CheckJobs[0].UID))
}
