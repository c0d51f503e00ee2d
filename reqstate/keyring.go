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
	"reflect"
	"strconv"
	"strings"
	"time"
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
	// NotBefore and NotAfter bound the key's sealing window: the key
	// seals at an instant t only when NotBefore <= t < NotAfter (a zero
	// time leaves that side open). The window limits sealing, not
	// opening: a key opens tokens from the moment it is in the ring
	// (before NotBefore too, since a node whose clock runs ahead may
	// already seal with it) until NotAfter plus the codec's
	// [Options.OpenGrace], after which it is retired and opens nothing.
	// In a key file they are "not_before" and "not_after", RFC 3339.
	NotBefore, NotAfter time.Time
}

// SealsAt reports whether the key's window is open at t:
// NotBefore <= t < NotAfter, each bound applying only when set.
func (k Key) SealsAt(t time.Time) bool {
	return (k.NotBefore.IsZero() || !t.Before(k.NotBefore)) && (k.NotAfter.IsZero() || t.Before(k.NotAfter))
}

// OpensAt reports whether the key still opens tokens at t, given grace,
// the time a key keeps opening after its NotAfter (the longest token
// lifetime plus leeway): always when NotAfter is unset, otherwise while
// t < NotAfter + grace.
func (k Key) OpensAt(t time.Time, grace time.Duration) bool {
	return k.NotAfter.IsZero() || t.Before(k.NotAfter.Add(grace))
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

// MarshalJSON writes the key id and window only: {"id":"..."}, with
// "not_before" and "not_after" when set.
func (k Key) MarshalJSON() ([]byte, error) { return json.Marshal(k.publicJSON()) }

// publicJSON is the key file entry of k without its secret.
func (k Key) publicJSON() keyJSON {
	return keyJSON{ID: k.ID, NotBefore: formatWindow(k.NotBefore), NotAfter: formatWindow(k.NotAfter)}
}

func formatWindow(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339Nano)
}

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

// KeyRing is an ordered, validated, immutable list of keys. The sealing
// key is the first key, in ring (file) order, whose window is open (see
// [Key.SealsAt] and [KeyRing.SealingKey]); without windows that is always
// the first key, the primary. Open picks the key named by the token's key
// id and never tries the others. A KeyRing is safe for concurrent use.
type KeyRing struct {
	keys     []Key
	aeads    []cipher.AEAD
	index    map[string]int
	windowed bool // some key has a NotBefore or NotAfter
}

// NewKeyRing validates keys and returns a ring whose primary is keys[0].
// It fails on an empty list, a bad or duplicate id, an all-zero secret,
// or a window whose NotAfter is not after its NotBefore.
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
		if !k.NotBefore.IsZero() && !k.NotAfter.IsZero() && !k.NotAfter.After(k.NotBefore) {
			return nil, fmt.Errorf("%w: entry %d (id %q): not_after %s is not after not_before %s", ErrKeyRing, i, k.ID,
				k.NotAfter.Format(time.RFC3339Nano), k.NotBefore.Format(time.RFC3339Nano))
		}
		if !k.NotBefore.IsZero() || !k.NotAfter.IsZero() {
			r.windowed = true
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

// Primary returns the id of the first key in ring order: the key that
// seals when no key has a window. With windows, the key that seals at a
// given instant is [KeyRing.SealingKey]'s.
func (r *KeyRing) Primary() string { return r.keys[0].ID }

// SealingKey returns the id of the key that seals at t: the first key in
// ring order whose window is open at t ([Key.SealsAt]). ok is false when
// no key's window is open; a codec then refuses to seal
// ([ErrNoSealingKey]).
func (r *KeyRing) SealingKey(t time.Time) (id string, ok bool) {
	i := r.sealer(t)
	if i < 0 {
		return "", false
	}
	return r.keys[i].ID, true
}

// Windowed reports whether some key of the ring has a NotBefore or a
// NotAfter.
func (r *KeyRing) Windowed() bool { return r.windowed }

// sealer is the index of the sealing key at t, or -1.
func (r *KeyRing) sealer(t time.Time) int {
	if !r.windowed {
		return 0
	}
	for i, k := range r.keys {
		if k.SealsAt(t) {
			return i
		}
	}
	return -1
}

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

// MarshalJSON writes the key ids and windows only, in the shape of a key
// file without its secrets: {"keys":[{"id":"..."}, ...]}. ParseKeyRing
// refuses it. Key files are written with MarshalSecretJSON.
func (r KeyRing) MarshalJSON() ([]byte, error) {
	out := keyRingJSON{Keys: make([]keyJSON, len(r.keys))}
	for i, k := range r.keys {
		out.Keys[i] = k.publicJSON()
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

// The JSON form of a key ring:
//
//	{"keys":[{"id":"2026-11","secret":"<standard base64 of 32 bytes>"}, ...]}
//
// An entry may add "not_before" and "not_after", RFC 3339 times.
type keyRingJSON struct {
	Keys []keyJSON `json:"keys"`
}

type keyJSON struct {
	ID        string `json:"id"`
	Secret    string `json:"secret,omitempty"`
	NotBefore string `json:"not_before,omitempty"`
	NotAfter  string `json:"not_after,omitempty"`
}

// MarshalSecretJSON returns the JSON form of the ring, secrets included:
// the content of a key file, which ParseKeyRing and LoadKeyRing read. It
// is the one way secrets leave a ring as text; every other encoding of a
// KeyRing or Key redacts them. Write the result only to a private file.
func (r *KeyRing) MarshalSecretJSON() ([]byte, error) {
	out := keyRingJSON{Keys: make([]keyJSON, len(r.keys))}
	for i, k := range r.keys {
		out.Keys[i] = k.publicJSON()
		out.Keys[i].Secret = base64.StdEncoding.EncodeToString(k.Secret[:])
	}
	return json.Marshal(out)
}

// ParseKeyRing reads the JSON form of a key ring. Unknown fields, trailing
// data, a secret that is not standard base64 of exactly 32 bytes, a
// not_before or not_after that is not an RFC 3339 time, and every problem
// NewKeyRing finds are errors that name the entry; none contains key
// bytes.
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
		for _, w := range []struct {
			name, text string
			t          *time.Time
		}{{"not_before", kj.NotBefore, &keys[i].NotBefore}, {"not_after", kj.NotAfter, &keys[i].NotAfter}} {
			if w.text == "" {
				continue
			}
			t, err := time.Parse(time.RFC3339, w.text)
			if err != nil {
				// Not quoted: a misplaced secret must not reach the error.
				return nil, fmt.Errorf("%w: entry %d (id %q): %s is not an RFC 3339 time (like 2026-12-01T00:00:00Z)", ErrKeyRing, i, kj.ID, w.name)
			}
			*w.t = t
		}
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
		if typ.Field == "" {
			return fmt.Sprintf(`a key ring is a JSON object {"keys": [...]}, not %s`, jsonKind(typ.Value))
		}
		return fmt.Sprintf("field %q must be %s, not %s", typ.Field, jsonTypeName(typ.Type), jsonKind(typ.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return strings.TrimPrefix(err.Error(), "json: ")
	default:
		return "malformed JSON"
	}
}

// jsonTypeName names the JSON type that decodes into t, as a reader of
// the file would: never a Go type name.
func jsonTypeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Bool:
		return "true or false"
	}
	return "a number"
}

// jsonKind names a JSON value as the decoder reports it ("array",
// "number 5", "string"): its kind only, never the value.
func jsonKind(v string) string {
	kind, _, _ := strings.Cut(v, " ")
	switch kind {
	case "array", "object":
		return "an " + kind
	case "":
		return "that"
	}
	return "a " + kind
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
