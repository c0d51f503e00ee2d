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
	taskLabel = "mrtr.audit/v1 task digest"
)

// derived are the keys the trail uses under one ring key: the line MAC
// key, the arguments digest key and the task digest key, each
// HKDF-SHA256 of the ring key's secret with its own label, so that none
// is the key that seals tokens and none reveals another.
type derived struct {
	kid  string
	line []byte
	args []byte
	task []byte
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
	task, err := hkdf.Key(sha256.New, k.Secret[:], nil, taskLabel, sha256.Size)
	if err != nil {
		panic("audit: hkdf: " + err.Error())
	}
	return &derived{kid: k.ID, line: line, args: args, task: task}
}

// macs is a derived key set with its HMACs, reused under the Writer's
// lock.
type macs struct {
	*derived
	line hash.Hash
	args hash.Hash
	task hash.Hash
	sum  [sha256.Size]byte

	// The last digest made, for the next line of the same flow.
	lastHash   reqstate.Hash
	lastDigest string
}

func newMacs(d *derived) *macs {
	return &macs{derived: d, line: hmac.New(sha256.New, d.line), args: hmac.New(sha256.New, d.args),
		task: hmac.New(sha256.New, d.task)}
}

// taskDigest returns "hmac-sha256:" and the base64url MAC of a task id
// under the task key: the lines of one task compare equal (under one
// ring key), and the id, a bearer capability for an anonymous caller,
// cannot be read back or confirmed without the ring.
func (m *macs) taskDigest(id string) string {
	m.task.Reset()
	m.task.Write([]byte(id))
	var buf [len("hmac-sha256:") + 43]byte
	d := append(buf[:0], "hmac-sha256:"...)
	return string(base64.RawURLEncoding.AppendEncode(d, m.task.Sum(m.sum[:0])))
}

// argsDigest returns "hmac-sha256:" and the base64url MAC of the
// arguments hash (SHA-256 of their RFC 8785 form) under the args key.
// The lines of one flow carry the same digest: the last one is kept.
func (m *macs) argsDigest(h reqstate.Hash) string {
	if m.lastDigest != "" && h == m.lastHash {
		return m.lastDigest
	}
	m.args.Reset()
	m.args.Write(h[:])
	var buf [len("hmac-sha256:") + 43]byte
	d := append(buf[:0], "hmac-sha256:"...)
	d = base64.RawURLEncoding.AppendEncode(d, m.args.Sum(m.sum[:0]))
	m.lastHash, m.lastDigest = h, string(d)
	return m.lastDigest
}

// lineMAC appends the base64url MAC of a line's MACed bytes.
func (m *macs) lineMAC(dst, b []byte) []byte {
	m.line.Reset()
	m.line.Write(b)
	return base64.RawURLEncoding.AppendEncode(dst, m.line.Sum(m.sum[:0]))
}

// LinkOf returns the prev of the line after b: the base64url SHA-256 of
// b's bytes, without its newline.
func LinkOf(b []byte) string { return linkOf(b) }

func linkOf(b []byte) string {
	l := appendLink(nil, b)
	return string(l)
}

// appendLink appends the link to the line b.
func appendLink(dst, b []byte) []byte {
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.AppendEncode(dst, sum[:])
}
