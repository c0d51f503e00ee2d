package reqstate

import "errors"

// ErrInvalid is the one error Open returns for every token it cannot
// authenticate: empty, oversize, malformed, unknown key id, wrong binding,
// tampered or truncated. It deliberately says nothing more, so that a forger
// learns nothing from the answer.
var ErrInvalid = errors.New("reqstate: invalid request state")

// ErrExpired is returned by [State.Check] for an authenticated state whose
// expiry has passed. It is only ever reported after authentication, so it
// gives a forger nothing.
var ErrExpired = errors.New("reqstate: request state expired")

// ErrNotYetValid is returned by [State.Check] for an authenticated state
// issued in the future (beyond the leeway): a sign of clock skew between
// nodes or of a key used elsewhere.
var ErrNotYetValid = errors.New("reqstate: request state issued in the future")

// ErrTooLarge is returned by Seal when the sealed token would exceed the
// codec's maximum token length, so a token is never issued that Open would
// refuse.
var ErrTooLarge = errors.New("reqstate: sealed state exceeds the maximum token length")

// ErrBadState is returned by Seal for a State that must not be sealed: a
// missing or inverted validity window, a negative round, or a continuation
// that is not valid JSON.
var ErrBadState = errors.New("reqstate: state cannot be sealed")

// ErrNoSealingKey is wrapped by the error of a Seal at an instant when no
// key of the ring has its window open ([Key.SealsAt]): every key is
// before its not_before or at or past its not_after. The error names the
// instant; the codec's log line also lists the keys' windows.
var ErrNoSealingKey = errors.New("reqstate: no key may seal now")

// ErrKeyRing is wrapped by every error about loading or building a key ring.
// The wrapping error names the entry and the problem, never the key bytes.
var ErrKeyRing = errors.New("reqstate: bad key ring")

// ErrJSON is wrapped by every error from canonicalizing JSON (RFC 8785):
// malformed input, a lone surrogate, a duplicate member name, a number that
// is not a finite IEEE 754 double or not an exact one ([ErrInexactNumber]),
// or nesting deeper than [MaxJSONDepth].
var ErrJSON = errors.New("reqstate: cannot canonicalize JSON")

// ErrInexactNumber is wrapped, beside ErrJSON, by the error of a number
// that an IEEE 754 double does not hold exactly enough for the arguments
// hash to tell it apart from another: one whose RFC 8785 form (the
// shortest decimal of its double) would denote a different value, such as
// the integer 1234567890123456789 (which would become
// 1234567890123456800) or 0.10000000000000001 (which would become 0.1).
// Every integer up to 2^53 in magnitude and every number a shortest
// round-trip writer (JavaScript, Go's encoding/json, Python) produced is
// exact; larger integers belong in strings. See I-JSON, RFC 7493 section
// 2.2.
var ErrInexactNumber = errors.New("reqstate: number not exact in an IEEE 754 double")

// ErrFoldedNames is wrapped, beside ErrJSON, by the error of
// [HashArguments] for arguments holding an object, at any depth, with two
// member names that are equal under Unicode case folding as
// strings.EqualFold and Go's encoding/json fold them: "id" and "ID", "s"
// and "\u017f" (LATIN SMALL LETTER LONG S), "k" and "\u212a" (KELVIN
// SIGN). encoding/json binds either name to the same struct field, the
// last one winning, and RFC 8785 sorts members, so two such texts with
// the names swapped would share a hash and bind to different values.
// [Canonicalize], which is RFC 8785 alone, accepts them.
var ErrFoldedNames = errors.New("reqstate: member names equal under case folding")
