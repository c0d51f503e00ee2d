package reqstate

import (
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
	trimmed := strings.TrimSpace(string(args))
	if trimmed == "" || trimmed == "null" {
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
		s, err := p.string()
		if err != nil {
			return nil, err
		}
		return appendJCSString(dst, s), nil
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

type jcsMember struct {
	name  string
	key   []uint16 // name in UTF-16 code units, the sort key
	value []byte   // canonical value
}

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
	var members []jcsMember
	for {
		p.skipSpace()
		if p.pos >= len(p.src) || p.src[p.pos] != '"' {
			return nil, p.fail("expected member name")
		}
		name, err := p.string()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			return nil, p.fail("expected : after member name")
		}
		p.pos++
		p.skipSpace()
		v, err := p.value(nil, depth)
		if err != nil {
			return nil, err
		}
		members = append(members, jcsMember{name: name, key: utf16.Encode([]rune(name)), value: v})
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
	slices.SortFunc(members, func(a, b jcsMember) int { return slices.Compare(a.key, b.key) })
	dst = append(dst, '{')
	for i, m := range members {
		if i > 0 {
			if m.name == members[i-1].name {
				return nil, fmt.Errorf("%w: duplicate member name in object ending at offset %d", ErrJSON, p.pos)
			}
			dst = append(dst, ',')
		}
		dst = appendJCSString(dst, m.name)
		dst = append(dst, ':')
		dst = append(dst, m.value...)
	}
	return append(dst, '}'), nil
}

// string parses a JSON string at p.pos and returns its value as UTF-8.
func (p *jcsParser) string() (string, error) {
	p.pos++ // opening quote
	var b strings.Builder
	start := p.pos
	for {
		if p.pos >= len(p.src) {
			return "", p.fail("unterminated string")
		}
		c := p.src[p.pos]
		switch {
		case c == '"':
			b.Write(p.src[start:p.pos])
			p.pos++
			return b.String(), nil
		case c < 0x20:
			return "", p.fail("control character in string")
		case c == '\\':
			b.Write(p.src[start:p.pos])
			if err := p.escape(&b); err != nil {
				return "", err
			}
			start = p.pos
		case c < utf8.RuneSelf:
			p.pos++
		default:
			r, size := utf8.DecodeRune(p.src[p.pos:])
			if r == utf8.RuneError && size == 1 {
				return "", p.fail("invalid UTF-8")
			}
			p.pos += size
		}
	}
}

// escape decodes one escape sequence at p.pos (the backslash) into b.
func (p *jcsParser) escape(b *strings.Builder) error {
	if p.pos+1 >= len(p.src) {
		return p.fail("unterminated escape")
	}
	c := p.src[p.pos+1]
	if simple := strings.IndexByte(`"\/bfnrt`, c); simple >= 0 {
		b.WriteByte("\"\\/\b\f\n\r\t"[simple])
		p.pos += 2
		return nil
	}
	if c != 'u' {
		return p.fail("invalid escape")
	}
	r, ok := p.hex4(p.pos + 2)
	if !ok {
		return p.fail("invalid \\u escape")
	}
	p.pos += 6
	switch {
	case utf16.IsSurrogate(r) && r < 0xDC00: // high surrogate: a low one must follow
		if p.pos+1 < len(p.src) && p.src[p.pos] == '\\' && p.src[p.pos+1] == 'u' {
			if lo, ok := p.hex4(p.pos + 2); ok && 0xDC00 <= lo && lo <= 0xDFFF {
				b.WriteRune(utf16.DecodeRune(r, lo))
				p.pos += 6
				return nil
			}
		}
		return p.fail("lone surrogate")
	case utf16.IsSurrogate(r):
		return p.fail("lone surrogate")
	}
	b.WriteRune(r)
	return nil
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
func appendJCSString(dst []byte, s string) []byte {
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
