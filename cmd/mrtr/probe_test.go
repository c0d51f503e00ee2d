package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/internal/attack"
)

// runProbeCmd runs `mrtr probe args...` in process.
func runProbeCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	code = a.run(t.Context(), append([]string{"probe"}, args...))
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
	if rep.Era != "2026-07-28" || rep.Tool != "deploy" || len(rep.Checks) != len(attack.Names) {
		t.Fatalf("era %s, tool %s, %d checks: %s", rep.Era, rep.Tool, len(rep.Checks), out)
	}
	verdict := map[string]string{}
	for i, c := range rep.Checks {
		var name, v string
		json.Unmarshal(c["name"], &name)
		json.Unmarshal(c["verdict"], &v)
		if name != attack.Names[i] || len(c) != 3 || c["detail"] == nil {
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
	var rep attack.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON (%v): %s%s", err, out, errs)
	}
	if rep.Requests > 12 {
		t.Errorf("%d requests sent, want at most 12", rep.Requests)
	}
	if v := rep.Get(attack.CheckReplayed).Verdict; v == attack.Pass {
		t.Errorf("replayed %s after the budget ran out: %s", v, rep.Get(attack.CheckReplayed).Detail)
	}
}

// TestProbeCommandUsage: --help says it calls tools; -- COMMAND is not
// there yet and says so.
func TestProbeCommandUsage(t *testing.T) {
	code, _, errs := runProbeCmd(t, "--help")
	if code != 0 || !strings.Contains(errs, "THIS CALLS THE SERVER'S TOOLS") || !strings.Contains(errs, "-max-requests") {
		t.Errorf("--help: exit %d\n%s", code, errs)
	}
	code, _, errs = runProbeCmd(t, "--", "some-server")
	if code != 2 || !strings.Contains(errs, "-- COMMAND (stdio) is not supported yet") {
		t.Errorf("-- COMMAND: exit %d: %s", code, errs)
	}
	if code, _, _ := runProbeCmd(t, "ftp://x"); code != 2 {
		t.Errorf("ftp URL: exit %d, want 2", code)
	}
}
