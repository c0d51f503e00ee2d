package reqstate

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxJSONDepth is the deepest nesting of arrays and objects that
// [Canonicalize] accepts; deeper input is an error, never a stack overflow.
const MaxJSONDepth = 64

// HashArguments returns the arguments hash bound into a state: the SHA-256
// of the RFC 8785 (JCS) canonical form of args. Absent arguments (empty
// input or JSON null) hash as the empty object {}, so a call that omits
// arguments and one that sends {} are the same call. Two arguments texts
// share a hash only if they hold the same values: numbers whose canonical
// form would be another number are refused ([ErrInexactNumber]), and so
// are objects, at any depth, with two member names that are equal under
// Unicode case folding ([ErrFoldedNames]).
//
// The second rule is beyond RFC 8785, which sorts members by name and so
// loses their order: {"ID":2,"id":1} and {"id":1,"ID":2} have one
// canonical form, but Go's encoding/json matches member names to struct
// fields case-insensitively (strings.EqualFold) with the last one winning,
// so a handler that decodes them into a struct (mcp-go's BindArguments,
// any Go upstream behind the proxy) sees id 1 in one and 2 in the other.
// Refusing such names in the hash makes the order of members irrelevant
// to every decoder that folds as encoding/json does.
func HashArguments(args []byte) (Hash, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return sha256.Sum256([]byte("{}")), nil
	}
	c, err := canonicalize(args, true)
	if err != nil {
		return Hash{}, err
	}
	return sha256.Sum256(c), nil
}

// Canonicalize returns the RFC 8785 (JSON Canonicalization Scheme) form of
// the JSON text src: no insignificant whitespace, object members sorted by
// the UTF-16 code units of their names, strings with the minimal escapes,
// and numbers in ECMAScript's shortest round-trip form. It rejects what
// RFC 8785 (via I-JSON, RFC 7493) excludes: invalid UTF-8, lone
// surrogates, duplicate member names, and numbers that do not fit a finite
// IEEE 754 double; nesting deeper than MaxJSONDepth; and, so that the
// canonical form never changes a value, numbers that a double does not
// hold exactly enough (see [ErrInexactNumber]). Errors wrap ErrJSON and
// give a byte offset, never the input.
//
// Its memory is linear in the input, whatever the nesting: every value is
// written once, in place, into the one output buffer, and an object whose
// members arrive out of order is reordered there through one scratch
// buffer that the whole document shares. Memory is the output, that
// scratch buffer (at most the output's size) and eight bytes per member
// of the objects still open; at most about 5 bytes per input byte on the
// shapes TestCanonicalizeLinearMemory measures. Reordering moves an
// object's body, so a value under d out-of-order objects is moved d times:
// time is at most MaxJSONDepth moves per byte, a few milliseconds per MiB.
func Canonicalize(src []byte) ([]byte, error) {
	return canonicalize(src, false)
}

// canonicalize is Canonicalize, refusing also, when foldNames is set,
// objects with two member names equal under case folding (HashArguments).
func canonicalize(src []byte, foldNames bool) ([]byte, error) {
	p := jcsParser{src: src, out: make([]byte, 0, len(src)), foldNames: foldNames}
	p.skipSpace()
	if err := p.value(0); err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.src) {
		return nil, p.fail("trailing data")
	}
	return p.out, nil
}

type jcsParser struct {
	src []byte
	pos int
	out []byte // the canonical form, written as the input is read
	// scratch is reused for decoding a string that holds escapes and for
	// putting an object's members in order, never for both at once.
	scratch []byte
	// foldNames refuses objects with two member names equal under case
	// folding (checkFoldedNames).
	foldNames bool
}

func (p *jcsParser) fail(what string) error {
	return fmt.Errorf("%w: %s at offset %d", ErrJSON, what, p.pos)
}

func (p *jcsParser) skipSpace() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jcsParser) value(depth int) error {
	if p.pos >= len(p.src) {
		return p.fail("unexpected end of input")
	}
	switch c := p.src[p.pos]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		return p.appendString()
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if strings.HasPrefix(string(p.src[p.pos:min(len(p.src), p.pos+len(lit))]), lit) {
				p.pos += len(lit)
				p.out = append(p.out, lit...)
				return nil
			}
		}
		return p.fail("invalid value")
	}
}

func (p *jcsParser) array(depth int) error {
	if depth > MaxJSONDepth {
		return p.fail("nesting too deep")
	}
	p.pos++ // [
	p.out = append(p.out, '[')
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == ']' {
		p.pos++
		p.out = append(p.out, ']')
		return nil
	}
	for {
		p.skipSpace()
		if err := p.value(depth); err != nil {
			return err
		}
		p.skipSpace()
		if p.pos >= len(p.src) {
			return p.fail("unterminated array")
		}
		switch p.src[p.pos] {
		case ',':
			p.pos++
			p.out = append(p.out, ',')
		case ']':
			p.pos++
			p.out = append(p.out, ']')
			return nil
		default:
			return p.fail("expected , or ] in array")
		}
	}
}

// object writes the members of an object as they come, each name in its
// canonical form, then puts them in order where they stand (sortMembers).
// Nothing of a member is copied into its parent: a value nested d levels
// deep is written once, not d times.
func (p *jcsParser) object(depth int) error {
	if depth > MaxJSONDepth {
		return p.fail("nesting too deep")
	}
	p.pos++ // {
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		p.out = append(p.out, '{', '}')
		return nil
	}
	open := len(p.out)
	p.out = append(p.out, '{')
	var small [16]jcsMember
	members := small[:0]
	for {
		p.skipSpace()
		if p.pos >= len(p.src) || p.src[p.pos] != '"' {
			return p.fail("expected member name")
		}
		if len(members) == cap(members) {
			// Doubling, not append's quarter steps for large slices, which
			// would allocate about five times the final size in all.
			members = slices.Grow(members, len(members))
		}
		start, ok := p.offset(open)
		if !ok {
			return p.fail("object too large")
		}
		members = append(members, jcsMember{name: start})
		if err := p.appendString(); err != nil {
			return err
		}
		p.skipSpace()
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			return p.fail("expected : after member name")
		}
		p.pos++
		p.skipSpace()
		p.out = append(p.out, ':')
		if err := p.value(depth); err != nil {
			return err
		}
		p.skipSpace()
		if p.pos >= len(p.src) {
			return p.fail("unterminated object")
		}
		end, ok := p.offset(open)
		if !ok {
			return p.fail("object too large")
		}
		members[len(members)-1].end = end
		if p.src[p.pos] == ',' {
			p.pos++
			p.out = append(p.out, ',')
			continue
		}
		if p.src[p.pos] != '}' {
			return p.fail("expected , or } in object")
		}
		p.pos++
		break
	}
	if err := p.sortMembers(open, members); err != nil {
		return err
	}
	if p.foldNames {
		if err := p.checkFoldedNames(open, members); err != nil {
			return err
		}
	}
	p.out = append(p.out, '}')
	return nil
}

// jcsMember is one member of an object being canonicalized: where it
// starts (its name's opening quote) and ends in the output, counted from
// the object's opening brace. Eight bytes, so that the records of a wide
// object stay smaller than its text.
type jcsMember struct {
	name, end uint32
}

// offset returns the length of the output counted from open, if it fits
// a jcsMember; an object over 4 GiB does not.
func (p *jcsParser) offset(open int) (uint32, bool) {
	n := len(p.out) - open
	return uint32(n), uint64(n) <= math.MaxUint32
}

// sortMembers puts the members of the object opened at out[open] (the
// output ends with its last member) in RFC 8785 order, and refuses
// duplicate names. Members already in order, the common case, cost one
// comparison each and no copy. On return ms is in that order and gives
// where each member now stands.
func (p *jcsParser) sortMembers(open int, ms []jcsMember) error {
	name := func(m jcsMember) []byte { return p.out[open+int(m.name)+1:] } // after the opening quote
	sorted := true
	for i := 1; i < len(ms); i++ {
		c := compareJCSNames(name(ms[i-1]), name(ms[i]))
		if c == 0 {
			return p.duplicate()
		}
		if c > 0 {
			sorted = false
			break
		}
	}
	if sorted {
		return nil
	}
	slices.SortFunc(ms, func(a, b jcsMember) int { return compareJCSNames(name(a), name(b)) })
	for i := 1; i < len(ms); i++ {
		if compareJCSNames(name(ms[i-1]), name(ms[i])) == 0 {
			return p.duplicate()
		}
	}
	// Copy the members out, then back in order: the body keeps its length.
	body := open + 1
	p.scratch = append(p.emptyScratch(len(p.out)-body), p.out[body:]...)
	w := body
	for i, m := range ms {
		if i > 0 {
			p.out[w] = ','
			w++
		}
		n := copy(p.out[w:], p.scratch[m.name-1:m.end-1])
		ms[i] = jcsMember{name: uint32(w - open), end: uint32(w + n - open)}
		w += n
	}
	return nil
}

// checkFoldedNames refuses the object opened at out[open], whose members
// ms are (sortMembers), if two of its member names are equal under
// Unicode case folding as strings.EqualFold and encoding/json fold them
// (see HashArguments for why). It sorts ms by folded name (compareFolded)
// and compares neighbours: no allocation, and n log n comparisons of at
// most the length of the names for n members, never a comparison of every
// pair. Names in lower case, the common case, are in that order already
// and cost one comparison each, like sortMembers.
func (p *jcsParser) checkFoldedNames(open int, ms []jcsMember) error {
	name := func(m jcsMember) []byte { return p.out[open+int(m.name)+1:] } // after the opening quote
	compare := func(a, b jcsMember) int { return compareFoldedNames(name(a), name(b)) }
	for i := 1; i < len(ms); i++ {
		c := compare(ms[i-1], ms[i])
		if c == 0 {
			return p.foldedNames()
		}
		if c > 0 {
			slices.SortFunc(ms, compare)
			for i := 1; i < len(ms); i++ {
				if compare(ms[i-1], ms[i]) == 0 {
					return p.foldedNames()
				}
			}
			return nil
		}
	}
	return nil
}

// foldedNamesError is the error of an object that checkFoldedNames refuses.
type foldedNamesError struct{ offset int }

func (e *foldedNamesError) Error() string {
	return fmt.Sprintf("%v: two member names equal under case folding in object ending at offset %d", ErrJSON, e.offset)
}

func (e *foldedNamesError) Unwrap() []error { return []error{ErrJSON, ErrFoldedNames} }

func (p *jcsParser) foldedNames() error { return &foldedNamesError{offset: p.pos} }

// compareFoldedNames compares two member names, given as compareJCSNames
// takes them, by their case-folded forms: character by character, each
// mapped by foldKey to a key that two characters share exactly when
// strings.EqualFold holds for them. It returns 0 exactly when the names
// are equal under strings.EqualFold.
func compareFoldedNames(a, b []byte) int {
	for {
		// ASCII other than an escape, the common case, byte by byte.
		if ca, cb := a[0], b[0]; ca|cb < utf8.RuneSelf && ca != '\\' && cb != '\\' {
			if ca == cb {
				if ca == '"' {
					return 0
				}
			} else if ka, kb := asciiFoldKey(ca), asciiFoldKey(cb); ka != kb {
				return cmp.Compare(ka, kb)
			}
			a, b = a[1:], b[1:]
			continue
		}
		ra, na := nextJCSRune(a)
		rb, nb := nextJCSRune(b)
		if ra != rb {
			if ka, kb := foldKey(ra), foldKey(rb); ka != kb {
				return cmp.Compare(ka, kb)
			}
		} else if ra < 0 {
			return 0
		}
		a, b = a[na:], b[nb:]
	}
}

// asciiFoldKey is foldKey of an ASCII byte in a name's RFC 8785 form
// other than a backslash; the closing quote is the end of the name, -1.
func asciiFoldKey(c byte) int {
	switch {
	case c == '"':
		return -1
	case 'A' <= c && c <= 'Z':
		return int(c + 'a' - 'A')
	}
	return int(c)
}

// foldKey returns the key of r's case-folding orbit (the characters that
// unicode.SimpleFold cycles through from r, which strings.EqualFold and
// encoding/json treat as one): the smallest character of the orbit, as
// encoding/json's foldName takes it, save that an ASCII capital is given
// as its small letter, so that lower-case names, the common case, keep
// their RFC 8785 order. The orbit of k is {K, k, U+212A KELVIN SIGN} and
// that of s is {S, s, U+017F LATIN SMALL LETTER LONG S}: both keys are
// ASCII. foldKey(-1), the end of a name, is -1.
func foldKey(r rune) rune {
	if r >= utf8.RuneSelf {
		for {
			next := unicode.SimpleFold(r)
			if next <= r {
				r = next
				break
			}
			r = next
		}
	}
	if 'A' <= r && r <= 'Z' {
		r += 'a' - 'A'
	}
	return r
}

// emptyScratch returns the scratch buffer, emptied, with room for n
// bytes. Its first allocation is sized for the whole of a small document,
// so that its strings and objects share it without growing it. When it
// must grow it takes the output's capacity at once: no string or object
// body is longer than the output, so that is all it will ever need
// (unless the output grows too), and growing step by step would allocate
// up to twice that in all.
func (p *jcsParser) emptyScratch(n int) []byte {
	if p.scratch == nil || cap(p.scratch) < n {
		size := min(len(p.src), 1024)
		if n > size {
			size = max(n, cap(p.out))
		}
		p.scratch = make([]byte, 0, size)
	}
	return p.scratch[:0]
}

func (p *jcsParser) duplicate() error {
	return fmt.Errorf("%w: duplicate member name in object ending at offset %d", ErrJSON, p.pos)
}

// compareJCSNames compares two member names, each given in its RFC 8785
// string form from just after its opening quote, by the UTF-16 code units
// of the names they stand for: the order RFC 8785 sorts members in. It
// reads each up to its closing quote (a quote inside a name is always
// escaped in that form), decoding as it goes and converting nothing.
// Comparing code points instead would differ only where a character above
// U+FFFF (a surrogate pair in UTF-16, D800-DBFF first) meets one in
// U+E000-U+FFFF.
func compareJCSNames(a, b []byte) int {
	for {
		ra, na := nextJCSRune(a)
		rb, nb := nextJCSRune(b)
		switch {
		case ra == rb && ra < 0:
			return 0
		case ra < 0 || rb < 0: // one name ends: it is a prefix of the other
			return cmp.Compare(ra, rb)
		case ra != rb:
			return cmp.Compare(utf16Units(ra), utf16Units(rb))
		}
		a, b = a[na:], b[nb:]
	}
}

// nextJCSRune decodes the first character of s, a string in the form
// appendJCSString writes (valid UTF-8, with only the escapes \" \\ \b \t
// \n \f \r and \u00xx), and returns it with the bytes it took; at the
// closing quote it returns -1.
func nextJCSRune(s []byte) (rune, int) {
	switch c := s[0]; {
	case c == '"':
		return -1, 1
	case c == '\\':
		switch s[1] {
		case 'b':
			return '\b', 2
		case 't':
			return '\t', 2
		case 'n':
			return '\n', 2
		case 'f':
			return '\f', 2
		case 'r':
			return '\r', 2
		case 'u': // \u00xx, lower-case hex
			return rune(unhex(s[4])<<4 | unhex(s[5])), 6
		default: // \" and \\
			return rune(s[1]), 2
		}
	case c < utf8.RuneSelf:
		return rune(c), 1
	default:
		return utf8.DecodeRune(s)
	}
}

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

// utf16Units packs the UTF-16 encoding of r so that comparing two packed
// values compares the encodings: the first code unit in the high half, the
// second (for a surrogate pair) in the low half.
func utf16Units(r rune) uint32 {
	if r < 0x10000 {
		return uint32(r) << 16
	}
	hi, lo := utf16.EncodeRune(r)
	return uint32(hi)<<16 | uint32(lo)
}

// appendString parses a JSON string at p.pos and appends its RFC 8785
// form to the output. A string without escapes is already canonical (it
// cannot hold a quote, a backslash or a control character unescaped), so
// it is copied as it is; one with escapes is decoded and escaped again.
func (p *jcsParser) appendString() error {
	start := p.pos
	end, escaped, err := p.scanString()
	if err != nil {
		return err
	}
	if !escaped {
		p.pos = end
		p.out = append(p.out, p.src[start:end]...)
		return nil
	}
	// Decoding never lengthens a string: room for its source length at once.
	i := end // the first escape
	for i < len(p.src) && p.src[i] != '"' {
		if p.src[i] == '\\' {
			i++
		}
		i++
	}
	p.pos = start
	p.scratch, err = p.decodeString(p.emptyScratch(min(i, len(p.src)) - start))
	if err != nil {
		return err
	}
	p.out = appendJCSString(p.out, p.scratch)
	return nil
}

// scanString finds the end of the JSON string at p.pos (just past its
// closing quote), checking it as decodeString does. At the first escape it
// stops and reports escaped with end at that escape, leaving the string to
// decodeString.
func (p *jcsParser) scanString() (end int, escaped bool, err error) {
	i := p.pos + 1 // opening quote
	for {
		if i >= len(p.src) {
			p.pos = i
			return 0, false, p.fail("unterminated string")
		}
		c := p.src[i]
		switch {
		case c == '"':
			return i + 1, false, nil
		case c < 0x20:
			p.pos = i
			return 0, false, p.fail("control character in string")
		case c == '\\':
			return i, true, nil // decodeString takes it from here
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(p.src[i:])
			if r == utf8.RuneError && size == 1 {
				p.pos = i
				return 0, false, p.fail("invalid UTF-8")
			}
			i += size
		}
	}
}

// decodeString parses a JSON string at p.pos and appends its value, as
// UTF-8, to dst.
func (p *jcsParser) decodeString(dst []byte) ([]byte, error) {
	p.pos++ // opening quote
	start := p.pos
	for {
		if p.pos >= len(p.src) {
			return nil, p.fail("unterminated string")
		}
		c := p.src[p.pos]
		switch {
		case c == '"':
			dst = append(dst, p.src[start:p.pos]...)
			p.pos++
			return dst, nil
		case c < 0x20:
			return nil, p.fail("control character in string")
		case c == '\\':
			dst = append(dst, p.src[start:p.pos]...)
			var err error
			if dst, err = p.escape(dst); err != nil {
				return nil, err
			}
			start = p.pos
		case c < utf8.RuneSelf:
			p.pos++
		default:
			r, size := utf8.DecodeRune(p.src[p.pos:])
			if r == utf8.RuneError && size == 1 {
				return nil, p.fail("invalid UTF-8")
			}
			p.pos += size
		}
	}
}

// escape decodes one escape sequence at p.pos (the backslash) and appends
// it to dst.
func (p *jcsParser) escape(dst []byte) ([]byte, error) {
	if p.pos+1 >= len(p.src) {
		return nil, p.fail("unterminated escape")
	}
	c := p.src[p.pos+1]
	if simple := strings.IndexByte(`"\/bfnrt`, c); simple >= 0 {
		p.pos += 2
		return append(dst, "\"\\/\b\f\n\r\t"[simple]), nil
	}
	if c != 'u' {
		return nil, p.fail("invalid escape")
	}
	r, ok := p.hex4(p.pos + 2)
	if !ok {
		return nil, p.fail("invalid \\u escape")
	}
	p.pos += 6
	switch {
	case utf16.IsSurrogate(r) && r < 0xDC00: // high surrogate: a low one must follow
		if p.pos+1 < len(p.src) && p.src[p.pos] == '\\' && p.src[p.pos+1] == 'u' {
			if lo, ok := p.hex4(p.pos + 2); ok && 0xDC00 <= lo && lo <= 0xDFFF {
				p.pos += 6
				return utf8.AppendRune(dst, utf16.DecodeRune(r, lo)), nil
			}
		}
		return nil, p.fail("lone surrogate")
	case utf16.IsSurrogate(r):
		return nil, p.fail("lone surrogate")
	}
	return utf8.AppendRune(dst, r), nil
}

func (p *jcsParser) hex4(at int) (rune, bool) {
	if at+4 > len(p.src) {
		return 0, false
	}
	var r rune
	for _, c := range p.src[at : at+4] {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

// number validates a JSON number at p.pos and appends its ECMAScript form,
// refusing a number whose value that form would change (exactDecimal).
func (p *jcsParser) number() error {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.src) && '0' <= p.src[p.pos] && p.src[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.src[p.pos] == '-' {
		p.pos++
	}
	if p.pos < len(p.src) && p.src[p.pos] == '0' {
		p.pos++
	} else if digits() == 0 {
		return p.fail("invalid number")
	}
	if p.pos == len(p.src) || p.src[p.pos] != '.' && p.src[p.pos] != 'e' && p.src[p.pos] != 'E' {
		// An integer of at most 15 digits is exact in a double, and
		// ECMAScript writes it as it is (JSON allows no leading zeros),
		// save -0: no need to parse and format it.
		lit := p.src[start:p.pos]
		if n := len(lit); n <= 15 || n == 16 && lit[0] == '-' {
			if string(lit) == "-0" {
				p.out = append(p.out, '0')
			} else {
				p.out = append(p.out, lit...)
			}
			return nil
		}
	}
	if p.pos < len(p.src) && p.src[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return p.fail("invalid number")
		}
	}
	if p.pos < len(p.src) && (p.src[p.pos] == 'e' || p.src[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.src) && (p.src[p.pos] == '+' || p.src[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return p.fail("invalid number")
		}
	}
	lit := p.src[start:p.pos]
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil || math.IsInf(f, 0) {
		p.pos = start
		return p.fail("number out of the range of an IEEE 754 double")
	}
	var tmp [32]byte
	shortest := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64)
	if !exactDecimal(lit, shortest) {
		return &inexactNumberError{offset: start}
	}
	p.out = appendES6(p.out, shortest)
	return nil
}

// inexactNumberError is the error of a number that exactDecimal refuses.
type inexactNumberError struct{ offset int }

func (e *inexactNumberError) Error() string {
	return fmt.Sprintf("%v: number at offset %d is not exact in an IEEE 754 double (I-JSON, RFC 7493): its canonical form would be another number", ErrJSON, e.offset)
}

func (e *inexactNumberError) Unwrap() []error { return []error{ErrJSON, ErrInexactNumber} }

// exactDecimal reports whether the JSON number lit (well formed) has the
// same decimal value as shortest, the shortest decimal that round-trips
// the double lit parses to, as strconv.AppendFloat(f, 'e', -1) writes it
// (-d.ddde±xx). RFC 8785 writes every number as that shortest decimal, so
// this is what makes the arguments hash injective over numbers.
//
// The rule. RFC 8785 reads a number as a double and writes the double
// back; on its own it maps many numbers to one canonical form:
// 1234567890123456789 and 1234567890123456800 both become
// 1234567890123456800, and a handler that decodes into int64, json.Number
// or big.Float, or reads the raw text, sees two values behind one hash.
// I-JSON (RFC 7493, section 2.2) advises against numbers a double does not
// hold exactly. Taken literally that refuses 0.1 (no binary fraction is
// 0.1), which every client sends. The sound version: a number is accepted
// when its canonical form denotes the same decimal value as its text, so
// canonicalizing changes how a number is spelt (1.0, 1, 1e0, 10E-1 all
// become 1) but never which number it is. Each accepted value then has
// exactly one canonical form and the hash tells values apart.
//
// What passes: every integer of magnitude up to 2^53 (I-JSON's safe
// range), every number a shortest round-trip writer produced
// (JavaScript's JSON.stringify, Go's encoding/json for float64, Python's
// repr), and every spelling of those values. What is refused: integers
// beyond 2^53 that are not the shortest decimal of their double (int64 ids
// such as 1234567890123456789; send them as strings), decimals with more
// precision than a double carries (0.10000000000000001), and nonzero
// numbers that underflow to 0 (1e-400). Even an integer a double holds
// exactly can be refused: 2^60 is 1152921504606846976, but its shortest
// decimal is 1152921504606847000; accepting both would put two values
// behind one hash, and only one of them can be the canonical one.
func exactDecimal(lit, shortest []byte) bool {
	// The value of lit as 0.D x 10^exp, D its significant digits without
	// leading or trailing zeros. No shortest decimal has more than 17
	// digits, so a longer D is refused at once.
	i := 0
	if lit[i] == '-' {
		i++
	}
	intStart := i
	for i < len(lit) && '0' <= lit[i] && lit[i] <= '9' {
		i++
	}
	intEnd := i
	fracStart, fracEnd := i, i
	if i < len(lit) && lit[i] == '.' {
		i++
		fracStart = i
		for i < len(lit) && '0' <= lit[i] && lit[i] <= '9' {
			i++
		}
		fracEnd = i
	}
	var exp int64
	if i < len(lit) { // e or E
		i++
		neg := lit[i] == '-'
		if lit[i] == '-' || lit[i] == '+' {
			i++
		}
		for ; i < len(lit); i++ {
			if exp < 1<<40 { // saturate: no input has 2^40 digits to make up for it
				exp = exp*10 + int64(lit[i]-'0')
			}
		}
		if neg {
			exp = -exp
		}
	}
	exp += int64(intEnd - intStart)
	var d [17]byte
	n, zeros, leading := 0, 0, true
	take := func(digits []byte) bool {
		for _, c := range digits {
			switch {
			case c == '0' && leading:
				exp--
			case c == '0':
				zeros++ // kept only if a nonzero digit follows
			default:
				leading = false
				if n+zeros+1 > len(d) {
					return false
				}
				for ; zeros > 0; zeros-- {
					d[n] = '0'
					n++
				}
				d[n] = c
				n++
			}
		}
		return true
	}
	if !take(lit[intStart:intEnd]) || !take(lit[fracStart:fracEnd]) {
		return false
	}

	// The value of shortest the same way: d[.ddd]e±xx, its digits without
	// trailing zeros, save the one digit of zero.
	if shortest[0] == '-' {
		shortest = shortest[1:]
	}
	e := bytes.IndexByte(shortest, 'e')
	first, rest := shortest[0], shortest[min(2, e):e]
	if first == '0' { // the double is zero: so must lit be
		return n == 0
	}
	if n != 1+len(rest) || d[0] != first || !bytes.Equal(d[1:n], rest) {
		return false
	}
	x, _ := strconv.Atoi(string(shortest[e+1:]))
	return exp == int64(x)+1
}

// AppendES6Number appends f as ECMAScript's Number.prototype.toString
// writes it (ECMA-262 Number::toString), which is what RFC 8785 requires:
// the shortest digits that round-trip, plain notation for exponents in
// [-6, 21), exponent notation otherwise, and -0 as 0. f must be finite.
func AppendES6Number(dst []byte, f float64) []byte {
	var tmp [32]byte
	return appendES6(dst, strconv.AppendFloat(tmp[:0], f, 'e', -1, 64))
}

// appendES6 appends, in ECMAScript's form, the number whose shortest
// round-trip decimal strconv.AppendFloat(f, 'e', -1) wrote as e.
func appendES6(dst, e []byte) []byte {
	if e[0] == '-' {
		e = e[1:]
		if e[0] != '0' { // -0 is written 0
			dst = append(dst, '-')
		}
	}
	// e is d[.ddd]e±xx: the digits d1...dk, and f = 0.d1...dk x 10^n.
	at := bytes.IndexByte(e, 'e')
	first, rest := e[0], e[min(2, at):at]
	if first == '0' {
		return append(dst, '0')
	}
	x, _ := strconv.Atoi(string(e[at+1:]))
	k, n := 1+len(rest), x+1
	switch {
	case k <= n && n <= 21:
		dst = append(dst, first)
		dst = append(dst, rest...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, first)
		dst = append(dst, rest[:n-1]...)
		dst = append(dst, '.')
		dst = append(dst, rest[n-1:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, first)
		dst = append(dst, rest...)
	default:
		dst = append(dst, first)
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, rest...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}

// appendJCSString appends s as a JSON string with RFC 8785's escaping:
// only " and \ and the control characters are escaped, with the short
// forms \b \t \n \f \r where they exist and \u00xx (lower-case hex) for
// the rest; everything else is written as UTF-8.
func appendJCSString[S ~string | ~[]byte](dst []byte, s S) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}
