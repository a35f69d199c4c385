package qualification

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxLoadProblems caps how many loader problems one error lists, so a hostile
// record cannot produce a huge admission message.
const maxLoadProblems = 20

// LoadError is returned when a record does not load. It lists every problem
// the loader found (each naming the line or field, the value seen and what is
// expected), so a reviewer can fix them in one pass.
type LoadError struct {
	Problems []string
}

func (e *LoadError) Error() string {
	return strings.Join(e.Problems, "; ")
}

func loadErrorf(format string, args ...any) *LoadError {
	return &LoadError{Problems: []string{fmt.Sprintf(format, args...)}}
}

// Load reads one record strictly from r. It reads at most MaxRecordBytes+1
// bytes, so an oversize input is refused without being read whole.
func Load(r io.Reader) (*Record, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxRecordBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read record: %w", err)
	}
	if len(data) > MaxRecordBytes {
		return nil, loadErrorf("record is more than %d bytes; at most %d are allowed", MaxRecordBytes, MaxRecordBytes)
	}
	return parse(data)
}

// Parse loads one record strictly from data: one YAML (or JSON) document, at
// most MaxRecordBytes, a mapping with only known fields, no duplicate keys, no
// anchors or aliases, and real booleans.
func Parse(data []byte) (*Record, error) {
	if len(data) > MaxRecordBytes {
		return nil, loadErrorf("record is %d bytes; at most %d are allowed", len(data), MaxRecordBytes)
	}
	return parse(data)
}

// FromConfigMap loads the record stored under ConfigMapKey in cm's data. A
// record in binaryData is refused: reviewers read data, and binaryData would
// hide the text from `kubectl get -o yaml`.
func FromConfigMap(cm *corev1.ConfigMap) (*Record, error) {
	if cm == nil {
		return nil, errors.New("no ConfigMap given")
	}
	name := cm.Name
	if cm.Namespace != "" {
		name = cm.Namespace + "/" + cm.Name
	}
	if _, ok := cm.BinaryData[ConfigMapKey]; ok {
		return nil, fmt.Errorf("ConfigMap %s holds %q in binaryData; put the record as text under data.%s", name, ConfigMapKey, ConfigMapKey)
	}
	text, ok := cm.Data[ConfigMapKey]
	if !ok {
		return nil, fmt.Errorf("ConfigMap %s has no data key %q; the record must be stored under data.%s", name, ConfigMapKey, ConfigMapKey)
	}
	rec, err := Parse([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s data.%s: %w", name, ConfigMapKey, err)
	}
	return rec, nil
}

// decodeNodes runs the YAML parser. yaml.v3 turns its own failures into
// errors; any other panic from it is turned into an error too, so a malformed
// record can never crash the webhook.
func decodeNodes(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("yaml parser failed: %v", v)
		}
	}()
	return dec.Decode(n)
}

// parse loads data without the size limit (callers enforce it).
func parse(data []byte) (*Record, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := decodeNodes(dec, &doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, loadErrorf("record is empty; expected one YAML mapping with the fields %s", strings.Join(topLevelFields(""), ", "))
		}
		return nil, loadErrorf("record is not valid YAML: %v", err)
	}
	var extra yaml.Node
	switch err := decodeNodes(dec, &extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, loadErrorf("record holds more than one YAML document and the rest is not valid YAML (%v); a record is exactly one document", err)
	default:
		return nil, loadErrorf("record holds more than one YAML document (a second one starts at line %d); a record is exactly one document: remove the extra \"---\"", extra.Line)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, loadErrorf("record is not a single YAML document")
	}
	root := doc.Content[0]
	if isNull(root) {
		if root.Value == "" {
			return nil, loadErrorf("record is empty; expected one YAML mapping with the fields %s", strings.Join(topLevelFields(""), ", "))
		}
		return nil, loadErrorf("record is null (%q); expected one YAML mapping with the fields %s", root.Value, strings.Join(topLevelFields(""), ", "))
	}

	d := &decoder{}
	d.checkNodes(root)
	if len(d.errs) > 0 {
		return nil, d.err()
	}
	if root.Kind != yaml.MappingNode {
		return nil, loadErrorf("line %d: record must be a YAML mapping of fields (%s), got %s", root.Line, strings.Join(topLevelFields(""), ", "), describe(root))
	}
	d.apiVersion = peekAPIVersion(root)
	rec := &Record{}
	d.record(root, rec)
	if len(d.errs) > 0 {
		return nil, d.err()
	}
	return rec, nil
}

// decoder walks the node tree against the record schema, collecting every
// problem with its line and field path.
type decoder struct {
	apiVersion string
	errs       []string
	dropped    int
}

func (d *decoder) addf(n *yaml.Node, format string, args ...any) {
	if len(d.errs) >= maxLoadProblems {
		d.dropped++
		return
	}
	d.errs = append(d.errs, fmt.Sprintf("line %d: ", n.Line)+fmt.Sprintf(format, args...))
}

func (d *decoder) err() error {
	p := append([]string(nil), d.errs...)
	if d.dropped > 0 {
		p = append(p, fmt.Sprintf("and %d more problems", d.dropped))
	}
	return &LoadError{Problems: p}
}

// checkNodes refuses anchors and aliases anywhere: a record has no use for
// them, and refusing them rules out alias-expansion attacks. Custom tags on
// mappings and sequences are refused here too (scalars are checked where they
// load).
func (d *decoder) checkNodes(n *yaml.Node) {
	if n.Kind == yaml.AliasNode {
		d.addf(n, "alias *%s is not allowed; a record uses no anchors or aliases: write the value out", Clip(n.Value))
		return
	}
	if n.Anchor != "" {
		d.addf(n, "anchor &%s is not allowed; a record uses no anchors or aliases: write the value out", Clip(n.Anchor))
	}
	if n.Style&yaml.TaggedStyle != 0 && (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) &&
		n.ShortTag() != "!!map" && n.ShortTag() != "!!seq" {
		d.addf(n, "explicit tag %q is not allowed; a record uses plain mappings and sequences", Clip(n.Tag))
	}
	for _, c := range n.Content {
		d.checkNodes(c)
	}
}

// fieldSpec is one known key of a mapping and how to load its value.
type fieldSpec struct {
	name string
	load func(path *field.Path, v *yaml.Node)
}

var tupleFields = TupleKeys()
var canaryFields = []string{"completedAt", "allocationPassed", "monitoringPassed", "rollbackPassed", "evidence", "checks"}
var checkFields = []string{"kind", "level", "passed", "value", "unit", "baseline", "maxDeviationPercent", "explanation"}

// topLevelFields lists the record's keys for apiVersion; source is listed
// only where it is allowed.
func topLevelFields(apiVersion string) []string {
	f := []string{"apiVersion", "kind", "id", "state", "approvedBy", "sourceRevision", "hardware", "target"}
	if apiVersion != APIVersionKubeDC {
		f = append(f, "source")
	}
	return append(f, "canary")
}

// peekAPIVersion finds the apiVersion before the walk, because whether
// `source` is allowed depends on it and it may come after `source`.
func peekAPIVersion(root *yaml.Node) string {
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Value == "apiVersion" && v.Kind == yaml.ScalarNode {
			return v.Value
		}
	}
	return ""
}

func (d *decoder) record(root *yaml.Node, rec *Record) {
	specs := []fieldSpec{
		{"apiVersion", d.str(&rec.APIVersion)},
		{"kind", d.str(&rec.Kind)},
		{"id", d.str(&rec.ID)},
		{"state", d.str(&rec.State)},
		{"approvedBy", d.str(&rec.ApprovedBy)},
		{"sourceRevision", d.str(&rec.SourceRevision)},
		{"hardware", d.stringList(&rec.Hardware)},
		{"target", d.tuple(&rec.Target)},
		{"source", func(path *field.Path, v *yaml.Node) {
			if d.apiVersion == APIVersionKubeDC {
				d.addf(v, "%s: field is not allowed in %s records; use apiVersion %s to record the source tuple", path, APIVersionKubeDC, APIVersionGate)
				return
			}
			if isNull(v) {
				return
			}
			rec.Source = &Tuple{}
			d.tuple(rec.Source)(path, v)
		}},
		{"canary", d.canary(&rec.Canary)},
	}
	d.mapping(nil, root, specs, topLevelFields(d.apiVersion))
}

// mapping loads a mapping node: keys must be unique known strings.
func (d *decoder) mapping(path *field.Path, n *yaml.Node, specs []fieldSpec, known []string) {
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.addf(k, "%s: a key must be a plain string, got %s", pathOrRecord(path), describe(k))
			continue
		}
		kp := child(path, k.Value)
		shown := child(path, Clip(k.Value)).String()
		if line, dup := first[k.Value]; dup {
			d.addf(k, "duplicate key %q at line %d; first at line %d", shown, k.Line, line)
			continue
		}
		first[k.Value] = k.Line
		var spec *fieldSpec
		for j := range specs {
			if specs[j].name == k.Value {
				spec = &specs[j]
				break
			}
		}
		if spec == nil {
			where := "known fields: "
			if path != nil {
				where = "known fields of " + path.String() + ": "
			}
			hint := ""
			if path == nil && (k.Value == "metadata" || k.Value == "spec") {
				hint = "; a record is a flat document without metadata or spec"
			}
			d.addf(k, "unknown field %q%s; %s%s", shown, hint, where, strings.Join(known, ", "))
			continue
		}
		spec.load(kp, v)
	}
}

func child(path *field.Path, name string) *field.Path {
	if path == nil {
		return field.NewPath(name)
	}
	return path.Child(name)
}

func pathOrRecord(path *field.Path) string {
	if path == nil {
		return "record"
	}
	return path.String()
}

func (d *decoder) tuple(t *Tuple) func(*field.Path, *yaml.Node) {
	var specs []fieldSpec
	for _, m := range t.Members() {
		load := d.str(m.Value)
		if IsOptionalTupleKey(m.Key) {
			load = func(path *field.Path, v *yaml.Node) {
				if d.apiVersion == APIVersionKubeDC {
					d.addf(v, "%s: field is not allowed in %s records; use apiVersion %s to name the DRA driver version", path, APIVersionKubeDC, APIVersionGate)
					return
				}
				d.str(m.Value)(path, v)
			}
		}
		specs = append(specs, fieldSpec{m.Key, load})
	}
	return func(path *field.Path, v *yaml.Node) {
		if isNull(v) {
			return
		}
		if v.Kind != yaml.MappingNode {
			d.addf(v, "%s: expected a mapping with the fields %s, got %s", path, strings.Join(tupleFields, ", "), describe(v))
			return
		}
		d.mapping(path, v, specs, tupleFields)
	}
}

func (d *decoder) canary(c *Canary) func(*field.Path, *yaml.Node) {
	specs := []fieldSpec{
		{"completedAt", d.str(&c.CompletedAt)},
		{"allocationPassed", d.boolean(&c.AllocationPassed)},
		{"monitoringPassed", d.boolean(&c.MonitoringPassed)},
		{"rollbackPassed", d.boolean(&c.RollbackPassed)},
		{"evidence", d.str(&c.Evidence)},
		{"checks", func(path *field.Path, v *yaml.Node) {
			if d.apiVersion == APIVersionKubeDC {
				d.addf(v, "%s: field is not allowed in %s records; use apiVersion %s to record typed canary checks", path, APIVersionKubeDC, APIVersionGate)
				return
			}
			d.checks(&c.Checks)(path, v)
		}},
	}
	return func(path *field.Path, v *yaml.Node) {
		if isNull(v) {
			return
		}
		if v.Kind != yaml.MappingNode {
			d.addf(v, "%s: expected a mapping with the fields %s, got %s", path, strings.Join(canaryFields, ", "), describe(v))
			return
		}
		d.mapping(path, v, specs, canaryFields)
	}
}

// checks loads canary.checks: a sequence of mappings with only the known
// fields; figures are plain numbers.
func (d *decoder) checks(dst *[]CanaryCheck) func(*field.Path, *yaml.Node) {
	return func(path *field.Path, v *yaml.Node) {
		if isNull(v) {
			return
		}
		if v.Kind != yaml.SequenceNode {
			d.addf(v, "%s: expected a sequence of checks (e.g. \"- kind: nccl-allreduce\"), got %s", path, describe(v))
			return
		}
		out := make([]CanaryCheck, len(v.Content))
		for i, item := range v.Content {
			c, ip := &out[i], path.Index(i)
			if item.Kind != yaml.MappingNode {
				d.addf(item, "%s: expected a mapping with the fields %s, got %s", ip, strings.Join(checkFields, ", "), describe(item))
				continue
			}
			d.mapping(ip, item, []fieldSpec{
				{"kind", d.str(&c.Kind)},
				{"level", d.integer(&c.Level)},
				{"passed", func(p *field.Path, n *yaml.Node) { c.Passed = new(bool); d.boolean(c.Passed)(p, n) }},
				{"value", d.number(&c.Value)},
				{"unit", d.str(&c.Unit)},
				{"baseline", d.number(&c.Baseline)},
				{"maxDeviationPercent", d.number(&c.MaxDeviationPercent)},
				{"explanation", d.str(&c.Explanation)},
			}, checkFields)
		}
		*dst = out
	}
}

// number loads a figure: a plain YAML int or float, finite. A quoted
// number is refused like a quoted boolean, so "12.5" and 12.5 never mean
// different things to different readers.
func (d *decoder) number(dst **float64) func(*field.Path, *yaml.Node) {
	return func(path *field.Path, v *yaml.Node) {
		if v.Kind != yaml.ScalarNode || v.Style != 0 || (v.ShortTag() != "!!int" && v.ShortTag() != "!!float") {
			hint := ""
			if v.Kind == yaml.ScalarNode && v.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
				hint = " (quotes make it a string)"
			}
			d.addf(v, "%s: %s is not a number; write a plain number such as 182.5%s", path, describe(v), hint)
			return
		}
		f, err := parseFigure(v.Value)
		if err != nil {
			d.addf(v, "%s: %q is %v; write a plain number such as 182.5", path, Clip(v.Value), err)
			return
		}
		*dst = &f
	}
}

// integer loads a small whole number (a DCGM level).
func (d *decoder) integer(dst *int) func(*field.Path, *yaml.Node) {
	return func(path *field.Path, v *yaml.Node) {
		if v.Kind == yaml.ScalarNode && v.Style == 0 && v.ShortTag() == "!!int" {
			if n, err := strconv.Atoi(v.Value); err == nil && n >= -1000 && n <= 1000 {
				*dst = n
				return
			}
		}
		d.addf(v, "%s: %s is not a whole number; write e.g. 3", path, describe(v))
	}
}

// str loads a string field. Any scalar is accepted and keeps its source text
// (`driver: 580.130` stays "580.130"); null loads as "" and Check reports it.
// Control characters other than tab and newline (only reachable through
// escapes in quoted scalars) are refused: the values end up in admission
// messages and audit annotations, where such characters can hide or forge
// text, and some (U+0085) do not survive a YAML round trip.
func (d *decoder) str(dst *string) func(*field.Path, *yaml.Node) {
	return func(path *field.Path, v *yaml.Node) {
		if s, ok := d.scalarString(path, v); ok {
			*dst = s
		}
	}
}

func (d *decoder) scalarString(path *field.Path, v *yaml.Node) (string, bool) {
	if v.Kind != yaml.ScalarNode {
		d.addf(v, "%s: expected a string, got %s", path, describe(v))
		return "", false
	}
	if v.Style&yaml.TaggedStyle != 0 && v.ShortTag() != "!!str" {
		d.addf(v, "%s: explicit tag %q is not allowed; write %q as a plain or quoted string", path, Clip(v.Tag), Clip(v.Value))
		return "", false
	}
	if isNull(v) {
		return "", true
	}
	for i, c := range v.Value {
		if unicode.IsControl(c) && c != '\t' && c != '\n' {
			d.addf(v, "%s: contains the control character %U at byte %d; only printable text, tabs and newlines are allowed", path, c, i)
			return "", false
		}
	}
	return v.Value, true
}

// stringList loads a sequence of strings; a bare scalar is refused so that a
// one-element list is never confused with a comma-separated value.
func (d *decoder) stringList(dst *[]string) func(*field.Path, *yaml.Node) {
	return func(path *field.Path, v *yaml.Node) {
		if isNull(v) {
			return
		}
		if v.Kind != yaml.SequenceNode {
			d.addf(v, "%s: expected a sequence of strings (e.g. \"- 10de:1db6/10de:124a\"), got %s", path, describe(v))
			return
		}
		out := make([]string, 0, len(v.Content))
		for i, item := range v.Content {
			if s, ok := d.scalarString(path.Index(i), item); ok {
				out = append(out, s)
			}
		}
		*dst = out
	}
}

// boolean loads a boolean field. Only a plain true/false (any case yaml
// resolves as !!bool) is accepted: yes/on/"true"/1 are refused, because the
// anchor CLI silently read yes/on as true.
func (d *decoder) boolean(dst *bool) func(*field.Path, *yaml.Node) {
	return func(path *field.Path, v *yaml.Node) {
		if v.Kind != yaml.ScalarNode {
			d.addf(v, "%s: %s is not a boolean; write true or false", path, describe(v))
			return
		}
		if isNull(v) {
			*dst = false
			return
		}
		if v.Style == 0 && v.ShortTag() == "!!bool" {
			switch v.Value {
			case "true", "True", "TRUE":
				*dst = true
				return
			case "false", "False", "FALSE":
				*dst = false
				return
			}
		}
		hint := ""
		switch {
		case v.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0:
			hint = " (quotes make it a string)"
		case v.Style&yaml.TaggedStyle != 0:
			hint = " (explicit tags are not allowed)"
		case isYAML11Bool(v.Value):
			hint = " (YAML 1.1 words such as yes, no, on and off are not booleans here)"
		}
		d.addf(v, "%s: %q is not a boolean; write true or false%s", path, Clip(v.Value), hint)
	}
}

func isYAML11Bool(s string) bool {
	switch strings.ToLower(s) {
	case "y", "yes", "n", "no", "on", "off":
		return true
	}
	return false
}

// isNull reports a plain (untagged) null: empty, ~, null, Null or NULL.
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Style == 0 && n.ShortTag() == "!!null"
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a sequence"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	case yaml.ScalarNode:
		return fmt.Sprintf("the scalar %q", Clip(n.Value))
	}
	return "an unknown node"
}

// ClipLength bounds how much of a value seen a message repeats.
const ClipLength = 256

// Clip shortens a value seen for a message, noting its full length, so a
// hostile object cannot blow up a denial, a log line or an audit entry. Every
// message that echoes a value uses it.
func Clip(s string) string { return ClipTo(s, ClipLength) }

// ClipTo is Clip with another bound, for whole sentences.
func ClipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes in all)", s[:cut], len(s))
}
