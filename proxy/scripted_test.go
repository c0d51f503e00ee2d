package proxy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// rpcMsg is one JSON-RPC message a scripted upstream received.
type rpcMsg struct {
	ID     json.RawMessage            `json:"id"`
	Method string                     `json:"method"`
	Params map[string]json.RawMessage `json:"params"`
	header http.Header
}

func (m rpcMsg) str(key string) (string, bool) {
	raw, ok := m.Params[key]
	var s string
	return s, ok && json.Unmarshal(raw, &s) == nil
}

// scripted is an upstream whose every POST is answered by a function of
// the test, recording what reached it.
type scripted struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []rpcMsg
}

func newScripted(t *testing.T, answer func(w http.ResponseWriter, m rpcMsg)) *scripted {
	t.Helper()
	s := &scripted{}
	s.srv = httptest.NewServer(s.handler(answer))
	t.Cleanup(s.srv.Close)
	return s
}

// handler answers every POST with answer, recording what reached it.
func (s *scripted) handler(answer func(w http.ResponseWriter, m rpcMsg)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m rpcMsg
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		m.header = r.Header.Clone()
		s.mu.Lock()
		s.got = append(s.got, m)
		s.mu.Unlock()
		answer(w, m)
	})
}

func (s *scripted) url() string { return s.srv.URL + "/mcp" }

func (s *scripted) received() []rpcMsg {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]rpcMsg(nil), s.got...)
}

func writeResult(w http.ResponseWriter, id json.RawMessage, result any) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func writeRPCError(w http.ResponseWriter, id json.RawMessage, code int, message string) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": message}})
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func inputRequired(state string) map[string]any {
	return map[string]any{"resultType": "input_required", "inputRequests": elicit("confirm"), "requestState": state}
}

func complete(text string) map[string]any {
	return map[string]any{"resultType": "complete", "content": []any{map[string]any{"type": "text", "text": text}}}
}

const testMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`

// rpcBody is a request of method with the test _meta and the given params
// members (raw JSON, without braces).
func rpcBody(id int, method, params string) string {
	if params != "" {
		params = "," + params
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s%s}}`, id, method, testMeta, params)
}

// send POSTs a raw body with the given headers only (plus the content
// negotiation ones) and decodes the final message, JSON or the last
// response of an event stream.
func send(t *testing.T, url, body string, hd http.Header) reply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, vs := range hd {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r := reply{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), raw: b}
	msg := b
	if strings.HasPrefix(r.ctype, "text/event-stream") {
		msg = nil
		for _, ev := range events(b) {
			if bytes.Contains(ev, []byte(`"result"`)) || bytes.Contains(ev, []byte(`"error"`)) {
				msg = ev
			}
		}
	}
	decode(t, msg, &r)
	return r
}

func wantError(t *testing.T, what string, r reply, status, code int, id string) {
	t.Helper()
	if r.status != status || r.err == nil || r.err.Code != code || string(r.id) != id {
		t.Errorf("%s: got %d %s; want HTTP %d, error %d, id %s", what, r.status, r.raw, status, code, id)
	}
}
