package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/reqstate"
)

// Responses belong to their request (DESIGN.md): every request the proxy
// sends upstream carries a JSON-RPC id of the proxy's own, fresh for each
// attempt, and the caller's id, byte for byte, goes back on the response
// that carries the proxy's. A response with any other id (a stray one an
// upstream sent on a kept-alive connection after the response it belonged
// to, a batch, a second final response) is never handed to the caller, and
// the connection it came on is closed, never reused: what it carries next
// is no longer known to be anyone's.

// metaSubscriptionID is the _meta member that tags every message of a
// listen stream with the listen request's id (2026-07-28, subscriptions).
const metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"

// methodCancelled is the notification that cancels a request by its id.
const methodCancelled = "notifications/cancelled"

// idSource makes the proxy's ids: a random prefix, fixed per Handler, and
// a counter. The prefix makes them unpredictable to callers (who could
// otherwise name another caller's request in a notifications/cancelled),
// the counter unique.
type idSource struct {
	prefix []byte // `"mrtr-` + 16 hex digits + `-`
	n      atomic.Uint64
}

func newIDSource() *idSource {
	var r [8]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails (Go 1.24)
	p := make([]byte, 0, 32)
	p = append(p, `"mrtr-`...)
	p = hex.AppendEncode(p, r[:])
	return &idSource{prefix: append(p, '-')}
}

// appendNext appends a fresh id, a JSON string, to b.
func (s *idSource) appendNext(b []byte) json.RawMessage {
	b = append(b, s.prefix...)
	b = strconv.AppendUint(b, s.n.Add(1), 10)
	return append(b, '"')
}

// exchange is one request the proxy sent upstream under its own id, and
// what it learned of the connection its answer comes on. Safe for the
// transport's goroutines (GotConn) and the handler's.
type exchange struct {
	caller json.RawMessage // the caller's id, as it wrote it
	sent   json.RawMessage // the proxy's, a JSON string with no escapes
	listen bool            // a subscriptions/listen stream
	task   *taskSwap       // a tasks/* request: its task id, the caller's and the upstream's
	// tasks maps the upstream's ids of the tasks a listen request named
	// to the caller's (tasks.go).
	tasks map[string]json.RawMessage
	// who is the caller of a request on the pass-through path, to whom a
	// CreateTaskResult in its answer is sealed (tasks.go).
	who reqstate.Principal

	mu   sync.Mutex
	conn net.Conn // the connection of the latest attempt (httptrace GotConn)

	buf   [48]byte              // sent's bytes: one allocation for both
	trace httptrace.ClientTrace // its hooks, in the same allocation
}

// newExchange is a request of the caller's id and method, given a fresh id
// of the proxy's own.
func (h *Handler) newExchange(caller json.RawMessage, method string) *exchange {
	x := &exchange{caller: caller, listen: method == methodListen}
	x.sent = h.ids.appendNext(x.buf[:0])
	return x
}

// gotConn records the connection of the latest attempt (httptrace's
// GotConn hook).
func (x *exchange) gotConn(i httptrace.GotConnInfo) {
	x.mu.Lock()
	x.conn = i.Conn
	x.mu.Unlock()
}

// discard closes the connection x's answer came on, so that it carries no
// other request: after a response that is not x's, what follows on it (x's
// own response, perhaps) would be handed to the next request. An HTTP/2
// connection is left open: its streams are framed apart, and closing it
// would fail every other caller's stream on it.
func (x *exchange) discard() {
	x.mu.Lock()
	c := x.conn
	x.conn = nil
	x.mu.Unlock()
	if c == nil {
		return
	}
	if tc, ok := c.(*tls.Conn); ok && tc.ConnectionState().NegotiatedProtocol == "h2" {
		return
	}
	_ = c.Close()
}

// isSent reports whether id, a member's raw value, is the proxy's id for x.
func (x *exchange) isSent(id json.RawMessage) bool {
	if bytes.Equal(id, x.sent) {
		return true
	}
	if len(id) == 0 || id[0] != '"' || bytes.IndexByte(id, '\\') < 0 {
		return false
	}
	s, ok := mcpwire.StringValue(id) // the same string, escaped otherwise
	return ok && s == string(x.sent[1:len(x.sent)-1])
}

// verdict is what judge tells of one message of an upstream's answer.
type verdict int

const (
	notResponse verdict = iota // a request or notification: passes as it is
	ours                       // the response to the request: passes with the caller's id
	nullError                  // an error with a null (or no) id: becomes the proxy's own -32603
	foreign                    // a response to another request, or none the proxy can read
)

// judge reads msg, one parsed message of the upstream's answer to x.
func (x *exchange) judge(msg object) verdict {
	if !isResponse(msg) {
		return notResponse
	}
	id, has := msg["id"]
	switch {
	case has && x.isSent(id):
		return ours
	case (!has || bytes.Equal(id, []byte("null"))) && msg.Has("error"):
		return nullError
	}
	return foreign
}

// errForeign is the cause logged for an answer that is not the request's.
var errForeign = errors.New("the upstream answered with a response that is not this request's (another id, a batch or a second response): refused, and its connection closed")

// errNullID is the cause logged for an error response with a null id.
var errNullID = errors.New("the upstream answered with an error whose id is null")

// msgForeign and msgNullID are the proxy's -32603 answers in their place.
const (
	msgForeign = "upstream answered with a response that is not this request's"
	msgNullID  = "upstream answered with an error that names no request"
)

// withID returns the message b (one valid JSON object) with its top-level
// id replaced by id, every other byte as written; ok is false when b has
// no id or its member names repeat. b itself is never modified.
func withID(b, id json.RawMessage) (json.RawMessage, bool) {
	return replaceAt(b, id, nil, "id")
}

// replaceAt returns b (one valid JSON object) with the value at path (a
// member of a member of ...) replaced by v, if that value is old (any
// value when old is nil); ok is false when there is no such value, or
// when an object on the path repeats a member name.
func replaceAt(b, v, old json.RawMessage, path ...string) (json.RawMessage, bool) {
	t := mcpwire.TrimSpace(b)
	off, end := 0, len(t)
	for _, name := range path {
		s, e, found, unique := mcpwire.MemberSpan(t[off:end], name)
		if !found || !unique {
			return nil, false
		}
		off, end = off+s, off+e
	}
	if old != nil && !bytes.Equal(t[off:end], old) {
		return nil, false
	}
	out := make([]byte, 0, len(t)-(end-off)+len(v))
	out = append(out, t[:off]...)
	out = append(out, v...)
	return append(out, t[end:]...), true
}

// restoreIDs returns data, one message of x's answer (msg, parsed) that
// judge found to be ours or notResponse, as the caller must see it: the
// caller's id in place of the proxy's (a response) and, on a listen stream,
// in the subscription id every message carries and in a
// notifications/cancelled naming the stream. Any other message comes back
// as it is. ok is false when a response cannot be encoded again.
func (x *exchange) restoreIDs(data []byte, msg object, v verdict) (_ []byte, ok bool) {
	out := data
	if v == ours {
		if out, ok = withID(data, x.caller); !ok {
			// Repeated names or more than 16 members: encoded again from
			// the parsed message.
			m := make(object, len(msg))
			for k, val := range msg {
				m[k] = val
			}
			m["id"] = x.caller
			b, err := m.Encode()
			if err != nil {
				return nil, false
			}
			out = b
		}
		if x.task != nil {
			if out, ok = x.task.restore(out); !ok {
				return nil, false
			}
		}
	}
	if x.listen && bytes.Contains(out, x.sent[1:len(x.sent)-1]) {
		for _, path := range [][]string{
			{"params", "_meta", metaSubscriptionID},
			{"result", "_meta", metaSubscriptionID},
			{"params", "requestId"}, // notifications/cancelled of the stream
		} {
			if b, ok := replaceAt(out, x.caller, x.sent, path...); ok {
				out = b
			}
		}
	}
	return out, true
}

// cancelKey names a request a caller may cancel: its principal, its
// 2025-11-25 session (empty for none) and its id as the caller wrote it.
type cancelKey struct {
	who     reqstate.Principal
	session string
	id      string
}

// inflight maps the requests in flight to the ids the proxy sent them
// under, for notifications/cancelled. Safe for concurrent use.
type inflight struct {
	mu sync.Mutex
	m  map[cancelKey]liveIDs
}

// liveIDs are the ids of the requests in flight under one key: nearly
// always one (two callers sharing a principal and session may use one id
// at once), the latest last.
type liveIDs struct {
	first json.RawMessage
	more  []json.RawMessage
}

// add records a request in flight under k, sent as sent. Within a
// 2025-11-25 session (k.session set) an id names one request at a time,
// as JSON-RPC wants it: add refuses (false) a second one under k. Without
// a session, callers of one principal (all anonymous ones together) share
// k, and each numbers its own requests, so two may use one id at once.
func (f *inflight) add(k cancelKey, sent json.RawMessage) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = make(map[cancelKey]liveIDs)
	}
	l, ok := f.m[k]
	switch {
	case ok && k.session != "":
		return false
	case ok:
		l.more = append(l.more, sent)
		f.m[k] = l
	default:
		f.m[k] = liveIDs{first: sent}
	}
	return true
}

// msgIDInUse is the answer to a request of a 2025-11-25 session whose id
// names a request of that session still in flight.
const msgIDInUse = "invalid request: this id is in use by a request in flight"

func (f *inflight) remove(k cancelKey, sent json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.m[k]
	if !ok {
		return
	}
	if i := slices.IndexFunc(l.more, func(s json.RawMessage) bool { return bytes.Equal(s, sent) }); i >= 0 {
		l.more = slices.Delete(l.more, i, i+1)
	} else if bytes.Equal(l.first, sent) {
		if len(l.more) == 0 {
			delete(f.m, k)
			return
		}
		l.first, l.more = l.more[0], slices.Delete(l.more, 0, 1)
	}
	f.m[k] = l
}

// lookup returns the id the latest request in flight under k was sent
// with (of two sharing k, the latest is the one its caller more likely
// means).
func (f *inflight) lookup(k cancelKey) (json.RawMessage, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.m[k]
	switch {
	case !ok:
		return nil, false
	case len(l.more) > 0:
		return l.more[len(l.more)-1], true
	}
	return l.first, true
}

// requestWithID returns req's body with the proxy's id in place of the
// caller's: spliced into the bytes as written, or, when they cannot be (an
// envelope of more than 16 members), encoded again from the parsed
// message (its names are unique: parseRequest).
func requestWithID(req *rpcRequest, id json.RawMessage) ([]byte, error) {
	if b, ok := withID(req.body, id); ok {
		return b, nil
	}
	m := make(object, len(req.msg))
	for k, v := range req.msg {
		m[k] = v
	}
	m["id"] = id
	return m.Encode()
}

// cancelled returns the body of a caller's notifications/cancelled with
// its requestId mapped to the id the proxy sent that request under; ok is
// false when no request of this caller (principal and session) is in
// flight under that id. A notification without a requestId it can read
// passes as it is: it names no request.
func (h *Handler) cancelled(k cancelKey, req *rpcRequest) (_ []byte, ok bool) {
	p, isObj := req.msg.Object("params")
	rid, has := p["requestId"]
	if !isObj || !has {
		return req.body, true
	}
	k.id = string(rid)
	sent, found := h.live.lookup(k)
	if !found {
		return nil, false
	}
	return replaceAt(req.body, sent, nil, "params", "requestId")
}

// maxPassedJSON bounds a JSON response the pass-through path holds to
// check its id (the bridge's own bound on a message).
const maxPassedJSON = 64 << 20

// errPassedTooLarge is the pass-through path's error for a JSON response
// beyond maxPassedJSON.
var errPassedTooLarge = errors.New("the upstream's JSON response exceeds the proxy's limit of 64 MiB")

// checkPassed is the pass-through path's ModifyResponse: the answer to a
// request the proxy sent under its own id is checked to be that request's,
// and goes to the caller with the caller's id (restoreBody; an event
// stream, event by event: idStream).
func (h *Handler) checkPassed(resp *http.Response) error {
	req, _ := resp.Request.Context().Value(idKey{}).(*rpcRequest)
	if req == nil || req.x == nil {
		return nil
	}
	ctx := resp.Request.Context()
	if mcpwire.IsEventStream(resp.Header.Get("Content-Type")) {
		// Its events may change length: the stream's length is no longer
		// the upstream's.
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
		resp.Body = &idStream{h: h, ctx: ctx, x: req.x, method: req.method, body: resp.Body,
			er: mcpwire.NewEventReader(resp.Body, int(min(max(h.maxHeld, maxPassedJSON), math.MaxInt)))}
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxPassedJSON+1))
	resp.Body.Close()
	if err != nil {
		return err
	}
	if len(b) > maxPassedJSON {
		req.x.discard()
		return errPassedTooLarge
	}
	out, v := h.restoreBody(ctx, req.x, b)
	if v == foreign {
		resp.StatusCode, resp.Status = http.StatusOK, "200 OK"
		resp.Header.Set("Content-Type", "application/json")
		resp.Header.Del("Content-Encoding")
	}
	resp.Body = io.NopCloser(bytes.NewReader(out))
	resp.ContentLength = int64(len(out))
	resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
	return nil
}

// restoreBody judges b, a whole JSON answer to x (not a stream), and
// returns what the caller gets: the response with the caller's id; for
// an error with a null id, the proxy's own -32603; for a response that is
// not x's (another id, a batch, invalid JSON), the proxy's -32603 in its
// place, its connection closed. A body that is no JSON object or array
// (empty, text) passes as it is: it holds no response to misplace.
func (h *Handler) restoreBody(ctx context.Context, x *exchange, b []byte) ([]byte, verdict) {
	t := mcpwire.TrimSpace(b)
	if len(t) == 0 || (t[0] != '{' && t[0] != '[') {
		return b, notResponse
	}
	v := foreign
	var msg object
	if t[0] == '{' {
		var err error
		if msg, err = mcpwire.ParseObject(t); err == nil {
			v = x.judge(msg)
		}
	}
	switch v {
	case notResponse:
		return b, v
	case ours:
		if out, ok := x.restoreIDs(t, msg, v); ok {
			return h.sealPassed(ctx, x, out), v
		}
		v = foreign
	case nullError:
		x.discard()
		h.log.ErrorContext(ctx, "proxy: upstream failed", "step", "read the upstream response", "sent", true, "error", errNullID)
		return errorBody(x.caller, mcpwire.CodeInternalError, msgNullID, nil), v
	}
	x.discard()
	h.log.ErrorContext(ctx, "proxy: upstream failed", "step", "read the upstream response", "sent", true, "error", errForeign)
	return errorBody(x.caller, mcpwire.CodeInternalError, msgForeign, nil), v
}

// idStream is the body of an event stream answering a request the
// pass-through path sent under the proxy's id: every event as received,
// but the response, which gets the caller's id (on a listen stream, every
// message its subscription id: restoreIDs). A response that is not the
// request's, or a second one, is never relayed: the stream ends there
// (with the proxy's -32603 if no response went before), its connection
// closed. Not safe for concurrent use (ReverseProxy reads it from one
// goroutine).
type idStream struct {
	h      *Handler
	ctx    context.Context
	x      *exchange
	method string
	body   io.ReadCloser
	er     *mcpwire.EventReader
	out    []byte // what the next Reads return
	final  bool   // the response was relayed
	done   bool
}

func (s *idStream) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if s.done {
			return 0, io.EOF
		}
		ev, err := s.er.Next()
		if err != nil {
			s.done = true
			return 0, err
		}
		s.out = s.event(ev)
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

// event returns what the caller gets of ev.
func (s *idStream) event(ev *mcpwire.Event) []byte {
	raw := ev.Raw
	if !bytes.HasSuffix(raw, []byte("\n\n")) && !bytes.HasSuffix(raw, []byte("\r\n\r\n")) {
		raw = append(raw[:len(raw):len(raw)], "\n\n"...)
	}
	d := mcpwire.TrimSpace(ev.Data)
	if len(d) == 0 {
		return raw
	}
	v := foreign // a batch
	var msg object
	if d[0] != '[' {
		m, err := mcpwire.ParseObject(d)
		if err != nil {
			return raw // no message: nothing to misplace
		}
		msg, v = m, s.x.judge(m)
	}
	if v != notResponse && s.final {
		v = foreign // a second response
	}
	if v == notResponse && namesTasks(d) {
		// A task's notification names it as the caller does, or not at
		// all (tasks.go).
		out, keep := s.x.taskNotice(d, msg)
		if !keep {
			return nil
		}
		if len(out) != len(d) || &out[0] != &d[0] {
			d = out
			if msg, _ = mcpwire.ParseObject(d); msg == nil {
				return nil
			}
			raw = mcpwire.AppendEvent(nil, ev.Other, d)
		}
	}
	switch v {
	case notResponse:
		if !s.x.listen {
			return raw
		}
		out, _ := s.x.restoreIDs(d, msg, v)
		if len(out) == len(d) && &out[0] == &d[0] {
			return raw
		}
		return mcpwire.AppendEvent(nil, ev.Other, out)
	case ours:
		if out, ok := s.x.restoreIDs(d, msg, v); ok {
			s.final = true
			return mcpwire.AppendEvent(nil, ev.Other, s.h.sealPassed(s.ctx, s.x, out))
		}
	case nullError:
		s.final, s.done = true, true // its connection is closed: the stream ends here
		s.x.discard()
		s.h.log.ErrorContext(s.ctx, "proxy: upstream failed", "method", s.method, "step", "read the upstream event stream", "sent", true, "error", errNullID)
		return mcpwire.AppendEvent(nil, ev.Other, errorBody(s.x.caller, mcpwire.CodeInternalError, msgNullID, nil))
	}
	s.x.discard()
	s.done = true
	s.h.log.ErrorContext(s.ctx, "proxy: upstream failed", "method", s.method, "step", "read the upstream event stream", "sent", true, "error", errForeign)
	if s.final {
		return nil
	}
	s.final = true
	return mcpwire.AppendEvent(nil, nil, errorBody(s.x.caller, mcpwire.CodeInternalError, msgForeign, nil))
}

func (s *idStream) Close() error {
	s.er.Close()
	return s.body.Close()
}
