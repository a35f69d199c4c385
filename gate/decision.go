package gate

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// Audit annotation keys. The API server stores them as
// "<webhook name>/<key>" in the audit event of the request.
const (
	AuditDecision = "decision"
	AuditReasons  = "reasons"
	AuditRecord   = "record"
	// AuditApproval is who wrote and who approved the record the decision
	// used, as the record webhook attested them.
	AuditApproval   = "approval"
	AuditNodes      = "nodes"
	AuditExemption  = "exemption"
	AuditBreakGlass = "break-glass"
	// AuditRevoked marks a record edit allowed because it revokes the record.
	AuditRevoked  = "revoked"
	AuditProofs   = "proofs"
	AuditProofOff = "proof-off"
	// AuditHalts names the halts a decision relied on ("hardware@node").
	AuditHalts = "halts"
	// AuditWouldDeny holds the codes of a denial a webhook in warn or
	// audit mode admitted (decision is then allow); AuditEnforcement that
	// mode (EnforcementMode).
	AuditWouldDeny   = "would-deny"
	AuditEnforcement = "enforcement"
)

// Blocker is one violated rule. Err carries the field path of the object
// under review, the value seen and the detail ("what is wrong; what to do").
type Blocker struct {
	Code Code
	// Node names the node the blocker is about, when there is one.
	Node string
	// Nodes lists, sorted, every node of a blocker that stands for several
	// nodes with the same problem (settle); Node is then empty.
	Nodes []string
	// Plan is "namespace/name" of the Plan whose rules produced the blocker
	// during a Node review.
	Plan string
	Err  *field.Error
	// perNode is a node's sentence until settle formats it, once for every
	// node with the same problem.
	perNode *nodeSentence
}

// nodeSentence is a per-node blocker's detail, not yet formatted: nodes
// whose sentences differ only in the node's own name share one blocker.
type nodeSentence struct {
	// path is the field's, spelled once per group (Err.Field is set then).
	path   *field.Path
	format string
	args   []any
	// hardware is the node's GPU identity set (judge sets it): problems of
	// different hardware stay apart.
	hardware string
}

// Message is the blocker's line in a denial: "[Code] detail".
func (b Blocker) Message() string {
	var sb strings.Builder
	if b.Plan != "" {
		sb.WriteString("Plan ")
		sb.WriteString(b.Plan)
		sb.WriteString(": ")
	}
	sb.WriteString("[")
	sb.WriteString(string(b.Code))
	sb.WriteString("] ")
	sb.WriteString(b.Err.Detail)
	return sb.String()
}

// RecordInfo identifies the qualification record a decision used.
type RecordInfo struct {
	ConfigMap      string `json:"configMap,omitempty"`
	ID             string `json:"id"`
	SourceRevision string `json:"sourceRevision"`
	ApprovedBy     string `json:"approvedBy,omitempty"`
	// Approval is the attested approval state of the record's ConfigMap.
	Approval    string `json:"approval,omitempty"`
	CompletedAt string `json:"completedAt,omitempty"`
	Expires     string `json:"expires,omitempty"`
	// Explained are the canary checks outside their threshold that the
	// record explains (qualification.Record.ExplainedDeviations).
	Explained []string `json:"explained,omitempty"`
}

// Ref is "id@sourceRevision", the record's identity in audit annotations.
func (r *RecordInfo) Ref() string {
	if r == nil {
		return ""
	}
	return r.ID + "@" + strings.ToLower(r.SourceRevision)
}

// Decision is the engine's answer. Adapters render it; they never change it.
type Decision struct {
	Allowed bool
	// Object names what was reviewed, e.g. "Plan system-upgrade/gpu-canary".
	Object   string
	Blockers []Blocker
	Warnings []string
	Record   *RecordInfo
	// RecordRefs list several records ("id@rev") where one change uses one
	// per hardware identity (driver path).
	RecordRefs []string
	// Nodes are the pending GPU nodes (Plans) or the node under review.
	Nodes []string
	// Exemption names the configured exemption that allowed the request.
	Exemption string
	// Revoked: a record edit allowed because it leaves the record unable to
	// qualify anything (its blockers say why).
	Revoked bool
	// BreakGlass holds the reason given in the break-glass annotation when it
	// was honoured.
	BreakGlass string
	// Proofs are the node proofs the decision relied on ("node=proven" or
	// "node=unproven"); ProofOff the proof requirements switched off then.
	Proofs   []string
	ProofOff []ProofRequirement
	// Halts are the halts the decision relied on ("hardware key@node").
	Halts []string
}

// Codes lists the distinct blocker codes in the order they were found.
func (d *Decision) Codes() []Code {
	var codes []Code
	seen := map[Code]bool{}
	for _, b := range d.Blockers {
		if !seen[b.Code] {
			seen[b.Code] = true
			codes = append(codes, b.Code)
		}
	}
	return codes
}

// Message is the denial text: the object, then one line per blocker.
func (d *Decision) Message() string {
	if len(d.Blockers) == 0 {
		return d.Object + " is allowed"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s is denied by gpu-upgrade-gate (%d blocker", d.Object, len(d.Blockers))
	if len(d.Blockers) != 1 {
		sb.WriteString("s")
	}
	sb.WriteString("):")
	for _, b := range d.Blockers {
		sb.WriteString("\n")
		sb.WriteString(b.Message())
	}
	return sb.String()
}

// ErrorList renders the blockers as field errors for the API status causes.
func (d *Decision) ErrorList() field.ErrorList {
	errs := make(field.ErrorList, 0, len(d.Blockers))
	for _, b := range d.Blockers {
		e := *b.Err
		e.Detail = b.Message()
		errs = append(errs, &e)
	}
	return errs
}

// AuditAnnotations are attached to every response so the API server's audit
// log holds the decision, its reasons, the record and the nodes.
func (d *Decision) AuditAnnotations() map[string]string {
	a := map[string]string{AuditDecision: "allow"}
	if !d.Allowed {
		a[AuditDecision] = "deny"
	}
	if codes := d.Codes(); len(codes) > 0 {
		s := make([]string, len(codes))
		for i, c := range codes {
			s[i] = string(c)
		}
		a[AuditReasons] = strings.Join(s, ",")
	}
	if ref := d.Record.Ref(); ref != "" {
		a[AuditRecord] = ref
		if d.Record.Approval != "" {
			a[AuditApproval] = d.Record.Approval
		}
	} else if len(d.RecordRefs) > 0 {
		a[AuditRecord] = strings.Join(d.RecordRefs, ",")
	}
	if len(d.Nodes) > 0 {
		a[AuditNodes] = strings.Join(d.Nodes, ",")
	}
	if d.Exemption != "" {
		a[AuditExemption] = d.Exemption
	}
	if d.Revoked {
		a[AuditRevoked] = "true"
	}
	if d.BreakGlass != "" {
		a[AuditBreakGlass] = d.BreakGlass
	}
	if len(d.Halts) > 0 {
		a[AuditHalts] = strings.Join(d.Halts, ",")
	}
	if len(d.Proofs) > 0 {
		a[AuditProofs] = strings.Join(d.Proofs, ",")
		if len(d.ProofOff) > 0 {
			off := make([]string, len(d.ProofOff))
			for i, r := range d.ProofOff {
				off[i] = string(r)
			}
			a[AuditProofOff] = strings.Join(off, ",")
		}
	}
	return a
}

// findings collects one review's blockers and warnings; every rule adds,
// none stops the review.
type findings struct {
	blockers []Blocker
	warnings []string
}

func (f *findings) add(b Blocker) { f.blockers = append(f.blockers, b) }

func (f *findings) warn(format string, args ...any) {
	f.warnings = append(f.warnings, fmt.Sprintf(format, args...))
}

// The blocker builders every rule file uses: the field error type follows
// the problem (a forbidden state, an invalid value, a missing value).

// A blocker about one node keeps its sentence unformatted (perNode) until
// settle: hundreds of nodes with one problem are then formatted once.

func forbidden(code Code, node string, path *field.Path, format string, args ...any) Blocker {
	if node != "" {
		return Blocker{Code: code, Node: node, Err: field.Forbidden(nil, ""), perNode: &nodeSentence{path: path, format: format, args: args}}
	}
	return Blocker{Code: code, Node: node, Err: field.Forbidden(path, detail(format, args))}
}

func invalid(code Code, node string, path *field.Path, value any, format string, args ...any) Blocker {
	if s, ok := value.(string); ok {
		value = qualification.Clip(s)
	}
	if node != "" {
		return Blocker{Code: code, Node: node, Err: field.Invalid(nil, value, ""), perNode: &nodeSentence{path: path, format: format, args: args}}
	}
	return Blocker{Code: code, Node: node, Err: field.Invalid(path, value, detail(format, args))}
}

func required(code Code, node string, path *field.Path, format string, args ...any) Blocker {
	if node != "" {
		return Blocker{Code: code, Node: node, Err: field.Required(nil, ""), perNode: &nodeSentence{path: path, format: format, args: args}}
	}
	return Blocker{Code: code, Node: node, Err: field.Required(path, detail(format, args))}
}

// formatted is the blocker with its sentence written, for one that leaves
// the engine without settle.
func (b Blocker) formatted() Blocker {
	if b.perNode != nil {
		e := *b.Err
		e.Field, e.Detail = b.perNode.path.String(), detail(b.perNode.format, b.perNode.args)
		b.Err, b.perNode = &e, nil
	}
	return b
}

// maxDetail bounds a blocker's sentence, the backstop for a value that
// reached it unclipped.
const maxDetail = 2048

// clipBlocker bounds what a settled blocker echoes, whichever way it was
// built.
func clipBlocker(b *Blocker) {
	if b.Err == nil {
		return
	}
	e := *b.Err
	switch v := e.BadValue.(type) {
	case nil, bool, int, int32, int64, float64:
	case string:
		e.BadValue = qualification.Clip(v)
	default: // a selector, a list: clipped as printed
		if s := fmt.Sprintf("%v", v); len(s) > qualification.ClipLength {
			e.BadValue = qualification.Clip(s)
		}
	}
	e.Detail = qualification.ClipTo(e.Detail, maxDetail)
	b.Err = &e
}

// detail formats a blocker's message with every string value clipped
// (qualification.Clip): every blocker is built here, so no request value,
// however long, comes back whole in a denial, a log line or an audit entry.
// Errors are the engine's own sentences, whose values were clipped when
// they were written, and stay whole.
func detail(format string, args []any) string {
	clipped := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			clipped[i] = qualification.Clip(v)
		case fmt.Stringer:
			clipped[i] = qualification.Clip(v.String())
		default:
			clipped[i] = a
		}
	}
	return fmt.Sprintf(format, clipped...)
}

// settle fills a decision from its findings. Identical blockers (one
// review-wide fact judged once per transition) are reported once; nodes of
// one hardware with the same problem (the same code, field and sentence but
// for the node's name) share one blocker that counts and names them
// (nodeGroup), the way Cluster API aggregates a condition over machines:
// a select-all Plan is denied with a line per distinct problem, not one per
// node.
func (f *findings) settle(d *Decision) {
	seen := make(map[[4]string]bool, len(f.blockers))
	type bucket struct {
		code             Code
		format, hardware string
		path             *field.Path
		typ              field.ErrorType
	}
	buckets := map[bucket][]*nodeGroup{}
	var groups []*nodeGroup
	at := make([]int, 0, len(f.blockers)) // per blocker out: -1, or its group
	var out []Blocker
	for _, b := range f.blockers {
		if b.perNode == nil {
			clipBlocker(&b)
			k := [4]string{string(b.Code), b.Node, b.Err.Field, b.Err.Detail}
			if !seen[k] {
				seen[k] = true
				out, at = append(out, b), append(at, -1)
			}
			continue
		}
		k := bucket{b.Code, b.perNode.format, b.perNode.hardware, b.perNode.path, b.Err.Type}
		var g *nodeGroup
		for _, c := range buckets[k] {
			if c.same(b) {
				g = c
				break
			}
		}
		if g == nil {
			g = &nodeGroup{first: b}
			buckets[k] = append(buckets[k], g)
			groups = append(groups, g)
			out, at = append(out, Blocker{}), append(at, len(groups)-1)
		}
		g.add(b)
	}
	for i := range out {
		if at[i] >= 0 {
			out[i] = groups[at[i]].blocker()
			clipBlocker(&out[i])
		}
	}
	d.Blockers = append(d.Blockers, out...)
	d.Warnings = append(d.Warnings, f.warnings...)
	d.Allowed = len(d.Blockers) == 0
}

// nodeGroup is the nodes with one problem.
type nodeGroup struct {
	first Blocker
	nodes []string
}

func (g *nodeGroup) add(b Blocker) { g.nodes = append(g.nodes, b.Node) }

// same: b's sentence is first's but for the node's own name.
func (g *nodeGroup) same(b Blocker) bool {
	x, y := g.first.perNode.args, b.perNode.args
	if len(x) != len(y) || !sameValue(g.first.Err.BadValue, b.Err.BadValue) {
		return false
	}
	for i := range x {
		xs, ok1 := x[i].(string)
		ys, ok2 := y[i].(string)
		if ok1 && ok2 && (xs == ys || xs == g.first.Node && ys == b.Node) {
			continue
		}
		if ok1 || ok2 || !sameValue(x[i], y[i]) {
			return false
		}
	}
	return true
}

func sameValue(a, b any) bool {
	switch a := a.(type) {
	case nil:
		return b == nil
	case string:
		s, ok := b.(string)
		return ok && a == s
	case int:
		n, ok := b.(int)
		return ok && a == n
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// maxNamed is how many nodes a shared blocker names in full; a larger group
// names the first few and says where to see the rest.
const (
	maxNamed   = 10
	namedFirst = 5
)

// blocker is the group's blocker: the first node's (by name) for one node,
// else that sentence after how many nodes share it and which.
func (g *nodeGroup) blocker() Blocker {
	slices.Sort(g.nodes)
	g.nodes = slices.Compact(g.nodes) // a node judged twice the same way
	b := g.first
	args := slices.Clone(b.perNode.args)
	for i, a := range args {
		if s, ok := a.(string); ok && s == b.Node {
			args[i] = g.nodes[0]
		}
	}
	e := *b.Err
	e.Field, e.Detail = b.perNode.path.String(), detail(b.perNode.format, args)
	b.Err, b.Node, b.perNode = &e, g.nodes[0], nil
	if len(g.nodes) == 1 {
		return b
	}
	named := strings.Join(g.nodes, ",")
	if len(g.nodes) > maxNamed {
		named = fmt.Sprintf("%s and %d more; gpu-upgrade-gate inventory lists each GPU node's hardware and tuple", strings.Join(g.nodes[:namedFirst], ","), len(g.nodes)-namedFirst)
	}
	of := ""
	if hw := g.first.perNode.hardware; hw != "" && !strings.Contains(e.Detail, hw) {
		of = " of hardware " + hw
	}
	e.Detail = fmt.Sprintf("%d nodes%s (%s) have the same problem: %s", len(g.nodes), of, named, e.Detail)
	b.Node, b.Nodes = "", g.nodes
	return b
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
