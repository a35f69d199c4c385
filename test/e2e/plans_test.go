//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/controlplane"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
)

// as returns a client acting as user (group platform-admins) and its warnings.
func as(t *testing.T, user string, groups ...string) (client.Client, *testenv.Warnings) {
	t.Helper()
	cfg := env.CP.ConfigFor(user, append([]string{"platform-admins"}, groups...)...)
	w := &testenv.Warnings{}
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	return c, w
}

var _ rest.WarningHandler = &testenv.Warnings{}

// openWindow is a maintenance window open all week: SUC runs the e2e
// Plans whenever the tests run, and a GPU Plan must carry one (WindowInvalid).
func openWindow() *upgradev1.TimeWindowSpec {
	return &upgradev1.TimeWindowSpec{Days: upgradev1.AllDays(), StartTime: "00:00", EndTime: "23:59:59", TimeZone: "UTC"}
}

// plan is a GPU Plan as alice, who writes most of the tests' Plans, writes
// it (requested-by alice: requireRequester); a record "" leaves the record
// annotation out.
func plan(name, record string, nodes ...string) *upgradev1.Plan {
	p := &upgradev1.Plan{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "system-upgrade", Annotations: map[string]string{gate.AnnotationQualification: record, gate.AnnotationRequestedBy: "alice"}},
		Spec: upgradev1.PlanSpec{Concurrency: 1, Cordon: true, Version: testenv.Target.RKE2, ServiceAccountName: "system-upgrade",
			Upgrade: &upgradev1.ContainerSpec{Image: "rancher/rke2-upgrade"}, Window: openWindow(),
			NodeSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "kubernetes.io/hostname", Operator: metav1.LabelSelectorOpIn, Values: nodes}}}},
	}
	if record == "" {
		delete(p.Annotations, gate.AnnotationQualification)
	}
	return p
}

// TestPlanReasonCodes triggers every Plan reason code through the API server
// and shows the neighbouring safe case admitted.
func TestPlanReasonCodes(t *testing.T) {
	driverPlan := func(p *upgradev1.Plan) {
		p.Spec.Upgrade.Image, p.Spec.Version = "registry.example.com/platform/gpu-node-upgrade", "r580-130"
	}
	rke2Image := func(image string) func(*upgradev1.Plan) {
		return func(p *upgradev1.Plan) { p.Spec.Upgrade.Image, p.Spec.Version = image, "v1.38.0+rke2r1" }
	}
	rke2Codes := []gate.Code{gate.CodeTargetNotQualified, gate.CodeMinorSkip, gate.CodeVersionSkew}
	cases := []struct {
		name string
		p    *upgradev1.Plan
		mod  func(*upgradev1.Plan)
		user string
		// applied are labelled plan.upgrade.cattle.io/<plan>=<hash> first,
		// as SUC labels a node once its Job succeeded.
		applied []string
		want    []gate.Code // nil: admitted
	}{
		{name: "safe canary", p: plan("canary-ok", "v100-r580", "gpu-v100-01")},
		{name: "MixedPlan", p: plan("mixed", "v100-r580", "gpu-v100-01", "cpu-01"), want: []gate.Code{gate.CodeMixedPlan}},
		{name: "CPU-only Plan is not the gate's business", p: plan("cpu-only", "", "cpu-01"), mod: func(p *upgradev1.Plan) { p.Spec.Concurrency = 3 }},
		{name: "UnpinnedVersion", p: plan("channel", "v100-r580", "gpu-v100-01"), mod: func(p *upgradev1.Plan) {
			p.Spec.Version, p.Spec.Channel = "", "https://update.rke2.io/v1-release/channels/stable"
		}, want: []gate.Code{gate.CodeUnpinnedVersion}},
		{name: "ConcurrencyNotSerial", p: plan("parallel", "v100-r580", "gpu-v100-01"), mod: func(p *upgradev1.Plan) { p.Spec.Concurrency = 3 }, want: []gate.Code{gate.CodeConcurrencyNotSerial}},
		{name: "CordonRequired", p: plan("no-cordon", "v100-r580", "gpu-v100-01"), mod: func(p *upgradev1.Plan) { p.Spec.Cordon = false }, want: []gate.Code{gate.CodeCordonRequired}},
		{name: "drain instead of cordon is safe", p: plan("drain-ok", "v100-r580", "gpu-v100-01"), mod: func(p *upgradev1.Plan) {
			p.Spec.Cordon, p.Spec.Drain = false, &upgradev1.DrainSpec{Force: true}
		}},
		{name: "SelectorInvalid", p: plan("bad-selector", "v100-r580", "gpu-v100-01"), mod: func(p *upgradev1.Plan) { p.Spec.NodeSelector.MatchExpressions[0].Operator = "Near" }, want: []gate.Code{gate.CodeSelectorInvalid}},
		{name: "RecordMissing", p: plan("no-record", "", "gpu-v100-01"), want: []gate.Code{gate.CodeRecordMissing}},
		{name: "RecordInvalid", p: plan("bad-record", "v100-badrev", "gpu-v100-01"), want: []gate.Code{gate.CodeRecordInvalid}},
		{name: "RecordNotQualified", p: plan("draft", "v100-draft", "gpu-v100-01"), want: []gate.Code{gate.CodeRecordNotQualified}},
		{name: "CanaryIncomplete", p: plan("incomplete", "v100-incomplete", "gpu-v100-01"), want: []gate.Code{gate.CodeCanaryIncomplete}},
		{name: "EvidenceStale", p: plan("stale", "v100-stale", "gpu-v100-01"), want: []gate.Code{gate.CodeEvidenceStale}},
		{name: "EvidenceFromFuture", p: plan("future", "v100-future", "gpu-v100-01"), want: []gate.Code{gate.CodeEvidenceFromFuture}},
		{name: "SelfApproved", p: plan("self", "v100-r580", "gpu-v100-01"), user: "bob", want: []gate.Code{gate.CodeSelfApproved}},
		{name: "HardwareUnknown", p: plan("nolabel", "v100-r580", "gpu-v100-nolabel"), want: []gate.Code{gate.CodeHardwareUnknown}},
		{name: "HardwareNotQualified", p: plan("h200-under-v100", "v100-r580", "gpu-h200-01"), want: []gate.Code{gate.CodeHardwareNotQualified}},
		{name: "FactsMissing", p: plan("nodriver", "v100-r580", "gpu-v100-nodriver"), want: []gate.Code{gate.CodeFactsMissing}},
		{name: "TargetNotQualified", p: plan("other-version", "v100-r580", "gpu-v100-01"), mod: func(p *upgradev1.Plan) { p.Spec.Version = "v1.36.2+rke2r1" }, want: []gate.Code{gate.CodeTargetNotQualified}},
		{name: "SUC's -rke2r form is the same version", p: plan("dash-form", "v100-r580", "gpu-v100-01"), mod: func(p *upgradev1.Plan) { p.Spec.Version = "v1.36.1-rke2r1" }},
		{name: "SourceMismatch", p: plan("kernel133", "v100-r580", "gpu-v100-kernel133"), want: []gate.Code{gate.CodeSourceMismatch}},
		{name: "RKE2Downgrade", p: plan("downgrade", "v100-kubedc", "gpu-v100-rke2r2"), want: []gate.Code{gate.CodeRKE2Downgrade}},
		{name: "MinorSkip", p: plan("skip", "v100-kubedc", "gpu-v100-134"), want: []gate.Code{gate.CodeMinorSkip}},
		{name: "VersionSkew", p: plan("skew", "v100-skew", "gpu-v100-137"), mod: func(p *upgradev1.Plan) { p.Spec.Version = "v1.38.1+rke2r1" }, want: []gate.Code{gate.CodeVersionSkew}},
		{name: "ComponentDowngrade", p: plan("driver-back", "v100-kubedc", "gpu-v100-newdriver"), want: []gate.Code{gate.CodeComponentDowngrade}},
		{name: "MultipleCanaries", p: plan("three", "v100-r580", "gpu-v100-01", "gpu-v100-02", "gpu-v100-04"), want: []gate.Code{gate.CodeMultipleCanaries, gate.CodeCrossFailureDomain}},
		{name: "wave of two after a proven canary", p: plan("wave-ok", "v100-r580", "gpu-v100-01", "gpu-v100-02", "gpu-v100-03"), applied: []string{"gpu-v100-03"}},
		// Issue 11: the canary at target but not labelled is selected by SUC.
		{name: "MultipleCanaries: the at-target canary without the hash label counts", p: plan("wave-unlabelled", "v100-r580", "gpu-v100-01", "gpu-v100-02", "gpu-v100-03"), want: []gate.Code{gate.CodeMultipleCanaries}},
		// Issue 9: RKE2 Plans are recognised on every spelling and mirror.
		{name: "RKE2 rules: index.docker.io image", p: plan("rke2-index", "v100-r580", "gpu-v100-01"), mod: rke2Image("index.docker.io/rancher/rke2-upgrade"), want: rke2Codes},
		{name: "RKE2 rules: registry-1.docker.io image", p: plan("rke2-registry1", "v100-r580", "gpu-v100-01"), mod: rke2Image("registry-1.docker.io/rancher/rke2-upgrade"), want: rke2Codes},
		{name: "RKE2 rules: mirror image", p: plan("rke2-mirror", "v100-r580", "gpu-v100-01"), mod: rke2Image("mirror.corp.example:5000/rancher/rke2-upgrade"), want: rke2Codes},
		{name: "RKE2 rules: an RKE2 version whatever the image", p: plan("rke2-custom", "v100-r580", "gpu-v100-01"), mod: rke2Image("registry.example.com/platform/gpu-node-upgrade"), want: rke2Codes},
		{name: "ImageInvalid", p: plan("bad-image", "v100-r580", "gpu-v100-01"), mod: func(p *upgradev1.Plan) { p.Spec.Upgrade.Image = "rancher/RKE2-upgrade" }, want: []gate.Code{gate.CodeImageInvalid}},
		{name: "a mirrored RKE2 image at the qualified version", p: plan("rke2-mirror-ok", "v100-r580", "gpu-v100-01"), mod: func(p *upgradev1.Plan) { p.Spec.Upgrade.Image = "mirror.corp.example:5000/rancher/rke2-upgrade" }},
		{name: "CanaryNotProven", p: plan("h200-wave", "h200-r580", "gpu-h200-01", "gpu-h200-02"), want: []gate.Code{gate.CodeCanaryNotProven}},
		{name: "CrossFailureDomain", p: plan("two-zones", "v100-r580", "gpu-v100-01", "gpu-v100-04"), want: []gate.Code{gate.CodeCrossFailureDomain}},
		{name: "GPUHolders", p: plan("holder", "v100-r580", "gpu-v100-holder"), want: []gate.Code{gate.CodeGPUHolders}},
		{name: "VersionInvalid", p: plan("bad-version", "v100-r580", "gpu-v100-01"), mod: func(p *upgradev1.Plan) { p.Spec.Version = "v1.36" }, want: []gate.Code{gate.CodeVersionInvalid, gate.CodeTargetNotQualified}},
		{name: "driver Plan with a custom image", p: plan("driver-plan", "v100-r580", "gpu-v100-01"), mod: driverPlan},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			user := tc.user
			if user == "" {
				user = "alice"
			}
			c, _ := as(t, user)
			tc.p.Annotations[gate.AnnotationRequestedBy] = user
			if tc.mod != nil {
				tc.mod(tc.p)
			}
			for _, n := range tc.applied {
				hash, ok := gate.PredictHash(tc.p)
				require.True(t, ok)
				// SUC's own done label, written as SUC (docs/ownership.md).
				require.NoError(t, patchNode(sucServiceAccount(t), n, `{"metadata":{"labels":{"`+upgradev1.LabelPlanName(tc.p.Name)+`":"`+hash+`"}}}`))
			}
			err := c.Create(ctx, tc.p)
			if len(tc.want) == 0 {
				require.NoError(t, err)
				removePlan(t, tc.p)
				return
			}
			requireDenied(t, err, tc.want...)
			var stored upgradev1.Plan
			assert.True(t, apierrors.IsNotFound(env.Admin.Get(ctx, client.ObjectKeyFromObject(tc.p), &stored)), "a denied Plan must not be stored")
		})
	}
}

// requireDenied checks the API error carries exactly the codes, by name.
func requireDenied(t *testing.T, err error, codes ...gate.Code) {
	t.Helper()
	require.Error(t, err)
	msg := err.Error()
	assert.Contains(t, msg, "denied the request")
	assert.ElementsMatch(t, codes, codesIn(msg), msg)
}

// codesIn are the table's codes a denial names, each once.
func codesIn(msg string) []gate.Code {
	var seen []gate.Code
	for _, c := range allCodes {
		if strings.Contains(msg, "["+string(c)+"]") {
			seen = append(seen, c)
		}
	}
	return seen
}

// allCodes is every code of the rule table, once each: a code added to the
// table is parsed from denials without another list to keep (one was
// missed: RolloutHalted).
var allCodes = func() []gate.Code {
	var out []gate.Code
	for _, r := range gate.Rules() {
		for _, c := range r.Codes {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}()

func TestVersionEditInFlight(t *testing.T) {
	ctx := context.Background()
	c, _ := as(t, "alice")
	suc := sucStatusClient(t)
	p := plan("in-flight", "v100-r580", "gpu-v100-01")
	require.NoError(t, c.Create(ctx, p))
	defer removePlan(t, p)
	// SUC writes status.applying (played by its ServiceAccount here; only
	// SUC may change it, TestPlanStatusGuard).
	p.Status.Applying = []string{"gpu-v100-01"}
	require.NoError(t, suc.Status().Update(ctx, p))
	p.Spec.Version = "v1.36.1+rke2r2"
	requireDenied(t, c.Update(ctx, p), gate.CodeVersionEditInFlight, gate.CodeTargetNotQualified)

	require.NoError(t, env.Admin.Get(ctx, client.ObjectKeyFromObject(p), p))
	p.Status.Applying = nil
	require.NoError(t, suc.Status().Update(ctx, p))
	p.Spec.Cordon = true
	p.Labels = map[string]string{"note": "nothing-applying"}
	require.NoError(t, c.Update(ctx, p))
}

func TestDryRunGetsTheSameDecision(t *testing.T) {
	ctx := context.Background()
	c, _ := as(t, "alice")
	bad := plan("dry-bad", "v100-r580", "gpu-v100-01")
	bad.Spec.Concurrency = 4
	requireDenied(t, c.Create(ctx, bad, client.DryRunAll), gate.CodeConcurrencyNotSerial)
	good := plan("dry-good", "v100-r580", "gpu-v100-01")
	require.NoError(t, c.Create(ctx, good, client.DryRunAll))
	assert.True(t, apierrors.IsNotFound(env.Admin.Get(ctx, client.ObjectKeyFromObject(good), &upgradev1.Plan{})), "dry run stores nothing")
}

func TestWarningsReachTheClient(t *testing.T) {
	ctx := context.Background()
	c, w := as(t, "alice")
	p := plan("expires-soon", "v100-expires", "gpu-v100-01")
	require.NoError(t, c.Create(ctx, p))
	defer removePlan(t, p)
	assert.Contains(t, strings.Join(w.Take(), "\n"), "record v100-expires expires at")

	c2, w2 := as(t, "alice")
	noSel := plan("no-selector", "v100-r580")
	noSel.Spec.NodeSelector = nil
	require.NoError(t, c2.Create(ctx, noSel))
	defer env.Admin.Delete(ctx, noSel)
	assert.Contains(t, strings.Join(w2.Take(), "\n"), "nodeSelector is absent")
}

func TestAuditLogHoldsDecisions(t *testing.T) {
	ctx := context.Background()
	c, _ := as(t, "alice")
	denied := plan("audit-denied", "v100-r580", "gpu-v100-01")
	denied.Spec.Concurrency = 2
	require.Error(t, c.Create(ctx, denied))
	allowed := plan("audit-allowed", "v100-r580", "gpu-v100-01")
	require.NoError(t, c.Create(ctx, allowed))
	defer env.Admin.Delete(ctx, allowed)

	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for name, want := range map[string]map[string]string{
		"audit-denied":  {"decision": "deny", "reasons": "ConcurrencyNotSerial", "nodes": "gpu-v100-01", "record": "v100-r580-canary-1@9f2c4e1a7b3d5c6e8f0a1b2c3d4e5f60718293a4"},
		"audit-allowed": {"decision": "allow", "nodes": "gpu-v100-01", "record": "v100-r580-canary-1@9f2c4e1a7b3d5c6e8f0a1b2c3d4e5f60718293a4"},
	} {
		ev, err := env.CP.WaitAuditEvent(wctx, func(e controlplane.AuditEvent) bool {
			return e.ObjectRef != nil && e.ObjectRef.Name == name && e.Verb == "create" && e.Stage == "ResponseComplete"
		})
		require.NoError(t, err, name)
		assert.Equal(t, "alice", ev.Username())
		for k, v := range want {
			assert.Equal(t, v, ev.Annotations["plans.gpu-upgrade-gate.io/"+k], "%s: %s", name, k)
		}
		if want["decision"] == "allow" {
			_, has := ev.Annotations["plans.gpu-upgrade-gate.io/reasons"]
			assert.False(t, has)
		}
	}
}
