package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/testcmd"
	"github.com/mrtr-go/mrtr/gosdk"
)

// freeLoopbackURL is the /mcp URL of freeAddr.
func freeLoopbackURL(t *testing.T) string {
	t.Helper()
	return "http://" + testcmd.FreeAddr(t) + "/mcp"
}

// TestCallURLWithoutScheme pins issue 30 item 5: a loopback URL without
// a scheme is taken as http://; another host gets the corrected URL
// offered in the error.
func TestCallURLWithoutScheme(t *testing.T) {
	srv := startDemoServer(t, 0)
	out, _, err := runCall(t, t.Context(), strings.NewReader(""), nil, strings.TrimPrefix(srv, "http://")+"/mcp")
	if err != nil || !strings.Contains(out, "guess_number") {
		t.Fatalf("127.0.0.1:PORT/mcp: %v\n%s", err, out)
	}
	for _, tc := range []struct{ url, want string }{
		{"mcp.example.com/mcp", "URL must be an http:// or https:// URL: did you mean https://mcp.example.com/mcp?"},
		{"ftp://x/mcp", "URL must be an http:// or https:// URL, like http://127.0.0.1:8080/mcp"},
	} {
		_, errOut, err := runCall(t, t.Context(), strings.NewReader(""), nil, tc.url)
		if !errors.Is(err, base.ErrUsage) || errOut != "mrtr call: "+tc.want+"\n" {
			t.Errorf("%s: %v, stderr %q; want a usage error %q", tc.url, err, errOut, tc.want)
		}
	}
}

// TestCallConnectionRefused pins issue 30 item 6: nothing listening is
// one plain line: what failed, the URL, what to check; none of go-sdk's
// layers (initialize, transport).
func TestCallConnectionRefused(t *testing.T) {
	url := freeLoopbackURL(t)
	for _, args := range [][]string{{url}, {url, "deploy"}, {url, "--legacy"}} {
		_, _, err := runCall(t, t.Context(), strings.NewReader(""), nil, args...)
		want := "cannot connect to " + url + ": connection refused; is the server running, and are the host and port right?"
		if err == nil || err.Error() != want {
			t.Errorf("%v: %v; want %q", args, err, want)
		}
	}
}

// TestCallErrorPointsAtFlag pins issue 30 item 7: an unknown tool points
// at the listing, a missing roots capability at --root.
func TestCallErrorPointsAtFlag(t *testing.T) {
	url := startDemoServer(t, 0) + "/mcp"
	_, _, err := runCall(t, t.Context(), strings.NewReader(""), nil, url, "no_such_tool")
	if err == nil {
		t.Fatal("an unknown tool: no error")
	}
	testcmd.WantInOrder(t, err.Error(), "error -32602", `unknown tool "no_such_tool"`, "\n  mrtr call "+url+" lists the server's tools")
	_, _, err = runCall(t, t.Context(), strings.NewReader(""), nil, url, "--prompt", "no_such_prompt")
	if err == nil {
		t.Fatal("an unknown prompt: no error")
	}
	testcmd.WantInOrder(t, err.Error(), `unknown prompt "no_such_prompt"`, "\n  mrtr call "+url+" lists the server's prompts")
	_, _, err = runCall(t, t.Context(), strings.NewReader(""), nil, url, "test_input_required_result_list_roots")
	if err == nil {
		t.Fatal("roots asked without --root: no error")
	}
	testcmd.WantInOrder(t, err.Error(), "error -32021", `"requiredCapabilities":{"roots"`, "\n  the server needs roots: offer one with --root file:///path/to/dir")
}

// startStructuredServer serves tools whose structured content repeats
// their text (as server-filesystem's do), or adds to it.
func startStructuredServer(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "structured", Version: "1"}, nil)
	object := map[string]any{"type": "object"}
	listing := "[FILE] a.txt\n[DIR] src"
	s.AddTool(&mcp.Tool{Name: "repeats", InputSchema: object}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: listing}}, StructuredContent: map[string]any{"content": listing}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "adds", InputSchema: object}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: listing}},
			StructuredContent: map[string]any{"content": listing, "entries": 2}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "media", InputSchema: object}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		img := &mcp.ImageContent{MIMEType: "image/png", Data: []byte("png")}
		return &mcp.CallToolResult{Content: []mcp.Content{img},
			StructuredContent: map[string]any{"content": []any{map[string]any{"type": "image", "mimeType": "image/png", "data": "cG5n"}}}}, nil
	})
	srv := httptest.NewServer(gosdk.NewHTTPHandler(s, nil))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestCallStructuredOnce pins issue 30 item 8: structured content that
// repeats the text is not printed again; structured content that adds
// something is; --json prints the whole result.
func TestCallStructuredOnce(t *testing.T) {
	url := startStructuredServer(t)
	out, _, err := runCall(t, t.Context(), strings.NewReader(""), nil, url, "repeats")
	if err != nil || out != "[FILE] a.txt\n[DIR] src\n" {
		t.Errorf("repeats: %v, stdout %q; want the text once", err, out)
	}
	out, _, err = runCall(t, t.Context(), strings.NewReader(""), nil, url, "media")
	if err != nil || out != "[image image/png, 3 bytes]\n" {
		t.Errorf("media: %v, stdout %q; want the image's summary once, not its base64 again", err, out)
	}
	out, _, err = runCall(t, t.Context(), strings.NewReader(""), nil, url, "adds")
	if err != nil || !strings.HasPrefix(out, "[FILE] a.txt\n[DIR] src\n{") || !strings.Contains(out, `"entries": 2`) {
		t.Errorf("adds: %v, stdout %q; want the text, then the structured content", err, out)
	}
	out, _, err = runCall(t, t.Context(), strings.NewReader(""), nil, url, "repeats", "--json")
	var res struct {
		Content           []map[string]any `json:"content"`
		StructuredContent map[string]any   `json:"structuredContent"`
	}
	if err != nil || json.Unmarshal([]byte(out), &res) != nil || len(res.Content) != 1 || res.StructuredContent["content"] != "[FILE] a.txt\n[DIR] src" {
		t.Errorf("repeats --json: %v, stdout %q; want the result as JSON", err, out)
	}
}

// TestCallRootsNeverAsked pins issue 30 item 9: --root given to a server
// that never asks for roots says so once at the end; a server that asks
// (in a round, or by a 2025-11-25 request) hears no such note.
func TestCallRootsNeverAsked(t *testing.T) {
	url := startDemoServer(t, 0) + "/mcp"
	const note = "mrtr call: note: the server never asked for roots: --root did nothing in this call\n"
	for _, legacy := range []string{"--legacy=false", "--legacy"} {
		out, errOut, err := runCall(t, t.Context(), strings.NewReader(""), nil, url, "test_simple_text", "--root", "file:///src/a", legacy)
		if err != nil || out == "" || errOut != note {
			t.Errorf("%s, a tool that asks nothing: %v, stderr %q; want the note once", legacy, err, errOut)
		}
		out, errOut, err = runCall(t, t.Context(), strings.NewReader(""), nil, url, "test_input_required_result_list_roots", "--root", "file:///src/a", legacy)
		if err != nil || !strings.Contains(out, "file:///src/a") || strings.Contains(errOut, "note:") {
			t.Errorf("%s, a tool that asks for roots: %v, stdout %q, stderr %q; want no note", legacy, err, out, errOut)
		}
	}
	if _, errOut, _ := runCall(t, t.Context(), strings.NewReader(""), nil, url, "test_simple_text"); strings.Contains(errOut, "note:") {
		t.Errorf("no --root: stderr %q", errOut)
	}
}
