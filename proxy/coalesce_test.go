package proxy

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/reqstate"
)

// countListener counts the writes the server makes on its connections.
type countListener struct {
	net.Listener
	writes *atomic.Int32
}

func (l countListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countConn{c, l.writes}, nil
}

type countConn struct {
	net.Conn
	writes *atomic.Int32
}

func (c countConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

const (
	pauseEvent  = `{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"ok?","requestedSchema":{"type":"object","properties":{}}}}},"requestState":"up-1"}}`
	noticeEvent = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`
	callBody    = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`
)

// sseUpstream answers every call with an event stream, as go-sdk writes
// one (each event written and flushed); before is called before the
// final event with a function that sends an event.
func sseUpstream(t *testing.T, before func(send func(data string))) string {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		id := `1`
		if m, err := mcpwire.ParseObject(b); err == nil {
			id = string(m["id"])
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush() // go-sdk sends its header at once
		send := func(data string) {
			_, _ = io.WriteString(w, "event: message\ndata: "+data+"\n\n")
			w.(http.Flusher).Flush()
		}
		if before != nil {
			before(send)
		}
		send(strings.Replace(pauseEvent, `"id":1`, `"id":`+id, 1)) // the id it was sent
	}))
	t.Cleanup(up.Close)
	return up.URL
}

func coalesceProxy(t *testing.T, upstream string, delay time.Duration) (string, *atomic.Int32) {
	ring, err := reqstate.GenerateKeyRing("k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{Upstream: upstream, Guard: mrtr.New(reqstate.New(ring, nil), nil), UpstreamTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	h.flushDelay = delay
	writes := new(atomic.Int32)
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = countListener{srv.Listener, writes}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL, writes
}

func post(t *testing.T, ctx context.Context, url string) *http.Response {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(callBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// A short call's event stream (one event, the response) leaves the proxy
// in one write: header, sealed event and the stream's end together, not
// the header flushed alone, then the event, then the end.
func TestSSECoalesced(t *testing.T) {
	url, writes := coalesceProxy(t, sseUpstream(t, nil), time.Hour)
	resp := post(t, t.Context(), url)
	b, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Contains(b, []byte(`"requestState":"v1.k1.`)) {
		t.Fatalf("sealed event: %q, %v", b, err)
	}
	if n := writes.Load(); n != 1 {
		t.Fatalf("%d writes for one short event stream, want 1", n)
	}
}

// An event before the response is flushed at once, with the header, even
// when the flush delay never ends: the client sees it while the call
// still runs.
func TestSSEEarlyEventFlushed(t *testing.T) {
	seen := make(chan struct{})
	url, _ := coalesceProxy(t, sseUpstream(t, func(send func(string)) {
		send(noticeEvent)
		<-seen // the final event waits until the client read the first
	}), time.Hour)
	resp := post(t, t.Context(), url)
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before the notification: %v", err)
		}
		if strings.Contains(line, "notifications/progress") {
			break
		}
	}
	close(seen)
	rest, _ := io.ReadAll(br)
	if !bytes.Contains(rest, []byte(`"requestState":"v1.k1.`)) {
		t.Fatalf("final event after the notification: %q", rest)
	}
}

// A call that runs long shows its header within the flush delay, before
// any event: the client is not left without an answer.
func TestSSEHeaderFlushedWhenSlow(t *testing.T) {
	release := make(chan struct{})
	url, _ := coalesceProxy(t, sseUpstream(t, func(func(string)) { <-release }), time.Millisecond)
	resp := post(t, t.Context(), url) // returns once the header arrived
	close(release)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	if b, _ := io.ReadAll(resp.Body); !bytes.Contains(b, []byte(`"requestState":"v1.k1.`)) {
		t.Fatalf("final event: %q", b)
	}
}

// A pausable call reaches the upstream in one write, headers and body
// together: an *http.Transport flushes the headers of a body it does not
// know to be in memory on their own first (net/http issue 22088), one more
// write and TCP segment per call.
func TestUpstreamRequestOneWrite(t *testing.T) {
	writes := new(atomic.Int32)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	dialer := &net.Dialer{}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countConn{c, writes}, nil
	}
	ring, err := reqstate.GenerateKeyRing("k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{Upstream: sseUpstream(t, nil), Guard: mrtr.New(reqstate.New(ring, nil), nil), Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	b, err := io.ReadAll(post(t, t.Context(), srv.URL).Body)
	if err != nil || !bytes.Contains(b, []byte(`"requestState":"v1.k1.`)) {
		t.Fatalf("sealed event: %q, %v", b, err)
	}
	if n := writes.Load(); n != 1 {
		t.Fatalf("the call went to the upstream in %d writes, want 1", n)
	}
}
