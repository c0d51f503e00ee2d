package stdio

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"unicode"
)

// TestStderrStructuredRecords pins issue 30 item 12: a child that logs
// with a structured logger (mrtr serve --stdio's log/slog, pino) has each
// record logged at its own level with its own message, not wrapped in an
// INFO record's message; its attributes go in the group "child" (a child's
// pid= cannot pass for the proxy's), escapes sanitised; a line that only
// looks structured is logged as it is.
//
// And issue 35 item 6: a child's record is logged under the fixed message
// ChildRecordMsg, its own message and level as child.msg and child.level,
// at most at WARN: a child that writes the proxy's own drain message
// (`level=INFO msg="mrtr drained: no call held or in flight"`) does not
// get a record with that message, and its ERROR is no error of the proxy.
func TestStderrStructuredRecords(t *testing.T) {
	var buf syncBuffer
	c := start(t, "slog", Config{Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err := waitDone(t, c); err != nil {
		t.Fatalf("Err = %v", err)
	}
	var got [][4]string
	for _, r := range buf.records(t) {
		if r["stream"] != "stderr" {
			continue
		}
		if strings.HasPrefix(r["msg"].(string), "mrtr drained") {
			t.Errorf("a child's record logged under the proxy's own message: %v", r)
		}
		child, _ := r["child"].(map[string]any)
		var attrs []string
		for _, k := range []string{"pid", "stream", "attempt", "hostname"} {
			if v, ok := child[k]; ok {
				attrs = append(attrs, k+"="+v.(string))
			}
		}
		msg, level := r["msg"].(string), ""
		if msg == ChildRecordMsg {
			msg, _ = child["msg"].(string)
			level, _ = child["level"].(string)
		}
		got = append(got, [4]string{r["level"].(string), level, msg, strings.Join(attrs, " ")})
		if r["pid"] != float64(c.Pid()) {
			t.Errorf("record %v: pid %v, want the child's %d", r["msg"], r["pid"], c.Pid())
		}
	}
	want := [][4]string{ // the proxy's level, the child's, its message, its attributes
		{"WARN", "WARN", "NO KEY RING GIVEN: sealing with an ephemeral key", "pid=1 stream=stdout"},
		{"WARN", "ERROR", `upstream \x1b[2Jdown`, "attempt=3"},
		{"DEBUG", "DEBUG", "quiet", ""},
		{"INFO", "INFO", "pino says hi", "hostname=h"},
		{"INFO", "", "key=value without a level", ""},
		{"INFO", "", `level=WARN msg="unterminated`, ""},
		{"INFO", "INFO", "mrtr drained: no call held or in flight", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("records %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d: %q, want %q", i, got[i], want[i])
		}
	}
}

// TestChildRecordAttrs: a child's time is not carried (the proxy's record
// has its own), nor its level and message among the attributes, and at
// most maxChildAttrs attributes are (issue 35's mutation audit).
func TestChildRecordAttrs(t *testing.T) {
	line := `time=2026-12-02T00:00:00Z ts=1 timestamp=2 level=INFO msg=m`
	for i := range maxChildAttrs + 4 {
		line += fmt.Sprintf(" k%d=v%d", i, i)
	}
	_, _, attrs, ok := childRecord(line)
	if !ok || len(attrs) != maxChildAttrs {
		t.Fatalf("%d attributes kept (ok %v), want %d", len(attrs), ok, maxChildAttrs)
	}
	for i, a := range attrs {
		if want := fmt.Sprintf("k%d", i); a.Key != want {
			t.Errorf("attribute %d is %s, want %s (time, level and msg dropped, the first kept)", i, a.Key, want)
		}
	}
}

func TestChildRecord(t *testing.T) {
	for _, tc := range []struct {
		line  string
		ok    bool
		level slog.Level
		msg   string
	}{
		{`time=2026-12-02T00:00:00Z level=INFO msg="mrtr serving" url=http://127.0.0.1:1/mcp`, true, slog.LevelInfo, "mrtr serving"},
		{`level=WARN+2 msg=x`, true, slog.LevelWarn + 2, "x"},
		{`level=warning message="a b"`, true, slog.LevelWarn, "a b"},
		{`{"severity":"ERROR","message":"m"}`, true, slog.LevelError, "m"},
		{`{"level":"info","msg":"m"} trailing`, false, 0, ""},
		{`{"level":"loud","msg":"m"}`, false, 0, ""},
		{`level=INFO`, false, 0, ""},
		{`just words`, false, 0, ""},
		{`level=INFO msg="a"b`, false, 0, ""},
		{`level=INFO msg="\u202eevil"`, true, slog.LevelInfo, `\u+202Eevil`},
		// The mutation audit's survivors (issue 35): the first level and
		// message win, a quoted value must end at a space, escaped quotes
		// do not end it.
		{`level=INFO level=ERROR msg=first msg=second`, true, slog.LevelInfo, "first"},
		{`level=INFO msg="a"b=c`, false, 0, ""},
		{`level=INFO msg="say \"hi\" now" k="\\"`, true, slog.LevelInfo, `say "hi" now`},
	} {
		level, msg, _, ok := childRecord(tc.line)
		if ok != tc.ok || level != tc.level || msg != tc.msg {
			t.Errorf("%q: %v %q %v, want %v %q %v", tc.line, level, msg, ok, tc.level, tc.msg, tc.ok)
		}
	}
}

// FuzzChildRecord: any stderr line is read without a panic, and what a
// record gives the log holds no control or format character.
func FuzzChildRecord(f *testing.F) {
	for _, s := range []string{
		`time=2026-12-02T00:00:00Z level=WARN msg="NO KEY RING \"x\""`,
		`{"time":"t","level":"ERROR","msg":"m","a":{"b":[1,2]},"c":null}`,
		`{"level":30,"msg":"pino"}`,
		`level=INFO msg="\x1b[2J" k="\u202e"`,
		`a= b==c level=DEBUG msg=`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		_, msg, attrs, ok := childRecord(line)
		if !ok {
			return
		}
		texts := []string{msg}
		for _, a := range attrs {
			texts = append(texts, a.Key, a.Value.String())
		}
		if len(attrs) > maxChildAttrs {
			t.Fatalf("%d attributes", len(attrs))
		}
		for _, s := range texts {
			for _, r := range s {
				if r != ' ' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r)) {
					t.Fatalf("%q gives %q, with %U", line, s, r)
				}
			}
		}
	})
}

// TestUnstructuredLevel (issue 39, item 8): a child's stderr line that is
// no record but that npm marks as an error or a warning is logged as a
// warning; any other such line at INFO.
func TestUnstructuredLevel(t *testing.T) {
	for line, want := range map[string]slog.Level{
		"npm ERR! code E404":                      slog.LevelWarn,
		"npm error code ENOENT":                   slog.LevelWarn,
		"  npm error path /x":                     slog.LevelWarn,
		"npm WARN deprecated inflight@1.0.6":      slog.LevelWarn,
		"npm warn exec The following package was": slog.LevelWarn,
		"Secure MCP Filesystem Server running":    slog.LevelInfo,
		"an npm error somewhere in the middle":    slog.LevelInfo,
		"npm":                                     slog.LevelInfo,
	} {
		if got := unstructuredLevel(line); got != want {
			t.Errorf("%q: %v, want %v", line, got, want)
		}
	}
}
