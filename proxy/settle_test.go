package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

// payUpstream is a 2026-07-28 server whose one tool, pay, asks for a
// confirmation and records a payment on every resume it receives, before
// it answers the way the test chose. It keeps no state of its own beyond
// the count, like an upstream that trusts the proxy to run each resume at
// most once.
type payUpstream struct {
	srv      *httptest.Server
	mode     atomic.Value  // string: how a resume is answered
	recorded chan struct{} // one value per payment, sent before answering
	release  chan struct{} // closed by the test: a hanging resume returns

	mu       sync.Mutex
	payments int
	seen     []map[string]json.RawMessage // params of every tools/call
}

func newPayUpstream(t *testing.T) *payUpstream {
	u := &payUpstream{recorded: make(chan struct{}, 64), release: make(chan struct{})}
	u.mode.Store("ok")
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(func() {
		close(u.release)
		u.srv.Close()
	})
	return u
}

func (u *payUpstream) url() string { return u.srv.URL + "/mcp" }

func (u *payUpstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.payments
}

func (u *payUpstream) calls() []map[string]json.RawMessage {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]map[string]json.RawMessage(nil), u.seen...)
}

func (u *payUpstream) serve(w http.ResponseWriter, r *http.Request) {
	var msg struct {
		ID     json.RawMessage            `json:"id"`
		Params map[string]json.RawMessage `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	u.mu.Lock()
	u.seen = append(u.seen, msg.Params)
	u.mu.Unlock()
	answer := func(status int, body string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
	_, resumed := msg.Params["inputResponses"]
	if !resumed {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": map[string]any{
			"resultType": "input_required", "inputRequests": elicit("confirm"), "requestState": "pay-1",
		}})
		answer(http.StatusOK, string(b))
		return
	}
	u.mu.Lock()
	u.payments++
	u.mu.Unlock()
	u.recorded <- struct{}{}
	id := string(msg.ID)
	switch u.mode.Load().(string) {
	case "hang": // until the client, the proxy's timeout or the test gives up
		select {
		case <-r.Context().Done():
		case <-u.release:
		}
	case "garbage":
		answer(http.StatusOK, `{"jsonrpc":"2.0","id":`)
	case "http500":
		answer(http.StatusInternalServerError, `{"detail":"internal server error"}`) // not a JSON-RPC error
	case "rpcerror":
		answer(http.StatusOK, `{"jsonrpc":"2.0","id":`+id+`,"error":{"code":-32603,"message":"payment backend down"}}`)
	case "rpcerror400":
		answer(http.StatusBadRequest, `{"jsonrpc":"2.0","id":`+id+`,"error":{"code":-32602,"message":"bad"}}`)
	case "ssebreak": // headers and a progress event, then the connection drops
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
		http.NewResponseController(w).Flush()
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			c.Close()
		}
	case "sseend": // a stream that ends cleanly before the response
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, ": nothing to say\n\n")
	default:
		answer(http.StatusOK, `{"jsonrpc":"2.0","id":`+id+`,"result":{"resultType":"complete","content":[{"type":"text","text":"paid"}]}}`)
	}
}

func pay(t *testing.T, px string, tok string) reply {
	t.Helper()
	return post(t, px, callReq{name: "pay", state: ptr(tok), responses: confirmed()})
}

// TestResumeNotRunTwiceAfterSend: once a resume has reached the upstream,
// whatever goes wrong afterwards (the client hangs up, the proxy's upstream
// timeout fires, the upstream answers garbage or an HTTP error without a
// JSON-RPC error, its event stream breaks or ends early) the token stays
// spent: sending it again is refused as replayed and the upstream records
// one payment, not one per attempt.
func TestResumeNotRunTwiceAfterSend(t *testing.T) {
	for _, mode := range []string{"hang-client", "hang-timeout", "garbage", "http500", "ssebreak", "sseend"} {
		t.Run(mode, func(t *testing.T) {
			up := newPayUpstream(t)
			popts := &proxy.Options{}
			if mode == "hang-timeout" {
				// The timeout is what is tested: it fires whatever the
				// machine's speed, and the upstream never answers.
				popts.UpstreamTimeout = 50 * time.Millisecond
			}
			px := startProxy(t, up.url(), nil, &mrtr.Options{Store: replay.NewMemory(nil)}, popts)
			tok := pause(t, px.URL, "pay", nil)
			up.mode.Store(strings.TrimSuffix(strings.TrimSuffix(mode, "-client"), "-timeout"))

			if mode == "hang-client" {
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() {
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, px.URL, bytes.NewReader(callReq{name: "pay", state: ptr(tok), responses: confirmed()}.body()))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Accept", "application/json, text/event-stream")
					resp, err := http.DefaultClient.Do(req)
					if err == nil {
						resp.Body.Close()
					}
					done <- err
				}()
				<-up.recorded // the upstream has the call and has paid
				cancel()      // the client gives up
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Fatalf("the client's request ended with %v, want its own cancel", err)
				}
			} else {
				r := pay(t, px.URL, tok)
				<-up.recorded
				if mode == "http500" {
					if r.status != http.StatusInternalServerError {
						t.Fatalf("the upstream's HTTP error was not passed on: %d %s", r.status, r.raw)
					}
				} else if want := map[bool]string{true: "upstream answered an invalid message", false: "upstream failed after the call was sent"}[mode == "garbage"]; r.err == nil || r.err.Code != mrtr.CodeInternalError || r.err.Message != want || string(r.id) != "1" {
					t.Fatalf("want -32603 %q with the caller's id, got %s", want, r.raw)
				}
			}
			up.mode.Store("ok")
			for range 3 {
				wantReject(t, pay(t, px.URL, tok), "replayed")
			}
			if n := up.count(); n != 1 {
				t.Fatalf("the upstream ran the resume %d times on one single-use token", n)
			}
		})
	}
}

// TestResumeReleasedWhenUpstreamDidNotRun: a resume the upstream provably
// did not run releases the token, so the user's retry with the same state
// works: the upstream could not be reached (no byte of the call left the
// proxy), or it answered with a JSON-RPC error (in a 200 or an HTTP error),
// as a handler's error releases its token in the guard.
func TestResumeReleasedWhenUpstreamDidNotRun(t *testing.T) {
	for _, mode := range []string{"unreachable", "rpcerror", "rpcerror400"} {
		t.Run(mode, func(t *testing.T) {
			up := newPayUpstream(t)
			var down atomic.Bool
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.DisableKeepAlives = true // every request dials, so a refused dial is the failure
			dialer := &net.Dialer{}
			tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if down.Load() {
					return nil, fmt.Errorf("dial %s: the test took the upstream's network down", addr)
				}
				return dialer.DialContext(ctx, network, addr)
			}
			px := startProxy(t, up.url(), nil, &mrtr.Options{Store: replay.NewMemory(nil)}, &proxy.Options{Transport: tr})
			tok := pause(t, px.URL, "pay", nil)
			before := len(up.calls())
			if mode == "unreachable" {
				down.Store(true)
				r := pay(t, px.URL, tok)
				if r.err == nil || r.err.Code != mrtr.CodeInternalError || r.err.Message != "upstream unavailable: the call was not delivered" {
					t.Fatalf("want -32603 %q, got %s", "upstream unavailable: the call was not delivered", r.raw)
				}
				if n := len(up.calls()); n != before {
					t.Fatalf("the upstream saw the call though the dial failed")
				}
				down.Store(false)
			} else {
				up.mode.Store(mode)
				r := pay(t, px.URL, tok)
				<-up.recorded
				if r.err == nil || !strings.Contains(string(r.raw), `"error"`) {
					t.Fatalf("the upstream's JSON-RPC error was not passed on: %s", r.raw)
				}
				up.mode.Store("ok")
			}
			if r := pay(t, px.URL, tok); r.err != nil || r.text() != "paid" {
				t.Fatalf("the retry with the released token: %s", r.raw)
			}
			wantReject(t, pay(t, px.URL, tok), "replayed")
		})
	}
}

// TestUncheckedAnswersNeverReachUpstream: a call the guard did not resume
// reaches the upstream without inputResponses and without requestState,
// whatever the client put there (no member, null, an empty string), so an
// upstream that keeps no state never runs a resume nobody checked: a spent
// token's answers sent again without it are a first call.
func TestUncheckedAnswersNeverReachUpstream(t *testing.T) {
	up := newPayUpstream(t)
	px := startProxy(t, up.url(), nil, &mrtr.Options{Store: replay.NewMemory(nil)}, nil)
	tok := pause(t, px.URL, "pay", nil)
	if r := pay(t, px.URL, tok); r.text() != "paid" {
		t.Fatalf("resume: %s", r.raw)
	}
	wantReject(t, pay(t, px.URL, tok), "replayed")

	answers := `{"confirm":{"action":"accept","content":{"ok":true}}}`
	for name, state := range map[string]string{"absent": "", "null": `,"requestState":null`, "empty": `,"requestState":""`} {
		t.Run(name, func(t *testing.T) {
			n := len(up.calls())
			body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"pay","arguments":{}` + state +
				`,"inputResponses":` + answers + `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`
			req, _ := http.NewRequest(http.MethodPost, px.URL, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			r := reply{raw: readAll(resp)}
			decode(t, r.raw, &r)
			if r.resultType() != "input_required" {
				t.Fatalf("want the upstream's first round again, got %s", r.raw)
			}
			calls := up.calls()
			if len(calls) != n+1 {
				t.Fatalf("the upstream saw %d calls, want 1", len(calls)-n)
			}
			for _, k := range []string{"inputResponses", "requestState"} {
				if v, ok := calls[n][k]; ok {
					t.Errorf("the upstream received %s %s on a call the guard did not resume", k, v)
				}
			}
		})
	}
	if n := up.count(); n != 1 {
		t.Fatalf("%d payments, want 1", n)
	}
}
