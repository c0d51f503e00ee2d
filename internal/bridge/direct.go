package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
	dial  func(ctx context.Context) (Upstream, error)
	log   *slog.Logger
	start time.Duration // bounds a fresh child's answer to the proxy's ping

	mu      sync.Mutex
	cur     *directConn
	first   Upstream  // DirectOptions.First, until the first start takes it
	dialErr error     // why the upstream last failed to start
	crash   crashLoop // children that ended before answering anything, in a row
	closed  bool

	legacy *sessions // 2025-11-25 clients' sessions (legacysessions.go)
}

type directConn struct {
	up       Upstream
	conn     *rpc.Conn
	answered atomic.Bool   // the child answered the proxy's ping: it started
	ready    chan struct{} // closed once the ping is answered, or failed
	readyErr error         // why it failed, once ready is closed

	mu       sync.Mutex
	next     int64
	progress map[string]*progressRoute  // the connection's token -> the request's
	hub      *hub                       // the listen Direct holds on the child; nil when none
	tools    map[string]json.RawMessage // name -> inputSchema; nil when not known
	toolGen  uint64                     // bumped whenever tools goes stale
}

type progressRoute struct {
	token json.RawMessage // the client's
	out   *responder
	mu    *sync.Mutex // serialises writes to out
}

// NewDirect returns a Direct that opens its connection with dial.
func NewDirect(dial func(ctx context.Context) (Upstream, error), log *slog.Logger) *Direct {
	return NewDirectWith(DirectOptions{Dial: dial, Logger: log})
}

// DirectOptions configures a Direct. Dial is required.
type DirectOptions struct {
	// Dial starts the upstream: the shared child, and one per 2025-11-25
	// client session.
	Dial func(ctx context.Context) (Upstream, error)
	// Logger receives the upstream's starts and losses; nil means none.
	Logger *slog.Logger
	// MaxProcs bounds the children of 2025-11-25 client sessions (the
	// shared child aside); an initialize beyond it gets an error once no
	// idle session can be stopped. Zero means DefaultMaxSessions.
	MaxProcs int
	// MaxProcsPerCaller bounds those of them of one caller (all anonymous
	// callers are one); at the bound the caller's least recently used
	// idle session is stopped, and an initialize gets an error when none
	// is idle. Zero means MaxProcs.
	MaxProcsPerCaller int
	// First, when set, is the shared child started already (the one the
	// proxy started to learn the upstream's era): the first request uses
	// it instead of starting one.
	First Upstream
	// CrashLoop, RestartBackoff and MaxRestartBackoff are as in Options,
	// for the shared child: a fresh child gets the proxy's own ping
	// before any caller's request, and a start fails when the child
	// cannot be started or ends (or StartTimeout passes) before it
	// answered that ping. A child that ends during a caller's request
	// fails that request only. In a crash loop the Direct tries again in
	// the background.
	CrashLoop                         int
	RestartBackoff, MaxRestartBackoff time.Duration
	// IdleTimeout stops a 2025-11-25 client session nobody used for that
	// long. Zero means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// StartTimeout bounds starting a child, the shared child's answer to
	// the proxy's ping included. Zero means DefaultStartTimeout.
	StartTimeout time.Duration
	// Roots, RootsFromClient, RootsWait and RootsSettle are as in
	// Options, for the roots/list requests of the children of 2025-11-25
	// client sessions: by default the proxy answers them with Roots, and
	// the client never sees them.
	Roots                  []string
	RootsFromClient        bool
	RootsWait, RootsSettle time.Duration
}

// NewDirectWith returns a Direct configured by o. A nil Dial panics.
func NewDirectWith(o DirectOptions) *Direct {
	if o.Dial == nil {
		panic("bridge: NewDirectWith needs DirectOptions.Dial")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.RootsWait <= 0 {
		o.RootsWait = DefaultRootsWait
	}
	if o.RootsSettle <= 0 {
		o.RootsSettle = DefaultRootsSettle
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	return &Direct{dial: o.Dial, log: o.Logger, start: o.StartTimeout, first: o.First, crash: newCrashLoop(o.CrashLoop, o.RestartBackoff, o.MaxRestartBackoff), legacy: newSessions(sessionsConfig{
		dial: o.Dial, max: o.MaxProcs, perCaller: o.MaxProcsPerCaller, idle: o.IdleTimeout, start: o.StartTimeout, log: o.Logger,
		roots: rootsResult(o.Roots), operatorRoots: len(o.Roots) > 0, rootsFromClient: o.RootsFromClient,
		rootsGate: newRootsGate(len(o.Roots) > 0, o.RootsWait, o.RootsSettle, o.Logger),
	})}
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

// Stats reports the upstream processes running: the shared child, when
// it runs, and the children of 2025-11-25 client sessions; Idle counts
// those of the latter that serve no request but their GET stream (the
// shared child is never idle: it serves every 2026-07-28 client). Holds
// is 0: a Direct holds no call.
func (d *Direct) Stats() Stats {
	open, idle := d.legacy.stats()
	if d.Running() {
		open++
	}
	return Stats{Sessions: open, Idle: idle, Dropped: d.legacy.dropped.Load(), Refused: d.legacy.c.warn.refusals()}
}

// Close stops the upstream, if it runs, and the children of 2025-11-25
// client sessions.
func (d *Direct) Close(ctx context.Context) error {
	d.mu.Lock()
	c, first := d.cur, d.first
	d.cur, d.first = nil, nil
	d.closed = true
	d.crash.stopRetry()
	d.mu.Unlock()
	// Every child at once, as Bridge.Close: each may take its grace.
	stops := []func(context.Context) error{d.legacy.close}
	if first != nil {
		stops = append(stops, first.Close)
	}
	if c != nil {
		stops = append(stops, c.up.Close)
	}
	return stopEach(stops, func(stop func(context.Context) error) error { return stop(ctx) })
}

// conn returns the live connection, starting the upstream if needed,
// once it answered the proxy's ping (probe).
func (d *Direct) conn(ctx context.Context) (*directConn, error) {
	c, err := d.current(ctx)
	if err != nil {
		return nil, err
	}
	select {
	case <-c.ready:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if c.readyErr != nil {
		return nil, c.readyErr
	}
	return c, nil
}

// current returns the live connection, starting the upstream if needed;
// a fresh one may not have answered the proxy's ping yet.
func (d *Direct) current(ctx context.Context) (*directConn, error) {
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
	if d.closed { // a crash loop's retry that fired as it closed
		return nil, errClosed
	}
	if err := d.crash.blocked(time.Now()); err != nil {
		return nil, err
	}
	up, err := d.first, error(nil)
	d.first = nil
	if up == nil {
		up, err = d.dial(ctx)
	}
	d.dialErr = err
	if err != nil {
		d.startedLocked(&startError{err: err, why: err.Error()})
		return nil, err
	}
	c := &directConn{up: up, progress: map[string]*progressRoute{}, ready: make(chan struct{})}
	c.conn = rpc.NewConn(up, c.handle)
	// A child whose output ended is stopped at once, not at the next
	// request: one that closed stdout and lives on is not kept. One that
	// ended before answering the proxy's ping failed to start.
	c.conn.AfterDone(func() {
		go func() {
			_ = up.Close(context.Background())
			if !c.answered.Load() {
				d.mu.Lock()
				d.startedLocked(&startError{err: errLost, why: exitSummary(errors.New("it ended before answering any request"), up)})
				d.mu.Unlock()
			}
		}()
	})
	d.cur = c
	c.startHub()
	go d.probe(c)
	return c, nil
}

// probe sends a fresh child the proxy's own ping, before any caller's
// request reaches it: its answer (any answer) is a successful start, so
// that a caller whose request makes the child exit fails that request
// only, never the starts of everyone (a crash loop). A child that does
// not answer within the start timeout is stopped: it failed to start.
func (d *Direct) probe(c *directConn) {
	ctx, cancel := context.WithTimeout(context.Background(), d.start)
	defer cancel()
	params, _ := json.Marshal(map[string]any{"_meta": ownMeta()})
	resp, err := c.conn.Call(ctx, "ping", params)
	if err == nil && resp != nil {
		if c.answered.CompareAndSwap(false, true) {
			d.mu.Lock()
			d.startedLocked(nil)
			d.mu.Unlock()
		}
		close(c.ready)
		return
	}
	if ctx.Err() != nil {
		d.log.Warn("bridge: the upstream did not answer the proxy's ping; it is stopped", "waited", d.start)
		_ = c.up.Close(context.Background()) // its end is counted (AfterDone)
	}
	c.readyErr = &startError{err: errors.New("the upstream could not be started"), why: "it ended before answering any request"}
	close(c.ready)
}

// startedLocked counts a start's outcome; in a crash loop it arranges a
// start in the background, once the wait is over, that a ping tells
// started or not. d.mu held.
func (d *Direct) startedLocked(err error) {
	if err != nil && d.closed {
		return
	}
	wait := d.crash.record(err, time.Now(), d.log)
	if wait <= 0 || d.crash.retry != nil {
		return
	}
	d.crash.retry = time.AfterFunc(wait, func() {
		d.mu.Lock()
		d.crash.retry = nil
		d.mu.Unlock()
		// A start, whose ping (probe) tells started or not: counted, and
		// retried, there.
		ctx, cancel := context.WithTimeout(context.Background(), d.start)
		defer cancel()
		_, _ = d.current(ctx)
	})
}

// CrashLoop reports why the shared child is in a crash loop
// (DirectOptions.CrashLoop starts in a row failed), as Bridge.CrashLoop
// does; nil when it is not.
func (d *Direct) CrashLoop(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.crash.report(time.Now())
}

// handle routes the upstream's notifications; a modern server sends no
// requests, so any it sends is refused.
func (c *directConn) handle(m *rpc.Message) {
	if m.IsRequest() {
		_ = c.conn.RespondError(m.ID, -32601, "method not found: "+m.Method)
		return
	}
	if m.Method == methodAcknowledge || listChanged[m.Method] != "" {
		c.mu.Lock()
		h := c.hub
		if m.Method == "notifications/tools/list_changed" {
			c.tools, c.toolGen = nil, c.toolGen+1
		}
		c.mu.Unlock()
		if h == nil {
			return
		}
		if m.Method == methodAcknowledge {
			h.acknowledge(m.Params)
		} else {
			h.fanOut(m)
		}
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
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	return serveInProcess(r, body, d.serve), nil
}

func (d *Direct) serve(ctx context.Context, w *pipeWriter, r *http.Request, body []byte) {
	if legacyRequest(r, body) { // a 2025-11-25 client: a session and child of its own
		d.legacy.serve(ctx, w, r, body)
		return
	}
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
	req := mcpwire.Object{}
	if len(m.Params) > 0 && m.Params[0] == '{' {
		req = mcpwire.SplitObject(mcpwire.TrimSpace(m.Params))
	}
	if no := transportRules(r.Header, m, req, func(name string) (json.RawMessage, bool) {
		c, err := d.conn(ctx)
		if err != nil {
			return nil, false
		}
		return c.toolSchema(ctx, name)
	}); no != nil {
		writeMsg(w, no.status, errorMessage(m.ID, no.code, no.message, no.data))
		return
	}
	c, err := d.conn(ctx)
	var bo *backoffError
	switch {
	case errors.As(err, &bo): // said once, when the wait began
		writeMsg(w, http.StatusOK, errorMessage(m.ID, mrtr.CodeInternalError, "upstream unavailable: "+err.Error(), nil))
		return
	case err != nil:
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
	if m.Method == methodListen {
		c.listen(ctx, out, m, req)
		return
	}
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
	case "-32020", "-32021", "-32022", "-32600", "-32602", "-32700":
		return http.StatusBadRequest
	case "-32601":
		return http.StatusNotFound
	}
	return http.StatusOK
}

// toolSchema returns the inputSchema of the child's tool name, from its
// tools/list. The list is kept while the hub receives the child's
// tools/list_changed (so a change empties it), and fetched again for
// every call otherwise. ok is false when the child lists no such tool or
// cannot be asked.
func (c *directConn) toolSchema(ctx context.Context, name string) (json.RawMessage, bool) {
	c.mu.Lock()
	tools, gen, h := c.tools, c.toolGen, c.hub
	c.mu.Unlock()
	if tools == nil {
		var err error
		if tools, err = c.listTools(ctx); err != nil {
			return nil, false // the call itself meets the same child
		}
		if h != nil && h.granted("toolsListChanged") {
			c.mu.Lock()
			if c.toolGen == gen && c.hub == h {
				c.tools = tools
			}
			c.mu.Unlock()
		}
	}
	s, ok := tools[name]
	return s, ok
}

// maxToolPages bounds the pages of one tools/list.
const maxToolPages = 100

// listTools reads every page of the child's tools/list.
func (c *directConn) listTools(ctx context.Context) (map[string]json.RawMessage, error) {
	tools := map[string]json.RawMessage{}
	var cursor string
	for range maxToolPages {
		p := map[string]any{"_meta": ownMeta()}
		if cursor != "" {
			p["cursor"] = cursor
		}
		params, _ := json.Marshal(p)
		resp, err := c.conn.Call(ctx, mcpwire.MethodListTools, params)
		if err != nil {
			return nil, err
		}
		if resp.Error != nil {
			return nil, fmt.Errorf("tools/list: %s", mcpwire.Shown(string(resp.Error)))
		}
		var page struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(resp.Result, &page); err != nil {
			return nil, fmt.Errorf("decode tools/list: %w", err)
		}
		for _, t := range page.Tools {
			tools[t.Name] = t.InputSchema
		}
		if page.NextCursor == "" {
			return tools, nil
		}
		cursor = page.NextCursor
	}
	return nil, fmt.Errorf("tools/list: more than %d pages", maxToolPages)
}
