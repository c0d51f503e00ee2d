package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// rawConn dials the server of an /mcp URL.
func rawConn(t *testing.T, mcpURL string) (net.Conn, string) {
	t.Helper()
	u, err := url.Parse(mcpURL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, u.Host
}

// TestServeSlowBody pins issue 9 item 3: a client that sends 1 of 170
// body bytes and stalls is disconnected after --read-timeout instead of
// holding its connection forever, and the server keeps serving.
func TestServeSlowBody(t *testing.T) {
	mcpURL, _ := startServe(t, "--read-timeout", "500ms")
	c, host := rawConn(t, mcpURL)
	if _, err := io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: "+host+"\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: 170\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	// Generous bound: without a read timeout the server never lets go and
	// this read fails with the client's own timeout.
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := io.ReadAll(c) // an error response, if any, then EOF
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the server still holds a stalled request body")
		}
		// A reset is a close too.
	}
	resp, err := http.Post(mcpURL, "application/json", strings.NewReader(`{`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// TestServeReadTimeoutSparesStreams: --read-timeout bounds reading the
// request, not the response: a 2025-11-25 event stream (GET) stays open
// well past it.
func TestServeReadTimeoutSparesStreams(t *testing.T) {
	mcpURL, _ := startServe(t, "--read-timeout", "500ms")
	id := initLegacy(t, mcpURL)
	c, host := rawConn(t, mcpURL)
	io.WriteString(c, "GET /mcp HTTP/1.1\r\nHost: "+host+"\r\nAccept: text/event-stream\r\nMcp-Session-Id: "+id+"\r\nMcp-Protocol-Version: 2025-11-25\r\n\r\n")
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	sresp, err := http.ReadResponse(br, nil)
	if err != nil || sresp.StatusCode != 200 {
		t.Fatalf("GET stream: %v %v", sresp, err)
	}
	// Three read timeouts later the stream must still be open: a read
	// times out on our side rather than ending.
	c.SetReadDeadline(time.Now().Add(1500 * time.Millisecond))
	_, err = io.Copy(io.Discard, sresp.Body)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("the event stream ended after the read timeout: %v", err)
	}
}

// TestServeMaxConns pins the connection cap of item 3: with --max-conns
// 2, a third connection is not served until one of the two closes.
func TestServeMaxConns(t *testing.T) {
	mcpURL, _ := startServe(t, "--max-conns", "2")
	get := func(c net.Conn, host string) {
		io.WriteString(c, "GET /nothing HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
	}
	var conns []net.Conn
	var readers []*bufio.Reader
	for range 2 {
		c, host := rawConn(t, mcpURL)
		get(c, host)
		br := bufio.NewReader(c)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		conns, readers = append(conns, c), append(readers, br)
	}
	third, host := rawConn(t, mcpURL)
	get(third, host)
	tr := bufio.NewReader(third)
	third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := http.ReadResponse(tr, nil); err == nil {
		t.Fatal("a third connection was served with --max-conns 2")
	}
	// The two held connections still work.
	get(conns[1], host)
	conns[1].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := http.ReadResponse(readers[1], nil); err != nil {
		t.Fatalf("held connection: %v", err)
	}
	conns[0].Close()
	third.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(tr, nil)
	if err != nil {
		t.Fatalf("third connection after a close: %v", err)
	}
	resp.Body.Close()
}

// TestServeAllowedHosts pins issue 9 item 13: on a loopback bind,
// --allowed-hosts lets Host: mcp.internal through (it was refused by
// go-sdk's own check), another host still gets 403.
func TestServeAllowedHosts(t *testing.T) {
	mcpURL, _ := startServe(t, "--allowed-hosts", "mcp.internal")
	for _, tc := range []struct {
		host string
		want int
	}{
		{"mcp.internal", 200},
		{"evil.example.com", 403},
		{"", 200}, // the URL's own 127.0.0.1:port
	} {
		req, _ := http.NewRequest("POST", mcpURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`))
		if tc.host != "" {
			req.Host = tc.host
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/list")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Host %q: HTTP %d, want %d (%.200s)", tc.host, resp.StatusCode, tc.want, body)
		}
	}
}

// TestServeMaxSessions: --max-sessions reaches the handler: the third
// 2025-11-25 initialize is refused with 503 and a clear message.
func TestServeMaxSessions(t *testing.T) {
	mcpURL, logs := startServe(t, "--max-sessions", "2", "--session-timeout", "1h")
	codes := make([]int, 3)
	var body string
	for i := range codes {
		req, _ := http.NewRequest("POST", mcpURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		codes[i], body = resp.StatusCode, string(b)
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 503 || !strings.Contains(body, "too many open sessions") {
		t.Fatalf("initialize codes %v, last body %q", codes, body)
	}
	if !strings.Contains(logs.String(), `"session_timeout":3600000000000`) {
		t.Fatalf("--session-timeout not applied: %s", logs.String())
	}
}
