package stdio

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Bounds of the stderr tail a Child keeps (see Child.StderrTail).
const (
	TailLines = 20
	TailBytes = 4 << 10
)

// tail keeps the last max bytes written to it: the end of a child's
// stderr, for the error that says why it ended. Its buffer is allocated on
// the first write: a child that writes nothing on stderr holds none.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
	cut bool // bytes before buf were dropped: its first line may be partial
}

// Write keeps the end of p. It never fails.
func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if n == 0 {
		return 0, nil
	}
	if t.buf == nil {
		t.buf = make([]byte, 0, t.max)
	}
	if n >= t.max {
		// Only p's end is kept: what was held before is dropped, and so
		// is p's start when p is longer than the buffer. A first write
		// of exactly max drops nothing.
		t.cut = t.cut || len(t.buf) > 0 || n > t.max
		t.buf = append(t.buf[:0], p[n-t.max:]...)
		return n, nil
	}
	if over := len(t.buf) + n - t.max; over > 0 {
		t.buf = t.buf[:copy(t.buf, t.buf[over:])]
		t.cut = true
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// lines returns the last n non-blank lines kept, without a partial first
// line, each sanitised (see sanitise), values of the proxy's MRTR_*
// variables replaced by "[redacted]".
func (t *tail) lines(n int) []string {
	t.mu.Lock()
	b := bytes.Clone(t.buf)
	cut := t.cut
	t.mu.Unlock()
	if cut {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		} else {
			b = nil // one line longer than the buffer: its end only
		}
	}
	var out []string
	for l := range bytes.SplitSeq(b, []byte("\n")) {
		s := sanitise(string(bytes.TrimRight(l, "\r")))
		if strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return redact(out, os.Environ())
}

// sanitise makes s safe to print on a terminal or in a log: invalid UTF-8
// becomes U+FFFD, a tab a space, and every other control or format
// character (escape sequences, bidirectional overrides) \xNN or \u+NNNN.
func sanitise(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case r == '\t':
			b.WriteByte(' ')
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			fmt.Fprintf(&b, `\u+%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// redactMin is the shortest value of an MRTR_* variable redact replaces:
// a shorter one ("1", "true") would blank out ordinary words and is no
// secret.
const redactMin = 6

// redact replaces in lines every value of an environ entry whose name
// starts with ReservedPrefix (the proxy's own variables, its key ring
// among them) by "[redacted]".
func redact(lines, environ []string) []string {
	var vals []string
	for _, kv := range environ {
		name, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, ReservedPrefix) && len(v) >= redactMin {
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return lines
	}
	for i, l := range lines {
		for _, v := range vals {
			l = strings.ReplaceAll(l, v, "[redacted]")
		}
		lines[i] = l
	}
	return lines
}
