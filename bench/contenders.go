// Package bench compares the cost of sealing and opening a request state
// with reqstate against the bare AEAD floor and two popular libraries
// (go-jose JWE and gorilla/securecookie). It is a separate module so the
// library's go.mod carries none of these dependencies.
//
// Every contender carries the same information: the typed continuation,
// the same metadata (round, issued-at, expires-at, jti, flow id, arguments
// hash, asked keys) and the same binding (method, protocol version,
// target, server id, principal), checked on open, and each decodes back
// into the Go types. Only the floor is bare: AES-256-GCM and base64url of
// the pre-marshaled continuation bytes, nothing else.
//
// Run: go test -run '^$' -bench SealOpen -count 5 (see docs/BENCHMARKS.md).
package bench

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/gorilla/securecookie"
	sjson "github.com/segmentio/encoding/json"

	"github.com/mrtr-go/mrtr/reqstate"
)

// Deploy is the typed continuation of the benchmark: what a deployment
// tool remembers between its first call and the retry that carries the
// user's answers. Its JSON form is about 300 bytes.
type Deploy struct {
	Step         string   `json:"step"`
	Service      string   `json:"service"`
	Environment  string   `json:"environment"`
	Image        string   `json:"image"`
	Replicas     int      `json:"replicas"`
	Regions      []string `json:"regions"`
	RequestedBy  string   `json:"requestedBy"`
	ChangeTicket string   `json:"changeTicket"`
	Checks       []Check  `json:"checks"`
}

// Check is one pre-flight check the tool already ran.
type Check struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
}

// Meta is the metadata every contender seals beside the continuation.
// In a Fixture the times and the JTI are unset: each seal stamps its own.
type Meta struct {
	Round               int
	IssuedAt, ExpiresAt time.Time // millisecond precision, UTC
	JTI, FlowID         reqstate.ID
	ArgsHash            reqstate.Hash
	Asked               []string
}

// Fixture is one realistic state: the continuation (typed and, for the
// floor, pre-marshaled), its metadata and the call it is bound to.
type Fixture struct {
	Cont     Deploy
	ContJSON []byte
	Meta     Meta
	Binding  reqstate.Binding
}

// NewFixture returns the state every contender seals. JTI is left zero:
// each contender draws a fresh one per seal.
func NewFixture() *Fixture {
	f := &Fixture{
		Cont: Deploy{
			Step:         "confirm",
			Service:      "payments-api",
			Environment:  "production",
			Image:        "ghcr.io/acme/payments-api:2026.11.3",
			Replicas:     6,
			Regions:      []string{"eu-west-1", "eu-central-1"},
			RequestedBy:  "alice@example.com",
			ChangeTicket: "CHG-2026-0042",
			Checks:       []Check{{Name: "migrations", Passed: true}, {Name: "canary", Passed: true}},
		},
		Binding: reqstate.Binding{
			Method:          "tools/call",
			ProtocolVersion: "2026-07-28",
			Target:          "deploy",
			ServerID:        "api-1",
			Principal:       reqstate.Principal{Issuer: "https://id.example.com", Subject: "alice"},
		},
	}
	var err error
	if f.ContJSON, err = json.Marshal(&f.Cont); err != nil {
		panic(err)
	}
	if f.Meta.FlowID, err = reqstate.NewID(nil); err != nil {
		panic(err)
	}
	if f.Meta.ArgsHash, err = reqstate.HashArguments([]byte(`{"service":"payments-api","environment":"production","replicas":6}`)); err != nil {
		panic(err)
	}
	f.Meta.Round = 1
	f.Meta.Asked = []string{"confirm", "changeTicket"}
	return f
}

// TTL is the lifetime of every sealed state.
const TTL = 5 * time.Minute

// Window returns the validity window of a state issued at now, at the
// millisecond precision every contender keeps.
func Window(now time.Time) (issuedAt, expiresAt time.Time) {
	issuedAt = now.Truncate(time.Millisecond).UTC()
	return issuedAt, issuedAt.Add(TTL)
}

// Opened is what a contender's open returns.
type Opened struct {
	Cont Deploy
	Meta Meta
	Raw  []byte // floor only: the decrypted continuation bytes
}

// errBinding is the error of an open under another binding.
var errBinding = errors.New("bench: token bound to another call")

func newKey() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic(err)
	}
	return k
}

// --- mrtr: what the guard does for a handler's pause and resume. ---

// Mrtr seals with reqstate.AESGCM and encodes the continuation with
// segmentio/encoding/json, the codec mrtr's guard uses for continuations
// (Flow.Pause, mrtr.Decode) and go-sdk uses for all its JSON.
type Mrtr struct{ codec *reqstate.AESGCM }

// NewMrtr returns the reqstate contender with a fresh key.
func NewMrtr() *Mrtr {
	ring, err := reqstate.GenerateKeyRing("2026-11", nil)
	if err != nil {
		panic(err)
	}
	return &Mrtr{codec: reqstate.New(ring, nil)}
}

// Seal marshals the continuation and seals it with the metadata.
func (c *Mrtr) Seal(f *Fixture, now time.Time) (string, error) {
	cont, err := sjson.Marshal(&f.Cont)
	if err != nil {
		return "", err
	}
	m := &f.Meta
	iat, exp := Window(now)
	return c.codec.Seal(f.Binding, &reqstate.State{
		Continuation: cont,
		Round:        m.Round,
		IssuedAt:     iat,
		ExpiresAt:    exp,
		FlowID:       m.FlowID,
		ArgsHash:     m.ArgsHash,
		Asked:        m.Asked,
	})
}

// Open opens token under b and decodes the continuation into out.
func (c *Mrtr) Open(b reqstate.Binding, token string, out *Opened) error {
	st, err := c.codec.Open(b, token)
	if err != nil {
		return err
	}
	if err := sjson.Unmarshal(st.Continuation, &out.Cont); err != nil {
		return err
	}
	out.Meta = Meta{
		Round: st.Round, IssuedAt: st.IssuedAt, ExpiresAt: st.ExpiresAt,
		JTI: st.JTI, FlowID: st.FlowID, ArgsHash: st.ArgsHash, Asked: st.Asked,
	}
	return nil
}

// --- floor: AES-256-GCM + base64url of the same continuation bytes. ---

// Floor is the bare cost: a crypto/rand nonce, AES-256-GCM over the
// pre-marshaled continuation, unpadded base64url; and back. No JSON, no
// metadata, no binding.
type Floor struct{ aead cipher.AEAD }

// NewFloor returns the floor contender with a fresh key.
func NewFloor() *Floor {
	block, err := aes.NewCipher(newKey())
	if err != nil {
		panic(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return &Floor{aead: aead}
}

// Seal encrypts f.ContJSON and encodes it.
func (c *Floor) Seal(f *Fixture, _ time.Time) (string, error) {
	ns := c.aead.NonceSize()
	buf := make([]byte, ns, ns+len(f.ContJSON)+c.aead.Overhead())
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	buf = c.aead.Seal(buf, buf[:ns], f.ContJSON, nil)
	return base64.RawURLEncoding.EncodeToString(buf), nil
}

// Open decodes and decrypts token into out.Raw.
func (c *Floor) Open(_ reqstate.Binding, token string, out *Opened) error {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return err
	}
	ns := c.aead.NonceSize()
	if len(raw) < ns+c.aead.Overhead() {
		return errors.New("bench: short token")
	}
	out.Raw, err = c.aead.Open(raw[ns:ns], raw[:ns], raw[ns:], nil)
	return err
}

// --- the JSON envelope of jose and securecookie ---

// envelope is the JSON payload of the library contenders: the typed
// continuation and the metadata, with the JWT claim names where one
// exists. Bind is set by jose only (securecookie binds the cookie name).
type envelope struct {
	Cont   *Deploy      `json:"c"`
	Round  int          `json:"rnd"`
	Iat    int64        `json:"iat"` // Unix milliseconds
	Exp    int64        `json:"exp"` // Unix milliseconds
	JTI    []byte       `json:"jti"`
	FlowID []byte       `json:"fid"`
	Args   []byte       `json:"ah"`
	Asked  []string     `json:"ask,omitempty"`
	Bind   *bindingJSON `json:"b,omitempty"`
}

type bindingJSON struct {
	Method          string `json:"m"`
	ProtocolVersion string `json:"pv"`
	Target          string `json:"t"`
	ServerID        string `json:"s"`
	Issuer          string `json:"iss,omitempty"`
	Subject         string `json:"sub,omitempty"`
}

func toBindingJSON(b *reqstate.Binding) bindingJSON {
	return bindingJSON{b.Method, b.ProtocolVersion, b.Target, b.ServerID, b.Principal.Issuer, b.Principal.Subject}
}

// newEnvelope fills an envelope from f with a fresh jti.
func newEnvelope(f *Fixture, now time.Time, jti *reqstate.ID) (envelope, error) {
	if _, err := rand.Read(jti[:]); err != nil {
		return envelope{}, err
	}
	m := &f.Meta
	iat, exp := Window(now)
	return envelope{
		Cont:   &f.Cont,
		Round:  m.Round,
		Iat:    iat.UnixMilli(),
		Exp:    exp.UnixMilli(),
		JTI:    jti[:],
		FlowID: m.FlowID[:],
		Args:   m.ArgsHash[:],
		Asked:  m.Asked,
	}, nil
}

// meta converts a decoded envelope back, checking the id lengths.
func (e *envelope) meta() (Meta, error) {
	m := Meta{
		Round:     e.Round,
		IssuedAt:  time.UnixMilli(e.Iat).UTC(),
		ExpiresAt: time.UnixMilli(e.Exp).UTC(),
		Asked:     e.Asked,
	}
	if len(e.JTI) != len(m.JTI) || len(e.FlowID) != len(m.FlowID) || len(e.Args) != len(m.ArgsHash) {
		return Meta{}, errors.New("bench: bad id length")
	}
	copy(m.JTI[:], e.JTI)
	copy(m.FlowID[:], e.FlowID)
	copy(m.ArgsHash[:], e.Args)
	return m, nil
}

// --- jose: JWE compact serialization, dir + A256GCM. ---

// Jose seals with go-jose v4 JWE (alg dir, enc A256GCM). JWE compact
// serialization has no external associated data, so the binding travels
// in the encrypted payload and Open compares it with the request's.
type Jose struct {
	key  []byte
	enc  jose.Encrypter
	algs []jose.KeyAlgorithm      // accepted on open: dir only
	encs []jose.ContentEncryption // accepted on open: A256GCM only
}

// NewJose returns the jose contender with a fresh key.
func NewJose() *Jose {
	key := newKey()
	enc, err := jose.NewEncrypter(jose.A256GCM, jose.Recipient{Algorithm: jose.DIRECT, Key: key}, nil)
	if err != nil {
		panic(err)
	}
	return &Jose{key: key, enc: enc,
		algs: []jose.KeyAlgorithm{jose.DIRECT}, encs: []jose.ContentEncryption{jose.A256GCM}}
}

// Seal marshals the envelope (with the binding) and encrypts it.
func (c *Jose) Seal(f *Fixture, now time.Time) (string, error) {
	var jti reqstate.ID
	env, err := newEnvelope(f, now, &jti)
	if err != nil {
		return "", err
	}
	bind := toBindingJSON(&f.Binding)
	env.Bind = &bind
	payload, err := json.Marshal(&env)
	if err != nil {
		return "", err
	}
	obj, err := c.enc.Encrypt(payload)
	if err != nil {
		return "", err
	}
	return obj.CompactSerialize()
}

// Open decrypts token, decodes the envelope and checks the binding.
func (c *Jose) Open(b reqstate.Binding, token string, out *Opened) error {
	obj, err := jose.ParseEncrypted(token, c.algs, c.encs)
	if err != nil {
		return err
	}
	payload, err := obj.Decrypt(c.key)
	if err != nil {
		return err
	}
	env := envelope{Cont: &out.Cont}
	if err := json.Unmarshal(payload, &env); err != nil {
		return err
	}
	if env.Bind == nil || *env.Bind != toBindingJSON(&b) {
		return errBinding
	}
	out.Meta, err = env.meta()
	return err
}

// --- securecookie: HMAC-SHA256 + AES-256-CTR, JSON encoder. ---

// Cookie seals with gorilla/securecookie (hash key and AES-256 block key,
// JSONEncoder). The binding is the cookie name, which securecookie puts
// under its MAC; bindingName encodes it unambiguously.
type Cookie struct{ sc *securecookie.SecureCookie }

// NewCookie returns the securecookie contender with fresh keys.
func NewCookie() *Cookie {
	sc := securecookie.New(newKey(), newKey()).
		SetSerializer(securecookie.JSONEncoder{}).
		MaxAge(int(TTL.Seconds()))
	return &Cookie{sc: sc}
}

// bindingName encodes b as a cookie name: each field prefixed by its
// length, so no two bindings share a name, and the anonymous principal
// distinct from every identified one.
func bindingName(b *reqstate.Binding) string {
	buf := make([]byte, 0, 64+len(b.Method)+len(b.ProtocolVersion)+len(b.Target)+
		len(b.ServerID)+len(b.Principal.Issuer)+len(b.Principal.Subject))
	field := func(s string) {
		buf = strconv.AppendInt(buf, int64(len(s)), 10)
		buf = append(buf, ':')
		buf = append(buf, s...)
	}
	field(b.Method)
	field(b.ProtocolVersion)
	field(b.Target)
	field(b.ServerID)
	if b.Principal.Anonymous() {
		buf = append(buf, 'a')
	} else {
		buf = append(buf, 'p')
		field(b.Principal.Issuer)
		field(b.Principal.Subject)
	}
	return string(buf)
}

// Seal encodes the envelope under the binding's name.
func (c *Cookie) Seal(f *Fixture, now time.Time) (string, error) {
	var jti reqstate.ID
	env, err := newEnvelope(f, now, &jti)
	if err != nil {
		return "", err
	}
	return c.sc.Encode(bindingName(&f.Binding), &env)
}

// Open decodes token under the binding's name.
func (c *Cookie) Open(b reqstate.Binding, token string, out *Opened) error {
	env := envelope{Cont: &out.Cont}
	if err := c.sc.Decode(bindingName(&b), token, &env); err != nil {
		return err
	}
	var err error
	out.Meta, err = env.meta()
	return err
}

// Contender is one way to seal and open the fixture.
type Contender interface {
	Seal(f *Fixture, now time.Time) (string, error)
	Open(b reqstate.Binding, token string, out *Opened) error
}

// Named is a contender and its sub-benchmark name.
type Named struct {
	Name string
	C    Contender
}

// Contenders returns the contenders in report order, each with fresh keys.
func Contenders() []Named {
	return []Named{
		{"mrtr", NewMrtr()},
		{"floor", NewFloor()},
		{"jose", NewJose()},
		{"securecookie", NewCookie()},
	}
}
