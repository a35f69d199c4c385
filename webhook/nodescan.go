package webhook

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"sync"
	"time"
	"unicode/utf8"

	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"
)

// The one-pass Node review decoder (issue 14 item 3). A Node review is
// ~40-80 KB, nearly all of it managed fields, images and status text no
// rule reads. encoding/json validates the whole body in one scan and then
// decodes it in a second, through a state machine called per byte, and a
// json.Decoder's tokens allocate per token (BenchmarkNodeReviewDecode
// compares them): over 80% of a review's CPU. nodeScan walks the body
// once, validating everything it passes as encoding/json would, copying
// out only the fields the rules read (nodeFields' set, into a
// corev1.Node) and skipping the rest without allocating.
//
// It only has to be right for what it accepts: anything it is not sure
// encoding/json would decode to the same values (a duplicate key where a
// struct is decoded, a field of another type, a top-level key other than
// apiVersion, kind and request, nesting deeper than maxScanDepth, a
// string or number encoding/json refuses) makes it give up, and the review
// takes controller-runtime's handler from the same bytes, which answers
// and names the field (TestNodeReviewOnePass and FuzzAdmissionReview hold
// the two paths to the same answers, byte for byte). It never allows on
// its own: a decoded review goes through the same handler as any other.

// maxScanDepth bounds nesting; deeper bodies take the usual path
// (encoding/json's own bound is 10,000).
const maxScanDepth = 512

// nodeScan is a cursor over one review's bytes. bad is sticky: once set,
// every step returns at once and the review falls back.
type nodeScan struct {
	b     []byte
	i     int
	depth int
	bad   bool
	// like is the metadata of the Node decoded first (the object), whose
	// label and annotation values the second (the oldObject) mostly repeats.
	like *metav1.ObjectMeta
	// firstLabels and firstAnnotations are the first Node's pairs, in the
	// body's order (sorted, as the API server writes maps), for the second
	// (read once like is set) to take its keys and equal values from
	// instead of interning them.
	firstLabels, firstAnnotations []stringPair
	// maps are the pooled maps the scan filled (pooledMaps).
	maps pooledMaps
	// conds is scratch for a Node's conditions.
	conds []corev1.NodeCondition
	// escaped are the strings with escapes decoded so far, by their bytes
	// in the body: the second Node repeats most of the first's.
	escaped []escapedString
}

type stringPair struct{ k, v string }

type escapedString struct {
	raw []byte
	s   string
}

func (s *nodeScan) fail() bool { s.bad = true; return false }

func (s *nodeScan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek is the next byte after spaces, 0 at the end.
func (s *nodeScan) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// enter consumes '{' or '[' (c).
func (s *nodeScan) enter(c byte) bool {
	if s.bad || s.peek() != c {
		return s.fail()
	}
	s.i++
	if s.depth++; s.depth > maxScanDepth {
		return s.fail()
	}
	return true
}

// more reports whether another member or element follows in the object or
// array just entered, consuming the ',' before it or the closing byte
// after the last; first is the caller's "no member read yet".
func (s *nodeScan) more(close byte, first *bool) bool {
	if s.bad {
		return false
	}
	c := s.peek()
	if c == close {
		s.i++
		s.depth--
		return false
	}
	if !*first {
		if c != ',' {
			return s.fail()
		}
		s.i++
		s.ws()
	}
	*first = false
	return true
}

// key reads a member's name and its ':'. The bytes are the body's own when
// the name holds no escape (valid until the body is reused), else decoded.
func (s *nodeScan) key() []byte {
	if s.bad || s.peek() != '"' {
		s.fail()
		return nil
	}
	start := s.i
	simple := s.stringEnd()
	if s.bad {
		return nil
	}
	k := s.b[start+1 : s.i-1]
	if !simple {
		var str string
		if sigsjson.UnmarshalCaseSensitivePreserveInts(s.b[start:s.i], &str) != nil {
			s.fail()
			return nil
		}
		k = []byte(str)
	}
	if s.peek() != ':' {
		s.fail()
		return nil
	}
	s.i++
	return k
}

// skipKey moves past a member's name and its ':', validating, decoding
// nothing.
func (s *nodeScan) skipKey() {
	if s.bad || s.peek() != '"' {
		s.fail()
		return
	}
	if s.stringEnd(); s.peek() != ':' {
		s.fail()
		return
	}
	s.i++
}

// stringEnd moves past the string at s.i (its opening quote), validating it
// as encoding/json does; simple says it holds no escape and is valid UTF-8,
// so its bytes are its value.
func (s *nodeScan) stringEnd() (simple bool) {
	b, i := s.b, s.i+1
	escaped, high := false, false
	for {
		// Eight plain bytes at a time: none a quote, a backslash, a
		// control byte or above ASCII.
		for i+8 <= len(b) {
			if special(binary.LittleEndian.Uint64(b[i:])) != 0 {
				break
			}
			i += 8
		}
		if i >= len(b) {
			return s.fail()
		}
		switch c := b[i]; {
		case c == '"':
			start := s.i + 1
			s.i = i + 1
			return !escaped && (!high || utf8.Valid(b[start:i]))
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return s.fail()
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return s.fail()
				}
				i += 6
			default:
				return s.fail()
			}
		case c < 0x20:
			return s.fail()
		default:
			if c >= utf8.RuneSelf {
				high = true
			}
			i++
		}
	}
}

// special has the top bit of each byte of w set that is a quote, a
// backslash, below 0x20 or above 0x7f (the classic SWAR tests, e.g.
// "Bit Twiddling Hacks": a zero byte of w^c, a byte below n).
func special(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	zero := func(x uint64) uint64 { return (x - ones) & ^x & highs }
	return zero(w^(ones*'"')) | zero(w^(ones*'\\')) | ((w - ones*0x20) & ^w & highs) | (w & highs)
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// str decodes a string field into dst; null leaves it, as encoding/json
// does; another type fails.
func (s *nodeScan) str(dst *string) {
	switch s.peek() {
	case 'n':
		s.null()
	case '"':
		*dst = s.stringValue()
	default:
		s.fail()
	}
}

// strLike is str, giving like for an equal plain string.
func (s *nodeScan) strLike(dst *string, like string) {
	if s.peek() == '"' {
		*dst = s.stringValueLike(like, true)
		return
	}
	s.str(dst)
}

// stringValue decodes the string at s.i: interned when plain (label keys
// and values repeat across Nodes and reviews), else through encoding/json.
func (s *nodeScan) stringValue() string { return s.stringValueLike("", false) }

// stringValueLike is stringValue, giving like when ok and the string is
// plain and equal to it.
func (s *nodeScan) stringValueLike(like string, ok bool) string {
	start := s.i
	simple := s.stringEnd()
	if s.bad {
		return ""
	}
	if simple {
		if b := s.b[start+1 : s.i-1]; ok && like == string(b) {
			return like
		}
		return fleetStrings.get(s.b[start+1 : s.i-1])
	}
	raw := s.b[start:s.i]
	for _, e := range s.escaped {
		if bytes.Equal(e.raw, raw) {
			return e.s
		}
	}
	var str string
	if sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &str) != nil {
		s.fail()
	}
	if len(s.escaped) < maxEscaped {
		s.escaped = append(s.escaped, escapedString{raw, str})
	}
	return str
}

// maxEscaped bounds the escaped strings remembered in one review.
const maxEscaped = 32

func (s *nodeScan) null() bool { return s.literal("null") }

func (s *nodeScan) literal(lit string) bool {
	if s.bad || len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return s.fail()
	}
	s.i += len(lit)
	return true
}

// boolean decodes a bool field; null leaves it.
func (s *nodeScan) boolean(dst *bool) {
	switch s.peek() {
	case 'n':
		s.null()
	case 't':
		*dst = s.literal("true")
	case 'f':
		s.literal("false")
		*dst = false
	default:
		s.fail()
	}
}

// skip moves past any value, validating it.
func (s *nodeScan) skip() {
	switch s.peek() {
	case '{':
		s.enter('{')
		for first := true; s.more('}', &first); {
			s.skipKey()
			s.skip()
		}
	case '[':
		s.enter('[')
		for first := true; s.more(']', &first); {
			s.skip()
		}
	case '"':
		s.stringEnd()
	case 't':
		s.literal("true")
	case 'f':
		s.literal("false")
	case 'n':
		s.null()
	default:
		s.number()
	}
}

// raw skips a value and returns its bytes.
func (s *nodeScan) raw() []byte {
	start := s.i
	s.skip()
	return s.b[start:s.i]
}

// number moves past a JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *nodeScan) number() {
	if s.bad {
		return
	}
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		s.fail()
		return
	}
	if i < len(b) && b[i] == '.' {
		if j := digits(b, i+1); j > i+1 {
			i = j
		} else {
			s.fail()
			return
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if j := digits(b, i); j > i {
			i = j
		} else {
			s.fail()
			return
		}
	}
	s.i = i
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// seen reports a duplicate of struct field bit f: encoding/json would merge
// the two, which the scan does not copy; the review falls back.
func (s *nodeScan) seen(set *uint32, f uint32) bool {
	if *set&f != 0 {
		return s.fail()
	}
	*set |= f
	return true
}

// decodeNodeReview decodes a Node UPDATE review in one pass; ok is false for
// anything the usual path must handle.
func decodeNodeReview(body []byte) (decodedReview, bool) {
	s := scanPool.Get().(*nodeScan)
	defer func() {
		clear(s.escaped) // they point into the body
		clear(s.firstLabels)
		clear(s.firstAnnotations)
		*s = nodeScan{conds: s.conds[:0], escaped: s.escaped[:0], firstLabels: s.firstLabels[:0], firstAnnotations: s.firstAnnotations[:0]}
		scanPool.Put(s)
	}()
	*s = nodeScan{b: body, conds: s.conds[:0], escaped: s.escaped[:0], firstLabels: s.firstLabels[:0], firstAnnotations: s.firstAnnotations[:0]}
	var (
		apiVersion, kind string
		req              *admissionv1.AdmissionRequest
		set              uint32
	)
	if s.enter('{') {
		for first := true; s.more('}', &first); {
			switch string(s.key()) {
			case "apiVersion":
				s.seen(&set, 1)
				s.str(&apiVersion)
			case "kind":
				s.seen(&set, 2)
				s.str(&kind)
			case "request":
				s.seen(&set, 4)
				if s.peek() == 'n' {
					s.null()
				} else {
					req = s.request()
				}
			default:
				// The kind is found case-insensitively by the usual path
				// (runtime's meta factory): any other key there, and the
				// scan is not sure which kind it read.
				s.fail()
			}
		}
	}
	if s.ws(); s.i != len(s.b) {
		s.fail()
	}
	if s.bad || kind != "AdmissionReview" || (apiVersion != admissionv1.SchemeGroupVersion.String() && apiVersion != admissionv1beta1.SchemeGroupVersion.String()) ||
		req == nil || req.Object.Object == nil || req.OldObject.Object == nil {
		s.maps.release()
		return decodedReview{}, false
	}
	return decodedReview{Request: admission.Request{AdmissionRequest: *req}, apiVersion: apiVersion, maps: s.maps}, true
}

var scanPool = sync.Pool{New: func() any { return &nodeScan{} }}

// request decodes an AdmissionRequest; object and oldObject are Nodes
// (nodeFields' set) put in Object.Object, Raw left empty.
func (s *nodeScan) request() *admissionv1.AdmissionRequest {
	r := &admissionv1.AdmissionRequest{}
	var set uint32
	if !s.enter('{') {
		return nil
	}
	for first := true; s.more('}', &first); {
		switch string(s.key()) {
		case "uid":
			s.seen(&set, 1<<0)
			s.str((*string)(&r.UID))
		case "kind":
			s.seen(&set, 1<<1)
			s.gvk(&r.Kind)
		case "resource":
			s.seen(&set, 1<<2)
			s.gvr(&r.Resource)
		case "subResource":
			s.seen(&set, 1<<3)
			s.str(&r.SubResource)
		case "requestKind":
			s.seen(&set, 1<<4)
			if s.peek() == 'n' {
				s.null()
			} else {
				r.RequestKind = &metav1.GroupVersionKind{}
				s.gvk(r.RequestKind)
			}
		case "requestResource":
			s.seen(&set, 1<<5)
			if s.peek() == 'n' {
				s.null()
			} else {
				r.RequestResource = &metav1.GroupVersionResource{}
				s.gvr(r.RequestResource)
			}
		case "requestSubResource":
			s.seen(&set, 1<<6)
			s.str(&r.RequestSubResource)
		case "name":
			s.seen(&set, 1<<7)
			s.str(&r.Name)
		case "namespace":
			s.seen(&set, 1<<8)
			s.str(&r.Namespace)
		case "operation":
			s.seen(&set, 1<<9)
			s.str((*string)(&r.Operation))
		case "userInfo":
			s.seen(&set, 1<<10)
			s.userInfo(&r.UserInfo)
		case "object":
			s.seen(&set, 1<<11)
			if n := s.nodeOrNull(); n != nil {
				r.Object.Object = n
				s.like = cmp.Or(s.like, &n.ObjectMeta)
			}
		case "oldObject":
			s.seen(&set, 1<<12)
			if n := s.nodeOrNull(); n != nil {
				r.OldObject.Object = n
				s.like = cmp.Or(s.like, &n.ObjectMeta)
			}
		case "dryRun":
			s.seen(&set, 1<<13)
			if s.peek() == 'n' {
				s.null()
			} else {
				r.DryRun = new(bool)
				s.boolean(r.DryRun)
			}
		case "options":
			s.seen(&set, 1<<14)
			if raw := s.raw(); string(raw) != "null" {
				r.Options.Raw = append([]byte(nil), raw...)
			}
		default:
			s.skip()
		}
	}
	return r
}

// object walks an object field's members (null leaves the struct, as
// encoding/json does), calling member at each value, which it consumes.
func (s *nodeScan) object(member func(key []byte)) {
	if s.peek() == 'n' {
		s.null()
		return
	}
	if !s.enter('{') {
		return
	}
	for first := true; s.more('}', &first); {
		member(s.key())
	}
}

func (s *nodeScan) gvk(g *metav1.GroupVersionKind) {
	s.threeStrings("group", &g.Group, "version", &g.Version, "kind", &g.Kind)
}

func (s *nodeScan) gvr(g *metav1.GroupVersionResource) {
	s.threeStrings("group", &g.Group, "version", &g.Version, "resource", &g.Resource)
}

// threeStrings decodes an object of three string fields (a group, version
// and kind or resource), skipping any other.
func (s *nodeScan) threeStrings(k0 string, v0 *string, k1 string, v1 *string, k2 string, v2 *string) {
	var set uint32
	s.object(func(k []byte) {
		switch string(k) {
		case k0:
			s.seen(&set, 1)
			s.str(v0)
		case k1:
			s.seen(&set, 2)
			s.str(v1)
		case k2:
			s.seen(&set, 4)
			s.str(v2)
		default:
			s.skip()
		}
	})
}

func (s *nodeScan) userInfo(u *authenticationv1.UserInfo) {
	var set uint32
	s.object(func(k []byte) {
		switch string(k) {
		case "username":
			s.seen(&set, 1)
			s.str(&u.Username)
		case "uid":
			s.seen(&set, 2)
			s.str(&u.UID)
		case "groups":
			s.seen(&set, 4)
			u.Groups = s.strings()
		case "extra":
			s.seen(&set, 8)
			if s.peek() == 'n' {
				s.null()
				return
			}
			u.Extra = map[string]authenticationv1.ExtraValue{}
			if s.enter('{') {
				for first := true; s.more('}', &first); {
					k := s.stringOf(s.key())
					u.Extra[k] = s.strings()
				}
			}
		default:
			s.skip()
		}
	})
}

// stringOf is a key as a string.
func (s *nodeScan) stringOf(k []byte) string { return fleetStrings.get(k) }

// strings decodes a list of strings: null is nil, a null element "".
func (s *nodeScan) strings() []string {
	if s.peek() == 'n' {
		s.null()
		return nil
	}
	out := []string{}
	if s.enter('[') {
		for first := true; s.more(']', &first); {
			var v string
			s.str(&v)
			out = append(out, v)
		}
	}
	return out
}

// stringMap decodes a map of strings into a pooled map: null is nil, a
// null value "", the last of a repeated key wins (encoding/json's map
// rules). With record it appends the pairs read; a key found in like (the
// same map of the other Node), walked in order, is like's string, and so
// is an equal value: neither interned nor copied.
func (s *nodeScan) stringMap(record *[]stringPair, like []stringPair) map[string]string {
	if s.peek() == 'n' {
		s.null()
		return nil
	}
	if !s.enter('{') {
		return nil
	}
	m := s.maps.get()
	j := 0
	for first := true; s.more('}', &first); {
		kb := s.key()
		var k, vlike string
		ok := false
		for j < len(like) && like[j].k < string(kb) {
			j++
		}
		if j < len(like) && like[j].k == string(kb) {
			k, vlike, ok = like[j].k, like[j].v, true
			j++
		} else {
			k = s.stringOf(kb)
		}
		var v string
		switch s.peek() {
		case 'n':
			s.null()
		case '"':
			v = s.stringValueLike(vlike, ok)
		default:
			s.fail()
		}
		m[k] = v
		if record != nil {
			*record = append(*record, stringPair{k, v})
		}
	}
	return m
}

// pooledMaps are the label and annotation maps of one review's two Nodes,
// taken from stringMaps and given back, cleared, once the review is
// answered (nodeEndpoint.ServeHTTP): each would otherwise be made, grown
// and collected a review. Nothing keeps a Node's maps past its review (the
// engine keeps strings, never a map; the strings are the intern table's or
// copies, never the body's).
type pooledMaps struct {
	m [4]map[string]string
	n int
}

var stringMaps = sync.Pool{New: func() any { return make(map[string]string, 64) }}

// maxPooledMap: a map grown past this many entries is left to the
// collector, not kept.
const maxPooledMap = 256

func (p *pooledMaps) get() map[string]string {
	if p.n == len(p.m) { // more maps than a review's two Nodes have
		return map[string]string{}
	}
	m := stringMaps.Get().(map[string]string)
	p.m[p.n] = m
	p.n++
	return m
}

// release gives the maps back; the Nodes that held them must not be read
// again.
func (p *pooledMaps) release() {
	for i := range p.n {
		if m := p.m[i]; len(m) <= maxPooledMap {
			clear(m)
			stringMaps.Put(m)
		}
		p.m[i] = nil
	}
	p.n = 0
}

// likeOf is the metadata to take equal values from: none for the first Node.
func likeOf(m *metav1.ObjectMeta) *metav1.ObjectMeta {
	if m == nil {
		return &noMetadata
	}
	return m
}

var noMetadata metav1.ObjectMeta

// nodeOrNull decodes a Node (nil for null); the checks are node()'s.
func (s *nodeScan) nodeOrNull() *corev1.Node {
	if s.peek() == 'n' {
		s.null()
		return nil
	}
	if s.peek() != '{' {
		s.fail()
		return nil
	}
	n := &corev1.Node{}
	var set uint32
	s.object(func(k []byte) {
		switch string(k) {
		case "apiVersion":
			s.seen(&set, 1)
			s.str(&n.APIVersion)
		case "kind":
			s.seen(&set, 2)
			s.str(&n.Kind)
		case "metadata":
			s.seen(&set, 4)
			s.metadata(&n.ObjectMeta)
		case "spec":
			s.seen(&set, 8)
			s.nodeSpec(&n.Spec)
		case "status":
			s.seen(&set, 16)
			s.nodeStatus(&n.Status)
		default:
			s.skip()
		}
	})
	if gv, err := schema.ParseGroupVersion(n.APIVersion); err != nil || n.Kind != "Node" || gv.Group != "" {
		s.fail()
	}
	if s.bad {
		return nil
	}
	return n
}

// metadata decodes the fields the rules read; the second Node's equal to
// the first's are the first's strings.
func (s *nodeScan) metadata(m *metav1.ObjectMeta) {
	var set uint32
	like := likeOf(s.like)
	labels, annotations := &s.firstLabels, &s.firstAnnotations
	likeLabels, likeAnnotations := []stringPair(nil), []stringPair(nil)
	if s.like != nil { // the second Node
		labels, annotations, likeLabels, likeAnnotations = nil, nil, s.firstLabels, s.firstAnnotations
	}
	s.object(func(k []byte) {
		switch string(k) {
		case "name":
			s.seen(&set, 1)
			s.strLike(&m.Name, like.Name)
		case "uid":
			s.seen(&set, 2)
			s.strLike((*string)(&m.UID), string(like.UID))
		case "resourceVersion":
			s.seen(&set, 4)
			s.strLike(&m.ResourceVersion, like.ResourceVersion)
		case "labels":
			s.seen(&set, 8)
			m.Labels = s.stringMap(labels, likeLabels)
		case "annotations":
			s.seen(&set, 16)
			m.Annotations = s.stringMap(annotations, likeAnnotations)
		default:
			s.skip()
		}
	})
}

func (s *nodeScan) nodeSpec(sp *corev1.NodeSpec) {
	var set uint32
	s.object(func(k []byte) {
		switch string(k) {
		case "unschedulable":
			s.seen(&set, 1)
			s.boolean(&sp.Unschedulable)
		case "taints":
			s.seen(&set, 2)
			s.taints(&sp.Taints)
		default:
			s.skip()
		}
	})
}

// taints decodes []corev1.Taint: null is nil, a null element a zero taint.
func (s *nodeScan) taints(dst *[]corev1.Taint) {
	if s.peek() == 'n' {
		s.null()
		*dst = nil
		return
	}
	if !s.enter('[') {
		return
	}
	*dst = []corev1.Taint{}
	for first := true; s.more(']', &first); {
		var t corev1.Taint
		var set uint32
		s.object(func(k []byte) {
			switch string(k) {
			case "key":
				s.seen(&set, 1)
				s.str(&t.Key)
			case "value":
				s.seen(&set, 2)
				s.str(&t.Value)
			case "effect":
				s.seen(&set, 4)
				s.str((*string)(&t.Effect))
			case "timeAdded":
				s.seen(&set, 8)
				if s.peek() == 'n' {
					s.null()
					t.TimeAdded = nil
				} else {
					t.TimeAdded = &metav1.Time{}
					s.time(t.TimeAdded)
				}
			default:
				s.skip()
			}
		})
		*dst = append(*dst, t)
	}
}

func (s *nodeScan) nodeStatus(st *corev1.NodeStatus) {
	var set uint32
	s.object(func(k []byte) {
		switch string(k) {
		case "nodeInfo":
			s.seen(&set, 1)
			var inner uint32
			s.object(func(k []byte) {
				switch string(k) {
				case "kernelVersion":
					s.seen(&inner, 1)
					s.str(&st.NodeInfo.KernelVersion)
				case "kubeletVersion":
					s.seen(&inner, 2)
					s.str(&st.NodeInfo.KubeletVersion)
				default:
					s.skip()
				}
			})
		case "capacity":
			s.seen(&set, 2)
			st.Capacity = s.resources(true)
		case "allocatable":
			s.seen(&set, 4)
			st.Allocatable = s.resources(false)
		case "conditions":
			s.seen(&set, 8)
			s.conditions(&st.Conditions)
		default:
			s.skip()
		}
	})
}

// resources is decodeResources in the scan: the nvidia.com/ quantities
// parsed (Quantity's own UnmarshalJSON on the value's bytes, as
// encoding/json calls it), with allNames every other name at zero.
func (s *nodeScan) resources(allNames bool) corev1.ResourceList {
	if s.peek() == 'n' {
		s.null()
		return nil
	}
	var out corev1.ResourceList
	if !s.enter('{') {
		return nil
	}
	for first := true; s.more('}', &first); {
		name := corev1.ResourceName(s.stringOf(s.key()))
		raw := s.raw()
		if s.bad {
			return nil
		}
		var q resource.Quantity
		if isProofResource(name) {
			if q.UnmarshalJSON(raw) != nil {
				s.fail()
				return nil
			}
		} else if !allNames {
			continue
		}
		if out == nil {
			out = corev1.ResourceList{}
		}
		out[name] = q
	}
	return out
}

// conditions keeps type, status and transition time (node()'s copy): a
// null element is a zero condition, none at all a nil list.
func (s *nodeScan) conditions(dst *[]corev1.NodeCondition) {
	if s.peek() == 'n' {
		s.null()
		return
	}
	if !s.enter('[') {
		return
	}
	// Gathered in the scan's scratch, then copied at their number: one
	// allocation, not one each time append grows the list.
	conds := s.conds[:0]
	defer func() {
		if len(conds) > 0 {
			*dst = append(*dst, conds...)
		}
		s.conds = conds[:0]
	}()
	for first := true; s.more(']', &first); {
		var c corev1.NodeCondition
		var set uint32
		s.object(func(k []byte) {
			switch string(k) {
			case "type":
				s.seen(&set, 1)
				s.str((*string)(&c.Type))
			case "status":
				s.seen(&set, 2)
				s.str((*string)(&c.Status))
			case "lastTransitionTime":
				s.seen(&set, 4)
				s.time(&c.LastTransitionTime)
			default:
				s.skip()
			}
		})
		conds = append(conds, c)
	}
}

// time is metav1.Time's UnmarshalJSON, without its allocations for the
// plain RFC 3339 string the API server writes.
func (s *nodeScan) time(t *metav1.Time) {
	start := s.i
	if s.peek() == '"' {
		if simple := s.stringEnd(); simple && !s.bad {
			pt, err := time.Parse(time.RFC3339, string(s.b[start+1:s.i-1]))
			if err != nil {
				s.fail()
				return
			}
			t.Time = pt.Local()
			return
		}
		s.i = start
	}
	if raw := s.raw(); !s.bad && t.UnmarshalJSON(raw) != nil {
		s.fail()
	}
}
