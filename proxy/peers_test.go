package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// legacyConfirmServer is a stateful go-sdk server spoken to in 2025-11-25:
// its tool "confirm" asks for input with an elicitation request in the
// middle of the call, the way the bridge turns into a sealed round.
func legacyConfirmServer(t *testing.T) string {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "legacy", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "confirm", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Sure?", RequestedSchema: &jsonschema.Schema{
				Type: "object", Properties: map[string]*jsonschema.Schema{"ok": {Type: "boolean"}},
			}})
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("confirmed %v", res.Content["ok"])}}}, nil, nil
		})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(up.Close)
	return up.URL + "/mcp"
}

// directory is a replica directory as Locate reads it: node -> URL.
type directory struct {
	mu    sync.Mutex
	nodes map[string]*url.URL
}

func (d *directory) set(node string, u *url.URL) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if u == nil {
		delete(d.nodes, node)
		return
	}
	d.nodes[node] = u
}

// locate is Peers.Locate for the replica self, as the command builds it.
func (d *directory) locate(self string) func(context.Context, string) (*url.URL, error) {
	return func(_ context.Context, state string) (*url.URL, error) {
		node, ok := bridge.HolderOf(state)
		if !ok || node == self {
			return nil, nil
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		u, ok := d.nodes[node]
		if !ok {
			return nil, proxy.ErrHolderGone
		}
		return u, nil
	}
}

// replica is one proxy of a pair: its URL and the forwarded requests that
// reached it.
type replica struct {
	url       string
	forwarded atomic.Int32
	auth      atomic.Value // string: the Authorization of the last forwarded request
	via       atomic.Value // string: the ForwardedHeader of the last forwarded request
}

// startReplicas runs two bridging proxies A and B before one legacy
// server, with one key ring and one single-use store, finding each other
// through dir.
func startReplicas(t *testing.T, popts *proxy.Peers) (a, b *replica, dir *directory) {
	t.Helper()
	upstream := legacyConfirmServer(t)
	ring := testRing(t)
	store := replay.NewMemory(nil)
	dir = &directory{nodes: map[string]*url.URL{}}
	start := func(node string) *replica {
		rep := &replica{}
		br := bridge.New(bridge.Options{Node: node, Dial: func(context.Context) (bridge.Upstream, error) {
			return bridge.NewHTTPSession(bridge.HTTPOptions{URL: upstream}), nil
		}})
		t.Cleanup(func() { br.Close(context.Background()) })
		codec := reqstate.New(ring, nil)
		peers := proxy.Peers{}
		if popts != nil {
			peers = *popts
		}
		peers.Guard = mrtr.New(codec, nil)
		peers.Locate = dir.locate(node)
		h, err := proxy.New(proxy.Options{
			Upstream:  "http://legacy.bridge/mcp",
			Transport: br,
			Guard:     mrtr.New(codec, &mrtr.Options{Store: store}),
			Peers:     &peers,
		})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(proxy.ForwardedHeader) != "" {
				rep.forwarded.Add(1)
				rep.auth.Store(r.Header.Get("Authorization"))
				rep.via.Store(r.Header.Get(proxy.ForwardedHeader))
			}
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		rep.url = srv.URL + "/mcp"
		u, _ := url.Parse(rep.url)
		dir.set(node, u)
		return rep
	}
	return start("A"), start("B"), dir
}

func okAnswer() map[string]any {
	return map[string]any{"action": "accept", "content": map[string]any{"ok": true}}
}

// pauseConfirm pauses the confirm tool on url and returns its token and
// its one input key.
func pauseConfirm(t *testing.T, url string) (state, key string) {
	t.Helper()
	r := post(t, url, callReq{name: "confirm", args: map[string]any{}})
	if r.resultType() != "input_required" || r.state() == "" {
		t.Fatalf("first call: %s", r.raw)
	}
	var irs map[string]any
	if err := json.Unmarshal(r.result["inputRequests"], &irs); err != nil || len(irs) != 1 {
		t.Fatalf("inputRequests %s", r.result["inputRequests"])
	}
	for k := range irs {
		key = k
	}
	return r.state(), key
}

func resumeConfirm(t *testing.T, url, state, key string, header http.Header) reply {
	t.Helper()
	return post(t, url, callReq{name: "confirm", args: map[string]any{}, state: ptr(state), responses: map[string]any{key: okAnswer()}, header: header})
}

func wantGone(t *testing.T, r reply) {
	t.Helper()
	if r.err == nil || r.err.Code != -32603 || !strings.Contains(r.err.Message, "start the call over") {
		t.Fatalf("want -32603 telling to start the call over, got %s", r.raw)
	}
}

// TestResumeForwardedToHolder: a resume that reaches the replica not
// holding its call completes on the holder; the same token again is
// refused replayed on either replica.
func TestResumeForwardedToHolder(t *testing.T) {
	a, b, _ := startReplicas(t, nil)
	st, k := pauseConfirm(t, a.url)
	done := resumeConfirm(t, b.url, st, k, nil)
	if done.err != nil || done.text() != "confirmed true" {
		t.Fatalf("resume on B: %s", done.raw)
	}
	if n := a.forwarded.Load(); n != 1 {
		t.Fatalf("%d forwarded requests reached A, want 1", n)
	}
	wantReject(t, resumeConfirm(t, a.url, st, k, nil), "replayed")
	wantReject(t, resumeConfirm(t, b.url, st, k, nil), "replayed")
	if n := b.forwarded.Load(); n != 0 {
		t.Fatalf("%d forwarded requests reached B, want 0", n)
	}
}

// TestForwardedWithAuthorization: the holder gets the client's
// Authorization with the forwarded resume: it must check the caller
// again, and an upstream behind it may need the credential.
func TestForwardedWithAuthorization(t *testing.T) {
	a, b, _ := startReplicas(t, nil)
	st, k := pauseConfirm(t, a.url)
	done := resumeConfirm(t, b.url, st, k, http.Header{"Authorization": {"Bearer alice-token"}})
	if done.err != nil || done.text() != "confirmed true" {
		t.Fatalf("resume on B: %s", done.raw)
	}
	if got, _ := a.auth.Load().(string); a.forwarded.Load() != 1 || got != "Bearer alice-token" {
		t.Fatalf("the holder got %d forwarded requests, the last with Authorization %q; want 1, with the client's", a.forwarded.Load(), got)
	}
}

// TestTamperedNotForwarded: a token that does not open is refused by the
// replica it reaches, which forwards nothing.
func TestTamperedNotForwarded(t *testing.T) {
	a, b, _ := startReplicas(t, nil)
	st, k := pauseConfirm(t, a.url)
	i := len(st) - 5
	flipped := st[:i] + string(rune('A'+(st[i]-'A'+1)%26)) + st[i+1:]
	if st[i] < 'A' || st[i] > 'Z' {
		flipped = st[:i] + map[bool]string{true: "a", false: "b"}[st[i] != 'a'] + st[i+1:]
	}
	wantReject(t, resumeConfirm(t, b.url, flipped, k, nil), "invalid")
	// Another caller's arguments: refused there too.
	moved := post(t, b.url, callReq{name: "confirm", args: map[string]any{"x": 1}, state: ptr(st), responses: map[string]any{k: okAnswer()}})
	wantReject(t, moved, "arguments_changed")
	if n := a.forwarded.Load(); n != 0 {
		t.Fatalf("%d refused requests were forwarded to A", n)
	}
	// The token itself is still good on its holder.
	if done := resumeConfirm(t, b.url, st, k, nil); done.text() != "confirmed true" {
		t.Fatalf("resume: %s", done.raw)
	}
}

// TestHolderGone: a holder missing from the directory, or one that
// cannot be reached, is a -32603 telling the client to start over; the
// token is not spent on the replica that answered.
func TestHolderGone(t *testing.T) {
	a, b, dir := startReplicas(t, nil)
	st, k := pauseConfirm(t, a.url)
	dir.set("A", nil)
	wantGone(t, resumeConfirm(t, b.url, st, k, nil))
	// A listener that was closed: connection refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead, _ := url.Parse("http://" + ln.Addr().String() + "/mcp")
	ln.Close()
	dir.set("A", dead)
	wantGone(t, resumeConfirm(t, b.url, st, k, nil))
	if n := a.forwarded.Load(); n != 0 {
		t.Fatalf("%d requests reached A", n)
	}
	// Nothing was reserved: the holder, back in the directory, completes it.
	u, _ := url.Parse(a.url)
	dir.set("A", u)
	if done := resumeConfirm(t, b.url, st, k, nil); done.text() != "confirmed true" {
		t.Fatalf("resume once A is back: %s", done.raw)
	}
}

// TestForwardedOnce: a request marked as forwarded is served where it
// arrives, never forwarded again (a stale directory cannot loop): the
// replica not holding the call answers that it is gone.
func TestForwardedOnce(t *testing.T) {
	a, b, _ := startReplicas(t, nil)
	st, k := pauseConfirm(t, a.url)
	wantGone(t, resumeConfirm(t, b.url, st, k, http.Header{proxy.ForwardedHeader: {"1"}}))
	if n := a.forwarded.Load(); n != 0 {
		t.Fatalf("a forwarded request was forwarded again (%d reached A)", n)
	}
}

// TestFrozenHolder: a holder that accepts the forwarded resume but never
// answers (frozen: the kernel still accepts its connections) ends the
// resume with an error once the directory drops it, instead of a hang.
func TestFrozenHolder(t *testing.T) {
	arrived := make(chan struct{}, 1)
	frozen := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // then the server notices the client hanging up
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	t.Cleanup(frozen.Close)
	a, b, dir := startReplicas(t, &proxy.Peers{CheckEvery: time.Millisecond})
	st, k := pauseConfirm(t, a.url)
	u, _ := url.Parse(frozen.URL + "/mcp")
	dir.set("A", u) // A as a frozen process looks from outside
	got := make(chan reply, 1)
	go func() { got <- resumeConfirm(t, b.url, st, k, nil) }()
	select {
	case <-arrived:
	case r := <-got:
		t.Fatalf("answered without reaching the holder: %s", r.raw)
	}
	dir.set("A", nil) // its entry expired
	wantGone(t, <-got)
}

// TestPeersNodeAndGone (issue 39, item 4): a forwarded resume names the
// forwarding replica (Peers.Node) in its ForwardedHeader, or "1" for a
// node that is not a plain word; Peers.Gone is told, with the request's
// context, of each resume answered "start over" because its holder is
// gone (missing from the directory, or unreachable), and of no other.
func TestPeersNodeAndGone(t *testing.T) {
	var gone atomic.Int32
	a, b, dir := startReplicas(t, &proxy.Peers{Node: "replica-1", Gone: func(ctx context.Context) {
		if ctx.Err() == nil { // the request's own, still live
			gone.Add(1)
		}
	}})
	st, k := pauseConfirm(t, a.url)
	dir.set("A", nil)
	wantGone(t, resumeConfirm(t, b.url, st, k, nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead, _ := url.Parse("http://" + ln.Addr().String() + "/mcp")
	ln.Close()
	dir.set("A", dead)
	wantGone(t, resumeConfirm(t, b.url, st, k, nil))
	if n := gone.Load(); n != 2 {
		t.Fatalf("Gone called %d times for two resumes whose holder is gone, want 2", n)
	}
	u, _ := url.Parse(a.url)
	dir.set("A", u)
	if done := resumeConfirm(t, b.url, st, k, nil); done.text() != "confirmed true" {
		t.Fatalf("resume once A is back: %s", done.raw)
	}
	if n := gone.Load(); n != 2 {
		t.Fatalf("Gone called for a resume its holder served (%d calls)", n)
	}
	if via, _ := a.via.Load().(string); via != "replica-1" {
		t.Fatalf("the holder got %s: %q, want the forwarding replica's node", proxy.ForwardedHeader, via)
	}

	a, b, _ = startReplicas(t, &proxy.Peers{Node: "not a node"})
	st, k = pauseConfirm(t, a.url)
	if done := resumeConfirm(t, b.url, st, k, nil); done.text() != "confirmed true" {
		t.Fatalf("resume: %s", done.raw)
	}
	if via, _ := a.via.Load().(string); via != "1" {
		t.Fatalf("with Node %q the holder got %s: %q, want 1", "not a node", proxy.ForwardedHeader, via)
	}
}
