package webhook

import (
	"hash/maphash"
	"strings"
	"sync/atomic"
)

// fleetStrings is the one copy of the short strings that repeat across the
// fleet: label keys and most values, condition types and statuses, kernel
// and kubelet versions, resource names. The review scan (nodescan.go) takes
// a Node review's 100-odd strings from here instead of allocating them, and
// the cache transforms (stripNode) keep the cached Nodes' strings here, so
// 5,000 Nodes share one copy of each key.
//
// A fixed table of atomic slots: no lock, a lookup that does not allocate,
// and bounded whatever the input (a collision replaces the slot, so a flood
// of unique label values costs dedup, never memory). Strong, on purpose:
// unique.Make(s).Value() only shares a string while some Handle is alive,
// so after a collection each Node update brought its own copies again
// (TestFleetStringsOutliveCollections).
var fleetStrings internTable

type internTable struct {
	seed  maphash.Seed
	slots [16384]atomic.Pointer[string]
}

func init() { fleetStrings.seed = maphash.MakeSeed() }

// maxIntern: longer strings (annotations' JSON, say) are copied, not kept.
const maxIntern = 96

// get returns the table's copy of b, storing a new one on a miss.
func (t *internTable) get(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > maxIntern {
		return string(b)
	}
	slot := t.slot(maphash.Bytes(t.seed, b))
	if p := slot.Load(); p != nil && *p == string(b) {
		return *p
	}
	str := string(b)
	slot.Store(&str)
	return str
}

// intern is get for a string a decoder already allocated: s itself is
// returned when it is too long to keep, and a clone is kept on a miss (s
// may share a larger buffer the table must not hold on to).
func (t *internTable) intern(s string) string {
	if s == "" || len(s) > maxIntern {
		return s
	}
	slot := t.slot(maphash.String(t.seed, s))
	if p := slot.Load(); p != nil && *p == s {
		return *p
	}
	str := strings.Clone(s)
	slot.Store(&str)
	return str
}

func (t *internTable) slot(h uint64) *atomic.Pointer[string] {
	return &t.slots[h%uint64(len(t.slots))]
}
