package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
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

// FuzzH1: the proxy's own HTTP/1.1 transport writes a header field it
// accepts so that the upstream reads back exactly that field and no other
// (no injected field, no split request), and an upstream's reply, however
// malformed, never panics it and never leaves a connection idle that a
// broken reply may have desynchronised.
func FuzzH1(f *testing.F) {
	f.Add("X-Test", "value", []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	f.Add("X-Test", "a\r\nX-Injected: 1", []byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"))
	f.Add("Bad Name", "v", []byte("HTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"))
	f.Add("X-Test", "\t tab", []byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nok"))
	f.Add("X-Test", "v", []byte("HTTP/1.0 200 OK\r\n\r\nuntil close"))
	f.Fuzz(func(t *testing.T, name, value string, reply []byte) {
		if len(reply) > 4096 {
			return
		}
		var got *http.Request
		h1 := newH1Transport("upstream.test", nil, func(ctx context.Context, _, _ string) (net.Conn, error) {
			client, server := net.Pipe()
			go func() {
				defer server.Close()
				r, err := http.ReadRequest(bufio.NewReader(server))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, r.Body)
				got = r
				_, _ = server.Write(reply)
			}()
			return client, nil
		}, 1)
		defer h1.CloseIdleConnections()
		r, _ := http.NewRequest(http.MethodPost, "http://upstream.test/mcp", strings.NewReader("{}"))
		r.Header[name] = []string{value}
		resp, err := h1.RoundTrip(r)
		if err != nil {
			return
		}
		_, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got == nil {
			t.Fatalf("a response came without the request being read")
		}
		switch name {
		case "Host", "Content-Length", "Transfer-Encoding", "Trailer", "Connection":
			return // fields the transport writes itself
		}
		if vs := got.Header.Values(name); http.CanonicalHeaderKey(name) == name && (len(vs) != 1 || vs[0] != strings.Trim(value, " \t")) {
			t.Fatalf("sent %q: %q, the upstream read %q", name, value, vs)
		}
		for k := range got.Header {
			if k != http.CanonicalHeaderKey(name) && k != "Content-Length" {
				t.Fatalf("the upstream read a field never sent: %q (sent %q: %q)", k, name, value)
			}
		}
		if rerr != nil && len(h1.idle) > 0 {
			t.Fatalf("a connection whose reply failed (%v) waits for the next request", rerr)
		}
	})
}
