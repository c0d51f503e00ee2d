// Package termtext makes text a server chose safe to write to a terminal.
//
// A server's tool names, messages and results reach the person's screen
// through mrtr call and mrtr probe. Written raw, an escape sequence in
// them can clear the screen, move the cursor to overwrite what was
// printed (a forged "pass"), set the window title, or write the
// clipboard (OSC 52); a bidirectional override can make text read in
// another order than it is stored. Clean removes all of that, on a
// terminal and in a pipe alike: what goes to a file is read on a
// terminal later.
package termtext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Clean returns s without control characters and format characters,
// keeping newlines and tabs:
//
//   - an escape sequence (ESC or a C1 introducer, and everything up to
//     its final byte or, for a string sequence such as OSC, its
//     terminator) goes whole, so "\x1b[31mred\x1b[0m" reads "red";
//   - every other C0 control but \n and \t (\r among them: it lets
//     text overwrite the line), DEL, and every C1 control goes;
//   - format characters (Unicode category Cf) go: bidirectional
//     overrides, embeddings, isolates and marks, zero-width spaces and
//     joiners (U+200B-U+200D, U+2060), the byte order mark U+FEFF, the
//     soft hyphen U+00AD and the tag characters U+E0000-U+E007F, which
//     hide text or make it read in another order than it is stored;
//   - the line and paragraph separators U+2028 and U+2029 go (a
//     terminal does not break the line on them, a reader of the text
//     may);
//   - a byte that is not UTF-8 becomes U+FFFD.
//
// Text without any of these comes back unchanged, so Clean is
// idempotent: Clean(Clean(s)) == Clean(s).
func Clean(s string) string { return clean(s, false) }

// Line is Clean for text shown on one line (a table cell, a name): each
// run of newlines, tabs and other white space becomes one space, and
// the ends are trimmed.
func Line(s string) string { return strings.Join(strings.Fields(clean(s, true)), " ") }

func clean(s string, oneLine bool) string {
	if safe(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			b.WriteRune(utf8.RuneError)
			i += max(n, 1)
			continue
		case r == 0x1b || r == 0x9b || r == 0x9d || r == 0x90 || r == 0x98 || r == 0x9e || r == 0x9f:
			i = skipSequence(s, i)
			continue
		case r == '\n' || r == '\t':
			if oneLine {
				b.WriteByte(' ')
			} else {
				b.WriteRune(r)
			}
		case drop(r):
		default:
			b.WriteRune(r)
		}
		i += n
	}
	return b.String()
}

// safe reports whether s has nothing Clean changes.
func safe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\n' && c != '\t' || c >= 0x7f {
			return safeSlow(s)
		}
	}
	return true
}

func safeSlow(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n <= 1 {
				return false
			}
		}
		if r != '\n' && r != '\t' && drop(r) {
			return false
		}
	}
	return true
}

// drop reports whether r is a control, format (bidirectional formatting,
// zero-width, tag) or line-separating character (\n and \t included:
// callers keep those themselves).
func drop(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Bidi_Control, r) ||
		r == '\u2028' || r == '\u2029'
}

// skipSequence returns the index just past the escape sequence that
// starts at s[i] (ESC, or a C1 introducer as a UTF-8 rune), following
// ECMA-48: CSI takes parameter and intermediate bytes up to a final
// byte; OSC, DCS, SOS, PM and APC take everything up to BEL or ST (ESC
// \ or U+009C), or the end of s; any other ESC takes intermediate bytes
// and one final byte. A sequence cut short ends where it stops making
// sense, and that character is kept for the next round.
func skipSequence(s string, i int) int {
	r, n := utf8.DecodeRuneInString(s[i:])
	i += n
	kind := r
	if r == 0x1b {
		if i >= len(s) {
			return i
		}
		switch c := s[i]; c {
		case '[':
			kind = 0x9b
			i++
		case ']':
			kind = 0x9d
			i++
		case 'P', 'X', '^', '_':
			kind = 0x90
			i++
		default:
			// nF escape (intermediates 0x20-0x2F then a final 0x30-0x7E)
			// or a two-character Fp/Fe/Fs escape.
			for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
				i++
			}
			if i < len(s) && s[i] >= 0x30 && s[i] <= 0x7e {
				i++
			}
			return i
		}
	}
	switch kind {
	case 0x9b: // CSI: parameters 0x30-0x3F, intermediates 0x20-0x2F, final 0x40-0x7E
		for i < len(s) && s[i] >= 0x30 && s[i] <= 0x3f {
			i++
		}
		for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
			i++
		}
		if i < len(s) && s[i] >= 0x40 && s[i] <= 0x7e {
			i++
		}
		return i
	default: // a control string: up to BEL or ST
		for i < len(s) {
			r, n := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == 0x07 || r == 0x9c:
				return i + n
			case r == 0x1b && i+1 < len(s) && s[i+1] == '\\':
				return i + 2
			case r == 0x1b:
				// Another escape begins: the string ended unterminated.
				return i
			}
			i += n
		}
		return i
	}
}
