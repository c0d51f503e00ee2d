package bridge

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
	"time"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/internal/rpc"
)

// DefaultMaxHTTPMessage bounds one message an HTTPSession reads: a JSON
// response body or one server-sent event.
const DefaultMaxHTTPMessage = rpc.DefaultMaxLine

// HTTPOptions configures an HTTPSession. URL is required.
type HTTPOptions struct {
	// URL is the upstream's Streamable HTTP endpoint.
	URL string
	// Transport sends the session's requests; nil means
	// http.DefaultTransport. The proxy passes its own, so the session
	// dials and pools as the proxy's other upstream requests do.
	Transport http.RoundTripper
	// MaxMessage bounds one message read from the upstream (a JSON body,
	// or one event of a stream); a larger one fails its request, or ends
	// the GET stream. Zero means DefaultMaxHTTPMessage.
	MaxMessage int
	// Logger receives a line when the session is lost or a stream fails;
	// nil means none.
	Logger *slog.Logger
}

// HTTPSession is one 2025-11-25 Streamable HTTP session with an upstream,
// as an Upstream: each Send is one POST; what the upstream answers (a
// JSON body, or every event of an event stream) and what it sends on the
// session's GET stream arrive on Recv. An HTTP failure of a request
// arrives on Recv as a JSON-RPC error response with that request's id, so
// a caller waiting for it gets an error, never a hang; a lost session
// (404 to a request carrying its id) ends Recv. It is safe for concurrent
// use.
//
// Opened by a Bridge, the session sends the Authorization header of the
// request it was opened for, which the proxy passes on only when
// proxy.Options.ForwardAuthorization is set (by default it is dropped,
// as on the proxy's other paths); a caller's session is reused only by
// requests with the same Authorization.
//
// Sends are ordered as far as HTTP allows: a notification or a response
// returns once the upstream accepted it (202), so notifications/initialized
// reaches the upstream before the next request; a request returns as soon
// as it is on its way, and its answer is read in the background (a tool
// that waits for an elicitation answer keeps its POST open until then).
type HTTPSession struct {
	o    HTTPOptions
	tr   http.RoundTripper
	log  *slog.Logger
	max  int
	recv chan []byte

	ctx    context.Context // ends every request and stream of the session
	cancel context.CancelFunc

	mu       sync.Mutex
	auth     string                     // Authorization sent on every request; "" sends none
	id       string                     // Mcp-Session-Id, once the initialize response gave one
	version  string                     // MCP-Protocol-Version, once initialize was answered
	initID   string                     // the id of the initialize request in flight
	inflight map[string]json.RawMessage // requests whose answer is awaited, by id
	ended    bool
	getting  bool // the GET stream was started
	wg       sync.WaitGroup
	endOnce  sync.Once
	finished chan struct{} // closed with recv
}

// NewHTTPSession returns a session with o.URL; it sends nothing until the
// first Send (initialize, from the bridge).
func NewHTTPSession(o HTTPOptions) *HTTPSession {
	if o.URL == "" {
		panic("bridge: NewHTTPSession needs HTTPOptions.URL")
	}
	s := &HTTPSession{o: o, tr: o.Transport, log: o.Logger, max: o.MaxMessage,
		recv: make(chan []byte, 16), finished: make(chan struct{}), inflight: map[string]json.RawMessage{}}
	if s.tr == nil {
		s.tr = http.DefaultTransport
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.max <= 0 {
		s.max = DefaultMaxHTTPMessage
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// authorize sets the Authorization header of the session's requests:
// the caller's, which the bridge has only when the proxy forwards it
// (proxy.Options.ForwardAuthorization). The bridge calls it before the
// session's first Send.
func (s *HTTPSession) authorize(v string) {
	s.mu.Lock()
	s.auth = v
	s.mu.Unlock()
}

// ErrSessionEnded is Send's error once the session was closed or lost.
var ErrSessionEnded = errors.New("bridge: the upstream HTTP session has ended")

// Recv implements rpc.Transport. It is closed once the session is closed
// or lost.
func (s *HTTPSession) Recv() <-chan []byte { return s.recv }

// notifyTimeout bounds a POST that carries a notification or a response:
// the upstream only has to accept it.
const notifyTimeout = 30 * time.Second

// Send implements rpc.Transport: msg is POSTed to the upstream.
func (s *HTTPSession) Send(msg []byte) error {
	m, err := rpc.Parse(msg)
	if err != nil {
		return err
	}
	if m.IsRequest() {
		s.mu.Lock()
		if m.Method == "initialize" {
			s.initID = string(m.ID)
		}
		s.mu.Unlock()
		if !s.spawn(func() { s.request(m.ID, msg) }) {
			return ErrSessionEnded
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, notifyTimeout)
	resp, err := s.do(ctx, http.MethodPost, msg, "")
	if err != nil {
		cancel()
		if s.ctx.Err() != nil {
			return ErrSessionEnded
		}
		return fmt.Errorf("post %s to the upstream: %w", what(m), err)
	}
	done := func() { resp.Body.Close(); cancel() }
	switch {
	case resp.StatusCode == http.StatusNotFound && s.sessionID() != "":
		done()
		s.lost()
		return ErrSessionEnded
	case resp.StatusCode/100 != 2:
		done()
		return fmt.Errorf("post %s to the upstream: HTTP %d", what(m), resp.StatusCode)
	case resp.StatusCode == http.StatusAccepted:
		done()
	default:
		// A server may answer with a body or a stream even here: read
		// what it carries, as for a request, without holding up Send.
		if !s.spawn(func() { _, _ = s.read(resp, nil); done() }) {
			done()
		}
	}
	if m.Method == "notifications/initialized" {
		s.mu.Lock()
		start := !s.getting
		s.getting = true
		s.mu.Unlock()
		if start {
			s.spawn(s.listen)
		}
	}
	return nil
}

func what(m *rpc.Message) string {
	if m.Method != "" {
		return m.Method
	}
	return "a response"
}

// spawn runs f on a goroutine the session waits for, unless it ended.
func (s *HTTPSession) spawn(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
}

func (s *HTTPSession) sessionID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// do sends one request of the session with its headers.
func (s *HTTPSession) do(ctx context.Context, method string, body []byte, lastEventID string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.o.URL, rd)
	if err != nil {
		return nil, err
	}
	switch method {
	case http.MethodPost:
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	case http.MethodGet:
		req.Header.Set("Accept", "text/event-stream")
	}
	s.mu.Lock()
	id, version, auth := s.id, s.version, s.auth
	s.mu.Unlock()
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if id != "" {
		req.Header.Set("Mcp-Session-Id", id)
	}
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-Id", lastEventID)
	}
	return s.tr.RoundTrip(req)
}

// request POSTs one request and delivers its answer.
func (s *HTTPSession) request(id json.RawMessage, msg []byte) {
	s.mu.Lock()
	s.inflight[string(id)] = id
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.inflight, string(id))
		s.mu.Unlock()
	}()
	var conn foreignConn
	resp, err := s.do(httptrace.WithClientTrace(s.ctx, &httptrace.ClientTrace{GotConn: conn.got}), http.MethodPost, msg, "")
	if err != nil {
		if s.ctx.Err() == nil {
			s.log.Warn("bridge: upstream request failed", "error", err)
			s.fail(id, "the upstream could not be reached")
		}
		return
	}
	defer resp.Body.Close()
	s.mu.Lock()
	if string(id) == s.initID && s.id == "" && resp.StatusCode/100 == 2 {
		s.id = resp.Header.Get("Mcp-Session-Id")
	}
	hasID := s.id != ""
	s.mu.Unlock()
	switch {
	case resp.StatusCode == http.StatusNotFound && hasID:
		s.lost()
		return
	case resp.StatusCode == http.StatusAccepted:
		return // the answer comes on the GET stream
	case resp.StatusCode/100 != 2:
		s.httpError(id, resp)
		return
	}
	got, err := s.read(resp, id)
	if errors.Is(err, errForeignResponse) {
		conn.close() // what follows on it is no longer known to be anyone's
		s.log.Warn("bridge: upstream failed", "error", err)
	}
	switch {
	case got || s.ctx.Err() != nil:
	case errors.Is(err, errForeignResponse):
		s.fail(id, "the upstream answered with a response that is not this request's")
	case errors.Is(err, errTooLarge), errors.Is(err, mcpwire.ErrEventTooLarge):
		s.fail(id, "the upstream's answer exceeds the proxy's message limit")
	default:
		s.fail(id, "the upstream ended its answer without a response")
	}
}

// errTooLarge is read's error for a message beyond the limit.
var errTooLarge = errors.New("bridge: an upstream message exceeds the limit")

// read delivers the messages of a POST's answer; it reports whether the
// response to id was among them (a stream the upstream cut short, with
// event ids, is resumed on a GET with Last-Event-ID).
func (s *HTTPSession) read(resp *http.Response, id json.RawMessage) (bool, error) {
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		b, err := io.ReadAll(io.LimitReader(resp.Body, int64(s.max)+1))
		if err != nil {
			return false, err
		}
		if len(b) > s.max {
			return false, errTooLarge
		}
		if foreignTo(b, id) {
			return false, errForeignResponse
		}
		return s.deliver(b, id), nil
	case "text/event-stream":
		got, last, err := s.events(resp.Body, id)
		for tries := 0; !got && last != "" && id != nil && s.ctx.Err() == nil && tries < 3 && !errors.Is(err, errForeignResponse); tries++ {
			// The upstream closed the stream before the response: ask
			// for the rest (2025-11-25 resumability).
			r, err := s.do(s.ctx, http.MethodGet, nil, last)
			if err != nil {
				break
			}
			if r.StatusCode != http.StatusOK {
				r.Body.Close()
				break
			}
			var l string
			var rerr error
			got, l, rerr = s.events(r.Body, id)
			r.Body.Close()
			if errors.Is(rerr, errForeignResponse) {
				err = rerr
			}
			if l != "" {
				last = l
			}
		}
		if err != nil && !got && s.ctx.Err() == nil {
			s.log.Warn("bridge: upstream event stream failed", "error", err)
		}
		return got, err
	}
	return false, fmt.Errorf("bridge: the upstream answered with Content-Type %q", ct)
}

// events delivers every event of a stream; got reports whether one was
// the response to id, last is the last event id seen.
func (s *HTTPSession) events(body io.Reader, id json.RawMessage) (got bool, last string, err error) {
	er := mcpwire.NewEventReader(body, s.max)
	defer er.Close()
	for {
		ev, err := er.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return got, last, err
		}
		for _, l := range ev.Other {
			if v, ok := bytes.CutPrefix(l, []byte("id:")); ok {
				last = string(bytes.TrimPrefix(v, []byte(" ")))
			}
		}
		if len(ev.Data) > 0 && (foreignTo(ev.Data, id) || (got && foreignTo(ev.Data, nil))) {
			return got, last, errForeignResponse // another's, or a second response
		}
		if len(ev.Data) > 0 && s.deliver(ev.Data, id) {
			got = true
		}
	}
}

// errForeignResponse is read's error for an answer holding a response
// that is not the request's.
var errForeignResponse = errors.New("bridge: the upstream answered with a response that is not this request's (another id, a batch or a second response): refused, and its connection closed")

// foreignTo reports whether b, a message of the answer to the request id
// (nil for the POST of a notification or a response), is a response that
// is not id's, or a batch: never delivered. Every session shares the
// transport and numbers its requests from 1, so a stray response on a
// kept-alive connection could otherwise complete another session's call
// waiting under the same id.
func foreignTo(b []byte, id json.RawMessage) bool {
	if t := mcpwire.TrimSpace(b); len(t) > 0 && t[0] == '[' {
		return true
	}
	m, err := rpc.Parse(b)
	if err != nil || m.Method != "" || m.ID == nil {
		return false
	}
	return id == nil || string(m.ID) != string(id)
}

// foreignConn is the connection an answer came on (httptrace GotConn),
// closed when it carried a foreign response, so that it carries nothing
// more. An HTTP/2 connection, whose streams are framed apart, is kept.
type foreignConn struct {
	mu sync.Mutex
	c  net.Conn
}

func (f *foreignConn) got(i httptrace.GotConnInfo) {
	f.mu.Lock()
	f.c = i.Conn
	f.mu.Unlock()
}

func (f *foreignConn) close() {
	f.mu.Lock()
	c := f.c
	f.mu.Unlock()
	if tc, ok := c.(*tls.Conn); c == nil || (ok && tc.ConnectionState().NegotiatedProtocol == "h2") {
		return
	}
	_ = c.Close()
}

// deliver hands one message to Recv; it reports whether it is the
// response to id.
func (s *HTTPSession) deliver(b []byte, id json.RawMessage) bool {
	m, err := rpc.Parse(b)
	if err != nil {
		return false // not JSON-RPC: nothing to relay
	}
	isResp := m.Method == "" && m.ID != nil
	if isResp {
		s.mu.Lock()
		if s.initID != "" && string(m.ID) == s.initID {
			s.initID = ""
			var r struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			if json.Unmarshal(m.Result, &r) == nil && r.ProtocolVersion != "" {
				s.version = r.ProtocolVersion
			}
		}
		s.mu.Unlock()
	}
	select {
	case s.recv <- bytes.Clone(b):
	case <-s.ctx.Done():
		return false
	}
	return isResp && id != nil && string(m.ID) == string(id)
}

// fail delivers a JSON-RPC error response to the request id.
func (s *HTTPSession) fail(id json.RawMessage, msg string) {
	s.failWith(id, mcpwire.Object{"code": json.RawMessage("-32603"), "message": mustJSON(msg)})
}

func (s *HTTPSession) failWith(id json.RawMessage, e mcpwire.Object) {
	eb, _ := e.Encode()
	b, _ := (&rpc.Message{ID: id, Error: eb}).Encode()
	s.deliver(b, nil)
}

func mustJSON(v string) json.RawMessage {
	b, _ := mcpwire.MarshalNoEscape(v)
	return b
}

// httpError turns an HTTP error answer to a request into its JSON-RPC
// error: the upstream's own, when its body is one, else one naming the
// status.
func (s *HTTPSession) httpError(id json.RawMessage, resp *http.Response) {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if m, err := rpc.Parse(b); err == nil && m.Error != nil && len(m.Error) > 0 && m.Error[0] == '{' {
		if e := mcpwire.SplitObject(m.Error); e != nil {
			if _, ok := e["code"]; ok {
				s.failWith(id, e)
				return
			}
		}
	}
	s.fail(id, "the upstream answered HTTP "+strconv.Itoa(resp.StatusCode))
}

// listen reads the session's GET stream until the session ends: the
// upstream's requests and notifications unrelated to a request (roots/list
// often) arrive there. 405 means the upstream has none.
func (s *HTTPSession) listen() {
	wait := time.Second
	last := ""
	for s.ctx.Err() == nil {
		resp, err := s.do(s.ctx, http.MethodGet, nil, last)
		if err == nil {
			switch {
			case resp.StatusCode == http.StatusMethodNotAllowed:
				resp.Body.Close()
				return
			case resp.StatusCode == http.StatusNotFound && s.sessionID() != "":
				resp.Body.Close()
				s.lost()
				return
			case resp.StatusCode != http.StatusOK:
				resp.Body.Close()
				s.log.Warn("bridge: the upstream refused the session's GET stream", "status", resp.StatusCode)
				return
			}
			var got bool
			got, last, err = s.eventsFrom(resp.Body, last)
			resp.Body.Close()
			if got {
				wait = time.Second
			}
		}
		if s.ctx.Err() != nil {
			return
		}
		if err != nil {
			s.log.Debug("bridge: the upstream's GET stream ended", "error", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			return
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// eventsFrom is events for the GET stream: got reports whether any event
// arrived; last stays the previous id when the stream gave none.
func (s *HTTPSession) eventsFrom(body io.Reader, prev string) (got bool, last string, err error) {
	er := mcpwire.NewEventReader(body, s.max)
	defer er.Close()
	last = prev
	for {
		ev, err := er.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return got, last, err
		}
		got = true
		for _, l := range ev.Other {
			if v, ok := bytes.CutPrefix(l, []byte("id:")); ok {
				last = string(bytes.TrimPrefix(v, []byte(" ")))
			}
		}
		if len(ev.Data) > 0 {
			s.deliver(ev.Data, nil)
		}
	}
}

// lost ends a session the upstream no longer knows.
func (s *HTTPSession) lost() {
	s.log.Warn("bridge: the upstream lost the HTTP session")
	s.end()
}

// end stops every request and stream; Recv is closed once they returned.
func (s *HTTPSession) end() {
	s.endOnce.Do(func() {
		s.mu.Lock()
		s.ended = true
		s.mu.Unlock()
		s.cancel()
		go func() {
			s.wg.Wait()
			close(s.recv)
			close(s.finished)
		}()
	})
}

// closeTimeout bounds each step of Close on its own: a caller may pass
// a context that never ends.
const closeTimeout = 10 * time.Second

// Close implements Upstream: it cancels the requests still in flight
// (notifications/cancelled: a server may wait for its handlers before it
// ends a session), ends the session with a DELETE (when the upstream gave
// it an id), stops every request and stream, and returns once they are
// done or ctx ends.
func (s *HTTPSession) Close(ctx context.Context) error {
	s.mu.Lock()
	id, ended := s.id, s.ended
	var pending []json.RawMessage
	for _, rid := range s.inflight {
		pending = append(pending, rid)
	}
	s.mu.Unlock()
	var err error
	if id != "" && !ended {
		for _, rid := range pending {
			params, _ := json.Marshal(map[string]any{"requestId": rid, "reason": "the proxy ended the session"})
			b, _ := (&rpc.Message{Method: "notifications/cancelled", Params: params}).Encode()
			s.closeStep(ctx, http.MethodPost, b)
		}
		if status, derr := s.closeStep(ctx, http.MethodDelete, nil); derr != nil {
			err = fmt.Errorf("end the upstream session: %w", derr)
		} else if status/100 != 2 && status != http.StatusMethodNotAllowed && status != http.StatusNotFound {
			err = fmt.Errorf("end the upstream session: HTTP %d", status)
		}
	}
	s.end()
	select {
	case <-s.finished:
	case <-ctx.Done():
		return errors.Join(err, ctx.Err())
	}
	return err
}

// closeStep sends one request of Close, bounded by closeTimeout.
func (s *HTTPSession) closeStep(ctx context.Context, method string, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, closeTimeout)
	defer cancel()
	resp, err := s.do(ctx, method, body, "")
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
