package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

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

	legacy      *sessions      // 2025-11-25 clients' sessions (legacysessions.go)
	legacyProcs int            // their children, counted against MaxSessions
	legacyBy    map[string]int // by caller

	warmStarting int          // warm sessions being opened, counted against MaxSessions
	warmWaiters  []warmWaiter // calls waiting for one of them, in order
	crash        crashLoop    // consecutive failed starts (crashloop.go)

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
