package reqstate

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
)

// Codec seals a State into an opaque token bound to a Binding, and opens
// it again. Implementations must be safe for concurrent use, must return
// ErrInvalid for every token they cannot authenticate under the given
// binding, and must never panic on any input. A deployment may plug its
// own (a KMS-backed one, say); the default is [AESGCM]. The contract suite
// in this package's tests is the bar an implementation has to clear.
type Codec interface {
	// Seal encrypts s under b and returns the token. It may fill s.JTI.
	Seal(b Binding, s *State) (string, error)
	// Open authenticates token under b and returns its state. It does not
	// judge expiry: see [State.Check].
	Open(b Binding, token string) (*State, error)
}

// DefaultMaxTokenLen is the default cap on a token's length in bytes,
// checked before anything in the token is decoded.
const DefaultMaxTokenLen = 64 << 10

// Version is the token format this package writes, the first byte after
// the "v" of the clear-text prefix.
const Version = 1

const (
	versionPrefix = "v1."
	nonceSize     = 12 // the standard GCM nonce
	tagSize       = 16 // the full GCM tag
	minRawLen     = nonceSize + 1 + fixedPayloadLen + 1 + tagSize
)

// Options configures an AESGCM codec. The zero value is ready to use.
type Options struct {
	// MaxTokenLen caps a token's length in bytes; Open rejects longer
	// tokens before decoding them and Seal refuses to produce them.
	// Zero means DefaultMaxTokenLen. Negative panics.
	MaxTokenLen int
	// Rand is the source of nonces and of JTIs that Seal fills in.
	// Nil means crypto/rand.Reader. Only tests should set it.
	Rand io.Reader
}

// AESGCM is the default Codec: AES-256-GCM with a random 96-bit nonce and
// a 128-bit tag, keys chosen from a KeyRing by id. It is safe for
// concurrent use.
//
// Token format, version 1:
//
//	"v1." kid "." base64url-unpadded(nonce[12] | ciphertext | tag[16])
//
// The kid and the version are in clear text so Open can pick the key
// without trying others; both are covered by the associated data together
// with the Binding (see appendAAD), so changing either fails
// authentication.
//
// Why AES-256-GCM with random nonces: it is in the standard library, fast
// with AES-NI, and FIPS-approved. Its one sharp edge is the nonce: with
// random 96-bit nonces a key must seal fewer than 2^32 tokens to keep the
// collision probability below 2^-32, so rotate keys well before that
// (at 1000 pauses a second, 2^32 is 136 years; at a million, 71 minutes).
type AESGCM struct {
	ring   *KeyRing
	maxLen int
	rand   io.Reader
}

var _ Codec = (*AESGCM)(nil)

// New returns an AES-256-GCM codec over ring. A nil ring or a negative
// MaxTokenLen is a programmer error and panics. opts may be nil.
func New(ring *KeyRing, opts *Options) *AESGCM {
	if ring == nil || len(ring.keys) == 0 {
		panic("reqstate: New needs a key ring")
	}
	c := &AESGCM{ring: ring, maxLen: DefaultMaxTokenLen, rand: rand.Reader}
	if opts != nil {
		if opts.MaxTokenLen < 0 {
			panic("reqstate: negative MaxTokenLen")
		}
		if opts.MaxTokenLen > 0 {
			c.maxLen = opts.MaxTokenLen
		}
		if opts.Rand != nil {
			c.rand = opts.Rand
		}
	}
	return c
}

// KeyRing returns the codec's key ring.
func (c *AESGCM) KeyRing() *KeyRing { return c.ring }

// Seal encrypts s under the primary key, bound to b. When s.JTI is zero it
// is filled with a fresh random ID first.
func (c *AESGCM) Seal(b Binding, s *State) (string, error) {
	if err := s.validate(); err != nil {
		return "", err
	}
	kid := c.ring.keys[0].ID
	aead := c.ring.aeads[0]
	ptLen := s.payloadLen()
	rawLen := nonceSize + ptLen + tagSize
	tokLen := len(versionPrefix) + len(kid) + 1 + base64.RawURLEncoding.EncodedLen(rawLen)
	if tokLen > c.maxLen {
		return "", fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, tokLen, c.maxLen)
	}
	// One buffer holds the nonce, the plaintext encrypted in place, the
	// tag and, after them, the associated data.
	buf := make([]byte, nonceSize, rawLen+aadLen(kid, &b))
	// Randomness is read into buf, never straight into s, so that s does
	// not escape to the heap through the io.Reader interface; jti and
	// nonce come from one read (rawLen leaves room for both).
	if s.JTI.IsZero() {
		rnd := buf[:len(s.JTI)+nonceSize]
		if _, err := io.ReadFull(c.rand, rnd); err != nil {
			return "", fmt.Errorf("reqstate: read random jti and nonce: %w", err)
		}
		copy(s.JTI[:], rnd)
		copy(buf[:nonceSize], rnd[len(s.JTI):])
	} else if _, err := io.ReadFull(c.rand, buf[:nonceSize]); err != nil {
		return "", fmt.Errorf("reqstate: read random nonce: %w", err)
	}
	buf = s.appendPayload(buf)
	aad := appendAAD(buf[rawLen:rawLen], Version, kid, &b)
	raw := aead.Seal(buf[nonceSize:nonceSize], buf[:nonceSize], buf[nonceSize:nonceSize+ptLen], aad)
	raw = buf[:nonceSize+len(raw)]

	var sb strings.Builder
	sb.Grow(tokLen)
	sb.WriteString(versionPrefix)
	sb.WriteString(kid)
	sb.WriteByte('.')
	// Encode through a stack buffer, in whole 3-byte groups, so the token
	// text is built with no allocation besides its own.
	var chunk [chunkEnc]byte
	for len(raw) > 0 {
		m := min(len(raw), chunkRaw)
		base64.RawURLEncoding.Encode(chunk[:], raw[:m])
		sb.Write(chunk[:base64.RawURLEncoding.EncodedLen(m)])
		raw = raw[m:]
	}
	return sb.String(), nil
}

// Base64 is processed in chunks of whole groups (3 bytes <-> 4 characters).
const (
	chunkRaw = 768
	chunkEnc = chunkRaw / 3 * 4
)

// Open authenticates token under b and returns its state. Every failure
// is ErrInvalid. Open never panics, reads nothing past MaxTokenLen, and
// allocates only in proportion to the (capped) token length.
func (c *AESGCM) Open(b Binding, token string) (*State, error) {
	// 1. Length cap, before anything else.
	if len(token) > c.maxLen || len(token) < len(versionPrefix)+2 {
		return nil, ErrInvalid
	}
	// 2. Format: version prefix, key id, body.
	if token[:len(versionPrefix)] != versionPrefix {
		return nil, ErrInvalid
	}
	rest := token[len(versionPrefix):]
	dot := strings.IndexByte(rest, '.')
	if dot <= 0 || dot > MaxKeyIDLen {
		return nil, ErrInvalid
	}
	kid, body := rest[:dot], rest[dot+1:]
	// 3. Key id: known to this ring (no trial decryption).
	aead := c.ring.lookup(kid)
	if aead == nil {
		return nil, ErrInvalid
	}
	rawLen := base64.RawURLEncoding.DecodedLen(len(body))
	if rawLen < minRawLen {
		return nil, ErrInvalid
	}
	buf := make([]byte, rawLen, rawLen+aadLen(kid, &b))
	// Decode through a stack buffer, in whole 4-character groups, so the
	// body is never copied to the heap.
	// Strict decoding rejects non-zero trailing bits, so no two texts
	// decode to the same bytes.
	strict := base64.RawURLEncoding.Strict()
	var chunk [chunkEnc]byte
	n := 0
	for rest := body; len(rest) > 0; {
		m := copy(chunk[:], rest)
		k, err := strict.Decode(buf[n:], chunk[:m])
		if err != nil {
			return nil, ErrInvalid
		}
		n += k
		rest = rest[m:]
	}
	// The decoder skips CR and LF; demanding that the body be exactly the
	// encoding of what was decoded rejects them, so one state has exactly
	// one token text.
	if base64.RawURLEncoding.EncodedLen(n) != len(body) {
		return nil, ErrInvalid
	}
	raw := buf[:n]
	// 4. AEAD open with this request's binding.
	aad := appendAAD(buf[rawLen:rawLen], Version, kid, &b)
	pt, err := aead.Open(raw[nonceSize:nonceSize], raw[:nonceSize], raw[nonceSize:], aad)
	if err != nil {
		return nil, ErrInvalid
	}
	// 5. Payload decode.
	s, ok := decodePayload(pt)
	if !ok {
		return nil, ErrInvalid
	}
	return s, nil
}
