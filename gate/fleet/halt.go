package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The halt record's keys: HaltKeyPrefix + hardware key holds a halt;
// ClearedKeyPrefix + hardware key the last cleared halt (so the same
// signal, still visible, does not halt again).
const (
	HaltKeyPrefix    = "halt."
	ClearedKeyPrefix = "cleared."
)

// Halt is a failure of a node moving to a destination tuple, for its
// hardware: what stops the line (issue 12 item 3). gate.DetectHalts finds
// the signals; gate.KeepHalts keeps them in the halt record (a ConfigMap
// the leader-elected loop of serve writes), so a halt outlives its signal,
// and only a person other than the rollout's requester clears it.
type Halt struct {
	// Hardware is the record's hardware, sorted.
	Hardware []string `json:"hardware"`
	Node     string   `json:"node"`
	// Signal says what failed, with the value seen.
	Signal string `json:"signal"`
	// SeenAt is the signal's own timestamp when it has one (a Job's Failed
	// condition, a node condition's transition, the end of a recovery
	// timeout), else the time it was seen.
	SeenAt time.Time `json:"seenAt"`
	Plan   string    `json:"plan"`
	Record string    `json:"record"`
	// RequestedBy is the Plan's requester as the Plan webhook attested it
	// (annotation gpu-upgrade-gate.io/requested-by); empty when the Plan
	// did not carry it, and then only the break-glass group clears.
	RequestedBy string `json:"requestedBy,omitempty"`
	// MovedBy is who pulled the node into the Plan, as the Node webhook
	// attested it (annotation gpu-upgrade-gate.io/moved-by on the node);
	// neither they nor the requester may clear the halt.
	MovedBy string `json:"movedBy,omitempty"`
	// Pending: the review's own facts show the signal and the halt record
	// does not hold it yet (the halt loop records it on its next turn). It
	// holds like a kept halt; it is never stored.
	Pending bool `json:"-"`
}

// SameSignal: the same failure of the same node seen again (its SeenAt may
// be the moment it was seen, so it is not compared).
func (h Halt) SameSignal(o Halt) bool {
	return h.Node == o.Node && h.Signal == o.Signal && h.Plan == o.Plan && slices.Equal(h.Hardware, o.Hardware)
}

// String is the halt in one line, for messages and audit annotations.
func (h Halt) String() string {
	pending := ""
	if h.Pending {
		pending = "; seen now, being recorded"
	}
	moved := ""
	if h.MovedBy != "" {
		moved = ", moved into the Plan by " + h.MovedBy
	}
	return fmt.Sprintf("node %s: %s (seen %s, Plan %s, record %s%s%s)", h.Node, h.Signal, Stamp(h.SeenAt), h.Plan, h.Record, moved, pending)
}

// HardwareKey is the halt's key: one halt per hardware, in a form a
// ConfigMap key accepts.
func (h Halt) HardwareKey() string { return HardwareKey(h.Hardware) }

// HardwareKey spells an identity set as a ConfigMap key.
func HardwareKey(hw []string) string {
	return IdentityKey(strings.Join(hw, "."))
}

// Check: a halt names its hardware (under the key it is stored at), node,
// signal and time.
func (h Halt) Check(key string) error {
	switch {
	case len(h.Hardware) == 0 || !slices.IsSorted(h.Hardware):
		return errors.New("hardware must list the record's GPU identities, sorted")
	case h.HardwareKey() != key:
		return fmt.Errorf("stored under hardware key %q but its hardware is %q", key, h.HardwareKey())
	case h.Node == "" || h.Signal == "" || h.SeenAt.IsZero():
		return errors.New("a halt names its node, signal and seenAt")
	}
	return nil
}

// Stamp spells a time in messages (RFC 3339, UTC).
func Stamp(t time.Time) string {
	if t.IsZero() {
		return "<unknown time>"
	}
	return t.UTC().Format(time.RFC3339)
}

// ClearedHalt is a halt a person cleared.
type ClearedHalt struct {
	Halt      Halt      `json:"halt"`
	Reason    string    `json:"reason"`
	ClearedAt time.Time `json:"clearedAt"`
}

// HaltRecord is the halt record as read (gate.Config.ParseHaltRecord). The
// zero value holds no halts (an adapter that keeps none, e.g. the CLI on a
// snapshot without it).
type HaltRecord struct {
	// Name is "namespace/name" of the ConfigMap.
	Name string
	// Halts and Cleared by hardware key; Clears are the clear annotations
	// present (hardware key to reason).
	Halts   map[string]Halt
	Cleared map[string]ClearedHalt
	Clears  map[string]string
	// Err: the record is missing or does not parse; every forward move of
	// every hardware is then refused (fail closed).
	Err error
}

// Halted says whether a forward move of hardware hw is held, and by what;
// ok is false when the record itself fails closed.
func (r *HaltRecord) Halted(hw []string) (Halt, bool) {
	h, ok := r.Halts[HardwareKey(hw)]
	return h, ok
}

// Describe is what holds hardware hw, for the inventory: its halt, or the
// record failing closed; "" when nothing does.
func (r *HaltRecord) Describe(hw []string) string {
	if r.Err != nil {
		return fmt.Sprintf("every rollout halted: halt record %s cannot be read (%v)", r.Name, r.Err)
	}
	if h, ok := r.Halted(hw); ok {
		return fmt.Sprintf("%s halted: %s", strings.Join(h.Hardware, ","), h)
	}
	return ""
}

// Data is the record's ConfigMap data.
func (r *HaltRecord) Data() map[string]string {
	out := map[string]string{}
	for k, h := range r.Halts {
		b, _ := json.Marshal(h)
		out[HaltKeyPrefix+k] = string(b)
	}
	for k, ch := range r.Cleared {
		b, _ := json.Marshal(ch)
		out[ClearedKeyPrefix+k] = string(b)
	}
	return out
}

// Unrecorded are the detected halts the record does not hold: each of a
// hardware without a kept halt, unless it is the signal of the halt a
// person cleared, still visible. The halt loop adds them (gate.KeepHalts);
// a decision holds them at once (gate's haltsNow).
func (r *HaltRecord) Unrecorded(detected []Halt) []Halt {
	var out []Halt
	for _, d := range detected {
		key := d.HardwareKey()
		if _, kept := r.Halts[key]; kept {
			continue
		}
		if ch, ok := r.Cleared[key]; ok && ch.Halt.SameSignal(d) {
			continue
		}
		out = append(out, d)
	}
	return out
}
