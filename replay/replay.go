package replay

import (
	"context"
	"errors"
	"time"
)

// ErrReplayed reports that an id is reserved or already consumed. It is the
// only error that means "this token must be rejected as reused"; every other
// error from a [Store] means the store could not decide.
var ErrReplayed = errors.New("replay: token already used")

// ErrFull reports that a [Memory] store holds MaxEntries unexpired entries and
// cannot take another. The caller must fail closed.
var ErrFull = errors.New("replay: store full")

// Store enforces single use of token ids.
//
// The guarantee a Store gives its caller: once Reserve has handed out a
// Reservation for an id, no other Reserve of that id succeeds before
// expires, unless that Reservation is released. Nothing else frees an id
// early: not time (there is no lease shorter than the expiry), not a Commit
// that failed or was never made, not a caller that crashed or hangs.
//
// Implementations are safe for concurrent use by multiple goroutines.
type Store interface {
	// Reserve claims id until expires. A Commit keeps it claimed, as
	// consumed, until the same time; only a Release frees it earlier.
	//
	// expires is the last moment at which any caller could still present
	// the token, on the store's clock: the token's expiry plus whatever
	// clock skew the callers tolerate (the guard passes ExpiresAt + 2 x
	// Leeway). Nothing about id needs to be kept after it, and an id whose
	// expires is not after the store's current time cannot be claimed
	// (Reserve returns ErrReplayed).
	//
	// Reserve returns ErrReplayed if id is reserved or consumed. Any other
	// error means the store could not decide, and the caller must reject the
	// request (fail closed).
	Reserve(ctx context.Context, id string, expires time.Time) (Reservation, error)
}

// Reservation is one successful claim on an id, returned by [Store.Reserve].
//
// At most one of Commit or Release takes effect. Once either has returned
// nil or ErrReplayed, later calls to either are no-ops returning nil. After
// any other error the outcome is unknown and the call may be retried; if it
// is not, the id stays claimed until its expiry, exactly as if Commit had
// succeeded. A lost Commit therefore never makes a token usable again, and a
// lost Release only costs the user the token.
//
// A Reservation is safe for concurrent use by multiple goroutines. Because
// Commit and Release run after the handler, possibly after the request's
// context is canceled, callers should pass a context that is not canceled
// with the request (for example [context.WithoutCancel]) bounded by a
// timeout of their own.
type Reservation interface {
	// Commit marks the id consumed until its expiry. Release has no effect
	// after a Commit.
	//
	// If the token has already expired, Commit returns nil and keeps
	// nothing, because an expired token cannot be replayed anyway. If the
	// store lost the claim (a Redis restart without persistence, a clock
	// stepped back past the expiry) and another reservation claimed the id
	// since, Commit returns ErrReplayed and still leaves the id consumed,
	// whatever the other reservation does.
	Commit(ctx context.Context) error

	// Release makes the id usable again, but only if this reservation still
	// holds it: a Release never frees another reservation's claim or a
	// consumed id.
	Release(ctx context.Context) error
}

// NonBlocking is implemented by a [Store] whose Reserve, and whose
// Reservations' Commit and Release, return without waiting on anything
// (no I/O, no lock held across I/O), as [Memory] does. A caller that bounds
// each store call with a timeout may skip that for such a store: the
// timeout could never fire, and setting one up costs a timer and a context
// per call.
type NonBlocking interface {
	Store
	// NonBlocking marks the store; it does nothing.
	NonBlocking()
}

// Bounded is implemented by a [Store] that bounds each of its calls
// itself: Reserve, and its Reservations' Commit and Release, return within
// CallTimeout of being called whatever the backend does (a server that
// stops answering, a lost connection), with an error that is not
// ErrReplayed when that time has passed, as a Redis store does with its
// Options.Timeout. A caller that bounds each store call with a timeout of
// its own, no shorter than CallTimeout, may pass its context through
// instead: its timer could never fire first, and setting it up costs a
// timer and a context per call.
type Bounded interface {
	Store
	// CallTimeout is the longest any call to the store or its
	// Reservations takes. It does not change.
	CallTimeout() time.Duration
}

// LocalCommit is implemented by a [Store] that can tell, as it is
// configured, whether its Reservations' Commit returns without a round
// trip or any other wait, while its Reserve or Release may still wait (so
// it is not [NonBlocking]), as a Redis store without replica
// acknowledgments does. A caller that makes a waiting commit off the
// response's path may make it in line when LocalCommit reports true: the
// goroutine would cost more than the commit.
type LocalCommit interface {
	Store
	// LocalCommit reports whether every Commit returns without waiting.
	LocalCommit() bool
}
