package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// bridgedEverything is `mrtr proxy --metrics-addr ... -- node
// .../server-everything stdio`, seen by a client through a loopback
// reverse proxy whose transport (sealedOnly) checks every requestState on
// the way back.
type bridgedEverything struct {
	url     string // the MCP endpoint clients use: the checking front
	metrics string // the proxy's /metrics
	seal    *sealedOnly
}

// startBridgedEverything starts the proxy, its upstream and the front;
// all stop at t's cleanup.
func startBridgedEverything(t *testing.T) *bridgedEverything {
	t.Helper()
	node, script := serverEverything(t)
	mcpURL, _, logs := startProxyLog(t, "--metrics-addr", "127.0.0.1:0", "--", node, script, "stdio")
	b := &bridgedEverything{metrics: metricsURL(t, logs.String()), seal: &sealedOnly{t: t}}
	target, err := url.Parse(mcpURL)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(&url.URL{Scheme: target.Scheme, Host: target.Host}) },
		Transport:     b.seal,
		FlushInterval: -1, // event streams pass as they come
	})
	t.Cleanup(front.Close)
	b.url = front.URL + target.Path
	return b
}

// metricsURL finds the /metrics URL in a log of `mrtr ... --log-format json`.
func metricsURL(t *testing.T, log string) string {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		var rec struct {
			Msg string `json:"msg"`
			URL string `json:"url"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "mrtr metrics serving" && rec.URL != "" {
			return rec.URL
		}
	}
	t.Fatalf("no \"mrtr metrics serving\" line in the log:\n%s", tail(log, 20))
	return ""
}

// metric sums the samples of /metrics whose name and labels start with
// prefix (`mrtr_pauses_total{`, `mrtr_resumes_total{outcome="ok"}`).
func metric(t *testing.T, metricsURL, prefix string) float64 {
	t.Helper()
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			f := strings.Fields(rest)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("metric %q: %v", sc.Text(), err)
			}
			sum += v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sum
}

// wantSealed fails t unless the client saw at least rounds requestStates,
// every one an mrtr token (sealedOnly checked each), and the proxy
// counted at least as many sealed pauses and good resumes.
func (b *bridgedEverything) wantSealed(t *testing.T, rounds int) {
	t.Helper()
	if n := b.seal.sealed(); n < rounds {
		t.Errorf("the client was sent %d requestStates, want %d sealed ones at least", n, rounds)
	}
	if n := metric(t, b.metrics, "mrtr_pauses_total{"); n < float64(rounds) {
		t.Errorf("mrtr_pauses_total is %v, want %d at least", n, rounds)
	}
	if n := metric(t, b.metrics, `mrtr_resumes_total{outcome="ok"}`); n < float64(rounds) {
		t.Errorf(`mrtr_resumes_total{outcome="ok"} is %v, want %d at least`, n, rounds)
	}
}

// tsInterop is what conformance/proxy-interop.mjs printed.
type tsInterop struct {
	Text, Error     string
	IsError         bool
	ProtocolVersion string
	States          struct{ Sealed, Plain int }
}

// runTSInterop runs conformance/proxy-interop.mjs (the TypeScript client
// 2.4.0 with its automatic input_required loop) against url with the
// pinned Node 22, extra being its optional trailing arguments, and fails
// t unless the script completed the call.
func runTSInterop(t *testing.T, url, tool, args string, extra ...string) tsInterop {
	t.Helper()
	dir := filepath.Join(repoRoot, "conformance")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "node"), append([]string{"proxy-interop.mjs", url, tool, args}, extra...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var res tsInterop
	if jerr := json.Unmarshal([]byte(lines[len(lines)-1]), &res); jerr != nil || err != nil || res.Error != "" {
		t.Fatalf("proxy-interop.mjs: %v %v %s\n%s", err, jerr, res.Error, out)
	}
	return res
}

// TestBridgeTSClient: the TypeScript client 2.4.0, negotiating its era
// (versionNegotiation mode 'auto') and answering with its automatic
// input_required loop, completes server-everything's
// trigger-elicitation-request through `mrtr proxy -- node ... stdio`: it
// picks 2026-07-28, the result carries its answers, and the round was
// sealed (the client echoed only mrtr tokens; the proxy counted the pause).
func TestBridgeTSClient(t *testing.T) {
	b := startBridgedEverything(t)
	res := runTSInterop(t, b.url, "trigger-elicitation-request", `{}`, "auto")
	if res.ProtocolVersion != "2026-07-28" {
		t.Fatalf("the client negotiated %q through the bridge, want 2026-07-28", res.ProtocolVersion)
	}
	if res.IsError || !strings.Contains(res.Text, "- Name: Alice\n- Agreed to terms: true\n- Email: alice@example.com\n") {
		t.Fatalf("result (isError %v) lacks the client's answers:\n%s", res.IsError, res.Text)
	}
	if res.States.Sealed < 1 || res.States.Plain != 0 {
		t.Fatalf("the client echoed %d mrtr tokens and %d other states", res.States.Sealed, res.States.Plain)
	}
	b.wantSealed(t, 1)
}

// TestBridgeCall: `mrtr call URL trigger-elicitation-request`, the
// terminal client, completes server-everything's form through `mrtr proxy
// -- node ... stdio` with the answers typed on its stdin (Enter takes a
// default or skips an optional field), and the round was sealed.
func TestBridgeCall(t *testing.T) {
	b := startBridgedEverything(t)
	// The fields in prompt order: name (required), then the optional ones by name.
	answers := strings.Join([]string{
		"Ada Lovelace",     // name
		"",                 // birthdate: skipped
		"y",                // check
		"ada@example.com",  // email
		"",                 // firstLine: its default
		"",                 // homepage: skipped
		"7",                // integer
		"2",                // legacyTitledEnum: Dogs (pet-2)
		"", "", "", "", "", // number, the multi-selects and the other enums: their defaults
	}, "\n") + "\n"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mrtrBin, "call", b.url, "trigger-elicitation-request")
	cmd.Env = serverEnv()
	cmd.Stdin = strings.NewReader(answers)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mrtr call: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	wantInOrder(t, string(out),
		"Please provide inputs for the following fields:\n",
		"name (string, required): String\n", "name: ",
		"check [y/n]: ", "email: ", "firstLine [It was a dark and stormy night.]: ", "integer [42]: ",
		"legacyTitledEnum (choose one: number or value, optional)", "  2) Dogs (pet-2)\n",
		"untitledSingleSelectEnum [Monica]: ",
		"User provided the requested information!\n",
		"- Name: Ada Lovelace\n- Agreed to terms: true\n- Email: ada@example.com\n- Favorite Integer: 7\n- Favorite Number: 3.14\n",
		`"legacyTitledEnum": "pet-2"`)
	b.wantSealed(t, 1)
}

// wantInOrder fails t unless s holds each of subs, in order.
func wantInOrder(t *testing.T, s string, subs ...string) {
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
