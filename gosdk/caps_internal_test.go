package gosdk

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fast reading of _meta capabilities agrees with go-sdk's decoding.
func TestCapSetFromJSONMatchesSDK(t *testing.T) {
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
		if got, want := capSetFromJSON(m), capSetOf(&c); got != want {
			t.Errorf("%s: fast %+v, go-sdk %+v", in, got, want)
		}
	}
	// Presence declares a capability: an empty roots object counts (plain
	// json.Unmarshal into mcp.ClientCapabilities would miss it).
	if !capSetFromJSON(map[string]any{"roots": map[string]any{}}).roots {
		t.Error("roots:{} not read as declared")
	}
	if capSetOf(nil) != (capSet{}) {
		t.Error("nil capabilities declare something")
	}
}

func TestRequiredCapability(t *testing.T) {
	all := capSet{elicitForm: true, elicitURL: true, sampling: true, samplingTools: true, roots: true}
	for _, tc := range []struct {
		caps capSet
		req  mcp.InputRequest
		want string
	}{
		{capSet{}, &mcp.ElicitParams{Message: "x"}, "elicitation.form"},
		{capSet{elicitURL: true}, &mcp.ElicitParams{Message: "x"}, "elicitation.form"},
		{capSet{elicitForm: true}, &mcp.ElicitParams{Mode: "url", URL: "https://x"}, "elicitation.url"},
		{capSet{elicitForm: true}, &mcp.ElicitParams{URL: "https://x"}, "elicitation.url"},
		{capSet{}, &mcp.CreateMessageParams{}, "sampling"},
		{capSet{sampling: true}, &mcp.CreateMessageWithToolsParams{Tools: []*mcp.Tool{{Name: "t"}}}, "sampling.tools"},
		{capSet{sampling: true}, &mcp.CreateMessageWithToolsParams{}, ""},
		{capSet{}, &mcp.ListRootsParams{}, "roots"},
		{all, &mcp.ElicitParams{Mode: "url", URL: "https://x"}, ""},
		{all, &mcp.ListRootsParams{}, ""},
	} {
		if got := requiredCapability(tc.caps, tc.req); got != tc.want {
			t.Errorf("%+v %T: %q, want %q", tc.caps, tc.req, got, tc.want)
		}
	}
	err := missingCapabilities(capSet{}, mcp.InputRequestMap{"a": &mcp.ElicitParams{}, "b": &mcp.CreateMessageParams{}})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != CodeMissingCapability ||
		string(je.Data) != `{"requiredCapabilities":{"elicitation":{"form":{}},"sampling":{}}}` {
		t.Fatalf("missing: %v", err)
	}
}
