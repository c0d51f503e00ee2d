// Package redisstore is a [replay.Store] kept in Redis, for several server
// replicas that must share one record of which tokens have been used.
//
//	store, err := redisstore.NewFromURL("rediss://:password@redis.internal:6379/0", nil)
//	if err != nil {
//		return err
//	}
//	defer store.Close()
//
// The store keeps the contract of package replay, which its tests check with
// the suite in [github.com/mrtr-go/mrtr/replay/replaytest] against a real
// redis-server. Every decision is made by one atomic command or script on the
// server, so any number of processes can share a store.
//
// # Keys
//
// Each token id that is reserved or consumed has one string key,
// Options.Prefix followed by the id ("mrtr:replay:" by default). Its value
// names the state and the reservation that wrote it:
//
//	reserved:<owner>   reserved, until the token expires (Redis expires the key);
//	                   with Options.Replicas zero also what a committed id
//	                   holds (Commit writes nothing)
//	consumed:<owner>   committed with Options.Replicas above zero, until the
//	                   token expires
//	replayed:<owner>   committed (Replicas above zero) by a reservation whose
//	                   claim the server had lost and which took the id from a
//	                   later one, until the token expires
//
// The owner is a random token (130 bits, from a ChaCha8 generator that each
// Store seeds from crypto/rand) that Reserve draws for each reservation.
// Every key lives until the expiry the caller gave (the guard gives the
// token's expiry plus twice its clock leeway), rounded up to the
// millisecond, whether it is reserved or
// consumed: there is no shorter lease, so a Commit that is lost, times out or
// is never made (the node crashed) leaves the id claimed until then, and the
// token never runs its handler again. Only Release frees a claim early.
// Nothing else is stored and nothing needs cleaning up.
//
// # Operations
//
// Reserve is one command:
//
//	SET <key> reserved:<owner> NX PX <time to expiry>
//
// NX makes the claim atomic: of any number of concurrent Reserves, exactly
// one creates the key and every other is refused with ErrReplayed. PX has
// Redis forget the claim once the token has expired, so nothing needs
// cleaning up. Setting value and expiry in one command leaves no moment in
// which a key exists without an expiry. When NX refuses, Reserve reads the key once more: go-redis resends
// a command whose reply it lost, and a resent SET finds the value its first
// copy wrote; Reserve then keeps the reservation instead of reporting its own
// claim as a replay.
//
// Release is a Lua script, run with EVALSHA (and EVAL when the server's
// script cache does not have it, after a restart say), so that reading the
// key and acting on what it holds is one atomic step: it deletes the key
// only if it still holds reserved:<owner>. A stale Release, after the token
// expired and another reservation claimed the id, leaves that reservation
// alone.
//
// # Commit
//
// With Options.Replicas zero (the default), Commit makes no round trip: it
// only marks the reservation settled, so that a later Release does nothing.
// The reservation already holds the id until the token expires, which is
// all a consumed mark would: the key, its value and its expiry stay as
// Reserve wrote them, and the token is refused until it expires. This saves
// a round trip and its CPU on every resume. What it gives up is the
// script's repair of a claim the server lost between Reserve and Commit (a
// restart without persistence, a failover to a replica that had not
// received the SET): a commit used to write the mark again, or report the
// replay with ErrReplayed; now that id stays unclaimed, exactly as do the
// ids committed before the loss, which no commit can bring back. So nothing
// that Replicas zero guarantees changes (single use as long as Redis keeps
// its writes, see "Deployment" and "Replicas and failover"); the window
// that a loss of writes opens is the same one, seen by the resumes in
// flight as well.
//
// With Replicas above zero, Commit is a Lua script like Release, sent with
// WAIT (below): it writes consumed:<owner> with the remaining lifetime if
// the key holds reserved:<owner>, or holds nothing (the server lost the
// claim in a restart and nobody claimed the id since). If another
// reservation holds the id (the server lost this one's claim, and a second
// resume took it), Commit overwrites it with replayed:<owner> and returns
// ErrReplayed, so the id stays consumed whatever the other one does. If the
// id is consumed already, Commit returns ErrReplayed and changes nothing. A
// Commit for a token that has expired returns nil without a round trip.
//
// Both scripts recognize their own earlier write, so a Commit or Release
// retried after an error returns what the lost first attempt would have.
//
// Expiry is judged by two clocks. Reserve and an acknowledged Commit compute lifetimes from
// Options.Now (the clock that also judges the tokens) and hand Redis relative
// durations (PX), never absolute times, so a Redis host whose clock is off
// cannot shorten how long a used token stays consumed.
//
// # Failures
//
// The store fails closed. [replay.ErrReplayed] means the server saw the id
// held or consumed, and nothing else does. A timeout, a refused connection,
// an error reply, an unexpected value or a canceled context returns an error
// "redisstore: reserve: <cause>" (commit, release) that wraps the cause, so
// that errors.Is finds context.DeadlineExceeded, context.Canceled and the
// like, and the guard rejects the request rather than run it unguarded.
// Errors never contain ids, owner tokens or passwords.
//
// Options.Timeout (500ms by default) bounds every call, go-redis's own
// retries included, even when the client would wait longer: a Redis that
// stops answering costs each request at most the timeout. A client passed
// to [New] may ignore context deadlines on its sockets, so each of its
// round trips runs on a goroutine of its own that the caller stops waiting
// for at the timeout; the client [NewFromURL] makes honours them
// (ContextTimeoutEnabled), and its round trips run on the caller's
// goroutine. The calls that start within 1/64 of the timeout of each other
// share one deadline, and one timer, instead of a context and a timer each:
// each ends within the timeout of its start, and may fail up to 1/64 of
// the timeout sooner. A caller's deadline sooner than the timeout is
// honoured exactly; a context canceled before a call fails it at once,
// after the call has started no longer (it ends with the reply or the
// timeout). go-redis redials by itself, so once Redis is back the same
// Store works again; there is
// nothing to recreate.
//
// A call that fails may still have taken effect on the server. A Reserve
// that returned an error may have claimed the id: the token is then refused
// until it expires. A Commit (Replicas above zero) or Release that returned
// an error may be retried; if it is not, the id stays claimed until the
// token expires, as package replay documents: a lost Commit never reopens a
// token. A Commit with Replicas zero fails only on a done context.
//
// # Deployment
//
// The store is only as durable as the Redis behind it. Consumed ids live in
// memory: if Redis restarts without persistence, or fails over to a replica
// that had not received the last writes (replication is asynchronous), the
// ids consumed in that window are forgotten, and their tokens can be used
// once more until they expire. Token lifetimes bound that window; enable AOF
// (appendonly yes) where it matters.
//
// Redis must not evict these keys. Use maxmemory-policy noeviction: a full
// server then refuses writes, and Reserve fails closed. A policy that evicts
// keys with an expiry (volatile-lru, volatile-ttl, allkeys-*) would drop
// consumed marks and let tokens be replayed.
//
// # Sizing
//
// There is one key per token reserved or consumed and not yet expired: the
// number of live tokens that were used, times about 200 bytes (a 22-character
// id with the default prefix, measured with Redis 7). A key lives at most
// until its token expires, so memory follows the rate of use times the token
// lifetime, not history.
//
// # Sentinel and Cluster
//
// Every operation touches exactly one key, so the store works unchanged with
// Redis Cluster (redis-cluster:// URLs, or a *redis.ClusterClient passed to
// [New]), with Sentinel (the failover URL, or redis.NewFailoverClient), and
// with client-side sharding (*redis.Ring, without Options.Replicas). Each
// token's only key lives in one slot; a hash tag would change nothing and
// would move the keys of a running deployment. A Prefix must not contain a
// hash tag ({...}): it would put every token in one slot.
//
// # Replicas and failover
//
// Replication is asynchronous: a primary that acknowledged a claim and dies
// before sending it on leaves the promoted replica without it, and the token
// can run again. With Options.Replicas = N, Reserve and Commit send their
// write and WAIT N (WAITAOF 1 N where the primary runs appendonly yes and
// knows it) in one pipeline, on one connection to the key's primary (for a
// Cluster, the primary of the key's slot; a MOVED reply, after a failover,
// sends the pipeline once to the node it names). Fewer acknowledgments fail
// the call, never with ErrReplayed: the guard refuses the resume, and a
// Reserve releases its unacknowledged claim (best effort) so that the user
// can retry. WAIT does not make Redis strongly consistent; what each N
// guarantees, case by case, is in docs/OPERATIONS.md ("Many nodes on
// Redis"), and tested against real servers in this package's
// topology_test.go: N = 1 closes the split-brain and crashed-primary cases,
// not the promotion of a replica that missed a claim another replica
// acknowledged (N = every replica closes that too); no N survives a primary
// restarted without persistence before any failover (appendonly yes does).
//
// [Store.Durability] reports, from one INFO per primary, whether the
// deployment persists (AOF) and how many replicas each primary has; mrtr
// serve warns at startup when a restart would forget used tokens.
//
// # Connections
//
// [New] takes any redis.UniversalClient the caller configured, and leaves it
// open on Close. [NewFromURL] creates a client from a redis://, rediss://
// (TLS) or unix:// URL, with password and database, from go-redis's Sentinel
// failover URL (redis://sentinel:26379?master_name=NAME&addr=...), or from a
// redis-cluster:// (rediss-cluster:// for TLS) URL of seed nodes, and closes
// it on Close.
package redisstore
