package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/replay"
)

// strayUpstream is an HTTP/1.1 upstream on a raw socket that answers every
// request with its own response and, on every third request of a
// connection, first sends a stray one: the previous request's response
// again, arriving after the proxy took the kept-alive connection for the
// next request (the review's reproduction). It counts the connections it
// accepted.
type strayUpstream struct {
	ln    net.Listener
	conns atomic.Int32
}

func newStrayUpstream(t *testing.T) *strayUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &strayUpstream{ln: ln}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close() // the proxy keeps its idle ones
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.conns.Add(1)
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				u.serve(c)
			}()
		}
	}()
	return u
}

func (u *strayUpstream) url() string { return "http://" + u.ln.Addr().String() + "/mcp" }

// answerTo is the upstream's response to one request body: its id and its
// argument n echoed as text.
func answerTo(body []byte) string {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Params struct {
			Arguments struct{ N int } `json:"arguments"`
		} `json:"params"`
	}
	json.Unmarshal(body, &m)
	msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","content":[{"type":"text","text":"n=%d"}]}}`, m.ID, m.Params.Arguments.N)
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(msg), msg)
}

func (u *strayUpstream) serve(c net.Conn) {
	br := bufio.NewReader(c)
	var prev string
	for n := 1; ; n++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, _ := io.ReadAll(req.Body)
		out := answerTo(body)
		if n%3 == 0 && prev != "" {
			out = prev + out // the stray first, then the response
		}
		if _, err := io.WriteString(c, out); err != nil {
			return
		}
		prev = answerTo(body)
	}
}

// TestStrayResponseNeverHandedOn: a response that arrives on a kept-alive
// connection after the response it belonged to is never handed to the
// next request: 600 calls, pausable and passed through, over both
// transports, each gets its own answer or the proxy's -32603 with its
// own id, never another's.
func TestStrayResponseNeverHandedOn(t *testing.T) {
	for _, kind := range []proxy.TransportKind{proxy.TransportStd, proxy.TransportLean} {
		if kind == proxy.TransportLean && !proxy.LeanTransportSupported {
			continue
		}
		t.Run(string(kind), func(t *testing.T) {
			up := newStrayUpstream(t)
			px := startProxy(t, up.url(), nil, nil, &proxy.Options{UpstreamTransport: kind})
			const calls, workers = 600, 6
			var ok, refused, wrong atomic.Int32
			var wg sync.WaitGroup
			next := atomic.Int32{}
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(1))
						if i > calls {
							return
						}
						method, id := "tools/call", fmt.Sprint(i)
						if i%2 == 0 {
							method, id = "demo/echo", fmt.Sprintf(`"c%d"`, i) // passed through
						}
						body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":{"name":"echo","arguments":{"n":%d},%s}}`, id, method, i, testMeta)
						r := send(t, px.URL, body, nil)
						switch {
						case string(r.id) != id:
							wrong.Add(1)
							t.Errorf("call %d (id %s) got another id: %s", i, id, r.raw)
						case r.err != nil && r.err.Code == -32603:
							refused.Add(1)
						case r.err == nil && r.text() == fmt.Sprintf("n=%d", i):
							ok.Add(1)
						default:
							wrong.Add(1)
							t.Errorf("call %d got another's answer: %s", i, r.raw)
						}
					}
				}()
			}
			wg.Wait()
			t.Logf("%d own answers, %d refused, %d wrong; %d upstream connections", ok.Load(), refused.Load(), wrong.Load(), up.conns.Load())
			if ok.Load() < calls/2 {
				t.Errorf("only %d of %d calls got their answer", ok.Load(), calls)
			}
		})
	}
}

// echoIDUpstream answers every request with its own id, as JSON or (sse)
// in a per-POST event stream, and records the ids it received.
func echoIDUpstream(t *testing.T, sse bool) (*scripted, func() []string) {
	var mu sync.Mutex
	var ids []string
	s := newScripted(t, func(w http.ResponseWriter, m rpcMsg) {
		mu.Lock()
		ids = append(ids, string(m.ID))
		mu.Unlock()
		msg := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"resultType":"complete","content":[]}}`
		if sse {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(msg))
	})
	return s, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), ids...)
	}
}

// TestCallerIDRoundTrip: the caller's id comes back byte for byte (1 stays
// 1, "1" stays "1"), in JSON and in a per-POST event stream, on the
// pausable and the pass-through path; the upstream sees an id of the
// proxy's own instead, a fresh one for each request.
func TestCallerIDRoundTrip(t *testing.T) {
	for _, sse := range []bool{false, true} {
		up, ids := echoIDUpstream(t, sse)
		px := startProxy(t, up.url(), nil, nil, nil)
		for _, method := range []string{"tools/call", "tools/list"} {
			for _, id := range []string{`1`, `"1"`, `-7`, `1.5e3`, `"\u0031 x"`} {
				body := `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":{"name":"t",` + testMeta + `}}`
				r := send(t, px.URL, body, nil)
				if string(r.id) != id || r.err != nil {
					t.Errorf("sse %v, %s id %s: got %s", sse, method, id, r.raw)
				}
			}
		}
		seen := map[string]bool{}
		for _, id := range ids() {
			if !strings.HasPrefix(id, `"mrtr-`) || seen[id] {
				t.Errorf("the upstream got id %s: want a fresh one of the proxy's", id)
			}
			seen[id] = true
		}
		if len(seen) != 10 {
			t.Errorf("the upstream got %d distinct ids for 10 requests", len(seen))
		}
	}
}

// countingUpstream is a scripted upstream that also counts the
// connections it accepted.
func countingUpstream(t *testing.T, answer func(w http.ResponseWriter, m rpcMsg)) (*scripted, *atomic.Int32) {
	s := &scripted{}
	n := new(atomic.Int32)
	s.srv = httptest.NewUnstartedServer(s.handler(answer))
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			n.Add(1)
		}
	}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s, n
}

// TestForeignResponseRefused: a response that is not the request's (another
// id, a batch, a second response, an id null error) never reaches the
// caller, who gets the proxy's -32603 with its own id; the connection it
// came on is not used again (the next request arrives on a new one). An
// input_required under another id is never sealed.
func TestForeignResponseRefused(t *testing.T) {
	const pause = `"result":{"resultType":"input_required","inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"ok?","requestedSchema":{"type":"object"}}}},"requestState":"theirs"}`
	for _, tc := range []struct {
		name string
		sse  bool
		body func(id string) string // the upstream's answer to id
		msg  string
	}{
		{"other id", false, func(string) string { return `{"jsonrpc":"2.0","id":"mrtr-0-1",` + pause + `}` }, "not this request's"},
		{"caller's id", false, func(string) string { return `{"jsonrpc":"2.0","id":5,` + pause + `}` }, "not this request's"},
		{"batch", false, func(id string) string { return `[{"jsonrpc":"2.0","id":` + id + `,` + pause + `}]` }, "not this request's"},
		{"null id", false, func(string) string {
			return `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`
		}, "names no request"},
		{"sse other id", true, func(string) string { return `{"jsonrpc":"2.0","id":"x",` + pause + `}` }, "not this request's"},
		{"sse batch", true, func(id string) string { return `[{"jsonrpc":"2.0","id":` + id + `,` + pause + `}]` }, "not this request's"},
		{"sse null id", true, func(string) string {
			return `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`
		}, "names no request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, conns := countingUpstream(t, func(w http.ResponseWriter, m rpcMsg) {
				if tc.sse {
					w.Header().Set("Content-Type", "text/event-stream")
					fmt.Fprintf(w, "data: %s\n\n", tc.body(string(m.ID)))
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(tc.body(string(m.ID))))
			})
			px := startProxy(t, up.url(), nil, nil, nil)
			for i, method := range []string{"tools/call", "tools/list", "tools/call"} {
				id := fmt.Sprint(5 + i)
				body := `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":{"name":"t",` + testMeta + `}}`
				r := send(t, px.URL, body, nil)
				if string(r.id) != id || r.err == nil || r.err.Code != -32603 || !strings.Contains(r.err.Message, tc.msg) {
					t.Errorf("%s: got %s; want -32603 %q with id %s", method, r.raw, tc.msg, id)
				}
				if bytes.Contains(r.raw, []byte("requestState")) || bytes.Contains(r.raw, []byte("theirs")) {
					t.Errorf("%s: another request's answer reached the caller: %s", method, r.raw)
				}
			}
			if n := conns.Load(); n != 3 {
				t.Errorf("3 requests, each answered by a foreign response, came on %d connections: one was reused", n)
			}
		})
	}
}

// TestSecondResponseDropped: of a per-POST event stream only the first
// response reaches the caller; a second one is dropped, and so is the
// connection.
func TestSecondResponseDropped(t *testing.T) {
	up, conns := countingUpstream(t, func(w http.ResponseWriter, m rpcMsg) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"resultType\":\"complete\",\"content\":[{\"type\":\"text\",\"text\":\"mine\"}]}}\n\n", m.ID)
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"resultType\":\"complete\",\"content\":[{\"type\":\"text\",\"text\":\"second\"}]}}\n\n", m.ID)
	})
	px := startProxy(t, up.url(), nil, nil, nil)
	for i, method := range []string{"tools/call", "tools/list"} {
		r := send(t, px.URL, rpcBody(i+1, method, `"name":"t"`), nil)
		if r.text() != "mine" || bytes.Contains(r.raw, []byte("second")) || string(r.id) != fmt.Sprint(i+1) {
			t.Errorf("%s: got %s; want the first response only", method, r.raw)
		}
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("2 requests whose streams held a second response came on %d connections", n)
	}
}

// TestServerRequestIDsKept: a 2025-11-25 server's request in a per-POST
// stream reaches the caller with the server's id, and the caller's answer
// to it reaches the server unchanged; progress tokens are untouched, and
// so is an event that holds no JSON.
func TestServerRequestIDsKept(t *testing.T) {
	const serverReq = `{"jsonrpc":"2.0","id":0,"method":"elicitation/create","params":{"message":"ok?","requestedSchema":{"type":"object"}}}`
	const progress = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`
	up := newScripted(t, func(w http.ResponseWriter, m rpcMsg) {
		if m.Method == "" {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\ndata: not json\n\ndata: %s\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}\n\n", serverReq, progress, m.ID)
	})
	px := startProxy(t, up.url(), nil, nil, nil)
	hd := http.Header{"Mcp-Session-Id": {"s1"}}
	r := send(t, px.URL, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"progressToken":1}}}`, hd)
	if !bytes.Contains(r.raw, []byte(serverReq)) || !bytes.Contains(r.raw, []byte(progress)) || !bytes.Contains(r.raw, []byte("data: not json\n")) || string(r.id) != "1" {
		t.Fatalf("stream: %s", r.raw)
	}
	const answer = `{"jsonrpc":"2.0","id":0,"result":{"action":"accept","content":{}}}`
	if r := sendRaw(t, px.URL, answer, hd); r.StatusCode != http.StatusAccepted {
		t.Fatalf("answer: HTTP %d", r.StatusCode)
	}
	got := up.received()
	if m := got[len(got)-1]; string(m.ID) != "0" || m.Method != "" {
		t.Fatalf("the server got %+v for its request's answer", m)
	}
	if got[0].Params["_meta"] == nil || !bytes.Contains(got[0].Params["_meta"], []byte(`"progressToken":1`)) {
		t.Fatalf("progress token changed: %s", got[0].Params["_meta"])
	}
}

func sendRaw(t *testing.T, url, body string, hd http.Header) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, vs := range hd {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestCancelledMapped: a caller's notifications/cancelled names its
// request by the caller's id, and reaches the upstream naming the id the
// proxy sent that request under; one naming no request of that caller's
// in flight (another session's, or one that ended) reaches no one.
func TestCancelledMapped(t *testing.T) {
	release := make(chan struct{})
	cancelled := make(chan rpcMsg, 32) // never full: a POST returns once its cancel is in
	var callID atomic.Value
	up := newScripted(t, func(w http.ResponseWriter, m rpcMsg) {
		switch m.Method {
		case "notifications/cancelled":
			cancelled <- m
			w.WriteHeader(http.StatusAccepted)
		default:
			callID.Store(string(m.ID))
			<-release
			writeResult(w, m.ID, complete("done"))
		}
	})
	px := startProxy(t, up.url(), nil, nil, nil)
	for _, method := range []string{"tools/call", "tools/list"} {
		done := make(chan reply)
		go func() {
			done <- send(t, px.URL, rpcBody(3, method, `"name":"t"`), http.Header{"Mcp-Session-Id": {"a"}})
		}()
		for callID.Load() == nil {
			time.Sleep(time.Millisecond)
		}
		// Another session's id 3 and this session's id 4 name nothing.
		for _, c := range []struct{ session, id string }{{"b", "3"}, {"a", "4"}, {"a", `"3"`}, {"a", "3"}} {
			sendRaw(t, px.URL, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+c.id+`,"reason":"x"}}`, http.Header{"Mcp-Session-Id": {c.session}})
		}
		m := <-cancelled
		var rid json.RawMessage = m.Params["requestId"]
		if string(rid) != callID.Load().(string) {
			t.Errorf("%s: the upstream got a cancel for %s; the call was sent as %s", method, rid, callID.Load())
		}
		select {
		case m := <-cancelled:
			t.Errorf("%s: a cancel that names no request of the caller's reached the upstream: %s", method, m.Params["requestId"])
		default:
		}
		release <- struct{}{}
		if r := <-done; r.text() != "done" || string(r.id) != "3" {
			t.Errorf("%s: %s", method, r.raw)
		}
		callID = atomic.Value{}
		// Once it ended, a cancel for it reaches no one.
		sendRaw(t, px.URL, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`, http.Header{"Mcp-Session-Id": {"a"}})
		select {
		case m := <-cancelled:
			t.Errorf("%s: a cancel after the end reached the upstream: %s", method, m.Params["requestId"])
		default:
		}
	}
}

// TestListenSubscriptionID: a listen stream's messages carry the listen
// request's id as their subscriptionId (2026-07-28): the caller sees its
// own, not the proxy's.
func TestListenSubscriptionID(t *testing.T) {
	up := newScripted(t, func(w http.ResponseWriter, m rpcMsg) {
		w.Header().Set("Content-Type", "text/event-stream")
		meta := `"_meta":{"io.modelcontextprotocol/subscriptionId":` + string(m.ID) + `}`
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"notifications\":{\"toolsListChanged\":true},%s}}\n\n", meta)
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\",\"params\":{%s}}\n\n", meta)
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"resultType\":\"complete\",%s}}\n\n", m.ID, meta)
	})
	px := startProxy(t, up.url(), nil, nil, nil)
	r := send(t, px.URL, `{"jsonrpc":"2.0","id":"L1","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},`+testMeta+`}}`, nil)
	evs := events(r.raw)
	if len(evs) != 3 || string(r.id) != `"L1"` {
		t.Fatalf("stream: %s", r.raw)
	}
	for _, ev := range evs {
		if !bytes.Contains(ev, []byte(`"io.modelcontextprotocol/subscriptionId":"L1"`)) || bytes.Contains(ev, []byte("mrtr-")) {
			t.Errorf("event with the proxy's subscription id: %s", ev)
		}
	}
}

// TestForeignPauseNotAudited: an input_required under another request's
// id is neither sealed nor recorded as a pause.
func TestForeignPauseNotAudited(t *testing.T) {
	up := newScripted(t, func(w http.ResponseWriter, m rpcMsg) {
		writeResult(w, json.RawMessage(`"mrtr-other-1"`), inputRequired("theirs"))
	})
	var paused atomic.Int32
	obs := &pauseCounter{n: &paused}
	px := startProxy(t, up.url(), nil, &mrtr.Options{Observer: obs}, nil)
	r := post(t, px.URL, callReq{name: "t"})
	if r.err == nil || r.err.Code != -32603 || r.state() != "" {
		t.Fatalf("got %s", r.raw)
	}
	if paused.Load() != 0 {
		t.Fatalf("%d pauses sealed for another request's answer", paused.Load())
	}
}

// pauseCounter counts the pauses the guard sealed.
type pauseCounter struct {
	mrtr.NopObserver
	n *atomic.Int32
}

func (p *pauseCounter) Paused(context.Context, mrtr.PauseEvent) { p.n.Add(1) }

// TestIDInUse: within a 2025-11-25 session an id names one request at a
// time: a second request under the id of one in flight is refused
// (-32600) before it reaches the upstream, on both paths. Without a
// session, callers who share a principal number their requests each on
// their own: two with one id at once both get their own answers.
func TestIDInUse(t *testing.T) {
	entered := make(chan struct{}, 4)
	release := make(chan struct{})
	up := newScripted(t, func(w http.ResponseWriter, m rpcMsg) {
		if name, _ := m.str("name"); name == "wait" {
			entered <- struct{}{}
			<-release
		}
		writeResult(w, m.ID, complete(m.Method))
	})
	px := startProxy(t, up.url(), nil, nil, nil)
	for _, session := range []string{"s1", ""} {
		hd := http.Header{"Mcp-Session-Id": {session}}
		if session == "" {
			hd = nil
		}
		first := make(chan reply, 1)
		go func() { first <- send(t, px.URL, rpcBody(3, "tools/call", `"name":"wait"`), hd) }()
		<-entered
		for _, method := range []string{"tools/call", "tools/list"} {
			r := send(t, px.URL, rpcBody(3, method, `"name":"now"`), hd)
			switch {
			case session != "" && (r.err == nil || r.err.Code != -32600 || string(r.id) != "3"):
				t.Errorf("session %q, %s under an id in flight: %s; want -32600", session, method, r.raw)
			case session == "" && (r.err != nil || r.text() != method || string(r.id) != "3"):
				t.Errorf("no session, %s under an id another caller has in flight: %s; want its answer", method, r.raw)
			}
		}
		release <- struct{}{}
		if r := <-first; r.text() != "tools/call" || string(r.id) != "3" {
			t.Errorf("session %q, the call in flight: %s", session, r.raw)
		}
	}
}

// TestForeignErrorSpendsToken: a resume answered with another request's
// error (here an HTTP 400 under another id) may have run on the upstream,
// its own answer lost: the token stays spent, as after any answer the
// proxy cannot trust, and is not released as an upstream error would
// release it.
func TestForeignErrorSpendsToken(t *testing.T) {
	up := newScripted(t, func(w http.ResponseWriter, m rpcMsg) {
		if _, resumed := m.Params["requestState"]; !resumed {
			writeResult(w, m.ID, inputRequired("s1"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"jsonrpc":"2.0","id":"mrtr-0-9","error":{"code":-32602,"message":"theirs"}}`))
	})
	px := startProxy(t, up.url(), nil, &mrtr.Options{Store: replay.NewMemory(nil)}, nil)
	tok := pause(t, px.URL, "t", nil)
	resume := callReq{name: "t", state: ptr(tok), responses: confirmed()}
	if r := post(t, px.URL, resume); r.err == nil || r.err.Code != -32603 || bytes.Contains(r.raw, []byte("theirs")) {
		t.Fatalf("resume: %s; want the proxy's -32603", r.raw)
	}
	wantReject(t, post(t, px.URL, resume), "replayed")
}
