package fleetgen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Apply creates the fleet in a cluster as its agents would have: namespaces,
// the GPU Operator workloads, records, the empty halt record, Pods, Nodes (created, then their
// status written, as a kubelet does) and Plans. Nodes are created by workers
// in parallel; give c a high QPS. Objects that exist already are an error,
// except namespaces.
func (f *Fleet) Apply(ctx context.Context, c client.Client, workers int) error {
	if workers < 1 {
		workers = 1
	}
	for _, ns := range []string{NamespaceSUC, NamespaceGate, NamespaceOperator, NamespaceML} {
		if err := client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})); err != nil {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	// The halt record, empty, as the chart creates it (without it every
	// forward move fails closed); testenv's chart install may have made it.
	halts := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: NamespaceGate, Name: f.Config.Halts.ConfigMap}}
	if err := client.IgnoreAlreadyExists(c.Create(ctx, halts)); err != nil {
		return fmt.Errorf("the halt record: %w", err)
	}
	// The validator DaemonSet first: its Pods count only with the UID the
	// API server gives it (testenv's Base may have created it already).
	validators := f.ValidatorDaemonSet.DeepCopy()
	validators.UID = ""
	err := c.Create(ctx, validators)
	if apierrors.IsAlreadyExists(err) {
		err = c.Get(ctx, client.ObjectKeyFromObject(validators), validators)
	}
	if err != nil {
		return fmt.Errorf("the validator DaemonSet: %w", err)
	}
	var objs []client.Object
	objs = append(objs, f.GPUOperator.DeepCopy(), f.DCGMExporter.DeepCopy())
	for _, cm := range f.RecordConfigMaps {
		objs = append(objs, cm.DeepCopy())
	}
	for _, p := range f.Pods {
		objs = append(objs, p.DeepCopy())
	}
	if err := parallel(ctx, workers, len(objs), func(i int) error {
		return c.Create(ctx, objs[i])
	}); err != nil {
		return err
	}
	if err := parallel(ctx, workers, len(f.Nodes), func(i int) error {
		return CreateNode(ctx, c, f.Nodes[i])
	}); err != nil {
		return err
	}
	// The canaries' proof Pods, with the status their kubelet would write.
	if err := parallel(ctx, workers, len(f.ProofPods), func(i int) error {
		obj := f.ProofPods[i].DeepCopy()
		for j := range obj.OwnerReferences {
			if obj.OwnerReferences[j].UID == ValidatorOwner.UID {
				obj.OwnerReferences[j].UID = validators.UID
			}
		}
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("create Pod %s/%s: %w", obj.Namespace, obj.Name, err)
		}
		obj.Status = *f.ProofPods[i].Status.DeepCopy()
		return c.Status().Update(ctx, obj)
	}); err != nil {
		return err
	}
	// Plans, with the status SUC wrote when it finished them.
	return parallel(ctx, workers, len(f.Plans), func(i int) error {
		obj := f.Plans[i].DeepCopy()
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("create Plan %s: %w", obj.Name, err)
		}
		if f.Plans[i].Status.LatestHash == "" {
			return nil
		}
		obj.Status = *f.Plans[i].Status.DeepCopy()
		return c.Status().Update(ctx, obj)
	})
}

// CreateNode creates a copy of n and writes its status, as a kubelet
// registering would.
func CreateNode(ctx context.Context, c client.Client, n *corev1.Node) error {
	obj := n.DeepCopy()
	if err := c.Create(ctx, obj); err != nil {
		return fmt.Errorf("create node %s: %w", n.Name, err)
	}
	obj.Status = *n.Status.DeepCopy()
	if err := c.Status().Update(ctx, obj); err != nil {
		return fmt.Errorf("node %s status: %w", n.Name, err)
	}
	return nil
}

// parallel runs do(0..n-1) on workers goroutines and returns the first
// error (the rest stop early).
func parallel(ctx context.Context, workers, n int, do func(int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := do(i); err != nil {
					errs[w] = err
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}
