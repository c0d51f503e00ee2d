// Package reqstate seals the requestState of an MCP Multi Round-Trip
// Request (MCP 2026-07-28, SEP-2322) into an opaque token that a client
// can carry but cannot read, forge, or move to another call, caller or
// server, and opens it again.
//
//	ring, _ := reqstate.GenerateKeyRing("2026-11", nil)
//	codec := reqstate.New(ring, nil)
//	b := reqstate.Binding{Method: "tools/call", ProtocolVersion: "2026-07-28", Target: "deploy", ServerID: "api-1"}
//	token, _ := codec.Seal(b, &reqstate.State{Continuation: cont, Round: 1, IssuedAt: now, ExpiresAt: now.Add(5 * time.Minute)})
//	// ... the client echoes token on its retry ...
//	st, err := codec.Open(b, token) // err is reqstate.ErrInvalid for anything not sealed by us for b
//	if err == nil {
//		err = st.Check(time.Now(), 2*time.Second) // expiry is the caller's policy
//	}
//
// Most users do not call this package directly: the guard in package mrtr
// derives the binding from each request, runs every check in a fixed order
// and hands handlers a typed continuation.
//
// # Threat model
//
// The client, and anyone who sees the traffic, is the adversary. The spec
// calls requestState attacker controlled: a client may alter it, replay
// it, send it with other arguments, to another tool, as another user or to
// another server, or send arbitrary bytes in its place. The codec
// guarantees:
//
//   - Confidentiality: the State (continuation, round, times, ids,
//     arguments hash, asked keys) is encrypted with AES-256-GCM. Only the
//     format version and the key id are in clear text.
//   - Integrity and binding: the version, the key id and the [Binding]
//     (method, protocol version, target, server id, principal) are the
//     AEAD's associated data. A token opens only under the exact binding it
//     was sealed for, so a state cannot be moved to another call. The
//     binding is encoded unambiguously (length-prefixed fields), so no two
//     bindings share associated data.
//   - Non-malleability: one sealed state has exactly one token text.
//     Padding, the standard base64 alphabet, non-zero trailing bits, line
//     breaks or any appended byte make Open fail.
//   - Opaque failure: every token Open cannot authenticate gives
//     [ErrInvalid], whatever the reason. Expiry ([ErrExpired],
//     [ErrNotYetValid]) is judged by [State.Check] only after
//     authentication, so it tells a forger nothing.
//   - Bounded work: Open checks the token length against a cap (default
//     64 KiB) before decoding anything, never sizes an allocation from a
//     length inside the token, and never panics.
//
// What the codec does not do:
//
//   - Single use. A token is a bearer token: anyone holding it can present
//     it, any number of times, until it expires. Flows that must run at
//     most once (a payment, a deployment) need a single-use store keyed by
//     the state's JTI (package replay), as the spec requires of servers
//     needing at-most-once semantics.
//   - Argument binding. The arguments hash ([HashArguments], RFC 8785 JCS
//     then SHA-256) travels inside the state; comparing it with the
//     retry's arguments is the caller's job, as is judging expiry. The hash
//     is injective over values, not spellings: member order, whitespace,
//     escapes and how a number is written (1, 1.0, 1e0) do not count, but
//     two different numbers never share a hash, because a number whose
//     canonical form would be another number (an int64 id beyond 2^53, a
//     decimal more precise than a double) is refused ([ErrInexactNumber]).
//     Member order does not count because no decoder is allowed to see it:
//     an object with two names equal under case folding ("id" and "ID",
//     which Go's encoding/json binds to one field, the last winning) is
//     refused at any depth ([ErrFoldedNames]), and exact duplicates are
//     refused as RFC 8785 requires. The canonicalizer is checked against github.com/gowebpki/jcs by the
//     test module in jcsoracle/.
//   - Secrecy of the token itself. Never log a token, put it in an error,
//     or show it to anyone but the client it was issued to; log a short
//     fingerprint instead.
//
// # Token format
//
// Version 1 is
//
//	"v1." kid "." base64url(nonce[12] | AES-256-GCM(payload) | tag[16])
//
// with unpadded base64url. The payload layout is documented beside its
// encoder; testdata/vectors.json freezes the format with known answers,
// and any change to it must bump [Version].
//
// # Keys and rotation
//
// A [KeyRing] is an ordered list of 32-byte keys with ids matching
// [A-Za-z0-9_-]{1,32}. Open selects a key by the token's id and never
// tries the others. Its JSON form is
//
//	{"keys":[{"id":"2026-11","secret":"<standard base64 of 32 bytes>"}]}
//
// and an entry may carry a window, "not_before" and "not_after" (RFC 3339,
// either may be left out):
//
//	{"id":"2026-12","secret":"...","not_before":"2026-12-01T00:00:00Z","not_after":"2027-03-01T00:00:00Z"}
//
// The rule: the sealing key is the first key in ring (file) order whose
// window is open now, NotBefore <= now < NotAfter ([KeyRing.SealingKey]).
// Without windows that is the first key, as it always was. When no window
// is open, Seal fails with [ErrNoSealingKey] (and logs it, at most once a
// minute). A window limits sealing only: a key opens tokens from the
// moment it is in the ring until its NotAfter plus [Options.OpenGrace]
// (the longest TTL plus leeway), then it is retired and opens nothing.
//
// To rotate across several nodes without failing a single resume:
//
//  1. Add the new key second on every node (it can open, nothing seals
//     with it yet).
//  2. Once every node has it, promote it to first, node by node. Tokens
//     sealed under either key open everywhere.
//  3. Wait at least the longest token lifetime (TTL plus leeway), then
//     remove the old key. Tokens still sealed under it are now invalid.
//
// With windows the same rotation can be written into the file once, ahead
// of time: the new key first with a not_before, the old key after it with
// the same instant as not_after; every node switches at that instant on
// its own clock. A running codec takes a new ring with
// [AESGCM.SetKeyRing] (mrtr serve and mrtr proxy do it when the key file
// changes or on SIGHUP), so none of this needs a restart.
//
// # Nonce budget
//
// Nonces are 96 random bits, so the probability that two tokens under one
// key share a nonce stays below 2^-32 only while a key seals fewer than
// 2^32 tokens ([NonceBudget]), counted over every node that holds it.
// Rotate keys well before that: at 1,000 pauses a second a key lasts 136
// years; at 1,000,000 a second, 71 minutes. [AESGCM] counts its seals per
// key ([AESGCM.Seals]) and warns at [Options.SealWarn] (default 2^28 per
// process); with N nodes sharing a key, set it to about 2^30/N.
//
// # Concurrency
//
// [KeyRing] is immutable after construction. [AESGCM] is safe for
// concurrent use; its ring is swapped atomically by SetKeyRing, so a Seal
// or Open in progress finishes with the ring it started with.
package reqstate
