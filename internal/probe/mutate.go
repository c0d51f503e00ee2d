package probe

import "strings"

// Variant is one way of tampering with a state.
type Variant struct {
	// Name says what was changed, like "middle flip".
	Name string
	// Alter returns the tampered state; ok is false when the variant does
	// not apply (a state too short to truncate).
	Alter func(state string) (tampered string, ok bool)
}

// TamperSuffix is what the official conformance suite appends to a state
// to tamper with it.
const TamperSuffix = "-TAMPERED"

// Variants are the tamperings of the tampered check, in order: a character
// changed at the start, in the middle and at the end (each within its own
// class, so the state stays in its alphabet: a letter for a letter, a digit
// for a digit), the conformance suite's suffix, the first half only, and
// one character three quarters in changed within the base64url alphabet.
var Variants = []Variant{
	{"start flip", func(s string) (string, bool) { return flipNear(s, 0, +1) }},
	{"middle flip", func(s string) (string, bool) { return FlipMiddle(s), len(s) > 0 }},
	{"end flip", flipEnd},
	{"suffix " + TamperSuffix, func(s string) (string, bool) { return s + TamperSuffix, true }},
	{"truncated", func(s string) (string, bool) { return s[:len(s)/2], len(s) >= 2 }},
	{"base64 character", func(s string) (string, bool) { return b64Change(s, len(s)*3/4) }},
}

// FlipMiddle changes one character at or after the middle of s (the
// first letter or digit from there, else the middle byte), keeping its
// class: the attack that go-sdk's everything-server misses.
func FlipMiddle(s string) string {
	t, ok := flipNear(s, len(s)/2, +1)
	if !ok {
		t, _ = flipNear(s, len(s)/2, -1)
	}
	return t
}

// flipEnd changes the last letter or digit of s. When that is the last
// character of s and a base64url one, it changes the character's high
// bits: the low bits of a base64 tail may be padding that a lenient
// decoder ignores, which would change the string but not the bytes.
func flipEnd(s string) (string, bool) {
	if n := len(s); n > 0 {
		if k := strings.IndexByte(b64url, s[n-1]); k >= 0 {
			return s[:n-1] + string(b64url[k^0x20]), true
		}
	}
	return flipNear(s, len(s)-1, -1)
}

// flipNear changes the first letter or digit of s found from i in
// direction dir (to the next letter or digit of the same class, wrapping);
// when there is none, the byte at i itself.
func flipNear(s string, i, dir int) (string, bool) {
	if len(s) == 0 || i < 0 || i >= len(s) {
		return s, false
	}
	b := []byte(s)
	for j := i; j >= 0 && j < len(b); j += dir {
		if c, ok := flipClass(b[j]); ok {
			b[j] = c
			return string(b), true
		}
	}
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b), true
}

// flipClass returns a different character of c's class (lower, upper,
// digit).
func flipClass(c byte) (byte, bool) {
	switch {
	case c >= 'a' && c <= 'z':
		return 'a' + (c-'a'+1)%26, true
	case c >= 'A' && c <= 'Z':
		return 'A' + (c-'A'+1)%26, true
	case c >= '0' && c <= '9':
		return '0' + (c-'0'+1)%10, true
	}
	return 0, false
}

const b64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// b64Change replaces the first base64url character at or after i with
// the one whose 6-bit value differs in its two high bits, so the bytes it
// decodes to differ too.
func b64Change(s string, i int) (string, bool) {
	b := []byte(s)
	for j := i; j < len(b); j++ {
		if k := strings.IndexByte(b64url, b[j]); k >= 0 {
			b[j] = b64url[k^0x30]
			return string(b), true
		}
	}
	return s, false
}
