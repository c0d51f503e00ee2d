package termtext

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// JSON returns encoded JSON (as encoding/json writes it) with DEL, the C1
// controls and the characters Clean drops as format characters written
// as \u escapes, which encoding/json leaves raw; it already escapes the C0
// controls. These characters can only stand inside JSON strings, so the
// values a reader decodes stay exactly the same: a script gets the
// server's exact text, a person reading the JSON on a terminal gets no
// escape sequences.
func JSON(b []byte) []byte {
	if safe(string(b)) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			out = append(out, `\ufffd`...)
			i += max(n, 1)
			continue
		case r >= 0x7f && drop(r):
			if r > 0xffff { // a tag character: JSON escapes UTF-16 units
				r1, r2 := utf16.EncodeRune(r)
				out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
			} else {
				out = fmt.Appendf(out, `\u%04x`, r)
			}
		default:
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}
