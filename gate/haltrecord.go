package gate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate/fleet"
)

// The halt record: one ConfigMap in the gate's namespace (chart-created,
// never overwritten by an upgrade) that the leader-elected loop of serve
// writes. A halt lives there until a person other than the requester of the
// failed rollout clears it with an annotation (docs/proof.md).

const (
	// AnnotationRequestedBy on a GPU Plan names its requester; the Plan
	// webhook admits it only when it equals the user who writes the Plan,
	// so a halt can name who started the failed rollout.
	AnnotationRequestedBy = "gpu-upgrade-gate.io/requested-by"
	// ClearAnnotationPrefix + hardware key, on the halt record, clears that
	// hardware's halt; its value is the reason.
	ClearAnnotationPrefix = "gpu-upgrade-gate.io/clear-"
	// HaltKeyPrefix + hardware key holds a halt; ClearedKeyPrefix + hardware
	// key the last cleared halt (fleet's).
	HaltKeyPrefix    = fleet.HaltKeyPrefix
	ClearedKeyPrefix = fleet.ClearedKeyPrefix
)

// HaltConfig is the `halts` section of the config.
type HaltConfig struct {
	// ConfigMap is the halt record's name, in the gate's namespace.
	ConfigMap string `json:"configMap"`
	// RecoveryTimeout: a node whose Ready or validator Pod is not back this
	// long after its upgrade moved halts its hardware's rollout.
	RecoveryTimeout metav1.Duration `json:"recoveryTimeout"`
}

// DefaultHaltConfig: the chart's ConfigMap name, one hour to come back.
func DefaultHaltConfig() HaltConfig {
	return HaltConfig{ConfigMap: "gpu-upgrade-gate-halts", RecoveryTimeout: metav1.Duration{Duration: time.Hour}}
}

func (h *HaltConfig) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if msgs := validation.IsDNS1123Subdomain(h.ConfigMap); len(msgs) > 0 {
		errs = append(errs, field.Invalid(path.Child("configMap"), h.ConfigMap, msgs[0]))
	}
	if h.RecoveryTimeout.Duration <= 0 {
		errs = append(errs, field.Invalid(path.Child("recoveryTimeout"), h.RecoveryTimeout.Duration.String(), "must be above 0, e.g. 1h"))
	}
	return errs
}

// ClearAnnotation is the annotation that clears the halt of a hardware key
// (a name part holds 63 characters: a longer key is hashed).
func ClearAnnotation(key string) string {
	name := "clear-" + key
	if len(name) > validation.LabelValueMaxLength {
		sum := sha256.Sum256([]byte(key))
		name = "clear-" + hex.EncodeToString(sum[:8])
	}
	return "gpu-upgrade-gate.io/" + name
}

// HaltRecordName is "namespace/name" of the configured halt record.
func (c *Config) HaltRecordName() string { return c.Namespace + "/" + c.Halts.ConfigMap }

// MissingHaltRecord is the record when the ConfigMap cannot be read.
func (c *Config) MissingHaltRecord(err error) HaltRecord {
	return HaltRecord{Name: c.HaltRecordName(), Err: err}
}

// ParseHaltRecord reads the halt ConfigMap strictly: every key is a halt or a
// cleared halt of the hardware it names, every halt names its node, signal
// and time; anything else is an error naming the key.
func (c *Config) ParseHaltRecord(cm *corev1.ConfigMap) HaltRecord {
	r := HaltRecord{Name: c.HaltRecordName(), Halts: map[string]Halt{}, Cleared: map[string]ClearedHalt{}, Clears: map[string]string{}}
	var errs field.ErrorList
	if len(cm.BinaryData) > 0 {
		errs = append(errs, field.Forbidden(field.NewPath("binaryData"), "the halt record holds no binary data"))
	}
	if cm.Immutable != nil && *cm.Immutable {
		// The API server refuses every later write: no halt could be
		// recorded and no clear applied, so the record fails closed.
		errs = append(errs, field.Forbidden(field.NewPath("immutable"), "the halt record is immutable, so the gate cannot write it; delete it (allowed while immutable) and recreate it empty"))
	}
	for _, k := range sortedKeys(cm.Data) {
		path := field.NewPath("data").Key(k)
		switch {
		case strings.HasPrefix(k, HaltKeyPrefix):
			var h Halt
			if err := strictJSON(cm.Data[k], &h); err != nil {
				errs = append(errs, field.Invalid(path, cm.Data[k], "expected a halt as JSON ({\"hardware\":[...],\"node\":...,\"signal\":...,\"seenAt\":...}): "+err.Error()))
			} else if err := h.Check(strings.TrimPrefix(k, HaltKeyPrefix)); err != nil {
				errs = append(errs, field.Invalid(path, cm.Data[k], err.Error()))
			} else {
				r.Halts[h.HardwareKey()] = h
			}
		case strings.HasPrefix(k, ClearedKeyPrefix):
			var ch ClearedHalt
			if err := strictJSON(cm.Data[k], &ch); err != nil {
				errs = append(errs, field.Invalid(path, cm.Data[k], "expected a cleared halt as JSON ({\"halt\":{...},\"reason\":...,\"clearedAt\":...}): "+err.Error()))
			} else if err := ch.Halt.Check(strings.TrimPrefix(k, ClearedKeyPrefix)); err != nil {
				errs = append(errs, field.Invalid(path, cm.Data[k], err.Error()))
			} else {
				r.Cleared[ch.Halt.HardwareKey()] = ch
			}
		default:
			errs = append(errs, field.NotSupported(path, k, []string{HaltKeyPrefix + "<hardware key>", ClearedKeyPrefix + "<hardware key>"}))
		}
	}
	for key := range r.Halts {
		if reason, ok := cm.Annotations[ClearAnnotation(key)]; ok {
			r.Clears[key] = reason
		}
	}
	if len(errs) > 0 {
		r.Err = errs.ToAggregate()
	}
	return r
}

func strictJSON(s string, v any) error {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// KeepHalts is one turn of the halt loop: cleared halts (a clear annotation
// the webhook admitted) leave the record, each hardware's new failure
// signal becomes its halt unless one is kept already or it is the cleared
// halt's signal still visible, and a cleared entry is forgotten once its
// signal is gone (the failure recurring then halts again). It returns the
// next record and what changed; a record that fails closed is left alone.
func KeepHalts(cfg *Config, cl *Cluster, rec HaltRecord, now time.Time) (HaltRecord, []string) {
	if rec.Err != nil {
		return rec, nil
	}
	next := HaltRecord{Name: rec.Name, Halts: maps.Clone(rec.Halts), Cleared: maps.Clone(rec.Cleared), Clears: map[string]string{}}
	if next.Halts == nil {
		next.Halts = map[string]Halt{}
	}
	if next.Cleared == nil {
		next.Cleared = map[string]ClearedHalt{}
	}
	var changes []string
	for _, key := range sortedKeys(rec.Clears) {
		if h, ok := next.Halts[key]; ok {
			next.Cleared[key] = ClearedHalt{Halt: h, Reason: rec.Clears[key], ClearedAt: now}
			delete(next.Halts, key)
			changes = append(changes, fmt.Sprintf("cleared %s (%s): %s", key, h, rec.Clears[key]))
		}
	}
	detected := DetectHalts(cfg, cl, now)
	for _, d := range next.Unrecorded(detected) {
		next.Halts[d.HardwareKey()] = d
		changes = append(changes, fmt.Sprintf("halted %s: %s", d.HardwareKey(), d))
	}
	for key, ch := range next.Cleared {
		if !slices.ContainsFunc(detected, ch.Halt.SameSignal) {
			delete(next.Cleared, key)
			changes = append(changes, fmt.Sprintf("forgot cleared %s: its signal is gone", key))
		}
	}
	slices.Sort(changes)
	return next, changes
}
