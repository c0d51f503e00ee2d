package reqstate

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// ID is a 128-bit random identifier: a token's jti or a flow id.
type ID [16]byte

// NewID reads a fresh ID from r (nil means crypto/rand.Reader).
func NewID(r io.Reader) (ID, error) {
	if r == nil {
		r = rand.Reader
	}
	var id ID
	if _, err := io.ReadFull(r, id[:]); err != nil {
		return ID{}, fmt.Errorf("reqstate: read random id: %w", err)
	}
	return id, nil
}

// String returns the ID in unpadded base64url (22 characters).
func (id ID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// IsZero reports whether id is all zero bytes (unset).
func (id ID) IsZero() bool { return id == ID{} }

// Hash is a SHA-256 digest, such as the arguments hash of [HashArguments].
type Hash [32]byte

// String returns the digest in unpadded base64url (43 characters).
func (h Hash) String() string { return base64.RawURLEncoding.EncodeToString(h[:]) }

// State is the sealed payload of a request state. Every field is
// encrypted and authenticated; none is visible to the client.
//
// Times are stored with millisecond precision: a State that went through
// Seal and Open has its times truncated to the millisecond (in UTC).
type State struct {
	// Continuation is the caller's own data, any JSON value (nil means
	// none). Open returns it as raw JSON for the caller to decode into its
	// own type.
	Continuation json.RawMessage
	// Round counts the pauses of the flow: 1 for the state issued by the
	// first pause. It must not be negative.
	Round int
	// IssuedAt and ExpiresAt bound the state's validity; both are required
	// and ExpiresAt must be after IssuedAt. See [State.Check].
	IssuedAt, ExpiresAt time.Time
	// JTI identifies this token, for single use. Seal fills it from the
	// codec's randomness when it is zero.
	JTI ID
	// FlowID is constant across the rounds of one flow: an idempotency
	// key for the flow's side effects.
	FlowID ID
	// ArgsHash is the [HashArguments] digest of the call's arguments.
	ArgsHash Hash
	// Asked lists the keys of the input requests issued with this state.
	Asked []string
}

// Check judges an authenticated state's validity window at time now,
// allowing leeway for clock skew between nodes: it returns ErrExpired once
// now is past ExpiresAt+leeway and ErrNotYetValid when IssuedAt is after
// now+leeway.
func (s *State) Check(now time.Time, leeway time.Duration) error {
	if now.After(s.ExpiresAt.Add(leeway)) {
		return ErrExpired
	}
	if s.IssuedAt.After(now.Add(leeway)) {
		return ErrNotYetValid
	}
	return nil
}

// Payload layout, version 1 (all inside the AEAD):
//
//	uvarint  round
//	int64    issued-at, Unix milliseconds, big endian
//	int64    expires-at, Unix milliseconds, big endian
//	[16]byte jti
//	[16]byte flow id
//	[32]byte arguments hash
//	uvarint  number of asked keys, then for each: uvarint length, bytes
//	...      continuation JSON, to the end (empty means none)
const fixedPayloadLen = 8 + 8 + 16 + 16 + 32

// payloadLen returns the exact length of s's encoding.
func (s *State) payloadLen() int {
	n := uvarintLen(uint64(s.Round)) + fixedPayloadLen + uvarintLen(uint64(len(s.Asked)))
	for _, k := range s.Asked {
		n += uvarintLen(uint64(len(k))) + len(k)
	}
	return n + len(s.Continuation)
}

func (s *State) appendPayload(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(s.Round))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.IssuedAt.UnixMilli()))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.ExpiresAt.UnixMilli()))
	dst = append(dst, s.JTI[:]...)
	dst = append(dst, s.FlowID[:]...)
	dst = append(dst, s.ArgsHash[:]...)
	dst = binary.AppendUvarint(dst, uint64(len(s.Asked)))
	for _, k := range s.Asked {
		dst = appendField(dst, k)
	}
	return append(dst, s.Continuation...)
}

// decodePayload parses an authenticated payload. The payload was written
// by appendPayload under one of our keys, so a failure here means a bug or
// a key shared with a different program; it is still handled without
// trusting any length: every length is checked against the bytes left.
// The returned State's Continuation aliases p.
//
// It allocates at most three times, whatever the number of asked keys: the
// State (together with the backing array of a short Asked list), a longer
// Asked list, and one string that holds every asked key.
func decodePayload(p []byte) (*State, bool) {
	round, n := binary.Uvarint(p)
	if n <= 0 || round > maxRound {
		return nil, false
	}
	p = p[n:]
	if len(p) < fixedPayloadLen {
		return nil, false
	}
	fixed := p[:fixedPayloadLen]
	p = p[fixedPayloadLen:]
	count, n := binary.Uvarint(p)
	// Each key takes at least one byte, which bounds count by what is left.
	if n <= 0 || count > uint64(len(p)-n) {
		return nil, false
	}
	p = p[n:]
	// First pass: check every key's length and find where the keys end.
	keysLen := 0
	for range count {
		l, n := binary.Uvarint(p[keysLen:])
		if n <= 0 || l > uint64(len(p)-keysLen-n) {
			return nil, false
		}
		keysLen += n + int(l)
	}

	var s *State
	switch {
	case count == 0:
		s = new(State)
	case count <= smallAsked:
		sa := new(stateSmallAsked)
		s = &sa.State
		s.Asked = sa.asked[:count:count]
	default:
		s = new(State)
		s.Asked = make([]string, count)
	}
	s.Round = int(round)
	s.IssuedAt = time.UnixMilli(int64(binary.BigEndian.Uint64(fixed))).UTC()
	s.ExpiresAt = time.UnixMilli(int64(binary.BigEndian.Uint64(fixed[8:]))).UTC()
	copy(s.JTI[:], fixed[16:])
	copy(s.FlowID[:], fixed[32:])
	copy(s.ArgsHash[:], fixed[48:])
	if count > 0 {
		// Second pass: the keys are substrings of one copy of their
		// encoding (lengths included), already checked above.
		keys := string(p[:keysLen])
		off := 0
		for i := range s.Asked {
			l, n := binary.Uvarint(p[off:])
			off += n
			s.Asked[i] = keys[off : off+int(l)]
			off += int(l)
		}
		p = p[keysLen:]
	}
	if len(p) > 0 {
		s.Continuation = json.RawMessage(p)
	}
	return s, true
}

// smallAsked is the longest Asked list decodePayload allocates together
// with its State. Most pauses ask for one to a few inputs.
const smallAsked = 4

type stateSmallAsked struct {
	State
	asked [smallAsked]string
}

// maxRound bounds the round counter so that it fits an int everywhere.
const maxRound = 1<<31 - 1

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// validate reports why s cannot be sealed, or nil.
func (s *State) validate() error {
	switch {
	case s.Round < 0 || s.Round > maxRound:
		return fmt.Errorf("%w: round %d out of range", ErrBadState, s.Round)
	case s.IssuedAt.IsZero() || s.ExpiresAt.IsZero():
		return fmt.Errorf("%w: issued-at and expires-at are required", ErrBadState)
	case !s.ExpiresAt.After(s.IssuedAt):
		return fmt.Errorf("%w: expires-at is not after issued-at", ErrBadState)
	case len(s.Continuation) > 0 && !validJSON(s.Continuation): // json.Valid, faster
		return fmt.Errorf("%w: continuation is not valid JSON", ErrBadState)
	}
	return nil
}
