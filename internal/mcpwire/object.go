package mcpwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"iter"
	"slices"
)

// Errors of ParseObject.
var (
	ErrNotObject = errors.New("not a JSON object")
	ErrSyntax    = errors.New("invalid JSON")
)

// Object is a JSON object read from untrusted input, members by exact
// name (no case folding; of repeated names the last wins, as in
// encoding/json, so a proxy that forwards only what it parsed shows the
// next hop no member it did not see). Member values are raw JSON,
// sub-slices of the parsed input: do not modify the input afterwards.
type Object map[string]json.RawMessage

// TrimSpace trims JSON's whitespace (space, tab, line feed, carriage
// return) from both ends of b. bytes.TrimSpace also trims what JSON does
// not allow there (vertical tab, form feed, NEL, Unicode spaces), so a
// value it accepted would be one the next hop's parser refuses.
func TrimSpace(b []byte) []byte { return bytes.Trim(b, " \t\n\r") }

// ParseObject validates b as one JSON value (accepting exactly what
// encoding/json.Valid accepts) and splits it into members if it is an
// object, in one pass (scan.go).
func ParseObject(b []byte) (Object, error) {
	b = TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil, ErrNotObject
	}
	o, _, ok := scanObject(b)
	if !ok {
		return nil, ErrSyntax
	}
	return o, nil
}

// Object returns member k as an object, without validating it again: the
// members of a parsed object are valid JSON.
func (o Object) Object(k string) (Object, bool) {
	raw := o[k]
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	return SplitObject(raw), true
}

// ErrDuplicateName is ParseUniqueObject's error for an object in which a
// member name repeats.
var ErrDuplicateName = errors.New("duplicate member name")

// ParseUniqueObject is ParseObject that refuses (ErrDuplicateName) an
// object whose member names repeat at its top level: two parsers that
// keep the first or the last of them could read different messages.
func ParseUniqueObject(b []byte) (Object, error) {
	b = TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil, ErrNotObject
	}
	o, dup, ok := scanObject(b)
	if !ok {
		return nil, ErrSyntax
	}
	if dup {
		return nil, ErrDuplicateName
	}
	return o, nil
}

// UniqueObject is Object for a member whose own member names must not
// repeat: ok is false when it is absent, not an object, or repeats one.
func (o Object) UniqueObject(k string) (Object, bool) {
	raw := o[k]
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	m, dup := split(raw)
	return m, !dup
}

// SplitObject splits b, one valid JSON object with no surrounding space,
// into its members; of repeated names the last wins.
func SplitObject(b []byte) Object {
	o, _ := split(b)
	return o
}

// Member returns the value of the last member named key of obj, a member
// of a parsed Object (so valid JSON), without building a map; ok is false
// when obj is not an object or has no such member.
func Member(obj json.RawMessage, key string) (json.RawMessage, bool) {
	if len(obj) == 0 || obj[0] != '{' {
		return nil, false
	}
	return member(obj, key)
}

// Members yields the members of obj, a member of a parsed Object (so
// valid JSON), in order and without building a map: each name decoded,
// each value as written; a repeated name is yielded each time. It yields
// nothing when obj is not an object.
func Members(obj json.RawMessage) iter.Seq2[string, json.RawMessage] {
	return func(yield func(string, json.RawMessage) bool) {
		if len(obj) == 0 || obj[0] != '{' {
			return
		}
		b := obj
		i := 1
		for {
			i = skipSpace(b, i)
			if i >= len(b) || b[i] == '}' {
				return
			}
			kEnd := skipString(b, i)
			name := unquote(b[i:kEnd])
			i = skipSpace(b, kEnd) + 1 // ':'
			i = skipSpace(b, i)
			vEnd := skipValue(b, i)
			if !yield(name, b[i:vEnd:vEnd]) {
				return
			}
			i = skipSpace(b, vEnd)
			if i < len(b) && b[i] == ',' {
				i++
			}
		}
	}
}

// MemberSpan finds member key of obj, one valid JSON object with no
// surrounding space, for a caller that replaces its value in place:
// obj[start:end] is the value. found is false when obj has no such
// member; unique is false when any member name of obj repeats (then a
// reader keeping the first of them and one keeping the last read
// different objects, and the value must not be spliced). Objects of more
// than 16 members count as not unique.
func MemberSpan(obj []byte, key string) (start, end int, found, unique bool) {
	if len(obj) == 0 || obj[0] != '{' {
		return 0, 0, false, false
	}
	var seen [16]string
	n := 0
	i := 1
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] == '}' {
			return start, end, found, true
		}
		kEnd := skipString(obj, i)
		name := unquote(obj[i:kEnd])
		if n == len(seen) || slices.Contains(seen[:n], name) {
			return 0, 0, false, false
		}
		seen[n] = name
		n++
		i = skipSpace(obj, kEnd) + 1 // ':'
		i = skipSpace(obj, i)
		vEnd := skipValue(obj, i)
		if name == key {
			start, end, found = i, vEnd, true
		}
		i = skipSpace(obj, vEnd)
		if i < len(obj) && obj[i] == ',' {
			i++
		}
	}
}

// member returns the value of the last member named key of b, one valid
// JSON object with no surrounding space, without building a map.
func member(b []byte, key string) (json.RawMessage, bool) {
	var val json.RawMessage
	found := false
	i := 1
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] == '}' {
			return val, found
		}
		kEnd := skipString(b, i)
		match := unquoteEqual(b[i:kEnd], key)
		i = skipSpace(b, kEnd) + 1 // ':'
		i = skipSpace(b, i)
		vEnd := skipValue(b, i)
		if match {
			val, found = b[i:vEnd:vEnd], true
		}
		i = skipSpace(b, vEnd)
		if i < len(b) && b[i] == ',' {
			i++
		}
	}
}

// unquoteEqual reports whether the valid JSON string literal raw decodes
// to s.
func unquoteEqual(raw []byte, s string) bool {
	if len(raw) == len(s)+2 && string(raw[1:len(raw)-1]) == s {
		return true
	}
	if bytes.IndexByte(raw, '\\') < 0 && !hasHighBit(raw) {
		return false
	}
	return unquote(raw) == s
}

func hasHighBit(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return true
		}
	}
	return false
}

func split(b []byte) (o Object, dup bool) {
	o = make(Object, 8)
	i := 1
	for {
		i = skipSpace(b, i)
		if b[i] == '}' {
			return o, dup
		}
		kEnd := skipString(b, i)
		key := unquote(b[i:kEnd])
		i = skipSpace(b, kEnd) + 1 // ':'
		i = skipSpace(b, i)
		vEnd := skipValue(b, i)
		if _, seen := o[key]; seen {
			dup = true
		}
		o[key] = b[i:vEnd:vEnd]
		i = skipSpace(b, vEnd)
		if b[i] == ',' {
			i++
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the valid JSON value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}

// unquote decodes a valid JSON string literal as encoding/json does
// (invalid UTF-8 becomes U+FFFD), with a fast path for plain ASCII.
func unquote(raw []byte) string {
	plain := true
	for _, c := range raw {
		if c == '\\' || c >= 0x80 {
			plain = false
			break
		}
	}
	if plain {
		return intern(raw[1 : len(raw)-1])
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// intern returns the member names every message repeats without
// allocating (a switch on string(b) does not copy b).
func intern(b []byte) string {
	switch string(b) {
	case "jsonrpc":
		return "jsonrpc"
	case "id":
		return "id"
	case "method":
		return "method"
	case "params":
		return "params"
	case "name":
		return "name"
	case "uri":
		return "uri"
	case "arguments":
		return "arguments"
	case "_meta":
		return "_meta"
	case "requestState":
		return "requestState"
	case "inputResponses":
		return "inputResponses"
	case "inputRequests":
		return "inputRequests"
	case "result":
		return "result"
	case "error":
		return "error"
	case "resultType":
		return "resultType"
	case "content":
		return "content"
	case "input_required":
		return "input_required"
	case "complete":
		return "complete"
	case "tools/call":
		return "tools/call"
	case "2026-07-28":
		return "2026-07-28"
	case "io.modelcontextprotocol/protocolVersion":
		return "io.modelcontextprotocol/protocolVersion"
	case "io.modelcontextprotocol/clientCapabilities":
		return "io.modelcontextprotocol/clientCapabilities"
	case "io.modelcontextprotocol/clientInfo":
		return "io.modelcontextprotocol/clientInfo"
	}
	return string(b)
}

// StringValue decodes raw, a valid JSON value, as a string; ok is false
// when it is not a string.
func StringValue(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	return unquote(raw), true
}

// String returns member k as a string; ok is false when it is absent or not
// a string.
func (o Object) String(k string) (string, bool) {
	raw, ok := o[k]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	return unquote(raw), true
}

// Has reports whether member k is present and not null.
func (o Object) Has(k string) bool {
	raw, ok := o[k]
	return ok && !bytes.Equal(raw, []byte("null"))
}

// Encode writes o as compact JSON without HTML escaping, so raw members
// (the upstream's own requestState among them) leave byte for byte.
func (o Object) Encode() ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(o.size())
	buf.WriteByte('{')
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := WriteString(&buf, k); err != nil {
			return nil, err
		}
		buf.WriteByte(':')
		buf.Write(o[k])
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func (o Object) size() int {
	n := 2
	for k, v := range o {
		n += len(k) + len(v) + 4
	}
	return n
}

// WriteString writes s as a JSON string, without HTML escaping.
func WriteString(buf *bytes.Buffer, s string) error {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			b, err := MarshalNoEscape(s)
			buf.Write(b)
			return err
		}
	}
	buf.WriteByte('"')
	buf.WriteString(s)
	buf.WriteByte('"')
	return nil
}

func MarshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Edit is one change AppendEdited makes to an object: member Name gets
// Value, or is dropped when Value is nil.
type Edit struct {
	Name  string
	Value json.RawMessage
}

// AppendEdited appends obj, one valid JSON object with no surrounding
// space, to dst with edits applied: a member named in an edit is dropped
// (nil Value) or gets the edit's Value in place, and an edit with a Value
// whose member obj lacks is added last. Every other member is appended as
// written, name and value byte for byte; only the whitespace between
// members is dropped. ok is false, and dst is returned as given, when obj
// is not an object or holds a member named in an edit more than once (a
// reader keeping the first and one keeping the last would then read
// different objects); repeats of other names are the caller's to refuse
// before (ParseUniqueObject, UniqueObject). Edits' names must differ.
func AppendEdited(dst, obj []byte, edits ...Edit) (_ []byte, ok bool) {
	if len(obj) == 0 || obj[0] != '{' {
		return dst, false
	}
	var seen uint64 // bit e: edits[e]'s member was met
	if len(edits) > 64 {
		panic("mcpwire: AppendEdited takes at most 64 edits")
	}
	start := len(dst)
	dst = append(dst, '{')
	first := true
	i := 1
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] == '}' {
			break
		}
		nStart := i
		kEnd := skipString(obj, i)
		e := -1
		for j := range edits {
			if unquoteEqual(obj[nStart:kEnd], edits[j].Name) {
				e = j
				break
			}
		}
		i = skipSpace(obj, kEnd) + 1 // ':'
		i = skipSpace(obj, i)
		vEnd := skipValue(obj, i)
		switch {
		case e < 0:
			dst = appendMember(dst, &first, obj[nStart:vEnd])
		case seen&(1<<e) != 0:
			return dst[:start], false
		default:
			seen |= 1 << e
			if edits[e].Value != nil {
				dst = appendMember(dst, &first, obj[nStart:i]) // name, colon and spacing as written
				dst = append(dst, edits[e].Value...)
			}
		}
		i = skipSpace(obj, vEnd)
		if i < len(obj) && obj[i] == ',' {
			i++
		}
	}
	for j, ed := range edits {
		if seen&(1<<j) == 0 && ed.Value != nil {
			dst = AppendString(appendMember(dst, &first, nil), ed.Name)
			dst = append(append(dst, ':'), ed.Value...)
		}
	}
	return append(dst, '}'), true
}

func appendMember(dst []byte, first *bool, b []byte) []byte {
	if !*first {
		dst = append(dst, ',')
	}
	*first = false
	return append(dst, b...)
}

// AppendString appends s as a JSON string, without HTML escaping.
func AppendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			b, _ := MarshalNoEscape(s) // a string always encodes
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
