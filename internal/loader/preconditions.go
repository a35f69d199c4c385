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
	return precondition.ReadCELs(cfg.Preconditions, func(i int) (*precondition.Program, []any, error) {
		p := cfg.Preconditions[i]
		prog, err := precondition.Compile(p.CEL.Expression)
		if err != nil {
			return nil, nil, err
		}
		if l.Dynamic == nil {
			return prog, nil, errNoDynamic
		}
		list, err := l.Dynamic.Resource(p.CEL.GVR()).Namespace(p.CEL.Namespace).List(ctx, metav1.ListOptions{LabelSelector: p.CEL.LabelSelector})
		if err != nil {
			return prog, nil, err
		}
		objs := make([]any, 0, len(list.Items))
		for _, it := range list.Items {
			it.SetManagedFields(nil)
			objs = append(objs, it.Object)
		}
		return prog, objs, nil
	})
}

var errNoDynamic = errors.New("no dynamic client to list it with")
