package proxy

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mrtr-go/mrtr/reqstate"
)

// Task ids (the io.modelcontextprotocol/tasks extension, SEP-2663).
//
// An upstream that implements tasks names each task with an id of its own
// and, behind the proxy, sees every caller alike (the proxy does not pass
// the caller's credentials on). The proxy gives the caller, in place of
// that id, a sealed task id: the upstream's id encrypted and authenticated
// under a binding to the caller's principal, the guard's server id and the
// upstream. A tasks/get, tasks/update or tasks/cancel must name a sealed
// id that opens under the caller's own binding, or it never reaches the
// upstream.
//
// # Format, version 1
//
//	"t1." kid "." base64url-unpadded(siv[12] | ciphertext | tag[16])
//
// kid names the key ring entry whose secret the two subkeys below come
// from (no trial decryption: open uses that key or none).
//
// # Construction: deterministic authenticated encryption (a synthetic IV)
//
// The id the caller sees must be the same string in the CreateTaskResult,
// in every tasks/get result and in every message naming the task: a client
// matches them, and the extension's routing header (Mcp-Name) must be
// stable. A fresh random seal per message would give a new string each
// time, so the seal is deterministic, as SIV (RFC 5297) is. Go's standard
// library has neither AES-SIV nor AES-GCM-SIV, so this is Rogaway and
// Shrimpton's SIV composition over primitives it has: a PRF of the
// associated data and the plaintext (HMAC-SHA256) chooses the nonce of a
// nonce-based AEAD (AES-256-GCM), and is carried in clear as that nonce:
//
//	kSIV = HKDF-SHA256(secret, info "mrtr proxy task id v1: synthetic iv")
//	kEnc = HKDF-SHA256(secret, info "mrtr proxy task id v1: encryption")
//	ad   = "mrtr task id" | version | kid | server id | upstream | principal
//	       (each field length-prefixed, so no two bindings encode alike)
//	siv  = HMAC-SHA256(kSIV, len(ad) | ad | upstream id)[:12]
//	body = AES-256-GCM-Seal(kEnc, nonce siv, upstream id, ad)
//
// Why it is safe:
//
//   - Secrecy and integrity are AES-GCM's under kEnc, provided a nonce is
//     never used for two different plaintexts. The nonce is a PRF (HMAC)
//     of everything the ciphertext depends on, so the same (binding, id)
//     gives the same nonce and the same bytes, which is the point, and
//     two different inputs share a nonce only if 96-bit HMAC outputs
//     collide: about n^2/2^97 after n distinct task ids under one key (2^-33
//     at 2^32 ids). Rotate keys long before 2^32 tasks. What the
//     determinism reveals is only that two ids are equal, which the
//     caller knows anyway.
//   - The subkeys are derived with HKDF under labels of their own, so they
//     are independent of each other and of the ring secret that
//     reqstate's AES-GCM uses directly for requestState tokens: a task id
//     nonce can never collide with a requestState token's random nonce
//     under the same AES key, and neither kind of token opens as the other.
//   - Open checks, after GCM has authenticated the body, that the nonce is
//     the synthetic IV of what it decrypted (constant time): every id that
//     opens is byte for byte one this construction sealed (the fuzz target
//     checks it), so there is one text per (binding, upstream id).
//   - The binding is authenticated, not stored: an id opened by another
//     principal, under another server id, or in front of another upstream
//     fails GCM's tag, like a forged one, and all of them are the same
//     unknown task.
//
// A task id carries no expiry of its own: the task's life is the
// upstream's (its ttlMs may be null or change). It opens for as long as
// its key is in the ring, whatever that key's sealing window: keep a
// retired key in the ring as long as the longest task may live. It never
// enters the single-use store: it names a task, and is used as often as
// the task is polled.

// Limits of task ids.
const (
	// MaxUpstreamTaskID is the longest upstream task id the proxy seals:
	// a CreateTaskResult naming a longer one is answered with -32603.
	MaxUpstreamTaskID = 256
	// MaxTaskIDLen is the longest sealed task id; a longer one is refused
	// before any decoding or cryptography. It is the sealed length of an
	// upstream id of MaxUpstreamTaskID bytes under the longest key id.
	MaxTaskIDLen = len(taskIDPrefix) + reqstate.MaxKeyIDLen + 1 + maxTaskBody
)

// maxTaskBody is the unpadded base64 length of the longest body.
const maxTaskBody = ((sivSize+MaxUpstreamTaskID+tagSize)*4 + 2) / 3

const (
	taskIDPrefix = "t1."
	taskIDVer    = 1
	sivSize      = 12 // the standard GCM nonce
	tagSize      = 16
	taskIDDomain = "mrtr task id"
)

// errTaskID is every reason an id does not open, or cannot be sealed: one
// error, so nothing tells a forger why.
var errTaskID = errors.New("proxy: not a task id of this caller")

// errNoTaskKeys: the proxy has no key ring to seal task ids with (a Guard
// over a codec that is not reqstate's AES-GCM, and no Options.TaskRing).
var errNoTaskKeys = errors.New("proxy: no key ring to seal task ids with (set Options.TaskRing)")

// taskSealer seals and opens task ids. It is safe for concurrent use; its
// ring is read on every use, so a ring replaced in the codec
// (reqstate.AESGCM.SetKeyRing) takes effect at once, derived keys cached
// per ring.
type taskSealer struct {
	ring     func() *reqstate.KeyRing // nil: no ring, every seal and open fails
	now      func() time.Time
	server   string
	upstream string

	cur atomic.Pointer[taskKeys]
}

// taskKeys are the subkeys of one ring.
type taskKeys struct {
	ring *reqstate.KeyRing
	byID map[string]*taskKey
}

type taskKey struct {
	id   string
	aead cipher.AEAD
	// scratch pools *taskScratch, each with an HMAC-SHA256 state keyed
	// with kSIV.
	scratch sync.Pool
}

// HKDF info labels of the two subkeys.
const (
	infoSIV = "mrtr proxy task id v1: synthetic iv"
	infoEnc = "mrtr proxy task id v1: encryption"
)

func newTaskKey(k reqstate.Key) (*taskKey, error) {
	siv, err := hkdf.Key(sha256.New, k.Secret[:], nil, infoSIV, 32)
	if err != nil {
		return nil, err
	}
	enc, err := hkdf.Key(sha256.New, k.Secret[:], nil, infoEnc, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(enc)
	clear(enc)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	tk := &taskKey{id: k.ID, aead: aead}
	tk.scratch.New = func() any { return &taskScratch{mac: hmac.New(sha256.New, siv)} }
	return tk, nil
}

// keys returns the subkeys of the current ring, deriving them once per
// ring.
func (s *taskSealer) keys() (*taskKeys, error) {
	if s.ring == nil {
		return nil, errNoTaskKeys
	}
	ring := s.ring()
	if ring == nil {
		return nil, errNoTaskKeys
	}
	if c := s.cur.Load(); c != nil && c.ring == ring {
		return c, nil
	}
	ks := ring.Keys()
	defer func() {
		for i := range ks {
			clear(ks[i].Secret[:])
		}
	}()
	c := &taskKeys{ring: ring, byID: make(map[string]*taskKey, len(ks))}
	for _, k := range ks {
		tk, err := newTaskKey(k)
		if err != nil {
			return nil, err
		}
		c.byID[k.ID] = tk
	}
	s.cur.Store(c)
	return c, nil
}

// appendAD appends the associated data of a task id under kid for who.
func (s *taskSealer) appendAD(dst []byte, kid string, who reqstate.Principal) []byte {
	dst = append(dst, taskIDDomain...)
	dst = append(dst, taskIDVer)
	dst = appendLP(dst, kid)
	dst = appendLP(dst, s.server)
	dst = appendLP(dst, s.upstream)
	if who.Anonymous() {
		dst = append(dst, 0)
	} else {
		dst = append(dst, 1)
	}
	dst = appendLP(dst, who.Issuer)
	return appendLP(dst, who.Subject)
}

func appendLP(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// taskScratch is what one seal or open works in, pooled per key: the
// HMAC state, its sum, and room for an id's raw bytes and its associated
// data (a longer binding grows past it, by append).
type taskScratch struct {
	mac hash.Hash
	sum [sha256.Size]byte
	buf [512]byte
}

// siv computes the synthetic IV of (ad, pt) into dst[:sivSize].
func (sc *taskScratch) siv(dst, ad, pt []byte) {
	sc.mac.Reset()
	var n [binary.MaxVarintLen64]byte
	sc.mac.Write(n[:binary.PutUvarint(n[:], uint64(len(ad)))])
	sc.mac.Write(ad)
	sc.mac.Write(pt)
	copy(dst[:sivSize], sc.mac.Sum(sc.sum[:0]))
}

// seal returns the task id the caller who sees for the upstream's id,
// under the ring's sealing key now.
func (s *taskSealer) seal(who reqstate.Principal, id string) (string, error) {
	if len(id) == 0 || len(id) > MaxUpstreamTaskID {
		return "", errTaskID
	}
	c, err := s.keys()
	if err != nil {
		return "", err
	}
	kid, ok := c.ring.SealingKey(s.now())
	if !ok {
		return "", reqstate.ErrNoSealingKey
	}
	k := c.byID[kid]
	sc := k.scratch.Get().(*taskScratch)
	defer k.scratch.Put(sc)
	// siv | id, then the associated data; the id is encrypted in place.
	raw := sc.buf[:sivSize]
	pt := append(sc.buf[sivSize:sivSize], id...)
	ad := s.appendAD(sc.buf[sivSize+len(id)+tagSize:sivSize+len(id)+tagSize], kid, who)
	sc.siv(raw, ad, pt)
	raw = sc.buf[:sivSize+len(k.aead.Seal(pt[:0], raw, pt, ad))]
	var sb strings.Builder
	sb.Grow(len(taskIDPrefix) + len(kid) + 1 + base64.RawURLEncoding.EncodedLen(len(raw)))
	sb.WriteString(taskIDPrefix)
	sb.WriteString(kid)
	sb.WriteByte('.')
	var enc [maxTaskBody]byte
	base64.RawURLEncoding.Encode(enc[:], raw)
	sb.Write(enc[:base64.RawURLEncoding.EncodedLen(len(raw))])
	return sb.String(), nil
}

// open returns the upstream's id that tid, a task id the caller who sent,
// names. Every failure is errTaskID (or errNoTaskKeys); the length is
// checked before anything is decoded.
func (s *taskSealer) open(who reqstate.Principal, tid string) (string, error) {
	if len(tid) > MaxTaskIDLen || len(tid) < len(taskIDPrefix)+2 || tid[:len(taskIDPrefix)] != taskIDPrefix {
		return "", errTaskID
	}
	rest := tid[len(taskIDPrefix):]
	dot := strings.IndexByte(rest, '.')
	if dot <= 0 || dot > reqstate.MaxKeyIDLen {
		return "", errTaskID
	}
	kid, body := rest[:dot], rest[dot+1:]
	c, err := s.keys()
	if err != nil {
		return "", err
	}
	k, ok := c.byID[kid]
	if !ok {
		return "", errTaskID
	}
	sc := k.scratch.Get().(*taskScratch)
	defer k.scratch.Put(sc)
	buf := sc.buf[:]
	n, err := base64.RawURLEncoding.Strict().Decode(buf, []byte(body))
	// Strict decoding refuses stray bits; a body that is not exactly the
	// encoding of what it decoded to (CR or LF inside) is refused too, so
	// one id has one text.
	if err != nil || n < sivSize+1+tagSize || base64.RawURLEncoding.EncodedLen(n) != len(body) {
		return "", errTaskID
	}
	raw := buf[:n]
	ad := s.appendAD(buf[n:n], kid, who)
	pt, err := k.aead.Open(raw[sivSize:sivSize], raw[:sivSize], raw[sivSize:], ad)
	if err != nil {
		return "", errTaskID
	}
	var want [sivSize]byte
	sc.siv(want[:], ad, pt)
	if subtle.ConstantTimeCompare(want[:], raw[:sivSize]) != 1 {
		return "", errTaskID
	}
	return string(pt), nil
}
