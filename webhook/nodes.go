package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// decideNode reviews a Node UPDATE (contract: nodes.md). The webhook
// configuration's match conditions already drop kubelet writes, cordons and
// changes that touch neither labels nor an uncordon.
func (s *Server) decideNode(ctx context.Context, req admission.Request) (gate.Decision, error) {
	var n, old corev1.Node
	if err := decodeObject(req.Object.Raw, &n, "Node"); err != nil {
		return gate.Decision{}, fmt.Errorf("object: %w", err)
	}
	if err := decodeObject(req.OldObject.Raw, &old, "Node"); err != nil {
		return gate.Decision{}, fmt.Errorf("oldObject: %w", err)
	}
	if !s.Config.IsGPUNode(&n) && !s.Config.IsGPUNode(&old) {
		return gate.Decision{Allowed: true, Object: "Node " + n.Name}, nil
	}
	cl, err := s.Facts.Cluster(ctx)
	if err != nil {
		return factsUnavailable("Node "+n.Name, err), nil
	}
	r := gate.PrepareNode(s.Config, cl, gate.NodeRequest{Node: &n, OldNode: &old, User: userOf(req), Now: s.now()})
	holders, herr := s.Facts.Holders(ctx, r.HolderNodes())
	return r.Decide(holders, herr), nil
}
