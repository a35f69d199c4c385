package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// jsonBlocker and jsonDecision are the -o json shape, shared by every
// command: a stable interface, so keys are always present (node and field
// may be "", record may be null).
type jsonBlocker struct {
	Code    gate.Code `json:"code"`
	Message string    `json:"message"`
	Field   string    `json:"field"`
	Node    string    `json:"node"`
	// Nodes lists every node of a blocker that several nodes share.
	Nodes []string `json:"nodes,omitempty"`
}

type jsonDecision struct {
	// Object is set by check ("Plan ns/name"), File by validate-record.
	Object   string           `json:"object,omitempty"`
	File     string           `json:"file,omitempty"`
	Allowed  bool             `json:"allowed"`
	Blockers []jsonBlocker    `json:"blockers"`
	Warnings []string         `json:"warnings"`
	Record   *gate.RecordInfo `json:"record"`
}

// toJSON renders d; style is the command's text style, so validate-record's
// messages keep the value seen ("Unsupported value: \"draft\": ...").
func toJSON(d gate.Decision, style lineStyle) jsonDecision {
	j := jsonDecision{Allowed: d.Allowed, Blockers: []jsonBlocker{}, Warnings: []string{}, Record: d.Record}
	for _, b := range d.Blockers {
		msg := b.Err.Detail
		if style == styleFieldError && b.Err.Field != "" {
			msg = b.Err.ErrorBody()
		}
		j.Blockers = append(j.Blockers, jsonBlocker{Code: b.Code, Message: msg, Field: b.Err.Field, Node: b.Node, Nodes: b.Nodes})
	}
	j.Warnings = append(j.Warnings, d.Warnings...)
	return j
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// lineStyle is how a blocker reads on one line of text.
type lineStyle int

const (
	// styleMessage: "[Code] message" (upgrade-check, as the anchor prints).
	styleMessage lineStyle = iota
	// styleWhere: "[Code] message (field: spec.concurrency, node: x)" (check).
	styleWhere
	// styleFieldError: "[Code] target.rke2: Required value: ..." (validate-record).
	styleFieldError
)

func blockerLine(b gate.Blocker, style lineStyle) string {
	msg := b.Err.Detail
	switch style {
	case styleWhere:
		var where []string
		if b.Err.Field != "" {
			where = append(where, "field: "+b.Err.Field)
		}
		if b.Node != "" {
			where = append(where, "node: "+b.Node)
		}
		if len(b.Nodes) > 0 {
			where = append(where, fmt.Sprintf("nodes: %d, listed by -o json", len(b.Nodes)))
		}
		if len(where) > 0 {
			msg += " (" + strings.Join(where, ", ") + ")"
		}
	case styleFieldError:
		if b.Err.Field != "" {
			msg = b.Err.Error()
		}
	}
	return "[" + string(b.Code) + "] " + msg
}

// writeBlockers prints one line per blocker, each after prefix.
func writeBlockers(w io.Writer, d gate.Decision, prefix string, style lineStyle) {
	for _, b := range d.Blockers {
		fmt.Fprintln(w, prefix+blockerLine(b, style))
	}
}

// recordLine names the record a decision used.
func recordLine(r *gate.RecordInfo) string {
	if r == nil {
		return "none"
	}
	s := r.Ref()
	if r.ConfigMap != "" {
		s += " from ConfigMap " + r.ConfigMap
	}
	var facts []string
	switch {
	case r.Approval != "":
		facts = append(facts, r.Approval)
	case r.ApprovedBy != "":
		facts = append(facts, "approved by "+r.ApprovedBy)
	}
	if r.CompletedAt != "" {
		facts = append(facts, "canary completed "+r.CompletedAt)
	}
	if r.Expires != "" {
		facts = append(facts, "expires "+r.Expires)
	}
	if len(facts) > 0 {
		s += " (" + strings.Join(facts, ", ") + ")"
	}
	for _, x := range r.Explained {
		s += "; explained deviation: " + x
	}
	return s
}
