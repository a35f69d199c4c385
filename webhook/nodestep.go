package webhook

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// liveNode reads a Node from the API server, not the cache: a per-node step
// (SUC's Job, the GPU Operator's driver reload) is judged on the node as it
// is now, including a label written milliseconds ago and the capacity the
// cache strips.
func (s *Server) liveNode(ctx context.Context, name string) (*corev1.Node, error) {
	n := &corev1.Node{}
	if err := s.Facts.Live.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		return nil, err
	}
	return n, nil
}
