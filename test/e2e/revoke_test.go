//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// TestRecordEditRevokes: editing a record into a withdrawn state goes
// through the record webhook (it revokes), and a Plan naming the record is
// denied at its next review; a new record in that state is still refused.
func TestRecordEditRevokes(t *testing.T) {
	ctx := context.Background()
	const name = "v100-revocable"
	require.NoError(t, env.CreateRecords(ctx, map[string]*qualification.Record{name: testenv.Record("v100-revocable-1", now.Add(-48*time.Hour))}))
	defer func() {
		_ = env.Admin.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: env.Config.Namespace, Name: name}})
	}()
	c, w := as(t, "alice")
	p := plan("revoked-record", name, "gpu-v100-01")
	require.NoError(t, c.Create(ctx, p, client.DryRunAll), "the record qualifies the Plan")

	withdrawn, err := env.RecordConfigMap(name, testenv.Record("v100-revocable-1", now.Add(-48*time.Hour), func(r *qualification.Record) { r.State = "withdrawn" }))
	require.NoError(t, err)
	var cm corev1.ConfigMap
	require.NoError(t, env.Admin.Get(ctx, client.ObjectKeyFromObject(withdrawn), &cm))
	cm.Data = withdrawn.Data
	// Whoever changes the data is its attested author.
	cm.Annotations[qualification.AnnotationAuthor] = "alice"
	require.NoError(t, c.Update(ctx, &cm), "withdrawing a record is allowed: it revokes")
	assert.Contains(t, strings.Join(w.Take(), "\n"), "this edit revokes record ConfigMap")

	require.Eventually(t, func() bool {
		err := c.Create(ctx, plan("revoked-record", name, "gpu-v100-01"), client.DryRunAll)
		return err != nil
	}, 10*time.Second, 100*time.Millisecond, "the Plan is denied once the caches see the edit")
	// The edit also withdrew bob's approval, and made alice its author,
	// who may apply what a second person approved (two-person rule): no
	// SelfApproved.
	requireDenied(t, c.Create(ctx, plan("revoked-record", name, "gpu-v100-01"), client.DryRunAll), gate.CodeRecordNotQualified, gate.CodeRecordNotApproved)

	fresh := withdrawn.DeepCopy()
	fresh.Name, fresh.ResourceVersion = "v100-born-withdrawn", ""
	fresh.Annotations = map[string]string{qualification.AnnotationAuthor: "alice"}
	requireDenied(t, c.Create(ctx, fresh), gate.CodeRecordNotQualified)
}
