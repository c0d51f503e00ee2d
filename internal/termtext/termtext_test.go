package termtext

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestClean(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text, äöü ✓\n\tindented", "plain text, äöü ✓\n\tindented"},
		{"\x1b]52;c;c2VjcmV0\x07after", "after"},               // OSC 52 clipboard write, BEL-terminated
		{"\x1b]0;title\x1b\\after", "after"},                   // OSC with ST
		{"\x1b[2J\x1b[Hpass", "pass"},                          // clear screen, cursor home
		{"\x1b[1;31mFAIL\x1b[0m", "FAIL"},                      // colours
		{"FAIL\rpass", "FAILpass"},                             // carriage return overwrite
		{"a\u009b2Jb", "ab"},                                   // C1 CSI as UTF-8
		{"a\u009d52;c;x\u009cb", "ab"},                         // C1 OSC, C1 ST
		{"a\x1bPdevice\x1b\\b", "ab"},                          // DCS
		{"a\x1b(Bb", "ab"},                                     // nF escape (charset)
		{"a\x1bcb", "ab"},                                      // RIS (full reset)
		{"a\x1b", "a"},                                         // cut short
		{"a\x1b]52;unterminated", "a"},                         // unterminated string: to the end
		{"a\x1b]x\x1b[2Jb", "ab"},                              // unterminated string, then CSI
		{"bell\x07 del\x7f nul\x00 bs\x08", "bell del nul bs"}, // C0 and DEL
		{"\u202eevil\u202c \u2066x\u2069 \u200fm", "evil x m"}, // bidi override, isolate, mark
		{"bad \xff\xfe utf8", "bad \ufffd\ufffd utf8"},         // not UTF-8
		{"\x1b[", ""},                                          // CSI cut short
		{"\x1b\x1b[31mx", "x"},                                 // ESC ESC
	} {
		if got := Clean(tc.in); got != tc.want {
			t.Errorf("Clean(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestCleanFormatCharacters pins issue 35 item 13: zero-width and other
// format characters (Unicode Cf), the line and paragraph separators and
// the tag characters go, as stdio's sanitise drops them from a child's
// stderr: they hide text ("pa\u200bss" reads "pass" and is not it) or
// carry it unseen (tag characters spell ASCII invisibly).
func TestCleanFormatCharacters(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"pa\u200bss", "pass"},                               // zero-width space
		{"a\u200cb\u200dc\u2060d", "abcd"},                   // ZWNJ, ZWJ, word joiner
		{"\ufeffbom", "bom"},                                 // byte order mark
		{"soft\u00adhyphen", "softhyphen"},                   // soft hyphen
		{"one\u2028two\u2029three", "onetwothree"},           // line and paragraph separators
		{"hi\U000E0001\U000E0069\U000E007Fthere", "hithere"}, // tag characters
		{"\u061cx\u180ey", "xy"},                             // Arabic letter mark, Mongolian vowel separator
	} {
		if got := Clean(tc.in); got != tc.want {
			t.Errorf("Clean(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := Line(tc.in); got != tc.want {
			t.Errorf("Line(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// JSON keeps the values and writes these as escapes, a character
	// beyond U+FFFF as its UTF-16 surrogate pair.
	v := map[string]string{"s": "a\u200bb\U000E0041c\u00ad"}
	b, _ := json.Marshal(v)
	j := JSON(b)
	var back map[string]string
	if err := json.Unmarshal(j, &back); err != nil || back["s"] != v["s"] {
		t.Fatalf("JSON(%s) = %s: decodes to %q, %v", b, j, back["s"], err)
	}
	if bad(string(j), false) || !strings.Contains(string(j), `\udb40\udc41`) {
		t.Errorf("JSON(%s) = %s, want format characters escaped", b, j)
	}
}

// TestCleanMutants pins what the mutation audit found untested (issue
// 35): DEL in text with nothing else to remove (the fast path), a CSI
// sequence whose final byte is '~' (the editing keys' F-key sequences),
// and the two-character ESC Fp escapes (ESC 7 and ESC 8, save and
// restore the cursor: with them text can overwrite what was printed).
func TestCleanMutants(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"del\x7fete", "delete"},               // DEL alone, plain ASCII otherwise
		{"\x7f", ""},                           //
		{"a\x1b[3~b\x1b[15;2~c", "abc"},        // CSI ... ~
		{"a\x1b7FAIL\x1b8pass", "aFAILpass"},   // ESC 7, ESC 8 (DECSC, DECRC)
		{"a\x1b=b\x1b>c\x1b0d\x1b?e", "abcde"}, // the rest of Fp: 0x30-0x3F
	} {
		if got := Clean(tc.in); got != tc.want {
			t.Errorf("Clean(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestLine(t *testing.T) {
	if got := Line("  two\nlines\tand\x1b[2J a\r\ntab "); got != "two lines and a tab" {
		t.Errorf("Line: %q", got)
	}
}

// TestJSON: the values decode the same; no raw DEL, C1 or bidi character
// is left in the encoding.
func TestJSON(t *testing.T) {
	v := map[string]any{"name": "a\u009b2J\x7f\u202e\x1b]52;c;x\x07", "n": 1, "ok": "plain ✓"}
	b, _ := json.MarshalIndent(v, "", "  ")
	got := JSON(b)
	var back map[string]any
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("not JSON: %v: %s", err, got)
	}
	if back["name"] != v["name"] || back["ok"] != v["ok"] {
		t.Errorf("values changed: %v", back)
	}
	if bad(string(got), true) {
		t.Errorf("control characters left: %q", got)
	}
	if plain := []byte(`{"a": "b"}`); string(JSON(plain)) != string(plain) {
		t.Errorf("plain JSON changed: %s", JSON(plain))
	}
}

// bad reports whether s has a character Clean must not let through.
func bad(s string, allowNewline bool) bool {
	if !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if (r == '\n' || r == '\t') && allowNewline {
			continue
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || unicode.Is(unicode.Cf, r) ||
			r == '\u2028' || r == '\u2029' {
			return true
		}
	}
	return false
}

// FuzzClean: the output is valid UTF-8 with no control or bidi character
// but \n and \t (none at all from Line, and no space at its ends);
// Clean and Line are idempotent; text with nothing to remove is kept
// as is; JSON keeps every value and leaves no such character raw.
func FuzzClean(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b]52;c;eA==\x07", "\x1b[2J", "\u009b31m", "\u202e", "\xff", "a\r\nb\tc", "\x1b]x\x1b\\", "\u200b\U000E0041\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := Clean(s)
		if bad(c, true) {
			t.Fatalf("Clean(%q) = %q keeps a control character", s, c)
		}
		if Clean(c) != c {
			t.Fatalf("Clean not idempotent on %q: %q then %q", s, c, Clean(c))
		}
		l := Line(s)
		if bad(l, false) || l != strings.TrimSpace(l) {
			t.Fatalf("Line(%q) = %q", s, l)
		}
		if Line(l) != l {
			t.Fatalf("Line not idempotent on %q: %q then %q", s, l, Line(l))
		}
		if !bad(s, true) && c != s {
			t.Fatalf("Clean changed clean text %q to %q", s, c)
		}
		b, err := json.Marshal(map[string]string{"s": s})
		if err != nil {
			t.Fatal(err)
		}
		j := JSON(b)
		var back, want map[string]string
		if err := json.Unmarshal(j, &back); err != nil {
			t.Fatalf("JSON(%s) = %s: %v", b, j, err)
		}
		json.Unmarshal(b, &want)
		if back["s"] != want["s"] || bad(string(j), false) {
			t.Fatalf("JSON(%s) = %s", b, j)
		}
	})
}
