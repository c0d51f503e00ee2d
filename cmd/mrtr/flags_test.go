package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/proxy"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/serve"
)

// TestUnknownFlagHint pins issue 21 item 9: an unknown flag is one line
// naming the nearest known flag and one line pointing at --help, not the
// whole usage scrolling the error away.
func TestUnknownFlagHint(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--port", "9999"}, "mrtr serve: unknown flag --port (did you mean --addr?)"},
		{[]string{"serve", "--max-round", "3"}, "mrtr serve: unknown flag --max-round (did you mean --max-rounds?)"},
		{[]string{"proxy", "--upstrem", "http://127.0.0.1:1/mcp"}, "mrtr proxy: unknown flag --upstrem (did you mean --upstream?)"},
		{[]string{"call", "--max-round", "3", "http://127.0.0.1:1/mcp"}, "mrtr call: unknown flag --max-round (did you mean --max-rounds?)"},
		{[]string{"keygen", "--zzzzzzzz"}, "mrtr keygen: unknown flag --zzzzzzzz\n"},
		{[]string{"serve", "--ttl"}, "mrtr serve: --ttl needs a value"},
	} {
		code, _, errOut := runApp(t, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("mrtr %v: exit %d, stderr %q, want %q", tc.args, code, errOut, tc.want)
		}
		hint := "Run \"mrtr " + tc.args[0] + " --help\" for its flags.\n"
		if n := strings.Count(errOut, "\n"); n != 2 || !strings.HasSuffix(errOut, hint) {
			t.Errorf("mrtr %v: %d lines, want the error and %q:\n%s", tc.args, n, hint, errOut)
		}
	}
}

// TestBadValueOneMessage pins issue 21 item 9: a bad value reads the same
// from the command line and from the environment, with an example.
func TestBadValueOneMessage(t *testing.T) {
	for _, tc := range []struct{ flag, env, val, want string }{
		{"ttl", "MRTR_TTL", "5", `"5" is not a valid duration (like 90s, 5m or 1h30m`},
		{"max-body", "MRTR_MAX_BODY", "4 parsecs", `"4 parsecs" is not a valid size (bytes, or a number and a unit: 4MiB, 4 MiB`},
		{"max-rounds", "MRTR_MAX_ROUNDS", "many", `"many" is not a valid int`},
	} {
		code, _, flagOut := runApp(t, "serve", "--"+tc.flag, tc.val)
		if code != 2 || !strings.Contains(flagOut, "mrtr serve: --"+tc.flag+": "+tc.want) {
			t.Errorf("--%s %s: exit %d, stderr %q, want %q", tc.flag, tc.val, code, flagOut, tc.want)
		}
		code, _, envOut := runAppEnv(t, map[string]string{tc.env: tc.val}, "serve")
		if code != 2 || !strings.Contains(envOut, "mrtr serve: $"+tc.env+" (--"+tc.flag+"): "+tc.want) {
			t.Errorf("%s=%s: exit %d, stderr %q, want %q", tc.env, tc.val, code, envOut, tc.want)
		}
	}
}

// TestHelpGroups pins issue 21 item 13: serve --help and proxy --help
// open with a paragraph (what, where, the health endpoints, the demo
// tools) and list every flag once, under its group, in the groups' order.
func TestHelpGroups(t *testing.T) {
	for _, tc := range []struct {
		cmd   string
		about []string
	}{
		{"serve", []string{"http://ADDR/mcp", "/healthz", "/readyz", "deploy", "transfer", "guess_number", "--stdio"}},
		{"proxy", []string{"--upstream URL", "http://ADDR/mcp", "/healthz", "/readyz", "sealed"}},
	} {
		var out bytes.Buffer
		a := &base.App{Stdout: &out, Stderr: io.Discard, Getenv: func(string) string { return "" }}
		code := run(t.Context(), a, []string{tc.cmd, "--help"})
		help := out.String()
		if code != 0 {
			t.Fatalf("%s --help: exit %d", tc.cmd, code)
		}
		para, _, _ := strings.Cut(help, "\nListen:\n")
		flat := strings.Join(strings.Fields(para), " ")
		for _, w := range tc.about {
			if !strings.Contains(flat, w) {
				t.Errorf("%s --help: the paragraph lacks %q:\n%s", tc.cmd, w, para)
			}
		}
		f, last := helpFlags(tc.cmd), -1
		for _, g := range f.Groups() {
			i := strings.Index(help, "\n"+g.Title()+":\n")
			if i < last {
				t.Errorf("%s --help: group %q missing or out of order", tc.cmd, g.Title())
			}
			last = i
		}
		for _, d := range f.Docs {
			if n := strings.Count(help, "\n  --"+d.Name+" ") + strings.Count(help, "\n  --"+d.Name+"\n"); n != 1 {
				t.Errorf("%s --help lists --%s %d times", tc.cmd, d.Name, n)
			}
		}
	}
	for _, g := range []string{"Listen", "Keys", "Policy", "Single-use store", "Authentication", "Limits", "Logs, metrics and traces"} {
		found := false
		for _, d := range helpFlags("serve").Docs {
			found = found || d.Group.Title() == g
		}
		if !found {
			t.Errorf("serve has no flag in group %q", g)
		}
	}
}

// helpFlags are the declared flags of cmd (serve or proxy).
func helpFlags(cmd string) *base.Flags {
	a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	if cmd == "serve" {
		f := a.NewFlags("serve", "", serve.About)
		serve.Flags(f, new(serve.Config))
		return f
	}
	f := a.NewFlags("proxy", "", proxy.About)
	proxy.Flags(f, new(proxy.Config))
	return f
}

// TestStartupErrorsInTerminal pins issue 21 items 9 and 10 as a person
// sees them: in a terminal, a mistyped flag is two lines (the nearest
// flag, the hint to --help) and the command exits 2, with no usage
// scrolling the error away; a missing key file says how to make one.
func TestStartupErrorsInTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the command in a pseudo-terminal")
	}
	tm, cmd := startTerminal(t, os.Args[0], "serve", "--port", "9999")
	tm.expect("mrtr serve: unknown flag --port (did you mean --addr?)\nRun \"mrtr serve --help\" for its flags.\n")
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit: %v\n%s", err, tm.screen)
	}
	if s := tm.screen.String(); strings.Contains(s, "Usage:") || strings.Count(s, "\n") != 2 {
		t.Errorf("more than the error and the hint:\n%s", s)
	}

	missing := filepath.Join(t.TempDir(), "keys.json")
	tm, cmd = startTerminal(t, os.Args[0], "serve", "--keys", missing, "--addr", "127.0.0.1:0")
	tm.expect("create one with: mrtr keygen --out " + missing + "\n")
	if err := cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v\n%s", err, tm.screen)
	}
}
