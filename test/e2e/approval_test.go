//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// annotateRecord patches a record's annotations as `kubectl annotate --overwrite`
// does (a JSON merge patch; "" removes the key).
func annotateRecord(ctx context.Context, c client.Client, name string, kv ...string) error {
	ann := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "" {
			ann[kv[i]] = nil
			continue
		}
		ann[kv[i]] = kv[i+1]
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	return c.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: env.Config.Namespace, Name: name}}, client.RawPatch(types.MergePatchType, patch))
}

// TestApprovalAttested: through the real API server, who wrote and who
// approved a record are the usernames the API server authenticated, not
// text: the record webhook refuses every approval but the named approver's
// own, of the stored data, by someone other than its author; a Plan is
// admitted only under an attested approval, to its author but not its
// approver (two-person rule), and to neither under three-person separation.
func TestApprovalAttested(t *testing.T) {
	ctx := context.Background()
	const name = "v100-attested"
	defer func() {
		_ = env.Admin.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: env.Config.Namespace, Name: name}})
	}()
	alice, _ := as(t, "alice")
	bob, _ := as(t, "bob")
	carol, carolWarnings := as(t, testenv.RecordAuthor)
	cm, err := env.RecordConfigMap(name, testenv.Record("v100-attested-1", now.Add(-48*time.Hour)))
	require.NoError(t, err)
	sha := qualification.DataSHA256(cm.Data[qualification.ConfigMapKey])

	// alice writes a record "approved by bob" under her own name.
	forged := cm.DeepCopy()
	forged.Annotations[qualification.AnnotationAuthor] = "alice"
	requireDenied(t, carol.Create(ctx, forged, client.DryRunAll), gate.CodeAttestationForged)
	prefilled := cm.DeepCopy()
	prefilled.Annotations[qualification.AnnotationApprovedBy], prefilled.Annotations[qualification.AnnotationApprovedSHA256] = "bob", sha
	requireDenied(t, carol.Create(ctx, prefilled, client.DryRunAll), gate.CodeAttestationForged)

	require.NoError(t, carol.Create(ctx, cm.DeepCopy()), "carol writes the record as its author")
	// by is the writer, named by the Plan's requested-by.
	notApproved := func(c client.Client, by string) error {
		p := plan("attested-canary", name, "gpu-v100-01")
		p.Annotations[gate.AnnotationRequestedBy] = by
		return c.Create(ctx, p, client.DryRunAll)
	}
	require.Eventually(t, func() bool {
		err := notApproved(alice, "alice")
		return err != nil && strings.Contains(err.Error(), string(gate.CodeRecordNotApproved))
	},
		10*time.Second, 100*time.Millisecond, "the caches see the record")
	err = notApproved(alice, "alice")
	requireDenied(t, err, gate.CodeRecordNotApproved)
	assert.Contains(t, err.Error(), "kubectl annotate configmap -n "+env.Config.Namespace+" "+name+" gpu-upgrade-gate.io/approved-by=bob gpu-upgrade-gate.io/approved-sha256="+sha+" --overwrite")

	refused := []struct {
		name string
		c    client.Client
		kv   []string
	}{
		{"the author approves", carol, []string{qualification.AnnotationApprovedBy, testenv.RecordAuthor, qualification.AnnotationApprovedSHA256, sha}},
		{"alice approves as bob", alice, []string{qualification.AnnotationApprovedBy, "bob", qualification.AnnotationApprovedSHA256, sha}},
		{"alice approves as alice@example.com", alice, []string{qualification.AnnotationApprovedBy, "alice@example.com", qualification.AnnotationApprovedSHA256, sha}},
		{"alice approves with a Cyrillic а", alice, []string{qualification.AnnotationApprovedBy, "\u0430lice", qualification.AnnotationApprovedSHA256, sha}},
		{"alice approves as Alice", alice, []string{qualification.AnnotationApprovedBy, "Alice", qualification.AnnotationApprovedSHA256, sha}},
		{"bob approves other data", bob, []string{qualification.AnnotationApprovedBy, "bob", qualification.AnnotationApprovedSHA256, qualification.DataSHA256("other")}},
		{"alice takes authorship alone", alice, []string{qualification.AnnotationAuthor, "dave"}},
	}
	for _, tc := range refused {
		t.Run("AttestationForged: "+tc.name, func(t *testing.T) {
			requireDenied(t, annotateRecord(ctx, tc.c, name, tc.kv...), gate.CodeAttestationForged)
		})
	}
	t.Run("AttestationForged: alice changes the data under carol's name", func(t *testing.T) {
		var stored corev1.ConfigMap
		require.NoError(t, alice.Get(ctx, client.ObjectKeyFromObject(cm), &stored))
		stored.Data[qualification.ConfigMapKey] = strings.Replace(stored.Data[qualification.ConfigMapKey], "change-record-42", "change-record-43", 1)
		requireDenied(t, alice.Update(ctx, &stored), gate.CodeAttestationForged)
	})

	require.NoError(t, testenv.Approve(ctx, bob, cm, "bob"), "bob approves carol's data")
	require.Eventually(t, func() bool { return notApproved(alice, "alice") == nil }, 10*time.Second, 100*time.Millisecond, "alice applies under bob's approval")
	// Two-person rule (the default): the author applies what bob
	// approved; bob may not apply what he approved.
	require.NoError(t, notApproved(carol, testenv.RecordAuthor), "the author applies under bob's approval")
	requireDenied(t, notApproved(bob, "bob"), gate.CodeSelfApproved)
	t.Run("three-person", func(t *testing.T) {
		defer restartWith(t, func(c *gate.Config) { c.Separation = gate.SeparationThreePerson })()
		requireDenied(t, notApproved(carol, testenv.RecordAuthor), gate.CodeSelfApproved)
		requireDenied(t, notApproved(bob, "bob"), gate.CodeSelfApproved)
		require.NoError(t, notApproved(alice, "alice"), "a third person applies")
	})

	// A change of the data withdraws the approval.
	var stored corev1.ConfigMap
	require.NoError(t, carol.Get(ctx, client.ObjectKeyFromObject(cm), &stored))
	stored.Data[qualification.ConfigMapKey] = strings.Replace(stored.Data[qualification.ConfigMapKey], "change-record-42", "change-record-43", 1)
	carolWarnings.Take()
	require.NoError(t, carol.Update(ctx, &stored), "the author edits the data")
	assert.Contains(t, strings.Join(carolWarnings.Take(), "\n"), `withdraws the approval by "bob"`)
	require.Eventually(t, func() bool { err := notApproved(alice, "alice"); return err != nil }, 10*time.Second, 100*time.Millisecond)
	requireDenied(t, notApproved(alice, "alice"), gate.CodeRecordNotApproved)

	// Label removed, data and approval written unwatched, label re-added:
	// judged as a create, so the pre-filled approval is refused.
	require.NoError(t, annotateLabel(ctx, alice, name, nil), "removing the label makes it no record")
	require.NoError(t, alice.Get(ctx, client.ObjectKeyFromObject(cm), &stored))
	stored.Data = cm.Data
	stored.Annotations[qualification.AnnotationApprovedSHA256] = sha
	require.NoError(t, alice.Update(ctx, &stored), "an unlabelled ConfigMap is not the gate's business")
	requireDenied(t, annotateLabel(ctx, alice, name, ptrTo("true")), gate.CodeAttestationForged)

	// DELETE and CREATE with the approval pre-filled: refused the same.
	require.NoError(t, env.Admin.Delete(ctx, &stored))
	requireDenied(t, carol.Create(ctx, prefilled.DeepCopy()), gate.CodeAttestationForged)
}

// annotateLabel sets (or with nil removes) the record label.
func annotateLabel(ctx context.Context, c client.Client, name string, value *string) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{qualification.ConfigMapLabel: value}}})
	return c.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: env.Config.Namespace, Name: name}}, client.RawPatch(types.MergePatchType, patch))
}

// TestRecordWrittenBeforeAttestation: a record with no attestation
// annotations still loads and denies with RecordNotApproved, naming the
// commands that approve it.
func TestRecordWrittenBeforeAttestation(t *testing.T) {
	alice, _ := as(t, "alice")
	err := alice.Create(context.Background(), plan("legacy-canary", "v100-legacy", "gpu-v100-01"), client.DryRunAll)
	requireDenied(t, err, gate.CodeRecordNotApproved)
	assert.Contains(t, err.Error(), "gpu-upgrade-gate.io/author=<their username>")
	assert.Contains(t, err.Error(), "gpu-upgrade-gate.io/approved-by=bob")
}
