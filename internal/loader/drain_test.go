package loader

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestReadDrainFactsListsTheNodesAtOnce: each node's listing waits until
// the other's has started, so listings made one after another would time
// out; an error names the first failing node in the given order.
func TestReadDrainFactsListsTheNodesAtOnce(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, policyv1.AddToScheme(scheme))
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "pdb"}}
	r := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pdb).Build()

	t.Run("at once", func(t *testing.T) {
		started := map[string]chan struct{}{"n1": make(chan struct{}), "n2": make(chan struct{})}
		other := map[string]string{"n1": "n2", "n2": "n1"}
		podsOn := func(ctx context.Context, n string) ([]corev1.Pod, error) {
			close(started[n])
			select {
			case <-started[other[n]]:
			case <-time.After(DrainTimeout):
				return nil, errors.New("the other listing did not start while this one was in flight")
			}
			return []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "p-" + n}}}, nil
		}
		got := ReadDrainFacts(context.Background(), r, []string{"n1", "n2"}, podsOn)
		require.NoError(t, got.Err)
		assert.Equal(t, "p-n1", got.Pods["n1"][0].Name)
		assert.Equal(t, "p-n2", got.Pods["n2"][0].Name)
		require.Len(t, got.PDBs, 1)
	})
	t.Run("the first failing node in order is named", func(t *testing.T) {
		podsOn := func(_ context.Context, n string) ([]corev1.Pod, error) {
			if n == "n1" {
				return nil, nil
			}
			return nil, errors.New("boom " + n)
		}
		got := ReadDrainFacts(context.Background(), r, []string{"n1", "n2", "n3"}, podsOn)
		require.Error(t, got.Err)
		assert.Equal(t, "list pods on node n2: boom n2", got.Err.Error())
	})
}
