package v1

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// ErrNotPlan is wrapped by the decode functions when the input's apiVersion/kind is not
// upgrade.cattle.io/v1 Plan.
var ErrNotPlan = errors.New("not an " + GroupName + "/" + Version + " " + PlanKind)

// maxShownValue bounds how much of an offending object/array is quoted in an error.
const maxShownValue = 200

// DecodePlan decodes a Plan from JSON as the API server sends it (e.g. AdmissionRequest.Object).
//
// Decoding is case-sensitive, like the API server's. Unknown fields are ignored, since a newer
// SUC may add fields this mirror does not know. A known field whose value does not fit its Go
// type (e.g. spec.concurrency as a string, drain.timeout as an integer beyond int32,
// postCompleteDelay that is not a duration) is refused: the error wraps a *field.Error whose
// Field is the path of the offending value (with list indices), BadValue the value seen and
// Detail the expected type. apiVersion and kind must be upgrade.cattle.io/v1 and Plan;
// otherwise the error wraps ErrNotPlan and quotes what was seen.
func DecodePlan(raw []byte) (*Plan, error) {
	// The typed decode alone decides a valid Plan: the generic tree, a
	// second copy of every string in the input, is built only to explain a
	// failure (a 6 MiB review held three copies instead of two).
	plan := &Plan{}
	if utiljson.Unmarshal(raw, plan) == nil && plan.APIVersion == SchemeGroupVersion.String() && plan.Kind == PlanKind {
		return plan, nil
	}
	root, err := decodeGeneric(raw)
	if err != nil {
		return nil, fmt.Errorf("decode Plan: invalid JSON: %w", err)
	}
	obj, ok := root.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("decode Plan: expected a JSON object, got %s", describeValue(root))
	}
	if err := checkTypeMeta(obj); err != nil {
		return nil, err
	}

	plan = &Plan{}
	if err := utiljson.Unmarshal(raw, plan); err != nil {
		if fe := locate(root, reflect.TypeFor[Plan](), nil); fe != nil {
			return nil, fmt.Errorf("decode Plan: %w", fe)
		}
		return nil, fmt.Errorf("decode Plan: %w", err)
	}
	return plan, nil
}

// DecodePlanYAML decodes a single Plan from a YAML (or JSON) document, e.g. a file given to the
// CLI. It converts YAML to JSON and then behaves like DecodePlan. Input holding more than one
// non-empty YAML document is refused; use DecodePlansYAML for those.
func DecodePlanYAML(raw []byte) (*Plan, error) {
	docs, err := splitYAML(raw)
	if err != nil {
		return nil, err
	}
	switch len(docs) {
	case 0:
		return nil, errors.New("decode Plan: no YAML document in input")
	case 1:
		return DecodePlan(docs[0])
	default:
		return nil, fmt.Errorf("decode Plan: input holds %d YAML documents, expected one", len(docs))
	}
}

// DecodePlansYAML decodes every non-empty document of a multi-document YAML stream as a Plan,
// as DecodePlanYAML does for one. Errors name the 1-based document number.
func DecodePlansYAML(raw []byte) ([]*Plan, error) {
	docs, err := splitYAML(raw)
	if err != nil {
		return nil, err
	}
	plans := make([]*Plan, 0, len(docs))
	for i, doc := range docs {
		p, err := DecodePlan(doc)
		if err != nil {
			return nil, fmt.Errorf("YAML document %d: %w", i+1, err)
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// splitYAML returns the JSON form of each non-empty document of a YAML stream.
func splitYAML(raw []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var docs [][]byte
	for n := 1; ; n++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("decode Plan: reading YAML document %d: %w", n, err)
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("decode Plan: YAML document %d: %w", n, err)
		}
		if t := bytes.TrimSpace(j); len(t) == 0 || string(t) == "null" {
			continue // empty or comment-only document
		}
		docs = append(docs, j)
	}
}

// decodeGeneric decodes raw into any, keeping numbers as json.Number, and refuses trailing data.
func decodeGeneric(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty input")
		}
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("unexpected data after the top-level value at offset %d", dec.InputOffset())
	}
	return v, nil
}

func checkTypeMeta(obj map[string]any) error {
	want := SchemeGroupVersion.String()
	av, avOK := obj["apiVersion"].(string)
	k, kOK := obj["kind"].(string)
	if avOK && kOK && av == want && k == PlanKind {
		return nil
	}
	return fmt.Errorf("decode Plan: %w: got apiVersion %s, kind %s; want apiVersion %q, kind %q",
		ErrNotPlan, seenTypeMeta(obj, "apiVersion"), seenTypeMeta(obj, "kind"), want, PlanKind)
}

func seenTypeMeta(obj map[string]any, key string) string {
	v, ok := obj[key]
	if !ok {
		return "<missing>"
	}
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return describeValue(v)
}

// locate finds the innermost value in the generic JSON tree v that does not decode into Go type
// t, by re-decoding sub-trees with the same decoder DecodePlan uses. It returns nil if v decodes.
func locate(v any, t reflect.Type, path *field.Path) *field.Error {
	var decodeErr error
	if path != nil {
		if decodeErr = decodeInto(v, t); decodeErr == nil {
			return nil
		}
	}
	et := t
	for et.Kind() == reflect.Pointer {
		et = et.Elem()
	}
	if !ownsUnmarshal(et) {
		switch val := v.(type) {
		case map[string]any:
			switch et.Kind() {
			case reflect.Struct:
				fields := jsonFields(et)
				for _, key := range sortedKeys(val) {
					ft, ok := fields[key]
					if !ok {
						continue // unknown field: tolerated
					}
					if fe := locate(val[key], ft, path.Child(key)); fe != nil {
						return fe
					}
				}
			case reflect.Map:
				for _, key := range sortedKeys(val) {
					if fe := locate(val[key], et.Elem(), path.Key(key)); fe != nil {
						return fe
					}
				}
			}
		case []any:
			if et.Kind() == reflect.Slice || et.Kind() == reflect.Array {
				for i, item := range val {
					if fe := locate(item, et.Elem(), path.Index(i)); fe != nil {
						return fe
					}
				}
			}
		}
	}
	if path == nil {
		return nil // the whole object failed but no part of it did: let the caller report
	}
	got := jsonKind(v)
	if got == "number" && isInteger(t) {
		got = "a number that is not an integer or is out of range"
	}
	detail := fmt.Sprintf("expected %s, got %s", describeType(t), got)
	var typeErr *json.UnmarshalTypeError
	if !errors.As(decodeErr, &typeErr) {
		// The JSON kind fits but the content does not (e.g. "abc" as a duration).
		detail = fmt.Sprintf("expected %s: %v", describeType(t), decodeErr)
	}
	return field.TypeInvalid(path, shownValue(v), detail)
}

// decodeInto decodes the generic value v into a new value of type t with DecodePlan's decoder.
func decodeInto(v any, t reflect.Type) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return utiljson.Unmarshal(b, reflect.New(t).Interface())
}

var jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// ownsUnmarshal reports whether t decodes itself (so its inside is not walked).
func ownsUnmarshal(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(jsonUnmarshalerType)
}

// jsonFields maps the JSON names of a struct's fields to their types, flattening anonymous
// embedded structs without a JSON name (e.g. metav1.TypeMeta `json:",inline"`) as encoding/json does.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	var promoted []map[string]reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				promoted = append(promoted, jsonFields(ft))
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	for _, p := range promoted {
		for k, v := range p {
			if _, ok := out[k]; !ok {
				out[k] = v
			}
		}
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var (
	intOrStringType = reflect.TypeFor[intstr.IntOrString]()
	quantityType    = reflect.TypeFor[resource.Quantity]()
	timeType        = reflect.TypeFor[metav1.Time]()
	microTimeType   = reflect.TypeFor[metav1.MicroTime]()
	durationType    = reflect.TypeFor[metav1.Duration]()
)

// describeType names the JSON shape Go type t accepts, e.g. "integer (int64)".
func describeType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case intOrStringType:
		return "integer (int32) or string"
	case quantityType:
		return "quantity (string or number)"
	case timeType, microTimeType:
		return "string (RFC 3339 date-time)"
	case durationType:
		return `string (duration, e.g. "90s")`
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer (" + t.Kind().String() + ")"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map:
		return "object"
	case reflect.Struct:
		return "object (" + t.Name() + ")"
	default:
		return t.String()
	}
}

// isInteger reports whether t (or what it points to) accepts JSON integers only, or integers
// besides strings (IntOrString).
func isInteger(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == intOrStringType {
		return true
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// jsonKind names the JSON kind of a value from decodeGeneric.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// shownValue is the BadValue for a field.Error: scalars as they are, composites as JSON
// truncated to maxShownValue bytes.
func shownValue(v any) any {
	switch v.(type) {
	case []any, map[string]any:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprintf("%v", v)
		}
		if len(b) > maxShownValue {
			return string(b[:maxShownValue]) + "..."
		}
		return json.RawMessage(b)
	default:
		return v
	}
}

func describeValue(v any) string {
	s := fmt.Sprintf("%v", v)
	if b, err := json.Marshal(v); err == nil {
		s = string(b)
	}
	if len(s) > maxShownValue {
		s = s[:maxShownValue] + "..."
	}
	return jsonKind(v) + " " + s
}
