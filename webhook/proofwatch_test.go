package webhook

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/fleetgen"
)

// TestProofFactsFollowTheInformer: with WatchProof the proof facts are
// built once and reused while the informers report no event, and a
// validator Pod's arrival, change and deletion reach the next reviews.
func TestProofFactsFollowTheInformer(t *testing.T) {
	f := fleetgen.Generate(fleetgen.Options{Seed: 1, Nodes: 20, Now: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)})
	fw := watch.NewFake()
	inf := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
		},
		WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				// A streaming list (client-go's WatchListClient): no
				// initial objects, then the bookmark that ends them.
				go fw.Action(watch.Bookmark, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1",
					Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
			}
			return fw, nil
		},
	}, &corev1.Pod{}, 0, toolscache.Indexers{})
	c := newFleetCache(f)
	c.pods = inf
	facts := &Facts{Config: f.Config, Cache: c}
	require.NoError(t, facts.WatchProof(inf))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.Run(ctx.Done())
	require.True(t, toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced))

	validators := func() []*corev1.Pod {
		pf, err := facts.proofFacts(ctx)
		require.NoError(t, err)
		return pf.Validators
	}
	v0 := validators()
	require.Empty(t, v0)
	require.NotNil(t, facts.proofSnap.Load())
	snap := facts.proofSnap.Load()
	validators()
	assert.Same(t, snap, facts.proofSnap.Load(), "no event: the facts are reused")

	sel, err := labels.ConvertSelectorToLabelsMap(f.Config.Proof.Validator.Selector)
	require.NoError(t, err)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "validator", Namespace: f.Config.Proof.Validator.Namespace, Labels: sel, ResourceVersion: "2", OwnerReferences: []metav1.OwnerReference{fleetgen.ValidatorOwner}},
		Spec: *f.ValidatorDaemonSet.Spec.Template.Spec.DeepCopy()} // as the DaemonSet controller writes it: its template's containers
	pod.Spec.NodeName = f.Nodes[0].Name
	fw.Add(pod)
	require.Eventually(t, func() bool { v := validators(); return len(v) == 1 && v[0].Spec.NodeName == f.Nodes[0].Name }, 5*time.Second, 10*time.Millisecond, "an added validator is seen")
	moved := pod.DeepCopy()
	moved.Spec.NodeName, moved.ResourceVersion = f.Nodes[1].Name, "3"
	fw.Modify(moved)
	require.Eventually(t, func() bool { v := validators(); return len(v) == 1 && v[0].Spec.NodeName == f.Nodes[1].Name }, 5*time.Second, 10*time.Millisecond, "a changed validator is seen")
	fw.Delete(moved)
	require.Eventually(t, func() bool { return len(validators()) == 0 }, 5*time.Second, 10*time.Millisecond, "a deleted validator is gone")
}
