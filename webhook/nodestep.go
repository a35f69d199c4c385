package webhook

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// liveNode reads a Node from the API server, not the cache: a per-node step
// (SUC's Job) is judged on the node as the API server has it now, with the
// capacity the cache strips, no older than the gate's cached copy (rv, its
// resourceVersion; "" reads it from etcd: Facts.liveGet).
func (s *Server) liveNode(ctx context.Context, name, rv string) (*corev1.Node, error) {
	n := &corev1.Node{}
	if err := s.Facts.liveGet(ctx, client.ObjectKey{Name: name}, n, rv); err != nil {
		return nil, err
	}
	return n, nil
}
