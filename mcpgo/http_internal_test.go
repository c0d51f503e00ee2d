package mcpgo

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/mrtr-go/mrtr/internal/adapt"
)

func TestNullResponses(t *testing.T) {
	for body, want := range map[string]bool{
		`{"params":{"inputResponses":null}}`:               true,
		`{"params":{"inputResponses": {} }}`:               true,
		`{"params":{"inputResponses":{"a":{}}}}`:           false,
		`{"params":{}}`:                                    false,
		`{"params":{"arguments":{"inputResponses":null}}}`: false,
		`not json "inputResponses"`:                        false,
	} {
		if got := nullResponses([]byte(body)); got != want {
			t.Errorf("%s: %v, want %v", body, got, want)
		}
	}
}

// FuzzNullResponses: any request body, never a panic, and a true answer
// only for a body whose params.inputResponses is null or {}.
func FuzzNullResponses(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"inputResponses":null}}`))
	f.Add([]byte(`{"params":{"inputResponses":{}}}`))
	f.Add([]byte(`{"params":{"inputResponses":[]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if !nullResponses(body) {
			return
		}
		var m struct {
			Params struct {
				InputResponses *map[string]any `json:"inputResponses"`
			} `json:"params"`
		}
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("true for a body that does not decode: %v", err)
		}
		if r := m.Params.InputResponses; r != nil && len(*r) > 0 {
			t.Fatalf("true for inputResponses %v", *r)
		}
	})
}

// FuzzRewriteMessage: any response message, never a panic; a rewrite is
// always the recorded error with the message's id.
func FuzzRewriteMessage(f *testing.F) {
	pending := map[string]*adapt.WireError{"invalid requestState (reason: expired)": {Code: -32602, Message: "invalid requestState", Data: json.RawMessage(`{"reason":"expired"}`)}}
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"invalid requestState (reason: expired)"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","error":{"code":-32603,"message":"other"}}`))
	f.Fuzz(func(t *testing.T, msg []byte) {
		out, code, ok := (&rewrites{pending: pending}).message(msg)
		if !ok {
			return
		}
		var m struct {
			ID    json.RawMessage
			Error struct {
				Code int
				Data json.RawMessage
			}
		}
		if err := json.Unmarshal(out, &m); err != nil || code != -32602 || m.Error.Code != -32602 || !bytes.Equal(m.Error.Data, pending["invalid requestState (reason: expired)"].Data) {
			t.Fatalf("rewrite %s -> %s (%d): %v", msg, out, code, err)
		}
	})
}

// FuzzRewriteTasks: with a tasks answer and a CreateTaskResult recorded,
// any response message either passes or is rewritten into the recorded
// answer, error or result under the message's own id.
func FuzzRewriteTasks(f *testing.F) {
	created := json.RawMessage(`{"resultType":"task","taskId":"t1","status":"working"}`)
	rs := &rewrites{reply: &taskReply{err: adapt.UnknownTask}, created: created}
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"` + taskAnswered + `"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","result":{"content":[]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"result":1}}`))
	f.Fuzz(func(t *testing.T, msg []byte) {
		out, code, ok := rs.message(msg)
		if !ok {
			return
		}
		var in, m struct {
			ID     any
			Result json.RawMessage
			Error  *struct{ Code int }
		}
		if json.Unmarshal(msg, &in) != nil || json.Unmarshal(out, &m) != nil || !reflect.DeepEqual(in.ID, m.ID) {
			t.Fatalf("rewrite %s -> %s", msg, out)
		}
		switch {
		case m.Error != nil && (code != -32602 || m.Error.Code != -32602):
			t.Fatalf("rewrite %s -> %s (%d)", msg, out, code)
		case m.Error == nil && (code != 0 || !bytes.Equal(m.Result, created)):
			t.Fatalf("rewrite %s -> %s (%d)", msg, out, code)
		}
	})
}

// The rewriter reads an event stream with mcpwire's one reading of the
// format: a contract error is rewritten whether mcp-go writes its event
// in one piece or several, with one data line or many, LF or CR line
// ends; other events pass byte for byte.
func TestRewriterEventStream(t *testing.T) {
	const text = "invalid requestState (reason: expired)"
	pending := map[string]*adapt.WireError{text: {Code: -32602, Message: "invalid requestState", Data: json.RawMessage(`{"reason":"expired"}`)}}
	msg := `{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"` + text + `"}}`
	cut := strings.Index(msg, `"error"`) // between two tokens: a line end there is JSON whitespace
	notice := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n"
	for name, pieces := range map[string][]string{
		"one piece":   {notice + "event: message\ndata: " + msg + "\n\n"},
		"split":       {notice + "event: message\ndata: " + msg[:20], msg[20:] + "\n", "\n"},
		"multi-line":  {notice, "event: message\ndata: " + msg[:cut] + "\ndata: " + msg[cut:] + "\n\n"},
		"CR line end": {notice, "event: message\rdata: " + msg + "\r\r"},
	} {
		rec := httptest.NewRecorder()
		rec.Header().Set("Content-Type", "text/event-stream")
		rw := &rewriter{w: rec, x: &exchange{pending: pending}}
		for _, p := range pieces {
			if n, err := rw.Write([]byte(p)); n != len(p) || err != nil {
				t.Fatalf("%s: Write %d, %v", name, n, err)
			}
		}
		rw.finish()
		out := rec.Body.String()
		if !strings.HasPrefix(out, notice) || !strings.Contains(out, `"code":-32602`) || !strings.Contains(out, `"data":{"reason":"expired"}`) || strings.Contains(out, "-32603") {
			t.Errorf("%s: %q", name, out)
		}
	}
}

// Handler adds two allocations to a request it passes on: its own state
// (the exchange, the rewriter, the context carrying the exchange and the
// body's reader, together) and the request copy carrying that context.
// The body buffer is pooled. next still reads the body and finds the
// exchange.
func TestHandlerAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops pooled items at random")
	}
	a := &Adapter{}
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"deploy","requestState":"v1.bench.AAAA"}}`
	var got []byte
	var found bool
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		found = exchangeFrom(r.Context()) != nil
	})
	h := a.Handler(next)
	w := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	rd := strings.NewReader(body)
	serve := func(h http.Handler) func() {
		return func() {
			rd.Reset(body)
			req.Body = io.NopCloser(rd)
			h.ServeHTTP(w, req)
		}
	}
	alone := testing.AllocsPerRun(100, serve(next))
	n := testing.AllocsPerRun(100, serve(h))
	if string(got) != body || !found {
		t.Fatalf("next read %q, exchange found %v", got, found)
	}
	if n -= alone; n > 2 {
		t.Errorf("Handler adds %v allocations to a request, want at most 2", n)
	}
	// The event splitter is allocated only for a stream written in pieces.
	if size := unsafe.Sizeof(handlerState{}); size > 224 {
		t.Errorf("Handler's state per request takes %d bytes, want at most 224", size)
	}
}
