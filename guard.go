package mrtr

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/mrtr-go/mrtr/internal/mcpwire"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

// Defaults of Options.
const (
	DefaultTTL          = 5 * time.Minute
	DefaultAnonymousTTL = 60 * time.Second
	DefaultMaxRounds    = 10
	DefaultLeeway       = 5 * time.Second
	DefaultServerID     = "mrtr"
	DefaultStoreTimeout = 2 * time.Second
)

// Options is the guard's policy. The zero value is a sensible policy:
// five-minute tokens (one minute for anonymous callers), at most ten
// pauses per flow, five seconds of clock leeway, and no single-use store
// (a token may be presented again until it expires, as the spec allows).
type Options struct {
	// TTL is the lifetime of a token issued to an authenticated caller.
	// Zero means DefaultTTL.
	TTL time.Duration
	// AnonymousTTL is the lifetime of a token issued to an anonymous
	// caller. Zero means DefaultAnonymousTTL.
	AnonymousTTL time.Duration
	// MaxRounds is how many times one flow may pause. The guard never
	// seals round MaxRounds+1. Zero means DefaultMaxRounds.
	MaxRounds int
	// Leeway is the clock skew tolerated between nodes when judging
	// expiry: a token is accepted until ExpiresAt + Leeway by the
	// resuming node's clock, and the single-use store keeps its mark until
	// ExpiresAt + 2 x Leeway by the reserving node's clock, so that a node
	// whose clock runs up to Leeway behind cannot resume a used token
	// after the mark is gone. Zero means DefaultLeeway; negative means
	// none.
	Leeway time.Duration
	// ServerID is bound into every token, so that a token from one server
	// (or cluster) does not open on another sharing its keys. Empty means
	// DefaultServerID.
	ServerID string
	// Store, when set, makes every token single use: it is reserved
	// before the handler runs, committed when the handler succeeds and
	// released when it fails (unless ConsumeOnError). Once a handler has
	// started on a token, no handler starts on it again before it
	// expires, whatever fails afterwards (a lost or failed commit, a store
	// timeout, a crash mid-handler, a handler slower than any timeout):
	// only the release after a handler error frees it. Nil means tokens
	// are multi-use within their TTL.
	Store replay.Store
	// ConsumeOnError, with a Store, spends a token whose handler failed
	// just as one whose handler succeeded, instead of releasing it for a
	// retry: each token then starts its handler at most once, successful
	// or not, and a user whose call failed starts the flow over. Set it
	// for handlers whose side effects must not repeat and that cannot
	// make them idempotent (see Flow.ID). The zero value releases on
	// error, so each token runs its handler successfully at most once and
	// a failed run may be retried with the same token.
	ConsumeOnError bool
	// StoreTimeout bounds each call to Store, except for a store that
	// implements replay.NonBlocking, whose calls never wait, or
	// replay.Bounded with a CallTimeout no longer than StoreTimeout,
	// which bounds its calls itself. Zero means DefaultStoreTimeout.
	StoreTimeout time.Duration
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
	// Rand is the source of flow ids. Nil means crypto/rand.Reader.
	Rand io.Reader
	// Logger receives one line per rejected or failed resume, with the
	// reason and a short token fingerprint, never the token, and the
	// request's method and target cut to 256 bytes. Nil means no logging.
	Logger *slog.Logger
	// Observer, when set, is told of every resume decided, pause sealed,
	// store call and call ended, for metrics and traces (see Observer).
	// Nil means none, at no cost: no event is built and the clock is not
	// read.
	Observer Observer
	// Auditor, when set, records every resume decided, pause sealed and
	// call answered, and refuses a call it could not record (see
	// Auditor). Nil means none.
	Auditor Auditor
}

// Guard derives nothing from the transport: an adapter (package gosdk for
// the official Go SDK) describes each call as a Request, and the guard
// opens and checks its requestState, gives the handler a Flow, and seals
// the next pause. A Guard is safe for concurrent use.
type Guard struct {
	codec reqstate.Codec
	opts  Options
	store replay.Store // Options.Store as given, before observeStore wraps it
	// watched: an Observer or an Auditor is set, so events are built.
	watched bool
}

// New returns a guard over codec. A nil codec, or a negative TTL,
// AnonymousTTL, MaxRounds or StoreTimeout, is a programmer error and
// panics. opts may be nil.
func New(codec reqstate.Codec, opts *Options) *Guard {
	if codec == nil {
		panic("mrtr: New needs a codec")
	}
	g := &Guard{codec: codec}
	if opts != nil {
		g.opts = *opts
	}
	o := &g.opts
	if o.TTL < 0 || o.AnonymousTTL < 0 || o.MaxRounds < 0 || o.StoreTimeout < 0 {
		panic("mrtr: negative TTL, AnonymousTTL, MaxRounds or StoreTimeout")
	}
	o.TTL = or(o.TTL, DefaultTTL)
	o.AnonymousTTL = min(or(o.AnonymousTTL, DefaultAnonymousTTL), o.TTL) // never outlives an authenticated token
	o.MaxRounds = or(o.MaxRounds, DefaultMaxRounds)
	o.StoreTimeout = or(o.StoreTimeout, DefaultStoreTimeout)
	o.ServerID = or(o.ServerID, DefaultServerID)
	switch {
	case o.Leeway == 0:
		o.Leeway = DefaultLeeway
	case o.Leeway < 0:
		o.Leeway = 0
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	g.store = o.Store
	g.watched = o.Observer != nil || o.Auditor != nil
	if o.Store != nil && o.Observer != nil {
		o.Store = observeStore(o.Store, o.Observer)
	}
	return g
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Policy returns the guard's effective options, defaults filled in.
func (g *Guard) Policy() Options {
	p := g.opts
	p.Store = g.store
	return p
}

// Codec returns the codec the guard seals and opens tokens with. A
// component that must seal something of its own under the same keys (the
// sealing proxy's task ids) reads the ring from it.
func (g *Guard) Codec() reqstate.Codec { return g.codec }

// Request is one incoming call, as an adapter derives it from the
// transport. Everything in it is untrusted except Principal, which the
// adapter takes from verified credentials.
type Request struct {
	// Method is tools/call, prompts/get or resources/read.
	Method string
	// ProtocolVersion is the MCP protocol version of this request.
	ProtocolVersion string
	// Target is the tool name, prompt name or resource URI.
	Target string
	// Principal is the authenticated caller; the zero value is anonymous.
	Principal reqstate.Principal
	// Arguments are the call's arguments as JSON (nil when absent).
	Arguments json.RawMessage
	// RequestState is the echoed state; empty on a first call.
	RequestState string
	// InputResponses are the client's answers, by input request key, as
	// the adapter decoded them (package gosdk passes the SDK's typed
	// results; an adapter without types may pass json.RawMessage). The
	// Flow may keep the map itself as its verified answers, when every
	// key in it was asked: do not change it after Begin.
	InputResponses map[string]any
	// BadState marks a requestState member that is present but not a
	// string (a number, an object, ...). Only strings are tokens, so Begin
	// rejects the call as ReasonInvalid; RequestState is then ignored.
	BadState bool
	// BadResponses marks an inputResponses member that is present but not
	// an object of answers: null, {} or not an object at all (an SDK that
	// decodes null as absent cannot tell; its adapter reads the body).
	// Begin refuses the call with ErrInvalidResponses before anything else:
	// a retry must carry the answers it retries with.
	BadResponses bool
	// Meta is the request's _meta, or nil. The guard does not read it; it
	// passes it to Options.Observer, which may continue the W3C trace
	// context it carries (traceparent, tracestate), and Options.Auditor,
	// which may read the client's self-reported clientInfo in it.
	Meta map[string]any
	// RequestID is the request's JSON-RPC id as its JSON text (1, "a"),
	// for the Observer and the Auditor; "" when unknown. The guard does
	// not read it.
	RequestID string
}

func (r *Request) binding(serverID string) reqstate.Binding {
	return reqstate.Binding{
		Method:          r.Method,
		ProtocolVersion: r.ProtocolVersion,
		Target:          r.Target,
		ServerID:        serverID,
		Principal:       r.Principal,
	}
}

// Begin checks a call and returns the Flow its handler sees. On a first
// call (no requestState) it never fails. On a resume it runs, in this
// order: length cap, format, key id, authenticated decryption under this
// request's binding, payload decode (all four inside the codec, all
// ReasonInvalid; a requestState that is not a string, Request.BadState,
// is one too), expiry with leeway (ReasonExpired), the arguments hash
// in constant time (ReasonArgumentsChanged), the round cap
// (ReasonRoundsExceeded) and, with a store, the single-use reservation
// (ReasonReplayed, or ErrStoreUnavailable). Answers under keys the sealed
// round did not ask for are dropped. Before all of it, inputResponses
// that are not an object of answers (Request.BadResponses) are refused
// with ErrInvalidResponses, on a first call as on a resume.
//
// Every Flow that Begin returns must be ended with Flow.End, once the
// handler has run.
func (g *Guard) Begin(ctx context.Context, r *Request) (*Flow, error) {
	if g.watched {
		return g.observeBegin(ctx, r)
	}
	return g.begin(ctx, r, new(Flow))
}

// begin fills in f, a new Flow, for r (observeBegin allocates it together
// with what the Observer needs).
func (g *Guard) begin(ctx context.Context, r *Request, f *Flow) (*Flow, error) {
	if r.BadResponses {
		return nil, ErrInvalidResponses
	}
	f.g, f.binding, f.args = g, r.binding(g.opts.ServerID), r.Arguments
	if r.BadState {
		return nil, g.rejected(ctx, r, ReasonInvalid, "not a string")
	}
	if r.RequestState == "" {
		if len(r.InputResponses) > 0 {
			f.unverified = r.InputResponses
		}
		return f, nil
	}
	st, err := g.codec.Open(f.binding, r.RequestState)
	if err != nil {
		return nil, g.rejected(ctx, r, ReasonInvalid, "")
	}
	// Authentic from here: a refusal below still names the flow and round
	// (to the Observer and the Auditor).
	f.flowID, f.round = st.FlowID, st.Round
	switch err := st.Check(g.opts.Now(), g.opts.Leeway); {
	case errors.Is(err, reqstate.ErrNotYetValid):
		return nil, g.rejected(ctx, r, ReasonExpired, "issued in the future")
	case err != nil:
		return nil, g.rejected(ctx, r, ReasonExpired, "")
	}
	h, err := reqstate.HashArguments(r.Arguments)
	if err != nil { // no token was sealed for these: Pause refuses them
		return nil, fmt.Errorf("%w: %w", ErrInvalidArguments, err)
	}
	if subtle.ConstantTimeCompare(h[:], st.ArgsHash[:]) != 1 {
		return nil, g.rejected(ctx, r, ReasonArgumentsChanged, "")
	}
	f.argsHash, f.hashed = h, true
	if st.Round > g.opts.MaxRounds {
		return nil, g.rejected(ctx, r, ReasonRoundsExceeded, "")
	}
	if g.opts.Store != nil {
		sctx, cancel := g.storeContext(ctx)
		res, err := g.opts.Store.Reserve(sctx, st.JTI.String(), g.reservedUntil(st.ExpiresAt))
		cancel()
		switch {
		case errors.Is(err, replay.ErrReplayed):
			return nil, g.rejected(ctx, r, ReasonReplayed, "")
		case err != nil:
			g.opts.Logger.ErrorContext(ctx, "mrtr: single-use store failed; resume refused",
				"method", mcpwire.Shown(r.Method), "target", mcpwire.Shown(r.Target), "token", fingerprint(r.RequestState), "error", err)
			return nil, fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
		}
		f.res = res
	}
	f.resumed = true
	f.round = st.Round
	f.flowID = st.FlowID
	f.cont = st.Continuation
	f.answers = answersOf(st.Asked, r.InputResponses)
	f.asked = st.Asked
	return f, nil
}

// maxAliasedAsked bounds the asked keys answersOf compares each answer
// with before it keeps the answers as they came.
const maxAliasedAsked = 8

// answersOf returns the answers of responses to the keys asked, nil for
// none. When every key of responses was asked, the usual resume, it is
// responses itself rather than a copy: the guard never writes to it and
// Flow.Answers hands out copies (Request.InputResponses says the map is
// the guard's once given to Begin). The check compares each answer with
// at most maxAliasedAsked keys; with more, the answers are copied.
func answersOf(asked []string, responses map[string]any) map[string]any {
	if len(responses) == 0 {
		return nil
	}
	if len(responses) <= len(asked) && len(asked) <= maxAliasedAsked && allAsked(responses, asked) {
		return responses
	}
	var answers map[string]any
	for _, k := range asked {
		if v, ok := responses[k]; ok {
			if answers == nil {
				answers = make(map[string]any, len(asked))
			}
			answers[k] = v
		}
	}
	return answers
}

// allAsked reports whether every key of responses is one of asked.
func allAsked(responses map[string]any, asked []string) bool {
	for k := range responses {
		if !slices.Contains(asked, k) {
			return false
		}
	}
	return true
}

// reservedUntil is how long the single-use store keeps a token's mark, on
// this node's clock: until no node can accept the token any more. This node
// accepts it up to and including ExpiresAt + Leeway; a node whose clock runs
// up to Leeway behind this one accepts it until its own clock reads that,
// which is ExpiresAt + 2 x Leeway here. A store keeps a mark until just
// before the expiry it is given, so the mark ends a nanosecond later.
func (g *Guard) reservedUntil(expiresAt time.Time) time.Time {
	return expiresAt.Add(2*g.opts.Leeway + time.Nanosecond)
}

func (g *Guard) rejected(ctx context.Context, r *Request, reason Reason, detail string) error {
	// Method and target come from the request: the target can be as long
	// as the body limit allows, and this line is written on every refusal.
	attrs := []any{"reason", string(reason), "method", mcpwire.Shown(r.Method), "target", mcpwire.Shown(r.Target), "token", fingerprint(r.RequestState)}
	if detail != "" {
		attrs = append(attrs, "detail", detail)
	}
	g.opts.Logger.WarnContext(ctx, "mrtr: requestState rejected", attrs...)
	return reject(reason)
}

// storeContext returns the context for one call to the store: ctx bounded
// by StoreTimeout, or ctx itself for a store whose calls never wait or that
// bounds each of them by StoreTimeout or less itself.
func (g *Guard) storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := g.opts.Store.(replay.NonBlocking); ok {
		return ctx, noCancel
	}
	// g.store is the store as given: an Observer's wrapper passes the
	// context through, so the store's own bound holds for it too.
	if b, ok := g.store.(replay.Bounded); ok && b.CallTimeout() <= g.opts.StoreTimeout {
		return ctx, noCancel
	}
	return context.WithTimeout(ctx, g.opts.StoreTimeout)
}

// noCancel is the CancelFunc of a context storeContext did not derive.
func noCancel() {}

// fingerprint is a short, non-reversible name for a token, for logs.
func fingerprint(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:6])
}
