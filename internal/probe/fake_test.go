package probe

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// fakeTool is one tool of a fakeServer.
type fakeTool struct {
	name string
	// pauses is how many calls without a state pause (each with a state
	// of its own, asking "confirm"); -1 means every one.
	pauses int
	// stray makes the pauses ask roots/list ("roots") instead, as a
	// server relaying a fresh process's one roots/list would.
	stray bool
	// rounds is how many rounds a flow has: an honest resume of a round
	// before the last pauses again with a new state; 0 means 1.
	rounds int
}

// fakeRefusal is how a fakeServer answers a state it did not issue for
// this tool and these arguments.
type fakeRefusal struct {
	status  int    // HTTP status; 0 means 200
	id      string // the response's id (JSON); "" means the request's
	code    int    // 0 means -32602
	message string // "" means "invalid requestState"
	reason  string // data.reason, if any
	noBody  bool   // the status alone, no JSON-RPC response
	hang    bool   // no answer until the client gives up
}

// fakeServer is a 2026-07-28 MCP server over Streamable HTTP (JSON
// answers) that keeps its states server-side, as a bridging proxy holds a
// child per paused call: a state is a random handle, good once, for the
// tool, arguments and caller (Authorization) it was issued for. Anything
// else gets refusal, and leaves the flow held until it is resumed
// honestly. legacy makes it a 2025-11-25 server instead.
type fakeServer struct {
	tools   []*fakeTool
	refuse  fakeRefusal
	legacy  bool
	prompts bool // list one prompt that never pauses

	mu     sync.Mutex
	calls  map[string]int
	issued map[string]fakeFlow // state -> the flow it paused, held until resumed honestly
	hits   int
	paused int // flows paused (a call without a state that paused)
	ended  int // flows ended (resumed honestly to their last round)
	// declined counts the honest resumes whose every answer declined.
	declined int
}

// fakeFlow is a paused flow of a fakeServer.
type fakeFlow struct {
	bound string // tool, arguments and caller
	round int    // the round paused, from 1
}

type fakeRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name           string          `json:"name"`
		Arguments      json.RawMessage `json:"arguments"`
		RequestState   json.RawMessage `json:"requestState"`
		InputResponses json.RawMessage `json:"inputResponses"`
	} `json:"params"`
}

// start serves f on 127.0.0.1 and returns its URL.
func (f *fakeServer) start(t *testing.T) string {
	t.Helper()
	f.calls, f.issued = map[string]int{}, map[string]fakeFlow{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.hits++
	f.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	var req fakeRequest
	if json.Unmarshal(body, &req) != nil {
		http.Error(w, "bad JSON", http.StatusBadRequest)
		return
	}
	reply := func(status int, id json.RawMessage, v map[string]any) {
		v["jsonrpc"], v["id"] = "2.0", id
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	result := func(v any) { reply(http.StatusOK, req.ID, map[string]any{"result": v}) }
	rpcErr := func(code int, msg string) {
		reply(http.StatusOK, req.ID, map[string]any{"error": map[string]any{"code": code, "message": msg}})
	}
	switch {
	case f.legacy && req.Method == "initialize":
		result(map[string]any{"protocolVersion": LegacyVersion, "capabilities": map[string]any{}, "serverInfo": map[string]any{"name": "fake", "version": "1"}})
		return
	case f.legacy:
		reply(http.StatusBadRequest, req.ID, map[string]any{"error": map[string]any{"code": -32022, "message": "unsupported protocol version"}})
		return
	}
	switch req.Method {
	case "tools/list":
		var ts []map[string]any
		for _, tl := range f.tools {
			ts = append(ts, map[string]any{"name": tl.name, "inputSchema": map[string]any{"type": "object"}})
		}
		result(map[string]any{"tools": ts})
	case "prompts/list":
		if !f.prompts {
			rpcErr(-32601, "Method not found")
			return
		}
		result(map[string]any{"prompts": []any{map[string]any{"name": "summary"}}})
	case "prompts/get":
		result(map[string]any{"messages": []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "a summary"}}}})
	case "resources/list":
		rpcErr(-32601, "Method not found")
	case "tools/call":
		f.call(w, r, &req, result)
	default:
		rpcErr(-32601, "Method not found")
	}
}

func (f *fakeServer) call(w http.ResponseWriter, r *http.Request, req *fakeRequest, result func(any)) {
	var tl *fakeTool
	for _, t := range f.tools {
		if t.name == req.Params.Name {
			tl = t
		}
	}
	if tl == nil {
		result(map[string]any{"isError": true, "content": []any{map[string]any{"type": "text", "text": "no such tool"}}})
		return
	}
	bound := tl.name + "\x00" + canonical(req.Params.Arguments) + "\x00" + r.Header.Get("Authorization")
	pause := func(round int) {
		b := make([]byte, 16)
		rand.Read(b)
		st := hex.EncodeToString(b)
		f.mu.Lock()
		f.issued[st] = fakeFlow{bound: bound, round: round}
		f.mu.Unlock()
		key, ask := "confirm", map[string]any{"method": "elicitation/create", "params": map[string]any{"message": "Go on?",
			"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}}}}
		if tl.stray {
			key, ask = "roots", map[string]any{"method": "roots/list"}
		}
		result(map[string]any{"resultType": "input_required", "requestState": st, "inputRequests": map[string]any{key: ask}})
	}
	if req.Params.RequestState == nil {
		f.mu.Lock()
		n := f.calls[tl.name]
		f.calls[tl.name]++
		f.mu.Unlock()
		if tl.pauses >= 0 && n >= tl.pauses {
			result(map[string]any{"content": []any{map[string]any{"type": "text", "text": "nothing to ask"}}})
			return
		}
		f.mu.Lock()
		f.paused++
		f.mu.Unlock()
		pause(1)
		return
	}
	var st string
	ok := json.Unmarshal(req.Params.RequestState, &st) == nil
	var fl fakeFlow
	if ok {
		f.mu.Lock()
		fl, ok = f.issued[st]
		ok = ok && fl.bound == bound
		if ok {
			delete(f.issued, st)
			if declines(req.Params.InputResponses) {
				f.declined++
			}
			if fl.round >= max(tl.rounds, 1) {
				f.ended++
			}
		}
		f.mu.Unlock()
	}
	switch {
	case ok && fl.round < max(tl.rounds, 1):
		pause(fl.round + 1)
	case ok:
		result(map[string]any{"content": []any{map[string]any{"type": "text", "text": "done: " + tl.name}}})
	default:
		f.refused(w, r, req)
	}
}

func (f *fakeServer) refused(w http.ResponseWriter, r *http.Request, req *fakeRequest) {
	rf := f.refuse
	if rf.hang {
		<-r.Context().Done()
		return
	}
	status := rf.status
	if status == 0 {
		status = http.StatusOK
	}
	if rf.noBody {
		w.WriteHeader(status)
		return
	}
	id := req.ID
	if rf.id != "" {
		id = json.RawMessage(rf.id)
	}
	e := map[string]any{"code": -32602, "message": "invalid requestState"}
	if rf.code != 0 {
		e["code"] = rf.code
	}
	if rf.message != "" {
		e["message"] = rf.message
	}
	if rf.reason != "" {
		e["data"] = map[string]any{"reason": rf.reason}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id, "error": e})
}

// declines reports whether every input response in raw declines (a form
// with action decline, or roots with none).
func declines(raw json.RawMessage) bool {
	var rs map[string]map[string]json.RawMessage
	if json.Unmarshal(raw, &rs) != nil || len(rs) == 0 {
		return false
	}
	for _, r := range rs {
		if string(r["action"]) != `"decline"` && string(r["roots"]) != `[]` {
			return false
		}
	}
	return true
}

// held returns how many flows f paused, ended, and still holds.
func (f *fakeServer) held() (paused, ended, held int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.paused, f.ended, len(f.issued)
}

// canonical re-encodes JSON with sorted keys ("" for none).
func canonical(raw json.RawMessage) string {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// sealed returns n tools that pause every time.
func sealed(names ...string) []*fakeTool {
	var ts []*fakeTool
	for _, n := range names {
		ts = append(ts, &fakeTool{name: n, pauses: -1})
	}
	return ts
}

// runFake probes f and fails t on a Run error.
func runFake(t *testing.T, f *fakeServer, opts *Options) *Report {
	t.Helper()
	rep, err := Run(t.Context(), &HTTPTarget{URL: f.start(t)}, opts)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return rep
}
