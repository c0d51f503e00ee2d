package audit

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mrtr-go/mrtr/reqstate"
)

// Why Ed25519: the auditor must hold no secret (a key that checks a
// checkpoint must not be able to make one), so checkpoints are signed,
// not MACed; Ed25519 is in the standard library, deterministic (no
// nonce to get wrong at an epoch change) and its keys are 32 bytes, so
// a key file and a certification stay one short line each.
//
// Why a chain of certifications and not a forward-secure signature
// scheme (journald's FSPRG): none is in the standard library, and a
// chain of plain signatures, each epoch's key signing the next one's
// public key before it is erased, gives the same property (a key of
// epoch k cannot sign for an epoch before k) at the cost of one
// certification per epoch in the key file and in the trail.

// PublicKey is an Ed25519 public key that checks checkpoints: the key of
// a FILE.pub (epoch 0 of a node key) or of a ring-derived key.
type PublicKey [ed25519.PublicKeySize]byte

// pubPrefix introduces a public key in its text form.
const pubPrefix = "ed25519:"

// String returns the key's text form: "ed25519:" and its base64url, the
// line of a FILE.pub.
func (p PublicKey) String() string { return pubPrefix + base64.RawURLEncoding.EncodeToString(p[:]) }

// MarshalText implements encoding.TextMarshaler (String).
func (p PublicKey) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler (ParsePublicKey).
func (p *PublicKey) UnmarshalText(b []byte) error {
	k, err := ParsePublicKey(string(b))
	if err != nil {
		return err
	}
	*p = k
	return nil
}

// ErrPublicKey is the error of ParsePublicKey and ReadPublicKey for text
// that is not a public key.
var ErrPublicKey = errors.New("audit: not an audit public key (ed25519:BASE64URL)")

// ParsePublicKey parses the text form of a public key (String), with
// surrounding white space.
func ParsePublicKey(s string) (PublicKey, error) {
	s = strings.TrimSpace(s)
	var p PublicKey
	b, ok := strings.CutPrefix(s, pubPrefix)
	if !ok || len(b) != 43 {
		return p, ErrPublicKey
	}
	n, err := base64.RawURLEncoding.Decode(p[:], []byte(b))
	if err != nil || n != len(p) {
		return PublicKey{}, ErrPublicKey
	}
	return p, nil
}

// ReadPublicKey reads a FILE.pub.
func ReadPublicKey(path string) (PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return PublicKey{}, fmt.Errorf("read audit public key: %w", err)
	}
	if len(b) > 1024 {
		return PublicKey{}, fmt.Errorf("read audit public key %s: %w", path, ErrPublicKey)
	}
	p, err := ParsePublicKey(string(b))
	if err != nil {
		return PublicKey{}, fmt.Errorf("read audit public key %s: %w", path, err)
	}
	return p, nil
}

// KeyMode is how a Signer's key came and what it gives: say it at start
// (String, GivesUp).
type KeyMode int

// The key modes, strongest first.
const (
	// KeyEvolving: a per-node key file the Signer can rewrite; the key
	// evolves one way every epoch (forward security).
	KeyEvolving KeyMode = iota + 1
	// KeyStatic: a per-node key file the Signer cannot rewrite (a
	// Secret, LoadCredential=, a read-only mount): the key never evolves.
	KeyStatic
	// KeyRingDerived: no key file; the key is derived from a ring key.
	KeyRingDerived
)

// String names the mode: "evolving", "static" or "ring-derived".
func (m KeyMode) String() string {
	switch m {
	case KeyEvolving:
		return "evolving"
	case KeyStatic:
		return "static"
	case KeyRingDerived:
		return "ring-derived"
	}
	return "unknown"
}

// GivesUp says in one sentence what the mode gives up, for the start log.
func (m KeyMode) GivesUp() string {
	switch m {
	case KeyEvolving:
		return "a node compromised now can still rewrite what no shipped checkpoint seals yet (at most one checkpoint interval) and forge the future, but not what an earlier epoch's checkpoint sealed"
	case KeyStatic:
		return "the key file cannot be rewritten, so the key never evolves: whoever takes the node, or a copy of the key, can re-sign the whole trail; only checkpoints already shipped off the host (the log) still catch a rewrite"
	case KeyRingDerived:
		return "every holder of the key ring can sign any node's trail and there is no forward security; pin the public key out of band (mrtr audit pubkey), and ship the checkpoints off the host"
	}
	return ""
}

// The domain labels of what is hashed or signed. Each is fixed: a change
// makes every trail written so far fail to verify.
const (
	ringSignLabel = "mrtr.audit/v2 checkpoint signing key"
	evolveLabel   = "mrtr.audit/v2 evolve\x00"
	certLabel     = "mrtr.audit/v2 epoch\x00"
	keyFileSchema = "mrtr.audit.key/v1"
)

// Cert certifies the public key of an epoch: signed by the key of the
// epoch before it, over certLabel, the epoch (8 bytes, big endian), the
// public key, since (Unix nanoseconds, 8 bytes: when the epoch began,
// before which no line or checkpoint under this key can lie) and seq
// (8 bytes): the sequence of the checkpoint that carries it as Next, so
// that a restart that lost that checkpoint can carry it in its place
// and nowhere else.
type Cert struct {
	Epoch uint64    `json:"epoch"`
	Pub   PublicKey `json:"pub"`
	Since time.Time `json:"since"`
	Seq   uint64    `json:"seq"`
	Sig   Signature `json:"sig"`
}

// Signature is an Ed25519 signature, base64url in JSON.
type Signature [ed25519.SignatureSize]byte

// MarshalText implements encoding.TextMarshaler: base64url.
func (s Signature) MarshalText() ([]byte, error) {
	return base64.RawURLEncoding.AppendEncode(nil, s[:]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler: 86 base64url
// characters.
func (s *Signature) UnmarshalText(b []byte) error {
	if len(b) != 86 {
		return ErrMalformed
	}
	n, err := base64.RawURLEncoding.Decode(s[:], b)
	if err != nil || n != len(s) {
		return ErrMalformed
	}
	return nil
}

func (c *Cert) message() []byte {
	b := make([]byte, 0, len(certLabel)+8+32+8+8)
	b = append(b, certLabel...)
	b = be64(b, c.Epoch)
	b = append(b, c.Pub[:]...)
	b = be64(b, uint64(c.Since.UnixNano()))
	return be64(b, c.Seq)
}

// checkBy reports whether c is signed by pub.
func (c *Cert) checkBy(pub PublicKey) bool {
	return ed25519.Verify(pub[:], c.message(), c.Sig[:])
}

func be64(b []byte, v uint64) []byte {
	return append(b, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// keyFile is the JSON of a node key file.
type keyFile struct {
	Schema string    `json:"schema"`
	Pub    PublicKey `json:"pub"` // FILE.pub's key: epoch 0
	Epoch  uint64    `json:"epoch"`
	Seed   string    `json:"seed"` // base64url of the current epoch's Ed25519 seed
	Certs  []Cert    `json:"certs,omitempty"`
}

// ErrKeyFile is the error of LoadSigner for a file that is not a node
// key file, or whose certifications do not lead from its public key to
// its current key. It never quotes the file.
var ErrKeyFile = errors.New("audit: not a valid audit key file")

// GenerateKeyFile writes a new Ed25519 node key to path (mode 0600; it
// must not exist) and its public key to path+".pub" (mode 0644), and
// returns the public key. rand nil means crypto/rand.Reader.
func GenerateKeyFile(path string, rand io.Reader) (PublicKey, error) {
	seed := make([]byte, ed25519.SeedSize)
	if rand == nil {
		rand = cryptoRand
	}
	if _, err := io.ReadFull(rand, seed); err != nil {
		return PublicKey{}, fmt.Errorf("generate audit key: %w", err)
	}
	defer clear(seed)
	var pub PublicKey
	copy(pub[:], ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey))
	b := encodeKeyFile(&keyFile{Schema: keyFileSchema, Pub: pub, Seed: base64.RawURLEncoding.EncodeToString(seed)})
	defer clear(b)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return PublicKey{}, fmt.Errorf("write audit key: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return PublicKey{}, fmt.Errorf("write audit key: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return PublicKey{}, fmt.Errorf("write audit key: %w", err)
	}
	if err := f.Close(); err != nil {
		return PublicKey{}, fmt.Errorf("write audit key: %w", err)
	}
	if err := os.WriteFile(path+".pub", []byte(pub.String()+"\n"), 0o644); err != nil {
		return PublicKey{}, fmt.Errorf("write audit public key: %w", err)
	}
	return pub, nil
}

func encodeKeyFile(k *keyFile) []byte {
	b, err := json.Marshal(k)
	if err != nil {
		panic("audit: encode key file: " + err.Error()) // only fixed types
	}
	return append(b, '\n')
}

// Signer signs the checkpoints of one Writer (Options.Signer): a node key
// file (LoadSigner), evolving or static, or a key derived from a ring key
// (RingSigner). A Signer is used by one Writer at a time; its methods are
// safe for concurrent use.
type Signer struct {
	mode KeyMode
	pub0 PublicKey         // epoch 0's public key (FILE.pub)
	path string            // the key file; "" for a ring-derived key
	ring *reqstate.KeyRing // a ring-derived key's ring: its other keys certify this one after a rotation

	mu    sync.Mutex
	epoch uint64
	seed  []byte // the current epoch's seed
	priv  ed25519.PrivateKey
	pub   PublicKey
	since time.Time // when the current epoch began (zero for epoch 0)
	certs []Cert    // epoch 1 to epoch, each signed by the one before
	why   string    // why a key file does not evolve
}

// Mode returns how the key came: KeyEvolving, KeyStatic or KeyRingDerived.
func (s *Signer) Mode() KeyMode { m, _ := s.modeWhy(); return m }

// WhyStatic says, for a key file that does not evolve (KeyStatic), why
// (the error of trying to write beside it); "" otherwise.
func (s *Signer) WhyStatic() string { _, why := s.modeWhy(); return why }

// modeWhy returns the mode and why it is static; a failed evolution
// changes both.
func (s *Signer) modeWhy() (KeyMode, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mode, s.why
}

// PublicKey returns the key an auditor checks the trail with: FILE.pub's
// (epoch 0), whatever epoch the key has reached.
func (s *Signer) PublicKey() PublicKey { return s.pub0 }

// Epoch returns the current epoch (0 for a fresh key file and for a
// ring-derived key).
func (s *Signer) Epoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

// LoadSigner reads the node key file at path (GenerateKeyFile). It
// evolves (KeyEvolving) when a file can be created in its directory, to
// replace it; otherwise it signs without evolving (KeyStatic; WhyStatic
// says why).
func LoadSigner(path string) (*Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read audit key: %w", err)
	}
	defer clear(b)
	var k keyFile
	if len(b) > 16<<20 || json.Unmarshal(b, &k) != nil || k.Schema != keyFileSchema {
		return nil, fmt.Errorf("read audit key %s: %w", path, ErrKeyFile)
	}
	seed, err := base64.RawURLEncoding.DecodeString(k.Seed)
	if err != nil || len(seed) != ed25519.SeedSize || uint64(len(k.Certs)) != k.Epoch {
		return nil, fmt.Errorf("read audit key %s: %w", path, ErrKeyFile)
	}
	s := &Signer{mode: KeyEvolving, pub0: k.Pub, path: path, epoch: k.Epoch, certs: k.Certs}
	s.setSeed(seed)
	// The certifications must lead from FILE.pub's key to this seed's.
	cur := k.Pub
	for i := range k.Certs {
		c := &k.Certs[i]
		if c.Epoch != uint64(i+1) || !c.checkBy(cur) || (i > 0 && c.Since.Before(k.Certs[i-1].Since)) {
			return nil, fmt.Errorf("read audit key %s: %w", path, ErrKeyFile)
		}
		cur = c.Pub
	}
	if cur != s.pub {
		return nil, fmt.Errorf("read audit key %s: %w", path, ErrKeyFile)
	}
	if len(k.Certs) > 0 {
		s.since = k.Certs[len(k.Certs)-1].Since
	}
	if err := probeWritable(filepath.Dir(path)); err != nil {
		s.mode, s.why = KeyStatic, err.Error()
	}
	return s, nil
}

// probeWritable reports whether a file can be created (and removed) in
// dir: what replacing the key file needs.
func probeWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".mrtr-audit-key-probe-*")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// RingSigner returns a Signer whose key is derived from the secret of the
// ring key kid ("" for the ring's primary): HKDF-SHA256 with its own
// label, so it is neither the key that seals tokens nor the trail's MAC
// key, and every node sharing the ring derives the same one. It never
// evolves (KeyRingDerived). After a ring rotation (another kid), a
// Writer that goes on with a trail whose last checkpoint the key of a
// kid still in ring signed has that key certify the new one in its
// restart checkpoint, so the trail still verifies with the public key
// pinned at its start; keep the old key in the ring until every node
// restarted once.
func RingSigner(ring *reqstate.KeyRing, kid string) (*Signer, error) {
	seed, err := ringSeed(ring, kid)
	if err != nil {
		return nil, err
	}
	s := &Signer{mode: KeyRingDerived, ring: ring}
	s.setSeed(seed)
	s.pub0 = s.pub
	return s, nil
}

// RingPublicKey returns the public key of RingSigner(ring, kid): what
// mrtr audit pubkey prints.
func RingPublicKey(ring *reqstate.KeyRing, kid string) (PublicKey, error) {
	s, err := RingSigner(ring, kid)
	if err != nil {
		return PublicKey{}, err
	}
	s.erase()
	return s.pub0, nil
}

func ringSeed(ring *reqstate.KeyRing, kid string) ([]byte, error) {
	if ring == nil {
		return nil, errNoKey
	}
	if kid == "" {
		kid = ring.Primary()
	}
	for _, k := range ring.Keys() {
		if k.ID == kid {
			seed, err := hkdf.Key(sha256.New, k.Secret[:], nil, ringSignLabel, ed25519.SeedSize)
			if err != nil {
				panic("audit: hkdf: " + err.Error())
			}
			return seed, nil
		}
	}
	return nil, fmt.Errorf("audit: the key ring has no key %q", kid)
}

// setSeed makes seed the current key. Called with s.mu held or before s
// is shared.
func (s *Signer) setSeed(seed []byte) {
	s.seed = seed
	s.priv = ed25519.NewKeyFromSeed(seed)
	copy(s.pub[:], s.priv.Public().(ed25519.PublicKey))
}

// erase zeroes the current seed and private key (best effort: see
// evolve).
func (s *Signer) erase() {
	clear(s.seed)
	clear(s.priv)
}

// signWith signs msg with s's current key. Called with s.mu held.
func signWith(s *Signer, msg []byte) []byte { return ed25519.Sign(s.priv, msg) }

// state returns the current epoch, when it began and its certifications.
func (s *Signer) state() (epoch uint64, since time.Time, certs []Cert) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch, s.since, s.certs
}

// evolution is a prepared step to the next epoch: the key file already
// holds it; the Writer certifies it in a checkpoint, then switches.
type evolution struct {
	cert Cert
	seed []byte
}

// prepare derives the next epoch's key (next seed = SHA-256(evolveLabel ||
// seed): one way, so the next key says nothing of this one), certifies
// its public key under the current key with since at, and replaces the
// key file with it (write a temporary file, fsync, rename, fsync the
// directory): from then on, a crash restarts in the next epoch, and the
// restart checkpoint carries the certification the trail may lack. A
// key file that cannot be replaced turns the Signer static, and the
// error says why.
//
// Called without the Writer's lock: the fsyncs take milliseconds, and
// no call waits for them.
func (s *Signer) prepare(at time.Time, seq uint64) (*evolution, error) {
	s.mu.Lock()
	if s.mode != KeyEvolving {
		s.mu.Unlock()
		return nil, nil
	}
	h := sha256.New()
	h.Write([]byte(evolveLabel))
	h.Write(s.seed)
	next := h.Sum(nil)
	c := Cert{Epoch: s.epoch + 1, Since: at.UTC(), Seq: seq}
	copy(c.Pub[:], ed25519.NewKeyFromSeed(next).Public().(ed25519.PublicKey))
	copy(c.Sig[:], ed25519.Sign(s.priv, c.message()))
	certs := append(append([]Cert(nil), s.certs...), c)
	b := encodeKeyFile(&keyFile{Schema: keyFileSchema, Pub: s.pub0, Epoch: c.Epoch,
		Seed: base64.RawURLEncoding.EncodeToString(next), Certs: certs})
	defer clear(b)
	// The file is written without s.mu (its fsyncs take milliseconds):
	// only the Writer's checkpoint goroutine, which called this, changes
	// the key (commit), and Mode must not wait for a disk.
	s.mu.Unlock()
	if err := replaceFile(s.path, b); err != nil {
		clear(next)
		s.mu.Lock()
		s.mode, s.why = KeyStatic, err.Error()
		s.mu.Unlock()
		return nil, fmt.Errorf("audit key %s not evolved, signing on without evolving: %w", s.path, err)
	}
	return &evolution{cert: c, seed: next}, nil
}

// commit switches to the prepared epoch and erases the key of the one
// before. Erasing is best effort: Go may have copied the seed (the
// garbage collector moves nothing today, but a stack copy or a swapped
// page may hold it), and the disk may keep the old key file's blocks
// (journaling, copy-on-write file systems, SSD wear levelling, backups
// and snapshots). What forward security rests on is that no copy of the
// old key survives in a place an attacker reaches: keep the key file out
// of backups and snapshots.
func (s *Signer) commit(e *evolution) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.erase()
	s.setSeed(e.seed)
	s.epoch, s.since = e.cert.Epoch, e.cert.Since
	s.certs = append(s.certs, e.cert)
}

// replaceFile replaces path with b atomically: a temporary file in the
// same directory (mode 0600), written, fsynced, renamed over path, and
// the directory fsynced so the rename survives a crash.
func replaceFile(path string, b []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			os.Remove(tmp)
		}
	}()
	write := func() error { _, err := f.Write(b); return err }
	for _, step := range []func() error{func() error { return f.Chmod(0o600) }, write, f.Sync} {
		if err := step(); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}

// certsSince returns the certifications of the epochs after epoch: what
// a checkpoint needs to carry to lead a verifier from a checkpoint
// signed in epoch to the current key.
func (s *Signer) certsSince(epoch uint64) []Cert {
	s.mu.Lock()
	defer s.mu.Unlock()
	if epoch >= uint64(len(s.certs)) {
		return nil
	}
	return append([]Cert(nil), s.certs[epoch:]...)
}

var cryptoRand = rand.Reader
