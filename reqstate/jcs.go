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
	"unicode/utf16"
	"unicode/utf8"
)

// MaxJSONDepth is the deepest nesting of arrays and objects that
// [Canonicalize] accepts; deeper input is an error, never a stack overflow.
const MaxJSONDepth = 64

// HashArguments returns the arguments hash bound into a state: the SHA-256
// of the RFC 8785 (JCS) canonical form of args. Absent arguments (empty
// input or JSON null) hash as the empty object {}, so a call that omits
// arguments and one that sends {} are the same call.
func HashArguments(args []byte) (Hash, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return sha256.Sum256([]byte("{}")), nil
	}
	c, err := Canonicalize(args)
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
// IEEE 754 double; and nesting deeper than MaxJSONDepth. Errors wrap
// ErrJSON and give a byte offset, never the input.
func Canonicalize(src []byte) ([]byte, error) {
	p := jcsParser{src: src}
	p.skipSpace()
	out, err := p.value(make([]byte, 0, len(src)), 0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.src) {
		return nil, p.fail("trailing data")
	}
	return out, nil
}

type jcsParser struct {
	src []byte
	pos int
	tmp []byte // reused for decoding strings that hold escapes
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

func (p *jcsParser) value(dst []byte, depth int) ([]byte, error) {
	if p.pos >= len(p.src) {
		return nil, p.fail("unexpected end of input")
	}
	switch c := p.src[p.pos]; {
	case c == '{':
		return p.object(dst, depth+1)
	case c == '[':
		return p.array(dst, depth+1)
	case c == '"':
		return p.appendString(dst)
	case c == '-' || '0' <= c && c <= '9':
		return p.number(dst)
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if strings.HasPrefix(string(p.src[p.pos:min(len(p.src), p.pos+len(lit))]), lit) {
				p.pos += len(lit)
				return append(dst, lit...), nil
			}
		}
		return nil, p.fail("invalid value")
	}
}

func (p *jcsParser) array(dst []byte, depth int) ([]byte, error) {
	if depth > MaxJSONDepth {
		return nil, p.fail("nesting too deep")
	}
	p.pos++ // [
	dst = append(dst, '[')
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == ']' {
		p.pos++
		return append(dst, ']'), nil
	}
	for {
		var err error
		p.skipSpace()
		if dst, err = p.value(dst, depth); err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.src) {
			return nil, p.fail("unterminated array")
		}
		switch p.src[p.pos] {
		case ',':
			p.pos++
			dst = append(dst, ',')
		case ']':
			p.pos++
			return append(dst, ']'), nil
		default:
			return nil, p.fail("expected , or ] in array")
		}
	}
}

// jcsMember is one member of an object being canonicalized: where its
// decoded name and its canonical value sit in the object's scratch buffer.
type jcsMember struct {
	name, value span
}

// span is the byte range [start, end) of a buffer.
type span struct{ start, end int }

func (p *jcsParser) object(dst []byte, depth int) ([]byte, error) {
	if depth > MaxJSONDepth {
		return nil, p.fail("nesting too deep")
	}
	p.pos++ // {
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		return append(dst, '{', '}'), nil
	}
	// Names and values go into one scratch buffer, referred to by offsets,
	// so that an object costs one allocation however many members it has.
	var small [8]jcsMember
	members := small[:0]
	scratch := make([]byte, 0, min(len(p.src)-p.pos, 256))
	for {
		p.skipSpace()
		if p.pos >= len(p.src) || p.src[p.pos] != '"' {
			return nil, p.fail("expected member name")
		}
		var m jcsMember
		var err error
		m.name.start = len(scratch)
		if scratch, err = p.decodeString(scratch); err != nil {
			return nil, err
		}
		m.name.end = len(scratch)
		p.skipSpace()
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			return nil, p.fail("expected : after member name")
		}
		p.pos++
		p.skipSpace()
		m.value.start = len(scratch)
		if scratch, err = p.value(scratch, depth); err != nil {
			return nil, err
		}
		m.value.end = len(scratch)
		members = append(members, m)
		p.skipSpace()
		if p.pos >= len(p.src) {
			return nil, p.fail("unterminated object")
		}
		if p.src[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.src[p.pos] != '}' {
			return nil, p.fail("expected , or } in object")
		}
		p.pos++
		break
	}
	name := func(m jcsMember) []byte { return scratch[m.name.start:m.name.end] }
	slices.SortFunc(members, func(a, b jcsMember) int { return compareUTF16(name(a), name(b)) })
	dst = append(dst, '{')
	for i, m := range members {
		if i > 0 {
			if bytes.Equal(name(m), name(members[i-1])) {
				return nil, fmt.Errorf("%w: duplicate member name in object ending at offset %d", ErrJSON, p.pos)
			}
			dst = append(dst, ',')
		}
		dst = appendJCSString(dst, name(m))
		dst = append(dst, ':')
		dst = append(dst, scratch[m.value.start:m.value.end]...)
	}
	return append(dst, '}'), nil
}

// compareUTF16 compares two valid UTF-8 strings by their UTF-16 code units,
// the order RFC 8785 sorts member names in, without converting them. It
// differs from comparing the bytes only where a character above U+FFFF
// (a surrogate pair in UTF-16, D800-DBFF first) meets one in U+E000-U+FFFF.
func compareUTF16(a, b []byte) int {
	for len(a) > 0 && len(b) > 0 {
		ra, na := utf8.DecodeRune(a)
		rb, nb := utf8.DecodeRune(b)
		if ra != rb {
			return cmp.Compare(utf16Units(ra), utf16Units(rb))
		}
		a, b = a[na:], b[nb:]
	}
	return cmp.Compare(len(a), len(b))
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
// form. A string without escapes is already canonical (it cannot hold a
// quote, a backslash or a control character unescaped), so it is copied
// as it is; one with escapes is decoded and escaped again.
func (p *jcsParser) appendString(dst []byte) ([]byte, error) {
	start := p.pos
	end, escaped, err := p.scanString()
	if err != nil {
		return nil, err
	}
	if !escaped {
		p.pos = end
		return append(dst, p.src[start:end]...), nil
	}
	p.pos = start
	p.tmp, err = p.decodeString(p.tmp[:0])
	if err != nil {
		return nil, err
	}
	return appendJCSString(dst, p.tmp), nil
}

// scanString finds the end of the JSON string at p.pos (just past its
// closing quote), checking it as decodeString does. At the first escape it
// stops and reports escaped, leaving the string to decodeString.
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
			return 0, true, nil // decodeString takes it from here
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

// number validates a JSON number at p.pos and appends its ECMAScript form.
func (p *jcsParser) number(dst []byte) ([]byte, error) {
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
		return nil, p.fail("invalid number")
	}
	if p.pos == len(p.src) || p.src[p.pos] != '.' && p.src[p.pos] != 'e' && p.src[p.pos] != 'E' {
		// An integer of at most 15 digits is exact in a double, and
		// ECMAScript writes it as it is (JSON allows no leading zeros),
		// save -0: no need to parse and format it.
		lit := p.src[start:p.pos]
		if n := len(lit); n <= 15 || n == 16 && lit[0] == '-' {
			if string(lit) == "-0" {
				return append(dst, '0'), nil
			}
			return append(dst, lit...), nil
		}
	}
	if p.pos < len(p.src) && p.src[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return nil, p.fail("invalid number")
		}
	}
	if p.pos < len(p.src) && (p.src[p.pos] == 'e' || p.src[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.src) && (p.src[p.pos] == '+' || p.src[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return nil, p.fail("invalid number")
		}
	}
	f, err := strconv.ParseFloat(string(p.src[start:p.pos]), 64)
	if err != nil || math.IsInf(f, 0) {
		p.pos = start
		return nil, p.fail("number out of the range of an IEEE 754 double")
	}
	return AppendES6Number(dst, f), nil
}

// AppendES6Number appends f as ECMAScript's Number.prototype.toString
// writes it (ECMA-262 Number::toString), which is what RFC 8785 requires:
// the shortest digits that round-trip, plain notation for exponents in
// [-6, 21), exponent notation otherwise, and -0 as 0. f must be finite.
func AppendES6Number(dst []byte, f float64) []byte {
	if f == 0 { // +0 and -0
		return append(dst, '0')
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// Shortest round-trip digits d1.d2...dk and exponent e: f = 0.d1...dk * 10^n, n = e+1.
	var tmp [32]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(string(e), "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	k, n := len(digits), x+1
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
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
