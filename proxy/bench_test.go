package proxy_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/proxy"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// memUpstream answers in memory, without a network: a call without
// requestState pauses with a plain state, one with a state completes. With
// sse set it answers as go-sdk's servers do, with a per-POST event stream
// holding the one response.
type memUpstream struct{ sse bool }

func (m memUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	const pauseBody = `{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"Deploy web to production?","requestedSchema":{"type":"object","properties":{"approve":{"type":"boolean"}},"required":["approve"]}}}},"requestState":"{\"service\":\"web\",\"env\":\"production\",\"step\":1}"}}`
	const doneBody = `{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","content":[{"type":"text","text":"deployed web to production"}]}}`
	body, _ := io.ReadAll(r.Body)
	out := pauseBody
	if bytes.Contains(body, []byte(`"requestState"`)) {
		out = doneBody
	}
	// The answer carries the request's id, as the proxy checks: cut from
	// the body as benchBody writes it (the members sorted, id first).
	if _, rest, ok := bytes.Cut(body, []byte(`{"id":`)); ok {
		if id, _, ok := bytes.Cut(rest, []byte(`,"jsonrpc"`)); ok {
			i := strings.Index(out, `,"result"`)
			out = `{"jsonrpc":"2.0","id":` + string(id) + out[i:]
		}
	}
	if m.sse {
		out = "event: message\nid: 1_0\ndata: " + out + "\n\n"
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}, "Cache-Control": {"no-cache, no-transform"}},
			Body: io.NopCloser(bytes.NewReader([]byte(out))), ContentLength: -1, Request: r}, nil
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}, "Content-Length": {strconv.Itoa(len(out))}},
		Body: io.NopCloser(bytes.NewReader([]byte(out))), ContentLength: int64(len(out)), Request: r}, nil
}

func benchBody(id int, state string) []byte {
	params := map[string]any{"name": "deploy", "arguments": map[string]any{"service": "web", "env": "production"},
		"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "bench", "version": "1"},
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
		}}
	if state != "" {
		params["requestState"] = state
		params["inputResponses"] = map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
	return b
}

// BenchmarkHandlerFlow measures the proxy's own cost of one 2-round flow,
// without any network: the handler is called directly and the upstream
// answers in memory, as JSON and (sse/) as an event stream, as go-sdk's
// servers do. reverseproxy is net/http/httputil.ReverseProxy over the same
// in-memory upstream, for scale.
func BenchmarkHandlerFlow(b *testing.B) {
	ring, err := reqstate.GenerateKeyRing("bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	guard := mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: replay.NewMemory(nil)})
	u, _ := url.Parse("http://upstream.invalid/mcp")
	type contender struct {
		name string
		h    http.Handler
	}
	var cs []contender
	for _, sse := range []bool{false, true} {
		px, err := proxy.New(proxy.Options{Upstream: u.String(), Guard: guard, Transport: memUpstream{sse}})
		if err != nil {
			b.Fatal(err)
		}
		rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.Out.URL.Path = u.Path }, Transport: memUpstream{sse}, FlushInterval: -1}
		prefix := ""
		if sse {
			prefix = "sse/"
		}
		cs = append(cs, contender{prefix + "mrtr", px}, contender{prefix + "reverseproxy", rp})
	}
	first := benchBody(1, "")
	for _, c := range cs {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", bytes.NewReader(first))
				r.Header.Set("Content-Type", "application/json")
				c.h.ServeHTTP(w, r)
				var res struct {
					Result struct{ RequestState string } `json:"result"`
				}
				json.Unmarshal(payload(w.Body.Bytes()), &res)
				w = httptest.NewRecorder()
				r = httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", bytes.NewReader(benchBody(2, res.Result.RequestState)))
				r.Header.Set("Content-Type", "application/json")
				c.h.ServeHTTP(w, r)
				if w.Code != 200 || !bytes.Contains(w.Body.Bytes(), []byte(`"complete"`)) {
					b.Fatalf("round 2: %d %s", w.Code, w.Body)
				}
			}
		})
	}
}

// payload is the message of a response: its body, or the data of the one
// event of an event stream.
func payload(b []byte) []byte {
	if i := bytes.Index(b, []byte("data: ")); i >= 0 && !bytes.HasPrefix(b, []byte("{")) {
		b = b[i+len("data: "):]
		if j := bytes.IndexByte(b, '\n'); j >= 0 {
			b = b[:j]
		}
	}
	return b
}

// memTasks answers tasks/get (and, for comparison, any other method with
// the same params) in memory with a working task naming the request's
// taskId, as JSON.
type memTasks struct{}

func (memTasks) RoundTrip(r *http.Request) (*http.Response, error) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Params struct {
			TaskID string `json:"taskId"`
		} `json:"params"`
	}
	body, _ := io.ReadAll(r.Body)
	json.Unmarshal(body, &m)
	tid, _ := json.Marshal(m.Params.TaskID)
	out := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"resultType":"complete","taskId":` + string(tid) +
		`,"status":"working","createdAt":"2026-12-01T00:00:00.000Z","lastUpdatedAt":"2026-12-01T00:00:00.000Z","ttlMs":3600000,"pollIntervalMs":1000}}`
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}, "Content-Length": {strconv.Itoa(len(out))}},
		Body: io.NopCloser(strings.NewReader(out)), ContentLength: int64(len(out)), Request: r}, nil
}

// BenchmarkHandlerTaskGet measures the proxy's cost of one tasks/get,
// without any network: tasks/get opens the caller's sealed id, forwards
// the upstream's and restores the caller's in the answer; passthrough is
// the same message under a method the proxy does not read (it only
// swaps the JSON-RPC id), so the difference is what a task id costs.
func BenchmarkHandlerTaskGet(b *testing.B) {
	ring, err := reqstate.GenerateKeyRing("bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	guard := mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: replay.NewMemory(nil)})
	px, err := proxy.New(proxy.Options{Upstream: "http://upstream.invalid/mcp", Guard: guard, Transport: memTasks{}})
	if err != nil {
		b.Fatal(err)
	}
	// The sealed id: a CreateTaskResult through the proxy.
	create := &taskCreate{}
	cpx, _ := proxy.New(proxy.Options{Upstream: "http://upstream.invalid/mcp", Guard: guard, Transport: create})
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job","arguments":{}}}`))
	cpx.ServeHTTP(w, r)
	var res struct {
		Result struct{ TaskID string } `json:"result"`
	}
	if json.Unmarshal(w.Body.Bytes(), &res) != nil || !strings.HasPrefix(res.Result.TaskID, "t1.") {
		b.Fatalf("no sealed task id: %s", w.Body)
	}
	tid := res.Result.TaskID
	for _, method := range []string{"tasks/get", "passthrough"} {
		body := []byte(`{"jsonrpc":"2.0","id":2,"method":"` + method + `","params":{"taskId":"` + tid + `","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`)
		b.Run(method, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", bytes.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Mcp-Method", method)
				if method == "tasks/get" {
					r.Header.Set("Mcp-Name", tid)
				}
				px.ServeHTTP(w, r)
				if w.Code != 200 || !bytes.Contains(w.Body.Bytes(), []byte(`"taskId":"`+tid+`"`)) {
					b.Fatalf("%s: %d %s", method, w.Code, w.Body)
				}
			}
		})
	}
}

// taskCreate answers a tools/call with a CreateTaskResult.
type taskCreate struct{}

func (*taskCreate) RoundTrip(r *http.Request) (*http.Response, error) {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	body, _ := io.ReadAll(r.Body)
	json.Unmarshal(body, &m)
	out := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"resultType":"task","taskId":"rBbC3k1ahx6A0Mc-AQhiOEcdrBflvhxB","status":"working","createdAt":"2026-12-01T00:00:00.000Z","lastUpdatedAt":"2026-12-01T00:00:00.000Z","ttlMs":3600000,"pollIntervalMs":1000}}`
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}, "Content-Length": {strconv.Itoa(len(out))}},
		Body: io.NopCloser(strings.NewReader(out)), ContentLength: int64(len(out)), Request: r}, nil
}
