package bridge

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestParamHeaders: the SEP-2243 value rules for Mcp-Param-* headers,
// nested annotations included.
func TestParamHeaders(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{
		"name":{"type":"string","x-mcp-header":"Name"},
		"flag":{"type":"boolean","x-mcp-header":"Flag"},
		"opts":{"type":"object","properties":{"n":{"type":"integer","x-mcp-header":"N"}}}}}`)
	cases := []struct {
		name   string
		args   string
		header map[string][]string
		ok     bool
	}{
		{"none needed", `{}`, nil, true},
		{"null needs none", `{"name":null}`, nil, true},
		{"plain", `{"name":"a b"}`, map[string][]string{"Name": {"a b"}}, true},
		{"sentinel", `{"name":"héllo"}`, map[string][]string{"Name": {"=?base64?aMOpbGxv?="}}, true},
		{"sentinel without padding", `{"name":"Hello"}`, map[string][]string{"Name": {"=?base64?SGVsbG8?="}}, false},
		{"sentinel not base64", `{"name":"Hello"}`, map[string][]string{"Name": {"=?base64?SGVs!!!bG8=?="}}, false},
		{"missing", `{"name":"a"}`, nil, false},
		{"twice", `{"name":"a"}`, map[string][]string{"Name": {"a", "a"}}, false},
		{"for an absent argument", `{}`, map[string][]string{"Name": {"a"}}, false},
		{"boolean", `{"flag":true}`, map[string][]string{"Flag": {"true"}}, true},
		{"boolean other", `{"flag":true}`, map[string][]string{"Flag": {"1"}}, false},
		{"nested integer", `{"opts":{"n":7}}`, map[string][]string{"N": {"7"}}, true},
		{"nested integer other", `{"opts":{"n":7}}`, map[string][]string{"N": {"8"}}, false},
		{"not an integer", `{"opts":{"n":7.5}}`, map[string][]string{"N": {"7.5"}}, false},
		{"beyond the safe range", `{"opts":{"n":9007199254740993}}`, map[string][]string{"N": {"9007199254740993"}}, false},
		{"an object value", `{"name":{"a":1}}`, map[string][]string{"Name": {"[object Object]"}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			for k, vs := range c.header {
				for _, v := range vs {
					h.Add("Mcp-Param-"+k, v)
				}
			}
			why := paramHeaders(h, json.RawMessage(c.args), schema)
			if (why == "") != c.ok {
				t.Fatalf("paramHeaders = %q, want ok=%v", why, c.ok)
			}
		})
	}
}
