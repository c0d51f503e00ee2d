package probe

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Readable reports whether a state decodes (as plain text, base64 or
// base64url, whole or in '.'-separated parts) into something that looks
// like the server's data: JSON, key=value text, words, or one of the
// argument values the call was made with. how says what it decoded to,
// without the state itself.
func Readable(state string, args map[string]any) (how string, ok bool) {
	values := argValues(args)
	type cand struct{ via, text string }
	cands := []cand{{"plain text", state}}
	parts := []string{state}
	if strings.Contains(state, ".") {
		parts = append(parts, strings.Split(state, ".")...)
	}
	for _, p := range parts {
		for _, enc := range []struct {
			name string
			e    *base64.Encoding
		}{
			{"base64", base64.StdEncoding}, {"base64", base64.RawStdEncoding},
			{"base64url", base64.URLEncoding}, {"base64url", base64.RawURLEncoding},
		} {
			b, err := enc.e.DecodeString(p)
			if err != nil || len(b) < 4 || !printable(string(b)) {
				continue
			}
			via := enc.name
			if p != state {
				via += " (part of the state)"
			}
			cands = append(cands, cand{via, string(b)})
		}
	}
	for _, c := range cands {
		if what := looksLikeData(c.text, values); what != "" {
			return c.via + ": " + what, true
		}
	}
	return "", false
}

var (
	keyValue = regexp.MustCompile(`^[a-z_][a-z0-9_]*[=:][^=;&,]+([;&,][a-z_][a-z0-9_]*[=:][^=;&,]+)*$`)
	words    = regexp.MustCompile(`^[a-z]{2,}([ _.,;/-][a-z0-9]+)+$`)
)

// looksLikeData says what in text looks like a server's data, or "".
func looksLikeData(text string, values []string) string {
	if !printable(text) {
		return ""
	}
	t := strings.TrimSpace(text)
	var v any
	if json.Unmarshal([]byte(t), &v) == nil {
		switch x := v.(type) {
		case map[string]any:
			ks := make([]string, 0, len(x))
			for k := range x {
				ks = append(ks, k)
			}
			slices.Sort(ks)
			return fmt.Sprintf("a JSON object with keys %s", strings.Join(ks, ", "))
		case []any:
			return "a JSON array"
		case string:
			return "a JSON string"
		}
	}
	for _, val := range values {
		if strings.Contains(text, val) {
			return "text containing the argument value " + strconv.Quote(val)
		}
	}
	if keyValue.MatchString(t) {
		return "key=value text " + quote(t, 32)
	}
	if words.MatchString(t) {
		return "words " + quote(t, 32)
	}
	return ""
}

// printable reports whether s is valid UTF-8 made of printable
// characters and spaces.
func printable(s string) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) && !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// argValues returns the string forms of the argument values worth looking
// for in a state: strings of at least 3 characters.
func argValues(args map[string]any) []string {
	var out []string
	for _, v := range args {
		if s, ok := v.(string); ok && len(s) >= 3 {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}
