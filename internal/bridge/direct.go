package bridge

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/internal/rpc"
)

// Direct is an http.RoundTripper in front of a modern (2026-07-28)
// upstream reached over one shared connection, a stdio child: every
// client's requests go to the same process, under ids and progress tokens
// of the connection's own, so no two clients' ids or tokens collide, and
// each response and progress notification goes back to the request it
// belongs to with the client's own id and token. A client that goes away
// has its request cancelled (notifications/cancelled). The child is
// started on first use and again on the next request after it exits;
// requests it had in flight are answered with -32603 and their own ids.
type Direct struct {
	dial func(ctx context.Context) (Upstream, error)
	log  *slog.Logger

	mu      sync.Mutex
	cur     *directConn
	dialErr error // why the upstream last failed to start
}

type directConn struct {
	up   Upstream
	conn *rpc.Conn

	mu       sync.Mutex
	next     int64
	progress map[string]*progressRoute // the connection's token -> the request's
}

type progressRoute struct {
	token json.RawMessage // the client's
	out   *responder
	mu    *sync.Mutex // serialises writes to out
}

// NewDirect returns a Direct that opens its connection with dial.
func NewDirect(dial func(ctx context.Context) (Upstream, error), log *slog.Logger) *Direct {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Direct{dial: dial, log: log}
}

// Ready reports why the upstream cannot be used: it failed to start the
// last time it had to. Nil before the first start and once it started.
func (d *Direct) Ready(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dialErr
}

// Running reports whether the upstream process is up.
func (d *Direct) Running() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur == nil {
		return false
	}
	select {
	case <-d.cur.conn.Done():
		return false
	default:
		return true
	}
}

// Close stops the upstream, if it runs.
func (d *Direct) Close(ctx context.Context) error {
	d.mu.Lock()
	c := d.cur
	d.cur = nil
	d.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.up.Close(ctx)
}

// conn returns the live connection, starting the upstream if needed.
func (d *Direct) conn(ctx context.Context) (*directConn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur != nil {
		select {
		case <-d.cur.conn.Done():
			d.log.Warn("bridge: the upstream exited; starting it again")
			go d.cur.up.Close(context.Background())
			d.cur = nil
		default:
			return d.cur, nil
		}
	}
	up, err := d.dial(ctx)
	d.dialErr = err
	if err != nil {
		return nil, err
	}
	c := &directConn{up: up, progress: map[string]*progressRoute{}}
	c.conn = rpc.NewConn(up, c.handle)
	d.cur = c
	return c, nil
}

// handle routes the upstream's notifications; a modern server sends no
// requests, so any it sends is refused.
func (c *directConn) handle(m *rpc.Message) {
	if m.IsRequest() {
		_ = c.conn.RespondError(m.ID, -32601, "method not found: "+m.Method)
		return
	}
	if m.Method != "notifications/progress" || len(m.Params) == 0 || m.Params[0] != '{' {
		return // nothing ties other notifications to a request on stdio
	}
	p := mcpwire.SplitObject(mcpwire.TrimSpace(m.Params))
	c.mu.Lock()
	r := c.progress[string(p["progressToken"])]
	c.mu.Unlock()
	if r == nil {
		return
	}
	p["progressToken"] = r.token
	params, err := p.Encode()
	if err != nil {
		return
	}
	r.mu.Lock()
	r.out.notify(&rpc.Message{Method: m.Method, Params: params})
	r.mu.Unlock()
}

// RoundTrip serves one request through the shared connection.
func (d *Direct) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		var err error
		body, err = io.ReadAll(io.LimitReader(r.Body, 64<<20))
		r.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan *http.Response, 1), body: pr, req: r}
	go func() {
		d.serve(r.Context(), w, r, body)
		w.WriteHeader(http.StatusOK)
		pw.Close()
	}()
	return <-w.ready, nil
}

func (d *Direct) serve(ctx context.Context, w *pipeWriter, r *http.Request, body []byte) {
	if r.Method != http.MethodPost {
		// stdio has no sessions, so no GET stream and nothing to DELETE.
		w.Header().Set("Allow", "POST")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	m, err := rpc.Parse(body)
	if err != nil || m.Method == "" {
		writeMsg(w, http.StatusBadRequest, errorMessage(nil, -32600, "invalid request: one JSON-RPC request expected", nil))
		return
	}
	c, err := d.conn(ctx)
	if err != nil {
		d.log.Error("bridge: start the upstream", "error", err)
		writeMsg(w, http.StatusOK, errorMessage(m.ID, mrtr.CodeInternalError, "upstream unavailable: it could not be started", nil))
		return
	}
	if m.ID == nil {
		if m.Method != "notifications/cancelled" { // the proxy cancels for its clients; theirs name ids the upstream never saw
			_ = c.conn.Notify(m.Method, m.Params)
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	out := &responder{w: w, id: m.ID, sse: strings.Contains(r.Header.Get("Accept"), "text/event-stream")}
	var mu sync.Mutex
	params := m.Params
	var token string
	if len(params) > 0 && params[0] == '{' {
		p := mcpwire.SplitObject(mcpwire.TrimSpace(params))
		if meta, ok := p.Object("_meta"); ok {
			if t, ok := meta["progressToken"]; ok {
				c.mu.Lock()
				c.next++
				token = `"mrtr-` + strconv.FormatInt(c.next, 10) + `"`
				c.progress[token] = &progressRoute{token: t, out: out, mu: &mu}
				c.mu.Unlock()
				defer func() {
					c.mu.Lock()
					delete(c.progress, token)
					c.mu.Unlock()
				}()
				meta["progressToken"] = json.RawMessage(token)
				p["_meta"], _ = meta.Encode()
				params, _ = p.Encode()
			}
		}
	}
	call, err := c.conn.Start(m.Method, params)
	if err != nil {
		writeMsg(w, http.StatusOK, errorMessage(m.ID, mrtr.CodeInternalError, "upstream unavailable: the call was not delivered", nil))
		return
	}
	select {
	case resp, ok := <-call.Response():
		mu.Lock()
		defer mu.Unlock()
		if !ok {
			out.fail(http.StatusOK, mrtr.CodeInternalError, "upstream failed after the call was sent: the process exited", nil)
			return
		}
		if resp.Error != nil {
			b, _ := (&rpc.Message{ID: m.ID, Error: resp.Error}).Encode()
			out.send(statusOf(resp.Error), b)
			return
		}
		out.result(resp.Result)
	case <-ctx.Done():
		call.Cancel(context.Cause(ctx).Error())
	}
}

// statusOf is the HTTP status of a modern server's error response, as
// Streamable HTTP gives it for the codes that have one.
func statusOf(e json.RawMessage) int {
	code, _ := mcpwire.Member(e, "code")
	switch string(code) {
	case "-32020", "-32021", "-32022", "-32600", "-32700":
		return http.StatusBadRequest
	case "-32601":
		return http.StatusNotFound
	}
	return http.StatusOK
}
