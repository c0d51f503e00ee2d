package proxy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/testing/fakeclock"
	"github.com/mrtr-go/mrtr/internal/testing/testredis"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/replay/redisstore"
	"github.com/mrtr-go/mrtr/reqstate"
)

// upStateJSON is upState as the upstream's encoder sends it.
func upStateJSON() string {
	b, _ := json.Marshal(upState)
	return string(b)
}

func testPauseResume(t *testing.T, tool string) {
	up := newUpstream(t)
	px := startProxy(t, up.url(), nil, nil, nil)
	r := post(t, px.URL, callReq{name: tool})
	if r.resultType() != "input_required" || r.state() == "" {
		t.Fatalf("first call: %s", r.raw)
	}
	if tool == "ask_sse" && !strings.HasPrefix(r.ctype, "text/event-stream") {
		t.Fatalf("content type %q, want the upstream's event stream", r.ctype)
	}
	tok := r.state()
	if tok == upState || strings.Contains(tok, "state") {
		t.Fatalf("the client saw the upstream's state: %q", tok)
	}
	if !bytes.Contains(r.result["inputRequests"], []byte(`"confirm"`)) {
		t.Fatalf("inputRequests lost: %s", r.raw)
	}
	// Answer the asked key and one nobody asked.
	answers := confirmed()
	answers["unasked"] = map[string]any{"action": "accept", "content": map[string]any{"x": 1}}
	r2 := post(t, px.URL, callReq{id: 2, name: tool, state: ptr(tok), responses: answers})
	if r2.err != nil || r2.resultType() != "complete" {
		t.Fatalf("resume: %s", r2.raw)
	}
	res := up.resumes()
	if len(res) != 1 {
		t.Fatalf("upstream saw %d resumes, want 1", len(res))
	}
	if got := string(res[0].params["requestState"]); got != upStateJSON() {
		t.Errorf("upstream got requestState %s, want its own %s byte for byte", got, upStateJSON())
	}
	var fwd map[string]json.RawMessage
	json.Unmarshal(res[0].params["inputResponses"], &fwd)
	if _, ok := fwd["unasked"]; ok || fwd["confirm"] == nil || len(fwd) != 1 {
		t.Errorf("upstream got inputResponses %s, want only the asked key confirm", res[0].params["inputResponses"])
	}
	if !strings.Contains(r2.text(), "state="+upState) {
		t.Errorf("result %q", r2.text())
	}
}

func TestPauseResumeJSON(t *testing.T) { testPauseResume(t, "ask") }
func TestPauseResumeSSE(t *testing.T)  { testPauseResume(t, "ask_sse") }

// TestNoStateUpstream: an upstream pausing without a requestState gets
// none back, yet the client's answers reach it through the sealed token.
func TestNoStateUpstream(t *testing.T) {
	up := newUpstream(t)
	px := startProxy(t, up.url(), nil, nil, nil)
	tok := pause(t, px.URL, "nostate", nil)
	r := post(t, px.URL, callReq{id: 2, name: "nostate", state: ptr(tok), responses: confirmed()})
	if r.text() != "hasState=false" {
		t.Fatalf("resume: %s", r.raw)
	}
}

// TestProgressBeforeResult: a progress notification reaches the client
// while the upstream still holds the final message back; the upstream
// sends it only once the test, having read the notification through the
// proxy, opens the gate.
func TestProgressBeforeResult(t *testing.T) {
	up := newUpstream(t)
	px := startProxy(t, up.url(), nil, nil, nil)
	req, _ := http.NewRequest(http.MethodPost, px.URL, bytes.NewReader(callReq{name: "progress"}.body()))
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var got []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended (%v) after %q", err, got)
		}
		got = append(got, line)
		if strings.Contains(line, "notifications/progress") {
			close(up.gate)
			break
		}
		if strings.Contains(line, `"result"`) {
			t.Fatalf("the result came before the progress notification: %q", got)
		}
	}
	rest := new(bytes.Buffer)
	rest.ReadFrom(br)
	var final reply
	for _, ev := range events(rest.Bytes()) {
		if bytes.Contains(ev, []byte(`"result"`)) {
			decode(t, ev, &final)
		}
	}
	if final.resultType() != "input_required" || final.state() == "" || final.state() == upState {
		t.Fatalf("final message after the progress: %s", rest)
	}
	if !strings.Contains(rest.String(), "id: 7") {
		t.Errorf("the final event lost its id field: %q", rest)
	}
}

// TestTamperEveryByte flips each byte of a sealed token in turn: every
// variant is refused as invalid and none reaches the upstream.
func TestTamperEveryByte(t *testing.T) {
	up := newUpstream(t)
	px := startProxy(t, up.url(), nil, nil, nil)
	tok := pause(t, px.URL, "ask", nil)
	for i := range len(tok) {
		b := []byte(tok)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		r := post(t, px.URL, callReq{id: i + 10, name: "ask", state: ptr(string(b)), responses: confirmed()})
		wantReject(t, r, "invalid")
		if string(r.id) != fmt.Sprint(i+10) {
			t.Fatalf("error id %s, want the caller's %d", r.id, i+10)
		}
	}
	for _, bad := range []string{tok + "-TAMPERED", upState, "v1", "v1.k1."} {
		wantReject(t, post(t, px.URL, callReq{id: 3, name: "ask", state: ptr(bad), responses: confirmed()}), "invalid")
	}
	// An empty state is no state, as for the guard: a first call, and the
	// upstream receives none.
	if r := post(t, px.URL, callReq{id: 3, name: "ask", state: ptr(""), responses: confirmed()}); r.resultType() != "input_required" {
		t.Fatalf("empty requestState: %s", r.raw)
	}
	if n := len(up.resumes()); n != 0 {
		t.Fatalf("%d tampered resumes reached the upstream", n)
	}
	if r := post(t, px.URL, callReq{id: 4, name: "ask", state: ptr(tok), responses: confirmed()}); r.resultType() != "complete" {
		t.Fatalf("the intact token was refused: %s", r.raw)
	}
}

// TestTokenMoved: a token presented for another tool, by another caller,
// to another server id or under another protocol version is invalid.
func TestTokenMoved(t *testing.T) {
	up := newUpstream(t)
	ring := testRing(t)
	principal := func(r *http.Request) (reqstate.Principal, error) {
		if u := r.Header.Get("X-Test-User"); u != "" {
			return reqstate.Principal{Issuer: "test", Subject: u}, nil
		}
		return reqstate.Principal{}, nil
	}
	px := startProxy(t, up.url(), ring, &mrtr.Options{ServerID: "a"}, &proxy.Options{Principal: principal})
	other := startProxy(t, up.url(), ring, &mrtr.Options{ServerID: "b"}, &proxy.Options{Principal: principal})
	alice := http.Header{"X-Test-User": {"alice"}}
	r := post(t, px.URL, callReq{name: "ask", header: alice})
	tok := r.state()
	for name, c := range map[string]callReq{
		"other tool":      {name: "ask2", header: alice},
		"other principal": {name: "ask", header: http.Header{"X-Test-User": {"bob"}}},
		"anonymous":       {name: "ask"},
		"other version":   {name: "ask", header: alice, version: "2026-12-01"},
	} {
		c.id, c.state, c.responses = 5, ptr(tok), confirmed()
		t.Run(name, func(t *testing.T) { wantReject(t, post(t, px.URL, c), "invalid") })
	}
	t.Run("other server id", func(t *testing.T) {
		wantReject(t, post(t, other.URL, callReq{name: "ask", header: alice, state: ptr(tok), responses: confirmed()}), "invalid")
	})
	if n := len(up.resumes()); n != 0 {
		t.Fatalf("%d moved tokens reached the upstream", n)
	}
	if r := post(t, px.URL, callReq{name: "ask", header: alice, state: ptr(tok), responses: confirmed()}); r.resultType() != "complete" {
		t.Fatalf("the token in its place was refused: %s", r.raw)
	}
}

func TestArgumentsChanged(t *testing.T) {
	up := newUpstream(t)
	px := startProxy(t, up.url(), nil, nil, nil)
	tok := pause(t, px.URL, "ask", map[string]any{"env": "staging"})
	r := post(t, px.URL, callReq{name: "ask", args: map[string]any{"env": "production"}, state: ptr(tok), responses: confirmed()})
	wantReject(t, r, "arguments_changed")
	// Same arguments, other member order and spacing: the same call.
	r = post(t, px.URL, callReq{name: "ask", args: json.RawMessage(`{ "env" : "staging" }`), state: ptr(tok), responses: confirmed()})
	if r.resultType() != "complete" || len(up.resumes()) != 1 {
		t.Fatalf("unchanged arguments refused: %s", r.raw)
	}
}

func TestExpiry(t *testing.T) {
	up := newUpstream(t)
	clock := fakeclock.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	px := startProxy(t, up.url(), nil, &mrtr.Options{Now: clock.Now, AnonymousTTL: time.Minute, Leeway: time.Second}, nil)
	tok := pause(t, px.URL, "ask", nil)
	clock.Advance(time.Minute + 2*time.Second)
	wantReject(t, post(t, px.URL, callReq{name: "ask", state: ptr(tok), responses: confirmed()}), "expired")
	if n := len(up.resumes()); n != 0 {
		t.Fatalf("an expired token reached the upstream %d times", n)
	}
}

func TestRoundCap(t *testing.T) {
	up := newUpstream(t)
	px := startProxy(t, up.url(), nil, &mrtr.Options{MaxRounds: 2}, nil)
	tok := pause(t, px.URL, "loop", nil)
	again := map[string]any{"again": map[string]any{"action": "accept", "content": map[string]any{}}}
	r := post(t, px.URL, callReq{name: "loop", state: ptr(tok), responses: again})
	if r.resultType() != "input_required" {
		t.Fatalf("round 2: %s", r.raw)
	}
	if got := string(up.resumes()[0].params["requestState"]); got != `"loop:"` {
		t.Fatalf("round 2 upstream state %s", got)
	}
	wantReject(t, post(t, px.URL, callReq{name: "loop", state: ptr(r.state()), responses: again}), "rounds_exceeded")
}

// TestReplayConcurrent: 32 concurrent resumes of one token through a proxy
// with the memory store: exactly one reaches the upstream and completes,
// every other is refused as replayed.
func TestReplayConcurrent(t *testing.T) {
	up := newUpstream(t)
	px := startProxy(t, up.url(), nil, &mrtr.Options{Store: replay.NewMemory(nil)}, nil)
	tok := pause(t, px.URL, "ask", nil)
	const n = 32
	var wg sync.WaitGroup
	replies := make([]reply, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			replies[i] = post(t, px.URL, callReq{id: i, name: "ask", state: ptr(tok), responses: confirmed()})
		})
	}
	close(start)
	wg.Wait()
	ok, replayed := 0, 0
	for _, r := range replies {
		switch {
		case r.resultType() == "complete":
			ok++
		case r.reason() == "replayed":
			replayed++
		default:
			t.Errorf("unexpected reply %s", r.raw)
		}
	}
	if ok != 1 || replayed != n-1 || len(up.resumes()) != 1 {
		t.Fatalf("%d completed, %d replayed, %d reached the upstream; want 1, %d, 1", ok, replayed, len(up.resumes()), n-1)
	}
}

// TestTwoProxiesOneRedis: pause through one proxy, resume through another
// sharing keys, server id and a Redis store; a second resume anywhere is
// a replay.
func TestTwoProxiesOneRedis(t *testing.T) {
	url := testredis.Start(t)
	up := newUpstream(t)
	ring := testRing(t)
	store := func() replay.Store {
		s, err := redisstore.NewFromURL(url, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a := startProxy(t, up.url(), ring, &mrtr.Options{ServerID: "cluster", Store: store()}, nil)
	b := startProxy(t, up.url(), ring, &mrtr.Options{ServerID: "cluster", Store: store()}, nil)
	tok := pause(t, a.URL, "ask", nil)
	if r := post(t, b.URL, callReq{name: "ask", state: ptr(tok), responses: confirmed()}); r.resultType() != "complete" {
		t.Fatalf("resume on the other proxy: %s", r.raw)
	}
	wantReject(t, post(t, a.URL, callReq{name: "ask", state: ptr(tok), responses: confirmed()}), "replayed")
	wantReject(t, post(t, b.URL, callReq{name: "ask", state: ptr(tok), responses: confirmed()}), "replayed")
	if n := len(up.resumes()); n != 1 {
		t.Fatalf("%d resumes reached the upstream, want 1", n)
	}
}

// TestUpstreamStateLimit: a state up to the limit travels byte for byte;
// one byte more is a clear error, never a truncated state.
func TestUpstreamStateLimit(t *testing.T) {
	up := newUpstream(t)
	px := startProxy(t, up.url(), nil, nil, &proxy.Options{MaxUpstreamState: 1000})
	fits := map[string]any{"size": 998} // 998 bytes + 2 quotes
	tok := pause(t, px.URL, "big", fits)
	if r := post(t, px.URL, callReq{name: "big", args: fits, state: ptr(tok)}); r.text() != "len=998" {
		t.Fatalf("resume: %s", r.raw)
	}
	r := post(t, px.URL, callReq{id: 9, name: "big", args: map[string]any{"size": 999}})
	if r.err == nil || r.err.Code != -32603 || !strings.Contains(r.err.Message, "exceeds the proxy's limit of 1000") || string(r.id) != "9" {
		t.Fatalf("oversized upstream state: %s", r.raw)
	}
}

// TestCapabilityGate: an input request the client did not declare a
// capability for is not passed on.
func TestCapabilityGate(t *testing.T) {
	up := newUpstream(t)
	px := startProxy(t, up.url(), nil, nil, nil)
	r := post(t, px.URL, callReq{name: "sample", caps: map[string]any{"elicitation": map[string]any{}}})
	if r.err == nil || r.err.Code != -32021 || r.status != http.StatusBadRequest {
		t.Fatalf("want -32021 with 400, got %d %s", r.status, r.raw)
	}
	if got := string(r.err.Data); got != `{"requiredCapabilities":{"sampling":{}}}` {
		t.Errorf("data %s", got)
	}
	if bytes.Contains(r.raw, []byte("createMessage")) {
		t.Errorf("the sampling request reached the client: %s", r.raw)
	}
	if r := post(t, px.URL, callReq{name: "sample", caps: map[string]any{"sampling": map[string]any{}}}); r.resultType() != "input_required" {
		t.Fatalf("with sampling declared: %s", r.raw)
	}
}

// TestUpstreamFailures: an upstream that is down, drops the connection,
// answers garbage or is too slow gets the caller a -32603 with its id and
// a log line. An upstream that dropped the connection after receiving a
// resume may have run it, so its token stays spent (settle_test.go covers
// when a token is released).
func TestUpstreamFailures(t *testing.T) {
	up := newUpstream(t)
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedBuf{b: &logs, mu: &mu}, nil))
	px := startProxy(t, up.url(), nil, &mrtr.Options{Store: replay.NewMemory(nil)}, &proxy.Options{Logger: logger})
	// Only the call whose outcome is the timeout goes through a proxy with
	// a short one: the slow tool answers never, so any duration decides
	// the same way, and no successful call can run into it.
	short := startProxy(t, up.url(), nil, nil, &proxy.Options{Logger: logger, UpstreamTimeout: 100 * time.Millisecond})
	tok := pause(t, px.URL, "ask", nil)

	up.setBroken(true)
	r := post(t, px.URL, callReq{id: "r-1", name: "ask", state: ptr(tok), responses: confirmed()})
	if r.err == nil || r.err.Code != -32603 || string(r.id) != `"r-1"` {
		t.Fatalf("upstream dropping the connection: %s", r.raw)
	}
	up.setBroken(false)
	wantReject(t, post(t, px.URL, callReq{name: "ask", state: ptr(tok), responses: confirmed()}), "replayed")

	for tool, via := range map[string]string{"garbage": px.URL, "slow": short.URL} {
		r := post(t, via, callReq{id: 41, name: tool})
		if r.err == nil || r.err.Code != -32603 || string(r.id) != "41" {
			t.Fatalf("%s upstream: %s", tool, r.raw)
		}
	}

	down := startProxy(t, "http://127.0.0.1:1/mcp", nil, nil, &proxy.Options{Logger: logger})
	r = post(t, down.URL, callReq{id: 42, name: "ask"})
	if r.err == nil || r.err.Code != -32603 || string(r.id) != "42" {
		t.Fatalf("upstream down: %s", r.raw)
	}
	// A pass-through method gets the same.
	req, _ := http.NewRequest(http.MethodPost, down.URL, strings.NewReader(`{"jsonrpc":"2.0","id":43,"method":"tools/list","params":{}}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var rr reply
	rr.raw = readAll(resp)
	decode(t, rr.raw, &rr)
	if rr.err == nil || rr.err.Code != -32603 || string(rr.id) != "43" {
		t.Fatalf("pass-through with the upstream down: %s", rr.raw)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"reach the upstream", "upstream answered garbage", "connection refused", "deadline exceeded"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no log line naming %q:\n%s", want, logs.String())
		}
	}
}

// TestNoTokenInLogs runs pauses, resumes, tampering and replays with
// debug logging on and finds no token and no upstream state in the logs.
func TestNoTokenInLogs(t *testing.T) {
	up := newUpstream(t)
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(&lockedBuf{b: &logs, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	px := startProxy(t, up.url(), nil, &mrtr.Options{Store: replay.NewMemory(nil), Logger: logger}, &proxy.Options{Logger: logger})
	var toks []string
	for range 3 {
		tok := pause(t, px.URL, "ask", nil)
		toks = append(toks, tok)
		post(t, px.URL, callReq{name: "ask", state: ptr(tok + "x"), responses: confirmed()})
		post(t, px.URL, callReq{name: "ask", state: ptr(tok), responses: confirmed()})
		post(t, px.URL, callReq{name: "ask", state: ptr(tok), responses: confirmed()})
	}
	post(t, px.URL, callReq{name: "sample", caps: map[string]any{}})
	mu.Lock()
	defer mu.Unlock()
	out := logs.String()
	if !strings.Contains(out, "replayed") || !strings.Contains(out, `"token"`) {
		t.Fatalf("the rejections were not logged:\n%s", out)
	}
	for _, tok := range toks {
		for _, part := range strings.Split(tok, ".") {
			if len(part) > 8 && strings.Contains(out, part) {
				t.Fatalf("a token part is in the logs:\n%s", out)
			}
		}
	}
	if strings.Contains(out, "up<&>") || strings.Contains(out, `up\u003c`) {
		t.Fatalf("the upstream's state is in the logs")
	}
}

func TestDNSRebinding(t *testing.T) {
	up := newUpstream(t)
	px := startProxy(t, up.url(), nil, nil, &proxy.Options{AllowedHosts: []string{"mcp.internal"}})
	for _, tc := range []struct {
		host, origin string
		want         int
	}{
		{"evil.example.com", "", http.StatusForbidden},
		{"", "http://evil.example.com", http.StatusForbidden},
		{"localhost:1234", "", http.StatusOK},
		{"mcp.internal", "http://localhost", http.StatusOK},
		{"", "", http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodPost, px.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`))
		if tc.host != "" {
			req.Host = tc.host
		}
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Host %q Origin %q: status %d, want %d", tc.host, tc.origin, resp.StatusCode, tc.want)
		}
	}
}

func TestAuthorizationForwarding(t *testing.T) {
	for _, forward := range []bool{false, true} {
		up := newUpstream(t)
		px := startProxy(t, up.url(), nil, nil, &proxy.Options{ForwardAuthorization: forward})
		post(t, px.URL, callReq{name: "ask", header: http.Header{"Authorization": {"Bearer secret"}}})
		req, _ := http.NewRequest(http.MethodPost, px.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
		req.Header.Set("Authorization", "Bearer secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for _, s := range up.all() {
			if got := s.header.Get("Authorization") != ""; got != forward {
				t.Errorf("ForwardAuthorization=%v: %s reached the upstream with Authorization=%v", forward, s.method, got)
			}
		}
		if len(up.all()) != 2 {
			t.Fatalf("upstream saw %d requests", len(up.all()))
		}
	}
}

// TestHeadersKept: the 2026-07-28 headers reach the upstream as sent, and
// they still match the body it receives.
func TestHeadersKept(t *testing.T) {
	up := newUpstream(t)
	px := startProxy(t, up.url(), nil, nil, nil)
	tok := pause(t, px.URL, "ask", nil)
	post(t, px.URL, callReq{name: "ask", state: ptr(tok), responses: confirmed()})
	for _, s := range up.all() {
		var name string
		json.Unmarshal(s.params["name"], &name)
		if s.header.Get("Mcp-Method") != s.method || s.header.Get("Mcp-Name") != name || s.header.Get("Mcp-Protocol-Version") != "2026-07-28" {
			t.Errorf("upstream headers %v do not match its body (%s %s)", s.header, s.method, name)
		}
	}
}

func TestBadRequests(t *testing.T) {
	up := newUpstream(t)
	px := startProxy(t, up.url(), nil, nil, &proxy.Options{MaxBodyBytes: 1000})
	for _, tc := range []struct {
		body string
		want int
	}{
		{`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","requestState":"x"}}]`, http.StatusBadRequest},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"ask","requestState":"x"}}`, http.StatusBadRequest},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call"`, http.StatusBadRequest},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","requestState":"` + strings.Repeat("a", 1000) + `"}}`, http.StatusRequestEntityTooLarge},
	} {
		resp, err := http.Post(px.URL, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%.60s: status %d, want %d", tc.body, resp.StatusCode, tc.want)
		}
	}
	if n := len(up.all()); n != 0 {
		t.Fatalf("%d bad requests reached the upstream", n)
	}
	// A repeated member name, in the envelope or the params, is refused:
	// a parser keeping the first one would read another message.
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","_meta":{},"requestState":"forged","requestState":` + upStateJSON() + `}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"ask","requestState":` + upStateJSON() + `}}`,
	} {
		resp, err := http.Post(px.URL, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var r reply
		r.raw = readAll(resp)
		decode(t, r.raw, &r)
		if resp.StatusCode != http.StatusBadRequest || r.err == nil || r.err.Code != -32600 {
			t.Errorf("repeated member: %d %s", resp.StatusCode, r.raw)
		}
	}
	if n := len(up.all()); n != 0 {
		t.Fatalf("%d requests with repeated members reached the upstream", n)
	}
}

type lockedBuf struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func readAll(resp *http.Response) []byte {
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return b.Bytes()
}
