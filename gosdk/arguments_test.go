package gosdk_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/gosdk"
	"github.com/mrtr-go/mrtr/reqstate"
)

// TestInexactNumberIsInvalidParams pins issue 9, item 6 on the wire: a
// call whose arguments hold a number with more precision than a double
// (an int64 id beyond 2^53, which RFC 8785 would hash as a neighbour) gets
// JSON-RPC -32602 with a message naming the rule, not the value and not
// "invalid requestState": on a first call when the handler pauses, and on
// a resume.
func TestInexactNumberIsInvalidParams(t *testing.T) {
	ring, err := reqstate.GenerateKeyRing("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "numbers", Version: "1"}, nil)
	a := gosdk.Install(s, mrtr.New(reqstate.New(ring, nil), nil), nil)
	var raw atomic.Value
	type args struct {
		ID int64 `json:"id"`
	}
	gosdk.AddTool(a, &mcp.Tool{Name: "delete"},
		func(ctx context.Context, req *mcp.CallToolRequest, in args, flow *gosdk.ToolFlow[string]) (*mcp.CallToolResult, error) {
			raw.Store(string(req.Params.Arguments))
			if _, resumed := flow.State(); resumed {
				return text("deleted"), nil
			}
			return flow.Ask("asked", confirmRequest("delete?"))
		})
	srv := httptest.NewServer(gosdk.NewHTTPHandler(s, nil))
	t.Cleanup(srv.Close)
	call := func(id string, extra map[string]any) map[string]any {
		params := map[string]any{"name": "delete", "arguments": json.RawMessage(`{"id":` + id + `}`)}
		for k, v := range extra {
			params[k] = v
		}
		_, out := postRaw(t, srv.URL, "tools/call", "delete", params)
		return out
	}
	wantInvalidParams := func(what string, out map[string]any) {
		t.Helper()
		e, _ := out["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if e == nil || e["code"] != float64(mrtr.CodeInvalidParams) || !strings.Contains(msg, "more precision than an IEEE 754 double") ||
			strings.Contains(msg, "123456789") || msg == mrtr.RejectMessage {
			t.Fatalf("%s: %v, want -32602 naming the rule", what, out)
		}
	}

	// First call: the handler saw the id exactly in its raw arguments (a
	// second value behind the hash of its neighbour), and its pause is refused.
	wantInvalidParams("first call", call("1234567890123456789", nil))
	if got := raw.Load(); got != `{"id":1234567890123456789}` {
		t.Fatalf("raw arguments %v", got)
	}

	// The neighbour that RFC 8785 writes as it is pauses normally ...
	out := call("1234567890123456800", nil)
	res, _ := out["result"].(map[string]any)
	tok, _ := res["requestState"].(string)
	if tok == "" {
		t.Fatalf("1234567890123456800 did not pause: %v", out)
	}
	// ... and its token, resumed with the other id, is refused the same way.
	answers := map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}
	wantInvalidParams("resume", call("1234567890123456789", map[string]any{"requestState": tok, "inputResponses": answers}))
	out = call("1234567890123456800", map[string]any{"requestState": tok, "inputResponses": answers})
	if res, _ := out["result"].(map[string]any); res == nil || !strings.Contains(string(must(json.Marshal(res))), "deleted") {
		t.Fatalf("resume with the sealed id: %v", out)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
