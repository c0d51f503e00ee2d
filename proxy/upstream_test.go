package proxy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// upState is the upstream's own requestState: characters that JSON
// escapes, so "byte for byte" is tested through escaping.
const upState = `up<&>"é\u2028` + "\t" + `state`

// seen is one request the test upstream received.
type seen struct {
	header http.Header
	params map[string]json.RawMessage
	method string
}

// upstream is a small hand-written 2026-07-28 MCP server: a few tools
// that pause the way real servers do, recording what reached it.
type upstream struct {
	t    *testing.T
	srv  *httptest.Server
	gate chan struct{} // the progress tool's final message waits for it

	mu     sync.Mutex
	seen   []seen
	broken bool // hijack and drop every connection
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{t: t, gate: make(chan struct{})}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) url() string { return u.srv.URL + "/mcp" }

func (u *upstream) setBroken(b bool) {
	u.mu.Lock()
	u.broken = b
	u.mu.Unlock()
}

// resumes returns the recorded tools/call requests that carried a
// requestState.
func (u *upstream) resumes() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []seen
	for _, s := range u.seen {
		if _, ok := s.params["requestState"]; ok {
			out = append(out, s)
		}
	}
	return out
}

func (u *upstream) all() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seen(nil), u.seen...)
}

func elicit(key string) map[string]any {
	return map[string]any{key: map[string]any{"method": "elicitation/create", "params": map[string]any{
		"message": "Please confirm", "requestedSchema": map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}},
	}}}
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	broken := u.broken
	u.mu.Unlock()
	if broken {
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var msg struct {
		ID     json.RawMessage            `json:"id"`
		Method string                     `json:"method"`
		Params map[string]json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	u.mu.Lock()
	u.seen = append(u.seen, seen{header: r.Header.Clone(), params: msg.Params, method: msg.Method})
	u.mu.Unlock()
	reply := func(result map[string]any) {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": result})
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	}
	var name string
	json.Unmarshal(msg.Params["name"], &name)
	state, hasState := msg.Params["requestState"]
	var st string
	json.Unmarshal(state, &st)
	if msg.Method != "tools/call" {
		reply(map[string]any{"resultType": "complete", "tools": []any{}})
		return
	}
	switch name {
	case "ask", "ask2", "ask_sse":
		if !hasState {
			res := map[string]any{"resultType": "input_required", "inputRequests": elicit("confirm"), "requestState": upState}
			if name == "ask_sse" {
				u.sse(w, msg.ID, nil, res)
				return
			}
			reply(res)
			return
		}
		answers := "none"
		if a, ok := msg.Params["inputResponses"]; ok {
			answers = string(a)
		}
		res := map[string]any{"resultType": "complete", "content": []any{map[string]any{"type": "text", "text": "state=" + st + " answers=" + answers}}}
		if name == "ask_sse" {
			u.sse(w, msg.ID, nil, res)
			return
		}
		reply(res)
	case "nostate":
		if _, ok := msg.Params["inputResponses"]; !ok {
			reply(map[string]any{"resultType": "input_required", "inputRequests": elicit("confirm")})
			return
		}
		reply(map[string]any{"resultType": "complete", "content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("hasState=%v", hasState)}}})
	case "loop":
		reply(map[string]any{"resultType": "input_required", "inputRequests": elicit("again"), "requestState": "loop:" + st})
	case "sample":
		reply(map[string]any{"resultType": "input_required", "inputRequests": map[string]any{
			"draft": map[string]any{"method": "sampling/createMessage", "params": map[string]any{"messages": []any{}, "maxTokens": 5}},
		}, "requestState": "s"})
	case "big":
		var args struct{ Size int }
		json.Unmarshal(msg.Params["arguments"], &args)
		if hasState {
			reply(map[string]any{"resultType": "complete", "content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("len=%d", len(st))}}})
			return
		}
		reply(map[string]any{"resultType": "input_required", "requestState": strings.Repeat("x", args.Size)})
	case "garbage":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`)
	case "slow":
		<-r.Context().Done()
	case "progress":
		note := map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": map[string]any{"progressToken": "p1", "progress": 1, "total": 2}}
		u.sse(w, msg.ID, note, nil)
	default:
		reply(map[string]any{"resultType": "complete", "content": []any{}})
	}
}

// sse answers with an event stream: note first (if any); then, for the
// progress tool, waits for the gate (the test opens it once the client
// has seen the notification) before the final input_required result.
func (u *upstream) sse(w http.ResponseWriter, id json.RawMessage, note, res map[string]any) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if note != nil {
		b, _ := json.Marshal(note)
		fmt.Fprintf(w, "event: message\ndata: %s\n\n", b)
		rc.Flush()
		select {
		case <-u.gate:
			res = map[string]any{"resultType": "input_required", "inputRequests": elicit("confirm"), "requestState": upState}
		case <-time.After(30 * time.Second):
			// Not a timing assertion: a fallback so a buffering proxy
			// fails the test instead of hanging it.
			res = map[string]any{"resultType": "complete", "content": []any{map[string]any{"type": "text", "text": "the client never saw the progress notification"}}}
		}
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": res})
	fmt.Fprintf(w, "event: message\nid: 7\ndata: %s\n\n", b)
	rc.Flush()
}
