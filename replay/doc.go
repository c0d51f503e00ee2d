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
//
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
// # Leases
//
// A process can crash, or lose its store connection, between Reserve and
// Commit. If a reservation lasted until the token expired, such a crash would
// burn the user's token for its whole lifetime. A reservation is therefore a
// lease: it lapses by itself after a lease duration ([DefaultLease] for
// [Memory]), and never outlives the token's expiry. Once it lapses the id can
// be reserved again.
//
// The lease should comfortably exceed how long a handler takes, because a
// handler still running when its lease lapses no longer excludes a second
// resume. Stores make that case safe after the fact: a late Commit still
// consumes the id, and if another resume claimed the id in the meantime,
// Commit reports [ErrReplayed] and the id stays consumed whatever the other
// resume does, so the token is never usable a third time.
//
// # Failing closed
//
// [ErrReplayed] is the only error that means "this token was used". Any other
// error from Reserve, including [ErrFull] from a [Memory] at capacity, a
// network failure or a canceled context, means the store could not decide.
// The caller must then reject the request rather than run the handler
// unguarded: a store outage must never turn single-use tokens into
// multi-use ones. An error from Commit likewise means the id may not be
// consumed; the reservation still lapses by itself if nobody retries.
//
// # Stores
//
// [Memory] keeps ids in one process and is right for a single server. Several
// replicas behind a load balancer need one store they all share (a Redis
// implementation lives in a sibling package). Every implementation must pass
// the contract suite in package [github.com/mrtr-go/mrtr/replay/replaytest].
// A store whose calls never wait may implement [NonBlocking], so that
// callers skip the per-call timeout they would otherwise set up.
package replay
