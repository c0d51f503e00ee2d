package main

import (
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/proxy"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/serve"
)

// helpCommands are the commands whose --help the tests read.
var helpCommands = [][]string{
	{"serve"}, {"proxy"}, {"runner"}, {"call"}, {"probe"}, {"keygen"}, {"keys"}, {"keys", "status"}, {"keys", "rotate"},
	{"audit"}, {"audit", "verify"},
}

// TestHelpOnStdout pins issue 30 item 1: help asked for goes to stdout
// with status 0 (mrtr proxy --help | less shows it), a usage error to
// stderr with status 2.
func TestHelpOnStdout(t *testing.T) {
	for _, cmd := range helpCommands {
		for _, h := range []string{"--help", "-h"} {
			code, out, errOut := runApp(t, append(cmd, h)...)
			if code != 0 || !strings.HasPrefix(out, "Usage:") || !strings.Contains(out, "mrtr "+strings.Join(cmd, " ")+" ") || errOut != "" {
				t.Errorf("mrtr %s %s: exit %d, stdout %.80q, stderr %q; want 0, the usage on stdout, nothing on stderr",
					strings.Join(cmd, " "), h, code, out, errOut)
			}
		}
		code, out, errOut := runApp(t, append(cmd, "--no-such-flag")...)
		if (cmd[0] == "keys" || cmd[0] == "audit") && len(cmd) == 1 {
			continue // no flags of its own: the word is a subcommand
		}
		if code != 2 || out != "" || !strings.Contains(errOut, "unknown flag --no-such-flag") {
			t.Errorf("mrtr %s --no-such-flag: exit %d, stdout %q, stderr %q; want 2 and the error on stderr", strings.Join(cmd, " "), code, out, errOut)
		}
	}
}

// singleDash is a flag as Go's flag package prints it, -name.
var singleDash = regexp.MustCompile(`(?m)^\s+-[a-z]`)

// TestHelpOneFlagStyle pins issue 30 item 2: every command's help writes
// its flags --name, as its usage line and the README do.
func TestHelpOneFlagStyle(t *testing.T) {
	for _, cmd := range helpCommands {
		_, out, _ := runApp(t, append(cmd, "--help")...)
		if m := singleDash.FindString(out); m != "" {
			t.Errorf("mrtr %s --help writes a flag with one dash (%q):\n%s", strings.Join(cmd, " "), m, out)
		}
		if !strings.Contains(out, "\n  --") && !slices.Equal(cmd, []string{"keys"}) && !slices.Equal(cmd, []string{"audit"}) { // they list their subcommands
			t.Errorf("mrtr %s --help lists no --flag:\n%s", strings.Join(cmd, " "), out)
		}
	}
	_, out, _ := runApp(t, "call", "--help")
	if !strings.Contains(out, "\n  --arg k=v\n") {
		t.Errorf("mrtr call --help: no \"  --arg k=v\" line:\n%s", out)
	}
}

// TestHelpExamples pins issue 30 item 3: serve, proxy, call and probe end
// their help with examples, each naming only flags the command has, and
// proxy's shows the -- COMMAND form; --upstream-era says what it is.
func TestHelpExamples(t *testing.T) {
	flagWord := regexp.MustCompile(`(?:^|\s)(--[a-z][a-z0-9-]*)`)
	for _, cmd := range []string{"serve", "proxy", "call", "probe"} {
		_, out, _ := runApp(t, cmd, "--help")
		_, ex, ok := strings.Cut(out, "\nExamples:\n")
		if !ok || strings.TrimSpace(ex) == "" {
			t.Errorf("mrtr %s --help has no examples at its end:\n%s", cmd, out)
			continue
		}
		for _, line := range strings.Split(strings.TrimSuffix(ex, "\n"), "\n") {
			if !strings.HasPrefix(line, "  mrtr ") && !strings.HasPrefix(line, "  MRTR_") && !strings.HasPrefix(line, "      --") {
				t.Errorf("mrtr %s --help: %q after Examples: is no example command", cmd, line)
			}
			for _, m := range flagWord.FindAllStringSubmatch(line, -1) {
				if !strings.Contains(out, "\n  "+m[1]+" ") && !strings.Contains(out, "\n  "+m[1]+"\n") && !strings.Contains(line, "mrtr keygen") {
					t.Errorf("mrtr %s --help: example %q uses %s, which the command does not list", cmd, line, m[1])
				}
			}
		}
		if cmd == "proxy" && !strings.Contains(ex, " -- npx -y ") {
			t.Errorf("mrtr proxy --help: no example of the -- npx -y PACKAGE form:\n%s", ex)
		}
	}
	// serve's and proxy's examples parse, as written.
	a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	for _, ex := range []string{serve.Examples, proxy.Examples} {
		for _, cmd := range strings.Split(regexp.MustCompile(`\\\n\s*`).ReplaceAllString(ex, " "), "\n") {
			cmd, _, _ = strings.Cut(strings.TrimSpace(cmd), "   ") // the description after it
			for _, part := range strings.Split(cmd, " && ") {
				words := strings.Fields(part)
				var err error
				switch {
				case len(words) < 2:
					continue
				case words[1] == "serve":
					_, err = serve.Parse(a, words[2:])
				case words[1] == "proxy":
					_, err = proxy.Parse(a, words[2:])
				}
				if err != nil {
					t.Errorf("example %q: %v", part, err)
				}
			}
		}
	}

	_, out, _ := runApp(t, "proxy", "--help")
	_, era, _ := strings.Cut(out, "  --upstream-era auto|modern|legacy\n")
	if era = strings.TrimSpace(era); !strings.HasPrefix(era, "the protocol generation the upstream speaks") {
		t.Errorf("--upstream-era's description starts %.40q", era)
	}
}

// TestUsageErrorsExit2 pins issue 30 item 4: a missing --upstream, a bare
// --, a bad value from the command line or the environment, and an
// unknown flag all exit 2, with the hint to --help.
func TestUsageErrorsExit2(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"proxy"}, nil, "mrtr proxy: --upstream: is required"},
		{[]string{"proxy", "--"}, nil, "mrtr proxy: --upstream: -- must be followed by the command"},
		{[]string{"proxy", "--upstream", "ftp://x/mcp"}, nil, "is not an http:// or https:// URL"},
		{[]string{"proxy", "--upstrem", "http://127.0.0.1:1/mcp"}, nil, "unknown flag --upstrem"},
		{[]string{"serve", "--ttl", "-5s"}, nil, "--ttl: \"-5s\" is not a positive duration"},
		{[]string{"serve"}, map[string]string{"MRTR_TTL": "5"}, "$MRTR_TTL (--ttl)"},
	} {
		code, out, errOut := runAppEnv(t, tc.env, tc.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) || !strings.HasSuffix(errOut, "Run \"mrtr "+tc.args[0]+" --help\" for its flags.\n") {
			t.Errorf("mrtr %v (env %v): exit %d, stderr %q; want 2, %q and the hint", tc.args, tc.env, code, errOut, tc.want)
		}
	}
}

// TestHelpListsEveryForm (issue 39, item 8): mrtr --help lists every form
// of a command that its own usage shows, probe -- COMMAND included.
func TestHelpListsEveryForm(t *testing.T) {
	_, out, _ := runApp(t, "--help")
	for _, form := range []string{"mrtr proxy --upstream URL [flags]", "mrtr proxy [flags] -- COMMAND [ARG...]", "mrtr probe URL [flags]", "mrtr probe [flags] -- COMMAND [ARG...]"} {
		if !strings.Contains(out, "\n  "+form+" ") {
			t.Errorf("mrtr --help does not list %q:\n%s", form, out)
		}
	}
}
