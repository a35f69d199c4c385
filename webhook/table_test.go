package webhook

import (
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// TestWebhookTableRows: every row of the webhook table is complete and is
// what the server serves at its path; the chart's side is test/chart's
// TestWebhookTable and TestWebhooksTemplateIsGenerated, the contract's codes
// TestCodeDocsAreGenerated. A new review path is a row, its decide function and
// its contract.
func TestWebhookTableRows(t *testing.T) {
	s := &Server{Log: logr.Discard()}
	hs := s.handlers()
	require.Len(t, hs, len(Webhooks), "two rows share a path")
	names := map[string]bool{}
	for i := range Webhooks {
		w := &Webhooks[i]
		t.Run(w.Name, func(t *testing.T) {
			assert.False(t, names[w.Name], "name used twice")
			names[w.Name] = true
			assert.True(t, strings.HasSuffix(w.Name, ".gpu-upgrade-gate.io"), "name")
			assert.True(t, strings.HasPrefix(w.Path, "/validate/"), "path")
			assert.Same(t, w, hs[w.Path].Webhook, "the handler at %s serves this row", w.Path)
			assert.NotNil(t, w.decide, "decide")
			assert.NotEmpty(t, w.Metric, "metric label")
			assert.NotEmpty(t, w.Operations, "operations")
			assert.NotEmpty(t, w.Scope, "scope")
			assert.NotEmpty(t, w.FailurePolicy, "failure policy")
			assert.NotEmpty(t, w.Why, "the chart's comment")
			require.NotEmpty(t, w.Resources, "resources")
			for _, r := range w.Resources {
				assert.NotEmpty(t, r.Kind.Kind, "%s holds no kind", r.Resource)
				assert.Subset(t, w.Operations, w.OperationsOf(r), "%s narrows the row's operations", r.Resource)
			}
			_, err := os.Stat(w.Contract)
			assert.NoError(t, err, "contract")
		})
	}
}

// TestHandlerChecksTheRow: a handler takes exactly the resources,
// subresources and operations its row lists, the ones the chart sends it,
// and refuses a crafted review of anything else.
func TestHandlerChecksTheRow(t *testing.T) {
	s := &Server{Log: logr.Discard()}
	obj := runtime.RawExtension{Raw: []byte(`{}`)}
	cases := []struct {
		name, path      string
		group, res, sub string
		kind            string
		op              admissionv1.Operation
		wantErr         string
	}{
		{name: "SUC's completion write through nodes/status", path: PathCompletions, res: "nodes", sub: "status", kind: "Node", op: admissionv1.Update},
		{name: "a Node through its scale subresource", path: PathCompletions, res: "nodes", sub: "scale", kind: "Node", op: admissionv1.Update, wantErr: `subresource "scale"`},
		{name: "plans/status at the Plan status path", path: PathPlanStatus, group: "upgrade.cattle.io", res: "plans", sub: "status", kind: "Plan", op: admissionv1.Update},
		{name: "a plain Plan write at the Plan status path", path: PathPlanStatus, group: "upgrade.cattle.io", res: "plans", kind: "Plan", op: admissionv1.Update, wantErr: `subresource ""`},
		{name: "an InstallPlan approval", path: PathOperator, group: "operators.coreos.com", res: "installplans", kind: "InstallPlan", op: admissionv1.Update},
		{name: "an InstallPlan created (approved at creation is an approval)", path: PathOperator, group: "operators.coreos.com", res: "installplans", kind: "InstallPlan", op: admissionv1.Create},
		{name: "a Subscription created", path: PathOperator, group: "operators.coreos.com", res: "subscriptions", kind: "Subscription", op: admissionv1.Create},
		{name: "an InstallPlan deleted", path: PathOperator, group: "operators.coreos.com", res: "installplans", kind: "InstallPlan", op: admissionv1.Delete, wantErr: `operation "DELETE"`},
		{name: "a Subscription sent as an InstallPlan", path: PathOperator, group: "operators.coreos.com", res: "subscriptions", kind: "InstallPlan", op: admissionv1.Update, wantErr: "holds kind"},
		{name: "the operator Deployment created", path: PathOperator, group: "apps", res: "deployments", kind: "Deployment", op: admissionv1.Create},
		{name: "a DRA kubelet-plugin DaemonSet update", path: PathDRAPlugins, group: "apps", res: "daemonsets", kind: "DaemonSet", op: admissionv1.Update},
		{name: "a DRA kubelet-plugin DaemonSet deleted (the driver unloaded)", path: PathDRAPlugins, group: "apps", res: "daemonsets", kind: "DaemonSet", op: admissionv1.Delete},
		{name: "a DaemonSet's status at the DRA plugin path", path: PathDRAPlugins, group: "apps", res: "daemonsets", sub: "status", kind: "DaemonSet", op: admissionv1.Update, wantErr: `subresource "status"`},
		{name: "a DRA driver's namespace deleted", path: PathNamespaces, res: "namespaces", kind: "Namespace", op: admissionv1.Delete},
		{name: "a namespace updated at the DRA namespace path", path: PathNamespaces, res: "namespaces", kind: "Namespace", op: admissionv1.Update, wantErr: `operation "UPDATE"`},
		{name: "the validator DaemonSet created", path: PathValidator, group: "apps", res: "daemonsets", kind: "DaemonSet", op: admissionv1.Create},
		{name: "the validator DaemonSet deleted", path: PathValidator, group: "apps", res: "daemonsets", kind: "DaemonSet", op: admissionv1.Delete, wantErr: `operation "DELETE"`},
		{name: "a DaemonSet sent to the driver path", path: PathDriver, group: "apps", res: "daemonsets", kind: "DaemonSet", op: admissionv1.Update, wantErr: "daemonsets"},
		{name: "a Pod sent to the Node path", path: PathNodes, res: "nodes", kind: "Pod", op: admissionv1.Update, wantErr: "holds kind Node"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: tc.op, SubResource: tc.sub,
				Kind:     metav1.GroupVersionKind{Group: tc.group, Kind: tc.kind},
				Resource: metav1.GroupVersionResource{Group: tc.group, Resource: tc.res}, Object: obj, OldObject: obj}}
			err := s.handlerAt(tc.path).check(req)
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}
