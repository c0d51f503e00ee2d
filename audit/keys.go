package audit

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"

	"github.com/mrtr-go/mrtr/reqstate"
)

// The HKDF info labels of the two keys derived from each ring key. They
// are fixed: a label change would make every existing trail fail to
// verify, so it goes with a new Schema.
const (
	lineLabel = "mrtr.audit/v1 line mac"
	argsLabel = "mrtr.audit/v1 args digest"
)

// derived are the keys the trail uses under one ring key: the line MAC
// key and the arguments digest key, each HKDF-SHA256 of the ring key's
// secret with its own label, so that neither is the key that seals
// tokens and neither reveals the other.
type derived struct {
	kid  string
	line []byte
	args []byte
}

func derive(k reqstate.Key) *derived {
	line, err := hkdf.Key(sha256.New, k.Secret[:], nil, lineLabel, sha256.Size)
	if err != nil {
		panic("audit: hkdf: " + err.Error()) // only for an output longer than HKDF allows
	}
	args, err := hkdf.Key(sha256.New, k.Secret[:], nil, argsLabel, sha256.Size)
	if err != nil {
		panic("audit: hkdf: " + err.Error())
	}
	return &derived{kid: k.ID, line: line, args: args}
}

// macs is a derived key set with its HMACs, reused under the Writer's
// lock.
type macs struct {
	*derived
	line hash.Hash
	args hash.Hash
}

func newMacs(d *derived) *macs {
	return &macs{derived: d, line: hmac.New(sha256.New, d.line), args: hmac.New(sha256.New, d.args)}
}

// argsDigest appends "hmac-sha256:" and the base64url MAC of the
// arguments hash (SHA-256 of their RFC 8785 form) under the args key.
func (m *macs) argsDigest(dst []byte, h reqstate.Hash) []byte {
	m.args.Reset()
	m.args.Write(h[:])
	var sum [sha256.Size]byte
	dst = append(dst, "hmac-sha256:"...)
	return base64.RawURLEncoding.AppendEncode(dst, m.args.Sum(sum[:0]))
}

// lineMAC returns the base64url MAC of a line's MACed bytes.
func (m *macs) lineMAC(dst, b []byte) []byte {
	m.line.Reset()
	m.line.Write(b)
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.AppendEncode(dst, m.line.Sum(sum[:0]))
}

// LinkOf returns the prev of the line after b: the base64url SHA-256 of
// b's bytes, without its newline.
func LinkOf(b []byte) string { return linkOf(b) }

func linkOf(b []byte) string {
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
