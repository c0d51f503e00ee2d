package reqstate

// This file keeps the first implementation of RFC 8785 canonicalization
// (one allocation per member name, sort key and value) as a reference:
// FuzzCanonicalizeReference checks that the allocation-lean one in
// jcs.go agrees with it on every input, output and error alike.

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// refCanonicalize returns the RFC 8785 (JSON Canonicalization Scheme) form of
// the JSON text src: no insignificant whitespace, object members sorted by
// the UTF-16 code units of their names, strings with the minimal escapes,
// and numbers in ECMAScript's shortest round-trip form. It rejects what
// RFC 8785 (via I-JSON, RFC 7493) excludes: invalid UTF-8, lone
// surrogates, duplicate member names, and numbers that do not fit a finite
// IEEE 754 double; and nesting deeper than MaxJSONDepth. Errors wrap
// ErrJSON and give a byte offset, never the input.
func refCanonicalize(src []byte) ([]byte, error) {
	p := refParser{src: src}
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

type refParser struct {
	src []byte
	pos int
}

func (p *refParser) fail(what string) error {
	return fmt.Errorf("%w: %s at offset %d", ErrJSON, what, p.pos)
}

func (p *refParser) skipSpace() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *refParser) value(dst []byte, depth int) ([]byte, error) {
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
		return refAppendJCSString(dst, s), nil
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

func (p *refParser) array(dst []byte, depth int) ([]byte, error) {
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

type refMember struct {
	name  string
	key   []uint16 // name in UTF-16 code units, the sort key
	value []byte   // canonical value
}

func (p *refParser) object(dst []byte, depth int) ([]byte, error) {
	if depth > MaxJSONDepth {
		return nil, p.fail("nesting too deep")
	}
	p.pos++ // {
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		return append(dst, '{', '}'), nil
	}
	var members []refMember
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
		members = append(members, refMember{name: name, key: utf16.Encode([]rune(name)), value: v})
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
	slices.SortFunc(members, func(a, b refMember) int { return slices.Compare(a.key, b.key) })
	dst = append(dst, '{')
	for i, m := range members {
		if i > 0 {
			if m.name == members[i-1].name {
				return nil, fmt.Errorf("%w: duplicate member name in object ending at offset %d", ErrJSON, p.pos)
			}
			dst = append(dst, ',')
		}
		dst = refAppendJCSString(dst, m.name)
		dst = append(dst, ':')
		dst = append(dst, m.value...)
	}
	return append(dst, '}'), nil
}

// string parses a JSON string at p.pos and returns its value as UTF-8.
func (p *refParser) string() (string, error) {
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
func (p *refParser) escape(b *strings.Builder) error {
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

func (p *refParser) hex4(at int) (rune, bool) {
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
func (p *refParser) number(dst []byte) ([]byte, error) {
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

// refAppendJCSString appends s as a JSON string with RFC 8785's escaping:
// only " and \ and the control characters are escaped, with the short
// forms \b \t \n \f \r where they exist and \u00xx (lower-case hex) for
// the rest; everything else is written as UTF-8.
func refAppendJCSString(dst []byte, s string) []byte {
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

// FuzzCanonicalizeReference: Canonicalize and the reference implementation
// agree on every input: the same output, or the same error.
func FuzzCanonicalizeReference(f *testing.F) {
	for _, s := range []string{
		`{"b":[1,2.50,"x"],"a":{"\u00e9":null}}`, `"\ud83d\ude00"`, `1e21`, `[[[]]]`, `-0.0`, `{"a":1,"a":2}`,
		`{"\ufb33":1,"\ud800\udc00":2,"a\"b":3,"a":{"z":[],"y":{}}}`, `"abc\`, `{"a":"\u0000\n"}`, `{"é":1,"e":2}`,
		`{"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8,"9":9,"10":10}`, "\"\xff\"", `{"a":1,}`, `"\ud800"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := Canonicalize(in)
		want, wantErr := refCanonicalize(in)
		if !bytes.Equal(got, want) || fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("Canonicalize(%q) = %q, %v; reference %q, %v", in, got, err, want, wantErr)
		}
	})
}

// TestCompareUTF16 checks the comparison of member names against sorting
// their UTF-16 encodings, on names that mix ASCII, U+E000-U+FFFF and
// characters above U+FFFF, where UTF-16 order and code point order differ.
func TestCompareUTF16(t *testing.T) {
	alphabet := []rune{'a', 'b', 0xE9, 0x7FF, 0xD7FF, 0xE000, 0xFB33, 0xFFFF, 0x10000, 0x1F600, 0x10FFFF}
	rng := rand.New(rand.NewPCG(3, 4))
	name := func() string {
		r := make([]rune, rng.IntN(4))
		for i := range r {
			r[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(r)
	}
	for range 20000 {
		a, b := name(), name()
		want := slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		if got := compareUTF16([]byte(a), []byte(b)); got != want {
			t.Fatalf("compareUTF16(%q, %q) = %d, want %d", a, b, got, want)
		}
	}
}
