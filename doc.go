// Package mrtr is the guard of sealed Multi Round-Trip Requests (MCP
// 2026-07-28, SEP-2322): it turns each paused tools/call, prompts/get or
// resources/read into an encrypted, bound, expiring and optionally
// single-use requestState, and checks every resume before a handler sees
// it.
//
// The guard is SDK-agnostic. An adapter (package gosdk, for the official
// Go SDK) describes each call as a [Request]; [Guard.Begin] checks it and
// returns the [Flow] the handler works with; the handler either completes
// or pauses through [Flow.Pause]; [Flow.End] settles the single-use
// reservation.
//
//	g := mrtr.New(reqstate.New(ring, nil), &mrtr.Options{ServerID: "api", Store: replay.NewMemory(nil)})
//	f, err := g.Begin(ctx, &mrtr.Request{Method: "tools/call", Target: "deploy", ...})
//	if err != nil { /* a *RejectError (-32602) or ErrStoreUnavailable (-32603) */ }
//	cont, resumed, err := mrtr.Decode[deployState](f)
//	if !resumed {
//		state, _ := f.Pause(deployState{...}, "confirm") // send with the input requests
//	}
//	f.End(ctx, handlerErr)
//
// # Checks, in order
//
// On a call carrying a requestState, Begin runs: the length cap, the token
// format, the key id, authenticated decryption under this request's binding
// (method, protocol version, target, server id, principal), the payload
// decode, expiry with leeway (and issued-at not in the future), the
// arguments hash in constant time, the round cap, and the single-use
// reservation when a store is set. Then the handler runs, and End commits
// the reservation on success or releases it on failure (commits it either
// way with Options.ConsumeOnError).
//
// # Error contract
//
// Every rejected requestState is a [*RejectError]: JSON-RPC -32602 with the
// fixed message "invalid requestState" and data.reason one of invalid,
// expired, replayed, rounds_exceeded or arguments_changed. Every failure
// before authentication is "invalid", so the reason tells a forger
// nothing. A single-use store that cannot decide gives
// [ErrStoreUnavailable]: -32603 with one fixed message ("the single-use
// store is unavailable; try again", no cause), and the handler does not
// run. Logs carry the reason and a 12-hex-digit fingerprint of
// the token, never the token or the continuation.
//
// # Answers
//
// A resumed handler sees only the answers to the keys its sealed round
// asked ([Flow.Answer]); answers to other keys are dropped. A missing or
// malformed answer is not an error: the handler simply asks again with a
// new pause. A call with inputResponses but no requestState is a first
// call whose answers nobody asked for: [Flow.Unverified] exposes them and
// the handler decides.
//
// # Single use
//
// Without a store, a token may be presented again until it expires (the
// spec allows this; the state is still bound and sealed): it is a bearer
// token for its lifetime. With a store (package replay, or
// replay/redisstore for many nodes), the guard reserves each token before
// its handler runs, commits the reservation when the handler answers
// (complete or paused again) and releases it when the handler fails. What
// that guarantees, precisely:
//
//   - Once a handler has started on a token, no handler starts on that
//     token again before it expires, whatever fails afterwards: a commit
//     that fails or times out, a store that stops answering, a node that
//     crashes mid-handler, a handler slower than any timeout. A
//     reservation does not lapse; it lasts until the token can no longer
//     be accepted anywhere (ExpiresAt + 2 x Leeway, so that a node whose
//     clock runs up to Leeway behind cannot accept the token after the
//     mark is gone).
//   - The one exception is a handler that returns an error: its token is
//     released, and the user may retry with the same token. So the
//     guarantee is at most one successful run per token, not one run: the
//     side effects of a run that failed may be repeated by the retry. Make
//     them idempotent with [Flow.ID] and [Flow.Round] as the key (see the
//     example of Flow.ID), or set Options.ConsumeOnError, which spends the
//     token on an error too, so that each token starts its handler at most
//     once, successful or not.
//   - A store that cannot decide refuses the resume (-32603): an outage
//     never turns single-use tokens into multi-use ones.
//
// The price of failing closed: a node that crashes mid-handler, or a
// release that is lost, burns the user's token, who then starts the call
// over. The memory store gives the guarantee among the callers of one
// process; several nodes need a shared store, and that store only as
// durable as its server (see package redisstore on persistence).
//
// # Observing
//
// Options.Observer, when set, is told of every resume decided (ok or the
// reason), every pause sealed (round, key id, token size), every call to
// the store (operation, outcome, duration) and every call's end, for
// metrics and traces; [Request.Meta] carries the request's _meta (a W3C
// trace context) to it. The package itself imports no metrics or tracing
// library, and without an Observer builds no event and reads no clock.
// The mrtr command plugs Prometheus and OpenTelemetry in.
package mrtr
