package proxy_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// TestCompletedResumeSpendsToken: a resume the upstream completed, as JSON
// or over its event stream, spends the token: the same token again is
// refused as replayed and does not reach the upstream.
func TestCompletedResumeSpendsToken(t *testing.T) {
	for _, tool := range []string{"ask", "ask_sse"} {
		t.Run(tool, func(t *testing.T) {
			up := newUpstream(t)
			px := startProxy(t, up.url(), nil, &mrtr.Options{Store: replay.NewMemory(nil)}, nil)
			tok := pause(t, px.URL, tool, nil)
			if r := post(t, px.URL, callReq{id: 2, name: tool, state: ptr(tok), responses: confirmed()}); r.resultType() != "complete" {
				t.Fatalf("resume: %s", r.raw)
			}
			wantReject(t, post(t, px.URL, callReq{id: 3, name: tool, state: ptr(tok), responses: confirmed()}), "replayed")
			if n := len(up.resumes()); n != 1 {
				t.Fatalf("%d resumes reached the upstream, want 1", n)
			}
		})
	}
}

// promptUpstream pauses prompts/get "p" and resources/read "file:///r"
// once, then completes; the tools/call "flaky" pauses, answers its first
// resume with a JSON-RPC error and its second with a result.
func promptUpstream(t *testing.T) *scripted {
	var flaky atomic.Int32
	return newScripted(t, func(w http.ResponseWriter, m rpcMsg) {
		_, resumed := m.Params["requestState"]
		switch m.Method {
		case "prompts/get", "resources/read":
			if !resumed {
				writeResult(w, m.ID, inputRequired("up"))
				return
			}
			writeResult(w, m.ID, map[string]any{"resultType": "complete", "messages": []any{}, "contents": []any{}})
		case "tools/call":
			if !resumed {
				writeResult(w, m.ID, inputRequired("up"))
				return
			}
			if flaky.Add(1) == 1 {
				writeRPCError(w, m.ID, -32000, "try again")
				return
			}
			writeResult(w, m.ID, complete("done"))
		}
	})
}

func resumeBody(id int, method, target, args, tok string) string {
	key := "name"
	if method == "resources/read" {
		key = "uri"
	}
	p := fmt.Sprintf(`%q:%q,"requestState":%q,"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}}`, key, target, tok)
	if args != "" {
		p += `,"arguments":` + args
	}
	return rpcBody(id, method, p)
}

// TestPromptArgumentsBound: a prompt's token is bound to its arguments
// like a tool's: a resume with changed arguments is arguments_changed.
func TestPromptArgumentsBound(t *testing.T) {
	up := promptUpstream(t)
	px := startProxy(t, up.url(), nil, nil, nil)
	r := send(t, px.URL, rpcBody(1, "prompts/get", `"name":"p","arguments":{"env":"staging"}`), nil)
	if r.resultType() != "input_required" || r.state() == "" {
		t.Fatalf("first prompts/get: %s", r.raw)
	}
	wantReject(t, send(t, px.URL, resumeBody(2, "prompts/get", "p", `{"env":"production"}`, r.state()), nil), "arguments_changed")
	if r := send(t, px.URL, resumeBody(3, "prompts/get", "p", `{"env":"staging"}`, r.state()), nil); r.err != nil || r.resultType() != "complete" {
		t.Fatalf("resume with the same arguments: %s", r.raw)
	}
}

// TestUpstreamRPCErrorReleases: a resume the upstream answered with a
// JSON-RPC error does not spend the token (the reservation is released):
// the same token then resumes.
func TestUpstreamRPCErrorReleases(t *testing.T) {
	up := promptUpstream(t)
	px := startProxy(t, up.url(), nil, &mrtr.Options{Store: replay.NewMemory(nil)}, nil)
	r := send(t, px.URL, rpcBody(1, "tools/call", `"name":"flaky"`), nil)
	tok := r.state()
	if r = send(t, px.URL, resumeBody(2, "tools/call", "flaky", "", tok), nil); r.err == nil || r.err.Code != -32000 || string(r.id) != "2" {
		t.Fatalf("first resume: %s, want the upstream's -32000", r.raw)
	}
	if r = send(t, px.URL, resumeBody(3, "tools/call", "flaky", "", tok), nil); r.err != nil || r.text() != "done" {
		t.Fatalf("the token after the upstream's JSON-RPC error: %s, want it accepted", r.raw)
	}
}

// TestLocalhostSuffix: only localhost and names under .localhost are
// loopback names; evillocalhost is not.
func TestLocalhostSuffix(t *testing.T) {
	up := newUpstream(t)
	px := startProxy(t, up.url(), nil, nil, nil)
	for host, want := range map[string]int{
		"evillocalhost":         http.StatusForbidden,
		"evillocalhost:80":      http.StatusForbidden,
		"localhost.evil.com":    http.StatusForbidden,
		"mcp.localhost":         http.StatusOK,
		"mcp.localhost:8080":    http.StatusOK,
		"LOCALHOST":             http.StatusOK,
		"127.0.0.2":             http.StatusOK,
		"[::1]:9":               http.StatusOK,
		"127.0.0.1.evil.com:80": http.StatusForbidden,
	} {
		req, _ := http.NewRequest(http.MethodPost, px.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %q: status %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// TestSSEEndsBeforeResponse: an upstream event stream that ends after a
// notification, without the response, gets the client a -32603 event
// carrying its id.
func TestSSEEndsBeforeResponse(t *testing.T) {
	up := newScripted(t, func(w http.ResponseWriter, m rpcMsg) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
	})
	px := startProxy(t, up.url(), nil, nil, nil)
	r := send(t, px.URL, rpcBody(31, "tools/call", `"name":"x"`), nil)
	if !strings.HasPrefix(r.ctype, "text/event-stream") || !strings.Contains(string(r.raw), "notifications/progress") {
		t.Fatalf("the stream was not relayed: %q", r.raw)
	}
	wantError(t, "stream without a response", r, http.StatusOK, -32603, "31")
}

// TestPrincipalError: a Principal func that fails refuses the request with
// 401 before anything reaches the upstream, whatever principal it returned.
func TestPrincipalError(t *testing.T) {
	up := newUpstream(t)
	px := startProxy(t, up.url(), nil, nil, &proxy.Options{Principal: func(*http.Request) (reqstate.Principal, error) {
		return reqstate.Principal{}, errors.New("bad credentials")
	}})
	r := post(t, px.URL, callReq{id: 5, name: "ask"})
	wantError(t, "failing Principal", r, http.StatusUnauthorized, -32600, "5")
	if n := len(up.all()); n != 0 {
		t.Fatalf("%d requests reached the upstream", n)
	}
}

// TestUpstreamHTTPError: an upstream's non-2xx answer to a pausable call
// reaches the client as is, status, headers and body.
func TestUpstreamHTTPError(t *testing.T) {
	up := newScripted(t, func(w http.ResponseWriter, m rpcMsg) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Upstream-Reason", "busy")
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, "the upstream is busy")
	})
	px := startProxy(t, up.url(), nil, nil, nil)
	req, _ := http.NewRequest(http.MethodPost, px.URL, strings.NewReader(rpcBody(1, "tools/call", `"name":"x"`)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := string(readAll(resp))
	if resp.StatusCode != http.StatusConflict || body != "the upstream is busy" || resp.Header.Get("X-Upstream-Reason") != "busy" {
		t.Fatalf("got %d %q (X-Upstream-Reason %q), want the upstream's 409 as is", resp.StatusCode, body, resp.Header.Get("X-Upstream-Reason"))
	}
}

// TestHeldOverflow: a final message of a pausable call beyond
// MaxHeldBytes, as JSON or as one event, is answered with -32603 and the
// caller's id, never relayed cut.
func TestHeldOverflow(t *testing.T) {
	big := strings.Repeat("x", 2000)
	up := newScripted(t, func(w http.ResponseWriter, m rpcMsg) {
		name, _ := m.str("name")
		if name == "sse" {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"resultType\":\"complete\",\"content\":[{\"type\":\"text\",\"text\":%q}]}}\n\n", m.ID, big)
			return
		}
		writeResult(w, m.ID, complete(big))
	})
	for i, name := range []string{"json", "sse"} {
		var logs bytes.Buffer
		var mu sync.Mutex
		logger := slog.New(slog.NewTextHandler(&lockedBuf{b: &logs, mu: &mu}, nil))
		px := startProxy(t, up.url(), nil, nil, &proxy.Options{MaxHeldBytes: 1000, Logger: logger})
		r := send(t, px.URL, rpcBody(40+i, "tools/call", fmt.Sprintf("%q:%q", "name", name)), nil)
		wantError(t, name+" beyond the held limit", r, http.StatusOK, -32603, fmt.Sprint(40+i))
		if strings.Contains(string(r.raw), "xxxx") {
			t.Errorf("%s: part of the oversized message reached the client", name)
		}
		// The cause is the limit, not a cut message read as garbage.
		mu.Lock()
		if !strings.Contains(logs.String(), "held-message limit") {
			t.Errorf("%s: no log line naming the held-message limit:\n%s", name, logs.String())
		}
		mu.Unlock()
	}
}

// TestInputRequestsNotObject: an input_required result whose inputRequests
// is not an object is the upstream's fault: -32603, nothing sealed.
func TestInputRequestsNotObject(t *testing.T) {
	up := newScripted(t, func(w http.ResponseWriter, m rpcMsg) {
		writeResult(w, m.ID, map[string]any{"resultType": "input_required", "inputRequests": []any{elicit("confirm")}, "requestState": "s"})
	})
	px := startProxy(t, up.url(), nil, nil, nil)
	r := send(t, px.URL, rpcBody(6, "tools/call", `"name":"x"`), nil)
	wantError(t, "inputRequests an array", r, http.StatusOK, -32603, "6")
	if strings.Contains(string(r.raw), "requestState") {
		t.Errorf("a state was sealed: %s", r.raw)
	}
}

// TestBadClientParams: the proxy's own -32602 answers, none reaching the
// upstream: a requestState that is not a string (invalid, as any state
// the proxy did not seal), inputResponses that are not an object of
// answers (null and {} too, on a first call as on a resume, as the
// adapters refuse them), a tools/call or prompts/get without a name and a resources/read
// without a uri.
func TestBadClientParams(t *testing.T) {
	up := promptUpstream(t)
	px := startProxy(t, up.url(), nil, &mrtr.Options{Store: replay.NewMemory(nil)}, nil)
	tok := send(t, px.URL, rpcBody(1, "tools/call", `"name":"flaky"`), nil).state()
	before := len(up.received())
	for _, st := range []string{`5`, `{"s":"x"}`, `["x"]`, `true`} {
		wantReject(t, send(t, px.URL, rpcBody(2, "tools/call", `"name":"flaky","requestState":`+st), nil), "invalid")
	}
	for _, ir := range []string{`[]`, `"confirm"`, `5`, `null`, `{}`} {
		r := send(t, px.URL, rpcBody(3, "tools/call", `"name":"flaky","requestState":"`+tok+`","inputResponses":`+ir), nil)
		wantError(t, "inputResponses "+ir, r, http.StatusOK, -32602, "3")
	}
	for _, ir := range []string{`null`, `{}`, `5`} { // as the adapters: the guard decides
		r := send(t, px.URL, rpcBody(3, "tools/call", `"name":"flaky","inputResponses":`+ir), nil)
		wantError(t, "first call with inputResponses "+ir, r, http.StatusOK, -32602, "3")
	}
	for _, body := range []string{
		rpcBody(4, "tools/call", `"arguments":{}`),
		rpcBody(4, "tools/call", `"name":5`),
		rpcBody(4, "prompts/get", ""),
		rpcBody(4, "resources/read", `"name":"file:///r"`),
	} {
		wantError(t, body, send(t, px.URL, body, nil), http.StatusOK, -32602, "4")
	}
	if n := len(up.received()) - before; n != 0 {
		t.Fatalf("%d refused requests reached the upstream", n)
	}
}
