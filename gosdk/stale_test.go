package gosdk_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/gosdk"
	"github.com/mrtr-go/mrtr/internal/testing/adaptertest"
	"github.com/mrtr-go/mrtr/reqstate"
)

type noteV1 struct {
	Note string `json:"note"`
}

type noteV2 struct {
	Note int `json:"note"`
}

// serveNote serves tool "note" whose continuation is of type C, sealed by
// guard, and returns the server's URL.
func serveNote[C any](t *testing.T, guard *mrtr.Guard, logs *adaptertest.SyncBuffer, first C) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "note", Version: "1"}, nil)
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a := gosdk.Install(s, guard, &gosdk.Options{Logger: log})
	gosdk.AddTool(a, &mcp.Tool{Name: "note"},
		func(ctx context.Context, req *mcp.CallToolRequest, args struct{}, flow *gosdk.ToolFlow[C]) (*mcp.CallToolResult, error) {
			if _, ok := flow.State(); ok {
				return text("resumed"), nil
			}
			return flow.Ask(first, confirmRequest("go on?"))
		})
	srv := httptest.NewServer(gosdk.NewHTTPHandler(s, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestStaleContinuationNeverReachesTheClient pins issue 9 item 4: a
// continuation sealed as one type and resumed by a handler expecting an
// incompatible one gives the client a fixed message; neither the result
// nor the log holds the sealed value, and the log names the Go type.
func TestStaleContinuationNeverReachesTheClient(t *testing.T) {
	const secret = "TOPSECRET-sealed-continuation-value"
	ring, err := reqstate.GenerateKeyRing("k", nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := new(adaptertest.SyncBuffer)
	guard := mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	oldURL := serveNote(t, guard, logs, noteV1{Note: secret})
	newURL := serveNote(t, guard, logs, noteV2{Note: 1}) // the same tool after a deploy changed its type

	old := connect(t, &env{url: oldURL}, clientOpts{manual: true})
	res, err := old.CallTool(t.Context(), &mcp.CallToolParams{Name: "note", Arguments: map[string]any{}})
	if err != nil || res.RequestState == "" {
		t.Fatalf("pause: %v %+v", err, res)
	}
	cs := connect(t, &env{url: newURL}, clientOpts{manual: true})
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "note", Arguments: map[string]any{},
		RequestState: res.RequestState, InputResponses: accept(map[string]any{"approve": true})})
	if err != nil {
		t.Fatal(err)
	}
	got := resultText(t, res)
	if !res.IsError || got != gosdk.ErrStaleContinuation.Error() {
		t.Fatalf("result isError=%v text %q, want the fixed message %q", res.IsError, got, gosdk.ErrStaleContinuation)
	}
	if strings.Contains(got, secret) || strings.Contains(got, "TOPSECRET") {
		t.Fatalf("the sealed value reached the client: %q", got)
	}
	if strings.Contains(logs.String(), "TOPSECRET") {
		t.Fatalf("the sealed value reached the log: %s", logs.String())
	}
	if !strings.Contains(logs.String(), "gosdk_test.noteV2") {
		t.Fatalf("the log does not name the Go type: %s", logs.String())
	}

	// The library's own error names the type only, too.
	f, err := guard.Begin(t.Context(), &mrtr.Request{Method: "tools/call", ProtocolVersion: "2026-07-28", Target: "t", Arguments: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := f.Pause(noteV1{Note: secret}, "confirm")
	if err != nil {
		t.Fatal(err)
	}
	f.End(t.Context(), nil)
	f, err = guard.Begin(t.Context(), &mrtr.Request{Method: "tools/call", ProtocolVersion: "2026-07-28", Target: "t", Arguments: []byte(`{}`),
		RequestState: tok, InputResponses: map[string]any{"confirm": map[string]any{"action": "accept"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.End(t.Context(), nil)
	var v noteV2
	if err := f.Continuation(&v); err == nil || strings.Contains(err.Error(), "TOPSECRET") || !strings.Contains(err.Error(), "noteV2") {
		t.Fatalf("Continuation error: %v", err)
	}
}
