package admission

import (
	"bytes"
	"encoding/json"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The fast path answers the reviews the API server actually sends (a Node
// CREATE, or anything the policy ignores) in one pass over the body, without
// building admission/v1 types, and appends a pre-encoded answer. Anything it
// is not certain about (a syntax error, a duplicate or case-variant key, an
// escaped string it would have to compare, a field of the wrong type, an
// invalid request) it hands back with ok=false, and fullReview, the typed
// decoder, answers instead. So it never decides differently from fullReview;
// FuzzFastReview holds it to byte-identical answers.

// maxFastDepth bounds the nesting the fast scanner follows; deeper bodies go
// to fullReview (whose own limit is encoding/json's).
const maxFastDepth = 200

// answers are the pre-encoded pieces of every answer the fast path gives for
// one finalizer.
type answers struct {
	finalizer string
	// head is `{"kind":"AdmissionReview","apiVersion":"…","response":{"uid":"`
	// for admission.k8s.io/v1 [0] and v1beta1 [1].
	head [2][]byte
	// Tails follow the UID: no patch, add the list, append to the list, add
	// metadata with the list.
	tailNone, tailList, tailAppend, tailMetadata []byte
}

const uidPlaceholder = "uid-placeholder-5c1e"

// newAnswers cuts the answers MutateNode and encode produce around a
// placeholder UID, so the fast path's bytes are theirs by construction.
func newAnswers(finalizer string) *answers {
	a := &answers{finalizer: finalizer}
	answer := func(apiVersion, object string) (head, tail []byte) {
		resp, _ := MutateNode(&admissionv1.AdmissionRequest{
			UID: uidPlaceholder, Operation: admissionv1.Create, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "nodes"},
			Object: runtime.RawExtension{Raw: []byte(object)},
		}, finalizer)
		b := encode(apiVersion, resp)
		i := bytes.Index(b, []byte(uidPlaceholder))
		return b[:i], b[i+len(uidPlaceholder):]
	}
	a.head[0], _ = answer("admission.k8s.io/v1", `{}`)
	a.head[1], _ = answer("admission.k8s.io/v1beta1", `{}`)
	_, a.tailList = answer("admission.k8s.io/v1", `{"metadata":{}}`)
	_, a.tailMetadata = answer("admission.k8s.io/v1", `{}`)
	_, a.tailAppend = answer("admission.k8s.io/v1", `{"metadata":{"finalizers":[]}}`)
	// ResultPresent and ResultIgnored answer alike: allowed, no patch.
	list, _ := json.Marshal([]string{finalizer})
	_, a.tailNone = answer("admission.k8s.io/v1", `{"metadata":{"finalizers":`+string(list)+`}}`)
	return a
}

// finalizerState is what the Node's metadata.finalizers says about ours.
type finalizerState uint8

const (
	finNoMetadata finalizerState = iota // metadata absent or null: add it
	finAbsent                           // finalizers absent or null: add the list
	finMissing                          // a list without ours: append
	finPresent                          // a list with ours: no patch
)

// lean is what the fast path reads out of a review; byte slices point into
// the body.
type lean struct {
	v1beta1     bool
	uid         []byte
	operation   []byte
	subResource bool // non-empty
	resGroup    bool // non-empty
	resource    []byte
	kind        []byte
	// The object's reading: usable only if objOK.
	objOK bool
	fin   finalizerState
}

// fastReview answers body like fullReview would, appending the answer to dst,
// or reports ok=false when fullReview must decide.
func fastReview(dst, body []byte, a *answers) (out outcome, ok bool) {
	s := scanner{b: body, fin: a.finalizer}
	var l lean
	if !s.review(&l) {
		return outcome{}, false
	}
	op := operationLabelBytes(l.operation)
	result := ResultIgnored
	tail := a.tailNone
	if op == string(admissionv1.Create) && !l.subResource && !l.resGroup && string(l.resource) == "nodes" &&
		(len(l.kind) == 0 || string(l.kind) == "Node") {
		if len(l.uid) == 0 || !l.objOK {
			return outcome{}, false // invalid: rare, fullReview explains it
		}
		switch l.fin {
		case finNoMetadata:
			result, tail = ResultPatched, a.tailMetadata
		case finAbsent:
			result, tail = ResultPatched, a.tailList
		case finMissing:
			result, tail = ResultPatched, a.tailAppend
		default:
			result = ResultPresent
		}
	}
	head := a.head[0]
	if l.v1beta1 {
		head = a.head[1]
	}
	dst = append(dst, head...)
	dst = append(dst, l.uid...)
	dst = append(dst, tail...)
	return outcome{status: http.StatusOK, body: dst, operation: op, result: result}, true
}

func operationLabelBytes(op []byte) string {
	switch string(op) {
	case string(admissionv1.Create):
		return string(admissionv1.Create)
	case string(admissionv1.Update):
		return string(admissionv1.Update)
	case string(admissionv1.Delete):
		return string(admissionv1.Delete)
	case string(admissionv1.Connect):
		return string(admissionv1.Connect)
	}
	return opUnknown
}

// scanner validates JSON as encoding/json does (or more strictly) while
// reading the few members the policy needs.
type scanner struct {
	b     []byte
	i     int
	depth int
	fin   string
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) eat(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

// review reads a whole body: an AdmissionReview object and nothing after it.
func (s *scanner) review(l *lean) bool {
	var seenAPI, seenKind, seenReq bool
	n := 0
	for {
		key, keyOK, more, ok := s.member(&n)
		if !ok {
			return false
		}
		if !more {
			break
		}
		if !keyOK {
			return false
		}
		switch string(key) {
		case "apiVersion":
			v, ok := s.plainString()
			if !ok || seenAPI {
				return false
			}
			seenAPI = true
			switch string(v) {
			case "admission.k8s.io/v1":
			case "admission.k8s.io/v1beta1":
				l.v1beta1 = true
			default:
				return false
			}
		case "kind":
			v, ok := s.plainString()
			if !ok || seenKind || string(v) != "AdmissionReview" {
				return false
			}
			seenKind = true
		case "request":
			if seenReq || s.peek() != '{' || !s.request(l) {
				return false
			}
			seenReq = true
		default:
			if foldsToAny(key, "apiVersion", "kind", "request") || !s.skip() {
				return false
			}
		}
	}
	s.ws()
	return seenAPI && seenKind && seenReq && s.i == len(s.b)
}

// requestFields are AdmissionRequest's JSON names; a key that matches one
// only case-insensitively goes to fullReview.
var requestFields = []string{"uid", "kind", "resource", "subResource", "requestKind", "requestResource",
	"requestSubResource", "name", "namespace", "operation", "userInfo", "object", "oldObject", "dryRun", "options"}

// request reads an AdmissionRequest, type-checking the members it does not
// need as the typed decoder would, so both fail on the same inputs.
func (s *scanner) request(l *lean) bool {
	var seen uint16
	once := func(bit uint16) bool {
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	}
	n := 0
	for {
		key, keyOK, more, ok := s.member(&n)
		if !ok {
			return false
		}
		if !more {
			return true
		}
		if !keyOK {
			return false
		}
		switch string(key) {
		case "uid":
			v, ok := s.plainString()
			if !ok || !once(1) {
				return false
			}
			l.uid = v
		case "kind":
			if !once(2) {
				return false
			}
			if l.kind, ok = s.gvk(); !ok {
				return false
			}
		case "resource":
			if !once(4) {
				return false
			}
			var group []byte
			if l.resource, group, ok = s.gvr(); !ok {
				return false
			}
			l.resGroup = len(group) > 0
		case "subResource":
			v, ok := s.nullableString()
			if !ok || !once(8) {
				return false
			}
			l.subResource = len(v) > 0
		case "operation":
			v, ok := s.plainString()
			if !ok || !once(16) {
				return false
			}
			l.operation = v
		case "object":
			if !once(32) {
				return false
			}
			if s.peek() == '{' {
				if !s.object(l) {
					return false
				}
			} else if !s.skip() { // not an object: the policy calls it invalid
				return false
			}
		case "requestKind":
			if _, ok := s.gvk(); !ok {
				return false
			}
		case "requestResource":
			if _, _, ok := s.gvr(); !ok {
				return false
			}
		case "requestSubResource", "name", "namespace":
			if _, ok := s.nullableString(); !ok {
				return false
			}
		case "userInfo":
			if !s.userInfo() {
				return false
			}
		case "dryRun":
			if !s.literal("true") && !s.literal("false") && !s.literal("null") {
				return false
			}
		case "oldObject", "options":
			if !s.skip() {
				return false
			}
		default:
			if foldsToAny(key, requestFields...) || !s.skip() {
				return false
			}
		}
	}
}

// gvr reads a GroupVersionResource.
func (s *scanner) gvr() (resource, group []byte, ok bool) {
	var version []byte
	ok = s.stringStruct(&[3]string{"resource", "group", "version"}, &[3]*[]byte{&resource, &group, &version})
	return resource, group, ok
}

// gvk reads a GroupVersionKind.
func (s *scanner) gvk() (kind []byte, ok bool) {
	var group, version []byte
	ok = s.stringStruct(&[3]string{"kind", "group", "version"}, &[3]*[]byte{&kind, &group, &version})
	return kind, ok
}

// stringStruct reads an object whose listed members are strings (or
// null) into vals; null reads as no object at all.
func (s *scanner) stringStruct(names *[3]string, vals *[3]*[]byte) bool {
	if s.literal("null") {
		return true
	}
	if s.peek() != '{' {
		return false
	}
	var seen uint8
	n := 0
	for {
		key, keyOK, more, ok := s.member(&n)
		if !ok {
			return false
		}
		if !more {
			return true
		}
		if !keyOK {
			return false
		}
		idx := -1
		for j, name := range names {
			if string(key) == name {
				idx = j
				break
			}
		}
		if idx < 0 {
			if foldsToAny(key, names[:]...) || !s.skip() {
				return false
			}
			continue
		}
		v, ok := s.nullableString()
		if !ok || seen&(1<<idx) != 0 {
			return false
		}
		seen |= 1 << idx
		*vals[idx] = v
	}
}

// userInfo type-checks authentication/v1 UserInfo.
func (s *scanner) userInfo() bool {
	if s.literal("null") {
		return true
	}
	if s.peek() != '{' {
		return false
	}
	n := 0
	for {
		key, keyOK, more, ok := s.member(&n)
		if !ok {
			return false
		}
		if !more {
			return true
		}
		if !keyOK {
			return false
		}
		switch string(key) {
		case "username", "uid":
			ok = s.anyNullableString()
		case "groups":
			ok = s.stringList()
		case "extra":
			ok = s.extra()
		default:
			ok = !foldsToAny(key, "username", "uid", "groups", "extra") && s.skip()
		}
		if !ok {
			return false
		}
	}
}

// extra type-checks map[string][]string.
func (s *scanner) extra() bool {
	if s.literal("null") {
		return true
	}
	if s.peek() != '{' {
		return false
	}
	n := 0
	for {
		_, _, more, ok := s.member(&n)
		if !ok {
			return false
		}
		if !more {
			return true
		}
		if !s.stringList() {
			return false
		}
	}
}

// stringList type-checks []string: null, or a list of strings and nulls.
func (s *scanner) stringList() bool {
	if s.literal("null") {
		return true
	}
	if !s.eat('[') {
		return false
	}
	if s.eat(']') {
		return true
	}
	for {
		if !s.anyNullableString() {
			return false
		}
		if s.eat(']') {
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

// object reads the Node: kind, apiVersion and metadata.finalizers. What the
// policy would call invalid leaves l.objOK false.
func (s *scanner) object(l *lean) bool {
	l.objOK = false
	var kind, apiVersion []byte
	valid := true
	var seen uint8
	fin := finNoMetadata
	n := 0
	for {
		key, keyOK, more, ok := s.member(&n)
		if !ok {
			return false
		}
		if !more {
			break
		}
		if !keyOK {
			valid = false
		}
		switch string(key) {
		case "kind", "apiVersion":
			bit := uint8(1)
			if key[0] == 'a' {
				bit = 2
			}
			if seen&bit != 0 {
				valid = false
			}
			seen |= bit
			if s.peek() != '"' && s.peek() != 'n' {
				valid = false
				if !s.skip() {
					return false
				}
				continue
			}
			v, flags, ok := s.stringOrNull()
			if !ok {
				return false
			}
			if flags != 0 {
				valid = false
			}
			if bit == 1 {
				kind = v
			} else {
				apiVersion = v
			}
		case "metadata":
			if seen&4 != 0 {
				valid = false
			}
			seen |= 4
			f, v, ok := s.metadata()
			if !ok {
				return false
			}
			fin, valid = f, valid && v
		default:
			if foldsToAny(key, "kind", "apiVersion", "metadata") {
				valid = false
			}
			if !s.skip() {
				return false
			}
		}
	}
	l.objOK = valid && (len(kind) == 0 || string(kind) == "Node") && (len(apiVersion) == 0 || string(apiVersion) == "v1")
	l.fin = fin
	return true
}

// metadata reads metadata.finalizers; valid is false when the policy would
// not accept the object or the scanner cannot be sure.
func (s *scanner) metadata() (fin finalizerState, valid, ok bool) {
	if s.literal("null") {
		return finNoMetadata, true, true
	}
	if s.peek() != '{' {
		return finAbsent, false, s.skip()
	}
	fin, valid = finAbsent, true
	seen := false
	n := 0
	for {
		key, keyOK, more, ok := s.member(&n)
		if !ok {
			return fin, false, false
		}
		if !more {
			return fin, valid, true
		}
		if !keyOK {
			valid = false
		}
		if string(key) != "finalizers" {
			if foldsToAny(key, "finalizers") {
				valid = false
			}
			if !s.skip() {
				return fin, false, false
			}
			continue
		}
		if seen {
			valid = false
		}
		seen = true
		f, v, ok := s.finalizers()
		if !ok {
			return fin, false, false
		}
		fin, valid = f, valid && v
	}
}

// finalizers reads the list and looks for ours.
func (s *scanner) finalizers() (fin finalizerState, valid, ok bool) {
	if s.literal("null") {
		return finAbsent, true, true
	}
	if !s.eat('[') {
		return finAbsent, false, s.skip()
	}
	fin, valid = finMissing, true
	if s.eat(']') {
		return fin, valid, true
	}
	for {
		switch s.peek() {
		case '"', 'n':
			v, flags, ok := s.stringOrNull()
			if !ok {
				return fin, false, false
			}
			if flags&(strEscaped|strNonASCII) != 0 {
				valid = false // it might spell ours differently
			} else if string(v) == s.fin {
				fin = finPresent
			}
		default:
			valid = false
			if !s.skip() {
				return fin, false, false
			}
		}
		if s.eat(']') {
			return fin, valid, true
		}
		if !s.eat(',') {
			return fin, false, false
		}
	}
}

// member reads `"key":` (preceded by '{' for the first member, ',' for the
// others) or the closing '}'; more is false at the end of the object. keyOK
// says the key can be matched as bytes: encoding/json would unescape a key
// with escapes and case-fold one with non-ASCII letters, which the fast path
// does not, so struct levels refuse such keys.
func (s *scanner) member(n *int) (key []byte, keyOK, more, ok bool) {
	if *n == 0 {
		if !s.eat('{') {
			return nil, false, false, false
		}
		s.depth++
		if s.depth > maxFastDepth {
			return nil, false, false, false
		}
		if s.eat('}') {
			s.depth--
			return nil, false, false, true
		}
	} else {
		if s.eat('}') {
			s.depth--
			return nil, false, false, true
		}
		if !s.eat(',') {
			return nil, false, false, false
		}
	}
	*n++
	if s.peek() != '"' {
		return nil, false, false, false
	}
	key, flags, ok := s.str()
	if !ok || !s.eat(':') {
		return nil, false, false, false
	}
	s.ws()
	return key, flags&(strEscaped|strNonASCII) == 0, true, true
}

// Flags str reports about a string's raw contents.
const (
	strEscaped  = 1 << iota // has a backslash escape
	strNonASCII             // has a byte >= 0x80
	strUnsafe               // has '<', '>', '&' or DEL, which encoding/json writes escaped
)

// strByte classifies bytes inside a string: 0 is an ordinary byte.
var strByte = func() (t [256]uint8) {
	for c := range 0x20 {
		t[c] = 1
	}
	t['"'], t['\\'] = 1, 1
	t['<'], t['>'], t['&'], t[0x7f] = 2, 2, 2, 2
	for c := 0x80; c < 0x100; c++ {
		t[c] = 3
	}
	return t
}()

// str reads a string and returns its raw contents and flags. Raw contents
// with no flags are the string's value and encode back to themselves.
func (s *scanner) str() (v []byte, flags int, ok bool) {
	b := s.b
	i := s.i + 1 // past the opening quote
	start := i
	for i < len(b) {
		c := b[i]
		switch strByte[c] {
		case 0:
			i++
			continue
		case 2:
			flags |= strUnsafe
			i++
			continue
		case 3:
			flags |= strNonASCII
			i++
			continue
		}
		switch {
		case c == '"':
			s.i = i + 1
			return b[start:i], flags, true
		case c < 0x20:
			return nil, 0, false
		}
		// A backslash escape.
		flags |= strEscaped
		i++
		if i >= len(b) {
			return nil, 0, false
		}
		switch b[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i++
		case 'u':
			if i+4 >= len(b) {
				return nil, 0, false
			}
			for _, h := range b[i+1 : i+5] {
				if !isHex(h) {
					return nil, 0, false
				}
			}
			i += 5
		default:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// plainString reads a string the fast path can use as is.
func (s *scanner) plainString() ([]byte, bool) {
	if s.peek() != '"' {
		return nil, false
	}
	v, flags, ok := s.str()
	return v, ok && flags == 0
}

// stringOrNull reads a string or null (which reads as empty).
func (s *scanner) stringOrNull() (v []byte, flags int, ok bool) {
	if s.literal("null") {
		return nil, 0, true
	}
	if s.peek() != '"' {
		return nil, 0, false
	}
	return s.str()
}

// nullableString reads a plain string or null.
func (s *scanner) nullableString() ([]byte, bool) {
	v, flags, ok := s.stringOrNull()
	return v, ok && flags == 0
}

// anyNullableString accepts any valid string or null.
func (s *scanner) anyNullableString() bool {
	_, _, ok := s.stringOrNull()
	return ok
}

func (s *scanner) literal(lit string) bool {
	s.ws()
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// skip validates and passes over one value.
func (s *scanner) skip() bool {
	switch s.peek() {
	case '{':
		n := 0
		for {
			_, _, more, ok := s.member(&n)
			if !ok {
				return false
			}
			if !more {
				return true
			}
			if !s.skip() {
				return false
			}
		}
	case '[':
		s.i++
		s.depth++
		if s.depth > maxFastDepth {
			return false
		}
		if s.eat(']') {
			s.depth--
			return true
		}
		for {
			if !s.skip() {
				return false
			}
			if s.eat(']') {
				s.depth--
				return true
			}
			if !s.eat(',') {
				return false
			}
		}
	case '"':
		_, _, ok := s.str()
		return ok
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		return s.number()
	}
}

// number passes over a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	s.i = i
	return true
}

// foldsToAny reports whether key matches one of names only case-insensitively,
// as encoding/json would match it (keys are plain ASCII here).
func foldsToAny(key []byte, names ...string) bool {
	for _, name := range names {
		if len(key) == len(name) && bytes.EqualFold(key, []byte(name)) {
			return true
		}
	}
	return false
}
