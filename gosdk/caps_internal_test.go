package gosdk

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr/internal/adapt"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// The fast reading of _meta capabilities agrees with go-sdk's decoding.
func TestCapsFromValueMatchesSDK(t *testing.T) {
	for _, in := range []string{
		`{}`,
		`{"elicitation":{}}`,
		`{"elicitation":{"form":{}}}`,
		`{"elicitation":{"url":{}}}`,
		`{"elicitation":{"form":{},"url":{}}}`,
		`{"sampling":{}}`,
		`{"sampling":{"tools":{}}}`,
		`{"roots":{"listChanged":true}}`,
		`{"sampling":{},"elicitation":{},"roots":{"listChanged":true}}`,
		`{"experimental":{"x":{}}}`,
	} {
		var m map[string]any
		if err := json.Unmarshal([]byte(in), &m); err != nil {
			t.Fatal(err)
		}
		var c mcp.ClientCapabilities
		if err := json.Unmarshal([]byte(in), &c); err != nil {
			t.Fatal(err)
		}
		if got, want := mcpwire.CapsFromValue(m), capsOf(&c); got != want {
			t.Errorf("%s: fast %+v, go-sdk %+v", in, got, want)
		}
	}
	// Presence declares a capability: an empty roots object counts (plain
	// json.Unmarshal into mcp.ClientCapabilities would miss it).
	if !mcpwire.CapsFromValue(map[string]any{"roots": map[string]any{}}).Roots {
		t.Error("roots:{} not read as declared")
	}
	if capsOf(nil) != (mcpwire.Caps{}) {
		t.Error("nil capabilities declare something")
	}
}

func TestRequiredCapability(t *testing.T) {
	all := mcpwire.Caps{ElicitForm: true, ElicitURL: true, Sampling: true, SamplingTools: true, Roots: true}
	for _, tc := range []struct {
		caps mcpwire.Caps
		req  mcp.InputRequest
		want string
	}{
		{mcpwire.Caps{}, &mcp.ElicitParams{Message: "x"}, "elicitation.form"},
		{mcpwire.Caps{ElicitURL: true}, &mcp.ElicitParams{Message: "x"}, "elicitation.form"},
		{mcpwire.Caps{ElicitForm: true}, &mcp.ElicitParams{Mode: "url", URL: "https://x"}, "elicitation.url"},
		{mcpwire.Caps{ElicitForm: true}, &mcp.ElicitParams{URL: "https://x"}, "elicitation.url"},
		{mcpwire.Caps{}, &mcp.CreateMessageParams{}, "sampling"},
		{mcpwire.Caps{Sampling: true}, &mcp.CreateMessageWithToolsParams{Tools: []*mcp.Tool{{Name: "t"}}}, "sampling.tools"},
		{mcpwire.Caps{Sampling: true}, &mcp.CreateMessageWithToolsParams{}, ""},
		{mcpwire.Caps{}, &mcp.ListRootsParams{}, "roots"},
		{all, &mcp.ElicitParams{Mode: "url", URL: "https://x"}, ""},
		{all, &mcp.ListRootsParams{}, ""},
	} {
		if got := tc.caps.Lacks(needOf(tc.req)); got != tc.want {
			t.Errorf("%+v %T: %q, want %q", tc.caps, tc.req, got, tc.want)
		}
	}
	err := wireError(adapt.Gate(mcpwire.Caps{}, needsOf(mcp.InputRequestMap{"a": &mcp.ElicitParams{}, "b": &mcp.CreateMessageParams{}})))
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != CodeMissingCapability ||
		string(je.Data) != `{"requiredCapabilities":{"elicitation":{"form":{}},"sampling":{}}}` {
		t.Fatalf("missing: %v", err)
	}
}

// The wire contract's codes (internal/mcpwire/codes.go) are go-sdk's.
func TestWireCodesMatchSDK(t *testing.T) {
	if mcpwire.CodeMissingCapability != mcp.CodeMissingRequiredClientCapabilities || mcpwire.CodeHeaderMismatch != mcp.CodeHeaderMismatch ||
		mcpwire.CodeInvalidParams != jsonrpc.CodeInvalidParams || mcpwire.CodeInternalError != jsonrpc.CodeInternalError {
		t.Fatal("the wire contract's codes disagree with go-sdk's")
	}
}
