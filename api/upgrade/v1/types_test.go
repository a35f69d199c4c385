package v1_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
)

const sucTestdata = "../../../testdata/suc"

func ptrTo[T any](v T) *T { return &v }

// ---------------------------------------------------------------------------
// Schema coherence: the Go mirror against the CRD's openAPIV3Schema.
// ---------------------------------------------------------------------------

// jsonSchema is the subset of an OpenAPI v3 schema the coherence check needs.
type jsonSchema struct {
	Type                 string                 `json:"type,omitempty"`
	Format               string                 `json:"format,omitempty"`
	Properties           map[string]*jsonSchema `json:"properties,omitempty"`
	Items                *jsonSchema            `json:"items,omitempty"`
	AdditionalProperties *jsonSchema            `json:"additionalProperties,omitempty"`
	Required             []string               `json:"required,omitempty"`
	IntOrString          bool                   `json:"x-kubernetes-int-or-string,omitempty"`
}

type crdFile struct {
	Spec struct {
		Group string `json:"group"`
		Names struct {
			Kind     string `json:"kind"`
			ListKind string `json:"listKind"`
			Plural   string `json:"plural"`
		} `json:"names"`
		Scope    string `json:"scope"`
		Versions []struct {
			Name   string `json:"name"`
			Schema struct {
				OpenAPIV3Schema *jsonSchema `json:"openAPIV3Schema"`
			} `json:"schema"`
			Subresources struct {
				Status *struct{} `json:"status"`
			} `json:"subresources"`
		} `json:"versions"`
	} `json:"spec"`
}

func loadCRD(t *testing.T) crdFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(sucTestdata, "crd-plans.yaml"))
	require.NoError(t, err)
	var crd crdFile
	require.NoError(t, yaml.Unmarshal(raw, &crd))
	return crd
}

func planSchema(t *testing.T) *jsonSchema {
	t.Helper()
	crd := loadCRD(t)
	for _, v := range crd.Spec.Versions {
		if v.Name == upgradev1.SchemeGroupVersion.Version {
			require.NotNil(t, v.Schema.OpenAPIV3Schema)
			return v.Schema.OpenAPIV3Schema
		}
	}
	t.Fatalf("CRD has no version %q", upgradev1.SchemeGroupVersion.Version)
	return nil
}

type goField struct {
	typ       reflect.Type
	omitempty bool
}

// goJSONFields lists a struct's JSON fields as encoding/json sees them: anonymous structs
// without a JSON name are flattened (metav1.TypeMeta `json:",inline"`).
func goJSONFields(t reflect.Type) map[string]goField {
	out := map[string]goField{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k, v := range goJSONFields(f.Type) {
				if _, dup := out[k]; !dup {
					out[k] = v
				}
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = goField{typ: f.Type, omitempty: slices.Contains(strings.Split(opts, ","), "omitempty")}
	}
	return out
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// foreign reports whether t comes from Kubernetes libraries (Toleration, EnvVar,
// SecurityContext, LabelSelector, ObjectMeta, Duration, IntOrString, ...): the coherence
// check stops at fields of such types instead of re-checking upstream's schemas.
func foreign(t reflect.Type) bool {
	p := deref(t).PkgPath()
	return strings.HasPrefix(p, "k8s.io/") || strings.HasPrefix(p, "sigs.k8s.io/")
}

var (
	intOrStringType = reflect.TypeFor[intstr.IntOrString]()
	durationType    = reflect.TypeFor[metav1.Duration]()
)

// typeMismatch compares a Go type with a schema node's type/format; "" means compatible.
func typeMismatch(t reflect.Type, s *jsonSchema) string {
	t = deref(t)
	switch {
	case t == intOrStringType || s.IntOrString:
		if t == intOrStringType && s.IntOrString {
			return ""
		}
		return fmt.Sprintf("Go %v vs schema int-or-string=%v", t, s.IntOrString)
	case t == durationType:
		if s.Type == "string" {
			return ""
		}
		return fmt.Sprintf("Go metav1.Duration vs schema type %q", s.Type)
	}
	want := ""
	format := ""
	switch t.Kind() {
	case reflect.String:
		want = "string"
	case reflect.Bool:
		want = "boolean"
	case reflect.Int:
		want = "integer"
	case reflect.Int32:
		want, format = "integer", "int32"
	case reflect.Int64:
		want, format = "integer", "int64"
	case reflect.Slice:
		want = "array"
	case reflect.Struct, reflect.Map:
		want = "object"
	default:
		return fmt.Sprintf("Go kind %v not handled by the check", t.Kind())
	}
	if s.Type != want || s.Format != format {
		return fmt.Sprintf("Go %v wants type %q format %q, schema has type %q format %q", t, want, format, s.Type, s.Format)
	}
	return ""
}

// compareSchema walks Go type t and schema s together. It returns the mismatches and the
// property paths it compared.
func compareSchema(t reflect.Type, s *jsonSchema, path string) (mismatches, visited []string) {
	var walk func(t reflect.Type, s *jsonSchema, path string)
	walk = func(t reflect.Type, s *jsonSchema, path string) {
		t = deref(t)
		if path != "" {
			if m := typeMismatch(t, s); m != "" {
				mismatches = append(mismatches, path+": "+m)
				return
			}
		}
		switch {
		case path != "" && foreign(t):
			return // stop at embedded Kubernetes types
		case t.Kind() == reflect.Slice:
			if s.Items == nil {
				mismatches = append(mismatches, path+": schema array has no items")
				return
			}
			walk(t.Elem(), s.Items, path+"[]")
		case t.Kind() == reflect.Map:
			if s.AdditionalProperties == nil {
				mismatches = append(mismatches, path+": schema object has no additionalProperties for Go map")
				return
			}
			walk(t.Elem(), s.AdditionalProperties, path+"{}")
		case t.Kind() == reflect.Struct:
			goFields := goJSONFields(t)
			names := map[string]bool{}
			for n := range goFields {
				names[n] = true
			}
			for n := range s.Properties {
				names[n] = true
			}
			sorted := make([]string, 0, len(names))
			for n := range names {
				sorted = append(sorted, n)
			}
			sort.Strings(sorted)
			for _, n := range sorted {
				p := strings.TrimPrefix(path+"."+n, ".")
				gf, inGo := goFields[n]
				sp, inSchema := s.Properties[n]
				switch {
				case !inGo:
					mismatches = append(mismatches, p+": in schema, no Go field in "+t.String())
					continue
				case !inSchema:
					mismatches = append(mismatches, p+": Go field of "+t.String()+" not in schema")
					continue
				}
				visited = append(visited, p)
				// controller-gen marks a field required exactly when its tag lacks omitempty.
				if required := slices.Contains(s.Required, n); required == gf.omitempty {
					mismatches = append(mismatches, fmt.Sprintf("%s: schema required=%v but Go omitempty=%v", p, required, gf.omitempty))
				}
				walk(gf.typ, sp, p)
			}
		}
	}
	walk(t, s, path)
	return mismatches, visited
}

func TestSchemaCoherence(t *testing.T) {
	crd := loadCRD(t)
	require.Equal(t, upgradev1.GroupName, crd.Spec.Group)
	require.Equal(t, upgradev1.PlanKind, crd.Spec.Names.Kind)
	require.Equal(t, upgradev1.PlanListKind, crd.Spec.Names.ListKind)
	require.Equal(t, upgradev1.PlanResource, crd.Spec.Names.Plural)
	require.Equal(t, "Namespaced", crd.Spec.Scope)
	require.Len(t, crd.Spec.Versions, 1)
	require.NotNil(t, crd.Spec.Versions[0].Subresources.Status, "status subresource")

	root := planSchema(t)
	mismatches, visited := compareSchema(reflect.TypeFor[upgradev1.Plan](), root, "")
	assert.Empty(t, mismatches, "Go mirror and CRD schema disagree")

	// The walk must really have descended into the nested types.
	for _, p := range []string{
		"apiVersion", "kind", "metadata",
		"spec.concurrency", "spec.nodeSelector", "spec.tolerations", "spec.postCompleteLabels",
		"spec.drain.timeout", "spec.drain.podSelector", "spec.drain.skipWaitForDeleteTimeout",
		"spec.upgrade.image", "spec.upgrade.envs", "spec.upgrade.securityContext",
		"spec.prepare.envFrom", "spec.prepare.volumes[].source", "spec.upgrade.volumes[].destination",
		"spec.secrets[].defaultMode", "spec.window.days", "spec.window.timeZone",
		"status.applying", "status.conditions[].lastUpdateTime", "status.conditions[].status",
	} {
		assert.Contains(t, visited, p)
	}
	// and must have stopped at embedded Kubernetes types.
	assert.NotContains(t, visited, "spec.tolerations[].key")
	assert.NotContains(t, visited, "spec.upgrade.envs[].name")
}

// brokenContainerSpec is ContainerSpec with upstream's "envs" misspelt as "env" and image optional.
type brokenContainerSpec struct {
	Image           string                  `json:"image,omitempty"`
	Command         []string                `json:"command,omitempty"`
	Args            []string                `json:"args,omitempty"`
	Env             []corev1.EnvVar         `json:"env,omitempty"`
	EnvFrom         []corev1.EnvFromSource  `json:"envFrom,omitempty"`
	Volumes         []upgradev1.VolumeSpec  `json:"volumes,omitempty"`
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`
}

// brokenDrainSpec has timeout as a time.Duration (as before SUC v0.16.3) and gracePeriod as int64.
type brokenDrainSpec struct {
	Timeout                  *time.Duration        `json:"timeout,omitempty"`
	GracePeriod              *int64                `json:"gracePeriod,omitempty"`
	DeleteLocalData          *bool                 `json:"deleteLocalData,omitempty"`
	DeleteEmptydirData       *bool                 `json:"deleteEmptydirData,omitempty"`
	IgnoreDaemonSets         *bool                 `json:"ignoreDaemonSets,omitempty"`
	Force                    bool                  `json:"force,omitempty"`
	DisableEviction          bool                  `json:"disableEviction,omitempty"`
	SkipWaitForDeleteTimeout int                   `json:"skipWaitForDeleteTimeout,omitempty"`
	PodSelector              *metav1.LabelSelector `json:"podSelector,omitempty"`
}

// TestSchemaCoherenceDetectsDrift proves the check above can fail.
func TestSchemaCoherenceDetectsDrift(t *testing.T) {
	sub := func(s *jsonSchema, path ...string) *jsonSchema {
		for _, p := range path {
			if p == "[]" {
				s = s.Items
			} else {
				s = s.Properties[p]
			}
			require.NotNil(t, s, "schema path %v", path)
		}
		return s
	}
	tests := []struct {
		name   string
		goType reflect.Type
		schema func(root *jsonSchema) *jsonSchema // may mutate the freshly loaded schema
		want   []string
	}{
		{
			name:   "schema property missing from Go",
			goType: reflect.TypeFor[upgradev1.Plan](),
			schema: func(root *jsonSchema) *jsonSchema {
				sub(root, "spec", "drain").Properties["newKnob"] = &jsonSchema{Type: "boolean"}
				return root
			},
			want: []string{"spec.drain.newKnob: in schema, no Go field"},
		},
		{
			name:   "Go field missing from schema",
			goType: reflect.TypeFor[upgradev1.Plan](),
			schema: func(root *jsonSchema) *jsonSchema {
				delete(sub(root, "status", "conditions", "[]").Properties, "lastUpdateTime")
				return root
			},
			want: []string{"status.conditions[].lastUpdateTime: Go field of v1.GenericCondition not in schema"},
		},
		{
			name:   "type drift",
			goType: reflect.TypeFor[upgradev1.Plan](),
			schema: func(root *jsonSchema) *jsonSchema {
				sub(root, "spec", "concurrency").Type = "string"
				return root
			},
			want: []string{"spec.concurrency: Go int64 wants type \"integer\" format \"int64\", schema has type \"string\""},
		},
		{
			name:   "required drift",
			goType: reflect.TypeFor[upgradev1.Plan](),
			schema: func(root *jsonSchema) *jsonSchema {
				s := sub(root, "spec", "secrets", "[]")
				s.Required = slices.DeleteFunc(s.Required, func(n string) bool { return n == "path" })
				return root
			},
			want: []string{"spec.secrets[].path: schema required=false but Go omitempty=false"},
		},
		{
			name:   "misspelt tag envs->env",
			goType: reflect.TypeFor[brokenContainerSpec](),
			schema: func(root *jsonSchema) *jsonSchema { return sub(root, "spec", "upgrade") },
			want: []string{
				"envs: in schema, no Go field",
				"env: Go field of v1_test.brokenContainerSpec not in schema",
				"image: schema required=true but Go omitempty=true",
			},
		},
		{
			name:   "drain.timeout as time.Duration, gracePeriod as int64",
			goType: reflect.TypeFor[brokenDrainSpec](),
			schema: func(root *jsonSchema) *jsonSchema { return sub(root, "spec", "drain") },
			want: []string{
				"timeout: Go time.Duration vs schema int-or-string=true",
				"gracePeriod: Go int64 wants type \"integer\" format \"int64\", schema has type \"integer\" format \"int32\"",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.schema(planSchema(t))
			mismatches, _ := compareSchema(tc.goType, s, "")
			require.Len(t, mismatches, len(tc.want), "mismatches: %q", mismatches)
			for _, w := range tc.want {
				found := slices.ContainsFunc(mismatches, func(m string) bool { return strings.HasPrefix(m, w) })
				assert.True(t, found, "want a mismatch starting %q in %q", w, mismatches)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Decoding the RKE2 fixture Plans.
// ---------------------------------------------------------------------------

type wantPlan struct {
	concurrency int64
	cordon      bool
	version     string
	channel     string
	image       string
	prepareArgs []string
	exprs       []metav1.LabelSelectorRequirement
	drainForce  *bool // nil: no drain
	tolerations []corev1.Toleration
	labels      map[string]string
}

const stableChannel = "https://update.rke2.io/v1-release/channels/stable"

func TestDecodeRKE2Plans(t *testing.T) {
	controlPlaneIn := metav1.LabelSelectorRequirement{Key: "node-role.kubernetes.io/control-plane", Operator: metav1.LabelSelectorOpIn, Values: []string{"true"}}
	tests := []struct {
		file  string
		plans map[string]wantPlan
	}{
		{
			file: "rke2-server-plan.yaml",
			plans: map[string]wantPlan{
				"server-plan": {
					concurrency: 1, cordon: true, channel: stableChannel, image: "rancher/rke2-upgrade",
					exprs: []metav1.LabelSelectorRequirement{controlPlaneIn},
				},
			},
		},
		{
			file: "rke2-agent-plan.yaml",
			plans: map[string]wantPlan{
				"agent-plan": {
					concurrency: 1, cordon: true, channel: stableChannel, image: "rancher/rke2-upgrade",
					prepareArgs: []string{"prepare", "server-plan"},
					exprs: []metav1.LabelSelectorRequirement{
						{Key: "node-role.kubernetes.io/control-plane", Operator: metav1.LabelSelectorOpDoesNotExist},
					},
				},
			},
		},
		{
			file: "rke2-plans-legacy-pinned.yaml",
			plans: map[string]wantPlan{
				"server-plan": {
					concurrency: 1, cordon: true, version: "v1.30.1-rke2r1", image: "rancher/rke2-upgrade",
					exprs: []metav1.LabelSelectorRequirement{controlPlaneIn},
					tolerations: []corev1.Toleration{
						{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoExecute},
					},
					labels: map[string]string{"rke2-upgrade": "server"},
				},
				"agent-plan": {
					concurrency: 2, cordon: true, version: "v1.30.1-rke2r1", image: "rancher/rke2-upgrade",
					prepareArgs: []string{"prepare", "server-plan"},
					drainForce:  ptrTo(true),
					exprs: []metav1.LabelSelectorRequirement{
						{Key: "kubernetes.io/os", Operator: metav1.LabelSelectorOpIn, Values: []string{"linux"}},
						{Key: "node-role.kubernetes.io/control-plane", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"true"}},
						{Key: "rke2-upgrade", Operator: metav1.LabelSelectorOpExists},
						{Key: "rke2-upgrade", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"disabled", "false"}},
					},
					labels: map[string]string{"rke2-upgrade": "agent"},
				},
			},
		},
	}

	files, err := filepath.Glob(filepath.Join(sucTestdata, "rke2-*.yaml"))
	require.NoError(t, err)
	var covered []string
	for _, tc := range tests {
		covered = append(covered, filepath.Join(sucTestdata, tc.file))
	}
	require.ElementsMatch(t, files, covered, "every rke2-*.yaml fixture needs expectations")

	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(sucTestdata, tc.file))
			require.NoError(t, err)

			// One DecodePlanYAML call per document.
			docs := strings.Split("\n"+string(raw), "\n---")
			var plans []*upgradev1.Plan
			for _, doc := range docs {
				p, err := upgradev1.DecodePlanYAML([]byte(doc))
				require.NoError(t, err)
				plans = append(plans, p)
			}
			// DecodePlansYAML on the whole stream gives the same.
			all, err := upgradev1.DecodePlansYAML(raw)
			require.NoError(t, err)
			require.Equal(t, plans, all)
			if len(docs) > 1 {
				_, err := upgradev1.DecodePlanYAML(raw)
				require.ErrorContains(t, err, fmt.Sprintf("input holds %d YAML documents", len(docs)))
			}

			require.Len(t, plans, len(tc.plans))
			for _, p := range plans {
				want, ok := tc.plans[p.Name]
				require.True(t, ok, "unexpected plan %q", p.Name)
				assert.Equal(t, upgradev1.SchemeGroupVersion.String(), p.APIVersion)
				assert.Equal(t, upgradev1.PlanKind, p.Kind)
				assert.Equal(t, "system-upgrade", p.Namespace)
				assert.Equal(t, want.labels, p.Labels)
				assert.Equal(t, "system-upgrade", p.Spec.ServiceAccountName)
				assert.Equal(t, want.concurrency, p.Spec.Concurrency)
				assert.Equal(t, want.cordon, p.Spec.Cordon)
				assert.Equal(t, want.version, p.Spec.Version)
				assert.Equal(t, want.channel, p.Spec.Channel)
				require.NotNil(t, p.Spec.Upgrade)
				assert.Equal(t, want.image, p.Spec.Upgrade.Image)
				require.NotNil(t, p.Spec.NodeSelector)
				assert.Empty(t, p.Spec.NodeSelector.MatchLabels)
				assert.Equal(t, want.exprs, p.Spec.NodeSelector.MatchExpressions)
				assert.Equal(t, want.tolerations, p.Spec.Tolerations)
				if want.prepareArgs == nil {
					assert.Nil(t, p.Spec.Prepare)
				} else {
					require.NotNil(t, p.Spec.Prepare)
					assert.Equal(t, want.image, p.Spec.Prepare.Image)
					assert.Equal(t, want.prepareArgs, p.Spec.Prepare.Args)
				}
				if want.drainForce == nil {
					assert.Nil(t, p.Spec.Drain)
				} else {
					require.NotNil(t, p.Spec.Drain)
					assert.Equal(t, *want.drainForce, p.Spec.Drain.Force)
					assert.Nil(t, p.Spec.Drain.Timeout)
				}
				assert.Zero(t, p.Status)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// DecodePlan: tolerance, refusal, messages.
// ---------------------------------------------------------------------------

const planHeader = `"apiVersion":"upgrade.cattle.io/v1","kind":"Plan","metadata":{"name":"p","namespace":"system-upgrade"}`

func planJSON(rest string) []byte {
	if rest == "" {
		return []byte("{" + planHeader + "}")
	}
	return []byte("{" + planHeader + "," + rest + "}")
}

func TestDecodePlanTolerated(t *testing.T) {
	tests := []struct {
		name  string
		raw   []byte
		check func(t *testing.T, p *upgradev1.Plan)
	}{
		{
			name: "unknown spec field",
			raw:  planJSON(`"spec":{"concurrency":3,"futureField":1,"upgrade":{"image":"x"}}`),
			check: func(t *testing.T, p *upgradev1.Plan) {
				assert.EqualValues(t, 3, p.Spec.Concurrency)
				assert.Equal(t, "x", p.Spec.Upgrade.Image)
			},
		},
		{
			name: "unknown nested and status fields",
			raw:  planJSON(`"spec":{"drain":{"force":true,"futureKnob":"x"},"upgrade":{"image":"x","futureField":[1]}},"status":{"applying":["n1"],"futureField":{}}`),
			check: func(t *testing.T, p *upgradev1.Plan) {
				assert.True(t, p.Spec.Drain.Force)
				assert.Equal(t, []string{"n1"}, p.Status.Applying)
			},
		},
		{
			name: "field names are case-sensitive like the API server: Concurrency is unknown",
			raw:  planJSON(`"spec":{"concurrency":2,"Concurrency":"x"}`),
			check: func(t *testing.T, p *upgradev1.Plan) {
				assert.EqualValues(t, 2, p.Spec.Concurrency)
			},
		},
		{
			name: "nil vs empty nodeSelector are preserved",
			raw:  planJSON(`"spec":{"nodeSelector":{},"prepare":null}`),
			check: func(t *testing.T, p *upgradev1.Plan) {
				require.NotNil(t, p.Spec.NodeSelector)
				assert.Zero(t, *p.Spec.NodeSelector)
				assert.Nil(t, p.Spec.Prepare)
			},
		},
		{
			name: "drain.timeout as string and as small int, postCompleteDelay, envs",
			raw:  planJSON(`"spec":{"drain":{"timeout":"10m","gracePeriod":30},"postCompleteDelay":"90s","upgrade":{"image":"x","envs":[{"name":"A","value":"1"}]}}`),
			check: func(t *testing.T, p *upgradev1.Plan) {
				assert.Equal(t, intstr.FromString("10m"), *p.Spec.Drain.Timeout)
				assert.EqualValues(t, 30, *p.Spec.Drain.GracePeriod)
				assert.Equal(t, 90*time.Second, p.Spec.PostCompleteDelay.Duration)
				assert.Equal(t, []corev1.EnvVar{{Name: "A", Value: "1"}}, p.Spec.Upgrade.Env)
			},
		},
		{
			name: "no spec at all",
			raw:  planJSON(""),
			check: func(t *testing.T, p *upgradev1.Plan) {
				assert.Equal(t, "p", p.Name)
				assert.Nil(t, p.Spec.Upgrade)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := upgradev1.DecodePlan(tc.raw)
			require.NoError(t, err)
			tc.check(t, p)
		})
	}
}

func TestDecodePlanRefused(t *testing.T) {
	tests := []struct {
		name      string
		raw       []byte
		wantField string // path of the *field.Error, "" if none
		wantBad   any    // BadValue of the *field.Error
		notPlan   bool   // wraps ErrNotPlan
		wantMsg   []string
	}{
		{
			name:      "concurrency as a string",
			raw:       planJSON(`"spec":{"concurrency":"2"}`),
			wantField: "spec.concurrency", wantBad: "2",
			wantMsg: []string{`spec.concurrency: Invalid value: "2": expected integer (int64), got string`},
		},
		{
			name:      "concurrency not an integer",
			raw:       planJSON(`"spec":{"concurrency":1.5}`),
			wantField: "spec.concurrency", wantBad: json.Number("1.5"),
			wantMsg: []string{"spec.concurrency: Invalid value: 1.5: expected integer (int64)"},
		},
		{
			name:      "list index in the path",
			raw:       planJSON(`"spec":{"tolerations":[{"operator":"Exists"},{"key":"k","tolerationSeconds":"x"}]}`),
			wantField: "spec.tolerations[1].tolerationSeconds", wantBad: "x",
			wantMsg: []string{`spec.tolerations[1].tolerationSeconds: Invalid value: "x": expected integer (int64), got string`},
		},
		{
			name:      "drain.timeout integer beyond int32 (passes the CRD, breaks the controller)",
			raw:       planJSON(`"spec":{"drain":{"timeout":600000000000}}`),
			wantField: "spec.drain.timeout", wantBad: json.Number("600000000000"),
			wantMsg: []string{"spec.drain.timeout: Invalid value: 600000000000: expected integer (int32) or string"},
		},
		{
			name:      "postCompleteDelay not a duration",
			raw:       planJSON(`"spec":{"postCompleteDelay":"ten minutes"}`),
			wantField: "spec.postCompleteDelay", wantBad: "ten minutes",
			wantMsg: []string{`spec.postCompleteDelay: Invalid value: "ten minutes": expected string (duration`, "invalid duration"},
		},
		{
			name:      "window day as a number",
			raw:       planJSON(`"spec":{"window":{"days":["mo",2]}}`),
			wantField: "spec.window.days[1]", wantBad: json.Number("2"),
			wantMsg: []string{"spec.window.days[1]: Invalid value: 2: expected string, got number"},
		},
		{
			name:      "nodeSelector as a list",
			raw:       planJSON(`"spec":{"nodeSelector":[{"key":"a"}]}`),
			wantField: "spec.nodeSelector", wantBad: json.RawMessage(`[{"key":"a"}]`),
			wantMsg: []string{`spec.nodeSelector: Invalid value: [{"key":"a"}]: expected object (LabelSelector), got array`},
		},
		{
			name:      "cordon as a string",
			raw:       planJSON(`"spec":{"cordon":"true"}`),
			wantField: "spec.cordon", wantBad: "true",
			wantMsg: []string{`spec.cordon: Invalid value: "true": expected boolean, got string`},
		},
		{
			name:    "wrong kind",
			raw:     []byte(`{"apiVersion":"upgrade.cattle.io/v1","kind":"Deployment","spec":{}}`),
			notPlan: true,
			wantMsg: []string{`got apiVersion "upgrade.cattle.io/v1", kind "Deployment"; want apiVersion "upgrade.cattle.io/v1", kind "Plan"`},
		},
		{
			name:    "wrong apiVersion",
			raw:     []byte(`{"apiVersion":"upgrade.cattle.io/v1beta1","kind":"Plan"}`),
			notPlan: true,
			wantMsg: []string{`got apiVersion "upgrade.cattle.io/v1beta1", kind "Plan"`},
		},
		{
			name:    "missing apiVersion, kind not a string",
			raw:     []byte(`{"kind":7}`),
			notPlan: true,
			wantMsg: []string{"got apiVersion <missing>, kind number 7"},
		},
		{
			name:    "not an object",
			raw:     []byte(`["Plan"]`),
			wantMsg: []string{`expected a JSON object, got array ["Plan"]`},
		},
		{
			name:    "truncated JSON",
			raw:     []byte(`{"apiVersion":"upgrade.cattle.io/v1","kind":"Plan"`),
			wantMsg: []string{"invalid JSON"},
		},
		{
			name:    "trailing data",
			raw:     append(planJSON(""), []byte(` {}`)...),
			wantMsg: []string{"invalid JSON: unexpected data after the top-level value"},
		},
		{
			name:    "empty",
			raw:     nil,
			wantMsg: []string{"invalid JSON: empty input"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := upgradev1.DecodePlan(tc.raw)
			require.Error(t, err)
			assert.Nil(t, p)
			for _, m := range tc.wantMsg {
				assert.Contains(t, err.Error(), m)
			}
			assert.Equal(t, tc.notPlan, errors.Is(err, upgradev1.ErrNotPlan))
			var fe *field.Error
			if tc.wantField == "" {
				assert.False(t, errors.As(err, &fe), "unexpected field error %v", fe)
				return
			}
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, field.ErrorTypeTypeInvalid, fe.Type)
			assert.Equal(t, tc.wantField, fe.Field)
			assert.Equal(t, tc.wantBad, fe.BadValue)
		})
	}
}

func TestDecodePlanYAML(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr []string
		check   func(t *testing.T, p *upgradev1.Plan)
	}{
		{
			name: "unknown field tolerated",
			yaml: "apiVersion: upgrade.cattle.io/v1\nkind: Plan\nmetadata: {name: p}\nspec:\n  futureField: 1\n  concurrency: 1\n  upgrade: {image: rancher/rke2-upgrade}\n",
			check: func(t *testing.T, p *upgradev1.Plan) {
				assert.EqualValues(t, 1, p.Spec.Concurrency)
			},
		},
		{
			name: "leading separator and comment-only documents are skipped",
			yaml: "# c\n---\napiVersion: upgrade.cattle.io/v1\nkind: Plan\nmetadata: {name: p}\n---\n# trailing\n",
			check: func(t *testing.T, p *upgradev1.Plan) {
				assert.Equal(t, "p", p.Name)
			},
		},
		{
			name:    "quoted concurrency refused",
			yaml:    "apiVersion: upgrade.cattle.io/v1\nkind: Plan\nspec:\n  concurrency: \"1\"\n",
			wantErr: []string{`spec.concurrency: Invalid value: "1": expected integer (int64), got string`},
		},
		{
			name:    "unquoted version parsed by YAML as a number refused",
			yaml:    "apiVersion: upgrade.cattle.io/v1\nkind: Plan\nspec:\n  version: 1.30\n",
			wantErr: []string{"spec.version: Invalid value: 1.3: expected string, got number"},
		},
		{
			name:    "wrong kind",
			yaml:    "apiVersion: v1\nkind: ConfigMap\n",
			wantErr: []string{`got apiVersion "v1", kind "ConfigMap"`},
		},
		{
			name:    "two documents",
			yaml:    "apiVersion: upgrade.cattle.io/v1\nkind: Plan\n---\napiVersion: upgrade.cattle.io/v1\nkind: Plan\n",
			wantErr: []string{"input holds 2 YAML documents, expected one"},
		},
		{
			name:    "no document",
			yaml:    "# nothing\n",
			wantErr: []string{"no YAML document"},
		},
		{
			name:    "invalid YAML",
			yaml:    "apiVersion: upgrade.cattle.io/v1\nkind: Plan\nspec: [\n",
			wantErr: []string{"YAML document 1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := upgradev1.DecodePlanYAML([]byte(tc.yaml))
			if tc.wantErr != nil {
				require.Error(t, err)
				for _, m := range tc.wantErr {
					assert.Contains(t, err.Error(), m)
				}
				return
			}
			require.NoError(t, err)
			tc.check(t, p)
		})
	}

	t.Run("DecodePlansYAML names the failing document", func(t *testing.T) {
		_, err := upgradev1.DecodePlansYAML([]byte("apiVersion: upgrade.cattle.io/v1\nkind: Plan\n---\napiVersion: upgrade.cattle.io/v1\nkind: Plan\nspec: {cordon: 1}\n"))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "YAML document 2: decode Plan: spec.cordon: Invalid value: 1: expected boolean, got number")
	})
}

// ---------------------------------------------------------------------------
// DeepCopy and scheme registration.
// ---------------------------------------------------------------------------

func fullPlan() *upgradev1.Plan {
	return &upgradev1.Plan{
		TypeMeta:   metav1.TypeMeta{APIVersion: "upgrade.cattle.io/v1", Kind: "Plan"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "system-upgrade", Labels: map[string]string{"a": "b"}},
		Spec: upgradev1.PlanSpec{
			Concurrency:           1,
			JobActiveDeadlineSecs: ptrTo[int64](600),
			NodeSelector: &metav1.LabelSelector{
				MatchLabels:      map[string]string{"gpu": "true"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: metav1.LabelSelectorOpIn, Values: []string{"v"}}},
			},
			Version:     "v1.36.1+rke2r1",
			Secrets:     []upgradev1.SecretSpec{{Name: "s", Path: "/s", DefaultMode: ptrTo[int32](0o400)}},
			Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, TolerationSeconds: ptrTo[int64](5)}},
			Window:      &upgradev1.TimeWindowSpec{Days: []upgradev1.Day{"mo", "tu"}, StartTime: "01:00", EndTime: "05:00"},
			Prepare:     &upgradev1.ContainerSpec{Image: "prep", Args: []string{"prepare", "server-plan"}},
			Upgrade: &upgradev1.ContainerSpec{
				Image:           "rancher/rke2-upgrade",
				Command:         []string{"upgrade"},
				Env:             []corev1.EnvVar{{Name: "A", Value: "1"}},
				Volumes:         []upgradev1.VolumeSpec{{Name: "v", Source: "/src", Destination: "/dst"}},
				SecurityContext: &corev1.SecurityContext{Privileged: ptrTo(true)},
			},
			Drain: &upgradev1.DrainSpec{
				Timeout:     ptrTo(intstr.FromString("10m")),
				GracePeriod: ptrTo[int32](30),
				Force:       true,
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
			},
			ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "pull"}},
			PostCompleteDelay:  &metav1.Duration{Duration: time.Minute},
			PostCompleteLabels: map[string]string{"done": "$(LATEST_VERSION)"},
		},
		Status: upgradev1.PlanStatus{
			Conditions:    []upgradev1.GenericCondition{{Type: upgradev1.PlanComplete, Status: corev1.ConditionFalse, Reason: "SyncJob"}},
			LatestVersion: "v1.36.1-rke2r1",
			Applying:      []string{"node-1"},
		},
	}
}

func TestDeepCopyIndependent(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *upgradev1.Plan)
	}{
		{"labels", func(p *upgradev1.Plan) { p.Labels["a"] = "changed" }},
		{"jobActiveDeadlineSecs", func(p *upgradev1.Plan) { *p.Spec.JobActiveDeadlineSecs = 1 }},
		{"nodeSelector matchLabels", func(p *upgradev1.Plan) { p.Spec.NodeSelector.MatchLabels["gpu"] = "false" }},
		{"nodeSelector expression values", func(p *upgradev1.Plan) { p.Spec.NodeSelector.MatchExpressions[0].Values[0] = "w" }},
		{"secret defaultMode", func(p *upgradev1.Plan) { *p.Spec.Secrets[0].DefaultMode = 0o777 }},
		{"toleration seconds", func(p *upgradev1.Plan) { *p.Spec.Tolerations[0].TolerationSeconds = 9 }},
		{"window days", func(p *upgradev1.Plan) { p.Spec.Window.Days[0] = "sa" }},
		{"prepare args", func(p *upgradev1.Plan) { p.Spec.Prepare.Args[1] = "agent-plan" }},
		{"upgrade image", func(p *upgradev1.Plan) { p.Spec.Upgrade.Image = "evil" }},
		{"upgrade envs", func(p *upgradev1.Plan) { p.Spec.Upgrade.Env[0].Value = "2" }},
		{"upgrade volumes", func(p *upgradev1.Plan) { p.Spec.Upgrade.Volumes[0].Source = "/" }},
		{"upgrade securityContext", func(p *upgradev1.Plan) { *p.Spec.Upgrade.SecurityContext.Privileged = false }},
		{"drain timeout", func(p *upgradev1.Plan) { *p.Spec.Drain.Timeout = intstr.FromInt32(1) }},
		{"drain gracePeriod", func(p *upgradev1.Plan) { *p.Spec.Drain.GracePeriod = 0 }},
		{"drain podSelector", func(p *upgradev1.Plan) { p.Spec.Drain.PodSelector.MatchLabels["app"] = "y" }},
		{"imagePullSecrets", func(p *upgradev1.Plan) { p.Spec.ImagePullSecrets[0].Name = "other" }},
		{"postCompleteDelay", func(p *upgradev1.Plan) { p.Spec.PostCompleteDelay.Duration = 0 }},
		{"postCompleteLabels", func(p *upgradev1.Plan) { p.Spec.PostCompleteLabels["done"] = "x" }},
		{"status conditions", func(p *upgradev1.Plan) { p.Status.Conditions[0].Status = corev1.ConditionTrue }},
		{"status applying", func(p *upgradev1.Plan) { p.Status.Applying[0] = "node-2" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			orig := fullPlan()
			cp := orig.DeepCopy()
			require.Equal(t, orig, cp)
			tc.mutate(cp)
			assert.Equal(t, fullPlan(), orig, "original changed through the copy")
			assert.NotEqual(t, orig, cp)
		})
	}

	t.Run("DeepCopyObject and PlanList", func(t *testing.T) {
		obj := fullPlan().DeepCopyObject()
		require.IsType(t, &upgradev1.Plan{}, obj)
		list := &upgradev1.PlanList{Items: []upgradev1.Plan{*fullPlan()}}
		lcp, ok := list.DeepCopyObject().(*upgradev1.PlanList)
		require.True(t, ok)
		lcp.Items[0].Spec.Upgrade.Image = "evil"
		assert.Equal(t, "rancher/rke2-upgrade", list.Items[0].Spec.Upgrade.Image)
	})
}

func TestSchemeRegistration(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, upgradev1.AddToScheme(s))

	gvk := schema.GroupVersionKind{Group: "upgrade.cattle.io", Version: "v1", Kind: "Plan"}
	assert.Equal(t, gvk, upgradev1.SchemeGroupVersion.WithKind(upgradev1.PlanKind))
	tests := []struct {
		kind string
		want runtime.Object
	}{
		{upgradev1.PlanKind, &upgradev1.Plan{}},
		{upgradev1.PlanListKind, &upgradev1.PlanList{}},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			obj, err := s.New(upgradev1.SchemeGroupVersion.WithKind(tc.kind))
			require.NoError(t, err)
			assert.IsType(t, tc.want, obj)
			kinds, _, err := s.ObjectKinds(tc.want)
			require.NoError(t, err)
			assert.Equal(t, []schema.GroupVersionKind{upgradev1.SchemeGroupVersion.WithKind(tc.kind)}, kinds)
		})
	}

	t.Run("codec decodes into *Plan", func(t *testing.T) {
		obj, gotGVK, err := serializer.NewCodecFactory(s).UniversalDeserializer().
			Decode(planJSON(`"spec":{"concurrency":2,"upgrade":{"image":"x"}}`), nil, nil)
		require.NoError(t, err)
		assert.Equal(t, gvk, *gotGVK)
		p, ok := obj.(*upgradev1.Plan)
		require.True(t, ok)
		assert.EqualValues(t, 2, p.Spec.Concurrency)
	})

	assert.Equal(t, schema.GroupResource{Group: "upgrade.cattle.io", Resource: "plans"}, upgradev1.Resource(upgradev1.PlanResource))
	assert.Equal(t, schema.GroupKind{Group: "upgrade.cattle.io", Kind: "Plan"}, upgradev1.Kind(upgradev1.PlanKind))
	assert.Equal(t, "plan.upgrade.cattle.io/server-plan", upgradev1.LabelPlanName("server-plan"))
	assert.Equal(t, "kubernetes.io/hostname", upgradev1.LabelHostname)
}

func TestJSONTags(t *testing.T) {
	b, err := json.Marshal(upgradev1.PlanSpec{Upgrade: &upgradev1.ContainerSpec{Env: []corev1.EnvVar{{Name: "A"}}}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"upgrade":{"image":"","envs":[{"name":"A"}]}}`, string(b))

	b, err = json.Marshal(upgradev1.PlanSpec{})
	require.NoError(t, err)
	assert.JSONEq(t, `{"upgrade":null}`, string(b), "upgrade has no omitempty upstream")
}
