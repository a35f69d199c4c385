package chart

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// namespaceValue is the Helm expression of the one namespace a row's probe
// review names: the first of the namespaces its webhook matches.
var namespaceValue = map[webhook.Namespaces]string{
	webhook.SUCNamespaces:        "(first $root.Values.config.sucNamespaces)",
	webhook.ReleaseNamespace:     "$root.Release.Namespace",
	webhook.GPUOperatorNamespace: "$root.Values.config.gpuOperator.namespace",
	webhook.ValidatorNamespace:   "$root.Values.config.proof.validator.namespace",
	webhook.DriverNamespaces:     "$root.Values.config.gpuOperator.namespace",
	// The release namespace when no DRA driver is configured: the path is
	// served all the same, only the chart sends it nothing.
	webhook.DRADriverNamespaces: "(first (default (list (dict \"namespace\" $root.Release.Namespace)) $root.Values.config.draDrivers)).namespace",
}

// Placeholders the generator writes into a review and turns into printf
// verbs: the probe's uid (also its user and object name) and the namespace.
const (
	uidMark = "\x00uid\x00"
	nsMark  = "\x00namespace\x00"
)

// probeEnv is the environment variable that carries a path's review.
func probeEnv(p string) string {
	return "REVIEW_" + strings.ToUpper(strings.ReplaceAll(path.Base(p), "-", "_"))
}

// probeReview is the minimal AdmissionReview the probe posts to a row's
// path: its first resource (and subresource) with that resource's first
// operation, an object that is only the kind and a name (and, for UPDATE
// and DELETE, the old object), in the first namespace the row matches. The
// probe asks only that the path answer a review for its uid; what the
// answer decides does not matter, so nothing more of the object is needed.
func probeReview(w *webhook.Webhook) (review string, namespaced bool, err error) {
	if len(w.Resources) == 0 {
		return "", false, fmt.Errorf("%s: no resources: nothing to probe it with", w.Name)
	}
	r := w.Resources[0]
	ops := w.OperationsOf(r)
	if len(ops) == 0 {
		return "", false, fmt.Errorf("%s: %s has no operations: nothing to probe it with", w.Name, r.Resource)
	}
	resource, sub, _ := strings.Cut(r.Resource, "/")
	meta := map[string]any{"name": uidMark}
	req := admissionv1.AdmissionRequest{
		UID:         uidMark,
		Kind:        metav1.GroupVersionKind{Group: r.Kind.Group, Version: r.Kind.Version, Kind: r.Kind.Kind},
		Resource:    metav1.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: resource},
		SubResource: sub,
		Name:        uidMark,
		Operation:   ops[0],
		UserInfo:    authenticationv1.UserInfo{Username: uidMark},
	}
	if w.Namespaces != webhook.AnyNamespace {
		if _, ok := namespaceValue[w.Namespaces]; !ok {
			return "", false, fmt.Errorf("%s: namespaces %q: the generator has no Helm value for them", w.Name, w.Namespaces)
		}
		req.Namespace, meta["namespace"], namespaced = nsMark, nsMark, true
	}
	object, err := json.Marshal(map[string]any{"apiVersion": r.Kind.GroupVersion().String(), "kind": r.Kind.Kind, "metadata": meta})
	if err != nil {
		return "", false, err
	}
	if req.Operation != admissionv1.Delete {
		req.Object = runtime.RawExtension{Raw: object}
	}
	if req.Operation != admissionv1.Create {
		req.OldObject = runtime.RawExtension{Raw: object}
	}
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Request:  &req})
	if err != nil {
		return "", false, err
	}
	if strings.Contains(string(b), "`") {
		return "", false, fmt.Errorf("%s: its review holds a backquote, which ends the template's raw string: %s", w.Name, b)
	}
	quoted := func(mark string) string { s, _ := json.Marshal(mark); return string(s) }
	review = strings.NewReplacer("%", "%%", quoted(uidMark), "%[1]q", quoted(nsMark), "%[2]q").Replace(string(b))
	return review, namespaced, nil
}

// probeTemplate is the chart's templates/_probe.tpl as the webhook table
// defines it: for every row, its path, the environment variable that
// carries its review and the review itself; the probe Job
// (templates/hooks/probe.yaml) posts each.
func probeTemplate() (string, error) {
	var b strings.Builder
	b.WriteString(`{{- /*
Generated from the webhook table (webhook/table.go) by
go test ./test/chart -run TestProbeTemplateIsGenerated -update
Do not edit: change webhook/table.go and regenerate. The reviews the probe
Job (templates/hooks/probe.yaml) posts, one a row of the table: a YAML list
of the path, the environment variable that carries the review, and a minimal
AdmissionReview of the row's first resource and operation. Called with a
dict of "root" (the chart's context) and "uid" (the probe's uid).
*/ -}}
{{- define "gug.probeReviews" -}}
{{- $root := .root }}
{{- $uid := .uid }}
`)
	for i := range webhook.Webhooks {
		w := &webhook.Webhooks[i]
		review, namespaced, err := probeReview(w)
		if err != nil {
			return "", err
		}
		args := "$uid"
		if namespaced {
			args += " " + namespaceValue[w.Namespaces]
		}
		fmt.Fprintf(&b, "- path: %s\n  env: %s\n  review: {{ printf `%s` %s | quote }}\n", w.Path, probeEnv(w.Path), review, args)
	}
	b.WriteString("{{- end }}\n")
	return b.String(), nil
}

// TestProbeTemplateIsGenerated: the probe's reviews are the ones the
// webhook table generates, one a row; add a row without regenerating and
// this fails (TestProbeHookScript then posts each rendered review, and the
// chart checks hold every path to a review of its row's resources).
func TestProbeTemplateIsGenerated(t *testing.T) {
	want, err := probeTemplate()
	require.NoError(t, err)
	requireGenerated(t, "_probe.tpl", want, "webhook/table.go", "TestProbeTemplateIsGenerated")
}
