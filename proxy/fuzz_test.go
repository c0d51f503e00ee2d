package proxy

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzParseRequest: the client's untrusted body never panics the parser,
// and whatever it accepts re-encodes to JSON that parses to the same
// envelope (the upstream receives only what the proxy judged).
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","requestState":"x","inputResponses":{"k":{}}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"resources/read","params":{"uri":"test://x"}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`,
		`[{}]`, `null`, `{"id":null}`, ` {"Method":"tools/call"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseRequest(b)
		if err != nil {
			return
		}
		out, err := r.msg.Encode()
		if err != nil {
			t.Fatalf("encode an accepted message: %v", err)
		}
		if !json.Valid(out) {
			t.Fatalf("re-encoded message is not JSON: %q", out)
		}
		r2, err := parseRequest(out)
		if err != nil {
			t.Fatalf("re-encoded message does not parse: %v", err)
		}
		if r2.method != r.method || !bytes.Equal(r2.id, r.id) {
			t.Fatalf("envelope changed: %q/%s -> %q/%s", r.method, r.id, r2.method, r2.id)
		}
		if r.params != nil {
			r.target()
			if _, err := r.params.Encode(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// FuzzParseResponse: the upstream's untrusted final message never panics.
func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","requestState":"s","inputRequests":{"a":{"method":"roots/list"}}}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}`,
		`{"jsonrpc":"2.0","id":1,"result":[]}`,
		`{"jsonrpc":"2.0","method":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseResponse(b, nil)
		if err != nil {
			return
		}
		if r.inputRequired() && r.result == nil {
			t.Fatal("input_required without a result")
		}
	})
}
