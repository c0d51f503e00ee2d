package mcpgo

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/adapt"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
)

// NewHTTPHandler serves the adapter's server over mcp-go's Streamable
// HTTP transport (server.NewStreamableHTTPServer with opts), behind
// Handler. One endpoint serves every protocol version: 2026-07-28
// requests statelessly with Multi Round-Trip Requests on the wire, older
// clients through the initialize handshake and mcp-go's legacy bridge.
func NewHTTPHandler(a *Adapter, opts ...server.StreamableHTTPOption) http.Handler {
	return a.Handler(server.NewStreamableHTTPServer(a.server, opts...))
}

// Handler wraps next, an HTTP transport of the adapter's server (mcp-go's
// StreamableHTTPServer), to fill the seams mcp-go lacks:
//
//   - mcp-go sends every handler error as -32603 with the error's text: it
//     has no way for a handler to answer a JSON-RPC error of its own code
//     and data. Handler rewrites the errors of mrtr's error contract into
//     their exact form (-32602 "invalid requestState" with data.reason,
//     -32021 with data.requiredCapabilities, -32602 for arguments the hash
//     refuses and for null inputResponses, -32603 for a store outage), with
//     the HTTP status mcp-go gives those codes on the 2026-07-28 wire (400).
//   - mcp-go's resource handlers return contents, not a result, so they
//     cannot pause; the adapter carries the pause to its resource hook
//     through the request's context, which Handler prepares.
//   - mcp-go can neither serve a method of its own nor answer a tools/call
//     with anything but its tool result. With Options.Tasks, Handler
//     checks the Mcp-Method and Mcp-Name headers of a 2026-07-28
//     tasks/get, tasks/update or tasks/cancel (HTTP 400, -32020), the
//     adapter answers the request from an mcp-go hook, and Handler puts
//     that answer on the wire, and a task's CreateTaskResult in place of
//     the result of the tools/call that started it.
//
// It also reads whether params.inputResponses is null, which mcp-go
// decodes as absent. Everything else passes through unchanged and
// streamed. Without Handler tools and prompts still pause and resume
// sealed, but a refused requestState reaches the client as -32603 with a
// message naming the reason, resources cannot pause and tools cannot run
// as tasks.
func (a *Adapter) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		xw := new(handlerState)
		x, rw := &xw.x, &xw.rw
		rw.w, rw.x = w, x
		xw.ctx = exchangeContext{Context: r.Context(), x: x}
		var buf *bytes.Buffer
		if r.Body != nil {
			// The body is read once more here (mcp-go reads its own copy), into
			// a pooled buffer: the exchange needs it only while the call runs.
			buf, _ = a.bodies.Get().(*bytes.Buffer)
			if buf == nil {
				buf = new(bytes.Buffer)
			}
			_, err := buf.ReadFrom(r.Body)
			r.Body.Close()
			if err != nil {
				buf.Reset()
				a.bodies.Put(buf)
				http.Error(w, "read request body", http.StatusBadRequest)
				return
			}
			x.body = buf.Bytes()
			// A requestState that is neither a string nor null: mcp-go would
			// refuse the body as unparsable (-32600); the guard refuses the
			// call as invalid instead (adapt.StripBadState).
			x.body, x.badState = adapt.StripBadState(x.body)
			xw.body.Reset(x.body)
			r.Body = &xw.body
		}
		if !a.readTask(w, r, x) {
			next.ServeHTTP(rw, r.WithContext(&xw.ctx))
			rw.finish()
		}
		if buf != nil {
			x.nullOnce.Do(func() {}) // the call is over: nobody asks any more
			x.body = nil
			if buf.Cap() <= maxPooledBody {
				buf.Reset()
				a.bodies.Put(buf)
			}
		}
	})
}

// handlerState is what Handler keeps of one request, in one allocation:
// the exchange, the rewriter, the context carrying the exchange and the
// body's reader all live as long as the call.
type handlerState struct {
	x    exchange
	rw   rewriter
	ctx  exchangeContext
	body bodyReader
}

// bodyReader is the request body Handler passes on: the bytes it read.
type bodyReader struct{ bytes.Reader }

// Close implements io.Closer; there is nothing to close.
func (*bodyReader) Close() error { return nil }

// maxPooledBody is the largest body buffer Handler keeps for reuse.
const maxPooledBody = 64 << 10

// nullResponses reports whether a JSON-RPC request's
// params.inputResponses is present but null or an empty object (mcp-go
// decodes both as absent; the guard refuses them). It validates the body
// (one scan, no allocation) and reads the member in place, without
// decoding the body again.
func nullResponses(body []byte) bool {
	if !bytes.Contains(body, []byte(`"inputResponses"`)) || !json.Valid(body) {
		return false
	}
	params, ok := mcpwire.Member(mcpwire.TrimSpace(body), "params")
	if !ok {
		return false
	}
	v, ok := mcpwire.Member(params, "inputResponses")
	if !ok {
		return false
	}
	return string(v) == "null" || (v[0] == '{' && len(mcpwire.TrimSpace(v[1:len(v)-1])) == 0)
}

// rewriter passes a response through, except that it rewrites the
// JSON-RPC error of a contract error the adapter recorded in the
// exchange. It holds back the status line until the first byte of the
// body, so a rewritten JSON error can change it. An event stream is cut
// into events by mcpwire's one reading of the format, whatever pieces
// mcp-go writes it in.
type rewriter struct {
	w      http.ResponseWriter
	x      *exchange
	status int                    // held back until the first byte of the body
	sent   bool                   // the status line is out
	typed  bool                   // sse is known
	sse    bool                   // the body is an event stream
	split  *mcpwire.EventSplitter // allocated for the first event written in pieces
}

func (rw *rewriter) Header() http.Header { return rw.w.Header() }

func (rw *rewriter) WriteHeader(code int) {
	if rw.sent || rw.status != 0 {
		return
	}
	rw.status = code
}

func (rw *rewriter) Write(p []byte) (int, error) {
	out := rw.rewrite(p)
	if len(out) == 0 && len(p) > 0 {
		return len(p), nil // part of an event, held until its end
	}
	rw.writeStatus()
	if _, err := rw.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil // the caller's length, whatever the rewrite made of it
}

// Flush sends the status line and what is buffered.
func (rw *rewriter) Flush() {
	rw.writeStatus()
	if f, ok := rw.w.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (rw *rewriter) Unwrap() http.ResponseWriter { return rw.w }

func (rw *rewriter) writeStatus() {
	if rw.sent {
		return
	}
	rw.sent = true
	if rw.status != 0 {
		rw.w.WriteHeader(rw.status)
	}
}

// finish sends a status line nothing was written after, and the bytes of
// an event the stream ended inside, as they were.
func (rw *rewriter) finish() {
	rw.writeStatus()
	if rw.split == nil {
		return
	}
	if held := rw.split.Held(); len(held) > 0 {
		_, _ = rw.w.Write(held)
	}
}

// rewrite replaces in p, a JSON response body or the data of an event of
// a stream, what the exchange recorded: a contract error, the answer to a
// tasks/* request, or the CreateTaskResult of a call that became a task.
func (rw *rewriter) rewrite(p []byte) []byte {
	if !rw.typed {
		rw.typed = true
		rw.sse = mcpwire.IsEventStream(rw.w.Header().Get("Content-Type"))
	}
	rw.x.mu.Lock()
	rs := rewrites{pending: rw.x.pending}
	if t := rw.x.tasks; t != nil {
		rs.reply, rs.created = t.reply, t.created
	}
	modern := rw.x.modern
	rw.x.mu.Unlock()
	if rw.sse {
		if (rw.split == nil || rw.split.Idle()) && bytes.HasSuffix(p, []byte("\n\n")) && !rs.touches(p) {
			return p // whole events, none to rewrite: as written
		}
		if rw.split == nil {
			rw.split = new(mcpwire.EventSplitter)
		}
		var out []byte
		rw.split.Split(p, func(ev *mcpwire.Event) {
			if rs.touches(ev.Data) {
				if m, _, ok := rs.message(ev.Data); ok {
					out = mcpwire.AppendEvent(out, ev.Other, m)
					return
				}
			}
			out = append(out, ev.Raw...)
		})
		return out
	}
	if !rs.touches(p) {
		return p
	}
	out, code, ok := rs.message(bytes.TrimSpace(p))
	if !ok {
		return p
	}
	if modern && !rw.sent {
		rw.status = httpStatus(code) // as mcp-go answers the code on the 2026-07-28 wire
	}
	return append(out, '\n')
}

// httpStatus is the HTTP status mcp-go gives a response with the JSON-RPC
// error code on the 2026-07-28 wire (0: a result).
func httpStatus(code int) int {
	switch code {
	case mrtr.CodeInvalidParams, mcpwire.CodeMissingCapability, mcpwire.CodeHeaderMismatch, mcpwire.CodeInvalidRequest:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// rewrites is what the rewriter may replace in a response.
type rewrites struct {
	pending map[string]*adapt.WireError // contract errors, by the -32603 message mcp-go sends
	reply   *taskReply                  // the answer to a tasks/* request, for the marker error
	created json.RawMessage             // the CreateTaskResult of a tools/call, for its result
}

// touches reports whether p may hold a message to rewrite.
func (rs *rewrites) touches(p []byte) bool {
	return rs.created != nil && bytes.Contains(p, []byte(`"result"`)) ||
		(len(rs.pending) > 0 || rs.reply != nil) && bytes.Contains(p, []byte(`"error"`))
}

// message rewrites one JSON-RPC response, and returns its error code (0
// for a result).
func (rs *rewrites) message(msg []byte) ([]byte, int, bool) {
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Result  json.RawMessage `json:"result"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(msg, &m) != nil || m.Method != "" {
		return nil, 0, false
	}
	var out []byte
	code := 0
	switch {
	case m.Error == nil:
		if rs.created == nil || len(m.Result) == 0 {
			return nil, 0, false
		}
		out = resultResponse(m.JSONRPC, m.ID, rs.created)
	case rs.reply != nil && m.Error.Code == mcpwire.CodeInvalidRequest && m.Error.Message == taskAnswered:
		if w := rs.reply.err; w != nil {
			out, code = adapt.ErrorResponse(m.JSONRPC, m.ID, w), w.Code
		} else {
			out = resultResponse(m.JSONRPC, m.ID, rs.reply.result)
		}
	case m.Error.Code == mrtr.CodeInternalError:
		w, ok := rs.pending[m.Error.Message]
		if !ok {
			return nil, 0, false
		}
		out, code = adapt.ErrorResponse(m.JSONRPC, m.ID, w), w.Code
	}
	return out, code, out != nil
}

// resultResponse returns the JSON-RPC response carrying result.
func resultResponse(jsonrpc string, id, result json.RawMessage) []byte {
	out, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
	}{jsonrpc, id, result})
	if err != nil {
		return nil
	}
	return out
}
