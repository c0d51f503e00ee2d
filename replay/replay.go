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
// Implementations are safe for concurrent use by multiple goroutines.
type Store interface {
	// Reserve claims id until the returned Reservation is committed or
	// released, or until its lease lapses, whichever comes first. A lease
	// never outlives expires.
	//
	// expires is the token's expiry: nothing about id needs to be kept after
	// it, and an id whose expires is not after the store's current time
	// cannot be claimed (Reserve returns ErrReplayed).
	//
	// Reserve returns ErrReplayed if id is reserved or consumed. Any other
	// error means the store could not decide, and the caller must reject the
	// request (fail closed).
	Reserve(ctx context.Context, id string, expires time.Time) (Reservation, error)
}

// Reservation is one successful claim on an id, returned by [Store.Reserve].
//
// Exactly one of Commit or Release should be called. Once either has
// returned nil or ErrReplayed, later calls to either are no-ops returning
// nil. After any other error the outcome is unknown and the call may be
// retried; if it is not, the lease lapses by itself.
//
// A Reservation is safe for concurrent use by multiple goroutines. Because
// Commit and Release run after the handler, possibly after the request's
// context is canceled, callers should pass a context that is not canceled
// with the request (for example [context.WithoutCancel]) bounded by a
// timeout of their own.
type Reservation interface {
	// Commit marks the id consumed until the token's expiry.
	//
	// If the lease lapsed before Commit but nobody claimed the id since,
	// Commit still consumes it. If another reservation claimed the id after
	// the lease lapsed, Commit returns ErrReplayed: the token may have been
	// used twice, and the caller decides what to do about it. If the token
	// has already expired, Commit returns nil and keeps nothing, because an
	// expired token cannot be replayed anyway.
	Commit(ctx context.Context) error

	// Release makes the id usable again, but only if this reservation still
	// holds it: a Release after the lease lapsed and another reservation
	// claimed the id leaves that other reservation alone.
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
