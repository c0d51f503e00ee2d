//go:build unix

package stdio

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// A child that exits by itself says why through Err (its exit status) and
// StderrTail (the end of what it wrote there), once Done is closed: what
// `mrtr proxy` needs to say why a command failed at start (issue 28,
// item 1).
func TestExitStatusAndStderrTail(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	script := `i=0; while [ $i -lt 30 ]; do echo "line $i" >&2; i=$((i+1)); done; printf 'boom: \033[31mmissing\033[0m config\n' >&2; exit 3`
	c, err := Start(Config{Path: sh, Args: []string{"-c", script}, Logger: slog.New(slog.DiscardHandler), StderrBurst: 1, StderrRate: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background())
	err = waitDone(t, c)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("Err = %v, want exit status 3", err)
	}
	if !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("Err = %q, want it to say exit status 3", err)
	}
	got := c.StderrTail()
	if len(got) != TailLines {
		t.Fatalf("StderrTail has %d lines, want %d: %q", len(got), TailLines, got)
	}
	// Every line, those over the rate limit (a burst of 1) included.
	if got[0] != "line 11" || got[TailLines-2] != "line 29" {
		t.Fatalf("StderrTail = %q, want lines 11 to 29 then boom", got)
	}
	if want := `boom: \x1b[31mmissing\x1b[0m config`; got[TailLines-1] != want {
		t.Fatalf("last line %q, want %q (escapes sanitised)", got[TailLines-1], want)
	}
}

// The tail keeps TailBytes at most and drops a line the bound cut.
func TestTailBounds(t *testing.T) {
	tl := tail{max: 16}
	if tl.lines(TailLines) != nil || tl.buf != nil {
		t.Fatal("an empty tail holds something")
	}
	fmt.Fprint(&tl, "first line\nsecond\n")
	fmt.Fprint(&tl, "third\n")
	if got, want := tl.lines(TailLines), []string{"second", "third"}; !slices.Equal(got, want) {
		t.Fatalf("lines = %q, want %q", got, want)
	}
	if len(tl.buf) > 16 {
		t.Fatalf("kept %d bytes, want at most 16", len(tl.buf))
	}
	fmt.Fprint(&tl, strings.Repeat("x", 40)+"\nlast\r\n\n")
	if got, want := tl.lines(TailLines), []string{"last"}; !slices.Equal(got, want) {
		t.Fatalf("lines = %q, want %q", got, want)
	}
	if got := tl.lines(0); len(got) != 0 {
		t.Fatalf("lines(0) = %q", got)
	}
}

// TestTailEdges pins the mutation audit's survivors in tail (issue 35):
// a first write of exactly the bound keeps its first line (nothing was
// dropped), a write that fills the buffer exactly drops nothing, one
// that overflows it marks the first line kept as partial, a line longer
// than the buffer is not kept in part, and a write longer than the
// bound after others keeps its end and drops its partial first line.
func TestTailEdges(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []string
		want   []string
	}{
		{"first write of exactly max", []string{"first\nsecond!\n"}, []string{"first", "second!"}},
		{"fills exactly", []string{"first\n", "second!\n"}, []string{"first", "second!"}},
		{"overflows by one", []string{"first\n", "second\n", "xy"}, []string{"second", "xy"}},
		{"overflows mid-line", []string{"abcdefghij\n", "klmn"}, []string{"klmn"}},
		{"one long line", []string{"0123456789", "abcdefghijklmnop"}, nil},
		{"exactly max after more", []string{"ab", "cdef\nghijklmno"}, []string{"ghijklmno"}},
		{"longer than max after more", []string{"ab\n", "0123456789\nabcdefghijk"}, []string{"abcdefghijk"}},
	} {
		tl := tail{max: 14}
		for _, w := range tc.writes {
			fmt.Fprint(&tl, w)
		}
		if got := tl.lines(TailLines); !slices.Equal(got, tc.want) {
			t.Errorf("%s: lines = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestRedactBound: a value of exactly redactMin bytes is redacted, a
// shorter one is not (issue 35's mutation audit).
func TestRedactBound(t *testing.T) {
	env := []string{"MRTR_A=" + strings.Repeat("s", redactMin), "MRTR_B=" + strings.Repeat("t", redactMin-1)}
	got := redact([]string{"a " + strings.Repeat("s", redactMin) + " b " + strings.Repeat("t", redactMin-1)}, env)
	if want := "a [redacted] b " + strings.Repeat("t", redactMin-1); got[0] != want {
		t.Errorf("redact = %q, want %q", got[0], want)
	}
}

func TestSanitiseAndRedact(t *testing.T) {
	for in, want := range map[string]string{
		"plain text":          "plain text",
		"a\tb":                "a b",
		"\x1b]0;title\x07":    `\x1b]0;title\x07`,
		"bad \xff utf8":       "bad \uFFFD utf8",
		"rtl \u202e override": `rtl \u+202E override`,
		"c1 \u009b":           `c1 \u+009B`,
		"é ✓":                 "é ✓",
	} {
		if got := sanitise(in); got != want {
			t.Errorf("sanitise(%q) = %q, want %q", in, got, want)
		}
	}
	env := []string{"MRTR_KEYS=k1:c2VjcmV0LWtleQ", "MRTR_DEBUG=1", "HOME=/home/me"}
	got := redact([]string{"keys k1:c2VjcmV0LWtleQ!", "debug 1 /home/me"}, env)
	if want := []string{"keys [redacted]!", "debug 1 /home/me"}; !slices.Equal(got, want) {
		t.Fatalf("redact = %q, want %q", got, want)
	}
}

func FuzzTail(f *testing.F) {
	f.Add([]byte("a\nb\r\n\x1b[0m\xff"), 3)
	f.Fuzz(func(t *testing.T, p []byte, cut int) {
		tl := tail{max: 64}
		cut = max(0, min(cut, len(p)))
		tl.Write(p[:cut])
		tl.Write(p[cut:])
		if len(tl.buf) > 64 {
			t.Fatalf("kept %d bytes", len(tl.buf))
		}
		for _, l := range tl.lines(TailLines) {
			for _, r := range l {
				if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
					t.Fatalf("control %U in %q", r, l)
				}
			}
		}
	})
}
