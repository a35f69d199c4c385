package qualification

import (
	"reflect"
	"slices"
	"strings"
)

// TupleMember is one component of a tuple: its record key and its value.
type TupleMember struct {
	Key   string
	Value *string
}

// tupleKeys are Tuple's record keys in field order, read from its json tags
// so the loader, the checks and the gate's component table (which a test
// holds to this order) never spell the members out again.
var tupleKeys = func() []string {
	typ := reflect.TypeOf(Tuple{})
	keys := make([]string, typ.NumField())
	for i := range keys {
		keys[i], _, _ = strings.Cut(typ.Field(i).Tag.Get("json"), ",")
	}
	return keys
}()

// optionalTupleKeys are the members a tuple may leave out: the DRA
// driver, which only DRA GPU nodes run. Their json tags say omitempty.
var optionalTupleKeys = func() []string {
	typ := reflect.TypeOf(Tuple{})
	var keys []string
	for i := range typ.NumField() {
		if name, opts, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ","); opts == "omitempty" {
			keys = append(keys, name)
		}
	}
	return keys
}()

// IsOptionalTupleKey says whether a tuple may leave the member out.
func IsOptionalTupleKey(key string) bool { return slices.Contains(optionalTupleKeys, key) }

// TupleKeys lists the tuple's record keys in the record's order.
func TupleKeys() []string { return append([]string(nil), tupleKeys...) }

// Members returns the tuple's components in the record's order, each with
// a pointer to its value.
func (t *Tuple) Members() []TupleMember {
	v := reflect.ValueOf(t).Elem()
	out := make([]TupleMember, len(tupleKeys))
	for i, k := range tupleKeys {
		out[i] = TupleMember{Key: k, Value: v.Field(i).Addr().Interface().(*string)}
	}
	return out
}
