package qualification

import (
	"reflect"
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
