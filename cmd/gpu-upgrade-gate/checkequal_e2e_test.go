//go:build e2e

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/loader"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/snapshot"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// TestCheckEqualsTheWebhook runs the same state through the webhook (a
// dry-run create through a real kube-apiserver, the chart's webhook
// configuration and RBAC) and through `check`, from a List saved as
// snapshot.Recipe says and live through --kubeconfig, and requires the
// same decision; and for every row of the loader's Reads, the same objects
// in the webhook's view as in both of check's. It includes issue 23's case:
// the canary Plan is ALLOW, and DENY (RolloutInFlight) with another GPU
// Plan in flight, all three ways. No kubelet, Job controller or SUC runs:
// the test writes the Pods' and the Job's state as they would.
func TestCheckEqualsTheWebhook(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	now := time.Now()
	env, err := testenv.Start(ctx, testenv.Options{Config: gate.DefaultConfig()})
	require.NoError(t, err)
	defer func() { _ = env.Stop() }()
	cfg := env.Config
	require.NoError(t, env.Base(ctx))
	require.NoError(t, env.CreateNodes(ctx, []testenv.NodeSpec{
		{Name: "gpu-v100-01", Fixture: "node-v100.json", Tuple: testenv.Source, Zone: "zone-a"},
		{Name: "gpu-v100-02", Fixture: "node-v100.json", Tuple: testenv.Source, Zone: "zone-a"},
		{Name: "gpu-v100-03", Fixture: "node-v100.json", Tuple: testenv.Target, Zone: "zone-a"},
		{Name: "gpu-v100-holder", Fixture: "node-v100.json", Tuple: testenv.Source, Zone: "zone-a"},
		{Name: "cpu-01", Tuple: testenv.Source, Zone: "zone-a"},
	}))
	fresh := now.Add(-48 * time.Hour)
	require.NoError(t, env.CreateRecords(ctx, map[string]*qualification.Record{"v100-r580": testenv.Record("v100-r580-canary-1", fresh)}))
	legacy, err := env.RecordConfigMap("v100-legacy", testenv.Record("v100-legacy", fresh))
	require.NoError(t, err)
	legacy.Annotations = nil // written before approvals were attested
	require.NoError(t, env.UnregisterWebhook(ctx))
	require.NoError(t, env.Admin.Create(ctx, legacy))
	require.NoError(t, env.RegisterWebhook(ctx))
	require.NoError(t, env.Admin.Create(ctx, testenv.Holder("train-0", "gpu-v100-holder")))
	require.NoError(t, env.ProveNode(ctx, "gpu-v100-03", now.Add(-2*time.Hour)))

	// The chart's config ConfigMap, which check --kubeconfig reads (testenv
	// checks the chart renders exactly env.Config); and the same config as
	// a file for --cluster.
	cfgJSON, err := json.Marshal(cfg)
	require.NoError(t, err)
	require.NoError(t, env.Admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: defaultConfigMap},
		Data: map[string]string{"config.yaml": string(cfgJSON)}}))
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfgFile, cfgJSON, 0o600))
	disc, err := discovery.NewDiscoveryClientForConfig(env.CP.RESTConfig())
	require.NoError(t, err)
	version, err := disc.ServerVersion()
	require.NoError(t, err)
	live, err := loader.NewLiveFor(env.CP.RESTConfig())
	require.NoError(t, err)

	alice, err := client.New(env.CP.ConfigFor("alice", "platform-admins"), client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	gpuPlan := func(name, record, node string) *upgradev1.Plan {
		return &upgradev1.Plan{
			TypeMeta:   metav1.TypeMeta{APIVersion: "upgrade.cattle.io/v1", Kind: "Plan"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "system-upgrade", Annotations: map[string]string{gate.AnnotationQualification: record, gate.AnnotationRequestedBy: "alice"}},
			Spec: upgradev1.PlanSpec{Concurrency: 1, Cordon: true, Version: testenv.Target.RKE2, ServiceAccountName: "system-upgrade",
				Upgrade: &upgradev1.ContainerSpec{Image: "rancher/rke2-upgrade"},
				Window:  &upgradev1.TimeWindowSpec{Days: upgradev1.AllDays(), StartTime: "00:00", EndTime: "23:59:59", TimeZone: "UTC"},
				NodeSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "kubernetes.io/hostname", Operator: metav1.LabelSelectorOpIn, Values: []string{node}}}}},
		}
	}

	// The three answers for one Plan.
	type answer struct {
		Allowed bool
		Codes   []string
	}
	codeRE := regexp.MustCompile(`\[([A-Z][A-Za-z]+)\]`)
	webhookAnswer := func(p *upgradev1.Plan) answer {
		err := alice.Create(ctx, p.DeepCopy(), client.DryRunAll)
		if err == nil {
			return answer{Allowed: true}
		}
		require.Contains(t, err.Error(), "denied the request", "the webhook answered: %v", err)
		var a answer
		for _, m := range codeRE.FindAllStringSubmatch(err.Error(), -1) {
			if !slices.Contains(a.Codes, m[1]) {
				a.Codes = append(a.Codes, m[1])
			}
		}
		sort.Strings(a.Codes)
		return a
	}
	checkAnswer := func(p *upgradev1.Plan, source ...string) answer {
		planFile := filepath.Join(dir, "plan.json")
		data, err := json.Marshal(p)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(planFile, data, 0o600))
		args := append([]string{"check", "--plan", planFile, "--user", "alice", "--group", "platform-admins", "--group", "system:authenticated",
			"--now", time.Now().UTC().Format(time.RFC3339), "-o", "json"}, source...)
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr)
		require.Contains(t, []int{exitAllowed, exitDenied}, code, "check %v: %s", source, stderr.String())
		var out []jsonDecision
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &out))
		require.Len(t, out, 1)
		a := answer{Allowed: out[0].Allowed}
		for _, b := range out[0].Blockers {
			if !slices.Contains(a.Codes, string(b.Code)) {
				a.Codes = append(a.Codes, string(b.Code))
			}
		}
		sort.Strings(a.Codes)
		return a
	}
	// saveList is snapshot.Recipe's output: every kind it names, every
	// namespace, as a v1 List.
	saveList := func() string {
		kinds := map[string]schema.GroupVersionKind{
			"nodes": {Version: "v1", Kind: "NodeList"}, "pods": {Version: "v1", Kind: "PodList"},
			"deployments": {Group: "apps", Version: "v1", Kind: "DeploymentList"}, "daemonsets": {Group: "apps", Version: "v1", Kind: "DaemonSetList"},
			"configmaps": {Version: "v1", Kind: "ConfigMapList"}, "jobs": {Group: "batch", Version: "v1", Kind: "JobList"},
			"plans.upgrade.cattle.io": {Group: "upgrade.cattle.io", Version: "v1", Kind: "PlanList"},
		}
		var items []map[string]any
		for _, resource := range strings.Split(strings.Fields(snapshot.Recipe)[2], ",") {
			gvk, ok := kinds[resource]
			require.True(t, ok, "the recipe's %s has a list kind here", resource)
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk)
			require.NoError(t, env.Admin.List(ctx, list))
			for _, it := range list.Items {
				items = append(items, it.Object)
			}
		}
		data, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
		require.NoError(t, err)
		path := filepath.Join(dir, "cluster.json")
		require.NoError(t, os.WriteFile(path, data, 0o600))
		return path
	}
	fileFlags := func() []string {
		return []string{"--cluster", saveList(), "--config", cfgFile, "--server-version", version.GitVersion}
	}
	liveFlags := []string{"--kubeconfig", env.CP.Kubeconfig(), "--namespace", cfg.Namespace}

	// views are what each reader holds, row by row of the loader's Reads.
	views := func() (webhookView, fileView, liveView map[string][]string) {
		cl, err := env.Server.Facts.Cluster(ctx)
		require.NoError(t, err)
		webhookView = viewOf(cl)
		data, err := os.ReadFile(saveList())
		require.NoError(t, err)
		snap, err := snapshot.Parse(data)
		require.NoError(t, err)
		fromFile, err := loader.New(cfg, snap.Source(version.GitVersion)).Cluster(ctx)
		require.NoError(t, err)
		fromLive, err := loader.New(cfg, live).Cluster(ctx)
		require.NoError(t, err)
		return webhookView, viewOf(fromFile), viewOf(fromLive)
	}

	other := gpuPlan("crosscheck-other", "v100-r580", "gpu-v100-02")
	held := int32(0)
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T)
		probe *upgradev1.Plan
		// want, when set, is the answer all three must give.
		want *answer
	}{
		{name: "the canary Plan alone", probe: gpuPlan("crosscheck", "v100-r580", "gpu-v100-01"), want: &answer{Allowed: true}},
		{name: "a Plan naming a record not approved", probe: gpuPlan("crosscheck", "v100-legacy", "gpu-v100-01")},
		{name: "a Plan on a node with a GPU holder", probe: gpuPlan("crosscheck", "v100-r580", "gpu-v100-holder")},
		{name: "another GPU Plan in flight", setup: func(t *testing.T) {
			require.NoError(t, alice.Create(ctx, other.DeepCopy()), "the other Plan alone is allowed")
		}, probe: gpuPlan("crosscheck", "v100-r580", "gpu-v100-01")},
		{name: "and SUC's Job for it, held", setup: func(t *testing.T) {
			// SUC creates the Job with parallelism 0 (no Job controller runs),
			// as SUC's ServiceAccount: only SUC writes a Job with its labels
			// (SUCJobForged). Its right to, as SUC's chart gives it.
			require.NoError(t, env.Admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "crosscheck-suc-jobs"},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create"}}}}))
			require.NoError(t, env.Admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "system-upgrade", Name: "crosscheck-suc-jobs"},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "crosscheck-suc-jobs"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts:system-upgrade"}}}))
			sucGroups := []string{"system:serviceaccounts", "system:serviceaccounts:system-upgrade", "system:authenticated"}
			require.NoError(t, env.WaitGranted(ctx, testenv.SUCUser, sucGroups, authorizationv1.ResourceAttributes{Namespace: "system-upgrade", Verb: "create", Group: "batch", Resource: "jobs"}))
			suc, err := client.New(env.CP.ConfigFor(testenv.SUCUser, sucGroups...), client.Options{Scheme: env.Scheme})
			require.NoError(t, err)
			require.NoError(t, suc.Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "system-upgrade", Name: "apply-crosscheck-other-on-gpu-v100-02",
				Labels: map[string]string{upgradev1.LabelPlan: other.Name, upgradev1.LabelNode: "gpu-v100-02"}},
				Spec: batchv1.JobSpec{Parallelism: &held, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "upgrade", Image: "rancher/rke2-upgrade"}}}}}}))
		}, probe: gpuPlan("crosscheck", "v100-r580", "gpu-v100-01")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup(t)
			}
			// The webhook's caches follow the API server a moment later; the
			// readers must then hold the same objects, kind by kind.
			var w, f, l map[string][]string
			deadline := time.Now().Add(15 * time.Second)
			for w, f, l = views(); !equalViews(w, l) && time.Now().Before(deadline); w, f, l = views() {
				time.Sleep(200 * time.Millisecond)
			}
			assert.Equal(t, l, w, "the webhook's view and check --kubeconfig's")
			assert.Equal(t, l, f, "check --cluster's view and check --kubeconfig's")
			for _, r := range loader.ReadsOf(cfg).All() {
				assert.Contains(t, l, r.What, "every kind the engine reads is compared")
			}

			byWebhook := webhookAnswer(tc.probe)
			byFile := checkAnswer(tc.probe, fileFlags()...)
			byLive := checkAnswer(tc.probe, liveFlags...)
			assert.Equal(t, byWebhook, byFile, "check --cluster gives the webhook's answer")
			assert.Equal(t, byWebhook, byLive, "check --kubeconfig gives the webhook's answer")
			if tc.want != nil {
				assert.Equal(t, *tc.want, byWebhook)
			}
		})
	}
	t.Run("the in-flight case is DENY (RolloutInFlight) both ways", func(t *testing.T) {
		probe := gpuPlan("crosscheck", "v100-r580", "gpu-v100-01")
		for name, a := range map[string]answer{"webhook": webhookAnswer(probe), "file": checkAnswer(probe, fileFlags()...), "live": checkAnswer(probe, liveFlags...)} {
			assert.False(t, a.Allowed, name)
			assert.Contains(t, a.Codes, string(gate.CodeRolloutInFlight), name)
		}
	})
}

// viewOf names what a view holds, by the loader's row names.
func viewOf(cl *gate.Cluster) map[string][]string {
	reads := loader.ReadsOf(gate.DefaultConfig())
	v := map[string][]string{}
	add := func(row string, names ...string) {
		sort.Strings(names)
		v[row] = append([]string{}, names...)
	}
	var names []string
	for _, n := range cl.Nodes {
		names = append(names, n.Name)
	}
	add(reads.Nodes.What, names...)
	names = nil
	for _, p := range cl.Plans {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	add(reads.Plans.What, names...)
	names = nil
	for name, e := range cl.Records {
		names = append(names, name+" approved-by="+e.Attestation.ApprovedBy)
	}
	add(reads.Records.What, names...)
	add(reads.GPUOperator.What, cl.GPUOperatorImage)
	add(reads.DCGMExporter.What, cl.DCGMExporterImage)
	pods := func(ps []*corev1.Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Namespace+"/"+p.Name)
		}
		return out
	}
	add(reads.Validators.What, pods(cl.Proof.Validators)...)
	validatorDS := cl.Proof.ValidatorDaemonSetUnreadable
	if ds := cl.Proof.ValidatorDaemonSet; ds != nil {
		validatorDS = ds.Namespace + "/" + ds.Name + " " + string(ds.UID)
	}
	add(reads.ValidatorDaemonSet.What, validatorDS)
	add(reads.AllocationChecks.What, pods(cl.Proof.AllocationChecks)...)
	names = nil
	for _, j := range cl.Proof.UpgradeJobs {
		runs := "held"
		if gate.JobRuns(j.Spec) {
			runs = "runs"
		}
		names = append(names, j.Namespace+"/"+j.Name+" "+runs)
	}
	add(reads.UpgradeJobs.What, names...)
	halts := "ok"
	if cl.Halts.Err != nil {
		halts = cl.Halts.Err.Error()
	}
	for k := range cl.Halts.Halts {
		halts += " " + k
	}
	add(reads.HaltRecord.What, halts)
	add("server version", cl.ServerVersion)
	return v
}

func equalViews(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}
