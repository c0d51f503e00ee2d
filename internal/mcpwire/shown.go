package mcpwire

import (
	"strings"
	"unicode/utf8"
)

// MaxShown is the most bytes of a string from a request (a tool or
// prompt name, a resource URI) that mrtr writes into a log line, a span
// name or a span attribute. A target can be as long as the body limit
// allows (a MiB by default): written whole, every refused request would
// cost that much in the log or in the trace exporter's queue.
const MaxShown = 256

// ellipsis ends a string Shown cut.
const ellipsis = "…"

// Shown returns s as a log line or a span may carry it: s itself when it
// is valid UTF-8 of at most MaxShown bytes; otherwise at most MaxShown
// bytes of valid UTF-8 (invalid bytes become U+FFFD), cut on a rune
// boundary and ending in "…" when s was longer. Valid UTF-8 matters for
// spans: OTLP carries strings as protobuf strings, and one invalid string
// fails the export of the whole batch it is in.
func Shown(s string) string {
	if len(s) <= MaxShown && utf8.ValidString(s) {
		return s
	}
	long := len(s) > MaxShown
	if long {
		s = s[:MaxShown] // a rune split here is cut off below
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if !long && len(s) <= MaxShown {
		return s
	}
	n := MaxShown - len(ellipsis)
	if len(s) > n {
		for !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return s + ellipsis
}
