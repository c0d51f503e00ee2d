package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/internal/bridge"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/internal/rpc"
	"github.com/mrtr-go/mrtr/reqstate"
)

func rpcResult(id json.RawMessage, v any) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": id, "result": v}
}

func initAnswer(m *rpc.Message, caps map[string]any) map[string]any {
	return rpcResult(m.ID, map[string]any{"protocolVersion": "2025-11-25", "capabilities": caps, "serverInfo": map[string]any{"name": "s", "version": "1"}})
}

// TestBridgedInitializeRefused: a session whose upstream refuses the
// initialize, or answers it without a protocolVersion, is not used: the
// call gets an error, the child is stopped, and Ready says why.
func TestBridgedInitializeRefused(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer func(m *rpc.Message) any
	}{
		{"refused", func(m *rpc.Message) any {
			return map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32602, "message": "no"}}
		}},
		{"no protocolVersion", func(m *rpc.Message) any {
			return rpcResult(m.ID, map[string]any{"capabilities": map[string]any{}, "serverInfo": map[string]any{"name": "s", "version": "1"}})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			kids := &scriptKids{answer: c.answer}
			b := bridge.New(bridge.Options{Dial: kids.dial})
			t.Cleanup(func() { b.Close(context.Background()) })
			r := straight(t, b, reqstate.Principal{}, "tools/list", map[string]any{}, nil)
			if r.Error == nil || !strings.Contains(r.Error.Message, "could not be initialized") {
				t.Fatalf("a call on an upstream that failed its initialize: %s", r.raw)
			}
			started := kids.list()
			if len(started) != 1 {
				t.Fatalf("%d children started, want 1", len(started))
			}
			stoppedNow(t, started[0], "a session whose initialize failed, once its call was answered")
			if err := b.Ready(context.Background()); err == nil {
				t.Fatal("Ready says nothing of the failed initialize")
			}
			if st := b.Stats(); st.Sessions != 0 {
				t.Fatalf("after a failed initialize: %+v", st)
			}
		})
	}
}

// TestUpstreamDiesMidCall: an upstream that exits while a call is in
// flight (not held) ends the call with an error at once, not a hang, and
// the next call gets a new session.
func TestUpstreamDiesMidCall(t *testing.T) {
	entered := make(chan struct{}, 1)
	kids := &children{srv: oldServer(entered)}
	b := bridge.New(bridge.Options{Dial: kids.dial})
	t.Cleanup(func() { b.Close(context.Background()) })
	got := make(chan result, 1)
	go func() { got <- straight(t, b, reqstate.Principal{}, "tools/call", tool("wait", nil, "", nil), nil) }()
	select {
	case <-entered:
	case <-time.After(waitFor):
		t.Fatal("the call did not reach the upstream")
	}
	kids.list()[0].kill()
	select {
	case r := <-got:
		if r.Error == nil || !strings.Contains(r.Error.Message, "upstream ended during the call") {
			t.Fatalf("a call whose upstream exited: %s", r.raw)
		}
	case <-time.After(waitFor):
		t.Fatal("a call whose upstream exited got no answer")
	}
	if r := straight(t, b, reqstate.Principal{}, "tools/call", tool("count", nil, "", nil), nil); r.text() != "1" {
		t.Fatalf("the next call: %s", r.raw)
	}
	if n := len(kids.list()); n != 2 {
		t.Fatalf("%d children started, want 2", n)
	}
}

// TestUpstreamRequestsDuringCall: during a bridged call, the upstream's
// ping is answered with an empty result and a request the bridge has no
// use for with -32601; the call goes on to its result.
func TestUpstreamRequestsDuringCall(t *testing.T) {
	var mu sync.Mutex
	answers := map[string]*rpc.Message{}
	var callID json.RawMessage
	kids := &scriptKids{
		answer: func(m *rpc.Message) any {
			switch m.Method {
			case "initialize":
				return initAnswer(m, map[string]any{})
			case "tools/call":
				mu.Lock()
				callID = m.ID
				mu.Unlock()
				return []any{
					map[string]any{"jsonrpc": "2.0", "id": "p", "method": "ping"},
					map[string]any{"jsonrpc": "2.0", "id": "u", "method": "example/unknown"},
				}
			}
			return nil
		},
		responded: func(m *rpc.Message) any {
			mu.Lock()
			defer mu.Unlock()
			answers[string(m.ID)] = m
			if len(answers) == 2 { // both answered: the call ends
				return rpcResult(callID, map[string]any{"content": []any{map[string]any{"type": "text", "text": "ok"}}})
			}
			return nil
		},
	}
	b := bridge.New(bridge.Options{Dial: kids.dial})
	t.Cleanup(func() { b.Close(context.Background()) })
	done := make(chan result, 1)
	go func() { done <- straight(t, b, reqstate.Principal{}, "tools/call", tool("x", nil, "", nil), nil) }()
	select {
	case r := <-done:
		if r.text() != "ok" {
			t.Fatalf("the call: %s", r.raw)
		}
	case <-time.After(waitFor):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("the call did not end: the upstream's requests got %v", answers)
	}
	mu.Lock()
	defer mu.Unlock()
	if r := answers[`"p"`]; r == nil || string(r.Result) != "{}" {
		t.Errorf("ping during a call: %+v, want an empty result", r)
	}
	if r := answers[`"u"`]; r == nil || r.Error == nil || !strings.Contains(string(r.Error), "-32601") {
		t.Errorf("an unknown request during a call: %+v, want -32601", r)
	}
}

// TestBridgedProgress: the upstream's progress and log notifications
// during a bridged call reach a client that accepts an event stream,
// before the call's result.
func TestBridgedProgress(t *testing.T) {
	kids := &scriptKids{answer: func(m *rpc.Message) any {
		switch m.Method {
		case "initialize":
			return initAnswer(m, map[string]any{})
		case "tools/call":
			meta, _ := mcpwire.Member(m.Params, "_meta")
			tok, _ := mcpwire.Member(meta, "progressToken")
			return []any{
				map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": map[string]any{"progressToken": json.RawMessage(tok), "progress": 1}},
				map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"level": "info", "data": "working"}},
				rpcResult(m.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": "ok"}}}),
			}
		}
		return nil
	}}
	b := bridge.New(bridge.Options{Dial: kids.dial})
	t.Cleanup(func() { b.Close(context.Background()) })
	p := tool("x", nil, "", nil)
	p["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": allCaps, "progressToken": "t1"}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": p})
	resp, raw := sendRaw(t, context.Background(), b, reqstate.Principal{}, nil, body)
	if r := decodeResult(t, resp, raw); r.text() != "ok" {
		t.Fatalf("the call: %s", raw)
	}
	progress := bytes.Index(raw, []byte(`"progressToken":"t1"`))
	message := bytes.Index(raw, []byte(`"notifications/message"`))
	final := bytes.Index(raw, []byte(`"id":9`))
	if progress < 0 || message < 0 || progress > final || message > final {
		t.Fatalf("the client's stream: %s, want the progress and the log message before the result", raw)
	}
}

// TestResumeAnswerNotAnObject: an answer that is not a JSON object is no
// answer: the upstream's request is asked again, and an object answers it.
func TestResumeAnswerNotAnObject(t *testing.T) {
	b, _ := newSessionBridge(t, bridge.Options{})
	r := straight(t, b, reqstate.Principal{}, "tools/call", tool("ask", nil, "", nil), nil)
	k, _ := onlyKey(t, r)
	for _, bad := range []any{"yes", []any{answer("x")}, nil} {
		r = straight(t, b, reqstate.Principal{}, "tools/call", tool("ask", nil, r.Result.RequestState, map[string]any{k: bad}), nil)
		if again, _ := onlyKey(t, r); again != k {
			t.Fatalf("after the answer %v: asked %q, want %q again", bad, again, k)
		}
	}
	if r = straight(t, b, reqstate.Principal{}, "tools/call", tool("ask", nil, r.Result.RequestState, map[string]any{k: answer("x")}), nil); r.text() != "got x" {
		t.Fatalf("the object answer: %s", r.raw)
	}
}

// TestResourceNotFoundCode: a 2025-11-25 upstream's resource not found
// (-32002) is 2026-07-28's -32602 on resources/read; other methods' codes
// pass as they are.
func TestResourceNotFoundCode(t *testing.T) {
	kids := &scriptKids{answer: func(m *rpc.Message) any {
		if m.Method == "initialize" {
			return initAnswer(m, map[string]any{})
		}
		return map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32002, "message": "not found"}}
	}}
	b := bridge.New(bridge.Options{Dial: kids.dial})
	t.Cleanup(func() { b.Close(context.Background()) })
	if r := straight(t, b, reqstate.Principal{}, "resources/read", map[string]any{"uri": "file:///x"}, nil); r.Error == nil || r.Error.Code != -32602 {
		t.Fatalf("resources/read not found: %s, want -32602", r.raw)
	}
	if r := straight(t, b, reqstate.Principal{}, "tools/call", tool("x", nil, "", nil), nil); r.Error == nil || r.Error.Code != -32002 {
		t.Fatalf("tools/call's -32002: %s, want it as it is", r.raw)
	}
}

// TestDiscoverCapabilities: server/discover tells the upstream's
// capabilities without listChanged, whose notifications the bridge does
// not serve (no subscriptions/listen), and keeps the others as they are.
func TestDiscoverCapabilities(t *testing.T) {
	kids := &scriptKids{answer: func(m *rpc.Message) any {
		if m.Method == "initialize" {
			return initAnswer(m, map[string]any{"tools": map[string]any{"listChanged": true}, "prompts": map[string]any{"listChanged": true},
				"resources": map[string]any{"listChanged": true, "subscribe": true}, "logging": map[string]any{}, "completions": map[string]any{}})
		}
		return nil
	}}
	b := bridge.New(bridge.Options{Dial: kids.dial})
	t.Cleanup(func() { b.Close(context.Background()) })
	r := straight(t, b, reqstate.Principal{}, "server/discover", map[string]any{}, nil)
	var res struct {
		Result struct {
			Capabilities map[string]json.RawMessage `json:"capabilities"`
		} `json:"result"`
	}
	if err := json.Unmarshal(r.raw, &res); err != nil {
		t.Fatalf("discover: %s", r.raw)
	}
	want := map[string]string{"tools": "{}", "prompts": "{}", "resources": "{}", "logging": "{}", "completions": "{}"}
	if len(res.Result.Capabilities) != len(want) {
		t.Fatalf("discover's capabilities: %s", r.raw)
	}
	for k, v := range want {
		if string(res.Result.Capabilities[k]) != v {
			t.Errorf("capability %s: %s, want %s", k, res.Result.Capabilities[k], v)
		}
	}
}

// TestDirectRestartsChild: a Direct whose shared child exited starts it
// again on the next request.
func TestDirectRestartsChild(t *testing.T) {
	var runs atomic.Int32
	kids := &children{srv: modernServer(&runs)}
	d := bridge.NewDirect(kids.dial, nil)
	t.Cleanup(func() { d.Close(context.Background()) })
	list := func() result {
		t.Helper()
		p := map[string]any{"_meta": modernMeta()}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": p})
		resp, raw := sendRaw(t, context.Background(), d, reqstate.Principal{}, standardHeader("tools/list", p), body)
		return decodeResult(t, resp, raw)
	}
	if r := list(); len(r.Result.Tools) != 1 {
		t.Fatalf("tools/list: %s", r.raw)
	}
	kids.list()[0].kill()
	deadline := time.Now().Add(waitFor)
	for d.Running() {
		if time.Now().After(deadline) {
			t.Fatal("the Direct did not notice its child exited")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r := list(); len(r.Result.Tools) != 1 {
		t.Fatalf("tools/list after the child exited: %s", r.raw)
	}
	if n := len(kids.list()); n != 2 || !d.Running() {
		t.Fatalf("%d children started, want 2, the second running", n)
	}
}

// TestEvictedSessionStopped: an idle session stopped to make room for
// another caller's (MaxSessions) has its child stopped, not merely
// forgotten.
func TestEvictedSessionStopped(t *testing.T) {
	b, kids := newSessionBridge(t, bridge.Options{MaxSessions: 1})
	if r := straight(t, b, user("alice"), "tools/call", tool("count", nil, "", nil), nil); r.text() != "1" {
		t.Fatalf("alice: %s", r.raw)
	}
	if r := straight(t, b, user("bob"), "tools/call", tool("count", nil, "", nil), nil); r.text() != "1" {
		t.Fatalf("bob, with alice's session idle: %s", r.raw)
	}
	stopped(t, kids.list()[0], "alice's idle session, evicted for bob's")
}
