//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

func nvidiaObject(apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name}, "spec": spec}}
	return u
}

// TestDriverPath: the GPU Operator's own route to a new driver is gated like
// a Plan: an unqualified change is refused, a qualified serialized one
// admitted.
func TestDriverPath(t *testing.T) {
	ctx := context.Background()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	_, err = envtest.InstallCRDs(env.CP.RESTConfig(), envtest.CRDInstallOptions{Paths: []string{filepath.Join(root, "testdata", "nvidia", "crds.yaml")}})
	require.NoError(t, err)

	// A record qualifying V100 nodes on the source tuple with driver 580.130.00.
	rec := testenv.Record("v100-driver-580-130", now.Add(-24*time.Hour), func(r *qualification.Record) {
		r.Target = testenv.Source
		r.Target.Driver = "580.130.00"
	})
	require.NoError(t, env.CreateRecords(ctx, map[string]*qualification.Record{"v100-driver": rec}))
	for _, n := range []string{"gpu-v100-01", "gpu-v100-02"} {
		require.NoError(t, patchNode(env.Admin, n, `{"metadata":{"labels":{"driver-pool":"a"}}}`))
		defer patchNode(env.Admin, n, `{"metadata":{"labels":{"driver-pool":null}}}`)
	}

	policy := map[string]any{"autoUpgrade": true, "maxParallelUpgrades": int64(1)}
	cp := nvidiaObject("nvidia.com/v1", "ClusterPolicy", "cluster-policy", map[string]any{
		"driver":       map[string]any{"version": "580.126.20", "upgradePolicy": policy},
		"dcgmExporter": map[string]any{"version": testenv.Source.DCGMExporter},
	})
	require.NoError(t, env.Admin.Create(ctx, cp))
	nd := nvidiaObject("nvidia.com/v1alpha1", "NVIDIADriver", "v100", map[string]any{"version": "580.126.20", "nodeSelector": map[string]any{"driver-pool": "a"}})
	require.NoError(t, env.Admin.Create(ctx, nd))

	alice, _ := as(t, "alice")
	setVersion := func(u *unstructured.Unstructured, v string, path ...string) {
		require.NoError(t, env.Admin.Get(ctx, client.ObjectKeyFromObject(u), u))
		require.NoError(t, unstructured.SetNestedField(u.Object, v, path...))
	}

	setVersion(nd, "580.130.00", "spec", "version")
	requireDenied(t, alice.Update(ctx, nd), gate.CodeRecordMissing)

	nd.SetAnnotations(map[string]string{gate.AnnotationQualification: "v100-driver"})
	require.NoError(t, alice.Update(ctx, nd), "qualified for every node it reaches, one node at a time")

	// The whole fleet through the ClusterPolicy: H200 and odd V100 nodes are
	// not covered by the V100 record.
	setVersion(cp, "580.130.00", "spec", "driver", "version")
	cp.SetAnnotations(map[string]string{gate.AnnotationQualification: "v100-driver"})
	err = alice.Update(ctx, cp)
	require.Error(t, err)
	require.Contains(t, err.Error(), "[HardwareNotQualified]")

	// A parallel policy makes even the covered NVIDIADriver change unsafe.
	require.NoError(t, env.Admin.Get(ctx, client.ObjectKeyFromObject(cp), cp))
	require.NoError(t, unstructured.SetNestedField(cp.Object, int64(0), "spec", "driver", "upgradePolicy", "maxParallelUpgrades"))
	require.NoError(t, alice.Update(ctx, cp), "a policy edit alone changes no version")
	setVersion(nd, "580.130.00", "spec", "version")
	nd.SetAnnotations(map[string]string{gate.AnnotationQualification: "v100-driver", "touch": "1"})
	require.NoError(t, alice.Update(ctx, nd), "no version change: not gated")
	setVersion(nd, "580.140.02", "spec", "version")
	requireDenied(t, alice.Update(ctx, nd), gate.CodeConcurrencyNotSerial, gate.CodeTargetNotQualified)
}
