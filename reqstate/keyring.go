package reqstate

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
)

// KeySize is the exact length of a secret: AES-256 takes 32 bytes.
const KeySize = 32

// MaxKeyIDLen is the longest key id accepted. Ids travel in clear text in
// every token, so they are short and drawn from [A-Za-z0-9_-].
const MaxKeyIDLen = 32

// Key is one secret of a key ring. Every way of printing or encoding a
// Key redacts the secret and shows only the id: fmt (all verbs, through
// Format), log/slog (LogValue), encoding/json (MarshalJSON), text
// encoders (MarshalText); encoding/gob refuses it. The secret leaves only
// through the Secret field itself, or a ring's [KeyRing.MarshalSecretJSON].
// (fmt cannot call a method on a Key reached through an unexported field
// of another struct; it prints such fields by reflection, secret
// included. Keep keys in exported fields, or behind a pointer, which fmt
// prints as an address.)
type Key struct {
	// ID names the key in every token it seals: 1 to MaxKeyIDLen characters
	// from [A-Za-z0-9_-]. It is public.
	ID string
	// Secret is the AES-256 key.
	Secret [KeySize]byte
}

// String returns the key id and a redacted secret.
func (k Key) String() string { return fmt.Sprintf("reqstate.Key{ID: %q, Secret: <redacted>}", k.ID) }

// GoString is like String, for %#v.
func (k Key) GoString() string { return k.String() }

// Format prints String for every verb (%q quotes it), so that no verb
// (%x, %d, ...) reaches the secret bytes by reflection.
func (k Key) Format(f fmt.State, verb rune) { formatRedacted(f, verb, k.String()) }

// LogValue gives log/slog the key id only.
func (k Key) LogValue() slog.Value { return slog.GroupValue(slog.String("id", k.ID)) }

// MarshalJSON writes the key id only: {"id":"..."}.
func (k Key) MarshalJSON() ([]byte, error) { return json.Marshal(keyJSON{ID: k.ID}) }

// MarshalText writes String: the key id and a redacted secret.
func (k Key) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// GobEncode refuses: a gob stream would carry the secret.
func (k Key) GobEncode() ([]byte, error) { return nil, errNoGob }

var errNoGob = errors.New("reqstate: keys are not gob-encoded; write key rings with KeyRing.MarshalSecretJSON")

func formatRedacted(f fmt.State, verb rune, s string) {
	if verb == 'q' {
		s = strconv.Quote(s)
	}
	io.WriteString(f, s)
}

// GenerateKey returns a fresh key with the given id, its secret read from r
// (nil means crypto/rand.Reader).
func GenerateKey(id string, r io.Reader) (Key, error) {
	if err := checkKeyID(id); err != nil {
		return Key{}, fmt.Errorf("%w: %v", ErrKeyRing, err)
	}
	if r == nil {
		r = rand.Reader
	}
	k := Key{ID: id}
	if _, err := io.ReadFull(r, k.Secret[:]); err != nil {
		return Key{}, fmt.Errorf("generate key %q: %w", id, err)
	}
	return k, nil
}

// KeyRing is an ordered, validated, immutable list of keys. The first key
// (the primary) seals; Open picks the key named by the token's key id and
// never tries the others. A KeyRing is safe for concurrent use.
type KeyRing struct {
	keys  []Key
	aeads []cipher.AEAD
	index map[string]int
}

// NewKeyRing validates keys and returns a ring whose primary is keys[0].
// It fails on an empty list, a bad or duplicate id, or an all-zero secret.
func NewKeyRing(keys ...Key) (*KeyRing, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no keys", ErrKeyRing)
	}
	r := &KeyRing{
		keys:  append([]Key(nil), keys...),
		aeads: make([]cipher.AEAD, len(keys)),
		index: make(map[string]int, len(keys)),
	}
	var zero [KeySize]byte
	for i, k := range r.keys {
		if err := checkKeyID(k.ID); err != nil {
			return nil, fmt.Errorf("%w: entry %d: %v", ErrKeyRing, i, err)
		}
		if j, dup := r.index[k.ID]; dup {
			return nil, fmt.Errorf("%w: entry %d: id %q repeats entry %d", ErrKeyRing, i, k.ID, j)
		}
		if k.Secret == zero {
			return nil, fmt.Errorf("%w: entry %d (id %q): secret is all zero bytes", ErrKeyRing, i, k.ID)
		}
		block, err := aes.NewCipher(k.Secret[:])
		if err != nil { // unreachable with a 32-byte key
			return nil, fmt.Errorf("%w: entry %d (id %q): %v", ErrKeyRing, i, k.ID, err)
		}
		// The standard 12-byte nonce and 16-byte tag.
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d (id %q): %v", ErrKeyRing, i, k.ID, err)
		}
		r.index[k.ID] = i
		r.aeads[i] = aead
	}
	return r, nil
}

// GenerateKeyRing returns a ring holding one fresh key with the given id,
// its secret read from r (nil means crypto/rand.Reader).
func GenerateKeyRing(id string, r io.Reader) (*KeyRing, error) {
	k, err := GenerateKey(id, r)
	if err != nil {
		return nil, err
	}
	return NewKeyRing(k)
}

// Primary returns the id of the key that seals.
func (r *KeyRing) Primary() string { return r.keys[0].ID }

// IDs returns the key ids in ring order, primary first.
func (r *KeyRing) IDs() []string {
	ids := make([]string, len(r.keys))
	for i, k := range r.keys {
		ids[i] = k.ID
	}
	return ids
}

// Keys returns a copy of the keys in ring order. Handle with care: it
// holds the secrets.
func (r *KeyRing) Keys() []Key { return append([]Key(nil), r.keys...) }

// Len returns the number of keys.
func (r *KeyRing) Len() int { return len(r.keys) }

// String lists the key ids; it never shows a secret.
//
// KeyRing's formatting and encoding methods have value receivers, so they
// apply to a KeyRing as well as a *KeyRing: fmt would otherwise print a
// KeyRing value by reflection, secrets and cipher state included.
func (r KeyRing) String() string {
	return "reqstate.KeyRing[" + strings.Join(r.IDs(), " ") + "]"
}

// GoString is like String, for %#v.
func (r KeyRing) GoString() string { return r.String() }

// Format prints String for every verb (%q quotes it).
func (r KeyRing) Format(f fmt.State, verb rune) { formatRedacted(f, verb, r.String()) }

// LogValue gives log/slog the key ids only, primary first.
func (r KeyRing) LogValue() slog.Value {
	if len(r.keys) == 0 {
		return slog.GroupValue()
	}
	return slog.GroupValue(slog.String("primary", r.Primary()), slog.Any("ids", r.IDs()))
}

// MarshalJSON writes the key ids only, in the shape of a key file without
// its secrets: {"keys":[{"id":"..."}, ...]}. ParseKeyRing refuses it. Key
// files are written with MarshalSecretJSON.
func (r KeyRing) MarshalJSON() ([]byte, error) {
	out := keyRingJSON{Keys: make([]keyJSON, len(r.keys))}
	for i, k := range r.keys {
		out.Keys[i] = keyJSON{ID: k.ID}
	}
	return json.Marshal(out)
}

// MarshalText writes String: the key ids.
func (r KeyRing) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// GobEncode refuses: a gob stream would carry the secrets.
func (r KeyRing) GobEncode() ([]byte, error) { return nil, errNoGob }

// WithPrimary returns a new ring with k first and the current keys after
// it: the step that starts a rotation. The receiver is unchanged.
func (r *KeyRing) WithPrimary(k Key) (*KeyRing, error) {
	return NewKeyRing(append([]Key{k}, r.keys...)...)
}

// lookup returns the AEAD for a key id, or nil.
func (r *KeyRing) lookup(id string) cipher.AEAD {
	i, ok := r.index[id]
	if !ok {
		return nil
	}
	return r.aeads[i]
}

// The JSON form of a key ring:
//
//	{"keys":[{"id":"2026-11","secret":"<standard base64 of 32 bytes>"}, ...]}
type keyRingJSON struct {
	Keys []keyJSON `json:"keys"`
}

type keyJSON struct {
	ID     string `json:"id"`
	Secret string `json:"secret,omitempty"`
}

// MarshalSecretJSON returns the JSON form of the ring, secrets included:
// the content of a key file, which ParseKeyRing and LoadKeyRing read. It
// is the one way secrets leave a ring as text; every other encoding of a
// KeyRing or Key redacts them. Write the result only to a private file.
func (r *KeyRing) MarshalSecretJSON() ([]byte, error) {
	out := keyRingJSON{Keys: make([]keyJSON, len(r.keys))}
	for i, k := range r.keys {
		out.Keys[i] = keyJSON{ID: k.ID, Secret: base64.StdEncoding.EncodeToString(k.Secret[:])}
	}
	return json.Marshal(out)
}

// ParseKeyRing reads the JSON form of a key ring. Unknown fields, trailing
// data, a secret that is not standard base64 of exactly 32 bytes, and every
// problem NewKeyRing finds are errors that name the entry; none contains
// key bytes.
func ParseKeyRing(data []byte) (*KeyRing, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var in keyRingJSON
	if err := dec.Decode(&in); err != nil {
		// The decoder's message quotes at most a field name or a JSON type,
		// never a value.
		return nil, fmt.Errorf("%w: %v", ErrKeyRing, jsonProblem(err))
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the key ring object", ErrKeyRing)
	}
	keys := make([]Key, len(in.Keys))
	for i, kj := range in.Keys {
		if err := checkKeyID(kj.ID); err != nil {
			return nil, fmt.Errorf("%w: entry %d: %v", ErrKeyRing, i, err)
		}
		if kj.Secret == "" {
			return nil, fmt.Errorf("%w: entry %d (id %q): no secret (a redacted ring from MarshalJSON? key files are written with MarshalSecretJSON)", ErrKeyRing, i, kj.ID)
		}
		n := base64.StdEncoding.DecodedLen(len(kj.Secret))
		if n > 2*KeySize {
			return nil, fmt.Errorf("%w: entry %d (id %q): secret is far longer than %d bytes", ErrKeyRing, i, kj.ID, KeySize)
		}
		buf := make([]byte, n)
		n, err := base64.StdEncoding.Strict().Decode(buf, []byte(kj.Secret))
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d (id %q): secret is not standard base64", ErrKeyRing, i, kj.ID)
		}
		if n != KeySize {
			return nil, fmt.Errorf("%w: entry %d (id %q): secret is %d bytes, want %d", ErrKeyRing, i, kj.ID, n, KeySize)
		}
		keys[i].ID = kj.ID
		copy(keys[i].Secret[:], buf[:n])
		clear(buf)
	}
	return NewKeyRing(keys...)
}

// jsonProblem turns a decoder error into a description free of input values.
func jsonProblem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case err == io.EOF:
		return "empty input"
	case errors.As(err, &syn):
		return fmt.Sprintf("malformed JSON at offset %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q must be %s, not %s", typ.Field, typ.Type, typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return strings.TrimPrefix(err.Error(), "json: ")
	default:
		return "malformed JSON"
	}
}

// LoadKeyRing reads a key ring in JSON form from a file.
func LoadKeyRing(path string) (*KeyRing, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load key ring: %w", err)
	}
	defer clear(data)
	r, err := ParseKeyRing(data)
	if err != nil {
		return nil, fmt.Errorf("load key ring %s: %w", path, err)
	}
	return r, nil
}

func checkKeyID(id string) error {
	if id == "" {
		return fmt.Errorf("key id is empty")
	}
	if len(id) > MaxKeyIDLen {
		return fmt.Errorf("key id is %d characters, at most %d allowed", len(id), MaxKeyIDLen)
	}
	for i := 0; i < len(id); i++ {
		if !keyIDChar(id[i]) {
			// The id is not quoted: a malformed id may be a misplaced secret.
			return fmt.Errorf("key id has a character outside [A-Za-z0-9_-] at byte %d", i)
		}
	}
	return nil
}

func validKeyID(id string) bool {
	if len(id) == 0 || len(id) > MaxKeyIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !keyIDChar(id[i]) {
			return false
		}
	}
	return true
}

func keyIDChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}
