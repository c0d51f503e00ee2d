package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/internal/rpc"
)

// Older clients in front of a stdio upstream.
//
// A 2025-11-25 client speaks to a stateful Streamable HTTP server:
// initialize, an Mcp-Session-Id, a GET stream, DELETE. On stdio the
// session is the process, so each such session gets a child of its own:
// initialize starts one, and every message of the session goes to it as
// it is, with the client's own ids (one client per child, nothing to
// remap). The children count against the same bound as the bridge's,
// and the sessions of both are evicted by one policy (Bridge.evict).
//
// What the child sends waits in queues bounded as a held call's are
// (fifo, Options.MaxQueue): one for each request in flight, one for the
// GET stream, kept while no stream is open. A child that overflows one
// with requests or responses has its session ended.

// sessionHeader is the 2025-11-25 session id header.
const sessionHeader = "Mcp-Session-Id"

// maxAsked bounds the child's requests a session remembers as passed to
// its client and not answered yet.
const maxAsked = 1024

// sessionsConfig configures a sessions handler.
type sessionsConfig struct {
	dial func(ctx context.Context) (Upstream, error)
	// reserve takes one process slot for a session of caller (key of a
	// principal), free gives it back; nil counts the handler's own
	// children against max, and those of one caller against perCaller
	// (zero: max).
	reserve   func(caller string) error
	free      func(caller string)
	max       int
	perCaller int
	idle      time.Duration
	start     time.Duration
	log       *slog.Logger
	// roots is the roots/list result the proxy answers the child with
	// (the operator's, see rootsGate); operatorRoots says the operator
	// gave some, so the child is told the client has roots even when the
	// client did not say so. rootsFromClient lets the client answer
	// roots/list itself instead, as any other request of the child.
	roots           json.RawMessage
	operatorRoots   bool
	rootsFromClient bool
	rootsGate       *rootsGate
	// maxQueue and maxQueueBytes bound each queue of a session (fifo);
	// zero means the defaults.
	maxQueue, maxQueueBytes int
	now                     func() time.Time // nil means time.Now
	warn                    *warnings        // nil: the handler's own
}

// sessions serves the 2025-11-25 sessions of one Bridge or Direct.
type sessions struct {
	c sessionsConfig

	mu     sync.Mutex
	byID   map[string]*lsession
	own    int            // children counted here when c.reserve is nil
	ownBy  map[string]int // of them, each caller's
	closed bool

	dropped atomic.Int64 // notifications dropped from full queues
}

func newSessions(c sessionsConfig) *sessions {
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.max <= 0 {
		c.max = DefaultMaxSessions
	}
	if c.perCaller <= 0 || c.perCaller > c.max {
		c.perCaller = c.max
	}
	if c.idle <= 0 {
		c.idle = DefaultIdleTimeout
	}
	if c.start <= 0 {
		c.start = DefaultStartTimeout
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.warn == nil {
		c.warn = newWarnings(c.log, c.now)
	}
	if c.roots == nil {
		c.roots = rootsResult(nil)
	}
	return &sessions{c: c, byID: map[string]*lsession{}, ownBy: map[string]int{}}
}

func (ss *sessions) newQueue() *queue { return newQueue(ss.c.maxQueue, ss.c.maxQueueBytes) }

// stats reports the open sessions (each one upstream connection: a child
// on stdio) and the idle ones among them, with no request in flight but
// their GET stream.
func (ss *sessions) stats() (open, idle int) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, s := range ss.byID {
		s.mu.Lock()
		if s.idleLocked() {
			idle++
		}
		s.mu.Unlock()
	}
	return len(ss.byID), idle
}

// idleLocked reports whether s serves no request but its GET stream; s.mu
// held.
func (s *lsession) idleLocked() bool {
	return s.busy == 0 || (s.busy == 1 && s.get != nil)
}

// close ends every session; later requests get 404, initialize an error.
func (ss *sessions) close(ctx context.Context) error {
	ss.mu.Lock()
	ss.closed = true
	all := make([]*lsession, 0, len(ss.byID))
	for _, s := range ss.byID {
		all = append(all, s)
	}
	ss.mu.Unlock()
	return stopEach(all, func(s *lsession) error { return s.stop(ctx, "the proxy is stopping") })
}

// take reserves a slot for one more child, of caller. At caller's bound
// (c.perCaller) the least recently used idle session of caller
// (lruLocked) is ended to make room, at the bound of all (c.max) the
// least recently used idle session of anyone: its slot is this one's, and
// its child is stopped before take returns, so the children stay within
// the bound. On a Bridge, c.reserve does that over the bridge's sessions
// too (Bridge.slot).
func (ss *sessions) take(caller string) error {
	if ss.c.reserve != nil {
		return ss.c.reserve(caller)
	}
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return errClosed
	}
	var of func(string) bool
	switch {
	case ss.c.perCaller < ss.c.max && ss.ownBy[caller] >= ss.c.perCaller:
		of = only(caller)
	case ss.own < ss.c.max:
		ss.own++
		ss.ownBy[caller]++
		ss.mu.Unlock()
		return nil
	}
	// The victim's slot is taken over: its caller's count moves to this
	// one's.
	v := ss.evictLocked(of, false, time.Time{}, func(c string) { ss.ownBy[c]--; ss.ownBy[caller]++ })
	ss.mu.Unlock()
	if v == nil {
		if of != nil {
			ss.c.warn.refuse(limitPerCaller, "bridge: a call was refused: its caller is at its limit of upstream processes (--max-procs-per-caller) and none of them is idle",
				"max", ss.c.perCaller)
			return errTooManyOfCaller
		}
		ss.c.warn.refuse(limitProcs, "bridge: a call was refused: the proxy is at its limit of upstream processes (--max-procs) and none is idle",
			"max", ss.c.max)
		return errTooMany
	}
	ss.c.log.Debug("bridge: idle legacy client session stopped to make room")
	_ = v.stop(context.Background(), "stopped to make room for another")
	return nil
}

func (ss *sessions) free(caller string) {
	if ss.c.reserve != nil {
		ss.c.free(caller)
		return
	}
	ss.mu.Lock()
	ss.own--
	if ss.ownBy[caller]--; ss.ownBy[caller] <= 0 {
		delete(ss.ownBy, caller)
	}
	ss.mu.Unlock()
}

// only accepts caller alone, as the filter of an eviction.
func only(caller string) func(string) bool {
	return func(c string) bool { return c == caller }
}

// lruLocked returns the session to stop for room among those whose
// caller of accepts (nil accepts any): of those with no request in
// flight, one that serves nothing at all before one with only its GET
// stream open, and then the one least recently used; and whether it
// streams, and when it was last used. ss.mu held.
func (ss *sessions) lruLocked(of func(caller string) bool) (v *lsession, streams bool, at time.Time) {
	for _, s := range ss.byID {
		if of != nil && !of(s.caller) {
			continue
		}
		s.mu.Lock()
		st := s.get != nil
		ok := s.idleLocked()
		if ok && (v == nil || (streams && !st) || (streams == st && s.usedAt.Before(at))) {
			v, streams, at = s, st, s.usedAt
		}
		s.mu.Unlock()
	}
	return v, streams, at
}

// evict takes the session lruLocked picks out of the sessions when it
// ranks before an idle session of the bridge's last used at before (when
// other says there is one: that one serves no stream, so it goes first
// unless this one is older and serves none either). The session is
// unknown from then on (404), and give hands its slot (of its caller) over
// at once; the caller ends it (end). Nil when there is none to take.
func (ss *sessions) evict(of func(caller string) bool, other bool, before time.Time, give func(caller string)) *lsession {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.evictLocked(of, other, before, give)
}

func (ss *sessions) evictLocked(of func(caller string) bool, other bool, before time.Time, give func(caller string)) *lsession {
	v, streams, at := ss.lruLocked(of)
	if v == nil || other && (streams || !at.Before(before)) {
		return nil
	}
	delete(ss.byID, v.id)
	// In byID, v has not reached end's freeing of its slot: the slot is
	// handed over here, and end leaves it.
	if v.released.CompareAndSwap(false, true) {
		give(v.caller)
	}
	return v
}

// lsession is one 2025-11-25 client session and its child.
type lsession struct {
	ss     *sessions
	id     string
	caller string // the principal that initialized it (key of callerOf): only it may use the session
	up     Upstream
	done   chan struct{} // closed when the session has ended
	once   sync.Once
	err    error // of stopping the child

	released atomic.Bool            // its slot was given back (by end, or evict handed it over)
	stopped  atomic.Pointer[string] // why the proxy ended it (stop), if it did: its child's end is then no news

	mu      sync.Mutex
	posts   []*post // requests in flight, oldest first
	get     *queue  // backlog, while the GET stream is open
	backlog *queue  // what the child sends for the GET stream, open or not
	busy    int     // HTTP requests being served
	usedAt  time.Time
	timer   *time.Timer
	flooded bool                // a queue overflowed: the session is ending
	why     error               // errFlood once flooded
	asked   map[string]struct{} // ids of the child's requests passed to the client, not yet answered

	rootsAnswered rootsSignal   // the child had the operator's roots
	initialized   bool          // the child was sent notifications/initialized (the client's or the proxy's)
	settled       chan struct{} // closed once the child's requests may go (settle)
}

// post is a client request in flight: its id as the child answers it.
type post struct {
	id    string
	token string // its progress token, canonical; "" if none
	sse   bool
	q     *queue
	final bool // the response was queued
}

// canonicalID is a JSON-RPC id as a map key: the same id however it was
// spaced or escaped.
func canonicalID(raw json.RawMessage) string {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return string(raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return string(raw)
	}
	return string(b)
}

// serve answers one HTTP request of a 2025-11-25 session.
func (ss *sessions) serve(ctx context.Context, w *pipeWriter, r *http.Request, body []byte) {
	id := r.Header.Get(sessionHeader)
	switch r.Method {
	case http.MethodPost:
	case http.MethodGet, http.MethodDelete:
		if id == "" {
			writeMsg(w, http.StatusBadRequest, errorMessage(nil, -32600, "bad request: "+r.Method+" needs an Mcp-Session-Id header (initialize first)", nil))
			return
		}
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	m, err := rpc.Parse(body)
	if r.Method == http.MethodPost && err != nil {
		writeMsg(w, http.StatusBadRequest, errorMessage(nil, -32600, "invalid request: one JSON-RPC message expected", nil))
		return
	}
	if id == "" { // legacyRequest: an initialize
		ss.initialize(ctx, w, r, m, body)
		return
	}
	s := ss.lookup(id, key(callerOf(ctx)))
	if s == nil {
		writeMsg(w, http.StatusNotFound, errorMessage(idOf(m), -32001, "session not found: it ended or expired; initialize a new one", nil))
		return
	}
	defer s.idle()
	switch {
	case r.Method == http.MethodDelete:
		_ = s.stop(ctx, "closed by its client")
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet:
		s.stream(ctx, w, r)
	case m.IsRequest():
		if m.Method != "ping" {
			if err := s.settle(ctx, nil); err != nil {
				if ctx.Err() == nil {
					writeMsg(w, http.StatusOK, errorMessage(m.ID, mrtr.CodeInternalError, err.Error(), nil))
				}
				return
			}
		}
		s.request(ctx, w, r, m, body, false)
	case m.Method == "notifications/initialized":
		// Relayed once (settle); its POST, too, is answered once the
		// child had the operator's roots.
		if err := s.settle(ctx, body); err != nil {
			if ctx.Err() == nil {
				writeMsg(w, http.StatusOK, errorMessage(nil, mrtr.CodeInternalError, err.Error(), nil))
			}
			return
		}
		w.WriteHeader(http.StatusAccepted)
	default: // a notification, or the client's answer to the child's request
		if m.Method == "" && !s.answers(m) {
			// An answer to a request the child never sent the client
			// (one the proxy answered itself, roots/list above all)
			// would be taken as the answer to it.
			writeMsg(w, http.StatusBadRequest, errorMessage(nil, -32600, "invalid request: the server sent no request with this id", nil))
			return
		}
		if err := s.up.Send(body); err != nil {
			writeMsg(w, http.StatusOK, errorMessage(m.ID, mrtr.CodeInternalError, "upstream unavailable: the message was not delivered", nil))
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}
}

// answers reports whether m, a response of the client, answers a request
// the child sent it and that is not answered yet, and takes that request
// off the list.
func (s *lsession) answers(m *rpc.Message) bool {
	if m.ID == nil {
		return false
	}
	id := canonicalID(m.ID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.asked[id]; !ok {
		return false
	}
	delete(s.asked, id)
	return true
}

// initializedMsg is the notifications/initialized the proxy sends a
// child for a client that did not send its own first (settle).
var initializedMsg = []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

// settle holds a request of the client (any but ping), or its
// notifications/initialized (own: its body), until the child had the
// operator's roots (rootsGate), when the operator gave some: a 2025-11-25
// server asks for them once initialized, so the child is sent
// notifications/initialized once, the client's or, when a request comes
// first (a client that skips it, or sends its call alongside it), the
// proxy's own, and every request waits for the same gate. A later
// notifications/initialized of the client's is not relayed again. The
// error is why the request cannot go: the session ended, the
// notification was not delivered, or ctx is done.
func (s *lsession) settle(ctx context.Context, own []byte) error {
	gated := s.ss.c.operatorRoots && !s.ss.c.rootsFromClient
	if !gated && own == nil {
		return nil // nothing waits for roots: the client's order is kept
	}
	s.mu.Lock()
	first := !s.initialized
	s.initialized = true
	if first {
		s.settled = make(chan struct{})
	}
	settled := s.settled
	s.mu.Unlock()
	if first {
		msg := own
		if msg == nil {
			msg = initializedMsg
		}
		if err := s.up.Send(msg); err != nil {
			close(settled)
			return errors.New("upstream unavailable: the message was not delivered")
		}
		if !gated {
			close(settled)
		} else {
			go func() {
				// Bounded by the gate's own waits, not by a request: the
				// one that came first may go away, the others still wait.
				s.ss.c.rootsGate.await(context.Background(), s.rootsAnswered.c)
				close(settled)
			}()
		}
	}
	select {
	case <-settled:
		return nil
	case <-s.done:
		return errors.New(s.lost())
	case <-ctx.Done():
		return ctx.Err()
	}
}

func idOf(m *rpc.Message) json.RawMessage {
	if m == nil {
		return nil
	}
	return m.ID
}

// lookup returns the live session id names and marks it busy, if caller
// is the principal that initialized it: a session id another caller
// learnt is as unknown to it as one that never existed (the 2025-11-25
// spec's binding of a session to its user).
func (ss *sessions) lookup(id, caller string) *lsession {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.byID[id]
	if s == nil || s.caller != caller {
		return nil
	}
	s.mu.Lock()
	s.busy++
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	return s
}

// idle ends one HTTP request of s; the last one arms the idle timer.
func (s *lsession) idle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy--
	s.usedAt = s.ss.c.now()
	select {
	case <-s.done:
		return
	default:
	}
	if s.busy == 0 {
		if s.timer != nil {
			s.timer.Stop()
		}
		s.timer = time.AfterFunc(s.ss.c.idle, func() {
			s.mu.Lock()
			busy := s.busy
			s.mu.Unlock()
			if busy == 0 {
				s.ss.c.log.Debug("bridge: idle legacy client session stopped")
				_ = s.stop(context.Background(), "idle for longer than the session timeout")
			}
		})
	}
}

// initialize starts a child for a new session and relays the client's
// initialize to it; the session exists once the child answered it.
func (ss *sessions) initialize(ctx context.Context, w *pipeWriter, r *http.Request, m *rpc.Message, body []byte) {
	if !m.IsRequest() || m.Method != "initialize" {
		writeMsg(w, http.StatusBadRequest, errorMessage(idOf(m), -32600, "bad request: no Mcp-Session-Id header (initialize first)", nil))
		return
	}
	caller := key(callerOf(ctx))
	if err := ss.take(caller); err != nil { // warned of at the limit
		writeMsg(w, http.StatusOK, errorMessage(m.ID, mrtr.CodeInternalError, err.Error(), nil))
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ss.c.start)
	up, err := ss.c.dial(dctx)
	cancel()
	if err != nil {
		ss.free(caller)
		ss.c.log.Error("bridge: start the upstream", "error", err)
		writeMsg(w, http.StatusOK, errorMessage(m.ID, mrtr.CodeInternalError, "upstream unavailable: it could not be started", nil))
		return
	}
	s := &lsession{ss: ss, id: newHoldID(), caller: caller, up: up, done: make(chan struct{}), busy: 1, usedAt: ss.c.now(), backlog: ss.newQueue(), asked: map[string]struct{}{}, rootsAnswered: newRootsSignal()}
	// The session is known before its id leaves: a client speaks on it as
	// soon as it reads the response's header, and must not find it
	// missing. Until then nobody knows the id, and busy keeps it from
	// the idle timer and from lruIdle.
	ss.mu.Lock()
	closed := ss.closed
	if !closed {
		ss.byID[s.id] = s
	}
	ss.mu.Unlock()
	go s.read()
	if closed {
		_ = s.end(context.Background())
		writeMsg(w, http.StatusOK, errorMessage(m.ID, mrtr.CodeInternalError, errClosed.Error(), nil))
		return
	}
	if !ss.c.rootsFromClient && ss.c.operatorRoots {
		body = withRootsCapability(body)
	}
	if !s.request(ctx, w, r, m, body, true) {
		_ = s.end(context.Background())
		return
	}
	defer s.idle()
	ss.c.log.Info("bridge: legacy client session started")
}

// read routes the child's messages until its output ends, then ends the
// session.
func (s *lsession) read() {
	for b := range s.up.Recv() {
		m, err := rpc.Parse(b)
		if err != nil {
			continue
		}
		if m.IsRequest() && m.Method == mcpwire.MethodListRoots && !s.ss.c.rootsFromClient {
			// The operator's roots, never the remote client's (see
			// rootsGate): the client does not see the request.
			if resp, err := (&rpc.Message{ID: m.ID, Result: s.ss.c.roots}).Encode(); err == nil {
				_ = s.up.Send(resp)
			}
			s.rootsAnswered.fire()
			continue
		}
		s.route(m, b)
	}
	_ = s.end(context.Background()) // reaped: how it ended is known
	if why := s.stopped.Load(); why != nil {
		// A normal end: the proxy stopped the child because the session
		// ended (the client closed it, most often).
		s.ss.c.log.Info("bridge: legacy client session ended; its upstream was stopped", "why", *why, "exit", exitStatusOf(s.up))
		return
	}
	s.ss.c.log.Info("bridge: the upstream of a legacy client session exited", exitAttrs(s.up)...)
}

// stop ends the session as end does, saying why: its child's end is then
// logged as the session's normal end, not as an upstream that exited.
func (s *lsession) stop(ctx context.Context, why string) error {
	s.stopped.CompareAndSwap(nil, &why)
	return s.end(ctx)
}

// route hands one message of the child to where it belongs: a response to
// its request's POST; a request or notification to the POST it names by
// progress token, else to the oldest POST that streams, else to the GET
// stream (kept for it while none is open). A message that overflows its
// queue ends the session.
func (s *lsession) route(m *rpc.Message, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.flooded {
		return
	}
	q := s.queueFor(m)
	if q == nil {
		return
	}
	dropped, ok := q.push(b, m.IsNotification())
	if dropped > 0 {
		s.ss.dropped.Add(int64(dropped))
		s.ss.c.warn.warn("queue", "bridge: a queue of a legacy client session is full: the upstream's notifications are dropped",
			"max", q.msgs.max, "max_bytes", q.msgs.maxBytes)
	}
	if !ok {
		s.flooded, s.why = true, errFlood
		s.ss.c.log.Warn("bridge: the upstream of a legacy client session overflowed a queue with requests (a protocol error); the session is ended")
		go s.end(context.Background())
	}
}

// queueFor returns the queue m goes to (see route); nil when nobody waits
// for it. s.mu held.
func (s *lsession) queueFor(m *rpc.Message) *queue {
	if m.Method == "" {
		if m.ID == nil {
			return nil
		}
		id := canonicalID(m.ID)
		for i, p := range s.posts {
			if p.id == id {
				p.final = true
				s.posts = append(s.posts[:i:i], s.posts[i+1:]...)
				return p.q
			}
		}
		return nil // the POST went away: nobody waits for it
	}
	if m.IsRequest() && len(s.asked) < maxAsked {
		// Only the client's answers to these reach the child (beyond
		// maxAsked unanswered ones, none more).
		s.asked[canonicalID(m.ID)] = struct{}{}
	}
	if m.Method == "notifications/progress" {
		if t, ok := mcpwire.Member(m.Params, "progressToken"); ok {
			tok := canonicalID(t)
			for _, p := range s.posts {
				if p.token == tok && p.sse {
					return p.q
				}
			}
		}
	}
	for _, p := range s.posts {
		if p.sse {
			return p.q
		}
	}
	return s.backlog
}

// request relays one client request to the child and its answer back:
// JSON, or an event stream when the child sends messages first. It
// reports whether the child answered with a result. The first request,
// the initialize, gets the session's id with its result only.
func (s *lsession) request(ctx context.Context, w *pipeWriter, r *http.Request, m *rpc.Message, body []byte, first bool) bool {
	// Nothing may come before an initialize's response: the session does
	// not exist yet.
	p := &post{id: canonicalID(m.ID), q: s.ss.newQueue(), sse: !first && strings.Contains(r.Header.Get("Accept"), "text/event-stream")}
	if meta, ok := mcpwire.Member(m.Params, "_meta"); ok {
		if t, ok := mcpwire.Member(meta, "progressToken"); ok {
			p.token = canonicalID(t)
		}
	}
	s.mu.Lock()
	select {
	case <-s.done:
		s.mu.Unlock()
		writeMsg(w, http.StatusNotFound, errorMessage(m.ID, -32001, "session not found: it ended; initialize a new one", nil))
		return false
	default:
	}
	for _, o := range s.posts {
		if o.id == p.id {
			s.mu.Unlock()
			writeMsg(w, http.StatusOK, errorMessage(m.ID, -32600, "invalid request: this id is in use by a request in flight", nil))
			return false
		}
	}
	s.posts = append(s.posts, p)
	s.mu.Unlock()
	defer s.forget(p)
	out := &responder{w: w, id: m.ID, sse: p.sse}
	if err := s.up.Send(body); err != nil {
		out.fail(http.StatusOK, mrtr.CodeInternalError, "upstream unavailable: the request was not delivered", nil)
		return false
	}
	for {
		for _, b := range p.q.take() {
			msg, err := rpc.Parse(b)
			if err != nil {
				continue
			}
			if msg.Method == "" {
				if first && msg.Error == nil {
					// The session's id goes out with the initialize's
					// result only: an error creates no session.
					w.Header().Set(sessionHeader, s.id)
				}
				out.send(http.StatusOK, b)
				return msg.Error == nil
			}
			out.notify(msg)
		}
		select {
		case <-p.q.signal:
		case <-s.done:
			if !p.q.empty() { // queued before the end: delivered first
				continue
			}
			out.fail(http.StatusOK, mrtr.CodeInternalError, s.lost(), nil)
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// lost is the message of a request the session's end cut short.
func (s *lsession) lost() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.why != nil {
		return s.why.Error()
	}
	return errLost.Error() + ": the process exited"
}

// forget drops p from the requests in flight.
func (s *lsession) forget(p *post) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, o := range s.posts {
		if o == p {
			s.posts = append(s.posts[:i:i], s.posts[i+1:]...)
			return
		}
	}
}

// stream serves the GET stream: the child's messages that belong to no
// request in flight.
func (s *lsession) stream(ctx context.Context, w *pipeWriter, r *http.Request) {
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		writeMsg(w, http.StatusNotAcceptable, errorMessage(nil, -32600, "not acceptable: the GET stream is text/event-stream", nil))
		return
	}
	s.mu.Lock()
	if s.get != nil {
		s.mu.Unlock()
		writeMsg(w, http.StatusConflict, errorMessage(nil, -32600, "conflict: this session's GET stream is already open", nil))
		return
	}
	q := s.backlog // what waited for the stream comes first
	s.get = q
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.get == q {
			s.get = nil // what it did not take is kept for the next stream
		}
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	for {
		for _, b := range q.take() {
			writeEvent(w, b)
		}
		select {
		case <-q.signal:
		case <-s.done:
			return
		case <-ctx.Done():
			return
		}
	}
}

// end ends the session once: it is forgotten (404 afterwards), its
// requests in flight get errors, its slot is freed and its child stopped.
func (s *lsession) end(ctx context.Context) error {
	s.once.Do(func() {
		ss := s.ss
		ss.mu.Lock()
		if ss.byID[s.id] == s {
			delete(ss.byID, s.id)
		}
		ss.mu.Unlock()
		s.mu.Lock()
		if s.timer != nil {
			s.timer.Stop()
		}
		s.mu.Unlock()
		close(s.done)
		s.err = s.up.Close(ctx)
		if s.released.CompareAndSwap(false, true) { // else evict handed the slot over
			ss.free(s.caller)
		}
	})
	return s.err
}
