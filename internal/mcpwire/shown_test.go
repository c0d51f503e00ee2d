package mcpwire

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestShown(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"deploy", "deploy"},
		{"", ""},
		{strings.Repeat("a", MaxShown), strings.Repeat("a", MaxShown)},
		{strings.Repeat("a", MaxShown+1), strings.Repeat("a", MaxShown-3) + "…"},
		{strings.Repeat("a", 1<<20), strings.Repeat("a", MaxShown-3) + "…"},
		// 84 three-byte runes are 252 bytes: the 85th does not fit before the ellipsis.
		{strings.Repeat("€", 100), strings.Repeat("€", 84) + "…"},
		{"a\xffb", "a\uFFFDb"},
		{strings.Repeat("\xff", MaxShown), "\uFFFD"},
		{strings.Repeat("\xffa", 100), strings.Repeat("\uFFFDa", 63) + "…"},
	} {
		if got := Shown(tc.in); got != tc.want {
			t.Errorf("Shown(%.40q... %d bytes) = %q, want %q", tc.in, len(tc.in), got, tc.want)
		}
	}
}

// FuzzShown: whatever the input, at most MaxShown bytes of valid UTF-8,
// the input itself when that already is, and a prefix of a valid input.
func FuzzShown(f *testing.F) {
	for _, s := range []string{"deploy", strings.Repeat("€", 100), "a\xffb", strings.Repeat("x", 300), strings.Repeat("\xf0\x9f\x98", 90)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Shown(s)
		if len(got) > MaxShown || !utf8.ValidString(got) {
			t.Fatalf("Shown(%q) = %q: %d bytes, valid %v", s, got, len(got), utf8.ValidString(got))
		}
		if utf8.ValidString(s) {
			if len(s) <= MaxShown && got != s {
				t.Fatalf("Shown(%q) = %q, want it unchanged", s, got)
			}
			if len(s) > MaxShown && !strings.HasPrefix(s, strings.TrimSuffix(got, "…")) {
				t.Fatalf("Shown(%q) = %q, not a prefix", s, got)
			}
		}
	})
}
