package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	mrtrprobe "github.com/mrtr-go/mrtr/internal/probe"
)

// runProbeCmd runs `mrtr probe args...` in process.
func runProbeCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	a := &base.App{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	code = run(t.Context(), a, append([]string{"probe"}, args...))
	return code, out.String(), errb.String()
}

// startPlainServer serves a go-sdk server (stateless, 2026-07-28) whose
// one tool keeps its state in plain text, like many servers do.
func startPlainServer(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "deploy", InputSchema: &jsonschema.Schema{
		Type: "object", Required: []string{"env"},
		Properties: map[string]*jsonschema.Schema{"env": {Type: "string", Enum: []any{"staging", "production"}}},
	}}, func(_ context.Context, req *mcp.CallToolRequest, in struct {
		Env string `json:"env"`
	}) (*mcp.CallToolResult, any, error) {
		if req.Params.RequestState != "" {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "cancelled " + req.Params.RequestState}}}, nil, nil
		}
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "Deploy?", RequestedSchema: &jsonschema.Schema{
				Type: "object", Properties: map[string]*jsonschema.Schema{"ok": {Type: "boolean"}},
			}}},
			RequestState: "env=" + in.Env,
		}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestProbeCommandSealed: against mrtr's own demo server (no single-use
// store, no auth) the table shows every check with its verdict and why it
// matters, nothing fails, and the exit status is 0.
func TestProbeCommandSealed(t *testing.T) {
	code, out, errs := runProbeCmd(t, startDemoServer(t, 0)+"/mcp")
	if code != 0 {
		t.Fatalf("exit %d, want 0\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "CHECK") || !strings.Contains(out, "VERDICT") || !strings.Contains(out, "why: ") {
		t.Errorf("no table:\n%s", out)
	}
	// Issue 28 item 7: what ended the paused flows is counted apart.
	if !regexp.MustCompile(`, [0-9]+ requests, [1-9][0-9]* more to end the paused flows\n`).MatchString(out) {
		t.Errorf("no count of the requests that ended the paused flows:\n%s", out)
	}
	want := map[string]string{
		"readable": "pass", "tampered": "pass", "moved": "pass", "arguments_changed": "pass", "replayed": "warn",
		"another_caller": "skip", "expired": "skip", "oversized": "pass", "not_a_string": "pass", "error_shape": "pass",
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && want[f[0]] != "" {
			if f[1] != want[f[0]] {
				t.Errorf("%s: %s, want %s: %s", f[0], f[1], want[f[0]], line)
			}
			delete(want, f[0])
		}
	}
	if len(want) > 0 {
		t.Errorf("checks missing from the table: %v\n%s", want, out)
	}
}

// TestProbeCommandJSON: --json writes {"checks": [{name, verdict,
// detail}]}, every check once in order; a plain-state server fails and
// the exit status is 1.
func TestProbeCommandJSON(t *testing.T) {
	code, out, errs := runProbeCmd(t, startPlainServer(t), "--json")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errs)
	}
	var rep struct {
		Era    string                       `json:"era"`
		Tool   string                       `json:"tool"`
		Checks []map[string]json.RawMessage `json:"checks"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON (%v): %s", err, out)
	}
	if rep.Era != "2026-07-28" || rep.Tool != "deploy" || len(rep.Checks) != len(mrtrprobe.Names) {
		t.Fatalf("era %s, tool %s, %d checks: %s", rep.Era, rep.Tool, len(rep.Checks), out)
	}
	verdict := map[string]string{}
	for i, c := range rep.Checks {
		var name, v string
		json.Unmarshal(c["name"], &name)
		json.Unmarshal(c["verdict"], &v)
		if name != mrtrprobe.Names[i] || len(c) != 3 || c["detail"] == nil {
			t.Errorf("check %d: %v", i, c)
		}
		verdict[name] = v
	}
	if verdict["readable"] != "warn" || verdict["tampered"] != "fail" || verdict["arguments_changed"] != "fail" {
		t.Errorf("verdicts %v", verdict)
	}
}

// TestProbeCommandBounded: --max-requests caps what is sent; the checks
// the budget does not cover are not passed.
func TestProbeCommandBounded(t *testing.T) {
	_, out, errs := runProbeCmd(t, startDemoServer(t, 0)+"/mcp", "--json", "--max-requests", "12")
	var rep mrtrprobe.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON (%v): %s%s", err, out, errs)
	}
	if rep.Requests+rep.Cleanup > 12 {
		t.Errorf("%d requests sent, and %d to end the paused flows, want at most 12 in all", rep.Requests, rep.Cleanup)
	}
	if v := rep.Get(mrtrprobe.CheckReplayed).Verdict; v == mrtrprobe.Pass {
		t.Errorf("replayed %s after the budget ran out: %s", v, rep.Get(mrtrprobe.CheckReplayed).Detail)
	}
}

// TestProbeCommandUsage: --help says it calls tools; a URL and -- COMMAND
// together, or a bearer token for stdio, are usage errors.
func TestProbeCommandUsage(t *testing.T) {
	code, help, _ := runProbeCmd(t, "--help")
	if code != 0 || !strings.Contains(help, "THIS CALLS THE SERVER'S TOOLS") || !strings.Contains(help, "  --max-requests") ||
		!strings.Contains(help, "pauses that tool again, once, and after") {
		t.Errorf("--help: exit %d\n%s", code, help)
	}
	for _, args := range [][]string{
		{"http://127.0.0.1:1/mcp", "--", "some-server"},
		{"--bearer", "x", "--", "some-server"},
		{"--env", "K=V", "http://127.0.0.1:1/mcp"},
	} {
		if code, _, errs := runProbeCmd(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2: %s", args, code, errs)
		}
	}
	if code, _, _ := runProbeCmd(t, "ftp://x"); code != 2 {
		t.Errorf("ftp URL: exit %d, want 2", code)
	}
}

// probeJSON is what `mrtr probe --json` writes.
type probeJSON struct {
	URL     string `json:"url"`
	Command string `json:"command"`
	mrtrprobe.Report
}

// runProbeJSON runs `mrtr probe --json args...` in process and decodes
// its report.
func runProbeJSON(t *testing.T, args ...string) (int, *probeJSON) {
	t.Helper()
	code, out, errs := runProbeCmd(t, append([]string{"--json"}, args...)...)
	var rep probeJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("exit %d, not JSON (%v): %s%s", code, err, out, errs)
	}
	return code, &rep
}

// wantProbeVerdicts checks every check's verdict ("name=verdict" pairs).
func wantProbeVerdicts(t *testing.T, rep *probeJSON, pairs ...string) {
	t.Helper()
	want := map[string]mrtrprobe.Verdict{}
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		want[k] = mrtrprobe.Verdict(v)
	}
	got := rep.Verdicts()
	for _, n := range mrtrprobe.Names {
		if got[n] != want[n] {
			t.Errorf("%s: %s, want %s (%s)", n, got[n], want[n], rep.Get(n).Detail)
		}
	}
}

// TestProbeCommandStdio: -- COMMAND runs the server as a child and probes
// it over stdio. go-sdk's server as is (server/discover lists 2026-07-28)
// keeps its state in plain text and ignores it: readable, and every
// alteration is accepted; another_caller is skipped, stdio having one
// caller. The report names the program, not its arguments.
func TestProbeCommandStdio(t *testing.T) {
	code, rep := runProbeJSON(t, "--env", testcmd.StdioServerEnv+"=modern", "--", os.Args[0], "-test.run=^$", "secret-arg")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if rep.Era != mrtrprobe.ModernVersion || rep.Tool != "delete" || rep.URL != "" || rep.Command != filepath.Base(os.Args[0]) {
		t.Errorf("era %s, tool %s, url %q, command %q", rep.Era, rep.Tool, rep.URL, rep.Command)
	}
	wantProbeVerdicts(t, rep, "readable=warn", "tampered=fail", "moved=skip", "arguments_changed=fail", "replayed=warn",
		"another_caller=skip", "expired=skip", "oversized=fail", "not_a_string=pass", "error_shape=skip")
	if d := rep.Get(mrtrprobe.CheckAnotherCaller).Detail; !strings.Contains(d, "stdio has one caller") {
		t.Errorf("another_caller: %s", d)
	}
	if d := rep.Get(mrtrprobe.CheckTampered).Detail; !strings.Contains(d, `middle flip: ACCEPTED (complete "kept mrtr-probe")`) {
		t.Errorf("tampered: %s", d)
	}
}

// TestProbeCommandStdioServerError: on stdio, with no HTTP status, a
// state answered with -32603 Internal error is a server error, as a 5xx
// is over HTTP: oversized and error_shape fail.
func TestProbeCommandStdioServerError(t *testing.T) {
	_, rep := runProbeJSON(t, "--env", testcmd.StdioServerEnv+"=fragile", "--", os.Args[0])
	for _, c := range []string{mrtrprobe.CheckOversized, mrtrprobe.CheckErrorShape} {
		if got := rep.Get(c); got.Verdict != mrtrprobe.Fail || !strings.Contains(got.Detail, "-32603 Internal error: a server error, not a refusal") {
			t.Errorf("%s: %s (%s)", c, got.Verdict, got.Detail)
		}
	}
}

// TestProbeCommandStdioLegacy: a stdio server whose server/discover fails
// speaks 2025-11-25: nothing can be checked. Issue 27 item 12: that
// exits with a status of its own (3), neither 0 nor 1, and the table
// says why once, not once per check; --json says it in "unchecked" and
// skips every check.
func TestProbeCommandStdioLegacy(t *testing.T) {
	code, rep := runProbeJSON(t, "--env", testcmd.StdioServerEnv+"=legacy", "--", os.Args[0])
	if code != 3 || rep.Era != mrtrprobe.LegacyVersion || !strings.Contains(rep.Unchecked, "the server speaks 2025-11-25") {
		t.Errorf("exit %d, era %s, unchecked %q", code, rep.Era, rep.Unchecked)
	}
	for _, c := range rep.Checks {
		if c.Verdict != mrtrprobe.Skip {
			t.Errorf("%s: %s (%s)", c.Name, c.Verdict, c.Detail)
		}
	}
	code, out, errs := runProbeCmd(t, "--env", testcmd.StdioServerEnv+"=legacy", "--", os.Args[0])
	if code != 3 || strings.Count(out, "the server speaks 2025-11-25") != 1 || !strings.Contains(out, "nothing checked: ") || strings.Contains(out, "CHECK") {
		t.Errorf("exit %d, want 3, and the reason once:\n%s%s", code, out, errs)
	}
	if _, help, _ := runProbeCmd(t, "--help"); !strings.Contains(help, "  3  nothing could be checked") || !strings.Contains(help, "  4  incomplete") {
		t.Errorf("--help does not list the exit statuses:\n%s", help)
	}
}

// TestProbeCommandStdioExited: a command that exits without answering
// is an error, not a legacy server.
func TestProbeCommandStdioExited(t *testing.T) {
	code, _, errs := runProbeCmd(t, "--", "true")
	if code != 1 || !strings.Contains(errs, "server/discover") || !strings.Contains(errs, "exited") {
		t.Errorf("exit %d: %s", code, errs)
	}
}

// startPromptServer serves a go-sdk server (stateless, 2026-07-28) with
// the plain-state tool deploy and one prompt, summary: with pausable, it
// pauses with a plain state of its own (and completes on any state);
// without, it never pauses.
func startPromptServer(t *testing.T, pausable bool) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "prompts", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "deploy"}, func(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		if req.Params.RequestState != "" {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "resumed " + req.Params.RequestState}}}, nil, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "Deploy?",
			RequestedSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"ok": {Type: "boolean"}}}}},
			RequestState: "deploy"}, nil, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "summary", Arguments: []*mcp.PromptArgument{{Name: "topic", Required: true}}}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		if !pausable || req.Params.RequestState != "" {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "summary of " + req.Params.Arguments["topic"]}}}}, nil
		}
		return &mcp.GetPromptResult{InputRequests: mcp.InputRequestMap{"detail": &mcp.ElicitParams{Message: "How detailed?",
			RequestedSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"level": {Type: "string"}}}}},
			RequestState: "summary"}, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestProbeMovedMethod: with one pausable tool, moved moves states
// across methods. A pausable prompt that takes the tool's state, and a
// tool that takes the prompt's, fail; a prompt that never pauses is no
// verdict, only a note. Behind mrtr proxy, whose seal binds the method,
// every move is refused: pass, for either prompt.
func TestProbeMovedMethod(t *testing.T) {
	for _, pausable := range []bool{true, false} {
		up := startPromptServer(t, pausable)
		_, rep := runProbeJSON(t, up)
		m := rep.Get(mrtrprobe.CheckMoved)
		if pausable {
			if m.Verdict != mrtrprobe.Fail || !strings.Contains(m.Detail, "state of deploy sent to prompts/get summary: ACCEPTED") ||
				!strings.Contains(m.Detail, "state of prompts/get summary sent to deploy: ACCEPTED") {
				t.Errorf("pausable prompt: moved %s: %s", m.Verdict, m.Detail)
			}
		} else if m.Verdict != mrtrprobe.Skip || !strings.Contains(m.Detail, "state of deploy sent to prompts/get summary: not refused") {
			t.Errorf("prompt that never pauses: moved %s: %s", m.Verdict, m.Detail)
		}
		px, _ := startProxyCmd(t, "--upstream", up)
		_, rep = runProbeJSON(t, px)
		m = rep.Get(mrtrprobe.CheckMoved)
		if m.Verdict != mrtrprobe.Pass || !strings.Contains(m.Detail, "state of deploy sent to prompts/get summary: refused (error -32602") {
			t.Errorf("pausable=%v, proxied: moved %s: %s", pausable, m.Verdict, m.Detail)
		}
	}
}

// startHostileProbeServer serves a 2026-07-28 server whose one tool has
// terminal controls in its name and pauses every time; every resume is
// refused with controls in the message and in data.reason.
func startHostileProbeServer(t *testing.T) (url, tool string) {
	t.Helper()
	tool = "de\x1b[2Jploy\u202e"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				RequestState json.RawMessage `json:"requestState"`
			} `json:"params"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		m := map[string]any{"jsonrpc": "2.0", "id": req.ID}
		switch {
		case req.Method == "tools/list":
			m["result"] = map[string]any{"tools": []any{map[string]any{"name": tool, "inputSchema": map[string]any{"type": "object"}}}}
		case req.Method == "tools/call" && req.Params.RequestState == nil:
			m["result"] = map[string]any{"resultType": "input_required", "requestState": "0f3a9c1d7e2b4a6c8d0e1f2a3b4c5d6e",
				"inputRequests": map[string]any{"confirm": map[string]any{"method": "elicitation/create", "params": map[string]any{"message": "ok?"}}}}
		case req.Method == "tools/call":
			m["error"] = map[string]any{"code": -32602, "message": "no\x1b]52;c;cHduZWQ=\x07pe", "data": map[string]any{"reason": "\x1b[2J\x1b[Hpass\u009b31m"}}
		default:
			m["error"] = map[string]any{"code": -32601, "message": "Method not found"}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(m)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", tool
}

// TestProbeCleansServerText pins issue 27 item 7 for mrtr probe: the
// server's tool name, error message and data.reason reach the table
// without terminal controls (a server cannot clear the screen and print
// its own table); --json keeps them exact, with no control character
// raw in its bytes.
func TestProbeCleansServerText(t *testing.T) {
	url, tool := startHostileProbeServer(t)
	_, out, errs := runProbeCmd(t, url)
	testcmd.WantClean(t, "the table", out+errs)
	if !strings.Contains(out, "tool deploy, ") || !strings.Contains(out, `error -32602 "no\x1b]52;c;cHduZWQ=\ape" (pass)`) {
		t.Errorf("table:\n%s%s", out, errs)
	}
	code, js, _ := runProbeCmd(t, url, "--json")
	testcmd.WantClean(t, "the JSON", js)
	var rep probeJSON
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("exit %d, not JSON (%v): %s", code, err, js)
	}
	if rep.Tool != tool || !strings.Contains(rep.Get(mrtrprobe.CheckTampered).Detail, "(\x1b[2J\x1b[Hpass\u009b31m)") {
		t.Errorf("--json changed the server's text: tool %q, tampered %q", rep.Tool, rep.Get(mrtrprobe.CheckTampered).Detail)
	}
}

// TestProbeCommandIncomplete pins issue 27 item 12's exit statuses: a
// sealed server with one pausable tool cannot have moved checked, so the
// run is incomplete (4, said under the table); with --tool alone moved
// is skipped for a flag not given, and the run exits 0.
func TestProbeCommandIncomplete(t *testing.T) {
	px, _ := startProxyCmd(t, "--upstream", startPlainServer(t))
	code, out, errs := runProbeCmd(t, px)
	if code != 4 || !strings.Contains(out, "\nincomplete: moved could not run or was inconclusive (see above); exit status 4\n") {
		t.Errorf("exit %d, want 4:\n%s%s", code, out, errs)
	}
	if code, out, errs := runProbeCmd(t, px, "--tool", "deploy"); code != 0 || strings.Contains(out, "incomplete") {
		t.Errorf("--tool deploy: exit %d, want 0:\n%s%s", code, out, errs)
	}
}
