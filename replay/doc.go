// Package replay makes a sealed token usable once.
//
// A token carries a random id (its jti) and an expiry. Before the handler
// that a token resumes runs, the caller reserves the id; when the handler
// succeeds it commits the reservation, and when the handler fails it releases
// it:
//
//	store := replay.NewMemory(nil)
//
//	res, err := store.Reserve(ctx, jti, expires)
//	if err != nil {
//		return err // ErrReplayed: reject the token; anything else: fail closed
//	}
//	if err := handler(ctx); err != nil {
//		res.Release(context.WithoutCancel(ctx)) // the user may retry with the same token
//		return err
//	}
//	return res.Commit(context.WithoutCancel(ctx)) // the token is spent
//
// # Reserve, commit, release

// Reserve is the single point of decision: of any number of concurrent
// resumes of one token, at most one gets a [Reservation], and every other
// gets [ErrReplayed]. Deciding before the handler runs, rather than recording
// use after it, is what stops two racing resumes from both running it.
//
// Commit marks the id consumed until the token's expiry. After that the store
// may forget the id, because the token is refused as expired before anyone
// asks the store again.
//
// Release returns the id, so that a token whose handler failed (a transient
// error, a canceled request) is not burned and the user can resume with it
// again. A Release only ever frees the reservation that made it.
//
// # The guarantee
//
// Once Reserve has handed out a Reservation for an id, no other Reserve of
// that id succeeds before the expiry it was given, unless that Reservation
// is released. A reservation has no lease: it does not lapse while the
// handler runs, however long that takes, and it does not lapse when the
// Commit fails, times out or is never made because the process crashed. In
// all those cases the id stays claimed until its expiry, exactly as if it
// had been committed. Only an explicit Release frees it early.
//
// The price is paid by a crash: a process that dies between Reserve and
// Commit burns the user's token, who then starts the call over (a new flow).
// Earlier versions let a reservation lapse after a two-minute lease instead,
// which turned every lost Commit into a token that could run its handler
// again: a store must fail closed, and a lost Commit is a store failure.
//
// # Expiry and clock skew
//
// The expiry a caller passes to Reserve is the last moment at which any
// node could still accept the token, on the store's clock. The guard in
// package mrtr passes the token's ExpiresAt plus twice its clock leeway L: a
// node whose clock runs up to L behind the node that reserved accepts the
// token until its own clock reads ExpiresAt + L, which is ExpiresAt + 2L on
// the reserving node's clock. Keeping the mark only until ExpiresAt + L
// would let that node run the token again for up to L after the mark is
// gone.
//
// # Failing closed
//
// [ErrReplayed] is the only error that means "this token was used". Any other
// error from Reserve, including [ErrFull] from a [Memory] at capacity, a
// network failure or a canceled context, means the store could not decide.
// The caller must then reject the request rather than run the handler
// unguarded: a store outage must never turn single-use tokens into
// multi-use ones. An error from Commit or Release leaves the id claimed
// until its expiry, so it never reopens a token either.
//
// # Stores
//
// [Memory] keeps ids in one process and is right for a single server. Several
// replicas behind a load balancer need one store they all share (a Redis
// implementation lives in a sibling package). Every implementation must pass
// the contract suite in package [github.com/mrtr-go/mrtr/replay/replaytest].
// A store whose calls never wait may implement [NonBlocking], so that
// callers skip the per-call timeout they would otherwise set up; one whose
// Commit alone never waits (as configured) may implement [LocalCommit], so
// that callers commit in line rather than off the response's path.
package replay
