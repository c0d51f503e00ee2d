package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/proxy"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/serve"
)

var update = flag.Bool("update", false, "rewrite the README's generated flag tables")

const readmePath = "../../README.md"

// TestREADMEFlags pins issue 21 item 13: the README's flag tables are
// the flags' own definitions, printed; -update rewrites them between
// their marker comments.
func TestREADMEFlags(t *testing.T) {
	data, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	want := readme
	for name, text := range map[string]string{"serve": serveFlagsMarkdown(), "proxy": proxyFlagsMarkdown()} {
		re := regexp.MustCompile(`(?s)<!-- flags:` + name + ` -->\n.*?<!-- /flags:` + name + ` -->`)
		if !re.MatchString(want) {
			t.Fatalf("README.md has no <!-- flags:%s --> ... <!-- /flags:%s --> markers", name, name)
		}
		want = re.ReplaceAllLiteralString(want, "<!-- flags:"+name+" -->\n"+text+"<!-- /flags:"+name+" -->")
	}
	if want == readme {
		return
	}
	if *update {
		if err := os.WriteFile(readmePath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's flag tables differ from the flags' definitions; run go test ./cmd/mrtr -run TestREADMEFlags -update")
}

func serveFlagsMarkdown() string {
	return markdownTable(helpFlags("serve"), func(*base.FlagDoc) bool { return true })
}

// proxyFlagsMarkdown names the flags proxy shares with serve and lists
// its own.
func proxyFlagsMarkdown() string {
	serve := map[string]bool{}
	for _, d := range helpFlags("serve").Docs {
		serve[d.Name] = true
	}
	p := helpFlags("proxy")
	var shared []string
	for _, d := range p.Docs {
		if serve[d.Name] {
			shared = append(shared, "`--"+d.Name+"`")
		}
	}
	return "`mrtr proxy --upstream URL` takes these flags of `mrtr serve`, each also read from its `MRTR_*` variable: " +
		strings.Join(shared, ", ") + ". Its own:\n\n" +
		markdownTable(p, func(d *base.FlagDoc) bool { return !serve[d.Name] })
}

// markdownTable is the README's table of the flags for which keep
// returns true, by group: flag, variable, default, meaning.
func markdownTable(f *base.Flags, keep func(*base.FlagDoc) bool) string {
	var b strings.Builder
	b.WriteString("| flag | variable | default | meaning |\n| --- | --- | --- | --- |\n")
	for _, g := range f.Groups() {
		first := true
		for _, d := range f.Docs {
			if d.Group != g || !keep(d) {
				continue
			}
			if first {
				fmt.Fprintf(&b, "| **%s** | | | |\n", g.Title())
				first = false
			}
			name := "--" + d.Name
			if d.Arg != "" && d.Arg == strings.ToUpper(d.Arg) {
				name += " " + d.Arg
			}
			def := "none"
			switch {
			case d.Kind == "boolean" && d.Def == "":
				def = "off"
			case d.Def != "":
				def = "`" + d.Def + "`"
			}
			fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s |\n", mdEscape(name), d.Env, def, mdEscape(d.Usage))
		}
	}
	return b.String()
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// TestREADMETour pins issue 21 item 12: every line of the README's tour
// is a command a fresh machine has (go, export, curl, kill, or mrtr once
// installed); every mrtr server it starts parses its flags, listens on an
// address of its own, and every URL the tour calls or proxies to is one
// of those servers'.
func TestREADMETour(t *testing.T) {
	data, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)<!-- tour -->\n```sh\n(.*?)```\n<!-- /tour -->").FindAllStringSubmatch(string(data), -1)
	if len(blocks) < 2 {
		t.Fatalf("README.md has %d tour blocks, want the tour and the proxy", len(blocks))
	}
	a := &base.App{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	listening := map[string]string{} // address -> the line that listens there
	var installed, background bool
	jobs := 0
	for _, b := range blocks {
		for line := range strings.Lines(b[1]) {
			line, _, _ = strings.Cut(line, "# ")
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			background = strings.HasSuffix(line, "&")
			words := strings.Fields(strings.TrimSuffix(line, "&"))
			switch words[0] {
			case "go":
				if !slices.Equal(words, []string{"go", "install", "./cmd/mrtr"}) {
					t.Errorf("tour line %q: only go install ./cmd/mrtr", line)
				}
				installed = true
				continue
			case "export", "kill":
				if words[0] == "kill" && len(words)-1 != jobs {
					t.Errorf("tour line %q stops %d jobs, the tour started %d", line, len(words)-1, jobs)
				}
				continue
			case "until":
				u := regexp.MustCompile(`http://[^ ;]+`).FindString(line)
				checkServed(t, line, u, listening)
				continue
			case "mrtr":
			default:
				t.Errorf("tour line %q runs %s, which a fresh machine lacks", line, words[0])
				continue
			}
			if !installed {
				t.Errorf("tour line %q runs mrtr before go install ./cmd/mrtr", line)
			}
			switch words[1] {
			case "serve", "proxy":
				if !background {
					t.Errorf("tour line %q: a server in the tour runs in the background (&)", line)
				}
				jobs++
				var addr string
				if words[1] == "serve" {
					c, err := serve.Parse(a, words[2:])
					if err != nil {
						t.Errorf("tour line %q: %v", line, err)
						continue
					}
					addr = c.Addr
				} else {
					c, err := proxy.Parse(a, words[2:])
					if err != nil {
						t.Errorf("tour line %q: %v", line, err)
						continue
					}
					addr = c.Addr
					if len(c.Command) == 0 {
						checkServed(t, line, c.Upstream, listening)
					} else if c.Command[0] != "mrtr" {
						t.Errorf("tour line %q runs %s as the upstream, which a fresh machine lacks", line, c.Command[0])
					}
				}
				if prev, ok := listening[addr]; ok {
					t.Errorf("tour line %q listens on %s, as %q already does", line, addr, prev)
				}
				listening[addr] = line
			case "call":
				checkServed(t, line, words[2], listening)
			default:
				t.Errorf("tour line %q: mrtr %s is not in the tour's vocabulary", line, words[1])
			}
		}
	}
}

// checkServed fails t unless rawURL's host:port is one the tour listens on.
func checkServed(t *testing.T, line, rawURL string, listening map[string]string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		t.Errorf("tour line %q: %q is no URL", line, rawURL)
		return
	}
	host := u.Host
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(host, "80")
	}
	if _, ok := listening[host]; !ok {
		t.Errorf("tour line %q: nothing the tour started serves %s", line, host)
	}
}

// TestREADMEOneEverything (issue 39, item 8): the README starts the npm
// server-everything one way only, pinned and with its transport.
func TestREADMEOneEverything(t *testing.T) {
	data, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	const want = "npx -y @modelcontextprotocol/server-everything@2026.8.31 stdio"
	all := regexp.MustCompile(`npx[^\n&#`+"`"+`]*server-everything[^\s&#`+"`"+`]*(?: stdio)?`).FindAllString(string(data), -1)
	if len(all) == 0 {
		t.Fatal("README.md never starts the npm server-everything")
	}
	for _, got := range all {
		if got != want {
			t.Errorf("README.md starts server-everything as %q, want %q everywhere", got, want)
		}
	}
}
