package loader

import (
	"context"
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/precondition"
)

// Preconditions reads the declared CEL preconditions live, once: each
// resource listed (namespace and label selector as configured) and the
// expressions evaluated within one runtime budget, as the webhook does
// over its watches. Alerts preconditions are read by the webhook's
// pollers only (their source is usually reachable in-cluster alone):
// their reading here is nil, and inventory says so.
func (l *Live) Preconditions(ctx context.Context, cfg *gate.Config) []*precondition.Reading {
	out := make([]*precondition.Reading, len(cfg.Preconditions))
	budget := int64(precondition.RuntimeBudget)
	for i, p := range cfg.Preconditions {
		if p.Kind != precondition.KindCEL || p.CEL == nil {
			continue
		}
		prog, err := precondition.Compile(p.CEL.Expression)
		var objs []any
		if err == nil && l.Dynamic == nil {
			err = errNoDynamic
		}
		if err == nil {
			list, lerr := l.Dynamic.Resource(p.CEL.GVR()).Namespace(p.CEL.Namespace).List(ctx, metav1.ListOptions{LabelSelector: p.CEL.LabelSelector})
			if err = lerr; err == nil {
				for _, it := range list.Items {
					it.SetManagedFields(nil)
					objs = append(objs, it.Object)
				}
			}
		}
		var r precondition.Reading
		r, budget = precondition.ReadCEL(p, prog, objs, err, budget)
		out[i] = &r
	}
	return out
}

var errNoDynamic = errors.New("no dynamic client to list it with")
