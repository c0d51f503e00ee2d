package redisstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mrtr-go/mrtr/replay"
)

// DefaultPrefix is the key prefix when Options.Prefix is empty.
const DefaultPrefix = "mrtr:replay:"

// DefaultTimeout bounds each operation's round trips when Options.Timeout is
// zero.
const DefaultTimeout = 500 * time.Millisecond

// Values stored under an id's key. Each is followed by the owner token of the
// reservation that wrote it, so that a call retried after a lost reply
// recognizes its own earlier write (see doc.go).
const (
	reservedTag = "reserved:" // held by a reservation, until the token expires
	consumedTag = "consumed:" // committed by the reservation named
	replayedTag = "replayed:" // committed by the reservation named, which took it from another (ErrReplayed)
)

// commitScript consumes an id for a reservation.
//
//	KEYS[1]  the id's key
//	ARGV[1]  the reservation's owner token
//	ARGV[2]  milliseconds until the token expires (at least 1)
//
// It returns 0 if the id is now consumed by this reservation and 1 if
// another reservation held or consumed it (ErrReplayed). It is idempotent: a
// retry after a lost reply finds its own write and returns the same answer.
var commitScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
local owner = ARGV[1]
if v == 'consumed:' .. owner then return 0 end
if v == 'replayed:' .. owner then return 1 end
if v == false or v == 'reserved:' .. owner then
	redis.call('SET', KEYS[1], 'consumed:' .. owner, 'PX', ARGV[2])
	return 0
end
if string.sub(v, 1, 9) == 'reserved:' then
	redis.call('SET', KEYS[1], 'replayed:' .. owner, 'PX', ARGV[2])
end
return 1
`)

// releaseScript deletes an id's key if the reservation still holds it.
//
//	KEYS[1]  the id's key
//	ARGV[1]  the reservation's owner token
//
// It returns the number of keys deleted.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == 'reserved:' .. ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0
`)

// Options configures [New] and [NewFromURL]. The zero value is ready to use.
type Options struct {
	// Prefix starts every key the store writes. Stores that share a Redis
	// database and a prefix share their ids. Empty means DefaultPrefix.
	Prefix string

	// Timeout bounds each Reserve, Commit, Release and Ping, including
	// go-redis's own retries: when it passes, the call returns an error
	// wrapping context.DeadlineExceeded, even if the client is still
	// waiting for Redis. With the client NewFromURL makes, calls starting
	// close together share one deadline, which may end a call up to 1/64
	// of Timeout sooner (see "Failures" in the package documentation).
	// With Replicas above zero, a Reserve whose claim the replicas did
	// not acknowledge then releases it within a second Timeout, so it
	// returns within twice Timeout (what CallTimeout reports).
	// Zero means DefaultTimeout; a negative value panics.
	Timeout time.Duration

	// Now reports the current time. Nil means time.Now. The store reads it
	// only to turn a token's expiry into a relative lifetime (PX); Redis
	// expires the keys by its own clock.
	Now func() time.Time

	// Replicas is how many replicas must acknowledge a claim before it
	// counts. Zero (the default) trusts the primary's reply alone. With N
	// above zero, Reserve and Commit send their write and then WAIT N (or
	// WAITAOF 1 N where the primary has appendonly yes and knows WAITAOF)
	// on the same connection, and fail with an error, never ErrReplayed,
	// unless N replicas acknowledged within the timeout: the guard then
	// refuses the resume (fail closed). A Reserve whose claim was not
	// acknowledged releases it again, best effort. See "Replicas and
	// failover" in the package documentation for what this does and does
	// not guarantee. A negative value panics.
	//
	// It needs a client that writes each key through one connection to one
	// primary: a *redis.Client (one server or a Sentinel failover client)
	// or a *redis.ClusterClient (the key's primary). Other clients fail
	// every Reserve and Commit.
	Replicas int
}

// Store is a [replay.Store] kept in Redis, shared by every process that uses
// the same server, database and prefix.
//
// A Store must be created with [New] or [NewFromURL]. It is safe for
// concurrent use by multiple goroutines, and so are its reservations.
type Store struct {
	client      redis.UniversalClient
	owned       bool // created by NewFromURL: Close closes the client
	direct      bool // the client honours context deadlines (NewFromURL): roundTrip calls op itself
	prefix      string
	timeout     time.Duration
	errTimeout  error
	now         func() time.Time
	replicas    int
	waitMS      int64         // WAIT's timeout, below the store's own and the client's read timeout
	readTimeout time.Duration // the client's socket read timeout; 0: unbounded
	ackMode     atomic.Int32  // ackUnknown, ackWait or ackWaitAOF

	owners *owners // draws each reservation's owner token

	// deadline is the context that the round trips starting within one
	// slot share, on a store that made its client (see callContext).
	deadline atomic.Pointer[sharedDeadline]

	// redirects are clients of Cluster nodes that a MOVED reply named,
	// for Replicas above zero (see pipelineAcked).
	redirectMu sync.Mutex
	redirects  map[string]*redis.Client
}

var (
	_ replay.Bounded     = (*Store)(nil)
	_ replay.LocalCommit = (*Store)(nil)
)

// New returns a Store that keeps ids through client, configured by opts. A
// nil opts is the same as a zero Options. The caller keeps ownership of
// client: Close does not close it.
//
// It panics if client is nil, or Timeout or Replicas is negative.
func New(client redis.UniversalClient, opts *Options) *Store {
	if client == nil {
		panic("redisstore: nil client")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Replicas < 0 {
		panic("redisstore: negative Options.Replicas")
	}
	switch {
	case o.Timeout < 0:
		panic("redisstore: negative Options.Timeout")
	case o.Timeout == 0:
		o.Timeout = DefaultTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Store{client: client, prefix: o.Prefix, now: o.Now, replicas: o.Replicas, readTimeout: clientReadTimeout(client), owners: newOwners()}
	s.setTimeout(o.Timeout)
	return s
}

// setTimeout sets the bound on each call, and WAIT's below it.
func (s *Store) setTimeout(d time.Duration) {
	s.timeout = d
	s.deadline.Store(nil)
	s.errTimeout = fmt.Errorf("no reply within %v: %w", d, context.DeadlineExceeded)
	// WAIT must give up before the store does, so that a shortfall is
	// reported as such and not as a timeout.
	// It must also give up before the client's socket read timeout: a
	// WAIT still blocking then fails its read, go-redis sends the pipeline
	// again, and the resent claim fails closed as "sent twice".
	w := d / 2
	if s.readTimeout > 0 && w > s.readTimeout*3/4 {
		w = s.readTimeout * 3 / 4
	}
	s.waitMS = max(1, w.Milliseconds())
}

// clientReadTimeout is the socket read timeout of client's connections
// (go-redis fills in its default), or 0 when reads are not bounded or client
// is neither a *redis.Client nor a *redis.ClusterClient.
func clientReadTimeout(client redis.UniversalClient) time.Duration {
	var d time.Duration
	switch c := client.(type) {
	case *redis.Client:
		d = c.Options().ReadTimeout
	case *redis.ClusterClient:
		d = c.Options().ReadTimeout
	default:
		return 0
	}
	// Options() are the client's after go-redis filled in its defaults:
	// 0 means the caller asked for no timeout (-1), negative for no
	// deadline at all (-2).
	return max(d, 0)
}

// NewFromURL connects to the deployment that rawURL names and returns a
// Store that owns the connection: Close closes it. It accepts:
//
//	redis://[[user]:password@]host[:port][/db][?option=value...]   one server
//	rediss://...                                                   the same over TLS
//	unix://[[user]:password@]/path/to/redis.sock[?db=N]
//	redis://[[user]:password@]sentinel1:26379[/db]?master_name=mymaster&addr=sentinel2:26379&addr=sentinel3:26379
//	         Sentinel: go-redis's failover form, recognized by master_name;
//	         the user information authenticates to the sentinels, the
//	         password=... parameter to the primary; rediss:// for TLS
//	redis-cluster://[[user]:password@]node1:7000?addr=node2:7001&addr=node3:7002
//	         Redis Cluster: seed nodes, go-redis's cluster form under its
//	         own scheme; rediss-cluster:// for TLS
//
// The options after ? are those of [redis.ParseURL], [redis.ParseFailoverURL]
// and [redis.ParseClusterURL]. It does not connect yet; call [Store.Ping] to
// check the server. The client it creates honours context deadlines on
// socket reads and writes (ContextTimeoutEnabled). The error never contains
// the URL or a password.
//
// It panics if Timeout or Replicas in opts is negative.
func NewFromURL(rawURL string, opts *Options) (*Store, error) {
	client, err := parseClient(rawURL)
	if err != nil {
		return nil, err
	}
	s := New(client, opts)
	s.owned = true
	s.direct = true // parseClient sets ContextTimeoutEnabled
	return s, nil
}

// Client returns the client the store talks to Redis through: the one
// given to [New], or the one [NewFromURL] created (which Close closes).
// Other parts of a process sharing the deployment (a directory of
// replicas) use it rather than a second connection pool.
func (s *Store) Client() redis.UniversalClient { return s.client }

// Prefix returns the prefix that starts every key the store writes
// (Options.Prefix, or DefaultPrefix). Keys of other kinds that should
// fall under the same access rules (ACL key patterns) start with it too.
func (s *Store) Prefix() string { return s.prefix }

// Close closes the client if the store created it ([NewFromURL]), and does
// nothing otherwise. The store must not be used after Close.
func (s *Store) Close() error {
	s.closeRedirects()
	if !s.owned {
		return nil
	}
	if err := s.client.Close(); err != nil {
		return fmt.Errorf("redisstore: close: %w", err)
	}
	return nil
}

// Ping checks that the server answers within the store's timeout.
func (s *Store) Ping(ctx context.Context) error {
	_, err := roundTrip(ctx, s, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, s.client.Ping(ctx).Err()
	})
	if err != nil {
		return fmt.Errorf("redisstore: ping: %w", err)
	}
	return nil
}

// Reserve implements [replay.Store]. The claim lasts until expires (rounded
// up to the millisecond), with no shorter lease. It returns ErrReplayed if id
// is held or expires is not after the current time, and a wrapped error,
// never ErrReplayed, if Redis does not answer within the timeout, answers
// with an error, or (Options.Replicas) fewer replicas than required
// acknowledged the claim.
func (s *Store) Reserve(ctx context.Context, id string, expires time.Time) (replay.Reservation, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redisstore: reserve: %w", err)
	}
	// The claim lasts until the token expires, with no shorter lease: a
	// Commit that is lost must not make the token usable again. Redis
	// counts whole milliseconds; round up, so the claim never ends early.
	px, ok := pxUntil(expires, s.now())
	if !ok {
		return nil, replay.ErrReplayed
	}
	val := s.owners.reservedValue()
	r := &reservation{s: s, key: s.prefix + id, val: val, owner: val[len(reservedTag):], expires: expires}
	if s.replicas > 0 {
		return s.reserveAcked(ctx, r, px)
	}
	won, err := roundTrip(ctx, s, func(ctx context.Context) (bool, error) {
		// SetArgs would build the same command in a slice grown twice.
		set := redis.NewStatusCmd(ctx, "set", r.key, val, "px", px.Milliseconds(), "nx")
		_ = s.client.Process(ctx, set)
		err := set.Err()
		if !errors.Is(err, redis.Nil) {
			return err == nil, err
		}
		// NX refused. go-redis resends a command whose reply it lost, so
		// the value in the way may be this very reservation's.
		cur, err := s.client.Get(ctx, r.key).Result()
		if errors.Is(err, redis.Nil) {
			return false, nil // held a moment ago, by someone else
		}
		return cur == val, err
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("redisstore: reserve: %w", err)
	case !won:
		return nil, replay.ErrReplayed
	}
	return r, nil
}

// CallTimeout implements [replay.Bounded]: Options.Timeout bounds every
// Reserve, Commit and Release, whatever Redis does; with Options.Replicas
// above zero, a Reserve whose claim was not acknowledged releases it
// within a second timeout.
func (s *Store) CallTimeout() time.Duration {
	if s.replicas > 0 {
		return min(s.timeout, math.MaxInt64/2) * 2
	}
	return s.timeout
}

// LocalCommit implements [replay.LocalCommit]: with Options.Replicas zero
// a Commit makes no round trip (see Commit).
func (s *Store) LocalCommit() bool { return s.replicas == 0 }

// reservation is one claim on an id, named by a random owner token.
type reservation struct {
	s       *Store
	key     string
	val     string // reservedTag + owner, what Reserve writes
	owner   string // val's tail: 130 random bits in 26 base32 characters
	expires time.Time

	// mu serializes Commit and Release, so that concurrent calls on one
	// reservation run one after the other and later ones see done.
	mu   sync.Mutex
	done bool // Commit or Release returned nil or ErrReplayed
}

// Commit implements [replay.Reservation].
//
// With Options.Replicas zero it makes no round trip: the reservation
// already holds the id until the token expires, which is all a commit
// would write (see "Commit" in the package documentation). With Replicas
// above zero it writes consumed:<owner> and waits for the acknowledgments.
func (r *reservation) Commit(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: commit: %w", err)
	}
	if r.s.replicas == 0 {
		r.done = true
		return nil
	}
	px, ok := pxUntil(r.expires, r.s.now())
	if !ok {
		// The token has expired and cannot be replayed. The claim ended at
		// the token's expiry: there is nothing to keep or delete.
		r.done = true
		return nil
	}
	n, err := r.s.commitAcked(ctx, r, px)
	switch {
	case err != nil:
		return fmt.Errorf("redisstore: commit: %w", err)
	case n != 0 && n != 1:
		return fmt.Errorf("redisstore: commit: unexpected reply %d", n)
	}
	r.done = true
	if n == 1 {
		return replay.ErrReplayed
	}
	return nil
}

// Release implements [replay.Reservation].
func (r *reservation) Release(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: release: %w", err)
	}
	_, err := roundTrip(ctx, r.s, func(ctx context.Context) (int64, error) {
		return releaseScript.Run(ctx, r.s.client, []string{r.key}, r.owner).Int64()
	})
	if err != nil {
		return fmt.Errorf("redisstore: release: %w", err)
	}
	r.done = true
	return nil
}

// ownerLen is the length of an owner token: 26 base32 characters, 130 bits.
const ownerLen = 26

// newOwners returns the generator of a store's owner tokens: ChaCha8, a
// cryptographically strong generator, seeded from crypto/rand. An owner
// token only needs to be unique; drawing it from crypto/rand cost a
// getrandom system call per Reserve.
func newOwners() *owners {
	var seed [32]byte
	rand.Read(seed[:]) // never fails
	return &owners{rng: mrand.NewChaCha8(seed)}
}

// owners draws owner tokens, for concurrent Reserves.
type owners struct {
	mu  sync.Mutex
	rng *mrand.ChaCha8
}

// reservedValue returns reservedTag followed by a new owner token, 26
// base32 characters (130 bits) as rand.Text draws its text, in one
// allocation.
func (o *owners) reservedValue() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	var src [ownerLen]byte
	o.mu.Lock()
	_, _ = o.rng.Read(src[:]) // never fails
	o.mu.Unlock()
	var b strings.Builder
	b.Grow(len(reservedTag) + ownerLen)
	b.WriteString(reservedTag)
	for _, c := range src {
		b.WriteByte(alphabet[c%32]) // 256 is a multiple of 32: uniform
	}
	return b.String()
}

// pxUntil is the time from now until expires, rounded up to a whole
// millisecond (what Redis counts in) so that a key never vanishes before
// expires. ok is false when expires is not after now.
func pxUntil(expires, now time.Time) (px time.Duration, ok bool) {
	d := expires.Sub(now) // saturates for expiries centuries away
	if d <= 0 {
		return 0, false
	}
	px = d.Truncate(time.Millisecond)
	if px < d && px <= math.MaxInt64-time.Millisecond {
		px += time.Millisecond
	}
	return px, true
}

// deadlineSlack is how close to its context's deadline an i/o timeout
// counts as that deadline (see roundTrip).
const deadlineSlack = 5 * time.Millisecond

// roundTrip runs op with a context that ends at most s.timeout after the
// call began, and returns when op does or when that context ends, whichever
// is first.
//
// A client without ContextTimeoutEnabled ignores context deadlines on socket
// reads: it would wait out its ReadTimeout (seconds) and retry, for each of
// MaxRetries, on a server that has stopped answering. Running op in its own
// goroutine keeps the caller's wait bounded by s.timeout whatever the client
// is configured to do; op then ends by the client's own timeouts. A client
// the store made (s.direct) bounds every dial, write, read and retry by the
// context, so op runs on the caller's goroutine: no goroutine, channel and
// closure per call.
func roundTrip[T any](ctx context.Context, s *Store, op func(context.Context) (T, error)) (T, error) {
	if s.direct {
		if err := ctx.Err(); err != nil {
			var zero T
			return zero, err
		}
		cctx, bound, cancel := s.callContext(ctx)
		v, err := op(cctx)
		err = deadlineError(cctx, bound, err)
		cancel()
		return v, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, s.timeout, s.errTimeout)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := op(ctx)
		done <- result{v, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		select {
		case r = <-done: // finished at the same moment: keep its answer
		default:
			return r.v, context.Cause(ctx)
		}
	}
	return r.v, deadlineError(ctx, ctx, r.err)
}

// deadlineError is err, the error of a round trip run with ctx, which ends
// when bound does: wrapping bound's cause when bound has ended.
func deadlineError(ctx, bound context.Context, err error) error {
	if err != nil && ctx.Err() == nil && errors.Is(err, os.ErrDeadlineExceeded) {
		// A socket deadline that go-redis set from ctx's can fire a
		// moment before ctx's own timer: if ctx is about to end, the
		// i/o timeout is its deadline. Let it end, and say so below.
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < deadlineSlack {
			<-ctx.Done()
		}
	}
	if err != nil && ctx.Err() != nil {
		// Most likely the deadline made op fail (an i/o timeout from a
		// client that honours it): say so, for errors.Is.
		if errors.Is(err, ctx.Err()) {
			err = context.Cause(bound)
		} else {
			err = fmt.Errorf("%w: %w", context.Cause(bound), err)
		}
	}
	return err
}

// A sharedDeadline is a context that ends s.timeout after start, shared by
// the round trips that start within s.timeout/deadlineSlots after it: one
// timer for all of them instead of a context and a timer each, which cost a
// round trip about a tenth of its CPU. Each of them still ends within
// s.timeout of its start, and at most s.timeout/deadlineSlots earlier.
type sharedDeadline struct {
	ctx   context.Context // ends at start + s.timeout, with cause s.errTimeout
	start time.Time
}

// deadlineSlots is how many slots a store's timeout is cut into (see
// sharedDeadline): 500ms gives slots of about 8ms.
const deadlineSlots = 64

// callContext returns the context for one round trip on a store that made
// its client (s.direct), and the context that bounds it: a shared deadline
// under the caller's values, or ctx bounded by s.timeout when ctx has a
// deadline sooner than that, which is then honoured exactly. A caller's
// context that is canceled once the round trip has started no longer ends
// it: it ends when the client's reply comes or s.timeout passes, as a
// socket read already did.
func (s *Store) callContext(ctx context.Context) (call, bound context.Context, cancel context.CancelFunc) {
	now := time.Now()
	if dl, ok := ctx.Deadline(); ok && dl.Before(now.Add(s.timeout)) {
		bounded, stop := context.WithTimeoutCause(ctx, s.timeout, s.errTimeout)
		return bounded, bounded, stop
	}
	d := s.deadline.Load()
	if d == nil || !d.covers(now, s.timeout) {
		shared, stop := context.WithDeadlineCause(context.Background(), now.Add(s.timeout), s.errTimeout)
		_ = stop // the timer frees it at the deadline; round trips use it until then
		d = &sharedDeadline{ctx: shared, start: now}
		s.deadline.Store(d)
	}
	return callContext{Context: ctx, bound: d.ctx}, d.ctx, func() {}
}

// covers reports whether a round trip that starts at now may share d: d
// must not end later than now + timeout, nor more than a slot earlier. A
// clock reading before d's start (taken first on another goroutine) may not
// share it.
func (d *sharedDeadline) covers(now time.Time, timeout time.Duration) bool {
	since := now.Sub(d.start)
	return since >= 0 && since < timeout/deadlineSlots
}

// callContext is a caller's context (its values, for the client's hooks)
// that ends with bound.
type callContext struct {
	context.Context
	bound context.Context
}

func (c callContext) Deadline() (time.Time, bool) { return c.bound.Deadline() }
func (c callContext) Done() <-chan struct{}       { return c.bound.Done() }
func (c callContext) Err() error                  { return c.bound.Err() }
