package reqstate

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
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
	// Now is the clock that key windows are judged by. Nil means
	// time.Now. Give it the guard's clock.
	Now func() time.Time
	// OpenGrace is how long a key keeps opening tokens after its
	// NotAfter: set it to the longest TTL the guard issues plus its
	// leeway, so that every token sealed inside the window opens until it
	// expires. Zero means DefaultOpenGrace; negative panics. Keys without
	// a NotAfter open as long as they are in the ring.
	OpenGrace time.Duration
	// SealWarn is the number of seals by one key, counted in this process
	// since it started, at which the codec warns (then again at every
	// further multiple), well before the AES-GCM random-nonce budget of
	// 2^32 seals per key across every node that holds it. With N nodes
	// sealing under the same key, 2^30/N warns when the fleet together
	// has spent about a quarter of the budget. Zero means
	// DefaultSealWarn; negative never warns.
	SealWarn int64
	// OnSealWarn, when set, is called with the key id and its count each
	// time a warning fires (from inside Seal: keep it quick), beside the
	// log line; a metric hooks in here.
	OnSealWarn func(keyID string, seals uint64)
	// Logger receives the seal-count warnings and, at most once a minute,
	// a seal refused because no key's window is open. Never a secret or a
	// token. Nil discards.
	Logger *slog.Logger
}

// DefaultOpenGrace is the default [Options.OpenGrace]: comfortably more
// than mrtr's default TTL of 5 minutes plus leeway.
const DefaultOpenGrace = time.Hour

// DefaultSealWarn is the default [Options.SealWarn]: 2^28 seals by one
// key in one process, a sixteenth of the 2^32 budget, or a quarter of it
// once four nodes have each sealed that much.
const DefaultSealWarn = 1 << 28

// NonceBudget is the number of seals one key may make, across every node
// and restart, for random 96-bit nonces to collide with probability below
// 2^-32 (NIST SP 800-38D, section 8.3).
const NonceBudget = 1 << 32

// AESGCM is the default Codec: AES-256-GCM with a random 96-bit nonce and
// a 128-bit tag, keys chosen from a KeyRing by id. It is safe for
// concurrent use, and its ring can be replaced while it runs
// ([AESGCM.SetKeyRing]): a rotation without restarts.
//
// Seal uses the ring's sealing key at the codec's clock (the first key in
// ring order whose window is open, [KeyRing.SealingKey]) and fails with
// [ErrNoSealingKey] when there is none. Open uses the key the token
// names, while that key opens ([Key.OpensAt] with Options.OpenGrace).
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
	cur    atomic.Pointer[ringState]
	maxLen int
	rand   io.Reader
	now    func() time.Time
	grace  time.Duration
	warn   uint64 // 0: never
	onWarn func(string, uint64)
	log    *slog.Logger

	mu     sync.Mutex // serializes SetKeyRing
	counts map[string]*keyCount
	// lastNoSealer is when a refused seal was last logged (Unix ns).
	lastNoSealer atomic.Int64
}

// ringState is one ring with the seal counters of its keys, in ring order.
type ringState struct {
	ring  *KeyRing
	seals []*atomic.Uint64
}

// keyCount counts the seals of one key id in this process. fp tells a
// key id that comes back with another secret.
type keyCount struct {
	fp [sha256.Size]byte
	n  atomic.Uint64
}

var _ Codec = (*AESGCM)(nil)

// New returns an AES-256-GCM codec over ring. A nil ring, a negative
// MaxTokenLen or a negative OpenGrace is a programmer error and panics.
// opts may be nil.
func New(ring *KeyRing, opts *Options) *AESGCM {
	if ring == nil || len(ring.keys) == 0 {
		panic("reqstate: New needs a key ring")
	}
	c := &AESGCM{maxLen: DefaultMaxTokenLen, rand: rand.Reader, now: time.Now, grace: DefaultOpenGrace,
		warn: DefaultSealWarn, log: slog.New(slog.DiscardHandler), counts: map[string]*keyCount{}}
	if opts != nil {
		if opts.MaxTokenLen < 0 {
			panic("reqstate: negative MaxTokenLen")
		}
		if opts.OpenGrace < 0 {
			panic("reqstate: negative OpenGrace")
		}
		if opts.MaxTokenLen > 0 {
			c.maxLen = opts.MaxTokenLen
		}
		if opts.Rand != nil {
			c.rand = opts.Rand
		}
		if opts.Now != nil {
			c.now = opts.Now
		}
		if opts.OpenGrace > 0 {
			c.grace = opts.OpenGrace
		}
		switch {
		case opts.SealWarn > 0:
			c.warn = uint64(opts.SealWarn)
		case opts.SealWarn < 0:
			c.warn = 0
		}
		c.onWarn = opts.OnSealWarn
		if opts.Logger != nil {
			c.log = opts.Logger
		}
	}
	if err := c.SetKeyRing(ring); err != nil { // unreachable: a fresh codec has no counts
		panic(err)
	}
	return c
}

// KeyRing returns the codec's current key ring.
func (c *AESGCM) KeyRing() *KeyRing { return c.cur.Load().ring }

// SetKeyRing makes ring the codec's key ring, at once and for every later
// Seal and Open; calls already running finish with the ring they started
// with. Tokens sealed under a key id the new ring still holds keep
// opening, so flows in flight survive a rotation. Seal counts carry over
// by key id.
//
// It refuses (with an error wrapping [ErrKeyRing], naming the id only) a
// ring in which a key id this codec has known comes back with another
// secret: one id names one secret for ever, or tokens sealed under the
// old secret would fail and the nonce count would lie. A nil ring panics.
func (c *AESGCM) SetKeyRing(ring *KeyRing) error {
	if ring == nil || len(ring.keys) == 0 {
		panic("reqstate: SetKeyRing needs a key ring")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	fps := make([][sha256.Size]byte, len(ring.keys))
	for i, k := range ring.keys {
		fps[i] = sha256.Sum256(k.Secret[:])
		if kc, ok := c.counts[k.ID]; ok && kc.fp != fps[i] {
			return fmt.Errorf("%w: key id %q already names another secret in this process; give a new secret a new id", ErrKeyRing, k.ID)
		}
	}
	st := &ringState{ring: ring, seals: make([]*atomic.Uint64, len(ring.keys))}
	for i, k := range ring.keys {
		kc, ok := c.counts[k.ID]
		if !ok {
			kc = &keyCount{fp: fps[i]}
			c.counts[k.ID] = kc
		}
		st.seals[i] = &kc.n
	}
	c.cur.Store(st)
	return nil
}

// Seals returns, by key id, how many tokens each key has sealed in this
// process since it started (keys since dropped from the ring included).
// Compare the sum over every node with [NonceBudget].
func (c *AESGCM) Seals() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]uint64, len(c.counts))
	for id, kc := range c.counts {
		out[id] = kc.n.Load()
	}
	return out
}

// Seal encrypts s under the sealing key at the codec's clock, bound to b.
// When s.JTI is zero it is filled with a fresh random ID first. With no
// key's window open it fails with ErrNoSealingKey.
func (c *AESGCM) Seal(b Binding, s *State) (string, error) {
	if err := s.validate(); err != nil {
		return "", err
	}
	st := c.cur.Load()
	ki := 0
	if st.ring.windowed {
		now := c.now()
		if ki = st.ring.sealer(now); ki < 0 {
			return "", c.noSealer(st.ring, now)
		}
	}
	kid := st.ring.keys[ki].ID
	aead := st.ring.aeads[ki]
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
	if n := st.seals[ki].Add(1); c.warn != 0 && n%c.warn == 0 {
		c.sealWarning(kid, n)
	}

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
	// 3. Key id: known to this ring (no trial decryption), not retired.
	ring := c.cur.Load().ring
	i, ok := ring.index[kid]
	if !ok || !ring.keys[i].OpensAt(c.nowIfWindowed(ring), c.grace) {
		return nil, ErrInvalid
	}
	aead := ring.aeads[i]
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

// nowIfWindowed reads the clock only when some key has a window.
func (c *AESGCM) nowIfWindowed(r *KeyRing) time.Time {
	if !r.windowed {
		return time.Time{}
	}
	return c.now()
}

// noSealer is the error of a seal with no key's window open, logged at
// most once a minute.
func (c *AESGCM) noSealer(r *KeyRing, now time.Time) error {
	// The windows go to the log only: the error may reach a client.
	err := fmt.Errorf("%w at %s: every key of the ring is outside its not_before/not_after window", ErrNoSealingKey, now.UTC().Format(time.RFC3339))
	last := c.lastNoSealer.Load()
	if (last == 0 || now.UnixNano()-last >= int64(time.Minute)) && c.lastNoSealer.CompareAndSwap(last, now.UnixNano()) {
		c.log.Error("reqstate: seal refused: no key of the ring may seal now; add a key whose window is open", "now", now.UTC(), "keys", describeWindows(r))
	}
	return err
}

// sealWarning reports a key nearing its nonce budget.
func (c *AESGCM) sealWarning(kid string, n uint64) {
	c.log.Warn("reqstate: key has sealed many tokens in this process; rotate it before every node together reaches the AES-GCM nonce budget",
		"key_id", kid, "seals", n, "budget_all_nodes", uint64(NonceBudget))
	if c.onWarn != nil {
		c.onWarn(kid, n)
	}
}

// describeWindows lists the ring's ids with their windows, never a secret.
func describeWindows(r *KeyRing) string {
	var sb strings.Builder
	for i, k := range r.keys {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(k.ID)
		sb.WriteString(" [")
		sb.WriteString(orDash(formatWindow(k.NotBefore)))
		sb.WriteString(", ")
		sb.WriteString(orDash(formatWindow(k.NotAfter)))
		sb.WriteString(")")
	}
	return sb.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
