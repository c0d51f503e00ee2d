// Package bridge serves MCP 2026-07-28 requests from a 2025-11-25
// ("legacy") upstream: a server that asks for input with server-to-client
// requests (elicitation/create, sampling/createMessage, roots/list) in the
// middle of a call instead of ending the call with input_required.
//
// A Bridge is an http.RoundTripper that the sealing proxy uses as its
// transport: it behaves like a modern MCP server. A pausable call
// (tools/call, prompts/get, resources/read) runs inside a legacy session
// the bridge holds open with the upstream. When the upstream sends
// requests during the call, the call's answer is input_required: those
// requests as inputRequests, and a requestState naming the held call
// (a random hold id and the round). The proxy seals that state like any
// upstream's, so the guard checks the retry (binding, expiry, arguments,
// rounds, single use) before the bridge sees it; the bridge then answers
// the upstream's requests with the client's inputResponses and relays on
// to the final result or the next round.
//
// Isolation: a server-to-client request carries no reliable link to the
// call it belongs to, so one session serves one call at a time, and
// sessions are never shared between callers (principals; all anonymous
// callers are one). Idle sessions of the same caller are reused; a warm
// session (Options.Warm), initialized for no caller yet, becomes the
// caller's that takes it. Options.MaxSessions bounds the sessions of all,
// Options.MaxSessionsPerCaller those of one caller.
// Requests the upstream sends while no call is in flight on its session
// are answered by the bridge: roots/list with the configured roots, ping
// with an empty result, anything else with -32601.
//
// Roots belong to the operator: a 2025-11-25 server takes the answer to
// roots/list as the boundary of what it may touch (server-filesystem
// replaces its allowed directories with it), and the answer lives on in
// the session, which later calls of the same caller reuse. The callers
// are remote, so by default the bridge answers every roots/list itself,
// in a call or outside one, with Options.Roots; only
// Options.RootsFromClient lets a caller answer one, as a sealed round.
//
// The bridge trusts the requestState it receives: only the proxy, after
// the guard verified the client's token, hands it one. It must never be
// reachable by clients in any other way.
package bridge

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/internal/rpc"
	"github.com/mrtr-go/mrtr/reqstate"
)

// Upstream is one connection to the legacy upstream: a child process
// over stdio, or one HTTP session. Close ends it (stops the child) and
// returns once it is gone.
type Upstream interface {
	rpc.Transport
	Close(ctx context.Context) error
}

// Defaults of Options.
const (
	DefaultMaxSessions  = 16
	DefaultMaxHolds     = 256
	DefaultHoldTTL      = 5 * time.Minute
	DefaultIdleTimeout  = 5 * time.Minute
	DefaultStartTimeout = 60 * time.Second
	// DefaultRootsWait is Options.RootsWait's default: how long the first
	// session waits to learn whether the upstream asks for roots.
	DefaultRootsWait = time.Second
	// DefaultRootsAskedWait bounds the wait for the roots/list of an
	// upstream known to ask.
	DefaultRootsAskedWait = 5 * time.Second
	// DefaultRootsSettle is Options.RootsSettle's default. Measured with
	// server-filesystem 2026.8.31 (node 22): a call sent right after the
	// answer saw the old directories 20 times in 20, one sent 5 ms after
	// once in 20, 20 ms after never in 20.
	DefaultRootsSettle = 50 * time.Millisecond
	// LegacyVersion is the protocol version the bridge speaks upstream.
	LegacyVersion = "2025-11-25"
)

// Options configures a Bridge. Dial is required.
type Options struct {
	// Dial opens a new upstream connection, not yet initialized.
	Dial func(ctx context.Context) (Upstream, error)
	// Roots answers every roots/list request of the upstream, outside a
	// call and in one (unless RootsFromClient): each a file:// (or other)
	// URI. Nil answers an empty list. With roots given, a fresh session
	// serves its first call only once the upstream had them (RootsWait).
	Roots []string
	// RootsFromClient passes a roots/list that arrives during a call to
	// the caller, as an input request of a sealed round, when the caller
	// declared the roots capability. Off by default: an answer widens
	// what the upstream may touch for every later call of the session,
	// so only a proxy whose callers share the upstream's machine should
	// let them give it.
	RootsFromClient bool
	// RootsWait bounds how long a fresh session waits, before its first
	// call, for the upstream to ask for the roots when Roots is not
	// empty: servers ask right after initialize, and a call that left
	// before the answer would see the server's own directories. Once one
	// session of the Bridge saw the upstream ask, later ones wait for it
	// up to DefaultRootsAskedWait; once one saw it not ask, later ones do
	// not wait. Zero means DefaultRootsWait.
	RootsWait time.Duration
	// RootsSettle is how long a session waits after answering the
	// upstream's first roots/list before its first call, for the
	// upstream to apply the answer (2025-11-25 has no signal for that).
	// Zero means DefaultRootsSettle.
	RootsSettle time.Duration
	// MaxSessions bounds the open upstream connections (children on
	// stdio), the bridge's and those of 2025-11-25 client sessions
	// together. At the bound the least recently used idle one of either
	// kind is stopped to make room; a call that needs one more when none
	// is idle gets an error. Zero means DefaultMaxSessions.
	MaxSessions int
	// MaxSessionsPerCaller bounds the sessions of one caller (all
	// anonymous callers are one), the bridge's and the children of its
	// 2025-11-25 client sessions together; each held call keeps its
	// session, so it bounds the caller's held calls too. At the bound the
	// caller's least recently used idle session of either kind is stopped
	// to make room; a call that needs one more when none of the caller's
	// is idle gets an error. Zero means MaxSessions (no bound but that);
	// the proxy sets DefaultPerCaller(MaxSessions).
	MaxSessionsPerCaller int
	// Warm is how many initialized sessions, of no caller yet, the bridge
	// keeps ready (see pool.go): a call that finds no idle session of its
	// caller takes one and it becomes the caller's, instead of waiting
	// for a process to start; another is started in the background. Warm
	// sessions count against MaxSessions, not against any caller, and are
	// the first stopped when a caller needs room. Only calls without an
	// Authorization to forward take one (they were opened without). Zero
	// keeps none.
	Warm int
	// First, when set, is an upstream connection opened already and not
	// initialized yet (the child the proxy started to learn the
	// upstream's era): New initializes it at once as a warm session, so
	// the first call does not wait for a start. One that Warm does not
	// count stops after IdleTimeout unused, as an idle session does.
	First Upstream
	// CrashLoop, above zero, is how many starts in a row must fail (the
	// upstream could not be started, or ended or failed before it
	// answered initialize, or ended while warm) for the upstream to be in
	// a crash loop: CrashLoop (the method) reports it, the next start
	// waits RestartBackoff, doubled with every further failure up to
	// MaxRestartBackoff, calls meanwhile get an error at once, and the
	// bridge tries again in the background when the wait is over. Zero
	// never backs off. Zero backoffs mean DefaultRestartBackoff and
	// DefaultMaxRestartBackoff.
	CrashLoop                         int
	RestartBackoff, MaxRestartBackoff time.Duration
	// MaxHolds bounds the calls held waiting for a client's answers; a
	// call that would pause beyond it gets an error. Zero means
	// DefaultMaxHolds.
	MaxHolds int
	// HoldTTL and AnonymousHoldTTL bound how long a held call waits for
	// its resume (the lifetime of the proxy's token plus its leeway): at
	// expiry the upstream's call is cancelled. Zero means DefaultHoldTTL.
	HoldTTL, AnonymousHoldTTL time.Duration
	// IdleTimeout stops a session nobody used for that long. Zero means
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
	// StartTimeout bounds opening and initializing a session (npx may
	// download the server first). Zero means DefaultStartTimeout.
	StartTimeout time.Duration
	// ClientName and ClientVersion are the clientInfo sent upstream.
	ClientName, ClientVersion string
	// MaxQueue and MaxQueueBytes bound each queue of the upstream's
	// messages waiting for a reader: a call's while it is held (nobody
	// reads them until its client resumes it) or while its client reads
	// slowly, and each of a 2025-11-25 client session's (a request's, and
	// its GET stream's, open or not yet). Notifications beyond them are
	// dropped (counted in Stats.Dropped); a request beyond them is the
	// upstream's protocol error: its session is stopped, never reused,
	// and the call, or the client's requests in flight, get a JSON-RPC
	// error. Zero means DefaultMaxQueue (messages) and
	// DefaultMaxQueueBytes.
	MaxQueue, MaxQueueBytes int
	// Logger receives one line per session started or lost; refused
	// calls and dropped notifications are warned of at most once every
	// few seconds, with the count of those left out. Nil means none.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Passthrough, when set, carries every request that is not a
	// 2026-07-28 one straight to the upstream, untouched: an older
	// client's own session (initialize, requests with its Mcp-Session-Id,
	// the GET stream, DELETE), as the proxy passes such traffic through in
	// front of any HTTP upstream. A request is 2026-07-28 when it carries
	// no Mcp-Session-Id and its params' _meta names a protocol version or
	// its MCP-Protocol-Version header is ModernVersion. Nil serves every
	// request as 2026-07-28 (an older one is refused with -32022): an
	// upstream that is a command has no HTTP endpoint to pass to.
	Passthrough http.RoundTripper
	// Node names this process among replicas sharing a key ring and a
	// single-use store: every held call's requestState carries it
	// ("bridge:NODE.HOLD:ROUND"), so that a proxy receiving a resume can
	// tell which process holds the call (HolderOf) and forward it there.
	// It must be fresh for each process (never reused: a restarted
	// proxy's old holds are gone) and consist of letters, digits, '-' and
	// '_' only; anything else panics in New. Empty leaves the node out.
	Node string
}

// Bridge serves modern requests from legacy sessions. It is safe for
// concurrent use.
type Bridge struct {
	o         Options
	log       *slog.Logger
	roots     json.RawMessage // the roots/list result the bridge answers with
	rootsGate *rootsGate

	mu         sync.Mutex
	sessions   map[*session]struct{}
	idle       map[string][]*session // by caller; warmKey: the warm sessions
	holds      map[string]*hold
	starting   int            // sessions being opened for a call, counted against MaxSessions
	startingBy map[string]int // by caller, with the calls waiting for a warm session
	closed     bool
	info       *initResult // of the first initialized session: what discover tells
	dialErr    error       // why the last session could not be opened; nil once one could

	legacy      *sessions      // 2025-11-25 clients' sessions (sessions.go)
	legacyProcs int            // their children, counted against MaxSessions
	legacyBy    map[string]int // by caller

	warmStarting int          // warm sessions being opened, counted against MaxSessions
	warmWaiters  []warmWaiter // calls waiting for one of them, in order
	crash        crashLoop    // consecutive failed starts (pool.go)

	warn    *warnings    // refusals at a limit, dropped notifications
	dropped atomic.Int64 // notifications dropped from full queues
}

// New returns a Bridge. A nil Dial panics.
func New(o Options) *Bridge {
	if o.Dial == nil {
		panic("bridge: New needs Options.Dial")
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.MaxSessionsPerCaller <= 0 || o.MaxSessionsPerCaller > o.MaxSessions {
		o.MaxSessionsPerCaller = o.MaxSessions
	}
	if o.MaxHolds <= 0 {
		o.MaxHolds = DefaultMaxHolds
	}
	if o.HoldTTL <= 0 {
		o.HoldTTL = DefaultHoldTTL
	}
	if o.AnonymousHoldTTL <= 0 || o.AnonymousHoldTTL > o.HoldTTL {
		o.AnonymousHoldTTL = o.HoldTTL
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.RootsWait <= 0 {
		o.RootsWait = DefaultRootsWait
	}
	if o.RootsSettle <= 0 {
		o.RootsSettle = DefaultRootsSettle
	}
	if o.ClientName == "" {
		o.ClientName = "mrtr-proxy"
	}
	if o.ClientVersion == "" {
		o.ClientVersion = "1"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxQueue <= 0 {
		o.MaxQueue = DefaultMaxQueue
	}
	if o.MaxQueueBytes <= 0 {
		o.MaxQueueBytes = DefaultMaxQueueBytes
	}
	if !validNode(o.Node) {
		panic("bridge: Options.Node has a character other than a letter, digit, '-' or '_'")
	}
	b := &Bridge{o: o, log: o.Logger, sessions: map[*session]struct{}{}, idle: map[string][]*session{}, holds: map[string]*hold{},
		startingBy: map[string]int{}, legacyBy: map[string]int{}, crash: newCrashLoop(o.CrashLoop, o.RestartBackoff, o.MaxRestartBackoff)}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	b.warn = newWarnings(b.log, o.Now)
	b.roots = rootsResult(o.Roots)
	b.rootsGate = newRootsGate(len(o.Roots) > 0, o.RootsWait, o.RootsSettle, b.log)
	b.legacy = newSessions(sessionsConfig{dial: o.Dial, reserve: b.legacySlot, free: b.legacyFree, idle: o.IdleTimeout, start: o.StartTimeout, log: b.log,
		maxQueue: o.MaxQueue, maxQueueBytes: o.MaxQueueBytes, now: o.Now, warn: b.warn,
		roots: b.roots, operatorRoots: len(o.Roots) > 0, rootsFromClient: o.RootsFromClient, rootsGate: b.rootsGate})
	b.mu.Lock()
	if o.First != nil {
		b.warmStarting++
		go b.startWarm(o.First)
	}
	b.refillLocked()
	b.mu.Unlock()
	return b
}

type callerKey struct{}

// WithCaller returns ctx carrying the principal of the request being
// served: the proxy sets it, so sessions are never shared between callers.
func WithCaller(ctx context.Context, p reqstate.Principal) context.Context {
	return context.WithValue(ctx, callerKey{}, p)
}

func callerOf(ctx context.Context) reqstate.Principal {
	p, _ := ctx.Value(callerKey{}).(reqstate.Principal)
	return p
}

type authKey struct{}

// withAuthorization returns ctx carrying the Authorization header of the
// request being served, which the proxy leaves on it only when it
// forwards it (proxy.Options.ForwardAuthorization).
func withAuthorization(ctx context.Context, v string) context.Context {
	if v == "" {
		return ctx
	}
	return context.WithValue(ctx, authKey{}, v)
}

func authorizationOf(ctx context.Context) string {
	v, _ := ctx.Value(authKey{}).(string)
	return v
}

// authorizer is an Upstream that sends its caller's Authorization header
// (HTTPSession); open hands it the one of the request it opens for.
type authorizer interface {
	authorize(string)
}

// key is a principal as a map key; issuer and subject are
// length-prefixed, so no two principals share one.
func key(p reqstate.Principal) string {
	if p.Anonymous() {
		return ""
	}
	return strconv.Itoa(len(p.Issuer)) + ":" + p.Issuer + p.Subject
}

// Stats is what a Bridge or a Direct holds right now.
type Stats struct {
	// Sessions counts the upstream connections open (on stdio, the
	// children running): a Bridge's sessions, a Direct's shared child, and
	// the sessions of 2025-11-25 clients (one child each).
	Sessions int
	// Idle counts those of them kept for their caller's next call, with
	// nothing in flight.
	Idle int
	// Warm counts those of them initialized for no caller yet
	// (Options.Warm), not among Idle.
	Warm int
	// Holds counts the calls held for a client's answers.
	Holds int
	// Refused counts the calls refused at a limit since the start.
	Refused Refusals
	// Dropped counts the upstream's notifications dropped, since the
	// start, because the queue they waited in was full (Options.MaxQueue).
	Dropped int64
}

// Stats reports the open sessions, the idle ones among them and the held
// calls. The sessions of 2025-11-25 clients count among the sessions, and
// as idle while they serve no request but their GET stream.
func (b *Bridge) Stats() Stats {
	open, idle := b.legacy.stats()
	b.mu.Lock()
	defer b.mu.Unlock()
	s := Stats{Sessions: len(b.sessions) + open, Idle: idle, Holds: len(b.holds), Dropped: b.dropped.Load() + b.legacy.dropped.Load(),
		Warm: len(b.idle[warmKey]), Refused: b.warn.refusals()}
	for c, l := range b.idle {
		if c != warmKey {
			s.Idle += len(l)
		}
	}
	return s
}

// Ready reports why the upstream cannot be used: the last session that
// should have opened did not (its start or initialize failed). It is nil
// before the first attempt and once one succeeded.
func (b *Bridge) Ready(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dialErr
}

// Close stops every session; held calls are lost. The Bridge refuses
// calls afterwards.
func (b *Bridge) Close(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	all := make([]*session, 0, len(b.sessions))
	for s := range b.sessions {
		all = append(all, s)
	}
	for _, h := range b.holds {
		h.timer.Stop()
	}
	b.holds = map[string]*hold{}
	b.stopRetryLocked()
	waiters := b.warmWaiters
	b.warmWaiters = nil
	b.mu.Unlock()
	for _, w := range waiters {
		w.ch <- nil // they find the bridge closed
	}
	legacy := make(chan error, 1)
	go func() { legacy <- b.legacy.close(ctx) }()
	err := stopEach(all, func(s *session) error { return s.stop(ctx) })
	return errors.Join(<-legacy, err)
}

// stopEach calls stop on every element of all at once, and joins their
// errors once every call has returned. Children are stopped in parallel:
// one that does not exit when its stdin closes costs its grace periods,
// and one after the other, dozens of them took the proxy's shutdown far
// past any termination grace.
func stopEach[T any](all []T, stop func(T) error) error {
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, x := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = stop(x)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Errors a caller sees as JSON-RPC errors with their id.
var (
	errClosed   = errors.New("the proxy is shutting down")
	errTooMany  = errors.New("the proxy is at its limit of upstream sessions (--max-procs); try again later")
	errTooHeld  = errors.New("the proxy is at its limit of held calls (--max-holds); try again later")
	errGone     = errors.New("the paused call is gone (it expired, its upstream failed, or the proxy holding it restarted): start the call over")
	errLost     = errors.New("the upstream ended during the call")
	errBusyHold = errors.New("this paused call is being resumed by another request")
)

// errTooManyOfCaller is a caller's at --max-procs-per-caller; it names no
// caller: the one that reads it is it.
var errTooManyOfCaller = errors.New("the proxy is at its limit of upstream sessions for one caller (--max-procs-per-caller); try again later")

// session is one initialized legacy connection.
type session struct {
	b      *Bridge
	up     Upstream
	conn   *rpc.Conn
	caller string
	auth   string // the Authorization it was opened with; reused only with the same
	info   *initResult

	rootsAnswered rootsSignal // the upstream had the operator's roots

	mu     sync.Mutex
	active *active // the bridged call in flight, if any
	idleAt time.Time
	timer  *time.Timer // stops the session when idle too long
	dead   bool
}

type initResult struct {
	ProtocolVersion string          `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
	ServerInfo      json.RawMessage `json:"serverInfo"`
	Instructions    string          `json:"instructions,omitempty"`
}

// acquire returns an idle session of the caller, or a warm one (which
// becomes the caller's), or opens one.
func (b *Bridge) acquire(ctx context.Context, caller string) (*session, error) {
	auth := authorizationOf(ctx)
	waited := false // for a warm session that then failed to start
	b.mu.Lock()
	for {
		if b.closed {
			b.mu.Unlock()
			return nil, errClosed
		}
		if s := b.idleOf(caller, auth); s != nil {
			b.mu.Unlock()
			return s, nil
		}
		warm := auth == "" && !waited && (len(b.idle[warmKey]) > 0 || b.warmStarting > len(b.warmWaiters))
		if err := b.crash.blocked(b.o.Now()); err != nil && !warm {
			b.mu.Unlock()
			return nil, err
		}
		var victim func(context.Context) error
		if b.atCallerBound(caller) {
			// Its slot is this call's.
			if victim = b.evict(only(caller)); victim == nil {
				b.mu.Unlock()
				b.warn.refuse(limitPerCaller, "bridge: a call was refused: its caller is at its limit of upstream sessions (--max-procs-per-caller) and none of them is idle",
					"max", b.o.MaxSessionsPerCaller)
				return nil, errTooManyOfCaller
			}
		}
		if warm {
			s, wait := b.takeWarmLocked(caller)
			b.mu.Unlock()
			b.stopVictim(victim)
			if wait != nil {
				// nil when its start failed: the call starts its own (it
				// does not wait on warm starts that may keep failing).
				s, waited = <-wait, true
			}
			if s != nil {
				return s, nil
			}
			b.mu.Lock()
			continue
		}
		if victim == nil {
			var err error
			if victim, err = b.room(); err != nil {
				b.mu.Unlock()
				return nil, err
			}
		}
		b.starting++
		b.startingBy[caller]++
		b.mu.Unlock()
		if victim != nil {
			_ = victim(context.Background())
		}
		s, err := b.open(ctx, caller, nil)
		b.mu.Lock()
		b.starting--
		if b.startingBy[caller]--; b.startingBy[caller] <= 0 {
			delete(b.startingBy, caller)
		}
		b.started(err)
		if err == nil {
			if b.closed {
				b.mu.Unlock()
				_ = s.stop(context.Background())
				return nil, errClosed
			}
			b.sessions[s] = struct{}{}
			if b.info == nil {
				b.info = s.info
			}
		} else {
			b.refillLocked()
		}
		b.mu.Unlock()
		return s, err
	}
}

// idleOf takes an idle session of caller opened with the Authorization
// auth out of the idle ones; nil when there is none. b.mu held.
func (b *Bridge) idleOf(caller, auth string) *session {
	for {
		l := b.idle[caller]
		i := len(l) - 1
		for i >= 0 && l[i].auth != auth {
			i--
		}
		if i < 0 {
			return nil
		}
		s := l[i]
		b.idle[caller] = append(l[:i:i], l[i+1:]...)
		if len(b.idle[caller]) == 0 {
			delete(b.idle, caller)
		}
		s.mu.Lock()
		ok := !s.dead
		if s.timer != nil {
			s.timer.Stop()
		}
		s.mu.Unlock()
		if ok {
			return s
		}
	}
}

// ownedLocked counts the sessions of caller: open, being opened (or
// awaited warm), and the children of its 2025-11-25 client sessions.
// b.mu held.
func (b *Bridge) ownedLocked(caller string) int {
	n := b.startingBy[caller] + b.legacyBy[caller]
	for s := range b.sessions {
		if s.caller == caller {
			n++
		}
	}
	return n
}

// atCallerBound reports whether caller has MaxSessionsPerCaller
// sessions, when that is a bound of its own (below MaxSessions). b.mu
// held.
func (b *Bridge) atCallerBound(caller string) bool {
	return b.o.MaxSessionsPerCaller < b.o.MaxSessions && b.ownedLocked(caller) >= b.o.MaxSessionsPerCaller
}

// usedLocked counts the sessions held against MaxSessions. b.mu held.
func (b *Bridge) usedLocked() int {
	return len(b.sessions) + b.starting + b.warmStarting + b.legacyProcs
}

// slot makes room for one more session of caller (the child of a
// 2025-11-25 client session): at caller's bound it evicts an idle session
// of caller, else as room does; errTooManyOfCaller when caller has none
// idle (warned of). b.mu held.
func (b *Bridge) slot(caller string) (stop func(context.Context) error, err error) {
	if !b.atCallerBound(caller) {
		return b.room()
	}
	if stop = b.evict(only(caller)); stop == nil {
		b.warn.refuse(limitPerCaller, "bridge: a call was refused: its caller is at its limit of upstream sessions (--max-procs-per-caller) and none of them is idle",
			"max", b.o.MaxSessionsPerCaller)
		return nil, errTooManyOfCaller
	}
	return stop, nil
}

// room makes room for one more session (a bridge session or the child
// of a 2025-11-25 client session) within MaxSessions: at the bound it
// evicts a warm or idle session, and returns how to stop it, which the
// caller does once b.mu is released and before it opens its own in the
// slot, so that the children stay within the bound; errTooMany when there
// is none to evict (warned of). b.mu held.
func (b *Bridge) room() (stop func(context.Context) error, err error) {
	if b.usedLocked() < b.o.MaxSessions {
		return nil, nil
	}
	if stop = b.evict(nil); stop == nil {
		b.warn.refuse(limitProcs, "bridge: a call was refused: the proxy is at its limit of upstream sessions (--max-procs) and none is idle",
			"max", b.o.MaxSessions)
		return nil, errTooMany
	}
	b.log.Debug("bridge: an idle upstream session stopped to make room")
	return stop, nil
}

// evict takes the least recently used idle session, of either pool, whose
// caller (key of a principal) of accepts (nil accepts any) out of the
// count, and returns how to stop it; nil when there is none. The pools
// are one: the bridge's sessions with no call in flight, and the
// sessions of 2025-11-25 clients with no request in flight (those with
// their GET stream open last: a client listens on it). With of nil a
// warm session goes first (the oldest); with an of, warm sessions are
// nobody's (no of accepts warmKey). --max-procs-per-caller evicts with
// an of naming one caller. b.mu held.
//
// Evicting a 2025-11-25 client session ends it, as its idle timeout
// does: its id is unknown from then on, so its client's next request gets
// 404, which in 2025-11-25 tells a client to initialize a new session.
func (b *Bridge) evict(of func(caller string) bool) (stop func(context.Context) error) {
	var v *session
	var at time.Time
	if l := b.idle[warmKey]; of == nil && len(l) > 0 {
		return b.evicted(l[0])
	}
	for c, l := range b.idle {
		if c == warmKey || of != nil && !of(c) {
			continue
		}
		for _, s := range l {
			s.mu.Lock()
			t := s.idleAt
			s.mu.Unlock()
			if v == nil || t.Before(at) {
				v, at = s, t
			}
		}
	}
	if lv := b.legacy.evict(of, v != nil, at, func(c string) {
		b.legacyProcs--
		if b.legacyBy[c]--; b.legacyBy[c] <= 0 {
			delete(b.legacyBy, c)
		}
	}); lv != nil {
		return lv.end
	}
	if v == nil {
		return nil
	}
	return b.evicted(v)
}

// evicted takes v, an idle or warm session, out of the count, and returns
// how to stop it. b.mu held.
func (b *Bridge) evicted(v *session) (stop func(context.Context) error) {
	l := b.idle[v.caller]
	if i := slices.Index(l, v); i >= 0 {
		b.idle[v.caller] = slices.Delete(l, i, i+1)
	}
	if len(b.idle[v.caller]) == 0 {
		delete(b.idle, v.caller)
	}
	delete(b.sessions, v)
	v.mu.Lock()
	v.dead = true // never handed out again, whatever happens next
	if v.timer != nil {
		v.timer.Stop()
	}
	v.mu.Unlock()
	return v.stop
}

// exitReporter is an upstream that says how it ended once closed: a
// command's child (stdio.Child).
type exitReporter interface {
	Err() error
	StderrTail() []string
}

// exitStatusOf is how up ended ("exit status 0", "signal: terminated"),
// or "" when up does not say.
func exitStatusOf(up Upstream) string {
	x, ok := up.(exitReporter)
	if !ok {
		return ""
	}
	if err := x.Err(); err != nil {
		return err.Error()
	}
	return "exit status 0"
}

// exitAttrs are the log attributes of how a closed upstream ended, when
// it says: "exit" (its exit status or signal) and, unless it exited 0,
// "stderr_tail" (the end of its stderr).
func exitAttrs(up Upstream) []any {
	x, ok := up.(exitReporter)
	if !ok {
		return nil
	}
	attrs := []any{"exit", exitStatusOf(up)}
	if x.Err() != nil {
		attrs = append(attrs, "stderr_tail", strings.Join(x.StderrTail(), "\n"))
	}
	return attrs
}

// open dials (unless given up, dialled already) and initializes a
// session. Its error is a *startError.
func (b *Bridge) open(ctx context.Context, caller string, up Upstream) (*session, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.o.StartTimeout)
	defer cancel()
	if up == nil {
		var err error
		if up, err = b.o.Dial(ctx); err != nil {
			b.log.Error("bridge: start the upstream", "error", err)
			return nil, &startError{err: fmt.Errorf("the upstream could not be started: %w", err), why: err.Error()}
		}
	}
	s := &session{b: b, up: up, caller: caller, auth: authorizationOf(ctx), rootsAnswered: newRootsSignal()}
	if a, ok := up.(authorizer); ok {
		a.authorize(s.auth)
	}
	s.conn = rpc.NewConn(up, s.handle)
	params, _ := json.Marshal(map[string]any{
		"protocolVersion": LegacyVersion,
		"capabilities": map[string]any{
			"elicitation": map[string]any{"form": map[string]any{}, "url": map[string]any{}},
			"sampling":    map[string]any{},
			"roots":       map[string]any{"listChanged": false},
		},
		"clientInfo": map[string]string{"name": b.o.ClientName, "version": b.o.ClientVersion},
	})
	m, err := s.conn.Call(ctx, "initialize", params)
	if err == nil && m.Error != nil {
		err = fmt.Errorf("initialize refused: %s", m.Error)
	}
	var info initResult
	if err == nil {
		if err = json.Unmarshal(m.Result, &info); err == nil && info.ProtocolVersion == "" {
			err = errors.New("initialize result without protocolVersion")
		}
	}
	if err == nil {
		err = s.conn.Notify("notifications/initialized", nil)
	}
	if err != nil {
		_ = up.Close(context.Background())
		b.log.Error("bridge: initialize the upstream", append([]any{"error", err}, exitAttrs(up)...)...)
		return nil, &startError{err: fmt.Errorf("the upstream could not be initialized: %w", err), why: exitSummary(err, up)}
	}
	s.info = &info
	s.conn.AfterDone(func() { // a session whose upstream ends is dropped
		s.mu.Lock()
		s.dead = true
		a := s.active
		s.mu.Unlock()
		warm := b.drop(s)
		if a != nil {
			a.push(nil) // wakes the call: the upstream is gone
		}
		// Its output ended, not necessarily the child: one that closed
		// stdout and lives on is stopped (grace, SIGTERM, SIGKILL).
		go func() {
			_ = s.stop(context.Background())
			if warm {
				b.warmEnded(s)
			}
		}()
	})
	b.rootsGate.await(ctx, s.rootsAnswered.c)
	b.log.Info("bridge: upstream session started", "protocol_version", info.ProtocolVersion)
	return s, nil
}

// drop forgets s, and reports whether it was warm (ready for no caller
// yet, and not stopped by the bridge).
func (b *Bridge) drop(s *session) (warm bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, known := b.sessions[s]
	delete(b.sessions, s)
	l := b.idle[s.caller]
	for i, x := range l {
		if x == s {
			b.idle[s.caller] = append(l[:i:i], l[i+1:]...)
			break
		}
	}
	if len(b.idle[s.caller]) == 0 {
		delete(b.idle, s.caller)
	}
	warm = known && s.caller == warmKey && !b.closed
	if known && !warm { // a warm one is refilled once its end is counted (warmEnded)
		b.refillLocked()
	}
	return warm
}

// release returns s to the caller's idle sessions.
func (b *Bridge) release(s *session) {
	s.mu.Lock()
	s.active = nil
	dead := s.dead
	s.idleAt = b.o.Now()
	if !dead {
		if s.timer != nil {
			s.timer.Stop()
		}
		s.timer = time.AfterFunc(b.o.IdleTimeout, func() { b.expireIdle(s) })
	}
	s.mu.Unlock()
	if dead {
		return
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		go s.stop(context.Background())
		return
	}
	b.idle[s.caller] = append(b.idle[s.caller], s)
	b.mu.Unlock()
}

func (b *Bridge) expireIdle(s *session) {
	b.mu.Lock()
	l := b.idle[s.caller]
	found := false
	for i, x := range l {
		if x == s {
			b.idle[s.caller] = append(l[:i:i], l[i+1:]...)
			found = true
			break
		}
	}
	if len(b.idle[s.caller]) == 0 {
		delete(b.idle, s.caller)
	}
	if found {
		delete(b.sessions, s)
		b.refillLocked()
	}
	b.mu.Unlock()
	if found {
		b.log.Debug("bridge: idle upstream session stopped")
		_ = s.stop(context.Background())
	}
}

func (s *session) stop(ctx context.Context) error {
	s.mu.Lock()
	s.dead = true
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	return s.up.Close(ctx)
}

// detach ends the call a on s, if it is still the one in flight there:
// from then on the upstream's messages are handled as outside a call.
// It runs on the connection's reading goroutine (rpc.Conn.StartThen), in
// order with handle.
func (s *session) detach(a *active) {
	s.mu.Lock()
	if s.active == a {
		s.active = nil
	}
	s.mu.Unlock()
}

// handle receives the upstream's requests and notifications.
func (s *session) handle(m *rpc.Message) {
	s.mu.Lock()
	a := s.active
	s.mu.Unlock()
	if a != nil {
		dropped, ok := a.push(m)
		if dropped > 0 {
			s.b.dropped.Add(int64(dropped))
			s.b.warn.warn("queue", "bridge: a held or slow call's queue is full: the upstream's notifications are dropped",
				"max", s.b.o.MaxQueue, "max_bytes", s.b.o.MaxQueueBytes)
		}
		if !ok {
			go s.b.flooded(s, a)
		}
		return
	}
	s.outside(m)
}

// flooded stops a session whose upstream overflowed its call's queue
// (see fifo): the session is never reused, the hold of its call, if one
// waits for a resume, ends (the resume is told to start over), and a call
// being relayed gets errFlood.
func (b *Bridge) flooded(s *session, a *active) {
	b.log.Warn("bridge: the upstream overflowed a call's queue with requests (a protocol error); its session is stopped",
		"max", b.o.MaxQueue, "max_bytes", b.o.MaxQueueBytes)
	s.mu.Lock()
	s.dead = true
	s.mu.Unlock()
	b.mu.Lock()
	var h *hold
	for _, x := range b.holds {
		if x.a == a {
			h = x
			break
		}
	}
	b.mu.Unlock()
	if h != nil && h.busy.TryLock() { // else a resume relays it, and reads errFlood
		b.mu.Lock()
		current := b.holds[h.id] == h
		b.mu.Unlock()
		if current {
			b.abandon(h, errFlood.Error())
		}
		h.busy.Unlock()
	}
	_ = s.stop(context.Background())
	b.drop(s)
}

// outside answers a request that arrived while no bridged call is in
// flight on the session.
func (s *session) outside(m *rpc.Message) {
	if !m.IsRequest() {
		return
	}
	switch m.Method {
	case mcpwire.MethodListRoots:
		s.answerRoots(m)
	case "ping":
		_ = s.conn.Respond(m.ID, json.RawMessage("{}"))
	default:
		_ = s.conn.RespondError(m.ID, -32601, "method not found: no call is waiting for "+m.Method)
	}
}

// active is the call in flight on a session: the upstream's response to
// it, and the messages the upstream sent meanwhile, queued in order
// within Options.MaxQueue and MaxQueueBytes.
type active struct {
	call *rpc.Call

	mu     sync.Mutex
	queue  fifo[*rpc.Message] // nil entry: the upstream is gone
	err    error              // errFlood once the queue overflowed
	signal chan struct{}
}

func (b *Bridge) newActive() *active {
	return &active{queue: newFifo[*rpc.Message](b.o.MaxQueue, b.o.MaxQueueBytes), signal: make(chan struct{}, 1)}
}

// push queues m; nil says the upstream is gone. It returns the
// notifications dropped for room, and false when m overflowed the queue:
// then the queue is emptied but for a nil, which tells the call to end
// with errFlood, and takes nothing more; the caller stops the session.
func (a *active) push(m *rpc.Message) (dropped int, ok bool) {
	a.mu.Lock()
	switch {
	case a.err != nil: // overflowed: the call reads only its end
		ok = true
	case m == nil:
		a.queue.force(nil, 0, false)
		ok = true
	default:
		dropped, ok = a.queue.push(m, msgSize(m), m.IsNotification())
		if !ok {
			a.err = errFlood
			a.queue.take()
			a.queue.force(nil, 0, false)
		}
	}
	a.mu.Unlock()
	select {
	case a.signal <- struct{}{}:
	default:
	}
	return dropped, ok
}

func (a *active) pop() (*rpc.Message, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.queue.pop()
}

// lost is why the call ended without its response: errLost when the
// upstream went, errFlood when it overflowed the queue.
func (a *active) lost() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return a.err
	}
	return errLost
}

// hold is a bridged call waiting for the client's answers.
type hold struct {
	id      string
	caller  string
	method  string
	target  string
	s       *session
	a       *active
	round   int
	seq     int                     // input requests asked so far, for their keys
	pending map[string]*rpc.Message // input key -> the upstream's request
	timer   *time.Timer
	busy    sync.Mutex // one resume at a time
}

func newHoldID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// stateOf is the requestState naming a hold's round; the proxy seals it.
func (b *Bridge) stateOf(h *hold) string {
	if b.o.Node == "" {
		return "bridge:" + h.id + ":" + strconv.Itoa(h.round)
	}
	return "bridge:" + b.o.Node + "." + h.id + ":" + strconv.Itoa(h.round)
}

// parseState reads a state stateOf made: the node that holds the call
// ("" for a state without one), the hold's id and its round.
func parseState(st string) (node, id string, round int, ok bool) {
	rest, found := strings.CutPrefix(st, "bridge:")
	if !found {
		return "", "", 0, false
	}
	id, r, found := strings.Cut(rest, ":")
	if !found {
		return "", "", 0, false
	}
	if n, h, dotted := strings.Cut(id, "."); dotted {
		if n == "" || !validNode(n) {
			return "", "", 0, false
		}
		node, id = n, h
	}
	round, err := strconv.Atoi(r)
	return node, id, round, err == nil
}

// HolderOf returns the node (Options.Node) of the process holding the
// call that a bridge's requestState names. ok is false for a state that
// is not a bridge's, or one made by a bridge without a node.
func HolderOf(state string) (node string, ok bool) {
	node, _, _, ok = parseState(state)
	return node, ok && node != ""
}

// validNode reports whether n can be a node in a state: letters, digits,
// '-' and '_' (none of the separators '.' and ':').
func validNode(n string) bool {
	for _, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// RoundTrip serves one request as a 2026-07-28 server would, or passes it
// to Options.Passthrough.
func (b *Bridge) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.o.Passthrough != nil && r.Method != http.MethodPost {
		return b.o.Passthrough.RoundTrip(r)
	}
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if b.o.Passthrough != nil && !modernRequest(r, body) {
		if !b.o.RootsFromClient {
			body = withoutRootsCapability(body)
		}
		out := r.Clone(r.Context())
		out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		return b.o.Passthrough.RoundTrip(out)
	}
	if v := r.Header.Get("Authorization"); v != "" {
		r = r.WithContext(withAuthorization(r.Context(), v))
	}
	return serveInProcess(r, body, b.serve), nil
}

// readBody reads and closes a request's body (the proxy has capped it
// already; this bound only keeps a caller that did not from growing
// without limit).
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	defer r.Body.Close()
	return io.ReadAll(io.LimitReader(r.Body, 64<<20))
}

// serveInProcess runs serve for r as an HTTP handler would, and returns
// the response as soon as serve writes its header: what it writes after
// streams to the response's body.
func serveInProcess(r *http.Request, body []byte, serve func(context.Context, *pipeWriter, *http.Request, []byte)) *http.Response {
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan *http.Response, 1), body: pr, req: r}
	go func() {
		serve(r.Context(), w, r, body)
		w.WriteHeader(http.StatusOK)
		pw.Close()
	}()
	return <-w.ready
}

// modernRequest reports whether a POST is a 2026-07-28 request (see
// Options.Passthrough).
func modernRequest(r *http.Request, body []byte) bool {
	if r.Header.Get("Mcp-Session-Id") != "" {
		return false
	}
	if r.Header.Get("Mcp-Protocol-Version") == ModernVersion {
		return true
	}
	m, err := rpc.Parse(body)
	if err != nil || len(m.Params) == 0 || m.Params[0] != '{' {
		return false
	}
	v, _ := mcpwire.Member(mcpwire.SplitObject(mcpwire.TrimSpace(m.Params))["_meta"], mcpwire.MetaProtocolVersion)
	return len(v) > 0
}

// pipeWriter is the http.ResponseWriter of a request served in process:
// what the handler writes streams to the response's body.
type pipeWriter struct {
	header http.Header
	pw     *io.PipeWriter
	body   io.ReadCloser
	req    *http.Request
	once   sync.Once
	ready  chan *http.Response
}

func (p *pipeWriter) Header() http.Header { return p.header }

func (p *pipeWriter) WriteHeader(code int) {
	p.once.Do(func() {
		p.ready <- &http.Response{
			Status: strconv.Itoa(code) + " " + http.StatusText(code), StatusCode: code,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: p.header.Clone(), Body: p.body, ContentLength: -1, Request: p.req,
		}
	})
}

func (p *pipeWriter) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	return p.pw.Write(b)
}

func (p *pipeWriter) Flush() {}
