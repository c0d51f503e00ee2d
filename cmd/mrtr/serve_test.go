package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
)

func TestServeRejectsBadStartup(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--keys", "/nonexistent/keys.json"},
		{"serve", "--addr", "256.0.0.1:99999"},
		{"serve", "--replay", "redis://[bad"},
	} {
		code, _, errOut := runApp(t, args...)
		if code != 1 || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}

// startServe runs `mrtr serve` in-process on a free loopback port and
// returns its /mcp URL and log.
func startServe(t *testing.T, args ...string) (string, *testcmd.Buffer) {
	t.Helper()
	return testcmd.Start(t, run, append([]string{"serve"}, args...)...)
}

func TestServeEphemeralWarningAndShutdown(t *testing.T) {
	url, logs := startServe(t)
	if !strings.Contains(logs.String(), "NO KEY RING GIVEN") {
		t.Fatal("no loud warning for an ephemeral key ring")
	}
	resp, err := http.Post(url, "application/json", strings.NewReader(`{`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 || resp.StatusCode >= 500 {
		t.Fatalf("malformed body: HTTP %d", resp.StatusCode)
	}
}

// TestServeBadInput throws malformed and hostile requests at a running
// server: each gets a 4xx status (or a JSON-RPC error), never a crash or
// a hang, and the server keeps serving.
func TestServeBadInput(t *testing.T) {
	url, logs := startServe(t, "--max-body", "65536")
	modern := func(method, name string) http.Header {
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set("Accept", "application/json, text/event-stream")
		h.Set("Mcp-Protocol-Version", "2026-07-28")
		h.Set("Mcp-Method", method)
		if name != "" {
			h.Set("Mcp-Name", name)
		}
		return h
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	call := func(extra string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"deploy","arguments":{"service":"api","env":"staging"},` + extra + meta + `}}`
	}
	for _, tc := range []struct {
		name   string
		method string
		header http.Header
		body   string
		want   int
	}{
		{"malformed json", "POST", modern("tools/call", "deploy"), `{"jsonrpc":`, 400},
		{"batch", "POST", modern("tools/list", ""), `[{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}]`, 400},
		{"wrong content type", "POST", func() http.Header { h := modern("tools/list", ""); h.Set("Content-Type", "text/plain"); return h }(), `{}`, 415},
		{"unknown method", "POST", modern("frobnicate", ""), `{"jsonrpc":"2.0","id":1,"method":"frobnicate","params":{` + meta + `}}`, 404},
		{"header mismatch", "POST", modern("tools/list", ""), call(""), 400},
		{"missing meta", "POST", modern("tools/list", ""), `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, 400},
		{"oversized body", "POST", modern("tools/call", "deploy"), call(`"pad":"` + strings.Repeat("x", 70000) + `",`), 413},
		{"hostile token", "POST", modern("tools/call", "deploy"), call(`"requestState":"v1.ephemeral.` + strings.Repeat("A", 60000) + `","inputResponses":{"confirm":{"action":"accept"}},`), 400},
		{"binary token", "POST", modern("tools/call", "deploy"), call(`"requestState":"\u0000\u00ff\ud7ff","inputResponses":{"confirm":{"action":"accept"}},`), 400},
		{"GET", "GET", modern("tools/list", ""), ``, 405},
		{"DELETE", "DELETE", modern("tools/list", ""), ``, 405},
	} {
		req, _ := http.NewRequest(tc.method, url, strings.NewReader(tc.body))
		req.Header = tc.header
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: HTTP %d, want %d (%.200s)", tc.name, resp.StatusCode, tc.want, body)
		}
	}
	// Still alive, and no token text in the log.
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{`+meta+`}}`))
	req.Header = modern("tools/list", "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("server did not survive: %v", err)
	}
	resp.Body.Close()
	if strings.Contains(logs.String(), strings.Repeat("A", 64)) {
		t.Fatal("a token reached the log")
	}
}

// TestServeInputRequiredHasNoNullContent pins issue 21 item 14: a paused
// tools/call result leaves "content" out instead of sending null; the
// final result keeps its content.
func TestServeInputRequiredHasNoNullContent(t *testing.T) {
	url, _ := startServe(t)
	a := callDeploy(t, url, "staging", "", nil)
	if a.resultType != "input_required" || a.state == "" {
		t.Fatalf("first call: %+v", a)
	}
	var msg struct {
		Result map[string]json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal([]byte(a.raw), &msg); err != nil {
		t.Fatal(err)
	}
	if c, ok := msg.Result["content"]; ok {
		t.Errorf("input_required result has content %s: %s", c, a.raw)
	}
	for _, k := range []string{"resultType", "inputRequests", "requestState"} {
		if _, ok := msg.Result[k]; !ok {
			t.Errorf("input_required result lacks %s: %s", k, a.raw)
		}
	}
	if got := callDeploy(t, url, "staging", a.state, nil); got.text != "deployed api to staging" || !strings.Contains(got.raw, `"content":[`) {
		t.Fatalf("resume: %+v", got)
	}
}
