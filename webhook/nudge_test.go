package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

const nudgeSelf = "system:serviceaccount:gpu-upgrade-gate:gpu-upgrade-gate"

func nudgeTestPlan(nudge string) *upgradev1.Plan {
	p := &upgradev1.Plan{TypeMeta: metav1.TypeMeta{APIVersion: "upgrade.cattle.io/v1", Kind: "Plan"},
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-v100", Namespace: "system-upgrade"},
		Spec:       upgradev1.PlanSpec{Concurrency: 1, Version: "v1.36.1+rke2r1"}}
	if nudge != "" {
		p.Annotations = map[string]string{gate.AnnotationNudge: nudge}
	}
	p.Status.LatestHash = "9e1b5f0c2d7a8b3e4f"
	return p
}

// TestPlanNudgeReview: through the plans handler, the gate's own nudge is
// admitted without the Plan's rules (no facts are read: the Server has
// none), and the same annotation from anyone else, or more than it from
// the gate, is refused (NudgeForged).
func TestPlanNudgeReview(t *testing.T) {
	s := &Server{Config: gate.DefaultConfig(), Log: logr.Discard(), Self: nudgeSelf}
	h := s.handlerAt(PathPlans)
	self := authenticationv1.UserInfo{Username: nudgeSelf, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:gpu-upgrade-gate"}}
	alice := authenticationv1.UserInfo{Username: "alice", Groups: []string{"platform-admins"}}
	respec := nudgeTestPlan("gpu-v100-02/9e1b5f0c2d7a")
	respec.Spec.Concurrency = 2
	raw := func(o runtime.Object) runtime.RawExtension {
		b, err := json.Marshal(o)
		require.NoError(t, err)
		return runtime.RawExtension{Raw: b}
	}
	cases := []struct {
		name      string
		user      authenticationv1.UserInfo
		old, obj  *upgradev1.Plan
		inMessage string // "" allowed
	}{
		{name: "the gate nudges", user: self, old: nudgeTestPlan("gpu-v100-01/9e1b5f0c2d7a"), obj: nudgeTestPlan("gpu-v100-02/9e1b5f0c2d7a")},
		{name: "a person sets the nudge", user: alice, old: nudgeTestPlan(""), obj: nudgeTestPlan("gpu-v100-01/9e1b5f0c2d7a"),
			inMessage: `[NudgeForged] "alice" sets it to "gpu-v100-01/9e1b5f0c2d7a"`},
		{name: "the gate writes the spec too", user: self, old: nudgeTestPlan("gpu-v100-01/9e1b5f0c2d7a"), obj: respec,
			inMessage: `[NudgeForged] the gate's own ServiceAccount "` + nudgeSelf + `" writes spec`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Update, UserInfo: tc.user,
				Kind:      metav1.GroupVersionKind{Group: "upgrade.cattle.io", Version: "v1", Kind: "Plan"},
				Resource:  metav1.GroupVersionResource{Group: "upgrade.cattle.io", Version: "v1", Resource: "plans"},
				Namespace: "system-upgrade", Name: "gpu-v100", Object: raw(tc.obj), OldObject: raw(tc.old)}}
			resp := h.Handle(context.Background(), req)
			if tc.inMessage == "" {
				assert.True(t, resp.Allowed, resp.Result)
				return
			}
			assert.False(t, resp.Allowed)
			require.NotNil(t, resp.Result)
			assert.Equal(t, int32(http.StatusForbidden), resp.Result.Code)
			assert.Contains(t, resp.Result.Message, tc.inMessage)
		})
	}
}

// TestPlanNudger: the leader's nudger, fed Node updates by an informer,
// annotates the Plan when SUC's completion of a node lands, and writes
// nothing for a Node update that completes nothing.
func TestPlanNudger(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, upgradev1.AddToScheme(scheme))
	var patches []string
	var mu sync.Mutex
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(nudgeTestPlan("")).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			data, err := patch.Data(obj)
			mu.Lock()
			patches = append(patches, string(data))
			mu.Unlock()
			if err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		}}).Build()
	nodes := &lockedInformer{}
	n := &planNudger{nodes: nodes, plans: c, writer: c, cfg: gate.DefaultConfig(), log: logr.Discard()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	node := func(labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-v100-01", Labels: labels}}
	}
	nudge := func() string {
		var p upgradev1.Plan
		require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "system-upgrade", Name: "gpu-v100"}, &p))
		return p.Annotations[gate.AnnotationNudge]
	}
	key := upgradev1.LabelPlanName("gpu-v100")

	// Until the nudger's handler is registered (Start runs in its own
	// goroutine), updates reach nobody: send them again until the nudge
	// shows; a Plan already nudged for the node is not patched again.
	assert.Eventually(t, func() bool {
		// Not a completion: another label, then the opt-out.
		nodes.Update(node(nil), node(map[string]string{"team": "ml"}))
		nodes.Update(node(nil), node(map[string]string{key: "disabled"}))
		// SUC's completion lands.
		nodes.Update(node(map[string]string{key: "disabled"}), node(map[string]string{key: "9e1b5f0c2d7a8b3e4f"}))
		return nudge() == "gpu-v100-01/9e1b5f0c2d7a"
	}, 5*time.Second, 20*time.Millisecond, "the Plan is nudged")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{`{"metadata":{"annotations":{"gpu-upgrade-gate.cattle.io/nudge":"gpu-v100-01/9e1b5f0c2d7a"}}}`}, patches,
		"one merge patch of the one annotation, for the completion only")
}

// lockedInformer is controllertest's FakeInformer, whose handler list is
// not guarded: the nudger registers its handler from its own goroutine
// while the test already sends updates (go test -race found it).
type lockedInformer struct {
	controllertest.FakeInformer
	mu sync.Mutex
}

func (i *lockedInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.FakeInformer.AddEventHandler(h)
}

func (i *lockedInformer) Update(old, cur metav1.Object) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.FakeInformer.Update(old, cur)
}
