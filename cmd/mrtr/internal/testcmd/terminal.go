package testcmd

import (
	"strings"
	"testing"
	"unicode"
)

// Hostile is server text that would drive a terminal: an OSC 52
// clipboard write, a screen clear and cursor home, a C1 CSI, a carriage
// return that overwrites the line, and a bidi override.
const Hostile = "\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b[Hpass\u009b31m\rFAIL\u202e!"

// WantClean fails t if s has a control character other than newline and
// tab, or a bidi formatting character.
func WantClean(t testing.TB, what, s string) {
	t.Helper()
	for _, r := range s {
		if r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)) {
			t.Errorf("%s has %U: %q", what, r, s)
			return
		}
	}
}

// WantInOrder checks that s holds each of subs, in order.
func WantInOrder(t testing.TB, s string, subs ...string) {
	t.Helper()
	rest := s
	for _, sub := range subs {
		i := strings.Index(rest, sub)
		if i < 0 {
			t.Fatalf("output lacks %q (in order):\n%s", sub, s)
		}
		rest = rest[i+len(sub):]
	}
}
